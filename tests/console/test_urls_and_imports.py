"""The console's URL form for other front ends (`dal mcp` prints it for a waiting run) needs no server,
and no other command pays for the console's web stack."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from console_helpers import REPO

from dal.console.urls import run_url, waiting_url


def test_run_url_names_the_run_page_and_escapes_the_id() -> None:
    assert run_url("http://127.0.0.1:8470", "run_20261201T143701567Z_cf6b55") == \
        "http://127.0.0.1:8470/runs/run_20261201T143701567Z_cf6b55"
    assert run_url("http://127.0.0.1:8470/", "a/b?c") == "http://127.0.0.1:8470/runs/a%2Fb%3Fc"
    assert waiting_url("http://[::1]:9000") == "http://[::1]:9000/waiting"


PROBE = """
import sys
import dal.console.urls
from dal.cli.main import main
code = main(sys.argv[1:])
print("LOADED:" + ",".join(m for m in ("starlette", "uvicorn", "jinja2", "dal.console.app", "dal.console.views")
                            if m in sys.modules))
"""


def test_other_commands_load_no_web_stack(tmp_path: Path) -> None:
    (tmp_path / "s.dal").write_text('print("x")\n')
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for args in (["run", "s.dal", "-q"], ["receipts"], ["check", "s.dal"], ["jobs"]):
        p = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=tmp_path, capture_output=True, text=True,
                           env=env, timeout=60)
        line = [x for x in p.stdout.splitlines() if x.startswith("LOADED:")]
        assert line == ["LOADED:"], (args, p.stdout, p.stderr)
