"""`dal test`: run workflow test scripts and report each as passed or failed."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

DESCRIPTION = """\
Run DAL test scripts, each in a fresh temporary workspace, and report each as passed or failed.

A test script is a DAL script named NAME.test.dal. Besides every builtin it can call:
  assert(cond, message)          fail here unless cond is true
  assert_eq(actual, expected)    fail here unless equal; shows both values
  fake(pattern, result)          scripted results for commands matching a glob, in invoked workflows:
                                 {"stdout": "...", "code": 0}, {"code": 1, "stderr": "..."}, {"timeout": true}
  invoke(script, options)        run a workflow (path relative to the test) and return its receipt;
                                 options: key, policy, max_steps, max_effects, crash_after N, crash_before N
  approve(run_id) deny(run_id)   decide an effect waiting for approval, as dal approve / dal deny
  resolve(run_id, outcome)       say what happened to a held effect: "done", "failed" or "retry"
  resume(run_id, options)        continue a waiting, interrupted or crashed run, as dal resume
  receipt(ref)                   a stored receipt by run id, key or "latest"

With no PATHS: tests/**/*.test.dal and examples/tests/*.test.dal under the workspace (the nearest folder,
from the current directory up, with a dal.toml or a .dal/ folder; else the current folder). A folder
given runs every *.test.dal under it; a file given runs that file.

env() in a test and in the workflows it invokes reads only LANG, TZ and the other harmless variables,
plus those named by --allow-env.

The policy a test's invoke asks for may only be narrower than what dal test was given: its --allow-run,
--allow-read, --allow-write, --allow-net, --require-approval and --allow-env flags over the --policy FILE,
else the project's dal.toml, else the default policy. An invoke asking for more is the test's error.

The last line is the summary, `N passed, N failed`. Exit 0 when every test passed, 1 when any failed,
2 on a usage error (a path that does not exist, no test scripts found). See docs/testing.md.
"""


def register(sub: Any) -> None:
    p = sub.add_parser(
        "test",
        help="run workflow tests (*.test.dal) with fakes and fault injection",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("paths", nargs="*", type=Path, metavar="PATH", help="test scripts or folders of them")
    p.add_argument("--keep", action="store_true", help="keep each test's workspace and print where it is")
    p.add_argument("--verbose", "-v", action="store_true", help="show what passing tests printed too")
    p.add_argument("--allow-env", action="append", default=[], metavar="NAME[,NAME...]",
                   help="let env() read these variables, in the tests and in the workflows they invoke")
    g = p.add_argument_group("the policy ceiling: what the workflows a test invokes may be allowed at most "
                             "(a test's invoke policy may only narrow it; default: the project's dal.toml, else "
                             "the default policy)")
    g.add_argument("--policy", type=Path, default=None, metavar="FILE", help="a policy TOML file as the ceiling")
    for flag, what in (("allow-run", "PROG"), ("allow-read", "PATH"), ("allow-write", "PATH"),
                       ("require-approval", "PROG")):
        g.add_argument(f"--{flag}", action="append", default=[], metavar=f"{what}[,{what}...]",
                       help=f"as dal run --{flag}, for the workflows the tests invoke")
    g.add_argument("--allow-net", action="store_true", help="as dal run --allow-net, for the invoked workflows")
    p.add_argument("--unsandboxed-as-root", action="store_true",
                   help="as root, run the tests' commands even without a working bubblewrap wall")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object (kind test_results): each test with passed, seconds, error, "
                   "message and output, and the counts")
    p.set_defaults(func=run_tests)


def _paint(word: str, code: str, color: bool) -> str:
    return f"\x1b[{code}m{word}\x1b[0m" if color else word


def _indent(text: str, pad: str = "    ") -> str:
    return "\n".join(pad + line if line else line for line in text.rstrip("\n").split("\n"))


def run_tests(args: argparse.Namespace) -> int:
    import os

    from dal.cli import hostmode
    from dal.core.diagnostics import render, want_color
    from dal.effects.policy import PolicyError, env_names
    from dal.runner.workspace import find_workspace
    from dal.testing.harness import DEFAULT_GLOBS, NoTests, discover, run_test_file

    try:
        allow_env = env_names(args.allow_env)
    except PolicyError as e:
        return hostmode.error(str(e), 2)
    ceiling: dict[str, Any] = {k: [x for v in getattr(args, k) for x in v.split(",") if x]
                               for k in ("allow_run", "allow_read", "allow_write", "require_approval")}
    ceiling["allow_net"] = args.allow_net
    if args.policy is not None and not args.policy.is_file():
        return hostmode.error(f"--policy: {args.policy}: no such file", 2)
    root = None
    if not args.paths:
        found = find_workspace().path
        root = Path(os.path.relpath(found)) if found != Path.cwd().resolve() else None
    try:
        tests = discover(list(args.paths), root)
    except NoTests as e:
        return hostmode.error(str(e), 2)
    if not tests:
        where = ", ".join(str(p) for p in args.paths) if args.paths else " and ".join(DEFAULT_GLOBS)
        return hostmode.error(f"no test scripts found ({where}); test scripts are named NAME.test.dal", 2)
    # In host mode the one JSON object is stdout's; the report a person reads goes to stderr.
    out = sys.stderr if args.json else sys.stdout
    color = want_color(out)
    passed = failed = 0
    report: list[dict[str, Any]] = []
    for path in tests:
        result = run_test_file(path, keep=args.keep, allow_env=allow_env,
                               unsandboxed_as_root=args.unsandboxed_as_root,
                               policy_file=args.policy.resolve() if args.policy is not None else None,
                               policy_flags=ceiling)
        report.append({"path": str(path), "passed": bool(result.passed), "seconds": round(result.duration, 3),
                       "error": result.error.to_json() if result.error is not None else None,
                       "message": result.message or None, "output": result.output or "",
                       "workspace": str(result.workspace) if result.workspace is not None else None})
        took = f"({result.duration:.2f}s)"
        if result.passed:
            passed += 1
            out.write(f"{_paint('PASS', '32', color)} {path} {took}\n")
        else:
            failed += 1
            out.write(f"{_paint('FAIL', '1;31', color)} {path} {took}\n")
            if result.error is not None:
                out.write(render(result.error, color) + "\n")
            if result.message:
                out.write(f"  {result.message}\n")
        if result.output and (args.verbose or not result.passed):
            out.write("  output:\n" + _indent(result.output) + "\n")
        if result.workspace is not None:
            out.write(f"  workspace kept: {result.workspace}\n")
        out.flush()
    out.write(f"\n{passed} passed, {failed} failed\n")
    if args.json:
        hostmode.emit("test_results", {"tests": report, "passed": passed, "failed": failed})
    return 1 if failed else 0
