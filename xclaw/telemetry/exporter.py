"""[telemetry] TurnExporter: when a run ends, its turn's committed steps go out as OTLP spans.

The runtime only enqueues (session id, when the run started); a daemon thread reads the
steps, builds the spans (spans.py) and hands them to the SDK's BatchSpanProcessor, whose own
thread talks to the receiver. Nothing here can block or fail a run: a full queue drops the
request, every error is logged and swallowed, and `close` waits a bounded time.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

from xclaw import __version__
from xclaw.store.base import RecordReader
from xclaw.store.steps.model import MAIN_AGENT, Step, StepType
from xclaw.telemetry.config import OtelSettings
from xclaw.telemetry.spans import SpanData, split_turns, turn_spans

log = logging.getLogger(__name__)

_QUEUE = 1024
_STOP = object()


class TurnExporter:
    def __init__(
        self,
        store: RecordReader,
        config: OtelSettings,
        *,
        redact: Callable[[str], str] = lambda t: t,
    ) -> None:
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        self.store = store
        self.config = config
        self.redact = redact
        self._resource = _resource(config)
        self._scope = _scope()
        self._processor = BatchSpanProcessor(_span_exporter(config))
        self._queue: queue.Queue[Any] = queue.Queue(_QUEUE)
        self._idle = threading.Condition()
        self._pending = 0
        self._thread = threading.Thread(target=self._work, name="xclaw-otel", daemon=True)
        self._thread.start()

    # --- called by the runtime (never blocks) ------------------------------------------------
    def run_ended(self, session_id: str, started_ms: int) -> None:
        try:
            with self._idle:
                self._queue.put_nowait((session_id, started_ms))
                self._pending += 1
        except queue.Full:
            log.warning(
                "otel: export queue full; the turn of session %s is not exported", session_id
            )

    def flush(self, timeout_s: float = 5.0) -> bool:
        """Wait until every queued turn is built and handed over, then push the spans out."""
        with self._idle:
            if not self._idle.wait_for(lambda: self._pending == 0, timeout_s):
                return False
        return bool(self._processor.force_flush(int(timeout_s * 1000)))

    def close(self, timeout_s: float = 5.0) -> None:
        """Flush and stop, in at most about `timeout_s` (an unreachable receiver included)."""

        def stop() -> None:
            try:
                self.flush(timeout_s)
                self._queue.put(_STOP)
                # opentelemetry-sdk leaves shutdown() unannotated (force_flush is typed).
                self._processor.shutdown()  # type: ignore[no-untyped-call]
            except Exception:
                log.warning("otel: shutting the exporter down failed", exc_info=True)

        t = threading.Thread(target=stop, name="xclaw-otel-close", daemon=True)
        t.start()
        t.join(timeout_s + 1.0)

    # --- the worker thread ----------------------------------------------------------------------
    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            try:
                self._export(*item)
            except Exception:
                log.warning("otel: could not export a turn of session %s", item[0], exc_info=True)
            finally:
                with self._idle:
                    self._pending -= 1
                    self._idle.notify_all()

    def _export(self, session_id: str, started_ms: int) -> None:
        steps = recent_steps(self.store, session_id, started_ms)
        for turn in turns_of_run(steps, started_ms):
            for span in turn_spans(
                session_id,
                turn,
                capture_content=self.config.capture_message_content,
                redact=self.redact,
            ):
                self._processor.on_end(self._readable(span))

    def _readable(self, span: SpanData) -> Any:
        from opentelemetry.sdk.trace import Event, ReadableSpan
        from opentelemetry.trace import SpanContext, SpanKind, TraceFlags
        from opentelemetry.trace.status import Status, StatusCode

        def ctx(span_id: int) -> SpanContext:
            return SpanContext(
                span.trace_id, span_id, is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED)
            )

        return ReadableSpan(
            name=span.name,
            context=ctx(span.span_id),
            parent=ctx(span.parent_id) if span.parent_id is not None else None,
            resource=self._resource,
            attributes=span.attributes,
            events=[Event(e.name, e.attributes, e.time_ns) for e in span.events],
            kind=SpanKind.CLIENT if span.kind == "client" else SpanKind.INTERNAL,
            status=Status(StatusCode.ERROR, span.error) if span.error else Status(StatusCode.OK),
            start_time=span.start_ns,
            end_time=max(span.end_ns, span.start_ns),
            instrumentation_scope=self._scope,
        )


def _touched(step: Step, started_ms: int) -> bool:
    # mark_interrupted sets the end time of the steps it settles: they count as touched.
    return step.start_time >= started_ms or (
        step.end_time is not None and step.end_time >= started_ms
    )


def recent_steps(
    store: RecordReader, session_id: str, started_ms: int, first: int = 256
) -> list[Step]:
    """The session's last steps, from the start of the first turn the run touched: read
    from the end, doubling, until that turn's user message and an untouched step before it
    are in view (a long session is not read whole at the end of each run)."""
    n = first
    while True:
        steps = store.latest_steps(session_id, n)
        if len(steps) < n:
            return steps
        t = next((i for i, s in enumerate(steps) if _touched(s, started_ms)), None)
        if t is None:
            return []
        h = max(
            (
                i
                for i, s in enumerate(steps[: t + 1])
                if s.step_type is StepType.USER_INPUT and s.agent == MAIN_AGENT
            ),
            default=0,
        )
        if h > 0:  # the step before the turn is in view and untouched
            return steps[h:]
        n *= 2


def turns_of_run(steps: list[Step], started_ms: int) -> list[list[Step]]:
    """The turns a run that started at `started_ms` touched: those with a step it wrote or
    marked interrupted (an earlier turn cut short by a crash, settled by this run)."""
    out = []
    for turn in split_turns(steps):
        if any(_touched(s, started_ms) for s in turn):
            out.append(turn)
    return out


def _resource(config: OtelSettings) -> Any:
    from opentelemetry.sdk.resources import Resource

    attrs = {"service.version": __version__, "service.name": config.service_name}
    return Resource.create(attrs)


def _scope() -> Any:
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope

    return InstrumentationScope("xclaw", __version__)


def _span_exporter(config: OtelSettings) -> Any:
    """The OTLP exporter for the protocol, at the endpoint the settings read (the SDK still
    reads the other OTEL_EXPORTER_OTLP_* variables itself: timeout, certificates)."""
    headers = config.headers or None
    base = config.endpoint or ""
    if config.protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter(endpoint=config.traces_endpoint or base, headers=headers)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter as HttpExporter,
    )

    url = config.traces_endpoint or base.rstrip("/") + "/v1/traces"
    return HttpExporter(endpoint=url, headers=headers)


def start_exporter(
    store: RecordReader, config: OtelSettings | None, *, redact: Callable[[str], str] = lambda t: t
) -> TurnExporter | None:
    """A TurnExporter when export is switched on (`Settings.otel`, read with the OTEL_*
    variables and checked when the settings were read), else None. Export that is asked for
    but cannot start (the `otel` extra not installed) is a warning, never an error."""
    if config is None or not config.enabled:
        return None
    try:
        return TurnExporter(store, config, redact=redact)
    except ImportError as e:
        log.warning(
            "otel: an OTLP endpoint is set but the OpenTelemetry SDK is missing (%s): "
            "pip install 'xclaw[otel]'",
            e.name or e,
        )
    except Exception:
        log.warning("otel: could not start the span exporter", exc_info=True)
    return None
