"""CPU of one cold `dal run` of a one-effect script, this checkout against another, in one run. Prints figures;
asserts nothing.

    BASE=DIR python bench/bench_cold_run.py     # DIR: another checkout (main's parent, say); DAL_BENCH_ROUNDS=15

Each round starts, interleaved, `python -c pass`, then `dal run one.dal` (`run("true")`, inside the wall) of
this checkout and of BASE, each a fresh process of the checkout's own `scripts/dal` with `.pyc` files present
(a warm-up writes them). The CPU of every process a run starts (bubblewrap, its sandbox init that bubblewrap
reparents, the program) is counted with a cgroup (bench_queue_peers.CpuGroup: needs root). The figure is the
median over the rounds; each round's ratio goes into the median of ratios beside it, so that a change of the
machine's load falls on both alike. `DAL_BENCH_PROFILE=1` also prints where this checkout's run spends its CPU
(cProfile of one run, the script's thread included).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from bench_queue_peers import CpuGroup  # noqa: E402

ROUNDS = int(os.environ.get("DAL_BENCH_ROUNDS", "15"))
SCRIPT = 'run("true")\n'


def env_for(checkout: Path) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("DAL_") and k != "PYTHONDONTWRITEBYTECODE"}
    e["PYTHONPATH"] = str(checkout)
    return e


def once(group: CpuGroup, argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """CPU seconds (every process in the group) and wall seconds of one process."""
    cpu, t = group.seconds(), time.perf_counter()
    p = group.spawn(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = p.communicate()[1]
    wall = time.perf_counter() - t
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {p.returncode}: {err.decode()[-400:]}")
    time.sleep(0.02)  # a reparented sandbox init may still be exiting
    return group.seconds() - cpu, wall


PROFILE = """
import cProfile, pstats, sys
import dal.core.stack as st, dal.eval.interpreter as it
it.in_big_stack = st.in_big_stack = lambda fn: fn()   # the script's thread inline, so the profile sees it
sys.argv = ['dal', 'run', 'one.dal']
p = cProfile.Profile(); p.enable()
from dal.cli.entry import main
try:
    main()
finally:
    p.disable(); pstats.Stats(p, stream=sys.stderr).sort_stats('tottime').print_stats(25)
"""


def main() -> None:
    checkouts = {"this": REPO}
    if os.environ.get("BASE"):
        checkouts["base"] = Path(os.environ["BASE"]).resolve()
    group = CpuGroup("cold")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            ws = Path(tmp)
            (ws / "one.dal").write_text(SCRIPT)
            cmds = {"python -c pass": ([sys.executable, "-c", "pass"], env_for(REPO))}
            for name, checkout in checkouts.items():
                cmds[name] = ([sys.executable, str(checkout / "scripts" / "dal"), "run", "one.dal"], env_for(checkout))
            for argv, env in cmds.values():
                once(group, argv, ws, env)
            cpu: dict[str, list[float]] = {k: [] for k in cmds}
            wall: dict[str, list[float]] = {k: [] for k in cmds}
            for _ in range(ROUNDS):
                for name, (argv, env) in cmds.items():
                    c, w = once(group, argv, ws, env)
                    cpu[name].append(c)
                    wall[name].append(w)
            if os.environ.get("DAL_BENCH_PROFILE"):
                subprocess.run([sys.executable, "-c", PROFILE], cwd=ws, env=env_for(REPO), stdout=subprocess.DEVNULL)
    finally:
        group.close()
    load = os.getloadavg()[0]
    print(f"cold `dal run` of {SCRIPT.strip()!r}, {ROUNDS} interleaved rounds, load average {load:.1f}")
    for name in cmds:
        where = "" if name.startswith("python") else f" ({checkouts[name]})"
        print(f"  {name:15} CPU {median(cpu[name]) * 1e3:6.1f} ms (fastest {min(cpu[name]) * 1e3:5.1f})   "
              f"wall {median(wall[name]) * 1e3:6.1f} ms{where}")
    if "base" in cmds:
        ratios = [t / b for t, b in zip(cpu["this"], cpu["base"], strict=True)]
        print(f"  this / base: CPU x{median(ratios):.2f} (median of the rounds' ratios)")


if __name__ == "__main__":
    main()
