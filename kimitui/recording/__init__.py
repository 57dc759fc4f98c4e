"""Recordings: every event of a session, on disk, crash-safe and small.

Format (see ``docs/recording-format.md``): JSON Lines.  Line 1 is a
:class:`RecordingHeader`; every other line is one event as written by
:func:`kimitui.recording.writer.dump_line` (``dump_event`` with chunk offsets as
integer deltas), in the order the Session published them.

Life of a file:

* :class:`RecordingWriter` writes the path it is given: gzip while recording if
  the name ends in ``.gz`` (the cockpit's default names do), plain otherwise.
  Events are buffered in memory by the sink call (O(1), never blocks) and
  written as whole lines by a flusher thread at least every ``flush_interval``
  seconds, each flush ending in a zlib sync flush, so a ``kill -9`` loses at
  most the last second and the file is readable while being written;
* sweep progress is recorded at most once a second per sweep (the Session
  still gets every one; a level's last progress is always kept);
* :meth:`RecordingWriter.close` ends the gzip stream and, for the cockpit's
  default names, renames the file after every profile that ran; then it writes
  the replay index beside it (``.NAME.idx``, :mod:`kimitui.recording.index_file`),
  so :class:`RecordingIndex` opens and seeks it without scanning it (a missing,
  stale or damaged index is rebuilt by the reader).

Readers accept either form and format versions 1 and 2.  A truncated last line
(a crash mid-write, or a writer still running), malformed lines in the middle
and damaged gzip bytes are skipped and reported with their line numbers; the
rest is never lost.
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
    profiles_label,
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
from kimitui.recording.writer import RecordingWriter, dump_line, write_recording

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
    "dump_line",
    "final_path",
    "iter_recording",
    "live_path",
    "load_recording",
    "parse_line",
    "profiles_label",
    "read_recording",
    "resolve_path",
    "spec_from_recording",
    "write_recording",
]
