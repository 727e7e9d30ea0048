"""The policy in force of an operation: fixed when the operation starts, stored with each of its runs, and
the one every later run of it uses (docs/policy.md, "The policy in force").

A new operation runs under the policy its command line built (the file found or named, plus flags). Every
later run of the same operation — `dal resume`, the same `--key` or `operation("K")` again, a new attempt
after a failure — runs under the policy stored with the operation's newest run, widened only by the flags
on its own command line (the operator is trusted; what they add is recorded). The policy file on disk is
never read again for it: a script that rewrote `dal.toml` cannot widen its own operation, and when the file
differs from the one the operation started with, the run says so.

The runner adds to the protected set what records the run wherever it is: the store and its lock folder
and the receipts folder (the policy file in force is already there, see `Policy.load`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from dal.core.fsutil import realpath
from dal.core.records import ValueRecord
from dal.effects.policy import Policy, PolicyError
from dal.runner.spec import RunSpec, SpecError

__all__ = ["ADDITIVE_FLAGS", "Adopted", "adopt", "additions_of", "checked_policy", "policy_digest", "protect_run",
           "protect_spec", "receipt_policy", "stored_policy", "unguarded_policy_file"]

# The flags a later run of an operation may add to its stored policy (all of them widen; none narrows).
ADDITIVE_FLAGS = ("allow_run", "allow_read", "allow_write", "allow_net", "require_approval", "allow_env")


class Adopted(ValueRecord):
    """The stored policy a run of an existing operation adopted: from which run, what this run's command
    line added to it, and what to tell the operator (the file on disk changed, `--policy` ignored)."""

    __slots__ = ("policy", "from_run", "added", "notices")

    def __init__(self, policy: Policy, from_run: str | None, added: dict[str, Any], notices: list[str]) -> None:
        self.policy = policy
        self.from_run = from_run
        self.added = added
        self.notices = notices


def protect_run(policy: Policy, store: Path | None, receipts: Path) -> Policy:
    """`policy` with the store (its file, SQLite's side files and the lock folder) and the receipts folder
    added to the protected and the hidden set, wherever `--store`, `$DAL_STORE` and `--receipts` put them.
    `store` None: a store on a database server (no file here to protect)."""
    from dal.receipts.location import locks_folder

    if store is None:
        return policy.hiding([os.path.realpath(receipts)])

    db = os.path.realpath(store)
    # Hidden too: the store journals env() values and every command's output (docs/policy.md).
    sides = [db + side for side in ("-wal", "-shm", "-journal", "-seal", "-reserve")]
    return policy.hiding([db, *sides, str(locks_folder(db)), os.path.realpath(receipts)])


def protect_spec(spec: RunSpec, policy: Policy | None = None) -> Policy:
    """`policy` (default: the spec's) as a run of `spec` checks and walls its effects, before the recorded
    policy files are added: its store and receipts protected and hidden, a database server's socket and
    password files hidden. `dal run` and `dal policy check` both use it, so that they agree."""
    policy = spec.policy if policy is None else policy
    if not spec.store.is_file:  # a database server: no file here, but its socket and password files
        return protect_run(policy, None, spec.receipts_dir()).hiding(spec.store.private_paths())
    return protect_run(policy, spec.store.file, spec.receipts_dir())


def checked_policy(spec: RunSpec, policy: Policy | None = None) -> tuple[Policy, str | None]:
    """The policy a run of `spec` would check a command against (`policy`, default the spec's): protect_spec's,
    with every policy file the store recorded for the workspace protected (Run.guarded). `dal policy check` and
    `dal mcp`'s check_command use it, so that each answers as the run would. With a
    note when the store's recorded files cannot be read (then they are not in it)."""
    from dal.receipts.location import open_store
    from dal.receipts.store import NoStore, StoreError

    policy = protect_spec(spec, policy)
    try:
        with open_store(spec.store, readonly=True) as store:
            return policy.protecting(store.policy_files(policy.workspace)), None
    except NoStore:
        return policy, None
    except StoreError as e:
        return policy, f"the store's recorded policy files are not in this check: {e}"


def unguarded_policy_file(policy: Policy, recorded: list[str]) -> str | None:
    """Why a run may not start under `policy`'s file, or None: a file inside the workspace or a write root
    (where the script of any run of the workspace, under another policy, may have rewritten it since the
    operator last looked) that nothing protects in every run — not named `dal.toml`, not in a `.dal` or
    `.git` folder, not a policy file the store has recorded (those every run protects). docs/policy.md,
    "Policy files are protected"."""
    from dal.core.shellword import sh_quote
    from dal.effects.policy import PROTECTED_NAMES

    if policy.file_sha256 is None:
        return None
    path = realpath(policy.source)
    if PROTECTED_NAMES.intersection(path.split("/")) or path in {realpath(r) for r in recorded}:
        return None
    inside = [r for r in dict.fromkeys([policy.workspace, *policy.write_roots])
              if path == r or path.startswith(r.rstrip("/") + "/")]
    if not inside:
        return None
    where = "the workspace" if inside[0] == policy.workspace else "the write root"
    return (f"--policy {sh_quote(policy.source)}: the policy file is inside {where} {inside[0]}, where a script of "
            "another run (under another policy) may have rewritten it; DAL will not run under it. Nothing ran. "
            "Keep a policy file you name with --policy outside the workspace and the write roots, or name it "
            "dal.toml (every run protects a dal.toml wherever it is)")


def policy_digest(policy: Policy) -> str:
    """A short digest of everything a policy allows and protects (its stored JSON), to name it in a message."""
    import json

    from dal.core.digest import sha256

    return sha256(json.dumps(policy.to_json(), sort_keys=True).encode("utf-8")).hexdigest()[:16]


def stored_policy(row: dict[str, Any] | None) -> Policy | None:
    """The policy in force stored with a run (`Store.run_row()`), or None for a run an older DAL started
    (it kept only the flags). Raises PolicyError for a stored policy that cannot be read."""
    from dal.runner.stored import StoredRun  # the one reader of what the store keeps of a run's start

    try:
        return StoredRun.of(row).policy
    except SpecError as e:
        raise PolicyError(str(e)) from None


def additions_of(flags: dict[str, Any] | None) -> dict[str, Any]:
    """The additive flags among a command line's policy flags (`RunSpec.policy_flags`)."""
    flags = flags or {}
    out: dict[str, Any] = {}
    for k in ADDITIVE_FLAGS:
        v = flags.get(k)
        if v:
            out[k] = bool(v) if k == "allow_net" else ([v] if isinstance(v, str) else list(v))
    return out


def _name(path: str | None, workspace: str) -> str:
    if path is None:
        return "the default policy"
    try:
        rel = os.path.relpath(path, workspace)
    except ValueError:
        return path
    return rel if not rel.startswith("..") else path


def adopt(stored: Policy, from_run: str | None, fresh: Policy | None, flags: dict[str, Any] | None,
          operation: str) -> Adopted:
    """The policy in force for a later run of `operation`: `stored` widened by the additive `flags`; with
    the notices a person should see when the policy file on disk, or the one this command named (`fresh`),
    is not the stored one. Raises PolicyError for a malformed flag."""
    policy = stored.extended(**additions_of(flags))
    notices: list[str] = []
    ws = stored.workspace
    started_with = _name(stored.source if stored.file_sha256 is not None else None, ws)
    path, sha = stored.file_state()
    tail = "; the stored policy is used; start a new operation to use the new file"
    if stored.file_sha256 is not None and sha != stored.file_sha256:
        what = "is gone" if sha is None else "changed"
        notices.append(f"{started_with} {what} since this operation started{tail}")
    elif stored.file_sha256 is None and path is not None:
        notices.append(f"{_name(path, ws)} appeared since this operation started (it began under the default "
                       f"policy){tail}")
    if (fresh is not None and fresh.file_sha256 is not None
            and (fresh.source, fresh.file_sha256) != (stored.source, stored.file_sha256)
            and fresh.source != path):
        notices.append(f"{_name(fresh.source, ws)} is not used: operation {operation!r} runs under the policy it "
                       f"started with ({started_with}), plus the flags on this command line; start a new "
                       "operation to use another file")
    return Adopted(policy, from_run, policy.widening(stored), notices)


def receipt_policy(policy: Policy, adopted: Adopted | None, env_withheld: list[str]) -> dict[str, Any]:
    """The receipt's `policy` object: the policy in force, where it came from, what it allowed."""
    out: dict[str, Any] = {
        "source": policy.source,
        "sha256": policy.file_sha256,
        "allowed": sorted(policy.allowed - policy.denied),
        "approval": sorted(policy.approval - policy.denied),
        "denied": sorted(policy.denied),
        "read_roots": list(policy.read_roots),
        "write_roots": list(policy.write_roots),
        "network": policy.allow_net,
        "env": sorted(policy.env_allow),
        "env_withheld": env_withheld,
        "adopted_from": adopted.from_run if adopted is not None else None,
        "added": adopted.added if adopted is not None else {},
        "notices": list(adopted.notices) if adopted is not None else [],
    }
    return out

