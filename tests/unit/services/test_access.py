"""The access rules (scopes, delegation, tenants) without servers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from scheduler.cli.durations import parse_duration
from scheduler.cli.errors import CliError
from scheduler.services.access import (
    Principal,
    implied,
    listed_tenant,
    require_scope,
    require_within,
    tenant_of_new_job,
)
from scheduler.services.errors import Forbidden

NOW = datetime(2030, 1, 1, tzinfo=UTC)
ADMIN = Principal("admin", frozenset({"job"}))
BOUND = Principal("t", frozenset({"job.read", "job.task"}), "acme", NOW + timedelta(days=1))


def test_job_implies_every_scope_and_the_narrow_ones_nothing_else() -> None:
    assert implied({"job"}) == {"job", "job.read", "job.task"}
    assert implied({"job.read"}) == {"job.read"}
    assert implied({"job.task"}) == {"job.task"}


def test_a_scope_check_passes_on_any_of_the_scopes_and_names_them_otherwise() -> None:
    require_scope(BOUND, ("job.task", "job"))
    require_scope(ADMIN, ("job.read",))
    with pytest.raises(Forbidden, match="needs scope 'job'; the token has 'job.read', 'job.task'"):
        require_scope(BOUND, ("job",))


def test_a_narrower_token_is_allowed_and_each_excess_is_named() -> None:
    require_within(BOUND, ["job.read"], "acme", NOW)
    require_within(ADMIN, ["job", "job.task"], None, None)
    with pytest.raises(Forbidden) as refused:
        require_within(BOUND, ["job"], "globex", None)
    message = str(refused.value)
    assert "scope 'job'" in message
    assert "tenant 'globex': the token is bound to tenant 'acme'" in message
    assert "expiry after the token's own" in message


def test_a_bound_token_creates_and_lists_in_its_own_tenant_only() -> None:
    assert tenant_of_new_job(BOUND, "") == "acme"
    assert tenant_of_new_job(BOUND, "acme") == "acme"
    assert tenant_of_new_job(ADMIN, "anyone") == "anyone"
    assert listed_tenant(BOUND, None) == "acme"
    assert listed_tenant(ADMIN, None) is None
    with pytest.raises(Forbidden, match="cannot create a job of tenant 'globex'"):
        tenant_of_new_job(BOUND, "globex")
    with pytest.raises(Forbidden, match="cannot list tenant 'globex'"):
        listed_tenant(BOUND, "globex")


@pytest.mark.parametrize(
    ("text", "expected"),
    [("30d", timedelta(days=30)), ("12h", timedelta(hours=12)), ("2w", timedelta(weeks=2)),
     ("90m", timedelta(minutes=90)), ("5s", timedelta(seconds=5))],
)
def test_cli_expiry_durations(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["", "30", "d", "0d", "1.5d", "-1d", "3y"])
def test_cli_expiry_durations_that_make_no_sense_are_refused(text: str) -> None:
    with pytest.raises(CliError, match="--expires-in"):
        parse_duration(text)
