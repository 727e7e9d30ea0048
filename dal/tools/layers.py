"""The stage check: `python -m dal.tools.layers` lists every import between DAL's stage packages that goes
the wrong way, and every import cycle, and exits 1 when it finds any (docs/architecture.md).

DAL is built in stages, each a package that imports only the stages below it (the table STAGES), and
never a private (`_name`) name of another stage; a run store's backend (BACKENDS) imports nothing of another. Every
import counts: at the top of a module, inside a function (a lazy import) and under `if TYPE_CHECKING:`.
A cycle between stages is reported with the imports that make it. (`--modules` also lists the cycles
between the modules of one stage, for information: they do not fail the check.)

The check reads the source with `ast`; it imports nothing it checks.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

# stage -> the stages it may import (besides itself). Bottom to top; a front end never imports another,
# except that the `dal` command line dispatches to the REPL (`dal repl`), the test runner (`dal test`),
# the worker (`dal worker`), the MCP server (`dal mcp`, built on the Python API) and the console
# (`dal console`). `root` is the `dal` package itself (its lazy `dal.run` and friends).
_BELOW_RUNNER = ("runner", "receipts", "effects", "eval", "resolve", "syntax", "core")
STAGES: dict[str, tuple[str, ...]] = {
    "core": (),
    "syntax": ("core",),
    "resolve": ("syntax", "core"),
    "eval": ("resolve", "syntax", "core"),
    "effects": ("core",),
    "receipts": ("core",),
    "runner": ("receipts", "effects", "eval", "resolve", "syntax", "core"),
    "api": _BELOW_RUNNER,
    "repl": _BELOW_RUNNER,
    "testing": _BELOW_RUNNER,
    "worker": _BELOW_RUNNER,
    "mcp": ("api", *_BELOW_RUNNER),  # an agent's front end over the Python API
    "console": _BELOW_RUNNER,
    "cli": ("repl", "testing", "worker", "mcp", "console", *_BELOW_RUNNER),
    "root": ("api", "cli", "core"),
    "tools": (),
}

# The run store's backends (modules, and packages with everything under them). A backend imports nothing of
# another: what both need (errors, job states, result packing, the contract) lives outside either.
BACKENDS: dict[str, tuple[str, ...]] = {
    "sqlite": ("dal.receipts.store", "dal.receipts.storefile", "dal.receipts.jobs", "dal.receipts.jobs_schema"),
    "postgresql": ("dal.receipts.pg",),
}

# Names every stage may take from the `dal` package itself (a constant, not the API behind it).
ROOT_CONSTANTS = frozenset({"__version__"})


class Import:
    """One import statement's target, where it is written."""

    __slots__ = ("source", "target", "line", "lazy", "private")

    def __init__(self, source: str, target: str, line: int, lazy: bool, private: str | None = None) -> None:
        self.source = source  # the importing module, e.g. dal.api
        self.target = target  # the imported module, e.g. dal.runner.runner
        self.line = line
        self.lazy = lazy  # inside a function, or only for type checking
        self.private = private  # a `_name` taken from the target, if any


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def stage_of(module: str) -> str | None:
    """The stage a module belongs to; None for a module outside every stage."""
    parts = module.split(".")
    if parts[0] != "dal":
        return None
    if len(parts) == 1 or parts[1] in ("__main__",):
        return "root"
    return parts[1] if parts[1] in STAGES and parts[1] != "root" else None


def backend_of(module: str) -> str | None:
    """The store backend a module belongs to (BACKENDS); None for every other module."""
    for name, prefixes in BACKENDS.items():
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return name
    return None


def _walk(tree: ast.AST) -> Iterator[tuple[ast.AST, bool]]:
    """Every node, with whether it sits inside a function or an `if TYPE_CHECKING:` block."""
    stack: list[tuple[ast.AST, bool]] = [(tree, False)]
    while stack:
        node, lazy = stack.pop()
        yield node, lazy
        inner = lazy or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) or (
            isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test))
        stack.extend((child, inner) for child in ast.iter_child_nodes(node))


def imports_of(path: Path, module: str, modules: set[str]) -> list[Import]:
    """The dal modules `path` imports. `from dal.x import y` imports dal.x.y when that is a module."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: list[Import] = []
    for node, lazy in _walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "dal" or alias.name.startswith("dal."):
                    out.append(Import(module, alias.name, node.lineno, lazy))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            if not (name == "dal" or name.startswith("dal.")):
                continue
            for alias in node.names:
                full = f"{name}.{alias.name}"
                if full in modules:
                    out.append(Import(module, full, node.lineno, lazy))
                elif name == "dal" and alias.name in ROOT_CONSTANTS:
                    continue  # `from dal import __version__`: a constant, not the API
                else:
                    private = alias.name if alias.name.startswith("_") and not alias.name.startswith("__") else None
                    out.append(Import(module, name, node.lineno, lazy, private))
    return out


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def _path(graph: dict[str, set[str]], start: str, comp: set[str]) -> list[str]:
    """A shortest cycle from `start` back to it inside `comp` (breadth first)."""
    prev: dict[str, str] = {}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(graph.get(v, ())):
            if w == start:
                out = [v]
                while out[-1] != start:
                    out.append(prev[out[-1]])
                return [start, *reversed(out[:-1]), start] if len(out) > 1 else [start, v, start]
            if w in comp and w not in prev:
                prev[w] = v
                queue.append(w)
    return [start]


def check(root: Path, *, module_cycles: list[str] | None = None) -> list[str]:
    """Every problem in the package at `root` (the `dal` folder), one line each; [] when there is none.
    `module_cycles`, when given, receives the cycles between modules of one stage (not problems)."""
    files = {module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    modules = set(files)
    problems: list[str] = []
    edges: list[Import] = []
    for module, path in files.items():
        if stage_of(module) is None:
            problems.append(f"{_rel(path, root)}: {module} is in no stage: move it into one (dal/core/ for what "
                            "every stage uses)")
            continue
        edges.extend(imports_of(path, module, modules))
    stage_graph: dict[str, set[str]] = {}
    module_graph: dict[str, set[str]] = {}
    seen: set[tuple[str, str]] = set()
    for imp in edges:
        if imp.private is not None and stage_of(imp.source) != stage_of(imp.target):
            problems.append(f"{_rel(files[imp.source], root)}:{imp.line}: {imp.source} imports {imp.private}, a "
                            f"private name of {imp.target} (another stage): make it public, or move it where both "
                            "belong")
        if (imp.source, imp.target) in seen:
            continue  # one line per importing module and target: the first import of it
        mine, theirs = backend_of(imp.source), backend_of(imp.target)
        if mine and theirs and mine != theirs:
            problems.append(f"{_rel(files[imp.source], root)}:{imp.line}: {imp.source} (the {mine} store) imports "
                            f"{imp.target} (the {theirs} store): a backend imports nothing of another; move what "
                            "both need out of either (dal/receipts/errors.py, jobstates.py, packing.py)")
        seen.add((imp.source, imp.target))
        src, dst = stage_of(imp.source), stage_of(imp.target)
        if imp.target not in modules and imp.target.partition(".")[0] == "dal":
            problems.append(f"{_rel(files[imp.source], root)}:{imp.line}: {imp.source} imports {imp.target}, "
                            "which does not exist")
            continue
        if src is None or dst is None:
            if dst is None:
                problems.append(f"{_rel(files[imp.source], root)}:{imp.line}: {imp.source} imports {imp.target}, "
                                "which is in no stage")
            continue
        if src != dst:
            stage_graph.setdefault(src, set()).add(dst)
            if dst not in STAGES[src]:
                how = "lazily " if imp.lazy else ""
                allowed = ", ".join(STAGES[src]) or "nothing else"
                problems.append(f"{_rel(files[imp.source], root)}:{imp.line}: {imp.source} ({src}) {how}imports "
                                f"{imp.target} ({dst}); {src} may import {allowed}")
        elif imp.source != imp.target:
            module_graph.setdefault(imp.source, set()).add(imp.target)
    for comp in _cycles(stage_graph):
        problems.append("cycle between stages: " + " -> ".join(_path(stage_graph, comp[0], set(comp))))
    if module_cycles is not None:
        for comp in _cycles(module_graph):
            module_cycles.append(f"modules of {stage_of(comp[0])} that import each other: "
                                 + " -> ".join(_path(module_graph, comp[0], set(comp))))
    return problems


def _rel(path: Path, root: Path) -> str:
    return str(path.relative_to(root.parent))


def main(argv: Iterable[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m dal.tools.layers", description=__doc__.split("\n\n")[0])
    p.add_argument("root", nargs="?", type=Path, default=Path(__file__).resolve().parents[1],
                   help="the dal package folder (default: this one)")
    p.add_argument("--modules", action="store_true",
                   help="also list the cycles between the modules of one stage (information only)")
    args = p.parse_args(list(argv) if argv is not None else None)
    notes: list[str] = []
    problems = check(args.root, module_cycles=notes if args.modules else None)
    for line in problems:
        print(line)
    for line in notes:
        print(f"note: {line}")
    if problems:
        print(f"{len(problems)} problem{'s' if len(problems) != 1 else ''}: see docs/architecture.md", file=sys.stderr)
        return 1
    print(f"stages ok: {', '.join(s for s in STAGES)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
