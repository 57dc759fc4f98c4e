"""kimitui's figures for the monitoring stack teams already run: a Prometheus endpoint (``docs/prometheus.md``).

A consumer of the session like the recorder: it never touches the TUI and works the same on live or
replayed events.
"""

from kimitui.export.prometheus import MetricsExporter
from kimitui.export.serve import DEFAULT_ADDR, MetricsPortError, MetricsServer, serve, start_metrics

__all__ = ["DEFAULT_ADDR", "MetricsExporter", "MetricsPortError", "MetricsServer", "serve", "start_metrics"]
