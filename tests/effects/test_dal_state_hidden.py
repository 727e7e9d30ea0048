"""DAL's own state (~/.local/state/dal or $XDG_STATE_HOME/dal: held.key, the REPL's history) is neither readable
nor writable by any command, also when a root covers HOME (root runs DAL in /root, a default-policy
`cp .local/state/dal/held.key stolen.key` copied the key that signs held records; with it, a record forged
off-machine made the operator's next start write and remove files outside every root). And a record's power
is bounded whatever its MAC: one that names a path outside its workspace and the policy's write roots is not
acted on. Executed next to canaries, with the wall and without."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dal.effects import Policy, check_command, sandbox_status

walled = pytest.mark.skipif(not sandbox_status()[0], reason="bubblewrap unavailable")
KEY = ".local/state/dal/held.key"


def _env(home: Path, xdg: Path | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "XDG_STATE_HOME"}
    env["HOME"] = str(home)
    if xdg is not None:
        env["XDG_STATE_HOME"] = str(xdg)
    return env


def _make_key(folder: Path) -> bytes:
    folder.mkdir(parents=True, mode=0o700, exist_ok=True)
    key = os.urandom(32)
    fd = os.open(folder / "held.key", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, key)
    os.close(fd)
    return key


def _dal(ws: Path, env: dict[str, str], script: str, *flags: str) -> subprocess.CompletedProcess[str]:
    (ws / "s.dal").write_text(script)
    return subprocess.run([sys.executable, "-m", "dal", "run", *flags, "s.dal"], cwd=ws, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """The operator's HOME, which is also the workspace (root running DAL in /root)."""
    h = tmp_path / "home"
    h.mkdir()
    return h


@pytest.mark.parametrize("command", [
    f"cat {KEY}", f"cp {KEY} stolen.key", "cp -r .local copy", "cp -a . copy", "grep -r . .local",
    "grep -r -a . .", f"head -c 32 {KEY}", f"sort {KEY}", f"wc -c {KEY}",
])
def test_the_check_keeps_every_read_of_dals_state(home: Path, monkeypatch: pytest.MonkeyPatch, command: str) -> None:
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    _make_key(home / ".local/state/dal")
    d = check_command(command, Policy.default(home))
    assert not d.allowed and "DAL's own state" in d.reason, d


@pytest.mark.parametrize("command", [
    f"tee {KEY}", f"rm {KEY}", "rm -r .local", "mv .local/state x", "mv .local x", "mkdir -p .local/state/dal/x",
    f"cp s.dal {KEY}", "cp -r tpl/. .local/state",
])
def test_the_check_keeps_every_change_of_dals_state(home: Path, monkeypatch: pytest.MonkeyPatch, command: str) -> None:
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    _make_key(home / ".local/state/dal")
    (home / "s.dal").write_text("")
    (home / "tpl/dal").mkdir(parents=True)
    (home / "tpl/dal/held.key").write_bytes(b"k" * 32)
    d = check_command(command, Policy.default(home))
    assert not d.allowed and "DAL's own state" in d.reason, d


def test_the_check_keeps_a_state_folder_that_does_not_exist_yet(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # No key yet: a script must not plant one of its own for DAL to sign records with.
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    (home / "k").write_bytes(b"k" * 32)
    for command in ("mkdir -p .local/state/dal", f"cp k {KEY}", "mkdir -p .local/state && cp -r k .local/state/dal"):
        d = check_command(command, Policy.default(home))
        assert not d.allowed and "DAL's own state" in d.reason, (command, d)


def test_xdg_state_home_is_kept_too(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    xdg = home / "xdg"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_STATE_HOME", str(xdg))
    _make_key(xdg / "dal")
    _make_key(home / ".local/state/dal")  # the folder a run without XDG_STATE_HOME uses: kept as well
    for command in ("cat xdg/dal/held.key", f"cat {KEY}", "rm -r xdg"):
        d = check_command(command, Policy.default(home))
        assert not d.allowed and "DAL's own state" in d.reason, (command, d)
    assert check_command("cat s.dal xdg/other", Policy.default(home)).allowed  # the rest of HOME is the workspace's


def test_a_run_in_home_cannot_copy_the_key(home: Path) -> None:
    # Executed: the default policy, HOME the workspace.
    key = _make_key(home / ".local/state/dal")
    r = _dal(home, _env(home), f'run("cp {KEY} stolen.key")\n')
    assert "was denied" in r.stderr and "DAL's own state" in r.stderr, r
    assert not (home / "stolen.key").exists()
    assert (home / KEY).read_bytes() == key


@walled
def test_the_wall_shows_no_state_and_lets_nothing_change_it(home: Path) -> None:
    # A program the check cannot see (python3, allowed by name) runs in the wall with HOME its write root.
    key = _make_key(home / ".local/state/dal")
    prog = ("import os\n"
            "print(sorted(os.listdir('.local/state/dal')))\n"
            "for f in (lambda: open('.local/state/dal/held.key', 'wb').write(b'x' * 32),\n"
            "          lambda: os.rename('.local/state', 'moved'), lambda: os.rename('.local', 'moved'),\n"
            "          lambda: os.rmdir('.local/state/dal')):\n"
            "    try:\n"
            "        f(); print('done')\n"
            "    except OSError as e:\n"
            "        print(e.errno)\n")
    (home / "p.py").write_text(prog)
    r = _dal(home, _env(home), 'print(run("python3 p.py").stdout)\n', "--allow-run=python3")
    assert r.returncode == 0, r
    assert "done" not in r.stdout and r.stdout.startswith("[]\n"), r.stdout
    assert (home / KEY).read_bytes() == key and not (home / "moved").exists()


@walled
def test_the_wall_lets_no_program_plant_a_key_where_none_is_yet(home: Path) -> None:
    (home / "p.py").write_text("import os\nos.makedirs('.local/state/dal', exist_ok=True)\ntry:\n"
                               "    open('.local/state/dal/held.key', 'wb').write(b'x' * 32); print('done')\n"
                               "except OSError as e:\n    print(e.errno)\n")
    r = _dal(home, _env(home), 'print(run("python3 p.py").stdout)\n', "--allow-run=python3")
    assert r.returncode == 0 and r.stdout == "30\n\n", r  # EROFS: the wall made the folder first, read-only
    key = home / KEY
    assert not key.exists() or key.read_bytes() != b"x" * 32


# --- a record's power is bounded, whatever its MAC ------------------------------------------------------------

def _wall(ws: Path, **over: object) -> dict:
    wall = {"placeholders": [], "sweep_at": None, "index": None, "git_marks": [], "write_roots": [str(ws)],
            "ws": str(ws), "lock_git": False, "nested": {}, "nested_git": [], "absent": [], "gitfiles": {},
            "live": {}}
    wall.update(over)
    return wall


def _plant(ws: Path, key: bytes, wall: dict | None = None, guard: dict | None = None) -> Path:
    body = json.dumps({"version": 1, "workspace": str(ws), "guard": guard, "wall": wall})
    held = ws / ".dal" / "held"
    held.mkdir(parents=True, exist_ok=True)
    path = held / "999999-1-1.json"  # a dead owner's name
    path.write_text(json.dumps({"body": body, "mac": hmac.new(key, body.encode(), hashlib.sha256).hexdigest()}))
    return path


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    o = tmp_path / "outside"
    o.mkdir()
    (o / "canary.txt").write_text("precious\n")
    (o / ".dal").mkdir()  # a store elsewhere: a forged "new store" for the undo to remove
    return o


def _forgeries(ws: Path, outside: Path) -> dict[str, tuple[dict | None, dict | None]]:
    canary, planted = str(outside / "canary.txt"), str(outside / "pwned.sh")
    return {
        "nested": (_wall(ws, nested={planted: "echo pwned\n"}), None),
        "absent": (_wall(ws, absent=[canary]), None),
        "write-root": (_wall(ws, write_roots=[str(ws), str(outside)], git_marks=[]), None),
        "dotdot": (_wall(ws, absent=[f"{ws}/../outside/canary.txt"]), None),
        "through-a-symlink": (_wall(ws, absent=[f"{ws}/link/canary.txt"]), None),
        "sweep-names": (_wall(ws, sweep_at=[str(ws), str(ws / ".git"), ["../../outside/canary.txt"], True]), None),
        "guard": (None, {"held_paths": [], "git": None, "top": str(ws), "common": str(ws / ".git"),
                         "dirs": [str(ws / ".git")], "before": {canary: "changed\n"}}),
        "guard-top": (None, {"held_paths": [], "git": None, "top": str(outside), "common": str(ws / ".git"),
                             "dirs": [str(ws / ".git")], "before": {}}),
        "not-a-record": (_wall(ws, absent=[["nested", canary]]), None),
    }


@pytest.mark.parametrize("kind", ["nested", "absent", "write-root", "dotdot", "through-a-symlink", "sweep-names",
                                  "guard", "guard-top", "not-a-record"])
def test_a_signed_record_naming_a_path_outside_is_not_acted_on(tmp_path: Path, outside: Path, kind: str) -> None:
    # The key was had anyway (stolen before this fix, or read by other means): the record still writes and
    # removes nothing outside the workspace; the run stops, and the record is left for the operator.
    home = tmp_path / "home"
    home.mkdir()
    key = _make_key(home / ".local/state/dal")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "link").symlink_to(outside)
    wall, guard = _forgeries(ws, outside)[kind]
    record = _plant(ws, key, wall, guard)
    r = _dal(ws, _env(home), 'print(run("echo hi").stdout)\n')
    why = ("not acted on", "not a plain absolute path", "not a record DAL writes", "not the names DAL sweeps",
           "does not enclose the workspace")
    assert r.returncode != 0 and "nothing runs here" in r.stderr and any(w in r.stderr for w in why), r
    assert "hi" not in r.stdout
    assert (outside / "canary.txt").read_text() == "precious\n" and not (outside / "pwned.sh").exists()
    assert (outside / ".dal").is_dir()
    assert record.exists()


def test_a_signed_record_inside_the_workspace_is_still_finished(tmp_path: Path) -> None:
    # The bound takes nothing from a genuine record: a policy file a killed pipeline made is removed.
    home = tmp_path / "home"
    home.mkdir()
    key = _make_key(home / ".local/state/dal")
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    (ws / "sub" / "dal.toml").write_text('[run]\nallow = ["sh"]\n')
    record = _plant(ws, key, _wall(ws, git_marks=[]))
    r = _dal(ws, _env(home), 'print(run("echo hi").stdout)\n')
    assert "sub/dal.toml" in r.stderr and not (ws / "sub" / "dal.toml").exists(), r
    assert not record.exists()
