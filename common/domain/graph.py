"""The task graph of a job: successors, predecessors, and the rules it obeys."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field


class GraphError(ValueError):
    """A graph rule (docs/job-spec.md, "Task fields") is broken; the message names the task."""


@dataclass(frozen=True)
class Graph:
    """An acyclic graph of named tasks; immutable once built."""

    types: dict[str, str]
    successors: dict[str, tuple[str, ...]]
    predecessors: dict[str, tuple[str, ...]] = field(default_factory=dict)
    order: tuple[str, ...] = ()

    @classmethod
    def build(cls, tasks: Iterable[tuple[str, str, Iterable[str]]]) -> Graph:
        """Build from ``(name, type, next)`` triples, checking every graph rule."""
        types: dict[str, str] = {}
        successors: dict[str, tuple[str, ...]] = {}
        for name, type_, nxt in tasks:
            if name in types:
                raise GraphError(f"task {name!r}: the name is used by more than one task")
            types[name] = type_
            successors[name] = tuple(dict.fromkeys(nxt))
        predecessors: dict[str, list[str]] = {name: [] for name in types}
        for name, nxt in successors.items():
            for succ in nxt:
                if succ not in types:
                    raise GraphError(f"task {name!r}: next names unknown task {succ!r}")
                if succ == name:
                    raise GraphError(f"task {name!r}: names itself in next (a cycle)")
                predecessors[succ].append(name)
        preds = {k: tuple(v) for k, v in predecessors.items()}
        graph = cls(types, successors, preds, _topological(successors, preds))
        if not graph.start_tasks():
            raise GraphError("the graph has no start task (every task has a predecessor)")
        return graph

    def start_tasks(self) -> list[str]:
        """Tasks without predecessors, in definition order."""
        return [name for name, preds in self.predecessors.items() if not preds]

    def descendants(self, name: str) -> list[str]:
        """Every task reachable from ``name`` (not ``name`` itself), breadth first."""
        seen: dict[str, None] = {}
        frontier = deque(self.successors[name])
        while frontier:
            current = frontier.popleft()
            if current not in seen:
                seen[current] = None
                frontier.extend(self.successors[current])
        return list(seen)



def _topological(
    successors: dict[str, tuple[str, ...]], predecessors: dict[str, tuple[str, ...]]
) -> tuple[str, ...]:
    """Kahn's algorithm; a task left over sits on a cycle and is named."""
    indegree = {name: len(preds) for name, preds in predecessors.items()}
    ready = deque(name for name, n in indegree.items() if n == 0)
    order: list[str] = []
    while ready:
        current = ready.popleft()
        order.append(current)
        for succ in successors[current]:
            indegree[succ] -= 1
            if indegree[succ] == 0:
                ready.append(succ)
    if len(order) != len(indegree):
        on_cycle = sorted(name for name, n in indegree.items() if n > 0)
        raise GraphError(f"task {on_cycle[0]!r}: the graph has a cycle through {on_cycle}")
    return tuple(order)
