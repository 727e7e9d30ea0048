"""The static gate: parse a command, check every program and every path against the policy, decide.

Decision order is deny > approval > allow: one denied part denies the whole command; otherwise one part
needing approval makes the whole command wait for it.
"""

from __future__ import annotations

import functools
import os
import stat
import threading
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

import attrs

from dal.core import statedir
from dal.core.shellword import fed_command
from dal.effects.classify import tables
from dal.effects.classify.programs import INTERPRETERS, ArgUse, analyze_argv, model_class
from dal.effects.plan import paths as P
from dal.effects.plan import trees as t
from dal.effects.plan.shell import CommandList, Pipeline, Redirect, ShellDenied, SimpleCommand, parse_command
from dal.effects.policy import GIT_DIR_MARKS, GIT_PROTECTED, TRUSTED_PATH, Policy
from dal.effects.policy.prefix import DECISIONS, PrefixRule

if TYPE_CHECKING:
    from dal.effects.classify.gitmodel import GitUse

__all__ = ["Decision", "check_argv", "check_command", "find_program", "check_redirect_target", "recheck"]

_SEVERITY = {"read": 0, "local": 1, "external": 2}
_BUILTINS = frozenset(
    "cd export set unset alias unalias read shift exit return local declare typeset readonly let wait "
    "jobs fg bg kill umask ulimit shopt hash history type getopts printenv".split()
)


@attrs.frozen
class Decision:
    allowed: bool
    reason: str
    effect_class: str | None = None
    approval_required: bool = False
    idempotent: bool = False
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    programs: tuple[str, ...] = ()
    # What the executor runs: the checked plan and each program's absolute path on the trusted PATH.
    plan: CommandList | None = attrs.field(default=None, eq=False, repr=False)
    executables: tuple[tuple[str, str], ...] = attrs.field(default=(), eq=False, repr=False)
    # The text the program reads on its standard input (`run([...], {"input": ...})`, `write_file`); None:
    # /dev/null, as for every other command.
    stdin: str | None = attrs.field(default=None, eq=False, repr=False)

    def to_json(self) -> dict:
        return {
            "allowed": self.allowed, "approval_required": self.approval_required, "reason": self.reason,
            "class": self.effect_class, "idempotent": self.idempotent, "programs": list(self.programs),
            "reads": list(self.reads), "writes": list(self.writes),
        }


class _Denied(Exception):
    pass


@functools.lru_cache(maxsize=256)
def find_program(name: str) -> str | None:
    """The absolute path of `name` on the trusted PATH, never the caller's PATH: `shutil.which(name,
    path=TRUSTED_PATH)`, written out because shutil imports bz2, lzma and zlib, which a run never uses."""
    candidates = [name] if os.path.dirname(name) else [
        os.path.join(folder, name) for folder in dict.fromkeys(TRUSTED_PATH.split(os.pathsep)) if folder]
    for path in candidates:
        if os.path.exists(path) and os.access(path, os.F_OK | os.X_OK) and not os.path.isdir(path):
            return path
    return None


def _check_path(raw: str, kind: str, policy: Policy) -> str:
    """Return the resolved path of `raw` if `kind` ("read", "write", "write_nofollow") is allowed there.
    Within one command a path is checked once however often it is named, and at most _PATH_LIMIT distinct
    ones are: the check's time stays bounded whatever the script builds."""
    key = (raw, kind)
    done = _spent.paths.get(key)
    if done is not None:
        return done
    if len(_spent.paths) >= _PATH_LIMIT:
        raise _Denied(f"more than {_PATH_LIMIT} paths to check in one command")
    resolved = _check_path_once(raw, kind, policy)
    _spent.paths[key] = resolved
    return resolved


def _check_path_once(raw: str, kind: str, policy: Policy) -> str:
    ws = policy.workspace
    resolved = P.resolve_path(raw, ws, follow_final=kind != "write_nofollow")
    why = P.special_denial(raw, resolved)
    if why:
        raise _Denied(why)
    if resolved == P.NULL_DEVICE:
        if kind == "write_nofollow":  # rm, mv's source: the system's /dev/null itself would go
            raise _Denied(f"{raw}: would remove or move /dev/null (only writing into it is allowed)")
        return resolved
    roots = policy.read_roots if kind == "read" else policy.write_roots
    if not P.within(resolved, roots):
        verb = "reads" if kind == "read" else "writes"
        direct = resolved == os.path.normpath(os.path.join(ws, raw))
        where = "" if direct else f" (resolves to {resolved})"
        raise _Denied(f"{verb} outside the allowed roots: {raw}{where}")
    if kind == "write_nofollow" and resolved == ws:
        raise _Denied(f"would remove or move the workspace itself: {raw}")
    secret = policy.secrecy(resolved) if kind == "read" else None
    if secret:
        raise _Denied(f"reads a protected path: {secret}, which scripts never read")
    if kind != "read":
        _check_protection(resolved, policy)
    if kind != "write_nofollow":  # removing or moving a name leaves the file's other names alone
        _check_links(raw, resolved)
    else:
        _check_removal(resolved, policy)
    return resolved


def _check_protection(resolved: str, policy: Policy) -> None:
    why = policy.protection(resolved)
    if why:
        raise _Denied(f"writes a protected path: {why}")


def _check_links(raw: str, resolved: str) -> None:
    """Deny a file that has other hard links: they may be anywhere on the filesystem, outside every root,
    and nothing tells where, so reading or writing through this name could reach a file outside."""
    try:
        st = os.stat(resolved)
    except OSError:
        return  # nothing there yet: a write creates a file with one link
    _deny_linked(raw, st)


def _deny_linked(shown: str, st: os.stat_result) -> None:
    if st.st_nlink > 1 and not stat.S_ISDIR(st.st_mode):
        raise _Denied(f"{shown}: the file has {st.st_nlink} hard links, and the others may be outside the allowed "
                      "roots")


def _walk(top: str, policy: Policy, skips: tuple[str, ...] = ()) -> Iterator[tuple[str, str, os.stat_result]]:
    """(path, path relative to `top`, lstat) of everything below the directory `top`, never following a
    symlink; past _TREE_LIMIT entries -- for the whole command, every walk of every operand together
    (`grep -r x d d d ...` walks d once per operand) -- the command is denied rather than half checked."""
    try:
        for entry in t.walk(top, _TREE_LIMIT - _spent.n, skips):
            _spent.n += 1
            yield entry
    except t.TooMany:
        raise _Denied(f"{P.display(top, policy.workspace)}: more than {_TREE_LIMIT} entries to check in one "
                      "command") from None


_TREE_LIMIT = 100_000
_PATH_LIMIT = 16_384


class _Spent(threading.local):
    """What the check of the current command has spent: entries walked, paths checked (with their result)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.n = 0
        self.paths: dict[tuple[str, str], str] = {}
        statedir.clear()  # resolved again for each command: a symlink on the way may have changed


_spent = _Spent()


def _check_tree(top: str, policy: Policy) -> None:
    """Deny if a symlink below `top` (a directory about to be written into recursively) leads out or to a
    protected path, or a file there has other hard links."""
    for path, _, st in _walk(top, policy):
        if stat.S_ISLNK(st.st_mode):
            target = os.path.realpath(path)
            shown = P.display(path, policy.workspace)
            if not P.within(target, policy.write_roots):
                raise _Denied(f"writes outside the allowed roots: {shown} (resolves to {target})")
            _check_protection(target, policy)
        elif st.st_nlink > 1:
            _deny_linked(P.display(path, policy.workspace), st)


def _check_read_tree(raw: str, policy: Policy, skips: tuple[str, ...]) -> None:
    """A tree the program reads without following the symlinks in it: deny a file with other hard links,
    and a file scripts never read that the program does not leave out (`skips`: exact folder names)."""
    top = P.resolve_path(raw, policy.workspace)
    if not os.path.isdir(top):
        return
    for path, _, st in _walk(top, policy, skips):
        secret = policy.secrecy(path) if not stat.S_ISDIR(st.st_mode) else None  # a skipped folder is listed
        if secret:
            what = "DAL's own state" if P.within(path, statedir.state_dirs()) else "the run store"
            raise _Denied(f"reads {what} below {raw}: {secret}, which scripts never read (leave it out: name the "
                          "folders to read)")
        if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
            _deny_linked(P.display(path, policy.workspace), st)


def _hidden_folders(tops: Iterable[str], policy: Policy) -> tuple[str, ...]:
    """The base names of the folders that record runs (policy.hidden) below the walked `tops`, for the
    program to leave out as it leaves out `.dal`; a name that is not an exact name stays in the walk (and
    the walk is refused when it reaches one)."""
    from dal.effects.classify.programs import literal_names

    found = []
    for raw in tops:
        top = P.resolve_path(raw, policy.workspace)
        found += (os.path.basename(h) for h in policy.hidden
                  if h != top and P.within(h, [top]) and os.path.isdir(h) and not os.path.islink(h))  # fmt: skip
    return literal_names(found)


def _check_probes(raw: str, deep: bool, policy: Policy) -> None:
    """The program stats where each symlink in the folder `raw` (its whole tree when `deep`) points and
    shows something of it: deny a link that leads outside the read roots, whether or not its target exists
    (telling one from the other is what the script must not learn)."""
    top = P.resolve_path(raw, policy.workspace)
    if not os.path.isdir(top):
        return
    if deep:
        found = ((path, st) for path, _, st in _walk(top, policy))
    else:
        found = ((os.path.join(top, n), os.lstat(os.path.join(top, n))) for n in _entries(top, raw))
    for path, st in found:
        if stat.S_ISLNK(st.st_mode):
            target = os.path.realpath(path)
            if not P.within(target, policy.read_roots) and target != P.NULL_DEVICE:
                raise _Denied(f"{P.display(path, policy.workspace)} is a symlink that leads outside the allowed roots "
                              f"({os.readlink(path)}), and this command looks at what it points to (find -xtype, "
                              "-readable, -printf %Y; ls -l with -F or --color); leave those out or name other folders")


def _check_entries(raw: str, policy: Policy) -> list[str]:
    """A directory each of whose entries the program opens, following symlinks: check each as a read."""
    try:
        names = _entries(P.resolve_path(raw, policy.workspace), raw)
    except OSError:
        return []
    return [_check_path(os.path.join(raw, name), "read", policy) for name in names]


def _entries(top: str, raw: str) -> list[str]:
    """The names in the folder `top`, counted against the command's _TREE_LIMIT."""
    names = sorted(os.listdir(top))
    _spent.n += len(names)
    if _spent.n > _TREE_LIMIT:
        raise _Denied(f"{raw}: more than {_TREE_LIMIT} entries to check in one command")
    return names


def _check_removal(resolved: str, policy: Policy) -> None:
    """Removing or renaming a directory removes everything below it: deny if that holds a protected path."""
    try:
        if not stat.S_ISDIR(os.lstat(resolved).st_mode):
            return
    except OSError:
        return
    for path, _, _st in _walk(resolved, policy):
        why = policy.protection(path)
        if why:
            raise _Denied(f"would remove or move {P.display(resolved, policy.workspace)}, which holds a protected "
                          f"path: {why}")


def _check_link(link: str, text: str, policy: Policy) -> None:
    """A symlink the command makes at the absolute path `link`, holding `text`: it must point inside the
    read roots from where it will be (a relative link copied or moved elsewhere points somewhere else)."""
    where = P.resolve_path(text, os.path.dirname(link))
    shown = P.display(link, policy.workspace)
    if P.special_denial(text, where) or (where != P.NULL_DEVICE and not P.within(where, policy.read_roots)):
        raise _Denied(f"would make a symlink that points outside the allowed roots: {shown} -> {text} "
                      f"(resolves to {where})")


def _check_place(src_raw: str, dest_raw: str, how: str, policy: Policy, placed: list[str]) -> None:
    """`src` (a symlink itself, or a whole tree) is copied or renamed to `dest`: every name it will have
    there must not be protected, every symlink in it must still point inside the roots from its new place,
    and a copy reads every file in it, so none may have other hard links. Every name it will have is added
    to `placed`: a copy into a folder that exists merges (`cp -r tpl/. x`, `cp -rT tpl .`), so the lookalike
    check (_check_git_dirs) must count them together with what is there and what the run's other writes add."""
    ws = policy.workspace
    src = P.resolve_path(src_raw, ws, follow_final=how == "copy-deref")
    dest = P.resolve_path(dest_raw, ws, follow_final=how != "move")
    try:
        st = os.lstat(src)
    except OSError:
        return
    if stat.S_ISLNK(st.st_mode):
        _check_link(dest, os.readlink(src), policy)
        return
    if not stat.S_ISDIR(st.st_mode):
        return
    _deny_git_dir_copy(src, dest, policy)
    for path, rel, st in _walk(src, policy):
        there = os.path.join(dest, rel)
        placed.append(there)
        _check_protection(there, policy)
        if stat.S_ISDIR(st.st_mode):
            _deny_git_dir_copy(path, there, policy)
        if stat.S_ISLNK(st.st_mode):
            _check_link(there, os.readlink(path), policy)
        elif how != "move" and stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
            _deny_linked(P.display(path, ws), st)
        if how != "move" and (secret := policy.secrecy(path)) is not None:  # a copy reads every file of the tree
            raise _Denied(f"reads a protected path: {secret}, which scripts never read (copied with "
                          f"{P.display(src, ws)})")


def _looks_like_git_dir(d: str, adding: Iterable[str] = ()) -> bool:
    """Whether git would take the folder `d` for a git directory (setup.c's is_git_directory, leaning to
    yes: any HEAD counts) once the names in `adding` exist in it too."""
    names = set(adding)
    for mark in GIT_DIR_MARKS - names:
        if os.path.lexists(os.path.join(d, mark)):
            names.add(mark)
    return "HEAD" in names and ({"objects", "refs"} <= names or "commondir" in names)


def _deny_git_dir_copy(src: str, dest: str, policy: Policy) -> None:
    if _looks_like_git_dir(src) and P.within(dest, policy.write_roots):
        raise _Denied(f"would copy or move the git directory {P.display(src, policy.workspace)} to "
                      f"{P.display(dest, policy.workspace)}: git run there would use its configuration and hooks")


def _deny_git_dir_union(d: str, names: set[str], policy: Policy) -> None:
    git_names = names & GIT_PROTECTED
    if git_names and P.within(d, policy.write_roots) and _looks_like_git_dir(d, names):
        shown = P.display(d, policy.workspace)
        raise _Denied(f"writes {', '.join(sorted(git_names))} in {shown}, which then passes for a git repository "
                      f"(HEAD, objects/, refs/): git run there would read its config and run its hooks")


def _check_git_dirs(writes: Iterable[str], policy: Policy) -> None:
    """Deny writes that make a folder pass for a git directory, or that change one's entries (GIT_PROTECTED).

    Git takes any folder holding HEAD, objects/ and refs/ (or HEAD and commondir) for a repository, a bare
    one, and a person's git run in it or below it reads its config (core.fsmonitor, core.pager). A `.git`
    folder is protected by name; this is every other folder. `writes` are the resolved paths one command
    (or one run()) writes: what they create is counted together with what is on disk, so that
    `mkdir -p x/objects x/refs && echo ref: refs/heads/main > x/HEAD` is denied as a whole, and every folder
    a write would create on the way counts too (`mkdir -p x/refs/heads` makes x/refs)."""
    touched: dict[str, set[str]] = {}
    for w in writes:
        if w == P.NULL_DEVICE:
            continue
        path, parent = w, os.path.dirname(w)
        while parent != path and P.within(parent, policy.write_roots):
            touched.setdefault(parent, set()).add(os.path.basename(path))
            path, parent = parent, os.path.dirname(parent)
    for d, names in touched.items():
        _deny_git_dir_union(d, names, policy)


def _write_counts(target: str, ws: str) -> bool:
    return P.resolve_path(target, ws) != P.NULL_DEVICE


# Programs whose output operands are only opened for writing: never removed, renamed over, linked or given
# another mode, owner or time. Only these may be given /dev/null as an output. `mv x /dev/null`, `cp
# --remove-destination x /dev/null`, `install`, `touch`, `mkdir` would act on the system's /dev/null itself
# (without the wall, as root, it is the host's: the property test of tests/effects deleted it once).
_NULL_OUTPUT_PROGRAMS = {"tee", "sort", "uniq"}


def _leave_out(use: ArgUse | None, policy: Policy) -> tuple[str, ...]:
    """The folder names DAL has the program leave out of its walks: a run store's `.dal`, and the
    folders that record runs elsewhere below the walked trees."""
    if use is None or not use.leave_out_option or not use.read_trees:
        return ()
    return tuple(dict.fromkeys([*use.leave_out, *_hidden_folders(use.read_trees, policy)]))


def _argv_to_run(cmd: SimpleCommand, use: ArgUse | None, policy: Policy) -> tuple[str, ...]:
    """What the executor runs for `cmd`: the argv its model rebuilt (full option names, values attached,
    `--` before the operands), with the folders DAL leaves out named; the script's words when the
    program has no rebuilt form (echo, test, find, and programs beyond the default toolset)."""
    if use is None or use.argv is None:
        return cmd.argv
    names = _leave_out(use, policy)
    if not names:
        return use.argv
    end = use.argv.index("--")
    extra = tuple(f"{use.leave_out_option}={n}" for n in names)
    return (*use.argv[:end], *extra, *use.argv[end:])


def _check_paths(cmd: SimpleCommand, use: ArgUse | None, policy: Policy,
                 placed: list[str]) -> tuple[list[str], list[str]]:
    """Resolve and check every path `cmd` reads and writes; (reads, writes) as resolved paths. The names a
    tree copy or move creates are added to `placed` (too many to list as writes; counted as lookalikes)."""
    reads: list[str] = []
    writes: list[str] = []
    if use is not None:
        reads += (_check_path(raw, "read", policy) for raw in use.reads)
        skips = (*use.tree_skips, *_leave_out(use, policy))
        for raw in use.read_trees:
            _check_read_tree(raw, policy, skips)
        for raw, deep in use.probes_links:
            _check_probes(raw, deep, policy)
        for raw in use.read_entries:
            _check_entries(raw, policy)
        for raw in use.writes:
            resolved = _check_path(raw, "write", policy)
            if resolved == P.NULL_DEVICE and os.path.basename(cmd.argv[0]) not in _NULL_OUTPUT_PROGRAMS:
                raise _Denied(f"{raw}: {os.path.basename(cmd.argv[0])} may replace, move or change /dev/null itself "
                              "(only a redirection, tee, sort -o and uniq write into it)")
            writes.append(resolved)
            if use.writes_into_trees and os.path.isdir(resolved):
                _check_tree(resolved, policy)
        writes += (_check_path(raw, "write_nofollow", policy) for raw in use.writes_nofollow)
        for src, dest, how in use.places:
            _check_place(src, dest, how, policy, placed)
        for link, text in use.links:
            _check_link(P.resolve_path(link, policy.workspace, follow_final=False), text, policy)
        if use.git is not None:
            _check_git(use.git, policy)
    for r in cmd.redirects:
        if r.target is not None:
            (reads if r.op == "<" else writes).append(_check_path(r.target, "read" if r.op == "<" else "write", policy))
    return reads, writes


def _check_repository(git_dir: str, policy: Policy, doing: str) -> None:
    """Deny if a script could write what makes git run programs in the repository at `git_dir`: its config
    (core.fsmonitor, aliases, filters...), hooks, info/attributes, or those of its main repository. Inside a
    `.git` folder they are protected; a bare repository, or a git directory elsewhere, has no such names."""
    from dal.effects.git import repo as gitrepo

    dirs = [git_dir]
    common = gitrepo.common_dir(git_dir)
    if common is not None:
        dirs.append(common)
    for d in dirs:
        for part in ("config", "config.worktree", "hooks", "info", "commondir"):
            where = P.resolve_path(os.path.join(d, part), policy.workspace)
            if P.within(where, policy.write_roots) and policy.protection(where) is None:
                raise _Denied(f"git would {doing} the repository at {P.display(git_dir, policy.workspace)}, whose "
                              f"{part} a script may write (only a .git folder's config and hooks are protected)")


def _check_git(g: GitUse, policy: Policy) -> None:
    """The repository a git command uses, the remotes it reaches and the patches it applies."""
    from dal.effects.git import repo as gitrepo

    ws = policy.workspace
    found = gitrepo.find_git_dir(ws)
    top = git_dir = None
    if found is not None:
        top, git_dir = found
        _check_repository(git_dir, policy, "use")
        common = gitrepo.common_dir(git_dir) or git_dir
        if g.writes_repo and not P.within(common, policy.write_roots):
            raise _Denied(f"git {g.subcommand} writes the repository at {common}, outside the allowed roots")
        if g.writes_worktree and not P.within(top, policy.write_roots):
            raise _Denied(f"git {g.subcommand} rewrites files of the work tree at {top}, outside the allowed roots")
    entries = gitrepo.configured(git_dir)  # no global configuration: the program's HOME is its own, empty
    for key, value in entries:
        if key == "core.hookspath" and not value.startswith("~/"):
            hooks = P.resolve_path(value, top or ws)
            if P.within(hooks, policy.write_roots) and policy.protection(hooks) is None:
                raise _Denied(f"git runs hooks from {P.display(hooks, ws)} (core.hooksPath), which a script may write")
    if git_dir is not None:
        # objects/info/alternates: every object of the folders it names reads as the repository's own
        for alt in gitrepo.alternates(os.path.join(gitrepo.common_dir(git_dir) or git_dir, "objects")):
            if not P.within(alt, policy.read_roots):
                raise _Denied(f"git reads objects from {alt} (objects/info/alternates), outside the allowed roots")
    legacy = gitrepo.legacy_remotes(git_dir)
    names = list(g.remotes)
    if g.all_remotes:
        names += sorted(gitrepo.configured_remotes(entries) | set(legacy))
    for name in names:
        for url in gitrepo.remote_urls(name, entries, legacy):
            kind, detail = gitrepo.url_kind(url)
            if kind == "helper":
                raise _Denied(f"git {g.subcommand}: the remote {url} runs the program git-remote-{detail}")
            if kind == "ssh":
                try:
                    _program("ssh", policy)
                except _Denied:
                    raise _Denied(f"git {g.subcommand}: the remote {url} is reached through ssh, which the policy "
                                  "does not allow (add it with --allow-run=ssh)") from None
            elif kind == "local":
                where = _check_path(detail, "read", policy)
                _check_local_remote(g, url, where, policy)
                repo = gitrepo.repository_at(where) if os.path.isdir(where) else None
                if repo is not None:
                    _check_repository(repo, policy, "run the hooks of")
    for raw in g.staged:
        _check_staged(raw, top, policy)
    for raw in g.adds:
        _check_adding(raw, g.adds_ignored, top, policy)
    if g.initialises is not None:
        dot_git = os.path.join(P.resolve_path(g.initialises, ws), ".git")
        if os.path.lexists(dot_git):  # a re-init rewrites the existing repository's config and hooks
            raise _Denied(f"git init: {P.display(dot_git, ws)} exists, and re-initialising a repository rewrites its "
                          "config and copies templates into its hooks (only a new repository may be made)")
        _deny_init_in_git_dir(os.path.dirname(dot_git), policy)
    patched: list[str] = []
    for patch, prefix, strip in g.patches:
        named = gitrepo.patch_paths(P.resolve_path(patch, ws), mail=g.subcommand == "am")
        if named is None:
            raise _Denied(f"git {g.subcommand}: cannot read the patch {patch} to see which files it writes")
        for path in named:
            parts = [x for x in path.split("/") if x]
            # the path git writes (-p strip) first, so that a denial names it; then every other strip
            for k in sorted(range(len(parts)), key=lambda k: k != strip):
                target = os.path.join(prefix, *parts[k:])
                if k == strip:
                    patched.append(_check_path(target, "write", policy))
                    if g.rejects:  # git unlinks an existing PATH.rej and makes a new one
                        _check_path(target + ".rej", "write_nofollow", policy)
                else:
                    _check_protection(P.resolve_path(target, ws, follow_final=False), policy)
    _check_git_dirs(patched, policy)  # a patch adding x/HEAD, x/objects/..., x/refs/... makes x a lookalike


def _check_local_remote(g: GitUse, url: str, where: str, policy: Policy) -> None:
    """A read root is for reading: `git push` into a repository there writes and deletes its refs, and `git
    clone` from a path there hard-links its objects into the workspace, where a write through a link
    changes the original. Both need the repository in a write root (or, for clone, --no-hardlinks or a
    file:// URL, which copy)."""
    if P.within(where, policy.write_roots):
        return
    shown = P.display(where, policy.workspace)
    sub = g.subcommand
    if sub == "push":
        raise _Denied(f"git push writes and deletes refs in the repository at {shown}, which is not in a write root "
                      "(a read root is for reading: add it with --allow-write to push there)")
    if sub == "clone" and g.hardlinks and not url.lower().startswith("file://"):
        raise _Denied(f"git clone from {shown} hard-links its objects into the workspace, where a write through a "
                      "link would change them there: clone with --no-hardlinks or from a file:// URL")


def _deny_init_in_git_dir(target: str, policy: Policy) -> None:
    """`git init DIR` where DIR, or a folder it is in, passes for a git directory (a tracked bare-repository
    fixture): the new DIR/.git would be the repository every git run there takes in place of the fixture,
    and, `.git` being protected, no script could remove it again. Denied, as a change to what git reads
    there (the guard's and the wall's live entries) is undone."""
    at = target
    while P.within(at, policy.write_roots):
        if _looks_like_git_dir(at):
            ws = policy.workspace
            where = "passes" if at == target else f"is inside {P.display(at, ws)}, which passes"
            raise _Denied(f"git init: {P.display(target, ws)} {where} for a git directory (HEAD, objects/, refs/): "
                          "the repository made there would be the one git takes in it, in place of that one")
        up = os.path.dirname(at)
        if up == at:
            break
        at = up


def _check_staged(raw: str, top: str | None, policy: Policy) -> None:
    """`git add PATH` / `git commit PATH`: the index, then a commit, would hold PATH, and the operator's own
    `git checkout` or `git reset --hard` would write it later, outside any wall. Deny a protected path, a
    `.git` component in any spelling, and a folder that passes for a git directory (or a path inside one)."""
    from dal.effects.git import index as gitindex

    if raw.startswith(":") or any(c in raw for c in "*?["):
        return  # a pattern: what it matched is checked in the index after the command (gitguard.py)
    ws = policy.workspace
    path = P.resolve_path(raw, ws, follow_final=False)
    shown = P.display(path, ws)
    why = policy.protection(path)
    base = top or ws
    rel = os.path.relpath(path, base) if P.within(path, [base]) else ""
    if why is None and rel and rel != "." and gitindex.bad_component(rel):
        why = f"{shown} has a component git takes for .git"
    if why is not None:
        raise _Denied(f"git would record {shown} in the index, and a later checkout would write it: {why}")
    d = path if os.path.isdir(path) else os.path.dirname(path)
    while P.within(d, [base]):
        if _looks_like_git_dir(d):
            raise _Denied(f"git would record {shown} in the index, inside {P.display(d, ws)}, which passes for a git "
                          "repository (HEAD, objects/, refs/): a later checkout would make it one for a person's git")
        if d == base:
            break
        d = os.path.dirname(d)


def _check_adding(raw: str, force: bool, top: str | None, policy: Policy) -> None:
    """`git add PATHSPEC` reads every untracked file below PATHSPEC into the repository's objects, where
    `git cat-file --batch-all-objects` or `git show` reads it back: deny one that would reach a
    file scripts never read (policy.secrecy). A `.dal` folder holding DAL's `.gitignore` (`*`) is not read
    by git, unless --force; with --force a folder or a pattern is walked, and each file below it checked."""
    from dal.core.gitignored import is_ignored_folder

    base = top or policy.workspace
    pattern = raw.startswith(":") or any(c in raw for c in "*?[")
    path = base if pattern else P.resolve_path(raw, policy.workspace, follow_final=False)
    shown = "the whole tree" if pattern else P.display(path, policy.workspace)
    raw = "-A" if raw == ":/" else raw  # no pathspec: the whole tree
    if not os.path.isdir(path):
        return  # a file: checked as a path staged (_check_staged) and read
    if force:
        if pattern:
            raise _Denied(f"git add --force {raw}: a pattern with --force adds ignored files too, the run store's "
                          "(.dal/) among them; name the files")
        for below, _, st in _walk(path, policy, (".git",)):
            secret = policy.secrecy(below) if not stat.S_ISDIR(st.st_mode) else None
            if secret:
                raise _Denied(f"git add --force {raw}: would read {P.display(below, policy.workspace)} into the "
                              f"repository's objects, where a later command reads it back: {secret}; name the files")
        return
    # What could hold such a file below `path`: the store and receipts (policy.hidden) and every `.dal`
    # folder among them, and the `.dal` folders of `path` and of the workspace (a nested one elsewhere that
    # DAL never opened since it writes `.gitignore` files is caught after the command: gitguard removes
    # the objects git wrote from it).
    places = [*policy.hidden, os.path.join(path, ".dal"), os.path.join(policy.workspace, ".dal")]
    for place in places:
        if not P.within(place, [path]) or not os.path.lexists(place):
            continue
        folder = _dal_folder(place)
        if folder is not None and is_ignored_folder(folder):
            continue
        why = policy.secrecy(os.path.realpath(place)) or f"{place} is a run store folder"
        raise _Denied(f"git add {raw}: would read {P.display(place, policy.workspace)} into the repository's objects "
                      f"({shown} holds it, and git does not ignore it), where a later command reads it back: {why}; "
                      "name the files to add")


def _dal_folder(path: str) -> str | None:
    """The `.dal` folder `path` is, or is in; None when it is in none."""
    parts = path.split("/")
    if ".dal" not in parts:
        return None
    return "/".join(parts[: parts.index(".dal") + 1])  # the outermost: its `*` hides all below it


def recheck(cmd: SimpleCommand, policy: Policy) -> str | None:
    """Check one simple command's paths again just before it starts; the reason if it is now denied.

    An earlier command of the same list may have changed the tree (`mv sub/up top && touch top/x` moves
    a relative symlink so that it points out), so the paths are resolved again against the tree as it
    is now.
    """
    ws = policy.workspace
    _spent.reset()
    try:
        use = analyze_argv(cmd.argv, lambda p: os.path.isdir(os.path.join(ws, p)))
        if use is not None and use.unsafe:
            return use.unsafe
        placed: list[str] = []
        _, writes = _check_paths(cmd, use, policy, placed)
        _check_git_dirs([*writes, *placed], policy)
    except _Denied as e:
        return str(e)
    return None


def check_redirect_target(raw: str, write: bool, policy: Policy) -> str | None:
    """Resolve a redirection target again at open time; None if it is no longer allowed."""
    try:
        return _check_path_once(raw, "write" if write else "read", policy)  # the tree as it is now, no cache
    except _Denied:
        return None


def _prefix_rule(argv: tuple[str, ...], policy: Policy) -> PrefixRule | None:
    """The most severe of the policy's prefix rules that match `argv` (deny, then approve, then allow)."""
    found = [r for r in policy.prefix_rules if r.matches(argv)]
    return max(found, key=lambda r: DECISIONS.index(r.decision), default=None)


def _program(name: str, policy: Policy, by_rule: bool = False) -> str:
    if "/" in name:
        raise _Denied(f"path-qualified program {name!r}: use a bare name, resolved on {TRUSTED_PATH}")
    if name in policy.denied:
        raise _Denied(f"{name} is denied by {policy.source}")
    if name not in policy.allowed and not by_rule:
        if name in INTERPRETERS:
            raise _Denied(f"{name} runs other programs or code; allow it by name in the policy if you must")
        if name in _BUILTINS:
            raise _Denied(f"{name} is a shell builtin; DAL runs no shell")
        if name == "dal":
            # Not something to allow: a script running dal could approve, deny or resolve its own effects.
            raise _Denied("a script does not run dal itself (it could decide its own approvals): run the other "
                          "script as its own job (`dal submit`) or its own `dal run`, from outside")
        raise _Denied(f"{name} is not an allowed program (add it with --allow-run={name} or [run] allow)")
    exe = find_program(name)
    if exe is None:
        raise _Denied(f"{name} not found on the trusted PATH {TRUSTED_PATH}")
    return exe


def _stage_effects(use: ArgUse | None) -> tuple[bool, bool]:
    """(whether the command may make links or move names, whether it writes paths its arguments name) --
    redirections aside: DAL opens those itself, following no symlink it has not checked and refusing a
    file with other links (safeopen.py)."""
    if use is None:
        # A program without a model may write anything its arguments say. It could make a link too, but the
        # policy trusts it with its arguments anyway (it could write the file itself): the wall holds it.
        return False, True
    git = use.git
    changes = use.changes_names or (git is not None and git.writes_worktree)
    writes = bool(use.writes or use.writes_nofollow or use.places or use.links or changes
                  or (git is not None and git.writes_repo))  # fmt: skip
    return changes, writes


def _check_pipelines(plan: CommandList, stages: dict[int, tuple[bool, bool]]) -> None:
    """The stages of one pipeline run at the same time, and each was checked before any started: one that
    makes a link or moves a name (`cp -l app/dal.toml x`) would let another stage write through it
    (`sort -o x`) unchecked. So a pipeline may not hold a stage that changes names next to another stage
    that writes a path (docs/policy.md, "Pipelines")."""
    for pipeline in plan.items:
        cmds = pipeline.commands
        if len(cmds) < 2:
            continue
        for i, cmd in enumerate(cmds):
            if not stages[id(cmd)][0]:
                continue
            other = next((c for j, c in enumerate(cmds) if j != i and stages[id(c)][1]), None)
            if other is not None:
                raise _Denied(f"{cmd.argv[0]} makes links or moves names while {other.argv[0]} writes paths in the "
                              "same pipeline, which was checked before either started; run them as separate commands "
                              "(`&&` or `;`), so that each is checked against the tree the one before left")


def check_command(command: str, policy: Policy, *, plan: CommandList | None = None) -> Decision:
    """Decide whether `command` may run under `policy`. Never raises: a problem is a denial. `plan`: the
    plan to check in place of parsing `command` (check_argv's, with `command` only its display)."""
    try:
        return _check(command, policy, plan)
    except _Denied as e:
        return Decision(False, str(e))
    except ShellDenied as e:
        return Decision(False, f"shell syntax not allowed: {e}")
    except OSError as e:  # a path the check resolves cannot be looked at (no permission, too long, ...)
        return Decision(False, _unresolvable(e))
    except Exception as e:  # a bug must never turn into "allowed"
        return Decision(False, f"cannot analyse command: {type(e).__name__}: {e}")


def _unresolvable(e: OSError) -> str:
    what = os.fsdecode(e.filename) if e.filename is not None else "a path the command names"
    why = e.strerror or type(e).__name__
    return f"{what}: cannot be resolved ({why.lower()}), and a path the check cannot follow is denied"


def check_argv(words: Sequence[str], policy: Policy, *, stdin: str | None = None, write_to: str | None = None,
               append: bool = False) -> Decision:
    """Decide whether the program `words[0]` may run with the arguments `words[1:]`, one word each, as
    they are (no quoting, no globs, no expansion: `run(["cat", path])`). The words are the plan the
    executor runs and the checker analyses, never re-parsed from text; the command a receipt shows is
    their shell quoting (shlex.join). `stdin`: text the program reads as its input; `write_to`: the file
    its output replaces (or, with `append`, goes on), checked as a redirection is. Never raises: a problem
    is a denial."""
    if isinstance(words, str):
        return Decision(False, "a command as words is a list of strings, not one string")
    texts = all(isinstance(w, str) for w in words) and all(isinstance(t, str | None) for t in (stdin, write_to))
    shown = fed_command(tuple(words), stdin, write_to, append) if texts else repr(words)
    for what, text in (("the input", stdin), ("the file to write", write_to)):
        nul = "holds a NUL byte" + (": the input is text, not binary data" if what == "the input" else "")
        if text is not None and (why := _bad_text(text, nul, "strict")) is not None:
            return Decision(False, f"{what} {why}")
    for i, w in enumerate(words):
        if (why := _bad_text(w, "holds a NUL byte, which no program can receive", "surrogateescape")) is not None:
            return Decision(False, f"element {i} of the command {why}")  # numbered as the script's list
    if not words:
        return Decision(False, "an empty command: the list needs at least the program")
    if not words[0]:
        return Decision(False, "the program name is empty")
    redirects = (Redirect(1, ">>" if append else ">", write_to),) if write_to is not None else ()
    plan = CommandList((Pipeline((SimpleCommand(tuple(words), redirects),)),))
    decision = check_command(shown, policy, plan=plan)
    return attrs.evolve(decision, stdin=stdin) if stdin is not None and decision.allowed else decision


def _bad_text(text: object, nul: str, errors: str) -> str | None:
    """Why `text` cannot be an argument or a text DAL hands a program (`nul`: what to say of a NUL byte)."""
    if not isinstance(text, str):
        return "is not a string"
    if "\x00" in text:
        return nul
    try:
        text.encode("utf-8", errors=errors)
    except UnicodeEncodeError:
        return "is not valid Unicode text"
    return None


# Fixed bounds on one command, checked first (docs/policy.md, "Limits"): the length keeps the check's own time
# small, whatever the script builds; the arguments of one program stay under bubblewrap's 9000 for a stage.
MAX_COMMAND_BYTES = 256 * 1024
MAX_WORDS = 4096


def _check(command: str, policy: Policy, given: CommandList | None = None) -> Decision:
    if not isinstance(command, str):
        raise _Denied("command is not a string")
    _spent.reset()
    size = len(command.encode("utf-8", errors="surrogateescape"))  # for words, their shell quoting
    if size > MAX_COMMAND_BYTES:
        raise _Denied(f"the command is {size} bytes long; one run() takes at most {MAX_COMMAND_BYTES} (write long "
                      "content to a file with several commands, or pass a file)")
    plan = parse_command(command) if given is None else given
    for c in plan.simple_commands():
        if len(c.argv) > MAX_WORDS:
            raise _Denied(f"{c.argv[0]} has {len(c.argv)} arguments; a program in one run() takes at most {MAX_WORDS}")
    if len(plan.simple_commands()) > policy.limit("max_commands"):  # bounds the processes one run() starts
        raise _Denied(f"{len(plan.simple_commands())} simple commands in one run(); [limits] max_commands allows "
                      f"{policy.limit('max_commands')}")
    ws = policy.workspace
    reads: list[str] = []
    writes: list[str] = []
    resolved_writes: list[str] = []
    placed: list[str] = []
    programs: list[str] = []
    executables: dict[str, str] = {}
    klass = "read"
    idempotent = True
    approvals: list[str] = []

    def is_dir(p: str) -> bool:
        return os.path.isdir(os.path.join(ws, p))

    stages: dict[int, tuple[bool, bool]] = {}  # id(cmd) -> (changes names, writes through its arguments)
    ran: dict[int, SimpleCommand] = {}  # id(cmd) -> the command the executor runs (its argv rebuilt)
    unmodelled: list[str] = []  # allowed by name, without a model of their arguments
    ruled: list[str] = []  # the approvals prefix rules ask for, with their justifications
    for cmd in plan.simple_commands():
        name = cmd.argv[0]
        prefix = _prefix_rule(cmd.argv, policy)
        if prefix is not None and prefix.decision == "deny":
            raise _Denied(f"{' '.join(cmd.argv[:len(prefix.prefix)])} is denied by the rule `{prefix.shown()}` "
                          f"({policy.source}): {prefix.justification}")
        executables[name] = _program(name, policy, by_rule=prefix is not None and prefix.decision == "allow")
        if (why := tables.denial(cmd.argv, policy.allow_net)) is not None:
            raise _Denied(why)
        if name not in programs:
            programs.append(name)
        use = analyze_argv(cmd.argv, is_dir)
        rule = policy.rule(name)
        if use is None:
            # No model: the policy trusts this program with its arguments; the sandbox still walls it in.
            part_class = "external" if policy.allow_net else "local"
            part_idem = False
            if name not in unmodelled:
                unmodelled.append(name)
        else:
            if use.unsafe:
                raise _Denied(use.unsafe)
            part_class = model_class(name) or "local"
            part_idem = use.idempotent
            if use.git is not None and use.git.network:
                part_class = "external"
        part_reads, part_writes = _check_paths(cmd, use, policy, placed)
        ran[id(cmd)] = SimpleCommand(_argv_to_run(cmd, use, policy), cmd.redirects)
        resolved_writes += part_writes
        stages[id(cmd)] = _stage_effects(use)
        reads += (P.display(r, ws) for r in part_reads)
        writes += (P.display(w, ws) for w in part_writes if w != P.NULL_DEVICE)
        if any(w != P.NULL_DEVICE for w in part_writes) or any(
                r.target is not None and r.op != "<" and _write_counts(r.target, ws) for r in cmd.redirects):
            part_class = part_class if _SEVERITY[part_class] >= 1 else "local"  # sort -o F, uniq A B write too
        if any(r.op == ">>" for r in cmd.redirects):
            part_idem = False
        if rule is not None and rule.effect_class:
            part_class = rule.effect_class
        if rule is not None and rule.idempotent is not None:
            part_idem = rule.idempotent
        elif part_class == "external":
            part_idem = False
        if _SEVERITY[part_class] > _SEVERITY[klass]:
            klass = part_class
        idempotent = idempotent and part_idem
        if prefix is not None and prefix.decision == "approve":
            why = f"`{prefix.shown()}` requires approval ({policy.source}): {prefix.justification}"
            if why not in ruled:
                ruled.append(why)
        elif prefix is not None and prefix.decision == "allow":
            pass  # the rule's prefix runs without the approval its program needs
        elif name in policy.approval or (rule is not None and rule.approval):
            if name not in approvals:
                approvals.append(name)

    _check_git_dirs([*resolved_writes, *placed], policy)  # the whole run(): one stage may make objects/, another HEAD
    _check_pipelines(plan, stages)
    plan = CommandList(tuple(Pipeline(tuple(ran[id(c)] for c in p.commands)) for p in plan.items), plan.ops)
    common = dict(
        effect_class=klass, idempotent=idempotent, reads=tuple(dict.fromkeys(reads)),
        writes=tuple(dict.fromkeys(writes)), programs=tuple(programs), plan=plan,
        executables=tuple(executables.items()),
    )
    if approvals or ruled:
        named = [f"{', '.join(approvals)} requires approval ({policy.source})"] if approvals else []
        return Decision(True, "; ".join([*named, *ruled]), approval_required=True, **common)
    outside = any(p.startswith("/") and p != P.NULL_DEVICE for p in (*reads, *writes))
    where = "inside the allowed roots" if outside else "inside the workspace"
    what = {"read": "reads only", "local": "changes files", "external": "acts outside the machine"}[klass]
    if unmodelled:  # what it writes the check cannot see: "inside the workspace" would be a claim it never checked
        names, one = ", ".join(unmodelled), len(unmodelled) == 1
        its, it = ("its", "it") if one else ("their", "them")
        where = (f"where the check cannot tell: {names} {'has' if one else 'have'} no model of {its} arguments "
                 f"(only the wall keeps {it} inside the roots)")
    sep = ", " if unmodelled else " "
    return Decision(True, f"{', '.join(programs)} allowed by {policy.source}: {what}{sep}{where}", **common)
