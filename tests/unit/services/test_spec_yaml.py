"""YAML job specs turned into JSON for the web UI's submit form (pure)."""

from __future__ import annotations

import json
import time

import pytest

from scheduler.services.errors import InvalidInput
from scheduler.services.job_queries import like_escaped
from scheduler.services.spec_yaml import MAX_DEPTH, spec_from_yaml


def test_dates_become_iso_strings_and_keys_json_spellings() -> None:
    spec = spec_from_yaml("at: 2030-01-01T10:00:00+01:00\nday: 2030-01-02\n2: x\n"
                          "true: y\nnull: z\n2030-01-03: w\n")
    assert spec == {"at": "2030-01-01T10:00:00+01:00", "day": "2030-01-02", "2": "x",
                    "true": "y", "null": "z", "2030-01-03": "w"}
    json.dumps(spec)  # nothing left that JSON cannot write


def test_order_and_nesting_are_kept() -> None:
    spec = spec_from_yaml("b: 1\na: [{x: [1, 2.5, null, true]}, []]\n")
    assert list(spec) == ["b", "a"]
    assert spec["a"] == [{"x": [1, 2.5, None, True]}, []]


def test_deep_nesting_is_refused_at_once() -> None:
    """PyYAML's time grows with the square of the depth: 3,000 levels took 5 s."""
    depth = 100_000
    started = time.monotonic()
    with pytest.raises(InvalidInput, match=f"nested deeper than {MAX_DEPTH} levels"):
        spec_from_yaml("a: " + "[" * depth + "]" * depth + "\n")
    assert time.monotonic() - started < 10  # generous: unrefused, this would take hours
    nested = "a: " + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1) + "\n"  # with the mapping
    assert spec_from_yaml(nested)["a"]


@pytest.mark.parametrize(("text", "fault"), [
    ("? !!binary aGk=\n: 1\n", "a mapping key must be a plain value"),
    ("x: !!set {a, b}\n", "a set cannot be written as JSON"),
    ("x: -.inf\n", "not a number JSON can hold"),
    ("x: &a 1\ny: *a\n", "aliases are not accepted"),
    ("just text\n", "found a str"),
    ("x: {a: 1\n", "invalid YAML at line 2"),
])
def test_what_json_cannot_hold_is_refused_naming_it(text: str, fault: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        spec_from_yaml(text)
    assert fault in refused.value.msg
    assert refused.value.loc[0] == "body"


def test_like_patterns_match_their_text_literally() -> None:
    assert like_escaped("50%_off\\") == "50\\%\\_off\\\\"
    assert like_escaped("plain") == "plain"
