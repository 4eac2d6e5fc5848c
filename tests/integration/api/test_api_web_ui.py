"""What the web UI needs from the API (issue 6): its files, /whoami, searching jobs by
name, and YAML specs turned into JSON. Against the real API and PostgreSQL."""

from __future__ import annotations

import re
import uuid

import httpx2
from fastapi.testclient import TestClient

from common.config import Settings
from scheduler.api.app import create_app
from scheduler.api.web_ui import load_assets
from tests.integration.api.conftest import JobBody
from tests.integration.api.test_api_tokens import BASE, bearer, create_job, mint

# -- the page and its files


def test_the_page_loads_the_ui_files_and_each_is_served(anonymous: TestClient) -> None:
    page = anonymous.get("/")
    assert page.headers["content-type"].startswith("text/html")
    assert '<meta name="stellwerk-api" content="/api/v1">' in page.text
    used = re.findall(r'(?:src|href)="(/ui/[^"]+)"', page.text)
    assert set(used) == {"/ui/main.js", "/ui/app.css"}
    for name in sorted(set(load_assets()) - {"index.html"}):
        response = anonymous.get(f"/ui/{name}")
        assert response.status_code == 200, name
        expected = "text/javascript" if name.endswith(".js") else "text/css"
        assert response.headers["content-type"].startswith(expected), name


def test_every_module_the_ui_imports_is_shipped() -> None:
    """An import of a missing file would break the page only in a browser: caught here."""
    assets = load_assets()
    for name, asset in assets.items():
        for imported in re.findall(r'from "\./([^"]+)"', asset.body.decode()):
            assert imported in assets, f"{name} imports {imported}, which is not shipped"


def test_a_file_not_shipped_is_404_and_paths_never_reach_the_disk(
    anonymous: TestClient,
) -> None:
    for path in ("/ui/nothing.js", "/ui/..%2F__init__.py", "/ui/%2e%2e%2fapp.py"):
        assert anonymous.get(path).status_code == 404, path


def test_an_unchanged_file_is_answered_304(anonymous: TestClient) -> None:
    first = anonymous.get("/ui/main.js")
    again = anonymous.get("/ui/main.js", headers={"If-None-Match": first.headers["etag"]})
    assert again.status_code == 304 and again.content == b""
    assert first.headers["cache-control"] == "no-cache"


def test_the_ui_follows_the_path_prefix(api_settings: Settings) -> None:
    prefixed = api_settings.model_copy(update={"path_prefix": "/stellwerk/"})
    with TestClient(create_app(prefixed)) as client:
        page = client.get("/stellwerk/")
        assert '<meta name="stellwerk-api" content="/stellwerk/api/v1">' in page.text
        assert 'src="/stellwerk/ui/main.js"' in page.text
        assert client.get("/stellwerk/ui/main.js").status_code == 200
        assert client.get("/ui/main.js").status_code == 404


# -- GET /whoami


def test_whoami_tells_the_admin_it_may_do_everything(client: TestClient) -> None:
    body = client.get(f"{BASE}/whoami").json()
    assert body == {"name": "admin", "scopes": ["job"],
                    "rights": ["job", "job.read", "job.task"], "tenant": None,
                    "expires_at": None}


def test_whoami_answers_any_token_about_itself_and_nothing_secret(client: TestClient) -> None:
    created = mint(client, name="ui-tasker", scopes=["job.task"], tenant="acme-ui")
    response = client.get(f"{BASE}/whoami", headers=bearer(created["token"]))
    assert response.status_code == 200  # job.task may read nothing else, but this
    body = response.json()
    assert body["name"] == "token:ui-tasker" and body["rights"] == ["job.task"]
    assert body["tenant"] == "acme-ui"
    assert created["token"] not in response.text


def test_whoami_without_a_valid_token_is_401(anonymous: TestClient) -> None:
    assert anonymous.get(f"{BASE}/whoami").status_code == 401
    assert anonymous.get(f"{BASE}/whoami", headers=bearer("stw_nope")).status_code == 401


# -- GET /jobs?name=


def test_jobs_are_found_by_a_part_of_the_name_in_any_case(
    client: TestClient, job_body: JobBody,
) -> None:
    tag = uuid.uuid4().hex[:8]
    names = [f"Nightly-{tag}-backup", f"nightly-{tag}-report", f"weekly-{tag}", f"x%_{tag}"]
    for name in names:
        assert create_job(client, job_body(name=name)).status_code == 201

    def found(part: str, **extra: str | int) -> list[str]:
        response = client.get(f"{BASE}/jobs", params={"name": part, **extra})
        assert response.status_code == 200, response.text
        return [job["name"] for job in response.json()["data"]]

    assert found(f"NIGHTLY-{tag}") == [names[1], names[0]]  # newest first
    assert found(f"%_{tag}") == [names[3]]  # LIKE's wildcards are plain characters here
    assert found(f"_{tag}") == [names[3]]
    assert found(f"{tag}-nothing") == []


def test_a_name_search_pages_without_gaps(client: TestClient, job_body: JobBody) -> None:
    tag = uuid.uuid4().hex[:8]
    for i in range(5):
        create_job(client, job_body(name=f"paged-{tag}-{i}"))
    seen: list[str] = []
    cursor = None
    while True:
        params: dict[str, str | int] = {"name": tag, "limit": 2,
                                        **({"cursor": cursor} if cursor else {})}
        page = client.get(f"{BASE}/jobs", params=params).json()
        seen += [job["name"] for job in page["data"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [f"paged-{tag}-{i}" for i in reversed(range(5))]


def test_a_too_long_name_search_is_422_naming_it(client: TestClient) -> None:
    response = client.get(f"{BASE}/jobs", params={"name": "x" * 201})
    assert response.status_code == 422
    assert "name" in response.json()["detail"]


# -- POST /job-specs/yaml

YAML_SPEC = """\
name: from-yaml
schedule: {at: 2030-01-01T10:00:00+01:00}
tasks:
  - name: hi
    type: shell
    params: {argv: [echo, "hi: there"]}
"""


def yaml_post(client: TestClient, text: str | bytes, token: str | None = None) -> httpx2.Response:
    headers = {"Content-Type": "application/yaml", **(bearer(token) if token else {})}
    return client.post(f"{BASE}/job-specs/yaml", content=text, headers=headers)


def test_a_yaml_spec_comes_back_as_json_that_post_jobs_takes(client: TestClient) -> None:
    response = yaml_post(client, YAML_SPEC)
    assert response.status_code == 200, response.text
    spec = response.json()
    assert spec["schedule"] == {"at": "2030-01-01T10:00:00+01:00"}
    assert spec["tasks"][0]["params"] == {"argv": ["echo", "hi: there"]}
    assert create_job(client, spec).status_code == 201


def test_bad_yaml_is_422_saying_where(client: TestClient) -> None:
    cases = {
        "name: [unclosed\n": "invalid YAML at line 2",
        "- just\n- a list\n": "must be a mapping, found a list",
        "base: &b {x: 1}\nother: *b\n": "aliases are not accepted (*b at line 2)",
        "n: .nan\n": "not a number JSON can hold",
        "data: !!binary aGk=\n": "bytes cannot be written as JSON",
        "": "found an empty document",
    }
    for text, message in cases.items():
        response = yaml_post(client, text)
        assert response.status_code == 422, text
        assert message in response.json()["detail"], response.json()
    response = yaml_post(client, b"name: \xff\n")
    assert response.status_code == 422
    assert "not UTF-8" in response.json()["detail"]


def test_converting_yaml_needs_the_job_scope(client: TestClient) -> None:
    reader = mint(client, scopes=["job.read"])["token"]
    response = yaml_post(client, YAML_SPEC, token=reader)
    assert response.status_code == 403
