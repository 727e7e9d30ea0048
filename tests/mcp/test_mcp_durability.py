"""The server is killed (-9) in the middle of an agent's run: the agent's `resume` continues from the journal,
and what ran before the kill does not run again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from mcp_agent import Agent, runs_of, serve

SCRIPT = 'run("echo once >> count.txt")\nrun("sleep 2")\nrun("touch done.txt")\nprint("end")\n'


def test_an_agent_resumes_a_run_whose_server_was_killed_and_nothing_runs_twice(tmp_path: Path) -> None:
    ws = tmp_path
    (ws / "dal.toml").write_text("")
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    proc = subprocess.Popen([sys.executable, "-m", "dal", "mcp", "--workspace", str(ws)], cwd=ws, env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdin is not None
    for m in (
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "run", "arguments": {"script": SCRIPT, "key": "slow"}}},
    ):
        proc.stdin.write(json.dumps(m).encode() + b"\n")
    proc.stdin.flush()
    deadline = time.monotonic() + 30
    while not (ws / "count.txt").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)  # inside `sleep 2` now
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert (ws / "count.txt").read_text() == "once\n" and not (ws / "done.txt").exists()
    (died,) = runs_of(ws, "mcp:slow")

    async def scenario(a: Agent) -> None:
        shown = await a.ok("show_receipt", {"run": "slow"})
        assert shown["run_id"] == died and shown["status"] == "died" and shown["retry"] == "resume"
        done = await a.ok("resume", {"run": died})
        assert done["status"] == "completed" and done["output"] == "end\n"

    serve(ws, scenario)
    assert (ws / "count.txt").read_text() == "once\n"  # the append before the kill was not made again
    assert (ws / "done.txt").exists()
