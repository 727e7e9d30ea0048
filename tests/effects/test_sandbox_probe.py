"""The bubblewrap probe (os.posix_spawn, startable in the background) says what the subprocess-based probe
said, in every case: it works, it fails with a message or an exit status, it cannot start, it hangs."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from dal.effects.wall import sandbox


def reference(argv: list[str], timeout: float) -> tuple[bool, str]:
    """The probe as it was written with subprocess."""
    try:
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, f"bubblewrap does not start here: {e}"
    if proc.returncode != 0:
        err = proc.stderr.decode("utf-8", errors="replace").strip().splitlines()
        return False, f"bubblewrap does not work here: {err[0] if err else f'exit {proc.returncode}'}"
    return True, f"bubblewrap at {argv[0]}"


@pytest.fixture
def fake_bwrap(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(sandbox, "BWRAP", sandbox.BWRAP)
    monkeypatch.setattr(sandbox, "_pending", None)
    sandbox.sandbox_status.cache_clear()
    yield
    sandbox.sandbox_status.cache_clear()  # the next caller probes the real bubblewrap again


def script(tmp_path: Path, body: str) -> str:
    exe = tmp_path / "bwrap"
    exe.write_text("#!/bin/sh\n" + body + "\n")
    exe.chmod(0o755)
    return str(exe)


CASES = {
    "works": "exit 0",
    "fails with a message": "echo 'out' ; echo 'bwrap: No permissions to create new namespace' >&2; exit 1",
    "fails silently": "exit 3",
    "is killed": "kill -9 $$",
    "writes a lot": "yes 'bwrap: noise' | head -c 200000 >&2; exit 1",
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("early", [False, True])
def test_the_probe_says_what_subprocess_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_bwrap: None, case: str, early: bool
) -> None:
    exe = script(tmp_path, CASES[case])
    monkeypatch.setattr(sandbox, "_which", lambda name, path: exe if name == "bwrap" else "/bin/true")
    monkeypatch.setattr(sandbox, "_base", lambda *a: [exe])
    if early:
        sandbox.start_probe()
    assert sandbox.sandbox_status() == reference([exe, "--", "/bin/true"], 10)


def test_a_probe_that_cannot_start_or_hangs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_bwrap: None) -> None:
    missing = str(tmp_path / "missing")
    not_executable = tmp_path / "plain"
    not_executable.write_text("")
    for exe in (missing, str(not_executable)):
        monkeypatch.setattr(sandbox, "_which", lambda name, path, exe=exe: exe if name == "bwrap" else "/bin/true")
        monkeypatch.setattr(sandbox, "_base", lambda *a, exe=exe: [exe])
        sandbox.sandbox_status.cache_clear()
        assert sandbox.sandbox_status() == reference([exe, "--", "/bin/true"], 10)
    hangs = script(tmp_path, "exec sleep 30")
    monkeypatch.setattr(sandbox, "_which", lambda name, path: hangs if name == "bwrap" else "/bin/true")
    monkeypatch.setattr(sandbox, "_base", lambda *a: [hangs])
    monkeypatch.setattr(sandbox, "_PROBE_TIMEOUT", 0.3)
    sandbox.sandbox_status.cache_clear()
    assert sandbox.sandbox_status() == reference([hangs, "--", "/bin/true"], 0.3)


def test_no_bubblewrap(monkeypatch: pytest.MonkeyPatch, fake_bwrap: None) -> None:
    monkeypatch.setattr(sandbox, "_which", lambda name, path: None if name == "bwrap" else "/bin/true")
    sandbox.start_probe()
    assert sandbox.sandbox_status() == (False, "bubblewrap (bwrap) is not installed")
