"""Raw Celery baseline for the benchmarks: a no-op task and a chord join on the same Redis.

Configured exactly like Stellwerk's own Celery apps (JSON, late acks, prefetch 1), so
that the comparison measures what Stellwerk adds, not a different broker setting.
Run as ``python bench/celery_baseline.py REDIS_URL CONCURRENCY`` to start a worker.
"""

from __future__ import annotations

import sys
from typing import Any

import redis
from celery import Celery

from common.messaging.celery_app import make_celery

COUNTER = "bench:noop:done"
JOINED = "bench:chord:joined"
QUEUE = "bench.noop"


def make_app(redis_url: str) -> Celery:
    app = make_celery(redis_url, name="bench")
    # Chords need a result backend; plain tasks ignore results.
    app.conf.update(result_backend=redis_url, task_ignore_result=False)
    client = redis.Redis.from_url(redis_url)

    @app.task(name="bench.noop", ignore_result=True)
    def noop() -> None:
        client.incr(COUNTER)

    @app.task(name="bench.chord_member")
    def chord_member() -> int:
        return 1

    @app.task(name="bench.join", ignore_result=True)
    def join(results: list[Any]) -> None:
        client.set(JOINED, len(results))

    return app


if __name__ == "__main__":
    url, concurrency = sys.argv[1], sys.argv[2]
    make_app(url).worker_main([
        "worker", "-Q", QUEUE, "-P", "threads", "-c", concurrency, "--without-gossip",
        "--without-mingle", "--without-heartbeat", "-l", "WARNING",
    ])
