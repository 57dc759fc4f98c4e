"""Run the host's own SGLang parser over a target's command lines, before a swap touches anything.

The script and the reading of its answer are pure (:mod:`kimitui.sglang.preflight`); this module
picks the interpreter (the one the launch command runs; on a simulated host, the one that runs the
simulator), sends every process of the deployment in one call, and turns what can go wrong on the
way (no Python, a timeout, a dropped link) into an answer that says so: a broken check warns, it
never blocks an operator.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import replace

from kimitui.host.base import CommandTimeout, Host, HostError
from kimitui.launcher.profiles import sim_python
from kimitui.profiles import Profile, deployment
from kimitui.sglang.preflight import HostAnswer, PreflightPlan, could_not_check, process_args, read_answer

PREFLIGHT_TIMEOUT_S = 60.0
"""Importing SGLang's parser takes seconds on a busy host; a minute means something is wrong."""


def plan_for(host: Host, target: Profile, *, simulated: bool) -> PreflightPlan:
    """Every SGLang process of ``target`` as a real host would run it, and the Python that checks them.

    The flags are always the real command's (a simulated host is asked about what a real one would
    run, and refuses what that version's parser refuses); all of a multi-node or PD deployment is
    asked of the home host's Python.
    """
    specs = deployment(target)
    processes = tuple(p for spec in specs if (p := process_args(spec.role, spec.argv)) is not None)
    if simulated:
        return PreflightPlan(python=sim_python(host) or sys.executable, processes=processes, simulated=True)
    python = specs[0].argv[0] if specs else target.launcher.python_path()
    return PreflightPlan(python=python, processes=processes, env=tuple(sorted(target.env.items())),
                         workdir=target.launcher.workdir)


async def ask_host_sglang(host: Host, target: Profile, *, simulated: bool,
                          timeout: float = PREFLIGHT_TIMEOUT_S) -> HostAnswer:
    """What the host's SGLang says of ``target``'s command lines (one remote call for all its processes)."""
    return (await ask_host_sglang_each(host, [target], simulated=simulated, timeout=timeout))[0]


async def ask_host_sglang_each(host: Host, targets: Sequence[Profile], *, simulated: bool,
                               timeout: float = PREFLIGHT_TIMEOUT_S) -> list[HostAnswer]:
    """What the host's SGLang says of each profile: one remote call per interpreter they name.

    A check that cannot run (no Python, a timeout, a dropped link) is an answer saying why.
    """
    plans = [plan_for(host, t, simulated=simulated) for t in targets]
    answers: list[HostAnswer] = [could_not_check("no SGLang process in its command")] * len(plans)
    for run in dict.fromkeys(p.same_run() for p in plans if p.processes):
        mine = [i for i, p in enumerate(plans) if p.same_run() == run and p.processes]
        joint = replace(plans[mine[0]], processes=tuple(replace(proc, role=f"{i}{_SEP}{proc.role}")
                                                        for i in mine for proc in plans[i].processes))
        python = joint.python
        try:
            result = await host.run(joint.argv(), input=joint.stdin(), env=dict(joint.env) or None, timeout=timeout)
            answer = read_answer(result.stdout, result.stderr, result.exit_code if result.exit_code is not None else -1)
        except CommandTimeout:
            answer = could_not_check(f"{python} on {host.name} did not answer within {timeout:.0f} s")
        except HostError as exc:
            answer = could_not_check(f"cannot run {python} on {host.name}: {exc}")
        for i in mine:
            own = tuple(replace(c, role=c.role.partition(_SEP)[2]) for c in answer.checks
                        if c.role.partition(_SEP)[0] == str(i))
            answers[i] = HostAnswer(answer.version, own, answer.problem)
    return answers


_SEP = "\t"
"""Joins a profile's index to its process's role in a joint request (a role never holds a tab)."""
