"""Array literals (``common.persistence.arrays``) read back by PostgreSQL as what was sent."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from common.persistence.arrays import literal
from common.persistence.json_text import json_text


@pytest.fixture(scope="module")
def conn(database_url: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(database_url, autocommit=True) as connection:
        yield connection


def round_trip(conn: psycopg.Connection[Any], values: list[Any], sql_type: str) -> list[Any]:
    rows = conn.execute(f"SELECT v FROM unnest(%b::{sql_type}[]) WITH ORDINALITY AS u(v, n) "
                        "ORDER BY n", (literal(values),)).fetchall()
    return [row[0] for row in rows]


@settings(max_examples=200, deadline=None)
# Text PostgreSQL can hold: no NUL, and no lone surrogates, which are no UTF-8 at all.
@given(st.lists(st.none() | st.text(alphabet=st.characters(
    exclude_characters="\x00", exclude_categories=["Cs"]))))
def test_any_text_reads_back_as_sent(conn: psycopg.Connection[Any], values: list[Any]) -> None:
    assert round_trip(conn, values, "text") == values


def test_each_kind_of_element_reads_back_as_sent(conn: psycopg.Connection[Any]) -> None:
    ids = [uuid.uuid4(), None, uuid.uuid4()]
    assert round_trip(conn, ids, "uuid") == ids
    assert round_trip(conn, [0, -7, 2**62, None], "bigint") == [0, -7, 2**62, None]
    assert round_trip(conn, [1.5, float("inf"), -0.25], "float8") == [1.5, float("inf"), -0.25]
    assert round_trip(conn, [True, False, None], "bool") == [True, False, None]
    berlin = timezone(timedelta(hours=1))
    times = [datetime(2026, 11, 26, 10, 0, 0, 123456, tzinfo=UTC),
             datetime(2026, 3, 29, 2, 30, tzinfo=berlin)]
    assert round_trip(conn, times, "timestamptz") == times
    assert round_trip(conn, ['{"a": [1, "x\\"y"]}'], "jsonb") == [{"a": [1, 'x"y']}]
    assert round_trip(conn, [], "uuid") == []


def test_a_value_it_cannot_represent_is_refused() -> None:
    with pytest.raises(TypeError, match="naive datetime"):
        literal([datetime(2026, 1, 1, tzinfo=UTC).replace(tzinfo=None)])
    with pytest.raises(TypeError, match="no array literal for timedelta"):
        literal([timedelta(seconds=1)])
    with pytest.raises(TypeError, match="no array literal for list"):
        literal([[1, 2]])


def test_the_same_time_cached_reads_back_as_the_same_instant(
    conn: psycopg.Connection[Any],
) -> None:
    """The cache of times' text keys on equality: an equal time in another offset may
    be sent as the first one's text, which PostgreSQL reads as the same instant."""
    at = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
    elsewhere = at.astimezone(timezone(timedelta(hours=-5)))
    assert round_trip(conn, [at, elsewhere, at], "timestamptz") == [at, at, at]


def test_json_text_is_stored_as_json_would_store_it(conn: psycopg.Connection[Any]) -> None:
    """orjson's text, and ``json``'s for what orjson refuses, become the same ``jsonb``."""
    values: list[Any] = [{"a": [1, "x\"y", None, 1.5], "ü": {"n": -3}}, {"big": 2**70},
                         {1: "an int key"}, "plain", []]
    texts = [json_text(value) for value in values]
    stored = round_trip(conn, texts, "jsonb")
    assert stored == [json.loads(json.dumps(value)) for value in values]
