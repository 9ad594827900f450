"""Know it is healthy: request and conversation ids carried through every log line, task and
model call (`context`), JSON logs (`logs`), OpenTelemetry traces of a turn (`tracing`, off
unless OTEL_* variables configure an exporter) and background-task metrics (`tasks`)."""
