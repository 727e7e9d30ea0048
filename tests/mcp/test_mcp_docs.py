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
