"""``stellwerk connector``: the processor of ``http`` and ``webservice``, on one event loop.

Everything is built here, in this process, and nothing at import time. One asyncio
loop runs every call (one ``aiohttp.ClientSession``), the monitor, the result sender and
the connector's own HTTP app (``POST /invoke``, ``GET /healthz``, served by uvicorn on
the same loop); one thread consumes the queues with kombu (``connectors.consumer``).
A slow endpoint holds a coroutine, not a thread: ``--concurrency`` calls are in flight
at once.

SIGTERM or SIGINT stops fetching; attempts in flight get :data:`SHUTDOWN_GRACE` to
finish and report. Those still running then are abandoned with their claims: the
liveness record is gone, so the beat requeues them as lost attempts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import threading
from collections.abc import Iterator
from datetime import timedelta

import aiohttp
import redis
import uvicorn

from common.config import Settings
from common.health import StatusWriter, health_dir
from common.messaging.holdings import Holdings
from common.messaging.liveness import LivenessBeacon
from common.messaging.messages import task_queue
from common.messaging.publisher import Publisher
from common.outage import Outage
from common.process import settle_garbage_collector
from common.secure_params import SecretBox
from connectors.attempts import AttemptRunner, Processor
from connectors.calls import new_session
from connectors.consumer import Delivery, Gate, QueueConsumer
from connectors.http_task import HttpTask
from connectors.intake import Intake
from connectors.invoke import Invoker, create_app
from connectors.monitor import Monitor, redis_cancel_flags
from connectors.results import ResultSender
from connectors.webservice import WebserviceTask

logger = logging.getLogger(__name__)

TYPES = ("http", "webservice")
SHUTDOWN_GRACE = timedelta(seconds=8)
FLUSH_TIMEOUT = timedelta(seconds=5)


def run_connector(
    settings: Settings, host: str = "127.0.0.1", port: int = 8090, concurrency: int = 500,
    hostname: str | None = None,
) -> None:
    """Serve ``tasks.http``, ``tasks.webservice`` and ``/invoke`` until signalled."""
    if not settings.redis_url:
        raise RuntimeError("STELLWERK_REDIS_URL is not set: the connector needs the broker")
    if concurrency < 1:
        raise ValueError("the connector needs a concurrency of at least 1")
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s connector %(levelname)s %(name)s %(message)s"
    )
    hostname = hostname or f"connector-{os.getpid()}@{socket.gethostname()}"
    if settings.secret_key is None or not settings.secret_key.get_secret_value():
        logger.warning("STELLWERK_SECRET_KEY is not set: webservice tasks and tasks with "
                       "secure params will FAIL here")
    connector = Connector(settings, settings.redis_url, hostname, concurrency)
    # ``stellwerk healthcheck connector`` reads it: unhealthy while Redis is down.
    with StatusWriter(health_dir(settings.data_dir), "connector", lambda: connector.outages):
        asyncio.run(connector.serve(host, port))


class _Server(uvicorn.Server):
    """uvicorn leaving the signals to the connector, which stops it in its own order."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """Install nothing."""
        yield


class Connector:
    """The connector's parts, wired on the running loop."""

    def __init__(self, settings: Settings, redis_url: str, hostname: str, concurrency: int):
        self._settings = settings
        self._redis_url = redis_url
        self._hostname = hostname
        self._concurrency = concurrency
        self._redis = redis.Redis.from_url(redis_url)
        self._gate = Gate(concurrency)
        self._holdings = Holdings(self._redis, Publisher(self._redis))
        self.outages: list[Outage] = []  # of the consumer, monitor and sender, once built

    async def serve(self, host: str, port: int) -> None:
        """Run until SIGTERM or SIGINT (or until the HTTP server fails to start)."""
        async with new_session(self._settings.egress) as client:
            slots = asyncio.Semaphore(self._concurrency)
            sender = ResultSender(self._holdings)
            monitor = Monitor(
                redis_cancel_flags(self._redis), sender, self._settings.heartbeat_interval
            )
            self.outages += [sender.redis, monitor.redis]
            runner = AttemptRunner(self._processors(client), monitor, sender, slots,
                                   self._hostname, holdings=self._holdings)
            intake = Intake(self._holdings, runner, sender, self._hostname, self._gate.release)
            invoker = Invoker(client, slots)
            app = create_app(invoker, lambda: {
                "connector": self._hostname, "attempts": self._gate.held,
                "invocations": invoker.running,
            })
            server = _Server(uvicorn.Config(
                app, host=host, port=port, log_level="info", access_log=False, lifespan="off"
            ))
            background = [asyncio.create_task(work) for work in (sender.run(), monitor.run())]
            try:
                await self._consume(intake, server)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(FLUSH_TIMEOUT.total_seconds()):
                        await sender.flush()
            finally:
                for task in background:
                    task.cancel()

    def _processors(self, client: aiohttp.ClientSession) -> dict[str, Processor]:
        secrets = SecretBox(self._settings.secret_key)
        return {
            "http": HttpTask(client, secrets),
            "webservice": WebserviceTask(
                client, secrets, self._settings.secret_key, self._settings.callback_base
            ),
        }

    async def _consume(self, intake: Intake, server: _Server) -> None:
        """Consume and serve until signalled; then stop in order and let attempts end."""
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)

        def deliver(delivery: Delivery) -> None:  # called on the consumer's thread
            loop.call_soon_threadsafe(intake.accept, delivery)

        consumer = QueueConsumer(
            self._redis_url, [task_queue(name) for name in TYPES], self._gate, deliver
        )
        self.outages.append(consumer.redis)
        thread = threading.Thread(target=consumer.run, name="consumer", daemon=True)
        serving = asyncio.create_task(server.serve())
        settle_garbage_collector()
        with LivenessBeacon(self._redis, self._hostname, TYPES, self._concurrency,
                            on_refresh=lambda: self._holdings.refresh(self._hostname)):
            thread.start()
            logger.info("%s serving %s with %d calls at once", self._hostname,
                        ", ".join(TYPES), self._concurrency)
            await asyncio.wait(
                {serving, asyncio.create_task(stop.wait())}, return_when=asyncio.FIRST_COMPLETED
            )
            consumer.stop()
            await asyncio.to_thread(thread.join)
            if not await intake.wait_idle(SHUTDOWN_GRACE.total_seconds()):
                logger.warning("attempts still running after %s: left to be requeued",
                               SHUTDOWN_GRACE)
        server.should_exit = True
        await serving
        logger.info("%s stopped", self._hostname)
