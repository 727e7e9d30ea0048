"""wget may write into /dev/null only under an allow-list of its options, those under which it just opens its
outputs (fetchers._WGET_OPENS_ONLY), not a deny-list of the ones known to remove them (attack9 01: `--unlink`
and its abbreviations were missed, and wget unlinked the host's /dev/null, without the wall, as root). Any
option off the list -- each spelling wget accepts, `-e` commands in any case and with `_`/`-` -- makes /dev/null
no output of it. Executed in a private mount namespace with a private /dev (test_wget_dev_null.DRIVER)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_wget_dev_null import DRIVER, ROOT

from dal.effects import Policy, check_command
from dal.effects.classify.fetchers import _WGET_OPENS_ONLY, WGET_LONG

URL = "http://127.0.0.1:{port}/page"
# common uses, every one on the allow-list
OPENS_ONLY = [f"wget -q -O /dev/null {URL}", f"wget -nv -S -T 5 -t 2 --header=X-Delete:1 -O /dev/null {URL}",
              f"wget -q -o /dev/null -O out.txt {URL}", f"wget -q -a /dev/null --spider {URL}",
              f"wget -q -e robots=off -e TRIES=2 -e read_timeout=5 -O /dev/null {URL}",
              f"wget -q --no-check-certificate --user-agent=x --post-data=a=1 -O /dev/null {URL}",
              f"wget -q -nc --no-verb --max-redirect=2 --output-document=/dev/null {URL}"]
OFF_THE_LIST = [f"wget -q {opt} -O /dev/null {URL}" for opt in (
    "--unlink", "--unl", "--un", "--backups=1", "--backups 2", "-N", "--timestamping", "--timest", "--xattr",
    "--xa", "-k", "-K", "--convert-file-only", "--preserve-permissions", "--retr-symlinks", "-c", "--continue",
    "-e timestamping=on", "-e TimeStamping=on", "-e time-stamping=on", "-e continue=on", "-e noclobber=off -N",
)] + [f"wget -q --unlink -o /dev/null -O out.txt {URL}", f"wget -q -N -a /dev/null {URL}"]
MODEL_DENIES = [f"wget -q {opt} -O /dev/null {URL}" for opt in (
    "-e unlink=on", "-e UNLINK=on", "-e un_link=on", "-e Un-Link=1", "-e backups=1", "-e xattr=on")]


@pytest.mark.parametrize("command", [*OPENS_ONLY, *OFF_THE_LIST, *MODEL_DENIES])
def test_dev_null_is_an_output_of_wget_only_under_the_allow_list(tmp_path: Path, command: str) -> None:
    d = check_command(command.format(port=80), Policy.load(tmp_path, allow_run=["wget"], allow_net=True))
    assert d.allowed == (command in OPENS_ONLY), d.reason
    if command in OFF_THE_LIST:
        assert d.reason.startswith("/dev/null: wget may replace, move or change /dev/null itself"), d.reason
    elif command in MODEL_DENIES:
        assert "a wgetrc command" in d.reason, d.reason


def test_the_allow_list_names_options_of_the_model_and_none_that_act_on_a_saved_file() -> None:
    assert _WGET_OPENS_ONLY <= set(WGET_LONG)
    acting = {"unlink", "backups", "timestamping", "xattr", "convert-links", "backup-converted", "convert-file-only",
              "preserve-permissions", "retr-symlinks", "continue"}
    assert not acting & _WGET_OPENS_ONLY
    # an option the model learns later is off the list until someone puts it there
    assert not {n for n, kind in WGET_LONG.items() if kind.startswith("deny:")} & _WGET_OPENS_ONLY


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("wget"),
                    reason="a private /dev needs root and unshare; and wget")
def test_wget_under_the_list_or_off_it_never_replaces_dev_null(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    commands = [OPENS_ONLY[0], OPENS_ONLY[4], *OFF_THE_LIST[:3], OFF_THE_LIST[17], MODEL_DENIES[2]]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_STATE_HOME": str(tmp_path / "state")}
    r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                        'mount --bind /dev/null /usr/bin/bwrap && mount -t tmpfs -o mode=755 tmpfs /dev && '
                        'exec "$0" -c "$1" "$2" "$3"', sys.executable, DRIVER, str(ws), json.dumps(commands)],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    got = {c["command"]: c for c in json.loads(r.stdout.splitlines()[-1])}
    assert [c for c in got.values() if not (c["device"] and c["dev"] == ["null"])] == []
    for command, c in got.items():
        assert c["status"] == ("completed" if command in OPENS_ONLY else "denied"), c
