import pytest
from pydantic import ValidationError

from common.domain.spec import JobSpec


def error_of(**spec: object) -> str:
    with pytest.raises(ValidationError) as error:
        JobSpec(**spec)
    return str(error.value)


@pytest.mark.parametrize(("tasks", "needle"), [
    ([{"name": "a", "type": "noop", "next": ["b"]}, {"name": "b", "type": "noop", "next": ["a"]}],
     "cycle"),
    ([{"name": "a", "type": "noop", "next": ["ghost"]}], "'ghost'"),
    ([{"name": "a", "type": "noop"}, {"name": "a", "type": "noop"}], "task 'a'"),
    ([{"name": "a", "type": "not a type"}], "not an identifier"),
    ([{"name": "a"}], "type"),
    ([{"name": "a", "type": "noop", "params": [1]}], "params"),
    ([], "tasks"),
])
def test_bad_graphs_are_refused_naming_the_task(tasks: list[object], needle: str) -> None:
    assert needle in error_of(name="j", tasks=tasks)


def test_threshold_out_of_range_names_the_field() -> None:
    assert "failure_threshold" in error_of(
        name="j", tasks=[{"name": "a", "type": "noop"}], failure_threshold=1.5
    )


def test_at_without_offset_is_refused() -> None:
    assert "offset" in error_of(
        name="j", tasks=[{"name": "a", "type": "noop"}], schedule={"at": "2027-01-01T10:00:00"}
    )
