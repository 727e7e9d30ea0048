"""DAL's benchmark suite: one command, every figure of issue 7. Prints figures; asserts nothing.

    python bench/run.py                 # everything (a few minutes on 2 cores)
    python bench/run.py --quick         # one repeat, peers at 1/50 size: a smoke run
    python bench/run.py --only programs,cold --no-peers

Sections: `programs` (fib, while, article loop, strings in DAL, CPython, asteval and pure-Python
Starlark), `cold` (start-up of `dal run` / `dal check`), `parse` (15,000 to 200,000 statements vs
`ast.parse`, with the cost per statement at each size),
`steps` (step counting on vs off), `effects` (bench_effects.py: run() of `true`), `journal`
(bench_journal.py), `store` (bench_store.py: the checks on opening a store of 10,000 runs), `receipts`
(100,000 loop exits, recorder on vs off), `memory` (peak of the article loop), `jobs` (bench_jobs.py: one-effect
jobs per second through the queue with 2 workers, against bare sandbox spawns and a loop of `dal run`).

Times are CPU time of the measuring process (`time.process_time`), medians over interleaved repeats,
so that other load on the machine disturbs a ratio less than it disturbs a wall clock. Cold start is
wall time of a fresh process. The peers live in their own venvs under --peers-dir (created with pip on
first use; the PyPI `starlark` package is a pure-Python interpreter, and `starlark-pyo3` installs the
same module name, so each peer gets its own venv); a peer that cannot be installed is skipped with a
message. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import ast as pyast
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def _python_with_dal() -> None:
    """`python bench/run.py` on a fresh clone (README) runs whatever `python` is first on PATH, which has
    neither DAL nor its dependencies: run again under the clone's `.venv` (the README's install makes it),
    or say how to make one."""
    import importlib.util

    if importlib.util.find_spec("dal") is not None and importlib.util.find_spec("lark") is not None:
        return
    venv_python = HERE.parent / ".venv" / "bin" / "python"
    in_venv = Path(sys.prefix).resolve() == venv_python.parent.parent.resolve()
    if venv_python.exists() and not in_venv:  # a venv's python links to the same binary: compare prefixes
        os.execv(str(venv_python), [str(venv_python), str(Path(__file__).resolve()), *sys.argv[1:]])
    sys.stderr.write("bench/run.py: DAL is not installed for this Python. Install it first (from the clone):\n"
                     "  python3 -m venv .venv && .venv/bin/pip install '.[test]'\n")
    raise SystemExit(2)


if __name__ == "__main__":
    _python_with_dal()
sys.path.insert(0, str(HERE))

import programs  # noqa: E402 - bench/ is on the path just above

SECTIONS = ("programs", "cold", "parse", "steps", "effects", "journal", "store", "receipts", "memory", "jobs")
PEERS = {"asteval": "asteval", "starlark": "starlark"}  # peer -> PyPI package (pure-Python Starlark)

# name -> (target, unit): ratios are "at most"
TARGETS = {
    "fib": 30.0,
    "while": 15.0,
    "article": 15.0,
    "strings": 2.0,
    "cold": 8.0,
    "parse": 4.0,
    "steps": 0.15,
    "memory": 3.0,
}

summary: list[tuple[str, str, str, bool | None]] = []  # (figure, value, target, holds)


def say(line: str = "") -> None:
    print(line, flush=True)


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def fmt_s(sec: float) -> str:
    if sec >= 1:
        return f"{sec:.2f} s"
    if sec >= 0.001:
        return f"{sec * 1000:.1f} ms"
    return f"{sec * 1e6:.0f} us"


def verdict(name: str, label: str, value: float, shown: str) -> str:
    target = TARGETS[name]
    holds = value <= target
    tshow = f"<= {target:.0%}" if name == "steps" else f"<= {target:g}x"
    summary.append((label, shown, tshow, holds))
    return f"{tshow}: {'holds' if holds else 'MISSED'}"


# --- running DAL in-process ------------------------------------------------------------------


def dal_checked(source: str, filename: str = "bench.dal") -> Any:
    from dal.eval.interpreter import check_source

    checked, errors = check_source(source, filename)
    if errors:
        raise SystemExit(f"bench program does not check: {errors[0]}")
    return checked


def dal_time(checked: Any, *, count_steps: bool = True, recorder: Any = None) -> float:
    """CPU seconds to compile and run a checked script, with a budget it cannot reach.

    This is `Engine.compile` + run, with the compiler's bench-only `count_steps` switch exposed.
    """
    from dal.core.stack import in_big_stack
    from dal.eval.builtins import BUILTINS
    from dal.eval.compiler import Compiler
    from dal.eval.host import NullHost
    from dal.eval.runtime import Runtime

    rt = Runtime(max_steps=10**15, host=NullHost(lambda s: None, recorder))
    rt.filename, rt.source = checked.filename, checked.source
    globals_: dict[str, Any] = {}

    def go() -> float:
        t = time.process_time()
        comp = Compiler(rt, checked.resolution, filename=checked.filename, source=checked.source,
                        builtins=BUILTINS, globals_=globals_, count_steps=count_steps)
        code = comp.program(checked.program)
        frame: list[Any] = [(), None]
        frame.extend([None] * (checked.resolution.module.nslots - len(frame)))
        code(frame)
        return time.process_time() - t

    return in_big_stack(go)


def py_time(code: Any) -> float:
    t = time.process_time()
    exec(code, {})  # noqa: S102 - our own benchmark program
    return time.process_time() - t


# --- the four programs -------------------------------------------------------------------------


def scaled(name: str, scale: float) -> int:
    if scale >= 1:
        return programs.FULL[name]
    if name == "fib":
        want = programs.fib_calls(programs.FULL["fib"]) * scale
        n = 2
        while programs.fib_calls(n + 1) <= want:
            n += 1
        return n
    return max(1, int(programs.FULL[name] * scale))


def ensure_peer(peer: str, args: argparse.Namespace) -> tuple[Path | None, str]:
    """The python of the peer's own venv, creating it if allowed; (None, why) when unavailable."""
    venv = Path(args.peers_dir) / f"venv-{peer}"
    py = venv / "bin" / "python"
    probe = [str(py), "-c", f"import {peer}"]
    if py.exists() and subprocess.run(probe, capture_output=True).returncode == 0:
        return py, ""
    if args.no_install:
        return None, f"not installed in {venv} (--no-install)"
    say(f"  installing {PEERS[peer]} into {venv} ...")
    try:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True, timeout=300)
        subprocess.run([str(py), "-m", "pip", "install", "-q", PEERS[peer]], check=True, capture_output=True,
                       timeout=600)
    except (subprocess.SubprocessError, OSError) as e:
        detail = getattr(e, "stderr", b"") or b""
        last = detail.decode(errors="replace").strip().splitlines()[-1:] or [str(e)]
        return None, f"could not install {PEERS[peer]}: {last[0][:200]}"
    if subprocess.run(probe, capture_output=True).returncode != 0:
        return None, f"{PEERS[peer]} installed but `import {peer}` fails"
    return py, ""


def run_peer(py: Path, peer: str, name: str, size: int, repeat: int) -> tuple[float, float] | str:
    try:
        out = subprocess.run([str(py), str(HERE / "peer.py"), peer, name, str(size), str(repeat)],
                             capture_output=True, text=True, timeout=3600)
    except subprocess.TimeoutExpired:
        return "timed out"
    try:
        data = json.loads(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return f"no result ({out.stderr.strip()[-200:]})"
    if "error" in data:
        return data["error"]
    return median(data["peer"]), median(data["cpython"])


def section_programs(args: argparse.Namespace) -> None:
    say("## The four programs (step accounting on), CPU time, median of interleaved repeats")
    say()
    rows = []
    for name in ("fib", "while", "article", "strings"):
        n = programs.FULL[name]
        checked = dal_checked(programs.dal(name, n))
        code = compile(programs.python(name, n), "bench.py", "exec")
        in_fn = compile(programs.python_in_function(name, n), "bench.py", "exec")
        d, p, q = [], [], []
        for _ in range(args.repeat):
            d.append(dal_time(checked))
            p.append(py_time(code))
            q.append(py_time(in_fn))
        rows.append((name, n, median(d), median(p), median(q)))
    say("| program | DAL | CPython | DAL / CPython | target | CPython in a function | DAL / that |")
    say("|---|---:|---:|---:|---|---:|---:|")
    for name, n, d, p, q in rows:
        title = programs.TITLES[name].format(n=n)
        say(f"| {title} | {fmt_s(d)} | {fmt_s(p)} | {d / p:.1f}x | "
            f"{verdict(name, title + ', DAL / CPython', d / p, f'{d / p:.1f}x')} | {fmt_s(q)} | {d / q:.1f}x |")
    say()
    say("CPython runs the same module-level script as DAL (names in a dict, as DAL's top-level names are);")
    say("the last two columns put the same code in a function, where CPython's names are locals.")
    say()
    if args.no_peers:
        say("peers: skipped (--no-peers)")
        return
    scale = 1.0 if args.full_peers else args.peer_scale
    say(f"### Peers, each against CPython running the same text at the same size "
        f"({'full size' if scale >= 1 else f'size x{scale:g}; --full-peers for full size'})")
    say()
    notes = []
    found = {}
    for peer in PEERS:  # install first, so that pip's messages do not land inside the table
        py, why = ensure_peer(peer, args)
        if py is None:
            notes.append(f"{peer}: skipped: {why}")
        else:
            found[peer] = py
    say("| program | peer | size | peer | CPython | peer / CPython | DAL / CPython (full size) |")
    say("|---|---|---:|---:|---:|---:|---:|")
    dal_ratio = {name: d / p for name, _, d, p, _ in rows}
    for peer, py in found.items():
        for name in ("fib", "while", "article", "strings"):
            size = scaled(name, scale)
            got = run_peer(py, peer, name, size, args.peer_repeat)
            if isinstance(got, str):
                notes.append(f"{peer} {name}: skipped: {got}")
                continue
            t, c = got
            shown = f"fib({size}) shape, {programs.fib_calls(size):,} calls" if name == "fib" else f"{size:,}"
            say(f"| {name} | {peer} | {shown} | {fmt_s(t)} | {fmt_s(c)} | {t / c:.0f}x | {dal_ratio[name]:.1f}x |")
    say()
    say("Starlark has no `while` and forbids recursion: its loops are `for` over a range, and its fib makes")
    say("as many calls as fib(n) to a non-recursive function with fib's body (bench/programs.py).")
    for note in notes:
        say(f"- {note}")
    say()


# --- cold start ----------------------------------------------------------------------------


def walls(cmds: dict[str, list[str]], cwd: Path, env: dict[str, str], n: int) -> dict[str, list[float]]:
    """Wall times of fresh processes, `n` rounds, the commands interleaved within each round so that a
    change in the machine's load touches them all alike."""
    for cmd in cmds.values():  # warm-up: writes .pyc files
        subprocess.run(cmd, cwd=cwd, env=env, capture_output=True)
    times: dict[str, list[float]] = {name: [] for name in cmds}
    for _ in range(n):
        for name, cmd in cmds.items():
            t = time.perf_counter()
            r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True)
            times[name].append(time.perf_counter() - t)
            if r.returncode != 0:
                raise SystemExit(f"{' '.join(cmd)} exited {r.returncode}: {r.stderr.decode()[-300:]}")
    return times


def section_cold(args: argparse.Namespace) -> None:
    say("## Cold start (wall time of a fresh process, interleaved rounds)")
    say()
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed package has its .pyc files
    n = 5 if args.quick else 21
    # The `dal` command people run: the console script beside this interpreter, else `python -m dal`.
    script = Path(sys.executable).parent / "dal"
    dal = [str(script)] if script.exists() else [sys.executable, "-m", "dal"]
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        (ws / "one.dal").write_text('print("hello")\n')
        t = walls({"pass": [sys.executable, "-c", "pass"], "run": [*dal, "run", "one.dal"],
                   "check": [*dal, "check", "one.dal"]}, ws, env, n)
        probe = ("import sys, runpy; sys.argv = ['dal', 'run', 'one.dal']\n"
                 "try: runpy.run_module('dal', run_name='__main__')\nexcept SystemExit: pass\n"
                 "bad = sorted(m for m in ('lark', 'prompt_toolkit', 'pygments', 'jsonschema', 'dal.repl', "
                 "'tree_sitter') if m in sys.modules)\nprint(' '.join(bad) or '-', file=sys.stderr)")
        loaded = subprocess.run([sys.executable, "-c", probe], cwd=ws, env=env, capture_output=True,
                                text=True).stderr.strip().splitlines()[-1:]
    base, run, check = (median(t[k]) for k in ("pass", "run", "check"))
    fast = min(t["run"]) / min(t["pass"])
    say(f"- command: `{' '.join(Path(c).name if i == 0 else c for i, c in enumerate(dal))} run one.dal`, "
        f"{n} rounds")
    say(f"- `python -c pass`: {fmt_s(base)} (fastest {fmt_s(min(t['pass']))})")
    say(f"- `dal run` one-line script: {fmt_s(run)} = {run / base:.1f}x of the medians, {fast:.1f}x of the fastest "
        f"({verdict('cold', '`dal run` cold start / python -c pass', run / base, f'{run / base:.1f}x')})")
    say(f"- `dal check` one-line script: {fmt_s(check)} = {check / base:.1f}x")
    say(f"- heavy modules that `dal run` of a one-line script loads: {loaded[0] if loaded else '?'}")
    say()


# --- parse -------------------------------------------------------------------------------------

_UNIT_DAL = """let state_{i} = {{"attempt": {i}, "status": "pending", "evidence": []}}
fn step_{i}(s, n) {{
    if s.attempt < n and s.status == "pending" {{
        s.attempt = s.attempt + 1
        s.evidence = append(s.evidence, {{"n": n, "text": "step " + str(n)}})
    }}
    return s
}}
"""
_UNIT_PY = """state_{i} = {{"attempt": {i}, "status": "pending", "evidence": []}}
def step_{i}(s, n):
    if s["attempt"] < n and s["status"] == "pending":
        s["attempt"] = s["attempt"] + 1
        s["evidence"].append({{"n": n, "text": "step " + str(n)}})

    return s

"""


_UNIT_STATEMENTS = 6  # a let, a fn, its if, the if's two assignments, the return
PARSE_SIZES = (2_500, 10_000, 20_000, 33_334)  # units: 15,000 to 200,004 statements (20,000 to 266,672 lines)


def _front_end(source: str) -> tuple[float, float, float]:
    """CPU seconds to parse, resolve and compile `source`."""
    from dal.eval.builtins import arities
    from dal.eval.host import NullHost
    from dal.eval.interpreter import Checked, Engine
    from dal.eval.runtime import Runtime
    from dal.resolve.resolver import resolve
    from dal.syntax.parser import parse

    t = time.process_time()
    prog = parse(source, "big.dal")
    t1 = time.process_time()
    res = resolve(prog, filename="big.dal", source=source, builtins=arities())
    t2 = time.process_time()
    Engine(Runtime(max_steps=10**9, host=NullHost(lambda s: None))).compile(Checked(prog, res, [], "big.dal", source))
    return t1 - t, t2 - t1, time.process_time() - t2


def section_parse(args: argparse.Namespace) -> None:
    from dal.core.stack import in_big_stack
    from dal.syntax.parser import parse

    say("## Parse time: scripts of 15,000 to 200,000 statements, CPU time, median")
    say()
    say("Each size is the same 8-line unit repeated; `ast.parse` reads the same code in Python. Parse is to")
    say("the AST; resolve and compile are the rest of what `dal check` and `dal run` do before running.")
    say("Per statement, a linear pipeline costs the same at every size.")
    say()
    parse("let x = 1\n")  # the parser table, loaded once per process
    # As `dal check` and `dal run` do (a one-shot command): what is built stays frozen, out of the
    # collector's way. Each repeat starts from a clean heap (unfreeze, collect).
    import gc

    from dal.core import gcpause

    gcpause.keep_frozen = True
    say("| statements | lines | DAL parse | per statement | resolve | compile | `ast.parse` | parse / ast.parse |")
    say("|---:|---:|---:|---:|---:|---:|---:|---:|")
    rows = []
    for units in PARSE_SIZES:
        dal_src = "".join(_UNIT_DAL.format(i=i) for i in range(units))
        py_src = "".join(_UNIT_PY.format(i=i) for i in range(units))
        p, r, c, a = [], [], [], []
        for _ in range(1 if args.quick else 3):
            gc.unfreeze()
            gc.collect()
            dp, dr, dc = in_big_stack(lambda src=dal_src: _front_end(src))  # where `dal check` and `dal run` do it
            p.append(dp)
            r.append(dr)
            c.append(dc)
            t = time.process_time()
            pyast.parse(py_src)
            a.append(time.process_time() - t)
        dp, dr, dc, da = median(p), median(r), median(c), median(a)
        n = units * _UNIT_STATEMENTS
        rows.append((n, dp, dr, dc, da))
        say(f"| {n:,} | {dal_src.count(chr(10)):,} | {fmt_s(dp)} | {dp / n * 1e6:.1f} us | {fmt_s(dr)} | "
            f"{fmt_s(dc)} | {fmt_s(da)} | {dp / da:.2f}x |")
    say()
    # Least squares through the origin: the cost of one more statement, and how far each size is from it.
    for i, label in ((1, "parse"), (2, "resolve"), (3, "compile")):
        slope = sum(row[0] * row[i] for row in rows) / sum(row[0] ** 2 for row in rows)
        spread = [row[i] / (slope * row[0]) for row in rows]
        say(f"- {label}: {slope * 1e6:.2f} us per statement; each size at {min(spread):.2f}-{max(spread):.2f}x "
            f"of that (1.00 at every size is linear)")
    gcpause.keep_frozen = False
    gc.unfreeze()
    gc.collect()
    first, last = rows[0], rows[-1]
    say(f"- parse per statement, largest size / smallest: {(last[1] / last[0]) / (first[1] / first[0]):.2f} "
        f"(a quadratic parse would be {last[0] / first[0]:.1f})")
    n, dp, _, _, da = last
    held = verdict("parse", f"parse {n:,} statements / ast.parse", dp / da, f"{dp / da:.1f}x")
    say(f"- parse ratio at {n:,} statements {dp / da:.1f}x ({held})")
    say()


# --- step counting -----------------------------------------------------------------------------


def section_steps(args: argparse.Namespace) -> None:
    say("## Step counting: the same programs compiled with and without their step charges")
    say()
    say("A difference of a few percent, under whatever load the machine has: each program runs at a quarter")
    say("of its size in many on/off pairs, back to back and in alternating order, and the overhead is the")
    say("median of the pairs' ratios (a change in load between pairs cancels out; within a pair it is as")
    say("likely to favour either side). The target is judged on that median.")
    say()
    pairs = 5 if args.quick else 41
    worst = 0.0
    for name in ("fib", "while", "article", "strings"):
        size = programs.FULL[name] - 4 if name == "fib" else programs.FULL[name] // 4  # fib(20): 1/7 the calls
        checked = dal_checked(programs.dal(name, size))
        dal_time(checked, count_steps=True)
        dal_time(checked, count_steps=False)  # warm-up: each variant's templates compiled once
        ratios, on, off = [], [], []
        for k in range(pairs):
            if k % 2:
                b, a = dal_time(checked, count_steps=False), dal_time(checked, count_steps=True)
            else:
                a, b = dal_time(checked, count_steps=True), dal_time(checked, count_steps=False)
            on.append(a)
            off.append(b)
            ratios.append(a / b)
        over = median(ratios) - 1
        worst = max(worst, over)
        say(f"- {name}: on {fmt_s(median(on))}, off {fmt_s(median(off))} (medians of {pairs}): overhead "
            f"{over:+.0%} (median of the pairs), {min(on) / min(off) - 1:+.0%} (fastest runs)")
    held = verdict("steps", "step counting overhead (worst program)", worst, f"{worst:+.0%}")
    say(f"- worst: {worst:+.0%} ({held})")
    say()


# --- effects and journal: the other engineers' benches ----------------------------------------


def relay(script: str, title: str) -> None:
    say(f"## {title} (bench/{script})")
    say()
    path = HERE / script
    if not path.exists():
        say(f"- skipped: bench/{script} is not there yet")
        say()
        return
    r = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=1800)
    for line in r.stdout.rstrip().splitlines():
        say(f"    {line}")
    if r.returncode != 0:
        say(f"- bench/{script} exited {r.returncode}: {r.stderr.strip()[-300:]}")
    say()


# --- receipts ---------------------------------------------------------------------------------

RECEIPTS_DAL = """
fn inner(n) {
    let i = 0
    while i < n { i = i + 1 }
    return i
}
let k = 0
let total = 0
while k < 100000 {
    total = total + inner(2)
    k = k + 1
}
"""


def section_receipts(args: argparse.Namespace) -> None:
    from dal.runner.recorder import LoopRecorder

    say("## Receipts: a script whose inner loop exits 100,000 times, loop recorder on vs off")
    say()
    checked = dal_checked(RECEIPTS_DAL)
    on, off = [], []
    size = 0
    for _ in range(args.repeat):
        rec = LoopRecorder()
        on.append(dal_time(checked, recorder=rec))
        off.append(dal_time(checked, recorder=None))
        size = len(json.dumps(rec.receipts()))
    extra = median(on) - median(off)
    say(f"- recorder off {fmt_s(median(off))}, on {fmt_s(median(on))}: +{extra / median(off):.0%}, "
        f"{extra / 100_001 * 1e6:.2f} us per loop exit")
    say(f"- loop receipts kept: {size:,} bytes of JSON for 100,001 exits (aggregated per loop site)")
    say()


# --- memory -----------------------------------------------------------------------------------


def _peak(which: str) -> None:
    """Child mode: print the tracemalloc peak of the article loop in DAL or CPython."""
    import tracemalloc

    n = programs.FULL["article"]
    if which == "dal":
        checked = dal_checked(programs.dal("article", n))
        tracemalloc.start()
        dal_time(checked)
    else:
        code = compile(programs.python("article", n), "bench.py", "exec")
        tracemalloc.start()
        exec(code, {})  # noqa: S102 - our own benchmark program
    print(tracemalloc.get_traced_memory()[1])


def section_memory(args: argparse.Namespace) -> None:
    say("## Peak memory of the article loop (tracemalloc, fresh process each)")
    say()
    peaks = {}
    for which in ("dal", "cpython"):
        r = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--_peak", which],
                           capture_output=True, text=True, timeout=600)
        peaks[which] = int(r.stdout.strip().splitlines()[-1])
    ratio = peaks["dal"] / peaks["cpython"]
    say(f"- DAL {peaks['dal'] / 1e6:.1f} MB, CPython {peaks['cpython'] / 1e6:.1f} MB: {ratio:.2f}x "
        f"({verdict('memory', 'peak memory, article loop / CPython', ratio, f'{ratio:.2f}x')})")
    say()


# --- main -------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="DAL benchmarks (issue 7): prints figures, asserts nothing.")
    p.add_argument("--only", default=",".join(SECTIONS), help=f"comma-separated sections: {','.join(SECTIONS)}")
    p.add_argument("--repeat", type=int, default=5, help="repeats for DAL and CPython (median)")
    p.add_argument("--peer-repeat", type=int, default=3, help="repeats for each peer (median)")
    p.add_argument("--peer-scale", type=float, default=0.1, help="peers' program size as a fraction of full")
    p.add_argument("--full-peers", action="store_true", help="peers at full size (asteval takes minutes)")
    p.add_argument("--no-peers", action="store_true", help="skip asteval and Starlark")
    p.add_argument("--no-install", action="store_true", help="never create a peer venv; skip missing peers")
    p.add_argument("--peers-dir", default=os.path.join(tempfile.gettempdir(), "dal-bench"),
                   help="where the peers' venvs live (default: %(default)s)")
    p.add_argument("--quick", action="store_true", help="one repeat, peers at 1/50 size")
    p.add_argument("--_peak", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args._peak:
        _peak(args._peak)
        return 0
    if args.quick:
        args.repeat, args.peer_repeat, args.peer_scale = 1, 1, min(args.peer_scale, 0.02)
    wanted = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = set(wanted) - set(SECTIONS)
    if unknown:
        p.error(f"unknown section(s): {', '.join(sorted(unknown))}")

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    say(f"# DAL benchmarks, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    say(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cores, "
        f"load average {load:.1f} at start")
    say()
    runners: dict[str, Callable[[argparse.Namespace], None]] = {
        "programs": section_programs,
        "cold": section_cold,
        "parse": section_parse,
        "steps": section_steps,
        "effects": lambda a: relay("bench_effects.py", "Effects: run() of `true` vs subprocess.run"),
        "journal": lambda a: relay("bench_journal.py", "Journal overhead per effect"),
        "store": lambda a: relay("bench_store.py", "Store checks on open"),
        "receipts": section_receipts,
        "memory": section_memory,
        "jobs": lambda a: relay("bench_jobs.py", "Jobs per second through the queue (issue 17)"),
    }
    for name in SECTIONS:
        if name in wanted:
            runners[name](args)
    if summary:
        say("## Targets")
        say()
        say("| figure | measured | target | |")
        say("|---|---:|---|---|")
        for label, value, target, holds in summary:
            say(f"| {label} | {value} | {target} | {'holds' if holds else 'MISSED'} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
