"""Prometheus metrics served by a worker (docs/observability.md, "Metrics")."""

from weft.workers.metrics.worker_metrics import WorkerMetrics

__all__ = ["WorkerMetrics"]
