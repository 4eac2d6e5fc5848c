"""``python`` (``function``, ``kwargs``): calls a Python function registered by name.

Only functions registered with ``@python_function("name")`` can be called: a job
names a function, it never carries code or an import path, so submitting a job cannot
make a worker import or run anything its operator did not register.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import ValidationError

from common.domain.builtin_params import PythonParams, describe
from workers.context import TaskContext
from workers.outcomes import Accepted, Completed, Failed, Outcome, Rejected
from workers.registry import Processor, processor, qualified_name

PythonFunction = Callable[..., Any]
F = TypeVar("F", bound=PythonFunction)


class FunctionRegistry:
    """Name → function callable by ``python`` tasks."""

    def __init__(self) -> None:
        self._functions: dict[str, PythonFunction] = {}

    def register(self, name: str, fn: PythonFunction) -> None:
        """Make ``fn`` callable as ``name``; a second function under one name is an error."""
        current = self._functions.get(name)
        if current is not None and qualified_name(current) != qualified_name(fn):
            raise ValueError(f"python function {name!r} is taken by {qualified_name(current)}")
        self._functions[name] = fn

    def get(self, name: str) -> PythonFunction | None:
        """The function registered as ``name``, if any."""
        return self._functions.get(name)

    def names(self) -> list[str]:
        """The registered names, sorted."""
        return sorted(self._functions)

    def function(self, name: str) -> Callable[[F], F]:
        """Decorator: register the decorated function as ``name`` here."""

        def decorate(fn: F) -> F:
            self.register(name, fn)
            return fn

        return decorate


default_functions = FunctionRegistry()


def python_function(name: str) -> Callable[[F], F]:
    """Decorator: make a function ``fn(ctx, **kwargs)`` callable by ``python`` tasks."""
    return default_functions.function(name)


def make_python_processor(functions: FunctionRegistry) -> Processor:
    """The ``python`` processor over ``functions``.

    The function is called as ``fn(ctx, **kwargs)``. A dict it returns is the output,
    ``None`` is an empty output, an outcome is passed through, and any other value is
    the output's ``result``.
    """

    def run_python(ctx: TaskContext) -> Outcome:
        try:
            params = PythonParams.model_validate(ctx.params)
        except ValidationError as error:  # a job stored before params were checked at submit
            return Failed(describe(error))
        fn = functions.get(params.function)
        if fn is None:
            known = ", ".join(functions.names()) or "none"
            return Failed(f"params.function {params.function!r} is not a registered function "
                          f"(known: {known})")
        return _as_outcome(fn(ctx, **params.kwargs))

    return run_python


def _as_outcome(value: object) -> Outcome:
    if isinstance(value, Completed | Failed | Rejected | Accepted):
        return value
    if value is None:
        return Completed()
    if isinstance(value, dict):
        return Completed(value)
    return Completed({"result": value})


run_python = processor("python")(make_python_processor(default_functions))
