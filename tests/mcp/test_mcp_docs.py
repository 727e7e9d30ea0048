"""docs/mcp.md is tested: its `mcpServers` snippet starts a working server, its tools table is the server's
list (with the read-only marks of the annotations), and the errors it quotes are the server's."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from mcp_agent import Agent, serve

DOC = (Path(__file__).resolve().parents[2] / "docs" / "mcp.md").read_text(encoding="utf-8")


def _snippet() -> dict[str, Any]:
    blocks = re.findall(r"```json\n(.*?)```", DOC, re.S)
    servers = [json.loads(b) for b in blocks if "mcpServers" in b]
    assert len(servers) == 1
    return servers[0]["mcpServers"]["dal"]


def _table() -> dict[str, bool]:
    """tool -> read-only, from the doc's tools table."""
    section = DOC.split("## The tools", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(\w+)` \| (yes|no) \|", section, re.M)
    return {name: ro == "yes" for name, ro in rows}


def test_the_documented_snippet_starts_a_server_whose_tools_are_the_documented_ones(tmp_path: Path) -> None:
    entry = _snippet()
    assert entry["command"] == "dal" and entry["args"][0] == "mcp"
    args = list(entry["args"])
    args[args.index("--workspace") + 1] = str(tmp_path)
    documented = _table()

    async def scenario(a: Agent) -> None:
        tools = {t.name: t.annotations.readOnlyHint for t in (await a.session.list_tools()).tools}
        assert tools == documented
        quoted = re.findall(r"^(run: argument `key` is required.*)$", DOC, re.M)
        assert quoted and quoted[0] == await a.refused("run", {"script": "print(1)"})
        bogus = await a.refused("run", {"script": "print(1)", "key": "k", "bogus": 1})
        assert re.search(r"^run: unknown argument `bogus`; its arguments are: script, path, key, args, policy, "
                         "max_steps, ", bogus)

    # the snippet's own argument list (but for the workspace), run by this interpreter's `dal`
    serve(tmp_path, scenario, argv=args)


# The fields each tool's result has at its top level, as the doc's table lists them (issue 30).
FIELDS = {
    "run": ["run_id", "status", "retry", "key", "blocker", "external_effect", "error", "result", "effects", "output",
            "receipt", "next", "rendered", "new_run"],
    "submit": ["submitted", "job", "note"],
    "check": ["ok", "errors", "warnings", "diagnostics"],
    "check_command": ["decision", "reason", "class", "reads", "writes"],
    "show_receipt": ["run_id", "status", "rendered", "full"],
    "list_waiting": ["waiting"],
    "resume": ["run_id", "status", "rendered"],
}


def _returns(tool: str) -> str:
    section = DOC.split("## The tools", 1)[1].split("\n## ", 1)[0]
    row = re.search(rf"^\| `{tool}` \|.*\| ([^|]*) \|$", section, re.M)
    assert row, tool
    return row.group(1)


def test_each_results_text_is_its_json_and_holds_the_documented_fields(ws: Path) -> None:
    from mcp_agent import cli

    async def call(a: Agent, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        res = await a.session.call_tool(tool, args)
        assert not res.isError and len(res.content) == 1, res.content
        parsed = json.loads(res.content[0].text)  # the text is the JSON, nothing else
        assert parsed == res.structuredContent
        for field in FIELDS[tool]:
            assert f"`{field}`" in _returns(tool), (tool, field)
            assert field in parsed, (tool, field, sorted(parsed))
        return parsed

    async def scenario(a: Agent) -> None:
        ran = await call(a, "run", {"script": 'print(run("echo hi"))\n', "key": "fields:1"})
        assert ran["status"] == "completed" and "completed" in ran["rendered"]
        queued = await call(a, "submit", {"script": 'print("queued")\n', "key": "fields:2"})
        assert {"job_id", "key", "queue", "state"} <= set(queued["job"])
        checked = await call(a, "check", {"script": "let x = \n"})
        assert checked["diagnostics"][0]["line"] == 1 and "^" in checked["diagnostics"][0]["rendered"]
        await call(a, "check_command", {"command": "echo hi"})
        await call(a, "show_receipt", {"run": "fields:1"})
        held = await call(a, "run", {"script": 'run("touch sent.txt")\n', "key": "fields:3"})
        assert held["status"] == "waiting" and "decide" in held and "`decide`" in _returns("run")
        waiting = await call(a, "list_waiting", {})
        assert {"decide", "decision_recorded"} <= set(waiting["waiting"][0])
        assert cli("approve", held["run_id"], cwd=ws).returncode == 0
        resumed = await call(a, "resume", {"run": held["run_id"]})
        assert resumed["status"] == "completed"

    serve(ws, scenario)
