"""SGLang's formats, in one place: what kimitui knows of the server it drives.

Here belong the server's log grammar (its line kinds and their fields), its launch command (render
and read back), what its ``/server_info``, ``/metrics`` and ``/v1/loads`` say and how their
names read, what a profile asks of it, and what differs between SGLang versions.  Nothing else knows
these formats: sources (telemetry, launcher) and consumers (the cockpit, reports) ask this package.

Pure: no I/O, no Textual.  It imports nothing of kimitui but :mod:`kimitui.events` and the pure
setting-name rules of :mod:`kimitui.knobs` (tests/test_house.py checks this), so every layer may use it.
"""
