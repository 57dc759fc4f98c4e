"""Follow the SGLang server's log over a Host; publish parsed lines; resume without loss.

Two sources, each with an exact resume point:

- **journal** (systemd profiles): ``journalctl -u UNIT -f -o json``.  JSON output
  is chosen over ``-o short-iso --show-cursor`` because ``--show-cursor`` prints
  the cursor only when journalctl exits, which never happens cleanly when the
  link drops; ``-o json`` carries ``__CURSOR`` on *every* entry, plus the
  entry's own timestamp and the bare MESSAGE (no syslog prefix to strip).
  Resuming is ``--after-cursor LAST``: journald guarantees nothing is skipped
  or repeated.  A half-received JSON line (the link died mid-line) is not
  published and its cursor not taken, so it comes again after the resume.
- **file** (plain-process profiles): ``tail -F -n +K FILE``, piped through
  ``sed -u`` that ends every complete line with a marker (U+001E).  The cursor is
  the line number: bytes cannot be counted exactly from decoded text, lines
  can.  A line without the marker was cut by a dropped link: it is not
  published or counted and arrives whole after the resume.

Both run under a small ``sh`` that reads stdin: when the link drops, sshd
closes it, the shell kills its reader and exits (``tail --pid`` follows it),
so no ``tail``/``journalctl`` is left on the host.

Every line becomes a :class:`~kimitui.events.LogLine` (via :mod:`kimitui.sglang.log`),
Decode lines also a :class:`~kimitui.events.ServerStats` (``source="log"``).
Failures are published as :class:`~kimitui.events.ErrorEvent`, never raised.

Known limit (file mode): if the file is rotated while the link is down, the
follower notices the new inode on resume and starts the new file from its
first line; a rotation *while* streaming is followed by ``tail -F`` but the
line count then continues from the old file's.
"""

from __future__ import annotations

import contextlib
import json
import time
from typing import Any

from kimitui.events import ErrorEvent, LogLine
from kimitui.host.base import Host, HostError, Stream
from kimitui.session import Session
from kimitui.supervised import RestartingTask
from kimitui.sglang.log import MAX_LINE_CHARS, is_kind, redact_secrets, split_glued, to_event, to_stats

MARK = "\x1e"
# stdin is the lifeline: a dropped SSH link closes it (sshd does not kill a command that has no PTY).
# A watcher waits for that EOF and kills the reader; the shell waits for the reader, so the stream
# also ends (with its status) when the reader fails by itself.  tail follows its shell out (--pid).
_LIFELINE = '{ cat <&3; kill $p; } >/dev/null 2>&1 & wait $p'
_TAIL_SCRIPT = (
    'exec 3<&0; tail -F --pid=$$ -n "+$2" -- "$1" </dev/null | sed -u "s/\\$/' + MARK + '/" & p=$!; ' + _LIFELINE
)
_JOURNAL_SCRIPT = 'exec 3<&0; journalctl "$@" </dev/null & p=$!; ' + _LIFELINE


class LogFollower(RestartingTask):
    """Follows one unit's journal or one file; ``cursor`` is where it would resume."""

    label = "log"

    def __init__(
        self,
        host: Host,
        session: Session,
        *,
        unit: str | None = None,
        path: str | None = None,
        from_cursor: str | None = None,
        backlog: int = 200,
        user_unit: bool = False,
        reconnect_timeout_s: float = 30.0,
        max_backoff_s: float = 30.0,
        node: str | None = None,
        home: str | None = None,
    ) -> None:
        """``node``: the deployment process whose log this is (its lines carry it); ``home``: the host name
        its lines say (the deployment's home, when the log is read on another node)."""
        if (unit is None) == (path is None):
            raise ValueError("LogFollower needs exactly one of unit= or path=")
        super().__init__(host, reconnect_timeout_s=reconnect_timeout_s, max_backoff_s=max_backoff_s)
        self.session = session
        self.unit = unit
        self.path = path
        self.node = node
        self.home = home or host.name
        self.cursor = from_cursor
        """Journal cursor of the last published entry, or the last published line number (file)."""
        self.backlog = backlog
        self.user_unit = user_unit
        self.source = f"journal:{unit}" if unit else str(path)
        self.lines = 0
        self.starts = 0
        self.bad_lines = 0
        """Lines whose conversion failed (a bug): each was still published, as plain text."""
        self._inode: str | None = None
        self._stream: Stream | None = None

    # -- lifecycle -----------------------------------------------------------------
    def _task_name(self) -> str:
        return f"logs-{self.source}"

    async def stop(self) -> None:
        self._stopping = True
        stream = self._stream
        if stream is not None:
            with contextlib.suppress(Exception):
                await stream.close_stdin()
                await stream.stop(grace_s=1.0)
        await self._end_task()

    # -- commands ------------------------------------------------------------------
    def journal_argv(self) -> list[str]:
        argv = ["sh", "-c", _JOURNAL_SCRIPT, "kimitui-journal"]
        if self.user_unit:
            argv.append("--user")
        argv += ["-u", str(self.unit), "-f", "-o", "json", "--no-pager"]
        if self.cursor:
            argv += ["--after-cursor", self.cursor]
        else:
            argv += ["-n", str(self.backlog)]
        return argv

    def file_argv(self, start_line: int) -> list[str]:
        return ["sh", "-c", _TAIL_SCRIPT, "kimitui-tail", str(self.path), str(start_line)]

    async def _file_start_line(self) -> int:
        """The line to resume at (1-based); the end of the file minus ``backlog`` the first time."""
        inode = None
        with contextlib.suppress(HostError):
            res = await self.host.run(["stat", "-Lc", "%i", str(self.path)], timeout=15)
            inode = res.stdout.strip() if res.ok else None
        if self.cursor is not None:
            if inode and self._inode and inode != self._inode:
                self._error("log file was replaced while disconnected; following the new file from its start")
                self.cursor = "0"
            self._inode = inode or self._inode
            try:
                return int(self.cursor) + 1
            except ValueError:
                self._error(f"bad file cursor {self.cursor!r}; starting at the end of {self.path}")
        self._inode = inode
        # a HostError here propagates: with the link down, "0 lines" would mean re-reading the whole file
        res = await self.host.run(["sh", "-c", 'wc -l < "$1" 2>/dev/null || echo 0', "kimitui-wc", str(self.path)],
                                  timeout=30)
        try:
            count = int(res.stdout.strip() or 0)
        except ValueError:
            count = 0
        start = max(1, count + 1 - self.backlog)
        self.cursor = str(start - 1)
        return start

    # -- the loop ------------------------------------------------------------------
    async def _life(self) -> bool:
        await self._run_once()
        if not self._stopping:
            self._error("log stream interrupted; resuming", f"cursor {self.cursor}")
        return False

    async def _run_once(self) -> None:
        try:
            if self.unit is not None:
                argv = self.journal_argv()
                handle = self._journal_line
            else:
                argv = self.file_argv(await self._file_start_line())
                handle = self._file_line
            stream = await self.host.stream(argv)
        except Exception as exc:  # noqa: BLE001
            self._error("could not start following the log", str(exc))
            return
        self._stream = stream
        self.starts += 1
        try:
            async for line in stream:  # stdin stays open: its EOF is the remote side's signal to stop
                handle(line)
        except Exception as exc:  # noqa: BLE001
            if not self._stopping:
                self._error("log stream failed", str(exc))
        finally:
            with contextlib.suppress(Exception):
                await stream.stop(grace_s=1.0)
            self._stream = None
        said = stream.stderr_tail.text().strip() if stream.stderr_tail is not None else ""
        if said and not self._stopping:
            self._error("log follower said", said[-500:])
            if self.unit is not None and self.cursor and "cursor" in said.lower():
                # the journal no longer has that entry (rotated, vacuumed, another machine's cursor)
                self._error("journal cursor not found; continuing from the newest entries",
                            f"entries after {self.cursor} that were rotated away are lost")
                self.cursor = None

    # -- lines -> events -------------------------------------------------------------
    def _publish_line(self, raw: str, cursor: str, t: float | None) -> None:
        """Publish one line (and its stats); never raises: the cursor has already moved past it."""
        try:
            pieces = split_glued(raw)  # a tqdm bar with a log line glued on is two lines
        except Exception:  # noqa: BLE001
            pieces = [raw]
        for piece in pieces:
            try:
                event = to_event(piece, host=self.home, source=self.source, cursor=cursor, t=t)
                if self.node is not None:
                    event = event.model_copy(update={"node": self.node})
                stats = None
                if is_kind(event, "decode", "eplb"):  # the event's fields are the parse: no second parse
                    stats = to_stats(event, host=self.home, t=event.t)
            except Exception as exc:  # noqa: BLE001 - a converter bug costs the fields, never the line
                self.bad_lines += 1
                if self.bad_lines == 1:
                    self._error("a log line could not be converted; it is kept as plain text",
                                f"{type(exc).__name__}: {exc}"[:300])
                event = LogLine(t=time.time() if t is None else t, host=self.home, raw=redact_secrets(piece[:MAX_LINE_CHARS]),
                                fields={"parse_error": type(exc).__name__}, source=self.source, cursor=cursor,
                                node=self.node)
                stats = None
            self.session.publish(event)
            if stats is not None:
                self.session.publish(stats)
            self.lines += 1

    def _file_line(self, line: str) -> None:
        if not line.endswith(MARK):
            return  # cut short by a dropped link: it comes again, whole, after the resume
        number = int(self.cursor or 0) + 1
        self.cursor = str(number)
        self._publish_line(line[:-1].removesuffix("\r"), str(number), None)

    def _journal_line(self, line: str) -> None:
        try:
            entry: dict[str, Any] = json.loads(line)
            cursor = entry["__CURSOR"]
        except (ValueError, KeyError, TypeError):
            return  # partial (link dropped) or not an entry: the resume re-delivers it
        message = entry.get("MESSAGE")
        if isinstance(message, list):  # journald's encoding of non-UTF-8 / control characters
            message = bytes(b for b in message if isinstance(b, int) and 0 <= b < 256).decode("utf-8", "replace")
        elif message is None:
            message = ""
        elif "\\u" in line and isinstance(message, str):  # a lone surrogate escape: no recording could write it
            message = message.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
        t = None
        with contextlib.suppress(KeyError, ValueError, TypeError):
            t = int(entry["__REALTIME_TIMESTAMP"]) / 1e6
        self.cursor = str(cursor)
        for part in str(message).split("\n") or [""]:
            self._publish_line(part, self.cursor, t)

    def _error(self, message: str, detail: str = "") -> None:
        self.session.publish(ErrorEvent(host=self.home, source="logs", message=message, detail=detail))
