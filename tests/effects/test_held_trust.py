"""A record of what a killed DAL's pipeline held (.dal/held, held.py) is finished only when this operator's
DAL wrote it: one can be planted — another local user in an enclosing /tmp/.dal/held, a script's git
merge in a nested `.dal` — and the operator's next `dal run` wrote a file of the attacker's choosing and
removed another, outside every root. Executed next to canaries; the genuine case is tests/effects/test_held.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from effects_workspace import private_tmp_sh


def _record(ws: Path, victim: Path, planted: Path) -> str:
    """A planted wall state: put `planted` back with chosen bytes, remove `victim` as 'absent'."""
    return json.dumps({"version": 1, "workspace": str(ws), "guard": None, "wall": {
        "placeholders": [], "sweep_at": None, "index": None, "git_marks": [], "write_roots": [str(ws)],
        "ws": str(ws), "lock_git": False, "nested": {str(planted): "echo written-by-the-attacker\n"},
        "nested_git": [], "absent": [str(victim)], "gitfiles": {}, "live": {}}})


def _run(ws: Path) -> subprocess.CompletedProcess[str]:
    (ws / "s.dal").write_text('print(run("echo hi").stdout)\n')
    return subprocess.run([sys.executable, "-m", "dal", "run", "s.dal"], cwd=ws, capture_output=True, text=True,
                          timeout=60)


@pytest.fixture
def canaries(tmp_path: Path) -> tuple[Path, Path]:
    outside = tmp_path / "outside"
    outside.mkdir(mode=0o700)
    (outside / "canary.txt").write_text("precious\n")
    return outside / "canary.txt", outside / "pwned.sh"


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_another_users_record_in_an_enclosing_folder_is_not_obeyed(tmp_path: Path, canaries) -> None:
    victim, planted = canaries
    parent = tmp_path / "shared"
    ws = parent / "ws"
    ws.mkdir(parents=True)
    held = parent / ".dal" / "held"
    held.mkdir(parents=True)
    (held / "999999-1-1.json").write_text(_record(parent, victim, planted))  # a dead owner's name
    for p in (parent / ".dal", held, held / "999999-1-1.json"):
        os.chown(p, 65534, 65534)  # nobody's, as if that user had made them
    r = _run(ws)
    assert r.returncode == 0 and r.stdout == "hi\n\n", r
    assert victim.read_text() == "precious\n" and not planted.exists()


@pytest.mark.parametrize("mac", [None, "0" * 64, "unsigned"])
def test_a_record_this_operator_did_not_sign_is_not_obeyed(tmp_path: Path, canaries, mac: str | None) -> None:
    # What a script could leave without the wall (git merge of a tracked sub/.dal/held/...): the operator's
    # own file, but no MAC made with the operator's key.
    victim, planted = canaries
    ws = tmp_path / "ws"
    held = ws / ".dal" / "held"
    held.mkdir(parents=True)
    body = _record(ws, victim, planted)
    text = body if mac == "unsigned" else json.dumps({"body": body, "mac": mac})
    (held / "999999-1-1.json").write_text(text)
    r = _run(ws)
    assert r.returncode == 0 and r.stdout == "hi\n\n", r
    assert victim.read_text() == "precious\n" and not planted.exists()
    assert (held / "999999-1-1.json").exists()  # left for the operator to look at


_NO_KEY = r"""
set -e
eval "$PRIVATE_TMP"
mkdir -p /tmp/ws && cd /tmp/ws && : > /tmp/homefile
printf '%s' "$S_DAL" > s.dal
dal() { env -u XDG_STATE_HOME HOME=/tmp/homefile "$PY" -m dal run --allow-run=python3 s.dal 2>/tmp/err; }
echo "fallback $(dal) $(test -e ran && echo ran) $(stat -c %a /tmp/dal-state-$(id -u)/held.key)"
rm -rf ran /tmp/dal-state-$(id -u) && mkdir -m 0777 /tmp/dal-state-$(id -u) && chown 65534 /tmp/dal-state-$(id -u)
echo "foreign $(dal) $(test -e ran && echo ran)"
grep -o "no key of the operator's to sign it with" .dal/receipts/*.json | head -1
ls .dal/held 2>/dev/null || true
cat /tmp/err >&2
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="a private /tmp (unshare -m) and a folder of another user need root")
def test_no_key_to_sign_the_record_means_the_walled_pipeline_does_not_start(tmp_path: Path) -> None:
    """Without a usable key (HOME a file, no XDG_STATE_HOME) the record was written unsigned, and
    an unsigned record is never finished: after a kill -9 the wall's undo was skipped without a word. A HOME
    that cannot hold the key uses /tmp/dal-state-EUID while it is the user's alone; when it is not either, the
    pipeline does not start, and says how to give DAL a folder. In a private /tmp."""
    from dal.effects import sandbox_status

    if not sandbox_status()[0]:
        pytest.skip("needs the bubblewrap wall (its pipelines are the ones with a record)")
    repo = Path(__file__).resolve().parents[2]
    r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", _NO_KEY], capture_output=True,
                       text=True, timeout=120, env={**os.environ, "PY": sys.executable, "PYTHONPATH": str(repo),
                            "PRIVATE_TMP": private_tmp_sh(),
                            "S_DAL": 'let r = run("python3 -c \\"open(\'ran\', \'w\')\\"")\nprint(r.code)\n'})
    lines = r.stdout.splitlines()
    assert r.returncode == 0 and lines[:2] == ["fallback 0 ran 600", "foreign 126 "], r.stdout + r.stderr
    assert lines[2].endswith("no key of the operator's to sign it with") and len(lines) == 3, r.stdout
