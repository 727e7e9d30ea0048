"""Run one command in forked children and kill each with SIGKILL at a chosen instant (tests/effects/test_orphans.py).

argv: WORKSPACE WALL(0/1) CGROUPS(0/1) COMMAND DELAY_MS...  Each child runs COMMAND through run_effect and is
killed DELAY_MS after it starts; the driver waits for each and prints how many it killed."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

from dal.effects import EffectContext, Policy, run_effect
from dal.effects.wall import limits

ws, wall, cgroups, command = Path(sys.argv[1]), sys.argv[2] == "1", sys.argv[3] == "1", sys.argv[4]
if not cgroups:
    limits._unavailable.update({"pids", "memory", "v2"})  # as for an operator without cgroups
policy = Policy.load(ws)
ctx = EffectContext(policy=policy, use_sandbox=wall, unsandboxed_as_root=True, timeout=20)
run_effect("true", ctx)  # warm: the probe, the parser, the policy's tables
killed = 0
for ms in sys.argv[5:]:
    pid = os.fork()
    if pid == 0:
        def die(delay: float = float(ms) / 1000) -> None:
            time.sleep(delay)
            os.kill(os.getpid(), signal.SIGKILL)

        threading.Thread(target=die, daemon=True).start()
        run_effect(command, ctx)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    killed += os.WIFSIGNALED(status)
print(killed)
