"""Whether and where to export spans: the standard OpenTelemetry variables first, then the
`otel` section of xclaw.yaml.

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

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from xclaw.errors import ConfigError

PROTOCOLS = ("http/protobuf", "grpc")
_TRUE = ("1", "true", "yes", "on", "span_only", "span_and_event")


@dataclass(frozen=True, slots=True)
class OtelConfig:
    enabled: bool = False
    # Set only when it comes from xclaw.yaml; None lets the SDK read OTEL_EXPORTER_OTLP_*.
    endpoint: str | None = None
    protocol: str = "http/protobuf"
    service_name: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    capture_content: bool = False


def otel_config(
    yaml_conf: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None
) -> OtelConfig:
    """From the environment (wins) and xclaw.yaml's `otel` mapping (`yaml_conf` is the whole
    file). Called once, by xclaw.config.load_settings: the result is `Settings.otel`."""
    env = os.environ if env is None else env
    conf = (yaml_conf or {}).get("otel") or {}
    if not isinstance(conf, Mapping):
        raise ConfigError("xclaw.yaml: `otel` must be a mapping (endpoint, protocol, ...)")
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return OtelConfig()
    exporters = env.get("OTEL_TRACES_EXPORTER")
    if exporters is not None and "otlp" not in [e.strip() for e in exporters.split(",")]:
        return OtelConfig()
    env_endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT"
    )
    yaml_endpoint = conf.get("endpoint")
    if yaml_endpoint is not None and not isinstance(yaml_endpoint, str):
        raise ConfigError("xclaw.yaml: otel.endpoint must be a URL")
    protocol = (
        env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or str(conf.get("protocol") or "http/protobuf")
    ).strip()
    if protocol not in PROTOCOLS:
        raise ConfigError(f"OTLP protocol {protocol!r}: expected one of {', '.join(PROTOCOLS)}")
    headers = conf.get("headers") or {}
    if not isinstance(headers, Mapping):
        raise ConfigError("xclaw.yaml: otel.headers must be a mapping")
    capture_env = env.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
    capture = (
        capture_env.strip().lower() in _TRUE
        if capture_env is not None
        else bool(conf.get("capture_message_content", False))
    )
    enabled = bool(env_endpoint or yaml_endpoint)
    return OtelConfig(
        enabled=enabled,
        endpoint=None if env_endpoint else yaml_endpoint,
        protocol=protocol,
        service_name=env.get("OTEL_SERVICE_NAME") or conf.get("service_name") or None,
        headers={str(k): str(v) for k, v in headers.items()},
        capture_content=capture,
    )
