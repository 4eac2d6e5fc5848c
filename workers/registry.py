"""Processors registered per task type, and the ``@processor("backup")`` decorator.

Registration is declarative, like Celery's ``@app.task``: importing a module of
processors fills :data:`default_registry`. The runtime never reaches for that instance
itself; its entry point passes a ``Registry`` in, so tests choose their own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

from common.domain.spec import TYPE_PATTERN
from workers.context import TaskContext
from workers.outcomes import Outcome

Processor = Callable[[TaskContext], Outcome | None]
P = TypeVar("P", bound=Processor)


class UnknownTaskTypeError(LookupError):
    """No processor is registered for a task type."""


class Registry:
    """Task type → processor."""

    def __init__(self) -> None:
        self._processors: dict[str, Processor] = {}

    def register(self, task_type: str, fn: Processor) -> None:
        """Serve ``task_type`` with ``fn``; a second, different processor is an error.

        The same function defined again (its module imported twice, or reloaded)
        replaces the first, so that re-importing a module of processors is harmless.
        """
        if not TYPE_PATTERN.match(task_type):
            raise ValueError(f"task type {task_type!r} is not an identifier (letters, digits, _.-)")
        current = self._processors.get(task_type)
        if current is not None and qualified_name(current) != qualified_name(fn):
            raise ValueError(f"task type {task_type!r} is taken by {qualified_name(current)}")
        self._processors[task_type] = fn

    def get(self, task_type: str) -> Processor:
        """The processor of ``task_type``."""
        try:
            return self._processors[task_type]
        except KeyError:
            raise UnknownTaskTypeError(
                f"no processor registered for task type {task_type!r}"
                f" (registered: {', '.join(self.types()) or 'none'})"
            ) from None

    def require(self, task_types: Iterable[str]) -> None:
        """Fail with one clear error naming every type in ``task_types`` nobody serves."""
        missing = [task_type for task_type in task_types if task_type not in self._processors]
        if missing:
            raise UnknownTaskTypeError(
                f"no processor registered for task type(s) {', '.join(missing)}"
                f" (registered: {', '.join(self.types()) or 'none'})"
            )

    def types(self) -> list[str]:
        """The registered task types, sorted."""
        return sorted(self._processors)

    def __contains__(self, task_type: object) -> bool:
        """Whether ``task_type`` has a processor."""
        return task_type in self._processors

    def processor(self, task_type: str) -> Callable[[P], P]:
        """Decorator: register the decorated function for ``task_type`` here."""

        def decorate(fn: P) -> P:
            self.register(task_type, fn)
            return fn

        return decorate


default_registry = Registry()


def processor(task_type: str) -> Callable[[P], P]:
    """Decorator: register the decorated function for ``task_type`` in the default registry."""
    return default_registry.processor(task_type)


def qualified_name(fn: Callable[..., object]) -> str:
    """``module.qualname`` of a function: the same function imported twice has one name."""
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"
