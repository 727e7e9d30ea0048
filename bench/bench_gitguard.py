"""Cost of holding the repository's references across a pipeline (dal/effects/guard/gitguard.py). Prints figures;
asserts nothing.

    python bench/bench_gitguard.py

A repository of 200 files, 30 branches and 30 tags: holding it before a pipeline; holding and comparing
when nothing changed (every `git status`); the check after a `git commit --allow-empty` and after a commit
that changes a file (the index changes too).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from dal.effects import Policy
from dal.effects.guard.gitguard import GitGuard

_ENV = {**os.environ, "GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@e", "GIT_COMMITTER_NAME": "a",
        "GIT_COMMITTER_EMAIL": "a@e"}


def median_ms(fn: Callable[[], float | None], n: int = 30) -> float:
    samples = []
    for _ in range(n):
        started = time.perf_counter()
        took = fn()
        samples.append(took if took is not None else time.perf_counter() - started)
    return statistics.median(samples) * 1000


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        script = ("git init -q -b main . && for i in $(seq 1 200); do echo $i > f$i; done && git add . && "
                  "git commit -qm x && for i in $(seq 1 30); do git branch b$i; git tag t$i; done")
        subprocess.run(script, shell=True, cwd=ws, env=_ENV, check=True)
        policy = Policy.load(ws, allow_run=["git"])

        def unchanged() -> None:
            GitGuard.start(policy, True).finish()

        def after(change: bool) -> float:
            guard = GitGuard.start(policy, True)
            if change:
                (ws / "f1").write_text(str(time.time()))
            subprocess.run(["git", "commit", "-qam" if change else "-qm", "x", *([] if change else ["--allow-empty"])],
                           cwd=ws, env=_ENV, check=True)
            started = time.perf_counter()
            guard.finish()
            return time.perf_counter() - started

        print(f"hold before a pipeline:            {median_ms(lambda: GitGuard.start(policy, True) and None):6.2f} ms")
        print(f"hold and compare, nothing changed: {median_ms(unchanged):6.2f} ms")
        print(f"check after an empty commit:       {median_ms(lambda: after(False), 20):6.2f} ms")
        print(f"check after a commit of a change:  {median_ms(lambda: after(True), 20):6.2f} ms")


if __name__ == "__main__":
    main()
