import pytest

from common.config import load_settings
from workers.main import run_worker
from workers.registry import UnknownTaskTypeError


def test_a_type_without_processor_is_refused_before_anything_starts() -> None:
    settings = load_settings(redis_url="redis://127.0.0.1:1/0")
    with pytest.raises(UnknownTaskTypeError, match=r"task type\(s\) backup, nope"):
        run_worker(settings, ["noop", "backup", "nope"])


def test_no_types_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one task type"):
        run_worker(load_settings(redis_url="redis://127.0.0.1:1/0"), [])


def test_no_redis_url_is_refused() -> None:
    with pytest.raises(RuntimeError, match="STELLWERK_REDIS_URL"):
        run_worker(load_settings(redis_url=None), ["noop"])
