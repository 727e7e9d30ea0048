"""`dal` started with stdin, stdout or stderr closed, as some supervisors start it:
never a traceback, and nothing the run prints lands in a file DAL opens on the freed descriptor."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

DAL = Path(sys.executable).parent / "dal"


def sh(ws: Path, line: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", line], cwd=ws, capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "NO_COLOR": "1", "HOME": str(ws)})


def test_dal_run_dash_with_stdin_closed_says_there_is_no_script(tmp_path: Path) -> None:
    done = sh(tmp_path, f"'{DAL}' run - <&-")
    assert done.returncode == 2
    assert done.stderr == "dal: error: `dal run -` reads the script from stdin, and stdin is closed: no script\n"
    assert not (tmp_path / ".dal").exists()  # nothing ran, nothing recorded


def test_a_run_with_stdout_closed_runs_and_keeps_its_records_whole(tmp_path: Path) -> None:
    (tmp_path / "s.dal").write_text('print("hello from the run")\nrun("printf x > made.txt")\n')
    for flags in ("", "--json"):
        done = sh(tmp_path, f"'{DAL}' run {flags} s.dal >&-")
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr
    assert (tmp_path / "made.txt").read_text() == "x"
    listing = json.loads(sh(tmp_path, f"'{DAL}' receipts --json").stdout)
    assert [r["status"] for r in listing["runs"]] == ["completed", "completed"]
    # The freed descriptor 1 went to /dev/null, not to a file the run opened: the store and the receipt
    # files read back whole.
    for f in (tmp_path / ".dal" / "receipts").glob("*.json"):
        assert json.loads(f.read_text())["status"] == "completed", f

def test_a_command_with_stderr_closed_still_exits_with_its_code(tmp_path: Path) -> None:
    (tmp_path / "s.dal").write_text('fail("broken on purpose")\n')
    done = sh(tmp_path, f"'{DAL}' run s.dal 2>&-")
    assert done.returncode == 1 and "Traceback" not in done.stdout
