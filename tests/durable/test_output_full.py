"""A script's output that cannot be written (stdout on a full disk: `dal run s.dal > /var/log/x` on a full
/var, a worker's log) stops the run `interrupted`, resumable, with the reason in the receipt; it was recorded
as a DAL bug ("internal error ... please report it", `failed`, retry `inspect`). /dev/full
answers every write with ENOSPC, as a full disk does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_print_to_a_full_disk_stops_the_run_resumably(tmp_path: Path) -> None:
    (tmp_path / "p.dal").write_text('run("echo a >> m")\nprint("hello")\nrun("echo b >> m")\n')
    with open("/dev/full", "w") as full:
        r = subprocess.run([sys.executable, "-m", "dal", "run", "--key", "k", "p.dal"], cwd=tmp_path, stdout=full,
                           stderr=subprocess.PIPE, text=True, timeout=60)
    assert "internal error" not in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert "interrupted by a failed write of the script's output (No space left on device)" in r.stderr, r.stderr
    receipt = json.loads(next((tmp_path / ".dal" / "receipts").glob("*.json")).read_text())
    assert receipt["status"] == "interrupted" and receipt["retry"] == "resume", receipt
    assert receipt["error"]["line"] == 3  # at its next step, as SIGPIPE stops it: before the next effect
    assert (tmp_path / "m").read_text() == "a\n"
    again = subprocess.run([sys.executable, "-m", "dal", "resume", "k"], cwd=tmp_path, capture_output=True, text=True,
                           timeout=60)
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "m").read_text() == "a\nb\n"  # nothing twice, nothing lost
