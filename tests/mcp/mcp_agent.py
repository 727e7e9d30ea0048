"""A real `dal mcp` subprocess, driven by the official SDK's own stdio client (tests/mcp)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

CONSOLE = "http://127.0.0.1:8377"


class Agent:
    """One client session with a `dal mcp` server: each call returns (is_error, structured result or text)."""

    def __init__(self, session: ClientSession) -> None:
        self.session = session

    async def call(self, tool: str, args: Any) -> tuple[bool, Any]:
        res = await self.session.call_tool(tool, args)
        text = res.content[0].text if res.content else ""
        return bool(res.isError), (res.structuredContent if not res.isError else text)

    async def ok(self, tool: str, args: Any) -> dict[str, Any]:
        err, out = await self.call(tool, args)
        assert not err, out
        return out

    async def refused(self, tool: str, args: Any) -> str:
        err, out = await self.call(tool, args)
        assert err, out
        return str(out)


def serve(workspace: Path, scenario: Callable[[Agent], Awaitable[Any]], *flags: str,
          argv: list[str] | None = None) -> Any:
    """Start `dal mcp --workspace WORKSPACE --console-url CONSOLE FLAGS` (or `dal ARGV`), run `scenario`
    against it, stop it."""
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    argv = argv or ["mcp", "--workspace", str(workspace), "--console-url", CONSOLE, *flags]
    params = StdioServerParameters(command=sys.executable, args=["-m", "dal", *argv], cwd=str(workspace), env=env)

    async def main() -> Any:
        with open(os.devnull, "w") as quiet:
            async with stdio_client(params, errlog=quiet) as (r, w), ClientSession(r, w) as session:
                await session.initialize()
                return await asyncio.wait_for(scenario(Agent(session)), 120)

    return asyncio.run(main())


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    return subprocess.run([sys.executable, "-m", "dal", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=60)


def runs_of(workspace: Path, key: str) -> list[str]:
    """The run ids of `key` in the workspace's store, as the operator's `dal receipts` lists them."""
    p = cli("receipts", "--json", "--workspace", str(workspace), cwd=workspace)
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    rows = data["runs"] if isinstance(data, dict) else data
    return [r["run_id"] for r in rows if r.get("key") == key]


