"""Loading job spec files: what is accepted, and one-line errors for what is not."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.cli.errors import CliError
from scheduler.cli.specfile import load_job_spec


def error_of(path: Path) -> str:
    with pytest.raises(CliError) as caught:
        load_job_spec(path)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_yaml_and_json_specs_load_as_mappings(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("name: a\ntasks:\n  - {name: t, type: noop}\n")
    (tmp_path / "b.json").write_text('{"name": "b", "tasks": [{"name": "t", "type": "noop"}]}')
    assert load_job_spec(tmp_path / "a.yaml")["tasks"] == [{"name": "t", "type": "noop"}]
    assert load_job_spec(tmp_path / "b.json")["name"] == "b"


def test_broken_yaml_names_the_line_and_column(tmp_path: Path) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text("name: x\ntasks:\n  - name: a\n   type: noop\n")
    message = error_of(spec)
    assert message.startswith(f"{spec}: invalid YAML at line 4, column ")


def test_broken_json_names_the_line_and_column(tmp_path: Path) -> None:
    spec = tmp_path / "job.json"
    spec.write_text('{"name": "x",\n "tasks": [}\n')
    assert error_of(spec) == f"{spec}: invalid JSON at line 2, column 12: Expecting value"


@pytest.mark.parametrize(
    ("text", "found"), [("", "an empty file"), ("- a\n- b\n", "a list"), ("42\n", "a int")]
)
def test_a_spec_must_be_a_mapping(tmp_path: Path, text: str, found: str) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text(text)
    assert error_of(spec) == f"{spec}: a job spec must be a mapping, found {found}"


def test_a_missing_file_is_reported(tmp_path: Path) -> None:
    spec = tmp_path / "nope.yaml"
    assert error_of(spec) == f"cannot read {spec}: No such file or directory"
