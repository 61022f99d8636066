"""Observability: structlog configured once (`logs.py`), Prometheus metrics, optional OpenTelemetry."""
