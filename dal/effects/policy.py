"""The effect policy: which programs may run, with which class, where they may read and write.

Sources, later ones adding to earlier ones: the built-in default toolset, a TOML file (`dal.toml` at the
workspace root or an explicit `--policy FILE`), then Deno-style flags. See docs/policy.md for every key.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from dal.records import FrozenRecord

__all__ = ["Policy", "PolicyError", "ProgramRule", "EFFECT_CLASSES", "TRUSTED_PATH", "PROTECTED_NAMES"]

EFFECT_CLASSES = ("read", "local", "external")
TRUSTED_PATH = "/usr/local/bin:/usr/bin:/bin"

# The names of `programs.DEFAULT_TOOLSET` (every program with an argument model, and find), spelled out so
# that building a policy, which every `dal run` does at start, does not build every argument model;
# tests/effects/test_effects_policy.py checks that the two agree.
DEFAULT_TOOLSET_NAMES: frozenset[str] = frozenset(
    "[ b2sum basename cat comm cp cut date diff dirname du echo false find grep head ls md5sum mkdir mv paste "
    "printf pwd readlink realpath rm seq sha1sum sha256sum sha512sum sleep sort stat tail tee test touch tr "
    "true uniq wc".split()
)


# Paths a script may never write, whatever the roots say (docs/policy.md, "Protected paths"): the files that
# decide or record what a script may do, and the parts of a git repository that make git run code later.
# Relative to the workspace; `[paths] protect` adds more, and the runner adds the policy file in force,
# the store and the receipts folder wherever they are.
# (The wall makes each of these that exists read-only; the check also protects them by name, anywhere.)
WORKSPACE_PROTECTED: tuple[str, ...] = (
    "dal.toml", ".dal", ".git/config", ".git/config.worktree", ".git/hooks", ".git/info", ".git/modules",
    ".git/worktrees", ".git/commondir",
)
# Names protected wherever they appear: a `dal.toml` in any folder is the policy of the workspace a later
# `dal run` may discover there, and a `.dal` folder is a store.
PROTECTED_NAMES: frozenset[str] = frozenset({"dal.toml", ".dal"})
# Entries of a `.git` folder, in any repository, through which git runs programs or reads configuration
# (config's core.fsmonitor, core.pager, aliases, filters; hooks; info/attributes naming filter drivers;
# the configuration of submodules and worktrees).
GIT_PROTECTED: frozenset[str] = frozenset(
    {"config", "config.worktree", "hooks", "info", "modules", "worktrees", "commondir"}
)


class PolicyError(Exception):
    """A bad policy file or flag; the message names the file (or flag) and the key."""


class ProgramRule(FrozenRecord):
    """Per-program settings from `[programs.NAME]`; None means "use the built-in default"."""

    __slots__ = ("name", "effect_class", "idempotent", "approval")

    def __init__(
        self, name: str, effect_class: str | None = None, idempotent: bool | None = None, approval: bool | None = None
    ) -> None:
        init = object.__setattr__
        init(self, "name", name)
        init(self, "effect_class", effect_class)
        init(self, "idempotent", idempotent)
        init(self, "approval", approval)


class Policy(FrozenRecord):
    __slots__ = (
        "workspace", "allowed", "denied", "approval", "rules", "read_roots", "write_roots", "allow_net", "timeout",
        "max_output", "source", "protected", "_rule_index",
    )
    _compared = _shown = __slots__[:-1]  # not the index built from `rules`

    def __init__(
        self,
        workspace: str,
        allowed: frozenset[str],
        denied: frozenset[str] = frozenset(),
        approval: frozenset[str] = frozenset(),
        rules: tuple[ProgramRule, ...] = (),
        read_roots: tuple[str, ...] = (),
        write_roots: tuple[str, ...] = (),
        allow_net: bool = False,
        timeout: float | None = None,
        max_output: int | None = None,
        source: str = "default policy",
        protected: tuple[str, ...] = (),
    ) -> None:
        init = object.__setattr__
        init(self, "workspace", workspace)
        init(self, "allowed", allowed)
        init(self, "denied", denied)
        init(self, "approval", approval)
        init(self, "rules", rules)
        init(self, "read_roots", read_roots)
        init(self, "write_roots", write_roots)
        init(self, "allow_net", allow_net)
        init(self, "timeout", timeout)
        init(self, "max_output", max_output)
        init(self, "source", source)
        init(self, "protected", protected)
        init(self, "_rule_index", {r.name: r for r in rules})

    def rule(self, name: str) -> ProgramRule | None:
        return self._rule_index.get(name)

    def protection(self, resolved: str) -> str | None:
        """Why a script may not write the absolute, resolved path `resolved`, or None when it may.

        Protected: every path in `protected` and everything below it; any path with a component named in
        PROTECTED_NAMES (a `dal.toml` or a `.dal` folder anywhere); and, in any git repository, the parts of
        `.git/` that make git run code later (GIT_PROTECTED)."""
        for root in self.protected:
            if resolved == root or resolved.startswith(root.rstrip("/") + "/"):
                return f"{root} is protected: scripts never change the files that decide or record what they may do"
        parts = resolved.split("/")
        for i, part in enumerate(parts):
            if part in PROTECTED_NAMES:
                what = "a policy file" if part == "dal.toml" else "a run store"
                return f"{resolved} is protected: {part} is {what}, which scripts never change"
            if part == ".git" and i + 1 < len(parts) and parts[i + 1] in GIT_PROTECTED:
                return (f"{resolved} is protected: .git/{parts[i + 1]} can make git run programs later, so scripts "
                        "never change it")
        return None

    @classmethod
    def default(cls, workspace: Path | str) -> Policy:
        """The built-in policy: the default toolset, reads and writes inside the workspace, no network."""
        return cls.load(Path(workspace), None, _skip_file=True)

    @classmethod
    def load(
        cls,
        workspace: Path | str,
        policy_file: Path | str | None = None,
        *,
        allow_run: Iterable[str] = (),
        allow_read: Iterable[str] = (),
        allow_write: Iterable[str] = (),
        allow_net: bool = False,
        require_approval: Iterable[str] = (),
        _skip_file: bool = False,
    ) -> Policy:
        """Build the policy for `workspace` from the defaults, the TOML file and the flags.

        With no `policy_file`, `WORKSPACE/dal.toml` is read when it exists. Raises PolicyError.
        """
        ws = os.path.realpath(os.fspath(workspace))
        if not os.path.isdir(ws):
            raise PolicyError(f"--workspace: {workspace} is not a directory")
        data: dict = {}
        source = "default policy"
        if policy_file is not None:
            path = Path(policy_file)
            if not path.is_file():
                raise PolicyError(f"--policy: {policy_file}: no such file")
            data, source = _read_toml(path), str(path)
        elif not _skip_file and os.path.isfile(os.path.join(ws, "dal.toml")):
            path = Path(ws, "dal.toml")
            data, source = _read_toml(path), str(path)
        return _build(
            ws,
            data,
            source,
            _names(allow_run, "--allow-run"),
            _names(require_approval, "--require-approval"),
            _split(allow_read),
            _split(allow_write),
            allow_net,
        )


def _read_toml(path: Path) -> dict:
    import tomllib  # only when there is a policy file: most runs have none, and it costs ~7 ms to import

    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise PolicyError(f"{path}: invalid TOML: {e}") from e
    except OSError as e:
        raise PolicyError(f"{path}: {e.strerror}") from e


def _split(values: Iterable[str] | str) -> list[str]:
    if isinstance(values, str):
        values = [values]
    out = []
    for v in values:
        out += [p.strip() for p in str(v).split(",") if p.strip()]
    return out


def _names(values: Iterable[str] | str, where: str) -> list[str]:
    names = _split(values)
    for n in names:
        if "/" in n or n.strip() != n or not n:
            raise PolicyError(f"{where}: {n!r} is not a bare program name")
    return names


_TOP_KEYS = {"run", "paths", "network", "programs", "limits"}
_SECTION_KEYS = {
    "run": {"defaults", "allow", "deny", "require_approval"},
    "paths": {"read", "write", "protect"},
    "network": {"allow"},
    "limits": {"timeout", "max_output"},
}
_PROGRAM_KEYS = {"class", "idempotent", "approval", "allow"}


def _want(cond: bool, source: str, key: str, what: str) -> None:
    if not cond:
        raise PolicyError(f"{source}: {key}: {what}")


def _str_list(value: object, source: str, key: str) -> list[str]:
    _want(
        isinstance(value, list) and all(isinstance(x, str) for x in value),
        source,
        key,
        "expected a list of strings",
    )
    return list(value)  # type: ignore[arg-type]


def _build(
    ws: str,
    data: dict,
    source: str,
    flag_run: list[str],
    flag_approval: list[str],
    flag_read: list[str],
    flag_write: list[str],
    flag_net: bool,
) -> Policy:
    for key in data:
        _want(key in _TOP_KEYS, source, key, f"unknown section (expected one of {', '.join(sorted(_TOP_KEYS))})")
    for section, keys in _SECTION_KEYS.items():
        table = data.get(section, {})
        _want(isinstance(table, dict), source, section, "expected a table")
        for key in table:
            _want(key in keys, source, f"{section}.{key}", "unknown key")
    run = data.get("run", {})
    defaults = run.get("defaults", True)
    _want(isinstance(defaults, bool), source, "run.defaults", "expected true or false")
    allowed = set(DEFAULT_TOOLSET_NAMES) if defaults else set()
    allowed |= set(_str_list(run.get("allow", []), source, "run.allow"))
    denied = set(_str_list(run.get("deny", []), source, "run.deny"))
    approval = set(_str_list(run.get("require_approval", []), source, "run.require_approval"))

    rules = []
    programs = data.get("programs", {})
    _want(isinstance(programs, dict), source, "programs", "expected a table of [programs.NAME] tables")
    for name, table in programs.items():
        key = f"programs.{name}"
        _want(isinstance(table, dict), source, key, "expected a table")
        _want("/" not in name and name != "", source, key, "expected a bare program name")
        for k in table:
            _want(k in _PROGRAM_KEYS, source, f"{key}.{k}", "unknown key")
        klass = table.get("class")
        _want(
            klass is None or klass in EFFECT_CLASSES,
            source,
            f"{key}.class",
            "expected one of read, local, external",
        )
        for k in ("idempotent", "approval", "allow"):
            _want(isinstance(table.get(k, False), bool), source, f"{key}.{k}", "expected true or false")
        if table.get("allow", True):
            allowed.add(name)
        else:  # configure without allowing, or take a default program away
            allowed.discard(name)
        rules.append(ProgramRule(name, klass, table.get("idempotent"), table.get("approval")))

    paths = data.get("paths", {})
    read = [*_str_list(paths.get("read", []), source, "paths.read"), *flag_read]
    write = [*_str_list(paths.get("write", []), source, "paths.write"), *flag_write]
    net = data.get("network", {}).get("allow", False)
    _want(isinstance(net, bool), source, "network.allow", "expected true or false")

    limits = data.get("limits", {})
    timeout = limits.get("timeout")
    _want(
        timeout is None or (isinstance(timeout, int | float) and not isinstance(timeout, bool) and timeout > 0),
        source,
        "limits.timeout",
        "expected a positive number of seconds",
    )
    max_output = limits.get("max_output")
    _want(
        max_output is None or (isinstance(max_output, int) and not isinstance(max_output, bool) and max_output > 0),
        source,
        "limits.max_output",
        "expected a positive integer",
    )

    # Writes: the workspace unless roots are named, then only those (`--allow-write=out/` narrows).
    # Reads: the workspace plus named roots plus every write root.
    write_roots = tuple(_roots(ws, write)) or (ws,)
    read_roots = tuple(dict.fromkeys([ws, *_roots(ws, read), *write_roots]))
    protect = _str_list(paths.get("protect", []), source, "paths.protect")
    protected = [*WORKSPACE_PROTECTED, *protect]
    if source != "default policy":
        protected.append(source)
    protected_paths = tuple(dict.fromkeys(_roots(ws, protected)))
    return Policy(
        workspace=ws,
        allowed=frozenset(allowed | set(flag_run) | set(flag_approval) | approval),
        denied=frozenset(denied),
        approval=frozenset(approval | set(flag_approval)),
        rules=tuple(rules),
        read_roots=read_roots,
        write_roots=write_roots,
        allow_net=bool(net or flag_net),
        timeout=float(timeout) if timeout is not None else None,
        max_output=max_output,
        source=source,
        protected=protected_paths,
    )


def _roots(ws: str, entries: list[str]) -> list[str]:
    return [os.path.realpath(os.path.join(ws, os.path.expanduser(e))) for e in entries]
