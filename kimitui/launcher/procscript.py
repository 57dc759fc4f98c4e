"""POSIX shell helpers the process launcher runs on the host (local or SSH).

Each script is a constant: every variable part reaches it as a positional
argument (``sh -c SCRIPT sh ARG...``), never pasted into the text, so a value
like ``; touch /tmp/x`` or ``$(...)`` stays an inert string.  They need only
``sh``, ``setsid``, ``ps`` and ``/proc`` — all present on any Linux GPU host.

The identity of a started server is (pid, start time in clock ticks, run id):
the run id is an environment variable ``KIMITUI_RUN_ID`` the server and all its
children inherit.  Nothing is signalled unless it carries that marker, so a
recycled pid can never make kimitui kill a stranger.
"""

from __future__ import annotations

MARKER_VAR = "KIMITUI_RUN_ID"

# Shared functions: `ours PID` (carries our marker), `starttime PID`,
# `members PGID` (live, non-zombie pids of the group).
_COMMON = r"""
ours() { tr '\0' '\n' < "/proc/$1/environ" 2>/dev/null | grep -qxF "KIMITUI_RUN_ID=$runid"; }
starttime() {
  s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  r=${s##*) }
  # shellcheck disable=SC2086
  set -- $r
  [ "$1" = Z ] && return 1
  echo "${20}"
}
members() { ps -eo pid=,pgid=,stat= | awk -v g="$1" '$2 == g && $3 !~ /^Z/ { print $1 }'; }
"""

# args: rundir log pidfile workdir argv...  (workdir "": stay where the shell starts)
# exit 4: the workdir cannot be entered.
START = r"""
set -u
rundir=$1 log=$2 pidf=$3 wd=$4; shift 4
umask 077
mkdir -p "$rundir" || exit 2
: > "$log" || exit 2
rm -f "$pidf" "$pidf.tmp"
if [ -n "$wd" ]; then
  cd -- "$wd" 2>/dev/null || { echo "launcher.workdir $wd: no such folder on this host (or not enterable)" >&2; exit 4; }
fi
setsid sh -c 'echo $$ > "$0.tmp" && mv "$0.tmp" "$0" && exec "$@"' "$pidf" "$@" >>"$log" 2>&1 </dev/null &
i=0
while [ ! -s "$pidf" ]; do
  i=$((i + 1))
  if [ "$i" -gt 1000 ]; then echo "the server's pid file $pidf never appeared" >&2; exit 3; fi
  sleep 0.01
done
pid=$(cat "$pidf")
s=$(cat "/proc/$pid/stat" 2>/dev/null) || { echo "$pid -"; exit 0; }
r=${s##*) }
# shellcheck disable=SC2086
set -- $r
echo "$pid ${20}"
"""

# args: pid starttime runid  -> prints one of: alive | gone | foreign
INSPECT = (
    r"""
set -u
pid=$1 st=$2 runid=$3
"""
    + _COMMON
    + r"""
now=$(starttime "$pid") && {
  if [ "$now" = "$st" ] && ours "$pid"; then echo alive; else
    # the leader's pid was reused: is anything of ours left in its old group?
    echo foreign; fi
  exit 0
}
left=$(members "$pid")
for m in $left; do ours "$m" || { echo foreign; exit 0; }; done
if [ -n "$left" ]; then echo alive; else echo gone; fi
"""
)

# args: pid starttime runid grace_s  -> prints: stopped-term | stopped-kill | gone
# exit 5: refused (the pid or its group is not ours), exit 6: survived SIGKILL.
STOP = (
    r"""
set -u
pid=$1 st=$2 runid=$3 grace=$4
"""
    + _COMMON
    + r"""
verify() {
  if now=$(starttime "$pid"); then
    [ "$now" = "$st" ] && ours "$pid" && return 0
    return 1
  fi
  for m in $(members "$pid"); do ours "$m" || return 1; done
  return 0
}
[ -z "$(members "$pid")" ] && { echo gone; exit 0; }
verify || { echo "pid $pid is not a process kimitui started (start time or KIMITUI_RUN_ID marker differ); not signalling it" >&2; exit 5; }
kill -s TERM -- "-$pid" 2>/dev/null
ticks=$(awk -v g="$grace" 'BEGIN { print int(g * 20) }')
i=0
while [ -n "$(members "$pid")" ]; do
  i=$((i + 1))
  if [ "$i" -gt "$ticks" ]; then
    verify || { echo "process group $pid changed owner during stop; not killing it" >&2; exit 5; }
    kill -s KILL -- "-$pid" 2>/dev/null
    j=0
    while [ -n "$(members "$pid")" ]; do
      j=$((j + 1)); [ "$j" -gt 100 ] && { echo "process group $pid survived SIGKILL" >&2; exit 6; }
      sleep 0.05
    done
    echo stopped-kill; exit 0
  fi
  sleep 0.05
done
echo stopped-term
"""
)

# args: path...  -> prints each readable file as one line "PATH\tCONTENT" (content single-line JSON)
CAT_RECORDS = r"""
for f in "$@"; do
  [ -f "$f" ] || continue
  printf '%s\t' "$f"; tr -d '\n' < "$f"; printf '\n'
done
"""

# args: base  -> run records under base/*/run.json
LIST_RECORDS = r"""
base=$1
for f in "$base"/*/run.json; do
  [ -f "$f" ] || continue
  printf '%s\t' "$f"; tr -d '\n' < "$f"; printf '\n'
done
"""

# args: none -> the per-user state dir
STATE_HOME = r"""printf '%s\n' "${XDG_STATE_HOME:-$HOME/.local/state}" """

# args: dir keep -> delete all but the newest KEEP start logs kimitui wrote there (named STAMP-RUNID.log)
PRUNE_LOGS = r"""
dir=$1 keep=$2
ls -1t "$dir" 2>/dev/null | grep -E '^[0-9]{8}-[0-9]{6}-[0-9a-f]{8}\.log$' | tail -n "+$((keep + 1))" |
while read -r f; do rm -f -- "$dir/$f"; done
exit 0
"""

# args: path... -> remove files kimitui wrote (only the given ones; never a directory)
REMOVE = r"""for f in "$@"; do [ -f "$f" ] && rm -f -- "$f"; done; exit 0"""
