"""`python -m dal` from a workspace does not import modules a script wrote there (dal/__main__.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LAZY = ("tomllib", "shutil", "subprocess", "tempfile", "hashlib", "lark", "secrets")


def test_python_m_dal_imports_nothing_from_the_workspace(tmp_path: Path) -> None:
    for name in LAZY:  # what a script could have written with `tee tomllib.py` (a name DAL imports lazily)
        (tmp_path / f"{name}.py").write_text(f"open({str(tmp_path / ('MARK-' + name))!r}, 'w').write('ran')\n")
    (tmp_path / "dal.toml").write_text("")  # so tomllib is imported
    (tmp_path / "s.dal").write_text('print(run("echo hi"))\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("DAL_")}
    env["PYTHONPATH"] = str(REPO)  # after the current directory, as for an installed dal
    p = subprocess.run([sys.executable, "-m", "dal", "run", "s.dal"], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "hi"
    assert sorted(x.name for x in tmp_path.glob("MARK-*")) == []
