"""[telemetry] Whether and where to export spans: the `otel` section of xclaw.yaml, under the
standard OpenTelemetry variables (which win, as everywhere the settings read a variable).

    otel:
      endpoint: http://127.0.0.1:4318    # OTLP base URL (as OTEL_EXPORTER_OTLP_ENDPOINT)
      protocol: http/protobuf            # or grpc (as OTEL_EXPORTER_OTLP_PROTOCOL)
      service_name: xclaw                # as OTEL_SERVICE_NAME
      headers: {authorization: "Bearer …"}
      capture_message_content: false     # as OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT

Export is on when an OTLP endpoint is set either way, and off whenever OTEL_SDK_DISABLED is
true or OTEL_TRACES_EXPORTER names no `otlp` exporter (e.g. `none`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field

from xclaw.config.section import Default, Env, Flag, NotInYaml, Section


def _capture(value: Any) -> Any:
    """The variable's values that mean "capture" (the GenAI conventions add two of their own);
    any other text means no."""
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on", "span_only", "span_and_event")
    return value


def _disabled(value: Any) -> Any:
    """OTEL_SDK_DISABLED is true only when it says `true` (the specification's rule)."""
    return value.strip().lower() == "true" if isinstance(value, str) else value


class OtelSettings(Section):
    # The OTLP base URL (/v1/traces is added for HTTP).
    endpoint: Annotated[str | None, Env("OTEL_EXPORTER_OTLP_ENDPOINT"), Default("off")] = None
    # The whole URL of the traces endpoint, over `endpoint`.
    traces_endpoint: Annotated[
        str | None,
        Env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
        NotInYaml("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
    ] = None
    protocol: Annotated[
        Literal["http/protobuf", "grpc"],
        Env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"),
    ] = "http/protobuf"
    service_name: Annotated[str, Env("OTEL_SERVICE_NAME")] = "xclaw"
    headers: dict[str, str] = Field(default_factory=dict)
    capture_message_content: Annotated[
        Flag,
        BeforeValidator(_capture),
        Env("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"),
    ] = False
    sdk_disabled: Annotated[
        Flag,
        BeforeValidator(_disabled),
        Env("OTEL_SDK_DISABLED"),
        NotInYaml("OTEL_SDK_DISABLED"),
    ] = False
    traces_exporter: Annotated[
        str | None, Env("OTEL_TRACES_EXPORTER"), NotInYaml("OTEL_TRACES_EXPORTER")
    ] = None

    @property
    def enabled(self) -> bool:
        if self.sdk_disabled or not (self.endpoint or self.traces_endpoint):
            return False
        if self.traces_exporter is None:
            return True
        return "otlp" in [e.strip() for e in self.traces_exporter.split(",")]
