"""Bundling dispatches by queue: pure, on ``Outgoing`` values."""

from hypothesis import given
from hypothesis import strategies as st

from common.messaging.bundling import bundle_dispatches, lane_message
from common.messaging.messages import EXECUTE_BUNDLE_TASK, EXECUTE_TASK, TaskBundle
from common.messaging.publisher import Outgoing


def dispatch(queue: str, n: int) -> Outgoing:
    return Outgoing(queue, EXECUTE_TASK, {"n": n}, f"key-{queue}-{n}")


def unbundle(messages: list[Outgoing]) -> list[Outgoing]:
    """The single dispatches a worker ends up running, in the order it runs them."""
    out: list[Outgoing] = []
    for m in messages:
        if m.task_name == EXECUTE_BUNDLE_TASK:
            bundle = TaskBundle.model_validate(m.payload)
            assert bundle.queue == m.queue
            out += [Outgoing(m.queue, EXECUTE_TASK, p, f"key-{m.queue}-{p['n']}")
                    for p in bundle.dispatches]
        else:
            out.append(m)
    return out


def test_dispatches_of_one_queue_share_even_bundles() -> None:
    messages = [dispatch("tasks.noop", i) for i in range(40)]
    bundles = bundle_dispatches(messages, size=32)
    assert [m.task_name for m in bundles] == [EXECUTE_BUNDLE_TASK] * 2
    assert [len(m.payload["dispatches"]) for m in bundles] == [20, 20]
    assert unbundle(bundles) == messages


def test_a_lone_dispatch_and_other_messages_stay_as_they_are() -> None:
    event = Outgoing("stellwerk.notify", "stellwerk.notify", {"events": []})
    lone = dispatch("tasks.shell", 0)
    pair = [dispatch("tasks.noop", 1), dispatch("tasks.noop", 2)]
    out = bundle_dispatches([event, lone, *pair], size=32)
    assert out[:2] == [event, lone]
    assert out[2].task_name == EXECUTE_BUNDLE_TASK
    assert out[2].payload["dispatches"] == [{"n": 1}, {"n": 2}]


def test_size_one_changes_nothing() -> None:
    messages = [dispatch("tasks.noop", i) for i in range(5)]
    assert bundle_dispatches(messages, size=1) == messages


@given(
    queues=st.lists(st.sampled_from(["tasks.a", "tasks.b", "tasks.c"]), max_size=120),
    size=st.integers(min_value=1, max_value=40),
)
def test_every_dispatch_travels_once_in_its_queue_in_order(queues: list[str], size: int) -> None:
    messages = [dispatch(queue, i) for i, queue in enumerate(queues)]
    out = bundle_dispatches(messages, size)
    assert all(len(m.payload.get("dispatches", [None])) <= size for m in out)
    for queue in set(queues):
        assert [m for m in unbundle(out) if m.queue == queue] == [
            m for m in messages if m.queue == queue
        ]


@given(lane=st.booleans(), items=st.lists(st.dictionaries(
    st.text(max_size=4), st.none() | st.integers() | st.text(max_size=4), max_size=3),
    min_size=2, max_size=5))
def test_a_bundle_is_the_model_s_json_dump(lane: bool, items: list[dict[str, object]]) -> None:
    messages = [Outgoing("tasks.noop", EXECUTE_TASK, item, f"key-{i}")
                for i, item in enumerate(items)]
    out = lane_message(messages) if lane else bundle_dispatches(messages, size=len(items))[0]
    model = TaskBundle.model_validate(out.payload)
    assert out.payload == model.model_dump(mode="json")
    assert list(out.payload) == list(model.model_dump(mode="json"))
    assert out.task_id == str(model.message_id)
    assert model.lane is lane
