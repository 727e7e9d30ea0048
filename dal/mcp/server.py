"""`dal mcp`: the tools of dal/mcp/tools.py over the Model Context Protocol on stdio, with the official SDK's
low-level server (the only module that imports `mcp`).

On stdio everything written to stdout is protocol. Before anything else runs, the protocol's two streams
are moved to descriptors of their own, and descriptors 0 and 1 are pointed at /dev/null and stderr: no
print, warning, traceback or child process of DAL can write into the protocol, and no command a script
runs can read the client's messages.

SIGTERM, SIGINT, SIGHUP and SIGQUIT (systemd stopping it, Ctrl-C, the agent's host closing) stop the server as they
stop `dal run`: the run under way stops at its next step (a command under way gets its grace,
DAL_STOP_GRACE), ends `interrupted` with its receipt, its result goes to the agent, and the server exits 0.
The runs execute in worker threads, where the runner cannot take signals itself: the server takes them in
the main thread and stops the runs through the API (dal.api.interrupt_runs)."""

from __future__ import annotations

import io
import os
import signal
import sys
from typing import Any

from dal.mcp.arguments import BadArguments, input_schema
from dal.mcp.ceiling import Widening
from dal.mcp.tools import TOOLS, DalTools, ToolFailure

RESOURCE_TEMPLATE = "dal://runs/{run_id}"
INSTRUCTIONS = """\
DAL runs tool-loop scripts under the operator's deny-by-default policy: every step is counted, every shell
command is checked before it runs, effects are journaled (a second run of a key resumes instead of repeating)
and every run leaves a receipt (dal://runs/<run_id>). Your keys are kept as mcp:<key>. You may narrow the
policy and lower budgets, never widen them. You cannot approve, deny or resolve anything: a run that waits
for a person returns where the person decides; call `resume` after they have."""


def claim_stdio() -> tuple[int, int]:
    """The protocol's stdin and stdout as new descriptors; 0 becomes /dev/null and 1 a copy of stderr."""
    proto_in, proto_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    sys.stdout.flush()
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return proto_in, proto_out


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)


class _Stop:
    """The server's calls in flight, and the signal that stopped it (None: running)."""

    def __init__(self) -> None:
        self.signal: str | None = None
        self.calls = 0


def serve(tools: DalTools, proto_in: int, proto_out: int) -> int:
    import anyio

    stop = _Stop()
    anyio.run(_serve, tools, proto_in, proto_out, stop)
    if stop.signal is not None:
        sys.stderr.write(f"dal mcp: stopped ({stop.signal})\n")
    return 0


async def _on_signals(stop: _Stop, scope: Any) -> None:
    """The first stop signal: no new calls, the runs under way asked to stop until every call has returned
    (asked again and again: a run may begin after the first ask), its result sent; then the server ends.
    Later signals change nothing (the receiver stays open: the default action would kill the process)."""
    import anyio

    import dal.api as api

    with anyio.open_signal_receiver(*STOP_SIGNALS) as signals:
        async for signum in signals:
            if stop.signal is not None:
                continue
            stop.signal = signal.Signals(signum).name
            sys.stderr.write(f"dal mcp: {stop.signal}: stopping; a run under way stops as interrupted "
                             "(its key's `resume` continues it)\n")
            sys.stderr.flush()
            async with anyio.create_task_group() as tg:
                tg.start_soon(_stop_runs, stop, scope, api)


async def _stop_runs(stop: _Stop, scope: Any, api: Any) -> None:
    import anyio

    while stop.calls:
        api.interrupt_runs(stop.signal or "SIGTERM")
        await anyio.sleep(0.05)
    await anyio.sleep(0.2)  # the last result on its way to the client
    scope.cancel()


async def _serve(tools: DalTools, proto_in: int, proto_out: int, stop: _Stop) -> None:
    import anyio
    import mcp.types as types
    from mcp.server.lowlevel import NotificationOptions, Server
    from mcp.server.lowlevel.helper_types import ReadResourceContents
    from mcp.server.stdio import stdio_server

    from dal import __version__

    server: Any = Server("dal", version=__version__, instructions=INSTRUCTIONS)

    @server.list_tools()
    async def list_tools() -> list[types.Tool]:
        return [
            types.Tool(
                name=name,
                title=t["title"],
                description=t["description"],
                inputSchema=input_schema(t["args"]),
                # A run's effects may change and delete files, and reach other machines when the operator's
                # policy lets programs use the network.
                annotations=types.ToolAnnotations(
                    title=t["title"], readOnlyHint=t["read_only"], destructiveHint=not t["read_only"],
                    idempotentHint=t["read_only"],
                    openWorldHint=False if t["read_only"] else tools.ceiling.policy.allow_net),
            )
            for name, t in TOOLS.items()
        ]

    @server.call_tool(validate_input=False)  # dal/mcp/arguments.py checks them, naming the argument
    async def call_tool(name: str, arguments: dict[str, Any]) -> Any:
        if stop.signal is not None:
            return _error(types, f"{name}: refused: the server is stopping ({stop.signal}); nothing was run")
        stop.calls += 1
        try:
            result = await anyio.to_thread.run_sync(tools.call, name, arguments)
        except (BadArguments, ToolFailure, Widening) as e:
            return _error(types, str(e))
        except Exception as e:  # noqa: BLE001 — a bug in DAL: the agent gets a message, the server stays up
            sys.stderr.write(f"dal mcp: internal error in {name}: {type(e).__name__}: {e}\n")
            return _error(types, f"{name}: internal error ({type(e).__name__}: {e}); the server is still running")
        finally:
            stop.calls -= 1
        if stop.signal is not None and result.get("status") == "interrupted":
            result["note"] = (f"the server was stopped ({stop.signal}) during this run: it stopped as interrupted, "
                              f"nothing lost; call `resume` with run {result['run_id']} (or `run` with the same key) "
                              "once the server is back")
            sys.stderr.write(f"dal mcp: run {result['run_id']} ({result.get('key')}) stopped as interrupted\n")
        result = _encodable(result)
        return types.CallToolResult(content=[types.TextContent(type="text", text=_text(result))],
                                    structuredContent=result, isError=False)

    @server.list_resource_templates()
    async def templates() -> list[types.ResourceTemplate]:
        return [types.ResourceTemplate(uriTemplate=RESOURCE_TEMPLATE, name="run receipt",
                                       description="a run's receipt (dal.receipt/v1) as JSON",
                                       mimeType="application/json")]

    @server.list_resources()
    async def resources() -> list[types.Resource]:
        runs = await anyio.to_thread.run_sync(tools.recent_runs)
        return [types.Resource(uri=f"dal://runs/{r['run_id']}", name=r["run_id"], mimeType="application/json",
                               description=f"{r['status']} run of {r.get('key') or r.get('operation')}")
                for r in runs]

    @server.read_resource()
    async def read(uri: Any) -> list[ReadResourceContents]:
        text = str(uri)
        prefix = "dal://runs/"
        if not text.startswith(prefix) or not text[len(prefix):] or "/" in text[len(prefix):]:
            raise ValueError(f"unknown resource {text}: the resources are {RESOURCE_TEMPLATE}")
        try:
            body = await anyio.to_thread.run_sync(tools.receipt_json, text[len(prefix):])
        except ToolFailure as e:
            raise ValueError(str(e)) from None
        return [ReadResourceContents(content=body, mime_type="application/json")]

    stdin = _Lines(proto_in)
    stdout = anyio.wrap_file(io.TextIOWrapper(os.fdopen(proto_out, "wb"), encoding="utf-8"))
    async with anyio.create_task_group() as tg:
        tg.start_soon(_on_signals, stop, tg.cancel_scope)
        async with stdio_server(stdin=stdin, stdout=stdout) as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options(NotificationOptions()))
        tg.cancel_scope.cancel()  # the client closed the session


class _Lines:
    """The protocol's input, line by line, read by a daemon thread: a stopped server must not wait for its
    client's next line (a read in one of anyio's threads cannot be abandoned, and one blocked on a client
    that sends nothing would keep the stopped server from exiting)."""

    def __init__(self, fd: int) -> None:
        import asyncio
        import threading

        self.loop = asyncio.get_running_loop()
        self.lines: asyncio.Queue[str] = asyncio.Queue()
        self.file = io.TextIOWrapper(os.fdopen(fd, "rb"), encoding="utf-8", errors="replace")
        threading.Thread(target=self._read, name="dal mcp stdin", daemon=True).start()

    def _read(self) -> None:
        try:
            try:
                while line := self.file.readline():
                    self.loop.call_soon_threadsafe(self.lines.put_nowait, line)
            except (OSError, ValueError):
                pass
            self.loop.call_soon_threadsafe(self.lines.put_nowait, "")  # the end of the input
        except RuntimeError:  # the loop is closed: the server has ended
            pass

    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> str:
        line = await self.lines.get()
        if not line:
            raise StopAsyncIteration
        return line


def _text(result: dict[str, Any]) -> str:
    """The text content of a result: exactly the JSON of its structured content, so that a client that
    parses the text gets the same object (the receipt as `dal receipt show` prints it is its `rendered`)."""
    from dal.core.jsontext import dumps

    return dumps(result, indent=2)


def _encodable(value: Any) -> Any:
    """`value` with every lone surrogate (a DAL string may hold one: docs/api.md) written as its escape
    `\\ud800`, as DAL writes them everywhere else: the protocol is UTF-8 JSON, which cannot carry one."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {_encodable(k): _encodable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_encodable(v) for v in value]
    return value


def _error(types: Any, message: str) -> Any:
    return types.CallToolResult(content=[types.TextContent(type="text", text=_encodable(message))], isError=True)
