"""Without a wall the check is the only barrier in front of the default toolset, and it checks names that a
second DAL run in the same workspace may change before the program opens them.

Executed (DAL_WALL=none, as an ordinary user, two `dal run`s at once): one script loops `cp -s dal.toml s3` /
`rm -f s3`, the other `tee -a s3`. The check of `tee -a s3` sees no `s3` (a new file, allowed); by the time
tee opens it, it is a symlink to the policy file, which tee appends to: 82 of 400 tries changed dal.toml. The
same swap reaches `.git/hooks/pre-commit`, which the operator's next `git commit` runs. Behind bubblewrap the
policy file is a read-only bind (EROFS), and Landlock's toolset pipelines that write at the workspace's top put
the protected names back. Without a wall every command holds its roots' locks from a second check to its
end (running.py).
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from dal.effects import EffectContext, Policy, run_effect

POLICY = '[run]\nallow = ["python3"]\n'


def test_a_concurrent_swap_never_lets_tee_write_the_policy_file(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    ws = tmp_path / "ws"
    (ws / ".git" / "hooks").mkdir(parents=True)
    (ws / "dal.toml").write_text(POLICY)
    monkeypatch.setenv("DAL_WALL", "none")
    ctx = EffectContext(policy=Policy.load(ws), unsandboxed_as_root=True)
    done = threading.Event()

    def swapper() -> None:
        while not done.is_set():
            run_effect("cp -s dal.toml s3", ctx)
            run_effect("rm -f s3", ctx)

    t = threading.Thread(target=swapper)
    t.start()
    try:
        for _ in range(300):
            run_effect("echo raced | tee -a s3", ctx)
            run_effect("rm -f s3", ctx)
            if (ws / "dal.toml").read_text() != POLICY:
                break
    finally:
        done.set()
        t.join()
    assert (ws / "dal.toml").read_text() == POLICY
