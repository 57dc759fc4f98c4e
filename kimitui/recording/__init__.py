"""Recordings: every event of a session, on disk, crash-safe and small.

Format (see ``docs/recording-format.md``): JSON Lines.  Line 1 is a
:class:`RecordingHeader`; every other line is one event as written by
:func:`kimitui.events.dump_event`, in the order the Session published them.

Life of a file:

* while a session runs, :class:`RecordingWriter` appends to ``X.jsonl``.  Events
  are buffered in memory by the sink call (O(1), never blocks) and written as
  whole lines by a flusher thread at least every ``flush_interval`` seconds
  (and at once when the buffer grows large), so a ``kill -9`` loses at most the
  last second and the file is readable while being written;
* :meth:`RecordingWriter.close` flushes, then gzips ``X.jsonl`` into
  ``X.jsonl.gz`` (via a temp file + rename) and removes the plain file.  A crash
  during compression leaves the plain file intact.

Readers accept either form (and find ``X.jsonl.gz`` when given ``X.jsonl``
after it was compressed).  A truncated last line (a crash mid-write, or a
writer still running) and malformed lines in the middle are skipped and
reported with their line numbers; the rest is never lost.
"""

from kimitui.recording.format import (
    FORMAT_NAME,
    FORMAT_VERSION,
    PathLike,
    Recording,
    RecordingError,
    RecordingHeader,
    SkippedLine,
    default_recording_path,
    final_path,
    live_path,
    resolve_path,
)
from kimitui.recording.index import RecordingIndex
from kimitui.recording.reader import (
    RecordingReader,
    iter_recording,
    load_recording,
    parse_line,
    read_recording,
    spec_from_recording,
)
from kimitui.recording.writer import RecordingWriter, write_recording

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "PathLike",
    "Recording",
    "RecordingError",
    "RecordingHeader",
    "RecordingIndex",
    "RecordingReader",
    "RecordingWriter",
    "SkippedLine",
    "default_recording_path",
    "final_path",
    "iter_recording",
    "live_path",
    "load_recording",
    "parse_line",
    "read_recording",
    "resolve_path",
    "spec_from_recording",
    "write_recording",
]
