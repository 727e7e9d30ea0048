"""`dal mcp`: serve DAL's tools to an agent over the Model Context Protocol on stdio (dal/mcp/, docs/mcp.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from dal.runner.options import memory_size, positive_int, seconds

EXIT_USAGE = 2


def register(sub: Any) -> None:
    m = sub.add_parser(
        "mcp",
        help="serve DAL to an agent over MCP (stdio)",
        description="Serve DAL's tools (run, submit, check, check_command, show_receipt, list_waiting, resume) "
        "and the receipts (dal://runs/{run_id}) to an MCP client over stdio. The policy and budgets given here "
        "are fixed for the server's life: an agent may only narrow them. No tool approves, denies or resolves "
        "an effect: a run that waits for a person says where the person decides (--console-url, and the "
        "`dal approve` command). Needs the MCP SDK: pip install 'dal-lang[mcp]'.",
    )
    m.add_argument("--workspace", type=Path, default=None, metavar="DIR",
                   help="the workspace (default: the nearest folder, from the current directory up, with a "
                   "dal.toml or a .dal/ folder; else the current directory)")
    m.add_argument("--policy", type=Path, default=None, metavar="FILE",
                   help="the policy file (default: WORKSPACE/dal.toml if present, else the default policy)")
    m.add_argument("--store", default=None, metavar="PATH",
                   help="the run store (default: $DAL_STORE, else WORKSPACE/.dal/dal.db)")
    m.add_argument("--console-url", default=None, metavar="URL",
                   help="the operator console's address: a waiting run is shown as URL/runs/<run_id>")
    b = m.add_argument_group("the highest budgets an agent may ask for (also each run's default)")
    b.add_argument("--max-steps", type=positive_int, default=None, metavar="N", help="step budget (default 1,000,000)")
    b.add_argument("--max-effects", type=positive_int, default=None, metavar="N", help="effect budget")
    b.add_argument("--timeout", type=seconds, default=None, metavar="SECONDS", help="wall-clock budget")
    b.add_argument("--max-memory", type=memory_size, default=None, metavar="SIZE",
                   help="memory budget (default 1G)")
    m.set_defaults(func=cmd_mcp)


def _fail(message: str) -> int:
    sys.stderr.write(f"dal mcp: error: {message}\n")
    return EXIT_USAGE


def cmd_mcp(args: argparse.Namespace) -> int:
    # First of all: from here on nothing but the protocol reaches the real stdout.
    from dal.mcp.server import claim_stdio

    proto_in, proto_out = claim_stdio()
    try:
        import mcp  # noqa: F401
    except ImportError:
        from dal.core.extras import install_hint

        return _fail(f"the MCP SDK is not installed: {install_hint('mcp')}")
    from dal.effects.policy import Policy, PolicyError
    from dal.mcp.ceiling import Ceiling
    from dal.mcp.server import serve
    from dal.mcp.tools import DalTools
    from dal.receipts.location import StoreLocation, StoreLocationError
    from dal.runner.workspace import find_workspace

    ws = find_workspace(args.workspace).path
    if not ws.is_dir():
        return _fail(f"--workspace: {args.workspace} is not a directory")
    ws = ws.resolve()
    try:
        policy = Policy.load(ws, args.policy.resolve() if args.policy is not None else None)
        location = StoreLocation.parse(args.store, ws)
    except (PolicyError, StoreLocationError) as e:
        return _fail(str(e))
    ceiling = Ceiling(policy, max_steps=args.max_steps, max_effects=args.max_effects, timeout=args.timeout,
                      max_memory=args.max_memory)
    tools = DalTools(ws, ceiling, store=args.store, console_url=args.console_url)
    sys.stderr.write(f"dal mcp: serving workspace {ws} on stdio (policy {policy.source}, store {location.file})\n")
    sys.stderr.flush()
    return serve(tools, proto_in, proto_out)
