"""Run one DAL script through the real runner in a fresh process, for the hostile corpus.

A fresh process because the attacks read the DAL process's own /proc/PID/environ: the secret must be in
its environment from the start (a variable set later in a running process does not show there). The
process stands for `dal run`: it makes the workspace's `trap_proc/environ` link point at its own environ
and puts its pid where the script and the patch say {DALPID}, as an attacker who guessed it would (and the
workspace's absolute path where the script says {WS}).

    python hostile_launcher.py JOB.json    # writes {"stdout": ..., "receipt": ...} to JOB["out"]
"""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path

from dal.runner.build import build_spec
from dal.runner.runner import execute
from dal.runner.spec import RunHooks


def main(job_path: str) -> None:
    job = json.loads(Path(job_path).read_text())
    ws = Path(job["workspace"])
    pid = str(os.getpid())
    trap = ws / "trap_proc"
    if trap.is_dir():
        os.symlink(f"/proc/{pid}/environ", trap / "environ")
    patch = ws / "p.patch"
    if patch.exists():
        patch.write_text(patch.read_text().replace("{DALPID}", pid))
    script = Path(job["script"])
    script.write_text(script.read_text().replace("{DALPID}", pid).replace("{WS}", str(ws)))
    buf = io.StringIO()
    spec = build_spec(script, workspace=ws, policy_flags={"allow_run": job["allow"]}, use_sandbox=job["wall"],
                      effect_timeout=10)
    report = execute(spec, RunHooks(write=buf.write, handle_signals=False))
    Path(job["out"]).write_text(json.dumps({"stdout": buf.getvalue(), "receipt": report.receipt}))


if __name__ == "__main__":
    main(sys.argv[1])
