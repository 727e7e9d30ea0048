"""Run hostile cases' commands through DAL's executor with the check bypassed, all in one fresh process, for
test_wall_alone.py: what the wall alone does with each (the DAL process's secret in its environment from the
start, as for hostile_launcher.py, whose {DALPID}, {WS} and trap_proc conventions it shares).

    python wall_alone_launcher.py JOBS.json    # JOBS: [{"workspace", "commands", "allow", "out"}, ...]
                                              # each job writes {"outputs": [[status, output], ...]} to its "out"
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from unittest import mock

from dal.effects import Decision, EffectContext, Policy, execute_checked
from dal.effects.classify.check import find_program
from dal.effects.exec import executor
from dal.effects.plan.shell import ShellDenied, parse_command
from dal.runner.build import build_spec
from dal.runner.inforce import checked_policy


def run_job(job: dict) -> None:
    ws = Path(job["workspace"])
    pid = str(os.getpid())
    trap = ws / "trap_proc"
    if trap.is_dir():
        os.symlink(f"/proc/{pid}/environ", trap / "environ")
    patch = ws / "p.patch"
    if patch.exists():
        patch.write_text(patch.read_text().replace("{DALPID}", pid))
    # the policy a run would check against (its store hidden and protected), with the case's programs
    spec = build_spec(None, workspace=ws, policy_flags={"allow_run": job["allow"]})
    policy: Policy = checked_policy(spec)[0]
    ctx = EffectContext(policy=policy, timeout=10, unsandboxed_as_root=True)
    outputs = []
    for command in job["commands"]:
        command = command.replace("{DALPID}", pid).replace("{WS}", str(ws))
        try:
            plan = parse_command(command)
        except ShellDenied as e:  # DAL's executor runs only what it can parse: nothing to run
            outputs.append(["unparsed", str(e)])
            continue
        names = {c.argv[0] for c in plan.simple_commands()}
        decision = Decision(True, "bypassed in a test", "local", plan=plan,
                            executables=tuple((n, find_program(n) or n) for n in names))
        r = execute_checked(command, decision, ctx)
        outputs.append([r.status, r.stdout + r.stderr])
    Path(job["out"]).write_text(json.dumps({"outputs": outputs}))


def main(jobs_path: str) -> None:
    with mock.patch.object(executor, "recheck", lambda c, p: None):
        for job in json.loads(Path(jobs_path).read_text()):
            run_job(job)


if __name__ == "__main__":
    main(sys.argv[1])
