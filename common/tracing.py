"""OpenTelemetry traces: one trace per run, across API, engine, worker, connector, notify.

Off unless the standard variables ask for it (``OTEL_TRACES_EXPORTER`` other than
``none``, or an ``OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT``; ``OTEL_SDK_DISABLED=true`` wins):
then :func:`configure_tracing`, called by each component's entry point, installs the
SDK's tracer provider with a batching exporter (OTLP over HTTP, or ``console``), the
service named ``OTEL_SERVICE_NAME`` or ``stellwerk-<component>``. Off, nothing is
installed and :func:`tracing_on` is False, so the hot paths make no span at all: they
ask it first.

A run's trace context is kept with the run (``runs.traceparent``, W3C ``traceparent``):
each component that works on the run starts its span as a child of it, so one run's
spans form one trace whichever process made them, and messages carry it
(``TaskDispatch.traceparent``, the ``traceparent`` header of ``http`` tasks' requests and
of webhook deliveries).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from opentelemetry import trace
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

TRACER = "stellwerk"
_PROPAGATOR = TraceContextTextMapPropagator()


class _Installed:
    """The tracer provider spans go to; None while tracing is off.

    Set once per process by :func:`configure_tracing` (or by a test's :func:`install`).
    """

    provider: Any = None


def install(provider: Any) -> None:
    """Send spans to ``provider`` from now on (None: tracing off again). For tests."""
    _Installed.provider = provider


def wanted(env: Mapping[str, str]) -> bool:
    """Whether the environment asks for traces (the standard ``OTEL_*`` variables)."""
    if env.get("OTEL_SDK_DISABLED", "").lower() == "true":
        return False
    exporter = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter:
        return exporter != "none"
    return bool(env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
                or env.get("OTEL_EXPORTER_OTLP_ENDPOINT"))


def configure_tracing(component: str, env: Mapping[str, str] | None = None) -> bool:
    """Install the SDK's tracer provider if the environment asks for traces; say so."""
    env = os.environ if env is None else env
    if not wanted(env):
        return False
    from opentelemetry.sdk.resources import Resource  # noqa: PLC0415 - only when wanted
    from opentelemetry.sdk.trace import TracerProvider  # noqa: PLC0415
    from opentelemetry.sdk.trace.export import BatchSpanProcessor  # noqa: PLC0415

    name = env.get("OTEL_SERVICE_NAME") or f"stellwerk-{component}"
    provider = TracerProvider(resource=Resource.create({"service.name": name}))
    provider.add_span_processor(BatchSpanProcessor(_exporter(env)))
    trace.set_tracer_provider(provider)  # for libraries that trace on their own
    install(provider)
    return True


def _exporter(env: Mapping[str, str]) -> Any:
    if env.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter  # noqa: PLC0415

        return ConsoleSpanExporter()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # noqa: PLC0415
        OTLPSpanExporter,
    )

    return OTLPSpanExporter()  # reads OTEL_EXPORTER_OTLP_* itself


def tracing_on() -> bool:
    """Whether spans are recorded: a provider is installed."""
    return _Installed.provider is not None


def current_traceparent() -> str | None:
    """The W3C ``traceparent`` of the current span, None when there is none (or off)."""
    if not tracing_on():
        return None
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    return carrier.get("traceparent")


@contextmanager
def span(
    name: str, parent: str | None = None, attributes: Mapping[str, Any] | None = None,
) -> Iterator[str | None]:
    """A span named ``name``, child of ``parent`` (a ``traceparent``) or of the current one.

    Yields the span's own ``traceparent`` (to hand on); with tracing off, does nothing
    and yields None.
    """
    if not tracing_on():
        yield None
        return
    ctx = _PROPAGATOR.extract({"traceparent": parent}) if parent else None
    tracer = _Installed.provider.get_tracer(TRACER)
    with tracer.start_as_current_span(name, context=ctx, attributes=dict(attributes or {})):
        yield current_traceparent()


def record_span(
    name: str, parent: str | None, start_ns: int, attributes: Mapping[str, Any] | None = None,
) -> None:
    """A span that began at ``start_ns`` (``time.time_ns()``) and ends now, under ``parent``.

    For work done for several runs at once (an engine batch): one span per run, each in
    its run's trace. Nothing with tracing off or without a parent.
    """
    if not parent or not tracing_on():
        return
    ctx = _PROPAGATOR.extract({"traceparent": parent})
    started = _Installed.provider.get_tracer(TRACER).start_span(
        name, context=ctx, start_time=start_ns, attributes=dict(attributes or {}))
    started.end()


def annotate(key: str, value: str | int) -> None:
    """Set an attribute on the current span (nothing without one)."""
    trace.get_current_span().set_attribute(key, value)


def task_attributes(dispatch: Any, worker: str) -> dict[str, str | int]:
    """What an attempt's span (``stellwerk.task``) says of it, from its ``TaskDispatch``."""
    return {"stellwerk.run_id": str(dispatch.run_id), "stellwerk.job": dispatch.job_name,
            "stellwerk.task": dispatch.task, "stellwerk.task.type": dispatch.type,
            "stellwerk.attempt": dispatch.attempt, "stellwerk.worker": worker}


def headers_with_trace(headers: Mapping[str, str], traceparent: str | None) -> dict[str, str]:
    """``headers`` with ``traceparent`` added (when there is one and they set none)."""
    out = dict(headers)
    if traceparent and not any(k.lower() == "traceparent" for k in out):
        out["traceparent"] = traceparent
    return out
