"""The argument model of git, for policies that allow it (git is not in the default toolset).

Each subcommand DAL knows has a table: options that run a program (denied), options whose value is a path
read or written (checked against the roots like any other path), options that take a separate value, and
what its operands are. A subcommand DAL does not know is denied, as is every global option that points git
elsewhere (-C, --git-dir, --work-tree, -c, --exec-path, ...). Option names may be abbreviated wherever git's
parse-options allows it; an abbreviation of an option that is denied or takes a path counts as that option.

What the model cannot see from the arguments -- the repository git will use, the remotes it will reach, the
paths a patch names -- it hands to the checker (`GitUse`), which looks at the filesystem.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable

import attrs

from dal.effects.classify.programs import ArgUse, Unsafe

__all__ = ["GitUse", "analyze_git", "git_is_network", "SUBCOMMANDS"]

READ, WRITE = "read", "write"


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
    # (folder or "" for format.outputDirectory / the current folder, regex of the names): files format-patch
    # makes; each entry there its names can match is checked as a write (a symlink would be written through)
    outputs: tuple[tuple[str, str], ...] = ()


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
    """How one subcommand uses its arguments."""

    network: bool = False
    values: frozenset[str] = frozenset()  # options taking a value, separate (`-m MSG`) or attached
    paths: dict[str, str] = attrs.field(factory=dict)  # option -> READ / WRITE (value is a path)
    deny: dict[str, str] = attrs.field(factory=dict)  # option -> why it is denied
    flags: frozenset[str] | None = None  # when set, the only other options allowed (positions matter)
    # How the operands are used; None: each is a path read (revisions and pathspecs are harmless there).
    custom: Callable[..., tuple[ArgUse, GitUse]] | None = None  # (parsed) or, for mv, (parsed, is_dir)
    idempotent: bool = False  # the read-only subcommands; the others write the repository
    worktree: bool = False  # rewrites files of the work tree (checkout, merge, ...)


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


_GPG = "runs gpg"
# Going on with an operation that stopped half-way carries out what git keeps for it in the git directory:
# a todo list (whose `exec` lines run a shell), patches split from a mailbox. That state is protected, and
# the wall removes it when a command leaves it behind, but DAL checks none of it: refused.
_GOES_ON = ("goes on from the state git keeps in .git (a todo list that can run a shell, patches DAL did not "
            "check): finish the operation within one command, or --abort it")
_GOES_ON_DENY = {"--continue": _GOES_ON, "--skip": _GOES_ON}
_SIGN_DENY = {"-S": _GPG, "--gpg-sign": _GPG}
_SUBMODULES = "works in submodules, whose URLs and hooks a script can choose"
_STRATEGY = "names a merge strategy, which runs the program git-merge-STRATEGY"
_STRATEGIES = frozenset({"ort", "recursive", "resolve", "octopus", "ours", "subtree"})

# Options of the diff and revision machinery shared by log, show, diff, format-patch and friends.
_DIFF_VALUES = _opts(
    "-S -G -O -I --anchored --diff-algorithm --word-diff-regex --color-moved-ws --inter-hunk-context "
    "--output-indicator-new --output-indicator-old --output-indicator-context --src-prefix --dst-prefix "
    "--line-prefix --ignore-matching-lines --find-object --skip-to --rotate-to --output"
)
_REV_VALUES = _opts(
    "-n --max-count --skip --since --after --until --before --author --committer --grep --grep-reflog "
    "--min-parents --max-parents --exclude --encoding --date -L"
)
# Every subcommand that hands its options to git's revision and diff machinery (setup_revisions,
# diff_opt_parse) takes the diff options `--output=FILE` (writes FILE) and `-O FILE` (reads it), whatever its
# own help says: log, show, whatchanged, shortlog, rev-list, reflog (show), stash list/show, blame, annotate,
# diff and its plumbing, range-diff, cherry-pick, revert, format-patch (checked against git 2.39, executing it:
# tests/effects/test_git_outputs.py).
_LOG_PATHS = {"--output": WRITE, "-O": READ}
_LOG_DENY = {
    "--show-signature": _GPG,
    "--submodule": None,  # shows submodule changes through `git log` in them: their config is protected
}


# A placeholder may carry a magic sign between `%` and its letter (pretty.c: `%+G?`, `%-GS`, `% GK`).
_SIGNATURE_PLACEHOLDER = re.compile(r"%[-+ ]?G")


def _format_deny(p: Parsed) -> None:
    for v in p.values("--format", "--pretty"):
        if _SIGNATURE_PLACEHOLDER.search(v):
            raise Unsafe(f"git {p.sub} --format with %G: verifies signatures, which runs gpg")


def _reads(p: Parsed) -> tuple[ArgUse, GitUse]:
    return ArgUse(reads=tuple(o for o in p.operands if o != "-")), GitUse(p.sub)


def _log(p: Parsed) -> tuple[ArgUse, GitUse]:
    _format_deny(p)
    return _reads(p)


def _ref_format(p: Parsed) -> tuple[ArgUse, GitUse]:
    """for-each-ref, branch, tag: git 2.40+ verifies a signature for `%(signature...)` in --format (ref-filter)."""
    for v in p.values("--format"):
        if "%(signature" in v:
            raise Unsafe(f"git {p.sub} --format with %(signature): verifies signatures, which runs gpg")
    return _read_only(p)


def _format_patch(p: Parsed) -> tuple[ArgUse, GitUse]:
    """format-patch writes one file per commit into the -o folder (else format.outputDirectory, else the
    current folder): `[vREROLL-]NNNN-SUBJECT` cut to --filename-max-length, then the suffix (builtin/log.c,
    open_next_file; the subject and the reroll count are reduced to letters, digits, `.`, `_`, `-`), or only
    the number with --numbered-files. A suffix holding `/` leaves the folder (`--suffix=/../dal.toml`):
    denied. The names themselves are known only once git has read the commits, so the checker checks, as
    writes, every entry of that folder a name can match (a symlink there would be written through), and
    every protected path there."""
    _format_deny(p)
    for suffix in p.values("--suffix"):
        if "/" in suffix:
            raise Unsafe(f"git format-patch --suffix={suffix}: a suffix with / makes the patch files outside their "
                         "folder")
    use, git = _reads(p)
    if p.has("--stdout") and not any(n.startswith("--no-std") for n, _ in p.options):
        return use, git  # to standard output only
    folder = ([""] + p.values("-o", "--output-directory"))[-1]
    # Every name starts with the number (negative with --start-number=-N) or, with a reroll count, with `v`.
    names = r"(?:v|-?[0-9]).*" if p.values("-v", "--reroll-count") else r"-?[0-9].*"
    return use, attrs.evolve(git, outputs=((folder, names),))


def _diff(p: Parsed) -> tuple[ArgUse, GitUse]:
    """git diff's operands are revisions or paths; outside a repository, with --no-index, or when a path is
    outside the work tree, two paths are compared as files (a folder against a file means FOLDER/FILE, two
    folders are walked as trees, not following symlinks), like diff(1)."""
    _format_deny(p)
    ops = [o for o in p.operands if o != "-"]
    use = ArgUse(reads=tuple(ops))
    if len(ops) == 2:
        a, b = ops
        derived = [os.path.join(a, os.path.basename(b.rstrip("/")) or b), os.path.join(b, os.path.basename(a))]
        use = attrs.evolve(use, reads=(*ops, *derived), read_trees=(a, b))
    return use, GitUse(p.sub)


def _grep(p: Parsed) -> tuple[ArgUse, GitUse]:
    """git grep searches the files of the work tree below its paths (all of it when none is named; with
    --no-index / --untracked, untracked files too): the checker walks those trees for files with other hard
    links, as for grep -r. Operands that are revisions name no folder, so nothing is walked for them."""
    ops = list(p.operands)
    if not p.has("-e", "-f") and ops and p.dashdash > 0:
        ops = ops[1:]  # the pattern
    # Tracked files only, unless --untracked / --no-index: then the run store in `.dal/` too (a denial).
    skips = (".git",) if p.has("--untracked", "--no-index") else (".git", ".dal")
    return ArgUse(reads=tuple(ops), read_trees=tuple(ops) or (".",), tree_skips=skips), GitUse(p.sub)


def _no_globs(paths: list[str]) -> None:
    for o in paths:
        if o.startswith(":") or any(c in o for c in "*?["):
            raise Unsafe(f"git pathspec {o!r}: a pattern could match protected files; name the files")


def _writes(p: Parsed) -> tuple[ArgUse, GitUse]:
    """checkout/restore/stash push rewrite the work-tree files their pathspecs name."""
    ops = [o for o in p.operands if o != "-"]
    _no_globs(ops)
    if p.values("--pathspec-from-file"):
        raise Unsafe(f"git {p.sub} --pathspec-from-file: names paths that cannot be checked")
    return ArgUse(reads=tuple(ops), writes=tuple(ops)), GitUse(p.sub)


def _staging(p: Parsed) -> tuple[ArgUse, GitUse]:
    """git add / git commit PATHS record the files their pathspecs name in the index, and a later checkout
    writes them back: the checker refuses a protected path or a git-directory lookalike among them (patterns
    and `.` are left to what the repository is checked for after the command, gitguard.py). `git add` also
    writes the content of every untracked file below them into objects, where a later command reads it
    back: the checker refuses one that would reach a file scripts never read."""
    ops = tuple(o for o in p.operands if o != "-")
    if p.sub != "add":
        return ArgUse(reads=ops), GitUse(p.sub, staged=ops)
    if p.values("--pathspec-from-file"):
        raise Unsafe("git add --pathspec-from-file: adds paths that cannot be checked; name them on the command line")
    whole = not ops and p.has("-A", "--all", "-u", "--update", "--ignore-removal", "--renormalize")
    adds = ops or ((":/",) if whole else ())
    return ArgUse(reads=ops), GitUse(p.sub, staged=ops, adds=adds, adds_ignored=p.has("-f", "--force"))


def _rm(p: Parsed) -> tuple[ArgUse, GitUse]:
    ops = list(p.operands)
    if p.has("--cached", "-n", "--dry-run"):
        return ArgUse(reads=tuple(ops)), GitUse(p.sub)  # the index only: nothing in the work tree changes
    _no_globs(ops)
    if p.values("--pathspec-from-file"):
        raise Unsafe("git rm --pathspec-from-file: removes paths that cannot be checked")
    return ArgUse(writes_nofollow=tuple(ops)), GitUse(p.sub)


def _mv(p: Parsed, is_dir: Callable[[str], bool]) -> tuple[ArgUse, GitUse]:
    ops = list(p.operands)
    if len(ops) < 2:
        return ArgUse(), GitUse(p.sub)
    *sources, dest = ops
    into = len(sources) > 1 or is_dir(dest)
    written = [os.path.join(dest, os.path.basename(s.rstrip("/"))) if into else dest for s in sources]
    places = tuple((s, w, "move") for s, w in zip(sources, written, strict=True))
    use = ArgUse(reads=tuple(sources), writes=tuple(written), writes_nofollow=tuple(sources), places=places)
    return use, GitUse(p.sub)


def _humanish(url: str) -> str:
    """The folder `git clone URL` makes when none is named (builtin/clone.c, guess_dir_name)."""
    s = url.rstrip("/")
    if s.endswith("/.git"):
        s = s[:-5]
    s = s.rstrip("/")
    tail = re.split(r"[/:]", s)[-1] if s else s
    if tail.endswith(".git"):
        tail = tail[:-4]
    elif tail.endswith(".bundle"):
        tail = tail[:-7]
    return tail or "repo"


def _clone(p: Parsed) -> tuple[ArgUse, GitUse]:
    ops = list(p.operands)
    if not ops:
        return ArgUse(), GitUse(p.sub, network=True)
    url = ops[0]
    dest = ops[1] if len(ops) > 1 else _humanish(url)
    reads = tuple(p.values("--reference", "--reference-if-able"))
    return ArgUse(reads=reads, writes=(dest,)), GitUse(p.sub, remotes=(url,), network=True,
                                                      hardlinks=not p.has("--no-hardlinks"))


def _init(p: Parsed) -> tuple[ArgUse, GitUse]:
    """A new repository only: in a folder that holds a `.git` already git re-initialises that repository,
    rewriting its config (core.filemode, core.bare, core.worktree) and copying templates into its hooks/ and
    info/ (the checker denies it, seeing the folder)."""
    target = p.operands[0] if p.operands else "."
    return ArgUse(writes=(target,)), GitUse(p.sub, initialises=target)


# Where a refspec may store what it fetches or pushes. A ref under refs/replace/ makes every git the operator
# runs show the object it names in place of another (a blob of the script's for a tracked dal.toml); the other
# namespaces outside branches, tags and remote-tracking branches are git's own (notes, the stash, bisect).
_REF_PLACES = ("refs/heads/", "refs/tags/", "refs/remotes/")


def _refspec_place(sub: str, spec: str, where: str) -> None:
    """Deny a refspec (`[+]SRC[:DST]`) that would store a ref outside branches, tags and remote-tracking
    branches. A push without `:DST` stores SRC's own name; a short DST is tried by git as `refs/DST` too,
    which reaches an existing `refs/replace/...` through `replace/...`."""
    if spec.startswith("^"):
        return  # a negative refspec only leaves refs out
    src, colon, dst = spec.removeprefix("+").partition(":")
    if not colon:
        if sub != "push":
            return  # fetched into FETCH_HEAD only (and the configured remote-tracking branch)
        dst = src
    name = re.sub("/+", "/", dst)
    if not name or name == "HEAD" or name == "@":
        return
    if name.startswith("refs/"):
        ok = name.startswith(_REF_PLACES)
    else:
        ok = not name.startswith("replace/")
    if not ok:
        raise Unsafe(f"git {sub} {where}{spec}: stores a ref outside refs/heads, refs/tags and refs/remotes (a ref "
                     "under refs/replace/ makes every git show another object in place of the one it names)")


def _remote_ops(p: Parsed) -> tuple[ArgUse, GitUse]:
    """fetch/pull/push/ls-remote [REMOTE [REFSPEC...]]: the first operand is a remote name or URL; the
    refspecs after it (and --refmap's) may store refs only where a person's git reads them as branches, tags
    and remote-tracking branches."""
    ops = list(p.operands)
    named = [*p.values("--repo")]
    if p.sub in ("fetch", "pull", "push"):
        specs = [] if p.has("--multiple") else ops[1:]
        specs = [s for i, s in enumerate(specs) if not (i > 0 and specs[i - 1] == "tag")]  # `tag NAME`: refs/tags
        for spec in specs:
            _refspec_place(p.sub, spec, "")
        for spec in p.values("--refmap"):
            _refspec_place(p.sub, spec, "--refmap=")
    if p.has("--multiple") and p.sub == "fetch":
        named += ops
    elif ops:
        named.append(ops[0])
    everyone = p.has("--all") or not named
    return ArgUse(), GitUse(p.sub, remotes=tuple(named), all_remotes=everyone, network=True)


def _remote(p: Parsed) -> tuple[ArgUse, GitUse]:
    ops = list(p.operands)
    action = ops[0] if ops else ""
    if action in ("add", "set-url"):  # add NAME URL; set-url NAME NEWURL [OLDURL]
        args = ops[1:]
        url = args[1] if len(args) > 1 else ""
        return ArgUse(), GitUse(p.sub, remotes=(url,) if url else (), network=True)
    if action in ("", "-v", "get-url", "rename", "remove", "rm", "set-head", "set-branches", "show", "prune",
                  "update"):  # fmt: skip
        return ArgUse(), GitUse(p.sub, all_remotes=action in ("show", "prune", "update"), network=True)
    raise Unsafe(f"git remote {action}: not a subcommand DAL knows")


def _worktree(p: Parsed) -> tuple[ArgUse, GitUse]:
    ops = list(p.operands)
    action = ops[0] if ops else ""
    args = ops[1:]
    if action == "add" and args:
        return ArgUse(writes=(args[0],)), GitUse(p.sub)
    if action == "move" and len(args) >= 2:
        return ArgUse(writes=(args[1],), writes_nofollow=(args[0],), places=((args[0], args[1], "move"),)), GitUse(
            p.sub)
    if action == "remove" and args:
        return ArgUse(writes_nofollow=(args[0],)), GitUse(p.sub)
    if action in ("list", "prune", "lock", "unlock", "repair"):
        return ArgUse(reads=tuple(args)), GitUse(p.sub)
    raise Unsafe(f"git worktree {action or '(nothing)'}: not a form DAL knows")


def _bundle(p: Parsed) -> tuple[ArgUse, GitUse]:
    ops = list(p.operands)
    action = ops[0] if ops else ""
    if action == "create" and len(ops) > 1:
        return ArgUse(writes=(ops[1],)), GitUse(p.sub)
    if action in ("verify", "list-heads", "unbundle") and len(ops) > 1:
        return ArgUse(reads=(ops[1],)), GitUse(p.sub)
    raise Unsafe(f"git bundle {action or '(nothing)'}: not a form DAL knows")


def _archive(p: Parsed) -> tuple[ArgUse, GitUse]:
    return ArgUse(reads=tuple(p.values("--add-file"))), GitUse(p.sub)


def _patches(p: Parsed) -> tuple[ArgUse, GitUse]:
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
        return ArgUse(reads=tuple(ops)), GitUse(p.sub)
    # --cached writes the index only, but a later checkout writes what it holds: checked the same.
    return (ArgUse(reads=tuple(ops), writes=tuple(p.values("--build-fake-ancestor"))),
            GitUse(p.sub, patches=tuple((o, prefix, strip) for o in ops), rejects=p.has("--reject")))  # fmt: skip


def _stash(p: Parsed) -> tuple[ArgUse, GitUse]:
    _format_deny(p)  # stash list takes log's options
    ops = list(p.operands)
    action = ops[0] if ops and ops[0] in _STASH_ACTIONS else "push"
    if action in ("push", "save") and p.has("-u", "--include-untracked", "-a", "--all", "--only-untracked"):
        raise Unsafe("git stash -u/-a: removes untracked files, the policy and the run store among them")
    if action == "push":
        paths = ops[1:] if ops and ops[0] == "push" else ops
        return _writes(attrs.evolve(p, operands=tuple(paths)))
    return ArgUse(), GitUse(p.sub)


_STASH_ACTIONS = frozenset("push save list show pop apply branch clear drop create store".split())


def _bisect(p: Parsed) -> tuple[ArgUse, GitUse]:
    action = p.operands[0] if p.operands else ""
    if action in ("start", "bad", "good", "new", "old", "skip", "reset", "log", "terms", "next", ""):
        return ArgUse(), GitUse(p.sub)
    raise Unsafe(f"git bisect {action}: runs a program or reads unchecked input")


def _strategy(p: Parsed) -> None:
    for v in p.values("-s", "--strategy"):
        if v not in _STRATEGIES:
            raise Unsafe(f"git {p.sub} --strategy={v}: {_STRATEGY}")


def _merging(p: Parsed) -> tuple[ArgUse, GitUse]:
    _strategy(p)
    return ArgUse(reads=tuple(p.values("-F", "--file"))), GitUse(p.sub)


def _pull(p: Parsed) -> tuple[ArgUse, GitUse]:
    _strategy(p)
    return _remote_ops(p)


def _read_only(p: Parsed) -> tuple[ArgUse, GitUse]:
    return ArgUse(reads=tuple(o for o in p.operands if o != "-")), GitUse(p.sub)


_WRITE_BACK = {"--pathspec-from-file": READ}

SUBCOMMANDS: dict[str, Sub] = {
    # reading
    "status": Sub(idempotent=True),
    "log": Sub(values=_DIFF_VALUES | _REV_VALUES, paths=_LOG_PATHS, deny=_LOG_DENY, custom=_log, idempotent=True),
    "show": Sub(values=_DIFF_VALUES | _REV_VALUES, paths=_LOG_PATHS, deny=_LOG_DENY, custom=_log, idempotent=True),
    "whatchanged": Sub(values=_DIFF_VALUES | _REV_VALUES, paths=_LOG_PATHS, deny=_LOG_DENY, custom=_log,
                       idempotent=True),  # fmt: skip
    "shortlog": Sub(values=_DIFF_VALUES | _REV_VALUES | _opts("--group"), paths=_LOG_PATHS, deny=_LOG_DENY, custom=_log,
                    idempotent=True),  # fmt: skip
    "diff": Sub(values=_DIFF_VALUES, paths=_LOG_PATHS, custom=_diff, idempotent=True),
    "diff-tree": Sub(values=_DIFF_VALUES, paths=_LOG_PATHS, idempotent=True),
    "diff-index": Sub(values=_DIFF_VALUES, paths=_LOG_PATHS, idempotent=True),
    "diff-files": Sub(values=_DIFF_VALUES, paths=_LOG_PATHS, idempotent=True),
    "range-diff": Sub(values=_DIFF_VALUES | _opts("--creation-factor"), paths=_LOG_PATHS, idempotent=True),
    "blame": Sub(values=_opts("-L --reverse --encoding --date --ignore-rev"),
                 paths={**_LOG_PATHS, "--contents": READ, "--ignore-revs-file": READ, "-S": READ},
                 idempotent=True),  # fmt: skip
    "annotate": Sub(values=_opts("-L --reverse --encoding --date --ignore-rev"),
                    paths={**_LOG_PATHS, "--contents": READ, "--ignore-revs-file": READ, "-S": READ},
                    idempotent=True),  # fmt: skip
    "grep": Sub(values=_opts("-e --max-depth -C --context -A --after-context -B --before-context -m --max-count "
                             "--threads"),
                paths={"-f": READ},
                deny={"-O": "opens the files in a pager it names", "--open-files-in-pager": "opens the files in a "
                      "pager it names", "--recurse-submodules": _SUBMODULES},
                custom=_grep, idempotent=True),  # fmt: skip
    "ls-files": Sub(values=_opts("-x --exclude --exclude-per-directory --with-tree --format"),
                    paths={"-X": READ, "--exclude-from": READ}, deny={"--recurse-submodules": _SUBMODULES},
                    idempotent=True),  # fmt: skip
    "ls-tree": Sub(values=_opts("--format"), idempotent=True),
    "cat-file": Sub(values=_opts("--path"), idempotent=True),
    "rev-parse": Sub(values=_opts("--default --prefix --git-path"), paths={"--resolve-git-dir": READ},
                     idempotent=True),  # fmt: skip
    "rev-list": Sub(values=_DIFF_VALUES | _REV_VALUES, paths=_LOG_PATHS, deny=_LOG_DENY, custom=_log, idempotent=True),
    "describe": Sub(values=_opts("--match --exclude"), idempotent=True),
    "name-rev": Sub(values=_opts("--refs --exclude"), idempotent=True),
    "merge-base": Sub(idempotent=True),
    "show-ref": Sub(idempotent=True),
    "for-each-ref": Sub(values=_opts("--format --sort --count --points-at"), custom=_ref_format, idempotent=True),
    "show-branch": Sub(idempotent=True),
    "cherry": Sub(idempotent=True),
    "count-objects": Sub(idempotent=True),
    "check-ignore": Sub(idempotent=True),
    "check-attr": Sub(idempotent=True),
    "var": Sub(idempotent=True),
    "version": Sub(idempotent=True),
    "reflog": Sub(values=_DIFF_VALUES | _REV_VALUES, paths=_LOG_PATHS, deny=_LOG_DENY, custom=_log),
    # changing the repository and the work tree
    "add": Sub(paths=dict(_WRITE_BACK), values=_opts("--chmod"), custom=_staging),
    "commit": Sub(values=_opts("-C --reuse-message -c --reedit-message --fixup --squash --author --date -m "
                               "--message --trailer --cleanup"),
                  paths={"-F": READ, "--file": READ, "-t": READ, "--template": READ, **_WRITE_BACK},
                  deny=_SIGN_DENY, custom=_staging),  # fmt: skip
    "rm": Sub(paths=dict(_WRITE_BACK), flags=_opts("-f --force -n --dry-run -r --cached --ignore-unmatch --sparse "
                                                  "-q --quiet --pathspec-file-nul"), custom=_rm),  # fmt: skip
    "mv": Sub(flags=_opts("-f --force -k -n --dry-run -v --verbose --sparse"), custom=_mv),
    "restore": Sub(values=_opts("-s --source --conflict"), paths=dict(_WRITE_BACK),
                   deny={"--recurse-submodules": _SUBMODULES}, custom=_writes),  # fmt: skip
    "checkout": Sub(values=_opts("-b -B --orphan --conflict"), paths=dict(_WRITE_BACK),
                    deny={"--recurse-submodules": _SUBMODULES}, custom=_writes),  # fmt: skip
    "switch": Sub(values=_opts("-c --create -C --force-create --orphan --conflict"),
                  deny={"--recurse-submodules": _SUBMODULES}),  # fmt: skip
    "reset": Sub(paths=dict(_WRITE_BACK), deny={"--recurse-submodules": _SUBMODULES}),
    "stash": Sub(values=_DIFF_VALUES | _REV_VALUES | _opts("-m --message"), paths={**_WRITE_BACK, **_LOG_PATHS},
                 deny=_LOG_DENY, custom=_stash),  # fmt: skip
    "branch": Sub(values=_opts("-u --set-upstream-to --points-at --format --sort"),
                  deny={"--recurse-submodules": _SUBMODULES}, custom=_ref_format),  # fmt: skip
    "tag": Sub(values=_opts("-m --message --points-at --format --sort --cleanup"),
               paths={"-F": READ, "--file": READ},
               deny={"-s": _GPG, "--sign": _GPG, "-u": _GPG, "--local-user": _GPG, "-v": _GPG,
                     "--verify": _GPG}, custom=_ref_format),  # fmt: skip
    "merge": Sub(values=_opts("-s --strategy -X --strategy-option -m --into-name --cleanup"),
                 paths={"-F": READ, "--file": READ},
                 deny={**_SIGN_DENY, "--verify-signatures": _GPG}, custom=_merging),  # fmt: skip
    "rebase": Sub(values=_opts("--onto -s --strategy -X --strategy-option --empty --whitespace"),
                  deny={**_SIGN_DENY, "-x": "runs a shell command", "--exec": "runs a shell command",
                        "-i": "runs an editor", "--interactive": "runs an editor", "--edit-todo": "runs an editor",
                        **_GOES_ON_DENY},
                  custom=_merging),  # fmt: skip
    "cherry-pick": Sub(values=_opts("-m --mainline --strategy -X --strategy-option --cleanup"), paths=_LOG_PATHS,
                       deny={**_SIGN_DENY, **_GOES_ON_DENY}, custom=_merging),  # fmt: skip
    "revert": Sub(values=_opts("-m --mainline --strategy -X --strategy-option --cleanup"), paths=_LOG_PATHS,
                  deny={**_SIGN_DENY, **_GOES_ON_DENY}, custom=_merging),  # fmt: skip
    "apply": Sub(values=_opts("-p -C --exclude --include --whitespace --directory"),
                 paths={"--build-fake-ancestor": WRITE},
                 deny={"--unsafe-paths": "writes outside the work tree"},
                 flags=_opts("--stat --numstat --summary --check --index --cached --intent-to-add -N -3 --3way -R "
                             "--reverse --reject -z --unidiff-zero --apply --no-add --allow-binary-replacement "
                             "--binary --ignore-space-change --ignore-whitespace --inaccurate-eof -v --verbose -q "
                             "--quiet --recount --allow-empty --allow-overlap"),
                 custom=_patches),  # fmt: skip
    "am": Sub(values=_opts("-p -C --exclude --include --whitespace --directory --quoted-cr --empty --patch-format "
                           "--resolvemsg"),
              deny={**_SIGN_DENY, "-i": "reads a terminal", "--interactive": "reads a terminal", **_GOES_ON_DENY,
                    "-r": _GOES_ON, "--resolved": _GOES_ON},
              flags=_opts("-s --signoff -k --keep --keep-non-patch --keep-cr --no-keep-cr -c --scissors --no-scissors "
                          "-m --message-id --no-message-id -q --quiet -u --utf8 --no-utf8 -3 --3way --no-3way "
                          "--rerere-autoupdate --no-rerere-autoupdate --ignore-space-change --ignore-whitespace "
                          "--reject --committer-date-is-author-date --ignore-date --skip --no-gpg-sign --continue -r "
                          "--resolved --abort --quit --show-current-patch --allow-empty"),
              custom=_patches),  # fmt: skip
    "format-patch": Sub(values=_DIFF_VALUES | _REV_VALUES | _opts(
                            "--start-number --subject-prefix --filename-max-length -v --reroll-count --to --cc "
                            "--in-reply-to --add-header --interdiff --range-diff --creation-factor --signature "
                            "--suffix"),
                        paths={"-o": WRITE, "--output-directory": WRITE, "--output": WRITE, "--signature-file": READ,
                               "-O": READ},
                        deny=_LOG_DENY, custom=_format_patch),  # fmt: skip
    "archive": Sub(values=_opts("--format --prefix --add-virtual-file"),
                   paths={"-o": WRITE, "--output": WRITE, "--add-file": READ},
                   deny={"--remote": "fetches the archive from another repository", "--exec": "names a program to run"},
                   custom=_archive),  # fmt: skip
    "bundle": Sub(values=_opts("--version"), flags=_opts("--progress --all-progress --all-progress-implied -q "
                                                         "--quiet --all --branches --tags --remotes"),
                  custom=_bundle),  # fmt: skip
    "worktree": Sub(values=_opts("-b -B --expire --reason --orphan"),
                    flags=_opts("-f --force -d --detach --checkout --no-checkout --guess-remote --no-guess-remote "
                                "--track --no-track --lock -n --dry-run --porcelain -z -q --quiet -v --verbose"),
                    custom=_worktree),  # fmt: skip
    "init": Sub(values=_opts("--object-format -b --initial-branch"),
                deny={"--template": "copies hooks from a folder it names", "--separate-git-dir": "keeps the "
                      "repository's configuration where scripts can write it", "--bare": "makes a repository "
                      "whose configuration and hooks are not protected", "--shared": "writes core.sharedRepository "
                      "into the repository's config: the operator's git would then leave the index, refs and objects "
                      "writable by other users"},
                flags=_opts("-q --quiet"), custom=_init),  # fmt: skip
    "bisect": Sub(flags=_opts("--no-checkout --first-parent --term-old --term-new --term-good --term-bad"),
                  custom=_bisect),  # fmt: skip
    # reaching other repositories
    "clone": Sub(network=True,
                 values=_opts("-o --origin -b --branch --depth --shallow-since --shallow-exclude -j --jobs --filter "
                              "--server-option"),
                 paths={"--reference": READ, "--reference-if-able": READ},
                 deny={"-u": "names a program to run", "--upload-pack": "names a program to run",
                       "--template": "copies hooks from a folder it names",
                       "-c": "sets configuration, which can name programs to run",
                       "--config": "sets configuration, which can name programs to run",
                       "--separate-git-dir": "keeps the repository's configuration where scripts can write it",
                       "--recurse-submodules": _SUBMODULES, "--recursive": _SUBMODULES,
                       "--remote-submodules": _SUBMODULES, "--bare": "makes a repository whose configuration and "
                       "hooks are not protected", "--mirror": "makes a repository whose configuration and hooks are "
                       "not protected", "--bundle-uri": "fetches from a second place it names"},
                 flags=_opts("-l --local --no-hardlinks -s --shared --dissociate -q --quiet -v --verbose --progress "
                             "--no-progress -n --no-checkout --reject-shallow --no-reject-shallow --sparse "
                             "--also-filter-submodules --single-branch --no-single-branch --no-tags "
                             "--shallow-submodules --no-shallow-submodules -4 --ipv4 -6 --ipv6"),
                 custom=_clone),  # fmt: skip
    "fetch": Sub(network=True,
                 values=_opts("--depth --deepen --shallow-since --shallow-exclude --negotiation-tip --refmap -j --jobs "
                              "-o --server-option --filter"),
                 deny={"--upload-pack": "names a program to run", "--recurse-submodules": _SUBMODULES,
                       "--submodule-prefix": "is internal to git", "--recurse-submodules-default": _SUBMODULES,
                       "--stdin": "reads refspecs from standard input, which DAL does not check"},
                 custom=_remote_ops),  # fmt: skip
    "pull": Sub(network=True,
                values=_opts("--depth --deepen --shallow-since --shallow-exclude --negotiation-tip --refmap -j --jobs "
                             "-o --server-option -s --strategy -X --strategy-option --cleanup"),
                deny={**_SIGN_DENY, "--upload-pack": "names a program to run", "--recurse-submodules": _SUBMODULES,
                      "--verify-signatures": _GPG},
                custom=_pull),  # fmt: skip
    "push": Sub(network=True, values=_opts("-o --push-option --repo"),
                deny={"--receive-pack": "names a program to run", "--exec": "names a program to run",
                      "--recurse-submodules": _SUBMODULES, "--signed": _GPG},
                custom=_remote_ops),  # fmt: skip
    "ls-remote": Sub(network=True, values=_opts("--sort -o --server-option"),
                     deny={"--upload-pack": "names a program to run"}, custom=_remote_ops),  # fmt: skip
    "remote": Sub(network=True, values=_opts("-t -m"),
                  deny={"--mirror": "makes the remote's every ref, refs/replace/ among them, a ref of the same name "
                        "here"},
                  custom=_remote),  # fmt: skip
}

for _name in "restore checkout switch reset stash merge rebase cherry-pick revert pull am apply rm mv bisect".split():
    SUBCOMMANDS[_name] = attrs.evolve(SUBCOMMANDS[_name], worktree=True)

_DENIED_SUBCOMMANDS = {
    "config": "changes configuration, which can name programs to run",
    "daemon": "serves the repository",
    "submodule": "runs nested repositories",
    "filter-branch": "runs shell snippets",
    "difftool": "runs external tools",
    "mergetool": "runs external tools",
    "instaweb": "starts a server",
    "help": "runs man or a web browser",
    "clean": "removes untracked files, the policy and the run store among them",
    "send-email": "sends mail through a program",
    "maintenance": "registers the repository in the global configuration and schedules jobs",
    "credential": "talks to credential helpers",
    "gc": "not modelled",
}


# The flags a rule of this model reads that make git do more (read untracked or ignored files, apply, reach
# more remotes): an abbreviation of one counts as it, as git would take it (`git add --forc`, `git stash
# --al`, `git grep --untr`). Flags that make git do less (`--cached`, `--stat`, `--no-hardlinks`) count only
# spelled out: a misread one then errs to doing more.
_RULE_FLAGS = {
    "add": ("--force", "--all", "--update", "--ignore-removal", "--renormalize"),
    "commit": ("--all",),
    "grep": ("--untracked", "--no-index"),
    "stash": ("--include-untracked", "--all", "--only-untracked"),
    "apply": ("--apply", "--reject"),
    "fetch": ("--multiple", "--all"),
    "pull": ("--all",),
    "push": ("--all",),
}


def _match(sub_name: str, sub: Sub, name: str, attached: bool = False) -> str:
    """The option `name` (with its dashes) stands for, in full: itself, or the denied / path / value option
    of the model it abbreviates (git takes any unambiguous prefix), or the flag of _RULE_FLAGS it
    abbreviates. An abbreviation of a denied option is denied, whatever else it might abbreviate. Without
    git's own option tables the check may misread another abbreviation; git runs only inside a wall, which
    holds what such a misreading would miss (the store hidden, the policy read-only), and the check's word
    on it is an explanation (issue 27)."""
    known = (sub.deny, sub.paths, sub.values, sub.flags or ())
    if any(name in k for k in known) or not name.startswith("--") or len(name) < 3:
        return name
    for flag in _RULE_FLAGS.get(sub_name, ()):
        if flag.startswith(name):
            return flag
    for table in (sub.deny, sub.paths, sub.values):
        hits = [k for k in table if k.startswith(name)]
        if hits:
            return hits[0]
    return name


def _option(sub: Sub, sub_name: str, name: str) -> str:
    """Check one option name; return its kind: "deny" raises, else READ, WRITE, "value" or "flag"."""
    if name in sub.deny and sub.deny[name]:
        raise Unsafe(f"git {sub_name} {name}: {sub.deny[name]}")
    if name in sub.paths:
        return sub.paths[name]
    if name in sub.values:
        return "value"
    if name in sub.deny:
        return "flag"
    if _any_output(name):
        return WRITE
    if sub.flags is not None and name not in sub.flags and not name.startswith("--no-"):
        raise Unsafe(f"git {sub_name} {name}: an option DAL does not know for this subcommand")
    return "flag"


def _any_output(name: str) -> bool:
    """Every subcommand that takes git's revision or diff options takes `--output=FILE`
    (reflog, shortlog, rev-list, blame, annotate, stash show/list...), and git writes FILE; where the model
    does not list it, `--output` and its abbreviations are a written path anyway (their value taken too)."""
    return len(name) >= 5 and "--output".startswith(name)


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
            name = _match(sub_name, sub, raw, bool(eq))
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
    option before it for one with a value, git did not), it must not be one that is denied or takes a path."""
    if value.startswith("-") and len(value) > 1:
        try:
            name = _match(sub_name, sub, value.partition("=")[0], "=" in value) if value.startswith("--") else value[:2]
        except Unsafe:
            return  # a prefix of several options: git would refuse it, not take it for one
        if sub.deny.get(name) or _path_kind(sub, name):
            raise Unsafe(f"git {sub_name}: the value {value!r} could be read as the option {name}; "
                         "give values attached (--opt=VALUE)")


def _path_kind(sub: Sub, name: str) -> str | None:
    if name in sub.paths:
        return sub.paths[name]
    return WRITE if name not in sub.values and _any_output(name) else None


def _path_values(sub: Sub, parsed: Parsed, kind: str) -> list[str]:
    """The values of the options that name a path of `kind`. A `-` read is standard input (`commit -F -`);
    a `-` written is a file named `-` to git (`--output=-`, `archive -o -`), checked as one."""
    return [v for n, v in parsed.options
            if v is not None and _path_kind(sub, n) == kind and (v != "-" or kind == WRITE)]


def analyze_git(argv: tuple[str, ...], is_dir: Callable[[str], bool]) -> ArgUse:
    """The model of one git command; `use.git` holds what the checker must look at on the filesystem."""
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
    if sub_name in _DENIED_SUBCOMMANDS:
        return ArgUse(unsafe=f"git {sub_name}: {_DENIED_SUBCOMMANDS[sub_name]}")
    sub = SUBCOMMANDS.get(sub_name)
    if sub is None:
        return ArgUse(unsafe=f"git {sub_name}: not a git subcommand DAL knows (aliases included)")
    try:
        parsed = _parse(sub_name, sub, args[i + 1 :])
        if "--help" in (n for n, _ in parsed.options):
            raise Unsafe(f"git {sub_name} --help: runs man or a web browser")
        if sub.custom is _mv:
            use, git = _mv(parsed, is_dir)
        elif sub.custom is not None:
            use, git = sub.custom(parsed)
        else:
            use, git = _read_only(parsed)
    except Unsafe as e:
        return ArgUse(unsafe=str(e))
    except ValueError as e:  # -p with a non-number, say
        return ArgUse(unsafe=f"git {sub_name}: {e}")
    return attrs.evolve(
        use,
        reads=(*_path_values(sub, parsed, READ), *use.reads),
        writes=(*_path_values(sub, parsed, WRITE), *use.writes),
        idempotent=sub.idempotent,
        git=attrs.evolve(git, network=sub.network, writes_repo=not sub.idempotent, writes_worktree=sub.worktree),
    )


def git_is_network(argv: tuple[str, ...]) -> bool:
    """Whether this git command reaches other repositories (clone, fetch, pull, push, ls-remote, remote)."""
    use = analyze_git(argv, lambda p: False)
    return isinstance(use.git, GitUse) and use.git.network
