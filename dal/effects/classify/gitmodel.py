"""What the check reads from a git command (git is not in the default toolset: it runs only inside a wall).

The class, the network and idempotence come from the coarse table (tables.GIT). What git reads and writes
is held by the wall (its roots, the store hidden, the policy files read-only) and by the git guard, which
observes and puts back what git may change in its repository (gitguard.py); the check does not predict it
option by option. It refuses early, with a reason, what would run another program or point git elsewhere:
the global options -c, --config-env, --exec-path, -C, --git-dir, --work-tree, a pager or --help, the
subcommands of tables.GIT_DENY, and each subcommand's options that run a program (an upload-pack, an
editor, a shell command, a merge strategy). An abbreviation of a denied option counts as that option.

What the check still looks at on the filesystem is handed to it as `GitUse`: the repository git will use,
the remotes it will reach (a helper transport runs a program), the paths a patch names, the paths `git add`
records (a later checkout by the operator writes them outside any wall), and the folder `git init` makes a
repository in.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from dal.effects.classify import tables
from dal.effects.classify.programs import ArgUse, Unsafe

__all__ = ["GitUse", "analyze_git", "git_is_network", "SUBCOMMANDS"]


@attrs.frozen
class GitUse:
    """What the checker must still look at on the filesystem for one git command."""

    subcommand: str
    remotes: tuple[str, ...] = ()  # remote names or URLs named on the command line
    all_remotes: bool = False  # a network command naming none: the configured remotes it may use
    patches: tuple[tuple[str, str, int], ...] = ()  # (patch file, --directory prefix, -p strip) applied
    rejects: bool = False  # --reject: a hunk that does not apply goes to PATH.rej (an existing one is replaced)
    network: bool = False
    hardlinks: bool = False  # git clone from a local path: its objects hard-linked, unless --no-hardlinks
    writes_repo: bool = False  # changes the repository (its index, objects, refs)
    writes_worktree: bool = False  # rewrites files of its work tree
    staged: tuple[str, ...] = ()  # paths `git add` / `git commit PATHS` records in the index (and a commit)
    initialises: str | None = None  # `git init [DIR]`: DIR, which must not hold a `.git` already (a re-init)
    # `git add`: the pathspecs whose untracked files git reads into objects ("." for the whole tree), and
    # whether --force makes it read ignored files too (a `.dal` folder's, dal.core.gitignored)
    adds: tuple[str, ...] = ()
    adds_ignored: bool = False


# Global options (before the subcommand). Everything else before it is denied.
_GLOBAL_FLAGS = frozenset(
    "--no-pager -P --no-replace-objects --literal-pathspecs --glob-pathspecs --noglob-pathspecs "
    "--icase-pathspecs --no-optional-locks --version --html-path --man-path --info-path -v".split()
)
_GLOBAL_VALUES = frozenset({"--namespace"})
_GLOBAL_DENY = {
    "-c": "sets configuration, which can name programs to run",
    "--config-env": "sets configuration, which can name programs to run",
    "--exec-path": "changes where git finds its programs",
    "-C": "changes the directory git runs in",
    "--git-dir": "points git at another repository",
    "--work-tree": "points git at another tree",
    "--bare": "treats the workspace as a repository whose configuration scripts can write",
    "-p": "pipes output into a pager",
    "--paginate": "pipes output into a pager",
    "--help": "runs man or a web browser",
    "-h": None,  # usage text: fine
    "--super-prefix": "is internal to git",
    "--list-cmds": None,
}


@attrs.frozen
class Sub:
    """The options of one subcommand the check reads: those taking a value (so that its operands are told
    apart) and those that run a program (denied)."""

    values: frozenset[str] = frozenset()  # options taking a value, separate (`-m MSG`) or attached
    deny: dict[str, str] = attrs.field(factory=dict)  # option -> why it is denied
    custom: Callable[[Parsed], GitUse] | None = None  # what the checker must look at, from the operands


@attrs.frozen
class Parsed:
    sub: str
    options: tuple[tuple[str, str | None], ...]
    operands: tuple[str, ...]
    dashdash: int  # operands from here on came after `--`

    def has(self, *names: str) -> bool:
        return any(n in names for n, _ in self.options)

    def values(self, *names: str) -> list[str]:
        return [v for n, v in self.options if n in names and v is not None]


def _opts(text: str) -> frozenset[str]:
    return frozenset(text.split())


_UPLOAD_PACK = {"-u": "names a program to run", "--upload-pack": "names a program to run"}
_SUBMODULES = "works in submodules, whose URLs and hooks a script can choose"
_STRATEGY = "names a merge strategy, which runs the program git-merge-STRATEGY"
_STRATEGIES = frozenset({"ort", "recursive", "resolve", "octopus", "ours", "subtree"})
# Going on with an operation that stopped half-way carries out what git keeps for it in the git directory:
# a todo list (whose `exec` lines run a shell), patches split from a mailbox, which DAL checks none of.
_GOES_ON = ("goes on from the state git keeps in .git (a todo list that can run a shell, patches DAL did not "
            "check): finish the operation within one command, or --abort it")
_GOES_ON_DENY = {"--continue": _GOES_ON, "--skip": _GOES_ON}
_REMOTE_VALUES = _opts("--depth --deepen --shallow-since --shallow-exclude --negotiation-tip --refmap -j --jobs -o "
                       "--server-option --filter --repo --push-option --sort")
_MERGE_VALUES = _opts("-s --strategy -X --strategy-option -m --mainline --message --onto --cleanup --empty")


def _staging(p: Parsed) -> GitUse:
    """git add / git commit PATHS record the files their pathspecs name in the index, and a later checkout
    writes them back: the checker refuses a protected path or a git-directory lookalike among them (patterns
    and `.` are left to what the repository is checked for after the command, gitguard.py). `git add` also
    writes the content of every untracked file below them into objects, where a later command reads it
    back: the checker refuses one that would reach a file scripts never read."""
    ops = tuple(o for o in p.operands if o != "-")
    if p.sub != "add":
        return GitUse(p.sub, staged=ops)
    if p.values("--pathspec-from-file"):
        raise Unsafe("git add --pathspec-from-file: adds paths that cannot be checked; name them on the command line")
    whole = not ops and p.has("-A", "--all", "-u", "--update", "--ignore-removal", "--renormalize")
    adds = ops or ((":/",) if whole else ())
    return GitUse(p.sub, staged=ops, adds=adds, adds_ignored=p.has("-f", "--force"))


def _patches(p: Parsed) -> GitUse:
    """apply/am: the files the patches name are written; the checker reads each patch for them. A `-`
    among the operands is a patch from standard input, which the checker cannot read (`git apply
    ok.patch - < evil.patch` would apply the second unchecked)."""
    if "-" in p.operands:
        raise Unsafe(f"git {p.sub} -: reads a patch from standard input, which DAL cannot check; name the file")
    ops = list(p.operands)
    if not ops and not p.has("--continue", "-r", "--resolved", "--skip", "--abort", "--quit",
                             "--show-current-patch"):  # fmt: skip
        raise Unsafe(f"git {p.sub} without a patch file reads the patch from standard input: name the file")
    for fmt in p.values("--patch-format"):
        if fmt not in ("mbox", "mboxrd"):
            raise Unsafe(f"git am --patch-format={fmt}: DAL reads patches from mailboxes only (a StGit series "
                         "names other files)")
    prefix = (p.values("--directory") or [""])[-1]
    strip = int((p.values("-p") or ["1"])[-1] or 1)
    if p.sub == "apply" and p.has("--stat", "--numstat", "--summary", "--check") and not p.has("--apply"):
        return GitUse(p.sub)
    # --cached writes the index only, but a later checkout writes what it holds: checked the same.
    return GitUse(p.sub, patches=tuple((o, prefix, strip) for o in ops), rejects=p.has("--reject"))


def _remote(p: Parsed) -> GitUse:
    ops = list(p.operands)
    action = ops[0] if ops else ""
    if action in ("add", "set-url"):  # add NAME URL; set-url NAME NEWURL [OLDURL]
        args = ops[1:]
        url = args[1] if len(args) > 1 else ""
        return GitUse(p.sub, remotes=(url,) if url else (), network=True)
    if action in ("", "-v", "get-url", "rename", "remove", "rm", "set-head", "set-branches", "show", "prune",
                  "update"):  # fmt: skip
        return GitUse(p.sub, all_remotes=action in ("show", "prune", "update"), network=True)
    raise Unsafe(f"git remote {action}: not a subcommand DAL knows")


def _match(sub_name: str, sub: Sub, name: str) -> str:
    """The option `name` (with its dashes) stands for, in full: itself, or the denied or value option it
    abbreviates (git takes any unambiguous prefix), or the flag of _RULE_FLAGS it abbreviates. An
    abbreviation of a denied option is denied, whatever else it might abbreviate. Any other misreading is
    the wall's to hold (issue 27)."""
    if name in sub.deny or name in sub.values or not name.startswith("--") or len(name) < 3:
        return name
    for flag in _RULE_FLAGS.get(sub_name, ()):
        if flag.startswith(name):
            return flag
    for table in (sub.deny, sub.values):
        hits = [k for k in table if k.startswith(name)]
        if hits:
            return hits[0]
    return name


def _option(sub: Sub, sub_name: str, name: str) -> str:
    """Check one option name: a denied one raises; else "value" or "flag"."""
    if sub.deny.get(name):
        raise Unsafe(f"git {sub_name} {name}: {sub.deny[name]}")
    return "value" if name in sub.values else "flag"


def _parse(sub_name: str, sub: Sub, args: list[str]) -> Parsed:
    options: list[tuple[str, str | None]] = []
    operands: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        i += 1
        if a == "--":
            return Parsed(sub_name, _last_wins(options), (*operands, *args[i:]), len(operands))
        if a.startswith("--") and len(a) > 2:
            raw, eq, value = a.partition("=")
            name = _match(sub_name, sub, raw)
            kind = _option(sub, sub_name, name)
            if kind != "flag" and not eq and i < len(args):
                value = args[i]
                i += 1
                _also_an_option(sub, sub_name, value)
                eq = "="
            options.append((name, value if eq else None))
            continue
        if a.startswith("-") and a[1:].isdigit():  # log -5, grep -3, archive -9
            options.append((a, None))
            continue
        if a.startswith("-") and len(a) > 1:
            j = 1
            while j < len(a):
                name = "-" + a[j]
                kind = _option(sub, sub_name, name)
                if kind == "flag":
                    options.append((name, None))
                    j += 1
                    continue
                value = a[j + 1 :]
                if not value and i < len(args):
                    value = args[i]
                    i += 1
                    _also_an_option(sub, sub_name, value)
                options.append((name, value))
                break
            continue
        operands.append(a)
    return Parsed(sub_name, _last_wins(options), tuple(operands), len(operands))


def _last_wins(options: list[tuple[str, str | None]]) -> tuple[tuple[str, str | None], ...]:
    """git's parse-options makes `--no-X` of every boolean `--X` (and `--X` of a `--no-X`), and the last one
    given wins: `git apply --stat --no-stat` applies, `git rm --cached --no-cached` removes the file. Of each
    such pair only the last stays, so that a decision reads what git will do."""
    def base(name: str) -> str:
        return "--" + name[5:] if name.startswith("--no-") else name

    last = {base(n): i for i, (n, v) in enumerate(options) if v is None and n.startswith("--")}
    return tuple(o for i, o in enumerate(options)
                 if not (o[1] is None and o[0].startswith("--") and last[base(o[0])] != i))  # fmt: skip


def _also_an_option(sub: Sub, sub_name: str, value: str) -> None:
    """A separate value that looks like an option: should git read it as one after all (the model took the
    option before it for one with a value, git did not), it must not be one that is denied."""
    if value.startswith("-") and len(value) > 1:
        try:
            name = _match(sub_name, sub, value.partition("=")[0]) if value.startswith("--") else value[:2]
        except Unsafe:
            return  # a prefix of several options: git would refuse it, not take it for one
        if sub.deny.get(name):
            raise Unsafe(f"git {sub_name}: the value {value!r} could be read as the option {name}; "
                         "give values attached (--opt=VALUE)")


def _clone(p: Parsed) -> GitUse:
    ops = list(p.operands)
    return GitUse(p.sub, remotes=tuple(ops[:1]), network=True, hardlinks=not p.has("--no-hardlinks"))


def _init(p: Parsed) -> GitUse:
    """A new repository only: in a folder that holds a `.git` already git re-initialises that repository,
    rewriting its config (core.filemode, core.bare, core.worktree) and copying templates into its hooks/ and
    info/ (the checker denies it, seeing the folder)."""
    return GitUse(p.sub, initialises=p.operands[0] if p.operands else ".")


def _remote_ops(p: Parsed) -> GitUse:
    """fetch/pull/push/ls-remote [REMOTE [REFSPEC...]]: the first operand is a remote name or URL (all of
    them with --multiple); none named, the configured ones. Where the refs go is the guard's to hold: it
    fails closed on a change under refs/replace/ (gitguard.py)."""
    for v in p.values("-s", "--strategy"):
        if v not in _STRATEGIES:
            raise Unsafe(f"git {p.sub} --strategy={v}: {_STRATEGY}")
    ops = list(p.operands)
    named = [*p.values("--repo")]
    if p.has("--multiple") and p.sub == "fetch":
        named += ops
    elif ops:
        named.append(ops[0])
    return GitUse(p.sub, remotes=tuple(named), all_remotes=p.has("--all") or not named, network=True)


def _merging(p: Parsed) -> GitUse:
    for v in p.values("-s", "--strategy"):
        if v not in _STRATEGIES:
            raise Unsafe(f"git {p.sub} --strategy={v}: {_STRATEGY}")
    return GitUse(p.sub)


def _bisect(p: Parsed) -> GitUse:
    if p.operands and p.operands[0] == "run":
        raise Unsafe("git bisect run: runs a program at each step")
    return GitUse(p.sub)


_EDITOR = "runs an editor"
# The subcommands whose operands or options the check reads; any other in tables.GIT is read by its row.
SUBCOMMANDS: dict[str, Sub] = {
    "grep": Sub(values=_opts("-e -f --max-depth -C --context -A --after-context -B --before-context -m --max-count "
                             "--threads"),
                deny={"-O": "opens the files in a pager it names", "--open-files-in-pager": "opens the files in a "
                      "pager it names", "--recurse-submodules": _SUBMODULES}),  # fmt: skip
    "add": Sub(values=_opts("--chmod --pathspec-from-file"), deny={"-e": _EDITOR, "--edit": _EDITOR,
               "-i": _EDITOR, "--interactive": _EDITOR, "-p": _EDITOR, "--patch": _EDITOR}, custom=_staging),
    "commit": Sub(values=_opts("-C --reuse-message -c --reedit-message --fixup --squash --author --date -m "
                               "--message --trailer --cleanup -F --file -t --template --pathspec-from-file"),
                  deny={"-e": _EDITOR, "--edit": _EDITOR, "-c": _EDITOR, "--reedit-message": _EDITOR,
                        "-t": _EDITOR, "--template": _EDITOR, "-p": _EDITOR, "--patch": _EDITOR,
                        "--interactive": _EDITOR},
                  custom=_staging),  # fmt: skip
    "merge": Sub(values=_MERGE_VALUES | _opts("-F --file --into-name"), deny={"-e": _EDITOR, "--edit": _EDITOR},
                 custom=_merging),
    "rebase": Sub(values=_MERGE_VALUES | _opts("--whitespace"),
                  deny={"-x": "runs a shell command", "--exec": "runs a shell command", "-i": _EDITOR,
                        "--interactive": _EDITOR, "--edit-todo": _EDITOR, **_GOES_ON_DENY},
                  custom=_merging),  # fmt: skip
    "cherry-pick": Sub(values=_MERGE_VALUES, deny={**_GOES_ON_DENY, "-e": _EDITOR, "--edit": _EDITOR},
                       custom=_merging),
    "revert": Sub(values=_MERGE_VALUES, deny={**_GOES_ON_DENY, "-e": _EDITOR, "--edit": _EDITOR}, custom=_merging),
    "apply": Sub(values=_opts("-p -C --exclude --include --whitespace --directory --build-fake-ancestor"),
                 deny={"--unsafe-paths": "writes outside the work tree"}, custom=_patches),
    "am": Sub(values=_opts("-p -C --exclude --include --whitespace --directory --quoted-cr --empty --patch-format "
                           "--resolvemsg"),
              deny={"-i": "reads a terminal", "--interactive": "reads a terminal", **_GOES_ON_DENY, "-r": _GOES_ON,
                    "--resolved": _GOES_ON},
              custom=_patches),  # fmt: skip
    "archive": Sub(values=_opts("--format --prefix --add-file --add-virtual-file -o --output"),
                   deny={"--remote": "fetches the archive from another repository",
                         "--exec": "names a program to run"}),
    "init": Sub(values=_opts("--object-format -b --initial-branch"),
                deny={"--template": "copies hooks from a folder it names", "--separate-git-dir": "keeps the "
                      "repository's configuration where scripts can write it", "--bare": "makes a repository "
                      "whose configuration and hooks are not protected", "--shared": "writes core.sharedRepository "
                      "into the repository's config: the operator's git would then leave the index, refs and objects "
                      "writable by other users"},
                custom=_init),  # fmt: skip
    "bisect": Sub(custom=_bisect),
    "clone": Sub(values=_REMOTE_VALUES | _opts("--origin -b --branch --reference --reference-if-able"),
                 deny={**_UPLOAD_PACK, "--template": "copies hooks from a folder it names",
                       "-c": "sets configuration, which can name programs to run",
                       "--config": "sets configuration, which can name programs to run",
                       "--separate-git-dir": "keeps the repository's configuration where scripts can write it",
                       "--recurse-submodules": _SUBMODULES, "--recursive": _SUBMODULES,
                       "--remote-submodules": _SUBMODULES, "--bare": "makes a repository whose configuration and "
                       "hooks are not protected", "--mirror": "makes a repository whose configuration and hooks are "
                       "not protected", "--bundle-uri": "fetches from a second place it names"},
                 custom=_clone),  # fmt: skip
    "fetch": Sub(values=_REMOTE_VALUES,
                 deny={"--upload-pack": "names a program to run", "--recurse-submodules": _SUBMODULES,
                       "--submodule-prefix": "is internal to git", "--recurse-submodules-default": _SUBMODULES,
                       "--stdin": "reads refspecs from standard input, which DAL does not check"},
                 custom=_remote_ops),  # fmt: skip
    "pull": Sub(values=_REMOTE_VALUES | _MERGE_VALUES,
                deny={**_UPLOAD_PACK, "--recurse-submodules": _SUBMODULES, "-e": _EDITOR, "--edit": _EDITOR},
                custom=_remote_ops),  # fmt: skip
    "push": Sub(values=_REMOTE_VALUES,
                deny={"--receive-pack": "names a program to run", "--exec": "names a program to run",
                      "--recurse-submodules": _SUBMODULES},
                custom=_remote_ops),  # fmt: skip
    "ls-remote": Sub(values=_REMOTE_VALUES, deny=dict(_UPLOAD_PACK), custom=_remote_ops),
    "remote": Sub(values=_opts("-t -m"),
                  deny={"--mirror": "makes the remote's every ref, refs/replace/ among them, a ref of the same name "
                        "here"},
                  custom=_remote),  # fmt: skip
    "tag": Sub(values=_opts("-m --message -F --file --points-at --format --sort --cleanup"),
               deny={"-e": _EDITOR, "--edit": _EDITOR}),
    "notes": Sub(deny={"-e": _EDITOR, "--edit": _EDITOR}),
}
for _name in ("restore", "checkout", "switch", "reset"):
    SUBCOMMANDS[_name] = Sub(deny={"--recurse-submodules": _SUBMODULES, "-p": _EDITOR, "--patch": _EDITOR})
SUBCOMMANDS["stash"] = Sub(values=_opts("-m --message"))


# The flags a rule of this model reads that make git do more (read untracked or ignored files, apply, reach
# more remotes): an abbreviation of one counts as it, as git would take it (`git add --forc`, `git grep
# --untr`). Flags that make git do less (`--cached`, `--stat`, `--no-hardlinks`) count only spelled out: a
# misread one then errs to doing more.
_RULE_FLAGS = {
    "add": ("--force", "--all", "--update", "--ignore-removal", "--renormalize"),
    "grep": ("--untracked", "--no-index"),
    "apply": ("--apply", "--reject"),
    "fetch": ("--multiple", "--all"),
    "pull": ("--all",),
    "push": ("--all",),
}


def _grep(p: Parsed) -> ArgUse:
    """git grep searches the files of the work tree below its paths (all of it when none is named; with
    --no-index / --untracked, untracked files too): the checker walks those trees for files with other hard
    links, as for grep -r (a hard link to an outside file the operator left in the tree is the same file to
    any wall). Operands that are revisions name no folder, so nothing is walked for them."""
    ops = list(p.operands)
    if not p.has("-e", "-f") and ops and p.dashdash > 0:
        ops = ops[1:]  # the pattern
    skips = (".git",) if p.has("--untracked", "--no-index") else (".git", ".dal")
    return ArgUse(reads=tuple(ops), read_trees=tuple(ops) or (".",), tree_skips=skips)


def analyze_git(argv: tuple[str, ...], is_dir: Callable[[str], bool] | None = None) -> ArgUse:
    """What the check reads of one git command; `use.git` holds what the checker must look at on the
    filesystem. (`is_dir` is unused: the wall holds where git writes.)"""
    args = list(argv[1:])
    i = 0
    while i < len(args) and args[i].startswith("-"):
        a = args[i]
        name = a.split("=", 1)[0]
        if name.startswith("-c") and name != "-c" and not name.startswith("--"):
            name = "-c"
        hit = name if name in _GLOBAL_DENY else next(
            (k for k in _GLOBAL_DENY if k.startswith("--") and len(name) > 3 and k.startswith(name)), None)
        if hit is not None and _GLOBAL_DENY[hit]:
            return ArgUse(unsafe=f"git {hit}: {_GLOBAL_DENY[hit]}")
        if hit is None and name not in _GLOBAL_FLAGS and name not in _GLOBAL_VALUES:
            return ArgUse(unsafe=f"git {name}: a global option DAL does not know")
        i += 2 if name in _GLOBAL_VALUES and "=" not in a else 1
    if i >= len(args):
        return ArgUse(idempotent=True, git=GitUse(""))
    sub_name = args[i]
    if sub_name in tables.GIT_DENY:
        return ArgUse(unsafe=f"git {sub_name}: {tables.GIT_DENY[sub_name]}")
    row = tables.git_row(sub_name)
    sub = SUBCOMMANDS.get(sub_name, Sub())
    try:
        parsed = _parse(sub_name, sub, args[i + 1 :])
        if parsed.has("--help"):
            raise Unsafe(f"git {sub_name} --help: runs man or a web browser")
        git = sub.custom(parsed) if sub.custom is not None else GitUse(sub_name)
        use = _grep(parsed) if sub_name == "grep" else ArgUse()
    except Unsafe as e:
        return ArgUse(unsafe=str(e))
    except ValueError as e:  # -p with a non-number, say
        return ArgUse(unsafe=f"git {sub_name}: {e}")
    return attrs.evolve(use, idempotent=row.idempotent, git=attrs.evolve(
        git, network=row.network, writes_repo=not row.idempotent, writes_worktree=row.worktree))


def git_is_network(argv: tuple[str, ...]) -> bool:
    """Whether this git command reaches other repositories (tables.GIT's network column)."""
    use = analyze_git(argv)
    return isinstance(use.git, GitUse) and use.git.network
