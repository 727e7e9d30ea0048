"""The wall hides every run store under the roots, not only the run's own (docs/policy.md, "The run store
is not readable"). Executed: a nested workspace `app/` (its own dal.toml) keeps its
store at `app/.dal/dal.db`, whose journal holds the env() value its run was allowed. A script of the outer
workspace, with `python3` allowed (no argument model: only the wall holds it), reads the file inside the
wall and looks for the secret; the same read without DAL finds it (the control)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dal.effects.wall.sandbox import _nested_stores, sandbox_status

HAVE_BWRAP = sandbox_status()[0]
REPO = Path(__file__).resolve().parents[2]
READER = ("import glob,re\nfor f in sorted(glob.glob('app/.dal/**', recursive=True)):\n"
          "  try: d = open(f,'rb').read()\n  except OSError: continue\n"
          "  m = re.search(rb'nested-secret-[0-9]+', d)\n  print(f, m.group().decode() if m else None)\n")


def _dal(cwd: Path, *args: str, secret: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DAL_")}
    env.update(PYTHONPATH=str(REPO), NESTED_SECRET=secret)
    return subprocess.run([sys.executable, "-m", "dal", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.skipif(not HAVE_BWRAP, reason="no bwrap")
@pytest.mark.parametrize("where", ["app", "deep/er/app"])
def test_a_nested_workspaces_store_is_hidden_in_the_wall(tmp_path: Path, where: str) -> None:
    ws = tmp_path / "ws"
    app = ws / where
    app.mkdir(parents=True)
    (app / "dal.toml").write_text("")
    (app / "deploy.dal").write_text('let t = env("NESTED_SECRET")\nprint(len(t))\n')
    secret = f"nested-secret-{os.getpid()}{len(where)}"
    r = _dal(app, "run", "-q", "--allow-env=NESTED_SECRET", "deploy.dal", secret=secret)
    assert r.returncode == 0, r.stderr
    # the control: the store does hold the secret, and a plain python3 finds it
    control = subprocess.run([sys.executable, "-c", READER.replace("app/", f"{where}/")], cwd=ws,
                             capture_output=True, text=True)
    assert secret in control.stdout
    (ws / "outer.dal").write_text(
        f'print(run("cat {where}/.dal/dal.db").status)\n'
        f'let r = run(["python3", "-c", {READER.replace("app/", f"{where}/")!r}])\n'
        + 'print(r.status)\nprint(r.stdout)\n')
    outer = _dal(ws, "run", "--require-sandbox", "--allow-run=python3", "outer.dal", secret="not-this-one")
    assert outer.returncode == 0, outer.stderr
    lines = outer.stdout.splitlines()
    assert lines[0] == "denied" and lines[1] == "completed", outer.stdout  # the check, then the wall
    assert secret not in outer.stdout + outer.stderr


def test_the_walk_finds_nested_stores_and_stops_at_its_limit(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "a" / "b" / ".dal").mkdir(parents=True)
    (tmp_path / "c" / ".dal").mkdir(parents=True)
    (tmp_path / ".git" / "x" / ".dal").mkdir(parents=True)  # git's folder is not walked
    found, complete = _nested_stores([str(tmp_path)])
    assert complete and sorted(found) == [str(tmp_path / "a" / "b" / ".dal"), str(tmp_path / "c" / ".dal")]
    import dal.effects.wall.sandbox as sandbox

    monkeypatch.setattr(sandbox, "_GIT_SCAN_LIMIT", 3)
    assert _nested_stores([str(tmp_path)])[1] is False  # the wall is refused then: fail closed
