import pytest

from workers.context import TaskContext
from workers.invoke import invoke
from workers.outcomes import Accepted, Completed, Failed, Outcome, Rejected
from workers.registry import Registry, UnknownTaskTypeError, default_registry, processor


def test_register_get_and_types() -> None:
    registry = Registry()

    @registry.processor("backup")
    def backup(ctx: TaskContext) -> Completed:
        return Completed({"ok": True})

    registry.register("noop", lambda ctx: None)
    assert registry.get("backup") is backup
    assert registry.types() == ["backup", "noop"]
    assert "backup" in registry
    assert "restore" not in registry


def test_unknown_type_names_the_registered_ones() -> None:
    registry = Registry()
    registry.register("backup", lambda ctx: None)
    with pytest.raises(UnknownTaskTypeError, match="'restore'.*registered: backup"):
        registry.get("restore")
    with pytest.raises(UnknownTaskTypeError, match="restore, x"):
        registry.require(["backup", "restore", "x"])
    registry.require(["backup"])


def test_a_second_processor_for_a_type_is_an_error() -> None:
    def first(ctx: TaskContext) -> None:
        return None

    def second(ctx: TaskContext) -> None:
        return None

    registry = Registry()
    registry.register("backup", first)
    with pytest.raises(ValueError, match="taken by .*first"):
        registry.register("backup", second)


def test_the_same_function_defined_again_replaces_the_first() -> None:
    registry = Registry()

    def make() -> object:
        def backup(ctx: TaskContext) -> None:
            return None

        return backup

    first, second = make(), make()
    registry.register("backup", first)  # type: ignore[arg-type]
    registry.register("backup", second)  # type: ignore[arg-type]
    assert registry.get("backup") is second


@pytest.mark.parametrize("bad", ["", "has space", "1st", "a/b"])
def test_task_types_must_be_identifiers(bad: str) -> None:
    with pytest.raises(ValueError, match="not an identifier"):
        Registry().register(bad, lambda ctx: None)


def test_the_decorator_registers_in_the_default_registry() -> None:
    @processor("unit-test.default-registry")
    def handler(ctx: TaskContext) -> None:
        return None

    assert default_registry.get("unit-test.default-registry") is handler


def test_an_exception_is_a_failure_with_its_text_and_traceback_in_the_log() -> None:
    def broken(ctx: TaskContext) -> None:
        raise RuntimeError("disk full")

    ctx = TaskContext()
    assert invoke(broken, ctx) == Failed("RuntimeError: disk full")
    lines = [line.line for line in ctx.logs.drain()]
    assert lines[0].startswith("Traceback")
    assert lines[-1] == "RuntimeError: disk full"


def test_none_is_completed_and_outcomes_pass_through() -> None:
    ctx = TaskContext()
    assert invoke(lambda c: None, ctx) == Completed({})
    for outcome in (Completed({"a": 1}), Failed("x"), Rejected("no"), Accepted()):

        def passes_through(c: TaskContext, o: Outcome = outcome) -> Outcome:
            return o

        assert invoke(passes_through, ctx) == outcome


def test_a_value_that_is_no_outcome_is_a_failure() -> None:
    outcome = invoke(lambda c: {"a": 1}, TaskContext())  # type: ignore[arg-type,return-value]
    assert outcome == Failed("processor returned dict, not an outcome")
