"""The policy in force is one serialisable value: every field round-trips through JSON (the store keeps it
with each run), a damaged one is refused, flags widen it the way a resume applies them, and `[env]`."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from dal.effects import Policy, PolicyError, check_command
from dal.effects.policy import HARMLESS_ENV

RICH = """
[run]
defaults = true
allow = ["git"]
deny = ["rm"]
require_approval = ["curl"]
[paths]
read = ["../shared"]
write = ["out"]
protect = ["keep"]
[network]
allow = true
[limits]
timeout = 7.5
max_output = 4096
[env]
allow = ["API_BASE", "REGION"]
[programs.curl]
class = "external"
idempotent = false
[programs.make]
class = "local"
idempotent = true
approval = false
"""


def rich(tmp_path: Path) -> Policy:
    ws = tmp_path / "ws"
    ws.mkdir()
    (tmp_path / "shared").mkdir()
    (ws / "dal.toml").write_text(RICH)
    return Policy.load(ws, allow_env=["TOKEN_NAME"], allow_run=["jq"])


def test_every_field_round_trips_through_json(tmp_path: Path) -> None:
    p = rich(tmp_path)
    data = json.loads(json.dumps(p.to_json()))  # plain JSON, as the store keeps it
    back = Policy.from_json(data)
    assert back == p
    # every field a Policy compares is in the JSON: a new field that is not serialised fails here
    for name in Policy._compared:
        assert name in data, name
        assert getattr(back, name) == getattr(p, name), name
    assert back.rule("curl") == p.rule("curl") and back.rule("make").idempotent is True
    # and decides the same
    for cmd in ("git status", "rm -f x", "curl https://example.com", "touch out/x", "touch x", "sh -c id"):
        a, b = check_command(cmd, p), check_command(cmd, back)
        assert (a.allowed, a.approval_required, a.reason) == (b.allowed, b.approval_required, b.reason), cmd


def test_the_file_hash_is_of_the_bytes_read(tmp_path: Path) -> None:
    import hashlib

    p = rich(tmp_path)
    raw = (tmp_path / "ws" / "dal.toml").read_bytes()
    assert p.file_sha256 == hashlib.sha256(raw).hexdigest()
    assert p.source == str(tmp_path.resolve() / "ws" / "dal.toml")
    assert Policy.load(tmp_path).file_sha256 is None  # the default policy has no file
    assert p.file_state() == (p.source, p.file_sha256)
    (tmp_path / "ws" / "dal.toml").write_text(RICH + "\n# changed\n")
    assert p.file_state()[1] not in (None, p.file_sha256)
    (tmp_path / "ws" / "dal.toml").unlink()
    assert p.file_state() == (p.source, None)


def test_an_explicit_policy_file_is_named_by_its_absolute_path(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "rules.toml").write_text("[run]\nallow = [\"git\"]\n")
    monkeypatch.chdir(tmp_path)
    p = Policy.load(tmp_path, "rules.toml")
    assert p.source == str(tmp_path / "rules.toml") and os.path.isabs(p.source)
    assert p.protection(str(tmp_path.resolve() / "rules.toml")) is not None


@pytest.mark.parametrize("damage,field", [
    (lambda d: d.pop("allowed"), "allowed"),
    (lambda d: d.update(allowed="sh"), "allowed"),
    (lambda d: d.update(version=99), "version"),
    (lambda d: d.update(allow_net="yes"), "allow_net"),
    (lambda d: d.update(rules=[{"class": "local"}]), "rules"),
    (lambda d: d.update(timeout="soon"), "timeout"),
])
def test_a_damaged_stored_policy_is_refused(tmp_path: Path, damage, field) -> None:
    data = rich(tmp_path).to_json()
    damage(data)
    with pytest.raises(PolicyError, match=field):
        Policy.from_json(data)
    with pytest.raises(PolicyError):
        Policy.from_json(["not", "an", "object"])


def test_flags_widen_a_stored_policy_and_record_what_they_added(tmp_path: Path) -> None:
    p = rich(tmp_path)
    wider = p.extended(allow_run=["sh"], require_approval=["sendmail"], allow_write=["drafts"],
                       allow_read=["/etc/hostname"], allow_env=["EXTRA"], allow_net=True)
    ws = p.workspace
    assert {"sh", "sendmail"} <= wider.allowed and "sendmail" in wider.approval
    # --allow-write adds a root to a stored policy (at a start it would name the only ones)
    assert wider.write_roots == (*p.write_roots, os.path.join(ws, "drafts"))
    assert os.path.join(ws, "drafts") in wider.read_roots and "/etc/hostname" in wider.read_roots
    assert wider.env_allow == p.env_allow | {"EXTRA"}
    assert wider.widening(p) == {
        "allow_run": ["sh"], "require_approval": ["sendmail"], "allow_read": ["/etc/hostname"],
        "allow_write": [os.path.join(ws, "drafts")], "allow_env": ["EXTRA"],
    }  # the network was already allowed by the file
    assert p.extended(allow_run=["git"]).widening(p) == {}  # what it already allowed adds nothing
    # deny still wins over a flag
    assert not check_command("rm -f x", p.extended(allow_run=["rm"])).allowed
    with pytest.raises(PolicyError, match="--allow-run"):
        p.extended(allow_run=["/bin/sh"])
    with pytest.raises(PolicyError, match="--allow-env"):
        p.extended(allow_env=["NOT-A-NAME"])


def test_protecting_adds_resolved_paths(tmp_path: Path) -> None:
    p = Policy.load(tmp_path).protecting([tmp_path / "elsewhere" / "store.db"])
    target = str(tmp_path.resolve() / "elsewhere" / "store.db")
    assert target in p.protected and p.protection(target) is not None
    assert p.protection(str(tmp_path.resolve() / "elsewhere" / "other.txt")) is None


def test_env_reads_only_named_and_harmless_variables(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("DAL_TEST_SECRET", "s3cr3t")
    monkeypatch.setenv("TZ", "UTC")
    monkeypatch.setenv("API_BASE", "https://api.example")
    p = rich(tmp_path)
    assert p.getenv("API_BASE") == "https://api.example"  # [env] allow
    assert p.getenv("TZ") == "UTC"  # harmless
    assert p.getenv("DAL_TEST_SECRET") is None and not p.env_visible("DAL_TEST_SECRET")
    assert p.extended(allow_env=["DAL_TEST_SECRET"]).getenv("DAL_TEST_SECRET") == "s3cr3t"
    for name in ("HOME", "USER", "PATH", "PWD", "SHELL", "LOGNAME", "HOSTNAME"):
        assert name not in HARMLESS_ENV and not Policy.load(tmp_path).env_visible(name)


@pytest.mark.parametrize("text,message", [
    ('[env]\nallow = "TOKEN"\n', "env.allow: expected a list of strings"),
    ('[env]\nallow = ["A B"]\n', "is not an environment variable name"),
    ('[env]\nread = ["A"]\n', "env.read: unknown key"),
])
def test_env_section_errors_name_the_key(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "dal.toml").write_text(text)
    with pytest.raises(PolicyError, match=message):
        Policy.load(tmp_path)


def test_a_new_scalar_field_round_trips_without_a_codec(tmp_path: Path) -> None:
    # A [limits] key added to Policy later (None, a number, a string or a boolean) is kept as it is.
    class Wider(Policy):
        __slots__ = ("max_widgets",)
        _compared = _shown = (*Policy._compared, "max_widgets")

        def __init__(self, *args, max_widgets: int | None = None, **kw) -> None:
            super().__init__(*args, **kw)
            object.__setattr__(self, "max_widgets", max_widgets)

    p = Wider(str(tmp_path), frozenset({"ls"}), max_widgets=7)
    data = json.loads(json.dumps(p.to_json()))
    assert data["max_widgets"] == 7 and Wider.from_json(data) == p
    del data["max_widgets"]  # stored before the field existed: its default
    assert Wider.from_json(data).max_widgets is None
    with pytest.raises(PolicyError, match="max_widgets"):
        Wider.from_json({**data, "max_widgets": [1]})
