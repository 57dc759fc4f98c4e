"""Live facts from a GPU host into the Session.

- :mod:`.agent` runs *on* the GPU host (stdlib + pynvml, shipped over the Host).
- :mod:`.gpu` ``GpuStream`` starts it and turns its frames into GPU events.
- :mod:`.logs` ``LogFollower`` follows the server's journal or log file, resumably.
- SGLang log lines become typed fields in :mod:`kimitui.sglang.log` (shared with the launcher).
- :mod:`.metrics_poll` ``MetricsPoller`` polls /metrics, /server_info, /v1/loads, /health.
"""
