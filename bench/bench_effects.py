"""Cost of the effect gate and executor. Prints figures; asserts nothing.

    python bench/bench_effects.py

Targets (issue 3): parse + check of a typical command well under 1 ms; run() of `true` at most 1.5x
`subprocess.run(["true"])` without the bubblewrap wall.
"""

from __future__ import annotations

import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from dal.effects import EffectContext, Policy, check_command, run_effect, sandbox_status
from dal.effects.shell import _parse

TYPICAL = (
    "mkdir -p 'COO-FILESYSTEM/articles/drafts' && "
    "printf '%s\\n' '# Draft' > 'COO-FILESYSTEM/articles/drafts/example.md'"
)


def per_call_ms(fn: Callable[[], object], n: int, rounds: int = 5) -> float:
    """Median over `rounds` of the mean time of `n` calls, in milliseconds."""
    fn()
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        for _ in range(n):
            fn()
        samples.append((time.perf_counter() - started) / n * 1000)
    return statistics.median(samples)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        policy = Policy.load(ws)
        parse = per_call_ms(lambda: _parse(TYPICAL), 2000)
        check = per_call_ms(lambda: check_command(TYPICAL, policy), 2000)
        print(f"parse (tree-sitter, uncached)       {parse * 1000:8.1f} us")
        print(f"parse + check (parse cached)        {check * 1000:8.1f} us   target well under 1000 us")

        bare = per_call_ms(lambda: subprocess.run(["true"]), 300)
        ctx = EffectContext(policy=policy, use_sandbox=False)
        ours = per_call_ms(lambda: run_effect("true", ctx), 300)
        print(f'subprocess.run(["true"])            {bare:8.3f} ms')
        print(f'run_effect("true"), no wall         {ours:8.3f} ms   ratio {ours / bare:.2f}x (target <= 1.5x)')

        available, why = sandbox_status()
        if available:
            walled = per_call_ms(lambda: run_effect("true", EffectContext(policy=policy)), 50)
            print(f'run_effect("true"), bubblewrap      {walled:8.3f} ms   ({why})')
        else:
            print(f"bubblewrap: unavailable ({why})")


if __name__ == "__main__":
    main()
