"""Durations on the command line (``--older-than``, ``--expires-in``)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from scheduler.cli.durations import parse_duration
from scheduler.cli.errors import CliError


def test_prune_ages_may_be_zero_token_lifetimes_may_not() -> None:
    assert parse_duration("0s", "--older-than", zero=True) == timedelta(0)
    assert parse_duration("7d", "--older-than", zero=True) == timedelta(days=7)
    with pytest.raises(CliError, match="--expires-in: expected a positive number"):
        parse_duration("0s")


def test_a_bad_duration_names_its_option() -> None:
    with pytest.raises(CliError, match="--older-than: expected a number and a unit"):
        parse_duration("7", "--older-than", zero=True)
