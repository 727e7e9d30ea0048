"""On stdio, stdout is the protocol: whatever a script prints, a command writes or a client sends wrong,
every line the server writes there is a JSON-RPC message. And the SDK stays out of every other command."""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import time
from pathlib import Path

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}
NOISY = ('print("NOT-JSON from print")\nprint(run("echo NOT-JSON from a command"))\n'
         'print(run("cat\"))\nprint(run("ls missing-dir\"))\n'
         'print(parse_json("\\"\\\\ud800\\""))\n')  # a lone surrogate: JSON on the wire cannot carry one


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}


def _read_until(proc: subprocess.Popen[bytes], want: set[int], timeout: float = 60) -> list[bytes]:
    """stdout lines until responses to every id in `want` came (or the server ended)."""
    lines: list[bytes] = []
    seen: set[int] = set()
    sel = selectors.DefaultSelector()
    assert proc.stdout is not None
    sel.register(proc.stdout, selectors.EVENT_READ)
    end = time.monotonic() + timeout
    while not want <= seen and time.monotonic() < end:
        if not sel.select(timeout=1):
            continue
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        msg = json.loads(line)
        if isinstance(msg.get("id"), int):
            seen.add(msg["id"])
    return lines


def test_every_line_on_stdout_is_protocol_whatever_scripts_print_and_clients_send(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "dal", "mcp", "--workspace", str(tmp_path)], cwd=tmp_path,
                            env=_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None
    sent = [
        INIT,
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "run", "arguments": {"script": NOISY, "key": "noisy", "effect_timeout": 5}}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "run", "arguments": {"script": 5}}},
        {"jsonrpc": "2.0", "id": 4, "method": "no/such/method"},
        {"jsonrpc": "2.0", "id": 5, "method": "resources/read", "params": {"uri": "dal://runs/run_nope"}},
        {"jsonrpc": "2.0", "id": 6, "method": "tools/list"},
    ]
    for m in sent:
        proc.stdin.write(json.dumps(m).encode() + b"\n")
    proc.stdin.write(b"this line is not JSON\n")
    proc.stdin.flush()
    lines = _read_until(proc, {1, 2, 3, 4, 5, 6})
    rest, err = proc.communicate(timeout=30)
    lines += rest.splitlines(keepends=True)
    messages = [json.loads(line) for line in lines]  # every line parses: nothing but protocol on stdout
    assert all(m.get("jsonrpc") == "2.0" for m in messages)
    by_id = {m["id"]: m for m in messages if "id" in m}
    ran = by_id[2]["result"]
    assert ran["isError"] is False
    out = ran["structuredContent"]
    assert out["status"] == "completed"
    assert out["output"].startswith("NOT-JSON from print\nNOT-JSON from a command\n")
    # `cat` reads nothing of the client's messages: its stdin is not the protocol's
    assert out["effects"][1]["status"] == "completed" and out["effects"][1]["summary"] == "command completed"
    assert out["effects"][2]["status"] == "failed"
    assert out["output"].endswith("\\ud800\n")  # written as its escape, as DAL writes it everywhere
    assert by_id[3]["result"]["isError"] is True and "argument `script` must be a non-empty string, got 5" in \
        by_id[3]["result"]["content"][0]["text"]
    assert "error" in by_id[4] and "error" in by_id[5]
    assert by_id[5]["error"]["message"]  # no such run (or no store yet: the run of id 2 may not have begun)
    assert len(by_id[6]["result"]["tools"]) == 7
    assert b"Traceback" not in err and b"dal mcp: serving workspace" in err
    assert proc.returncode == 0


def test_without_the_sdk_dal_mcp_says_what_to_install_and_prints_nothing_on_stdout(tmp_path: Path) -> None:
    shim = tmp_path / "shim" / "mcp"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text('raise ImportError("no module named mcp (a test stands in for it)")\n')
    env = _env()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(shim.parent), env.get("PYTHONPATH")]))
    p = subprocess.run([sys.executable, "-m", "dal", "mcp", "--workspace", str(tmp_path)], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert p.returncode == 2
    assert p.stdout == ""
    from dal.core.extras import install_hint

    assert install_hint("mcp") in p.stderr and "Traceback" not in p.stderr  # as this copy was installed


def test_a_bad_policy_file_stops_the_server_before_it_serves(tmp_path: Path) -> None:
    (tmp_path / "bad.toml").write_text("[run]\nallow = 3\n")
    p = subprocess.run([sys.executable, "-m", "dal", "mcp", "--workspace", str(tmp_path), "--policy", "bad.toml"],
                       cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert p.returncode == 2 and p.stdout == ""
    assert "bad.toml" in p.stderr and "Traceback" not in p.stderr


PROBE = """
import sys
from dal.cli.main import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print("LOADED:" + ",".join(m for m in ("mcp", "dal.mcp", "anyio", "pydantic") if m in sys.modules))
"""


def test_no_other_command_imports_the_sdk(tmp_path: Path) -> None:
    (tmp_path / "s.dal").write_text('print(run("echo x"))\n')
    for args in (["run", "s.dal", "-q"], ["check", "s.dal"], ["receipts"], ["--help"]):
        p = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=tmp_path, env=_env(), capture_output=True,
                           text=True, timeout=60)
        line = [x for x in p.stdout.splitlines() if x.startswith("LOADED:")][-1]
        assert line == "LOADED:", (args, line)
