import threading
import time

import pytest

from workers.builtin.noop import noop
from workers.builtin.python import FunctionRegistry, make_python_processor, python_function
from workers.builtin.sleep import sleep
from workers.context import TaskContext
from workers.invoke import invoke
from workers.outcomes import Completed, Failed, Rejected
from workers.registry import default_registry


def test_importing_the_package_registers_every_builtin_type() -> None:
    import workers.builtin  # noqa: F401

    assert {"noop", "sleep", "python", "shell"} <= set(default_registry.types())


def test_noop_completes() -> None:
    assert noop(TaskContext()) == Completed({})


def test_sleep_completes_after_its_seconds() -> None:
    began = time.monotonic()
    assert sleep(TaskContext(params={"seconds": 0.05})) == Completed({"slept_s": 0.05})
    assert time.monotonic() - began >= 0.05


def test_sleep_ends_when_cancelled() -> None:
    ctx = TaskContext(params={"seconds": 60})
    threading.Timer(0.05, ctx.cancel).start()
    began = time.monotonic()
    outcome = sleep(ctx)
    assert time.monotonic() - began < 5
    assert outcome == Failed("canceled before 60 s had passed")


@pytest.mark.parametrize(("seconds", "fault"), [
    (-1, "greater than or equal to 0"), ("10", "must be a number, not str"),
    (None, "must be a number, not NoneType"), (True, "must be a number, not bool"),
])
def test_sleep_rejects_bad_seconds(seconds: object, fault: str) -> None:
    """A job stored before params were checked at submit still fails with the reason."""
    outcome = sleep(TaskContext(params={"seconds": seconds}))
    assert isinstance(outcome, Failed)
    assert outcome.message.startswith("params.seconds: ")
    assert fault in outcome.message


@pytest.fixture
def functions() -> FunctionRegistry:
    registry = FunctionRegistry()

    @registry.function("add")
    def add(ctx: TaskContext, a: int, b: int) -> dict[str, int]:
        ctx.log(f"adding {a} and {b}")
        return {"sum": a + b}

    registry.register("nothing", lambda ctx: None)
    registry.register("scalar", lambda ctx: 42)
    registry.register("refuse", lambda ctx: Rejected("not today"))
    registry.register("attempt", lambda ctx: {"key": ctx.idempotency_key})
    return registry


def test_python_calls_the_named_function_with_kwargs_and_the_context(
    functions: FunctionRegistry,
) -> None:
    run = make_python_processor(functions)
    ctx = TaskContext(params={"function": "add", "kwargs": {"a": 2, "b": 3}})
    assert run(ctx) == Completed({"sum": 5})
    assert [line.line for line in ctx.logs.drain()] == ["adding 2 and 3"]
    ctx = TaskContext(params={"function": "attempt"})
    assert run(ctx) == Completed({"key": ctx.idempotency_key})


def test_python_return_values(functions: FunctionRegistry) -> None:
    run = make_python_processor(functions)
    assert run(TaskContext(params={"function": "nothing"})) == Completed({})
    assert run(TaskContext(params={"function": "scalar"})) == Completed({"result": 42})
    assert run(TaskContext(params={"function": "refuse"})) == Rejected("not today")


def test_python_unknown_function_and_bad_kwargs(functions: FunctionRegistry) -> None:
    run = make_python_processor(functions)
    outcome = run(TaskContext(params={"function": "os.system"}))
    assert outcome == Failed(
        "params.function 'os.system' is not a registered function"
        " (known: add, attempt, nothing, refuse, scalar)"
    )
    outcome = run(TaskContext(params={"function": "add", "kwargs": [1, 2]}))
    assert outcome == Failed("params.kwargs: Input should be a valid dictionary")


def test_python_exceptions_are_failures(functions: FunctionRegistry) -> None:
    run = make_python_processor(functions)
    outcome = invoke(run, TaskContext(params={"function": "add", "kwargs": {"a": 1}}))
    assert isinstance(outcome, Failed)
    assert outcome.message.startswith("TypeError: ")
    assert "'b'" in outcome.message


def test_the_default_function_registry_serves_the_python_type() -> None:
    @python_function("unit-test.greet")
    def greet(ctx: TaskContext, name: str) -> dict[str, str]:
        return {"greeting": f"hello {name}"}

    ctx = TaskContext(params={"function": "unit-test.greet", "kwargs": {"name": "ada"}})
    assert default_registry.get("python")(ctx) == Completed({"greeting": "hello ada"})


def test_a_second_function_under_one_name_is_an_error(functions: FunctionRegistry) -> None:
    def other(ctx: TaskContext) -> None:
        return None

    with pytest.raises(ValueError, match="'add' is taken by"):
        functions.register("add", other)
