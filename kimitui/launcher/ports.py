"""Is a TCP port listening on the host, and which process holds it?

Read from ``/proc`` on the host itself (local or over SSH): the listening socket
in ``/proc/net/tcp*`` gives its owner's uid and inode; the process is the one
with an fd linking to ``socket:[inode]`` (``/proc/PID/fd``), named by its
``/proc/PID/cmdline``.  Another user's process cannot be seen without
privileges; then the socket's uid is all there is, and the text says so.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from kimitui.host.base import Host

# The port's hex is compared as a string ("" appended): awk compares two number-like strings as numbers, and
# 70E7 (28903) and 07E8 (2024) both read as 7e8 -- port 28903 was "held" by whatever listened on 2024.
# args: port [quick] -> exit 1 when nothing listens; else tab-separated lines:
#   socket FILE ADDR UID USER     (the first listening socket on that port)
#   pid PID / cmd CMDLINE / comm NAME   (only when the owning process is visible)
_HOLDER = r"""
hex=$(printf '%04X' "$1") mode=${2:-full}
line=$(awk -v p="$hex" 'FNR > 1 && $4 == "0A" { n = split($2, a, ":"); if ((a[n] "") == (p "")) { print FILENAME " " $2 " " $8 " " $10; exit } }' \
  /proc/net/tcp /proc/net/tcp6 2>/dev/null)
[ -n "$line" ] || exit 1
# shellcheck disable=SC2086
set -- $line
file=$1 addr=$2 uid=$3 ino=$4
user=$(getent passwd "$uid" 2>/dev/null | cut -d: -f1)
[ -n "$user" ] || user=$(awk -F: -v u="$uid" '$3 == u { print $1; exit }' /etc/passwd 2>/dev/null)
printf 'socket\t%s\t%s\t%s\t%s\n' "$file" "$addr" "$uid" "$user"
[ "$mode" != quick ] && [ "$ino" != 0 ] || exit 0
pid=$(ls -l /proc/[0-9]*/fd 2>/dev/null | awk -v s="socket:[$ino]" '
  /^\/proc\/[0-9]+\/fd:$/ { split($0, a, "/"); pid = a[3]; next }
  $NF == s && pid != "" { print pid; exit }')
[ -n "$pid" ] || exit 0
printf 'pid\t%s\n' "$pid"
printf 'cmd\t'; tr '\000\n\t' '   ' < "/proc/$pid/cmdline" 2>/dev/null | head -c 1000; printf '\n'
printf 'comm\t'; tr -d '\n\t' < "/proc/$pid/comm" 2>/dev/null; printf '\n'
exit 0
"""


@dataclass(frozen=True)
class PortHolder:
    """Who listens on a port: always the socket's owner; the process when this account can see it."""

    port: int
    socket: str
    """``/proc/net/tcp 0100007F:7531``: where it was found."""
    uid: int | None
    user: str | None
    pid: int | None = None
    command: str | None = None

    @property
    def who(self) -> str:
        if self.user:
            return f"user {self.user}" + (f" (uid {self.uid})" if self.uid is not None else "")
        return f"uid {self.uid}" if self.uid is not None else "an unknown user"

    def describe(self) -> str:
        """One line a person can act on: pid, command line and user, or why the process is not named."""
        if self.pid is not None:
            command = self.command or "?"
            if len(command) > 200:
                command = command[:199] + "…"
            return f"pid {self.pid}, {self.who}: {command}"
        return (f"a process of {self.who} that this account cannot see (another user's, or in another "
                f"container; `sudo ss -ltnp 'sport = :{self.port}'` on the host names it) — {self.socket}")


def _parse(port: int, text: str) -> PortHolder | None:
    fields: dict[str, list[str]] = {}
    for line in text.splitlines():
        key, _, rest = line.partition("\t")
        fields.setdefault(key, rest.split("\t"))
    sock = fields.get("socket")
    if not sock:
        return None
    sock += [""] * (4 - len(sock))
    path, addr, uid_text, user = sock[:4]
    pid_text = (fields.get("pid") or [""])[0]
    command = (fields.get("cmd") or [""])[0].strip()
    if not command:  # a kernel thread or a zombie: no command line, only a name
        comm = (fields.get("comm") or [""])[0].strip()
        command = f"[{comm}]" if comm else ""
    return PortHolder(
        port=port,
        socket=f"{path} {addr}".strip(),
        uid=int(uid_text) if uid_text.isdigit() else None,
        user=user or None,
        pid=int(pid_text) if pid_text.isdigit() else None,
        command=command or None,
    )


async def holder(host: Host, port: int, *, quick: bool = False) -> PortHolder | None:
    """Who listens on ``port`` on ``host``, or None when nothing does.

    ``quick``: the socket only, without the walk over every process's fds (for polling)."""
    args = [str(int(port))] + (["quick"] if quick else [])
    res = await host.run(["sh", "-c", _HOLDER, "sh", *args], timeout=20)
    if res.exit_code != 0:
        return None
    return _parse(int(port), res.stdout)


async def listening(host: Host, port: int) -> str:
    """What listens on ``port`` (pid, user and command line), or ``""`` when nothing does."""
    found = await holder(host, port)
    return found.describe() if found is not None else ""


async def wait_free(host: Host, port: int | None, *, timeout: float = 10.0, interval: float = 0.1) -> str:
    """Wait until nothing listens on ``port``; returns ``""`` or what still holds it at the end."""
    if port is None:
        return ""
    end = time.monotonic() + timeout
    while True:
        if await holder(host, port, quick=True) is None:
            return ""
        if time.monotonic() >= end:
            return await listening(host, port)
        await asyncio.sleep(interval)
