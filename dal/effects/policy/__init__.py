"""The effect policy: which programs may run, with which class, where they may read and write.

Sources, later ones adding to earlier ones: the built-in default toolset, a TOML file (`dal.toml` at the
workspace root or an explicit `--policy FILE`), then Deno-style flags. See docs/policy.md for every key.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from dal.core.digest import sha256
from dal.core.fsutil import realpath
from dal.core.readbelow import read_below, read_named, root_of
from dal.core.records import FrozenRecord
from dal.core.statedir import state_dirs
from dal.effects.policy.prefix import PrefixRule, PrefixRuleError, parse_rules

__all__ = [
    "Policy", "PolicyError", "ProgramRule", "EFFECT_CLASSES", "TRUSTED_PATH", "PROTECTED_NAMES", "GIT_PROTECTED",
    "HARMLESS_ENV", "LIMIT_DEFAULTS",
]

EFFECT_CLASSES = ("read", "local", "external")
TRUSTED_PATH = "/usr/local/bin:/usr/bin:/bin"
POLICY_JSON_VERSION = 1

# The variables `env()` reads whatever the policy says (docs/policy.md, "env()"): locale, time zone and
# terminal settings, which a script may need to format text and which by convention never hold a secret.
# Not HOME, USER, PATH, PWD, SHELL or HOSTNAME: they name the operator's account and the host's layout,
# and the programs a script runs get their own (HOME a fresh folder of the command's). A policy names any other.
HARMLESS_ENV: frozenset[str] = frozenset({
    "LANG", "LANGUAGE", "LC_ALL", "LC_COLLATE", "LC_CTYPE", "LC_MESSAGES", "LC_MONETARY", "LC_NUMERIC",
    "LC_TIME", "TZ", "TERM", "NO_COLOR",
})

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
# (The wall makes each of these that exists read-only, and holds most absent ones, see sandbox.py; the check
# also protects them by name, anywhere.)
WORKSPACE_PROTECTED: tuple[str, ...] = (
    "dal.toml", ".dal",
    *(".git/" + entry for entry in (
        "config", "config.worktree", "hooks", "info", "modules", "worktrees", "commondir", "rebase-merge",
        "rebase-apply", "sequencer", "remotes", "branches", "objects/info/alternates",
        "objects/info/http-alternates",
    )),
    # Git's global configuration if the workspace is someone's home folder (programs DAL runs get a HOME
    # of their own, see executor.scrubbed_env, so DAL's git never reads these).
    ".gitconfig", ".config/git",
)
# Names protected wherever they appear: a `dal.toml` in any folder is the policy of the workspace a later
# `dal run` may discover there, a `.dal` folder is a store, and a `.git` file or folder is where git finds
# a repository (and the configuration, hooks, todo lists and remotes it acts on). Git's own commands
# (`git init`, `git clone`, `git commit`...) make and change `.git`; a script's writes never do.
PROTECTED_NAMES: frozenset[str] = frozenset({"dal.toml", ".dal", ".git"})
# Entries of a git directory through which git runs programs, reads configuration, or is pointed at other
# files: config (core.fsmonitor, core.pager, aliases, filters), hooks, info/attributes naming filter drivers,
# the git directories of submodules and worktrees, commondir (where the rest is read from), the todo lists
# `git rebase --continue`, `git am --continue` and `git cherry-pick --continue` carry out (`exec` lines run
# a shell), legacy remote files (their URLs), and object alternates (objects read from other repositories).
# Inside a folder named `.git` all of it is protected by name; in any other folder that passes git's
# is-git-directory check (a bare repository, or one a script is assembling) these names are.
GIT_PROTECTED: frozenset[str] = frozenset(
    {"config", "config.worktree", "hooks", "info", "modules", "worktrees", "commondir", "rebase-merge",
     "rebase-apply", "sequencer", "remotes", "branches", "objects", "refs", "HEAD", "packed-refs"}
)
# What makes a folder a git directory for git (setup.c, is_git_directory): HEAD, and objects/ and refs/ or
# a commondir file standing for both.
GIT_DIR_MARKS: frozenset[str] = frozenset({"HEAD", "objects", "refs", "commondir"})


# `[limits]` beyond `timeout` and `max_output`, with their defaults (docs/policy.md, "Limits"); a Policy
# field left None means the default. Sizes are bytes.
LIMIT_DEFAULTS: dict[str, int] = {
    "max_commands": 64,  # simple commands in one run(): every pipeline stage and list member (check time)
    "max_processes": 256,  # processes and threads of one command at a time
    "max_file_size": 256 << 20,  # the largest file a program may write
    "max_memory": 2 << 30,  # address space of each process; with a memory cgroup, all of the command's memory
    "tmp_size": 256 << 20,  # the private /tmp (and /dev/shm) of the wall
    # Not one command's: the command output one run journals (docs/durability.md, "How much a run stores").
    "max_stored_output": 256 << 20,
}
_SIZE_KEYS = frozenset({"max_file_size", "max_memory", "tmp_size", "max_stored_output"})


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

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "class": self.effect_class, "idempotent": self.idempotent,
                "approval": self.approval}


def _dal_state(resolved: str) -> str | None:
    """Why `resolved` is DAL's own state (statedir.py: the key that signs held records, the REPL's history),
    which no policy lets a script read or change, whatever its roots; None when it is not."""
    for root in state_dirs():
        if resolved == root or resolved.startswith(root + "/"):
            return (f"{root} is DAL's own state (the key that signs its records of running pipelines, the REPL's "
                    "history)")
    return None


class Policy(FrozenRecord):
    __slots__ = (
        "workspace", "allowed", "denied", "approval", "rules", "read_roots", "write_roots", "allow_net", "timeout",
        "max_output", "source", "protected", "env_allow", "file_sha256", "hidden",
        "max_commands", "max_processes", "max_file_size", "max_memory", "tmp_size",  # [limits]; None: default
        "max_stored_output", "prefix_rules",
        "_rule_index",
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
        env_allow: frozenset[str] = frozenset(),  # env() names beyond HARMLESS_ENV
        file_sha256: str | None = None,  # of the policy file's bytes as read; None: the default policy
        hidden: tuple[str, ...] = (),  # what records runs (the store, its locks, the receipts): never read
        max_commands: int | None = None,
        max_processes: int | None = None,
        max_file_size: int | None = None,
        max_memory: int | None = None,
        tmp_size: int | None = None,
        max_stored_output: int | None = None,
        prefix_rules: tuple[PrefixRule, ...] = (),  # [[rules]]: decisions on commands by their first words
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
        init(self, "env_allow", env_allow)
        init(self, "file_sha256", file_sha256)
        init(self, "hidden", hidden)
        init(self, "max_commands", max_commands)
        init(self, "max_processes", max_processes)
        init(self, "max_file_size", max_file_size)
        init(self, "max_memory", max_memory)
        init(self, "tmp_size", tmp_size)
        init(self, "max_stored_output", max_stored_output)
        init(self, "prefix_rules", prefix_rules)
        init(self, "_rule_index", {r.name: r for r in rules})

    def rule(self, name: str) -> ProgramRule | None:
        return self._rule_index.get(name)

    def limit(self, key: str) -> int:
        """The `[limits]` value of `key` (a key of LIMIT_DEFAULTS), the default when the policy sets none."""
        value = getattr(self, key)
        return LIMIT_DEFAULTS[key] if value is None else value

    def protection(self, resolved: str) -> str | None:
        """Why a script may not write the absolute, resolved path `resolved`, or None when it may.

        Protected: every path in `protected` and everything below it, and any path with a component named in
        PROTECTED_NAMES (a `dal.toml`, a `.dal` folder or a `.git` file or folder anywhere). By name only:
        the check adds what it sees on disk (check._check_git_dirs: folders that pass for git directories). And
        DAL's own state folder (statedir.py), in every policy."""
        for part in resolved.split("/"):
            if part in PROTECTED_NAMES:
                what = {"dal.toml": "a policy file", ".dal": "a run store"}.get(part)
                if what is None:
                    return (f"{resolved} is protected: a .git file or folder tells git where a repository is and "
                            "what to run, so scripts never make, change or remove one (git's own commands manage "
                            "it)")
                return f"{resolved} is protected: {part} is {what}, which scripts never change"
        for root in self.protected:
            if resolved == root or resolved.startswith(root.rstrip("/") + "/"):
                return f"{root} is protected: scripts never change the files that decide or record what they may do"
        state = _dal_state(resolved)
        return f"{state}, which scripts never change" if state is not None else None

    def secrecy(self, resolved: str) -> str | None:
        """Why a script may not read the absolute, resolved path `resolved`, or None when it may: the run
        store and what records runs (`hidden`, set by the runner wherever --store and --receipts put them),
        and anything in a folder named `.dal` (a run store's folder). They hold env() values the policy let
        an earlier run read, and the output of every command (docs/policy.md, "The run store is not readable").
        And DAL's own state folder (statedir.py: the key that signs held records), in every policy."""
        for root in self.hidden:
            if resolved == root or resolved.startswith(root.rstrip("/") + "/"):
                return f"{root} records runs (the store, its journal of every output, the receipts)"
        if ".dal" in resolved.split("/"):
            return f"{resolved} is in a run store folder (.dal/)"
        return _dal_state(resolved)

    # --- env() ---------------------------------------------------------------------------------

    def env_visible(self, name: str) -> bool:
        """Whether `env(name)` may read the variable: the policy names it, or it is in HARMLESS_ENV."""
        return name in HARMLESS_ENV or name in self.env_allow

    def getenv(self, name: str) -> str | None:
        """What `env(name)` returns: the variable's value when the policy lets the script read it, else
        None (as if it were not set, so that a script runs the same under a policy that withholds it)."""
        return os.environ.get(name) if self.env_visible(name) else None

    # --- the policy in force of an operation (docs/policy.md, "The policy in force") -------------

    def protecting(self, paths: Iterable[str | os.PathLike[str]]) -> Policy:
        """This policy with `paths` (resolved to absolute paths) added to the protected set."""
        more = [os.path.realpath(os.fspath(p)) for p in paths]
        return self.evolve(protected=tuple(dict.fromkeys([*self.protected, *more])))

    def hiding(self, paths: Iterable[str | os.PathLike[str]]) -> Policy:
        """This policy with `paths` (resolved) protected and hidden: scripts neither write nor read them."""
        more = [os.path.realpath(os.fspath(p)) for p in paths]
        return self.protecting(more).evolve(hidden=tuple(dict.fromkeys([*self.hidden, *more])))

    def extended(
        self,
        *,
        allow_run: Iterable[str] = (),
        allow_read: Iterable[str] = (),
        allow_write: Iterable[str] = (),
        allow_net: bool = False,
        require_approval: Iterable[str] = (),
        allow_env: Iterable[str] = (),
    ) -> Policy:
        """This policy widened by an operator's flags, the way a resume applies the flags of its command
        line to the policy the operation started with: every flag adds (`--allow-write` adds a write root
        here, where at a start it names the only ones); nothing is taken away, and `[run] deny` still wins.
        Raises PolicyError for a malformed flag."""
        run = _names(allow_run, "--allow-run")
        approval = _names(require_approval, "--require-approval")
        env = _env_names(allow_env, "--allow-env")
        ws = self.workspace
        write = _roots(ws, _split(allow_write), "--allow-write")
        read = _roots(ws, _split(allow_read), "--allow-read")
        write_roots = tuple(dict.fromkeys([*self.write_roots, *write]))
        return self.evolve(
            allowed=self.allowed | set(run) | set(approval),
            approval=self.approval | set(approval),
            read_roots=tuple(dict.fromkeys([*self.read_roots, *read, *write_roots])),
            write_roots=write_roots,
            allow_net=self.allow_net or bool(allow_net),
            env_allow=self.env_allow | set(env),
        )

    def widening(self, base: Policy) -> dict[str, Any]:
        """What this policy allows beyond `base`, as the flags that would add it (empty: nothing more)."""
        approval = self.approval - base.approval
        write = [r for r in self.write_roots if r not in base.write_roots]
        out: dict[str, Any] = {
            "allow_run": sorted(self.allowed - base.allowed - approval),
            "require_approval": sorted(approval),
            "allow_read": [r for r in self.read_roots if r not in base.read_roots and r not in write],
            "allow_write": write,
            "allow_env": sorted(self.env_allow - base.env_allow),
            "allow_net": self.allow_net and not base.allow_net,
        }
        return {k: v for k, v in out.items() if v}

    def file_state(self) -> tuple[str | None, str | None]:
        """The policy file this policy came from as it is on disk now: (path, sha256 of its bytes), with
        sha256 None when it is gone. For the default policy, WORKSPACE/dal.toml if one exists now (a
        file a new run there would read), else (None, None)."""
        path = self.source if self.file_sha256 is not None else os.path.join(self.workspace, "dal.toml")
        if self.file_sha256 is None and not os.path.isfile(path):
            return None, None
        try:  # by descriptor below the workspace: a FIFO or a symlink out in its place is not read
            return path, sha256(read_named(path, (self.workspace,))).hexdigest()
        except OSError:
            return path, None

    def to_json(self) -> dict[str, Any]:
        """Every field as plain JSON, so that the store keeps the whole policy an operation runs under and
        `from_json` gives back an equal Policy (tests/effects/test_policy_json.py checks every field). A
        field not named here (a new `[limits]` key) must hold None, a number, a string or a boolean, and
        is kept as it is; anything else needs its own line here."""
        out = {
            "version": POLICY_JSON_VERSION,
            "workspace": self.workspace,
            "source": self.source,
            "file_sha256": self.file_sha256,
            "allowed": sorted(self.allowed),
            "denied": sorted(self.denied),
            "approval": sorted(self.approval),
            "rules": [r.to_json() for r in self.rules],
            "read_roots": list(self.read_roots),
            "write_roots": list(self.write_roots),
            "allow_net": self.allow_net,
            "timeout": self.timeout,
            "max_output": self.max_output,
            "protected": list(self.protected),
            "env_allow": sorted(self.env_allow),
            "hidden": list(self.hidden),
            "prefix_rules": [r.to_json() for r in self.prefix_rules],
        }
        for name in type(self)._compared or ():
            if name not in out:
                value = getattr(self, name)
                if value is not None and not isinstance(value, int | float | str | bool):
                    raise TypeError(f"Policy.to_json: field {name} holds a {type(value).__name__}; give it a line")
                out[name] = value
        return out

    @classmethod
    def from_json(cls, data: Any) -> Policy:
        """The Policy `to_json` described. Raises PolicyError naming the field when the data is not one
        (a damaged store row), so that a resume refuses rather than run under a half-read policy."""
        where = "the stored policy"
        _want(isinstance(data, dict), where, "(top)", "expected an object")
        _want(data.get("version") == POLICY_JSON_VERSION, where, "version",
              f"expected {POLICY_JSON_VERSION} (stored by another version of DAL?)")

        def strs(key: str) -> list[str]:
            return _str_list(data.get(key), where, key)

        def opt(key: str, kinds: tuple[type, ...]) -> Any:
            v = data.get(key)
            _want(v is None or (isinstance(v, kinds) and not isinstance(v, bool)), where, key, "wrong type")
            return v

        rules = []
        raw_rules = data.get("rules")
        _want(isinstance(raw_rules, list), where, "rules", "expected a list")
        for r in raw_rules:
            _want(isinstance(r, dict) and isinstance(r.get("name"), str), where, "rules", "expected {name, ...}")
            rules.append(ProgramRule(r["name"], r.get("class"), r.get("idempotent"), r.get("approval")))
        for key in ("workspace", "source"):
            _want(isinstance(data.get(key), str), where, key, "expected a string")
        _want(isinstance(data.get("allow_net"), bool), where, "allow_net", "expected true or false")
        timeout = opt("timeout", (int, float))
        named = {"workspace", "allowed", "denied", "approval", "rules", "read_roots", "write_roots", "allow_net",
                 "timeout", "max_output", "source", "protected", "env_allow", "file_sha256", "hidden", "prefix_rules"}
        scalars = {}  # the fields to_json keeps as they are (a missing one: stored before it existed)
        for name in cls._compared or ():
            if name not in named and data.get(name) is not None:
                _want(isinstance(data[name], int | float | str | bool), where, name, "wrong type")
                scalars[name] = data[name]
        return cls(
            workspace=data["workspace"],
            allowed=frozenset(strs("allowed")),
            denied=frozenset(strs("denied")),
            approval=frozenset(strs("approval")),
            rules=tuple(rules),
            read_roots=tuple(strs("read_roots")),
            write_roots=tuple(strs("write_roots")),
            allow_net=data["allow_net"],
            timeout=float(timeout) if timeout is not None else None,
            max_output=opt("max_output", (int,)),
            source=data["source"],
            protected=tuple(strs("protected")),
            env_allow=frozenset(strs("env_allow")),
            file_sha256=opt("file_sha256", (str,)),
            hidden=tuple(_str_list(data.get("hidden") or [], where, "hidden")),  # absent: stored before it existed
            prefix_rules=_stored_rules(data.get("prefix_rules") or [], where),
            **scalars,
        )

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
        allow_env: Iterable[str] = (),
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
        digest = None
        if policy_file is not None:
            path = Path(policy_file)
            if not path.is_file():
                raise PolicyError(f"--policy: {policy_file}: no such file")
            # The source is the file's absolute path: a resume from another folder compares the same file.
            source = os.path.abspath(path)
            data, digest = _read_toml(Path(source), ws)
        elif not _skip_file and os.path.isfile(os.path.join(ws, "dal.toml")):
            path = Path(ws, "dal.toml")
            data, digest = _read_toml(path, ws)
            source = str(path)
        policy = _build(
            ws,
            data,
            source,
            _names(allow_run, "--allow-run"),
            _names(require_approval, "--require-approval"),
            _split(allow_read),
            _split(allow_write),
            allow_net,
            _env_names(allow_env, "--allow-env"),
        )
        return policy if digest is None else policy.evolve(file_sha256=digest)


def _read_toml(path: Path, workspace: str) -> tuple[dict, str]:
    """The file's table and the SHA-256 of the bytes it was parsed from (read once: what is hashed is
    what is parsed). Below the workspace it is read by descriptor (dal/core/readbelow.py): where the wall
    cannot keep it read-only, a script's program that swapped it for a symlink out gets no other file taken
    for the policy."""
    import tomllib  # only when there is a policy file: most runs have none, and it costs ~7 ms to import

    try:
        below = root_of(path, (workspace,))
        raw = read_below(*below) if below is not None else path.read_bytes()
        return tomllib.loads(raw.decode("utf-8")), sha256(raw).hexdigest()
    except UnicodeDecodeError as e:
        raise PolicyError(f"{path}: not UTF-8 text (invalid byte at offset {e.start})") from e
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


def env_names(values: Iterable[str] | str, where: str = "--allow-env") -> list[str]:
    """The variable names in `values` (comma-separated strings); PolicyError for one that is not a name."""
    return _env_names(values, where)


def _env_names(values: Iterable[str] | str, where: str) -> list[str]:
    names = _split(values)
    for n in names:
        if not n.replace("_", "a").isalnum() or not n.isascii() or n[0].isdigit():
            raise PolicyError(f"{where}: {n!r} is not an environment variable name (letters, digits, _)")
    return names


_TOP_KEYS = {"run", "paths", "network", "programs", "limits", "env", "rules"}
_SECTION_KEYS = {
    "run": {"defaults", "allow", "deny", "require_approval"},
    "paths": {"read", "write", "protect"},
    "network": {"allow"},
    "limits": {"timeout", "max_output", *LIMIT_DEFAULTS},
    "env": {"allow"},
}
_PROGRAM_KEYS = {"class", "idempotent", "approval", "allow"}


def _stored_rules(raw: Any, where: str) -> tuple[PrefixRule, ...]:
    try:
        return parse_rules(raw, where)
    except PrefixRuleError as e:
        raise PolicyError(str(e)) from None


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
    flag_env: list[str] = (),  # type: ignore[assignment]
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
    read = [*_roots(ws, _str_list(paths.get("read", []), source, "paths.read"), f"{source}: paths.read"),
            *_roots(ws, flag_read, "--allow-read")]
    write = [*_roots(ws, _str_list(paths.get("write", []), source, "paths.write"), f"{source}: paths.write"),
             *_roots(ws, flag_write, "--allow-write")]
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
    extra_limits = {key: _limit(limits, key, source) for key in LIMIT_DEFAULTS}

    # Writes: the workspace unless roots are named, then only those (`--allow-write=out/` narrows).
    # Reads: the workspace plus named roots plus every write root.
    write_roots = tuple(write) or (ws,)
    read_roots = tuple(dict.fromkeys([ws, *read, *write_roots]))
    env = _str_list(data.get("env", {}).get("allow", []), source, "env.allow")
    _env_names(env, f"{source}: env.allow")
    protect = _str_list(paths.get("protect", []), source, "paths.protect")
    protected = [*WORKSPACE_PROTECTED, *protect]
    if source != "default policy":
        protected.append(source)
    protected_paths = tuple(dict.fromkeys(_roots(ws, protected)))
    prefix_rules = _stored_rules(data["rules"], source) if "rules" in data else ()
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
        env_allow=frozenset([*env, *flag_env]),
        prefix_rules=prefix_rules,
        **extra_limits,
    )


def _limit(limits: dict, key: str, source: str) -> int | None:
    """A positive integer `[limits]` value; sizes also as a string with a binary unit ("512M", "2G")."""
    value = limits.get(key)
    if value is None:
        return None
    if key in _SIZE_KEYS:
        if isinstance(value, str):
            from dal.core.sizes import parse_size  # the one reading of a size (--max-memory's too)

            try:
                value = parse_size(value)
            except ValueError:
                value = None
        what = 'a positive number of bytes (an integer, or a string such as "512M" or "2G")'
    else:
        what = "a positive integer"
    _want(isinstance(value, int) and not isinstance(value, bool) and value > 0, source, f"limits.{key}",
          f"expected {what}")
    return value


def _roots(ws: str, entries: list[str], where: str | None = None) -> list[str]:
    """The entries resolved (relative ones from the workspace). With `where` (a read or write root's flag or
    key): PolicyError for an entry that names a place inside the workspace but reaches another place through
    a symlink in the workspace, which any script may have made (`git apply` of a mode 120000 file, `ln -s`
    in the wall): the operator who wrote `--allow-write=out` means WS/out, not wherever `out` points now —
    outside the workspace, or the workspace itself (`out -> .`), which would widen `out` to all of it."""
    out = []
    for e in entries:
        joined = os.path.join(ws, os.path.expanduser(e))
        resolved = realpath(joined)
        named = os.path.normpath(joined)
        if where is not None and _inside(named, ws) and resolved != named:
            link = _first_link(ws, named)
            what = (f"{link} is a symlink to {os.path.realpath(link)}" if link else
                    f"it resolves to {resolved} through a symlink")
            where_to = "inside" if _inside(resolved, ws) else "outside"
            raise PolicyError(f"{where}: {e}: {what}, {where_to} the workspace (a script may have made it); "
                              f"name {resolved} if you mean it")
        out.append(resolved)
    return out


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _first_link(ws: str, named: str) -> str | None:
    """The first component of `named` below `ws` that is a symlink (None: none is)."""
    at = ws
    for part in os.path.relpath(named, ws).split("/"):
        at = os.path.join(at, part)
        if os.path.islink(at):
            return at
    return None
