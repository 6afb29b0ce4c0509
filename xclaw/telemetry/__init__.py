"""[telemetry] OpenTelemetry export: committed steps become spans by the GenAI semantic conventions.

`spans.py` turns one user turn's steps into span values (pure, no OpenTelemetry import),
`config.py` decides from the standard OTEL_* variables and xclaw.yaml whether and where to
export, `exporter.py` hands the spans to the OpenTelemetry SDK's OTLP exporter from a
background thread (the optional extra `otel`). Built from the record rather than from live
events, a turn interrupted by kill -9 is exported whole once its resumed run ends.
"""
