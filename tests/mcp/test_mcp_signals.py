"""`dal mcp` stopped by a signal (systemd's SIGTERM, Ctrl-C, the agent's host closing) while an agent's run is
inside a non-idempotent command: the command finishes within its grace, the run ends
`interrupted` and its result reaches the agent, the server exits 0, and the agent's `resume` finishes the run
with no person's decision and nothing run twice — as `dal run` under the same signal."""

from __future__ import annotations

import asyncio
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp_agent import Agent, serve

SCRIPT = 'run("echo start >> log.txt")\nrun("sleep 1")\nrun("echo end >> log.txt")\n'
TOML = '[run]\nallow = ["sleep", "echo"]\n\n[programs.sleep]\nclass = "local"\nidempotent = false\n'


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}


def _serve_in_shell(ws: Path, scenario: Any) -> Any:
    """`dal mcp` under `sh`, which records its exit status and stderr; the scenario gets the server's pid."""
    dal = " ".join(shlex.quote(a) for a in (sys.executable, "-m", "dal", "mcp", "--workspace", str(ws)))
    line = f"{dal} 2> mcp.err; echo $? > mcp.rc"
    params = StdioServerParameters(command="/bin/sh", args=["-c", line], cwd=str(ws), env=_env())

    async def main() -> Any:
        with open(os.devnull, "w") as quiet:
            async with stdio_client(params, errlog=quiet) as (r, w), ClientSession(r, w) as session:
                await session.initialize()
                return await asyncio.wait_for(scenario(Agent(session)), 60)

    return asyncio.run(main())


def _server_pid(ws: Path) -> int:
    """The `dal mcp` process: the one whose command line names this workspace."""
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            argv = (p / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"mcp" in argv and str(ws).encode() in argv and b"-m" in argv:
            return int(p.name)
    raise AssertionError("no dal mcp process")


def test_sigterm_stops_the_run_as_interrupted_the_agent_gets_it_and_resumes_it_alone(tmp_path: Path) -> None:
    ws = tmp_path.resolve()
    (ws / "dal.toml").write_text(TOML)

    async def stopped(a: Agent) -> dict[str, Any]:
        call = asyncio.create_task(a.call("run", {"script": SCRIPT, "key": "k"}))
        end = time.monotonic() + 30
        while not (ws / "log.txt").exists() and time.monotonic() < end:
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)  # inside `sleep 1`
        os.kill(_server_pid(ws), signal.SIGTERM)
        err, out = await call
        assert not err, out
        return out

    out = _serve_in_shell(ws, stopped)
    assert out["status"] == "interrupted" and out["retry"] == "resume", out
    assert "the server was stopped (SIGTERM)" in out["note"] and f"`resume` with run {out['run_id']}" in out["note"]
    # the command under way finished within its grace and was journaled
    assert [e["status"] for e in out["effects"]] == ["completed", "completed"], out["effects"]
    deadline = time.monotonic() + 10
    while not (ws / "mcp.rc").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    err = (ws / "mcp.err").read_text()
    assert (ws / "mcp.rc").read_text().strip() == "0", err
    assert "Traceback" not in err and "dal mcp: stopped (SIGTERM)" in err, err

    async def resumed(a: Agent) -> None:
        done = await a.ok("resume", {"run": out["run_id"]})
        assert done["status"] == "completed", done

    serve(ws, resumed)
    assert (ws / "log.txt").read_text() == "start\nend\n"  # nothing twice, nothing left for a person


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGQUIT])  # a closed terminal; Ctrl-\
def test_sighup_with_no_run_under_way_ends_the_server_at_once(tmp_path: Path, sig: int) -> None:
    p = subprocess.Popen([sys.executable, "-m", "dal", "mcp", "--workspace", str(tmp_path)], cwd=tmp_path, env=_env(),
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stderr is not None
    assert b"serving workspace" in p.stderr.readline()  # its handlers are in place once it serves
    time.sleep(0.3)
    t0 = time.monotonic()
    p.send_signal(sig)  # its stdin still open: the server does not wait for the client's next line
    _out, err = p.communicate(timeout=20)
    assert p.returncode == 0 and time.monotonic() - t0 < 5, err
    assert b"Traceback" not in err and f"dal mcp: stopped ({signal.Signals(sig).name})".encode() in err, err


def test_an_agent_whose_key_is_busy_is_told_what_it_can_do(tmp_path: Path) -> None:
    ws = tmp_path.resolve()
    (ws / "dal.toml").write_text(TOML)
    (ws / "slow.dal").write_text('run("echo start >> log.txt")\nrun("sleep 3")\n')
    holder = subprocess.Popen([sys.executable, "-m", "dal", "run", "--key", "mcp:k", "slow.dal"], cwd=ws, env=_env(),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        end = time.monotonic() + 30
        while not (ws / "log.txt").exists() and time.monotonic() < end:
            time.sleep(0.05)

        async def busy(a: Agent) -> str:
            return await a.refused("run", {"script": SCRIPT, "key": "k"})

        text = serve(ws, busy)
    finally:
        holder.wait(30)
    assert "is being run by process" in text and "--wait" not in text, text
    assert "call `run` (or `resume`) with the same key again once that run has ended" in text, text
