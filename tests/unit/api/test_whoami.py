"""``GET /whoami``'s body: what a token may do, never its value (pure)."""

from __future__ import annotations

from datetime import UTC, datetime

from scheduler.api.routes.whoami import WhoAmIPublic
from scheduler.api.web_ui import render_index
from scheduler.services.access import Principal


def test_rights_include_what_the_scopes_imply() -> None:
    admin = WhoAmIPublic.of(Principal(name="admin", scopes=frozenset({"job"})))
    assert admin.scopes == ["job"] and admin.rights == ["job", "job.read", "job.task"]
    assert admin.tenant is None


def test_a_narrow_bound_token_is_shown_as_it_is() -> None:
    expires = datetime(2031, 1, 1, tzinfo=UTC)
    reader = WhoAmIPublic.of(Principal(
        name="token:ci", scopes=frozenset({"job.read", "job.task"}), tenant="acme",
        expires_at=expires,
    ))
    assert reader.model_dump() == {
        "name": "token:ci", "scopes": ["job.read", "job.task"],
        "rights": ["job.read", "job.task"], "tenant": "acme", "expires_at": expires,
    }


def test_the_page_gets_its_locations_escaped() -> None:
    page = render_index(b'<meta content="%%API_BASE%%"><script src="%%UI_BASE%%/m.js">',
                        '/a"b', '/a"b/api/v1').decode()
    assert page == '<meta content="/a&quot;b/api/v1"><script src="/a&quot;b/ui/m.js">'
