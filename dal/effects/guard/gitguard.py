"""What the workspace's repository references, held across a pipeline (docs/policy.md, "What the undo cannot
take back").

A program allowed to run git -- or any program outside the default toolset -- can record in a commit, the
stash or the index a tree that the operator's own git writes into the work tree later: a folder passing for
a git directory (x/HEAD, x/objects, x/refs and an x/config naming core.fsmonitor), a `.git` component in any
spelling git takes for one, a protected name (a `dal.toml`, `.dal`, `[paths] protect`). The wall removes
such files from the work tree when the pipeline ends, but `git reset --hard`, `git checkout -- .`,
`git stash pop` and `git switch` put back what a commit or the index holds.

So before such a pipeline DAL reads what the repository references: HEAD and the other pseudo-refs
(ORIG_HEAD, FETCH_HEAD, ...), every ref, loose and packed, the reflogs (the stash's entries are there), and
the index, of the repository and of each of its linked worktrees. After the pipeline, when any of it changed,
it lists what is new -- the tree of every commit reachable from a ref value that is new and from none that
was there before, and the index -- and looks for those paths, counted together with what is on disk in
each folder. When one is found, everything read before is written back as it was (new files removed) and
the command fails, naming the path and the commit. Past its bounds (refs held, new commits, entries listed)
it fails closed: before the pipeline nothing starts, after it everything is put back.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import subprocess

from dal.effects.git import index as gitindex
from dal.effects.git import repo as gitrepo
from dal.effects.plan import paths as P
from dal.effects.policy import TRUSTED_PATH, Policy

__all__ = ["GitGuard", "GuardRefused"]

_MAX_FILES = 20_000  # refs, reflogs and pseudo-refs held
_MAX_BYTES = 256 << 20  # their bytes, the indexes' included
_MAX_COMMITS = 20_000  # new commits listed after a pipeline
_MAX_ENTRIES = 2_000_000  # paths listed from their trees, all together
_GIT_TIMEOUT = 60  # seconds for each git process the guard runs

_PSEUDO = re.compile(r"[A-Z][A-Z0-9_]*$")  # HEAD, ORIG_HEAD, FETCH_HEAD, MERGE_HEAD, AUTO_MERGE, ...
_OID = re.compile(rb"^\^?([0-9a-fA-F]{40}(?:[0-9a-fA-F]{24})?)$")  # git reads hex in either case
_MARKS = frozenset({"HEAD", "objects", "refs", "commondir"})
_LIVE = gitrepo.LIVE_NAMES  # in a folder passing for a git directory, a finding keyed by content
_LINK = b"\0symlink\0"  # how a symlink is held (git reads a symlinked ref through it)
_SPECIAL = b"\0special\0"  # a FIFO, device or socket: not git's, never read


class GuardRefused(Exception):
    """The repository's references cannot be held within the bounds; the pipeline does not start."""


class _Unlistable(Exception):
    """git could not list what is new (a missing object, too many commits): put everything back."""


def _git_dirs(policy: Policy) -> tuple[str, str, list[str]] | None:
    """(work tree top, common git folder, the git folders to hold: the repository's own, its common one,
    each linked worktree's), for the repository git discovers from the workspace; only folders inside the
    write roots are held (the others are read-only in the wall, and the check denies writing them)."""
    found = gitrepo.find_git_dir(policy.workspace)
    if found is None:
        return None
    top, git_dir = found
    common = gitrepo.common_dir(git_dir) or git_dir
    dirs = [git_dir, common]
    try:
        with os.scandir(os.path.join(common, "worktrees")) as it:
            dirs += [e.path for e in it if e.is_dir(follow_symlinks=False)]
    except OSError:
        pass
    dirs = [d for d in dict.fromkeys(os.path.realpath(d) for d in dirs) if P.within(d, policy.write_roots)]
    return (top, os.path.realpath(common), dirs) if dirs else None


def _read(path: str) -> bytes:
    """The file at `path` as held: its bytes; for a symlink its target and what git reads through it (git
    follows a symlinked loose ref that does not name another ref); a marker for anything else."""
    try:
        st = os.lstat(path)
    except OSError:
        return b""
    if stat.S_ISLNK(st.st_mode):
        target = os.readlink(path)
        return _LINK + os.fsencode(target) + b"\0" + _contents(os.path.join(os.path.dirname(path), target), True,
                                                                 1 << 20)
    if not stat.S_ISREG(st.st_mode):
        return _SPECIAL
    return _contents(path, False, _MAX_BYTES + 1)


def _contents(path: str, follow: bool, limit: int) -> bytes:
    """A regular file's bytes, _SPECIAL for anything else. Opened O_PATH first, which opens no device (a link
    to /dev/watchdog must not arm it), and read through /proc/self/fd only once fstat says it is a file."""
    try:
        pfd = os.open(path, os.O_PATH | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW))
    except OSError:
        return _SPECIAL
    try:
        if not stat.S_ISREG(os.fstat(pfd).st_mode):
            return _SPECIAL
        fd = os.open(f"/proc/self/fd/{pfd}", os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return _SPECIAL
    finally:
        os.close(pfd)
    try:
        chunks: list[bytes] = []
        left = limit
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _hold(dirs: list[str], bounded: bool = True) -> dict[str, bytes]:
    """Every file of `dirs` that says what the repository references, by absolute path (`bounded`: refuse
    past _MAX_FILES or _MAX_BYTES; else only the names past them, to remove what a pipeline added)."""
    held: dict[str, bytes] = {}
    total = 0

    def take(path: str) -> None:
        nonlocal total
        if not bounded and total > _MAX_BYTES:
            held[path] = _SPECIAL
            return
        data = _read(path)
        held[path] = data
        total += len(data)
        if bounded and (len(held) > _MAX_FILES or total > _MAX_BYTES):
            raise GuardRefused(f"the repository holds more than {_MAX_FILES} refs and reflogs (or {_MAX_BYTES >> 20} "
                               "MiB of them and its index), too many to hold against what a program records in it")

    for d in dirs:
        try:
            with os.scandir(d) as it:
                top = [e for e in it]
        except OSError:
            continue
        for e in top:
            if e.name in ("index", "packed-refs", "shallow") or _PSEUDO.match(e.name):
                if not e.is_dir(follow_symlinks=False):
                    take(e.path)
            elif e.name in ("refs", "logs", "reftable") and e.is_dir(follow_symlinks=False):
                stack = [e.path]
                while stack:
                    folder = stack.pop()
                    try:
                        with os.scandir(folder) as sub:
                            for s in sub:
                                if s.is_dir(follow_symlinks=False):
                                    stack.append(s.path)
                                else:
                                    take(s.path)
                    except OSError:
                        continue
            elif e.name in ("refs", "logs", "reftable"):
                take(e.path)  # refs/ replaced by a symlink or a file: held as such
    return held


def _odd(data: bytes) -> bool:
    """A held file git does not write: a FIFO, device or socket, or a symlink. (What a symlinked ref leads to
    can change by a write in the work tree, where no check of the repository follows: one a pipeline made
    fails closed; one that was there before is the operator's.)"""
    return data == _SPECIAL or data.startswith(_LINK)


def _through(link: bytes) -> bytes:
    """What git reads through a held symlink: the part after its target."""
    return link[len(_LINK) :].partition(b"\0")[2]


def _oids(path: str, data: bytes) -> set[str]:
    """The object names a ref file, packed-refs, a reflog or FETCH_HEAD records (not a reflog's message:
    a name written there need not exist yet)."""
    if data.startswith(_LINK):
        data = _through(data)
    if data.startswith(_SPECIAL) or os.path.basename(path) in ("index", "shallow"):
        return set()
    out: set[str] = set()
    is_log = "/logs/" in path
    for line in data.splitlines():
        tokens = line.split(None, 2 if is_log else 1)[: 2 if is_log else 1]
        for tok in tokens:
            m = _OID.match(tok)
            if m:
                out.add(m.group(1).decode().lower())
    return out


def _refs(held: dict[str, bytes], dirs: list[str], under: str = "refs/") -> dict[tuple[str, str], bytes]:
    """Every ref under `under` in the held files of `dirs` (loose, or in packed-refs), by name, with the
    value it holds (an object name, or a `ref: ...` line for a symbolic one)."""
    out: dict[tuple[str, str], bytes] = {}
    for d in dirs:
        for line in held.get(os.path.join(d, "packed-refs"), b"").splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[1].startswith(under.encode()):
                out[(d, parts[1].decode("utf-8", errors="surrogateescape"))] = parts[0]
        loose = os.path.join(d, *under.rstrip("/").split("/"))
        for path, data in held.items():
            if path.startswith(loose + "/"):
                out[(d, os.path.relpath(path, d))] = data.strip()  # a loose ref wins over its packed line
    return out


def _replace_refs(held: dict[str, bytes], dirs: list[str]) -> dict[tuple[str, str], bytes]:
    """Every ref under refs/replace/: the objects every git but the guard's own reads in place of others
    (GIT_NO_REPLACE_OBJECTS aside)."""
    return _refs(held, dirs, "refs/replace/")


def _resolve(held: dict[str, bytes], git_dir: str, common: str, name: str = "HEAD") -> str | None:
    """The commit `name` named in the held files (symbolic refs followed, packed refs read), or None."""
    for _ in range(6):
        data = held.get(os.path.join(git_dir if _PSEUDO.match(name) else common, name))
        if data is None and name != "HEAD":
            data = held.get(os.path.join(git_dir, name))
        if data is None:
            for line in held.get(os.path.join(common, "packed-refs"), b"").splitlines():
                parts = line.split()
                if len(parts) == 2 and parts[1].decode(errors="replace") == name:
                    data = parts[0]
                    break
        if data is None:
            return None
        text = data.decode(errors="replace").strip()
        if text.startswith("ref: "):
            name = text[5:].strip()
            continue
        return text if _OID.match(text.encode()) else None
    return None


class GitGuard:
    """Hold the repository's references before a pipeline (`GitGuard.start`), check them after (`finish`)."""

    def __init__(self, policy: Policy, held_paths: frozenset[str], git: str | None) -> None:
        self.policy = policy
        self.held_paths = held_paths  # protected files the wall keeps read-only (their content is the operator's)
        self.git = git
        found = _git_dirs(policy)
        self.top, self.common, self.dirs = found if found is not None else (None, None, [])
        try:
            self.before = _hold(self.dirs)
        except OSError as e:
            raise GuardRefused(f"cannot read the repository's refs: {e}") from None
        self.entries = 0
        self.lookalikes: list[tuple[str, str]] = []  # (work tree, folder) of the lookalikes found
        self.secrets: list[str] = []  # object names of blobs the index named for paths scripts never read

    @classmethod
    def start(cls, policy: Policy, walled: bool) -> GitGuard:
        """Hold what the repository references now; GuardRefused when it is more than the bounds allow."""
        held: frozenset[str] = frozenset()
        if walled:  # the protected files that exist are bound read-only: a `git add` of them stages their content
            held = frozenset(os.path.realpath(p) for p in policy.protected if os.path.isfile(p))
        return cls(policy, held, _find_git())

    # --- kept in .dal/held while the pipeline runs (held.py) ------------------------------------------

    def state(self) -> dict:
        """What finish() needs, for a record a later start can finish it from (the bytes as latin-1 text)."""
        return {"held_paths": sorted(self.held_paths), "git": self.git, "top": self.top, "common": self.common,
                "dirs": list(self.dirs), "before": {k: v.decode("latin-1") for k, v in self.before.items()}}

    @classmethod
    def from_state(cls, policy: Policy, state: dict) -> GitGuard:
        """The guard a killed DAL held, as its record (state()) keeps it, to finish() now."""
        guard = cls.__new__(cls)
        guard.policy = policy
        guard.held_paths = frozenset(state["held_paths"])
        guard.git = _find_git()  # the trusted PATH's, not a name from a file
        guard.top, guard.common, guard.dirs = state["top"], state["common"], list(state["dirs"])
        guard.before = {k: v.encode("latin-1") for k, v in state["before"].items()}
        guard.entries = 0
        guard.lookalikes = []
        guard.secrets = []
        return guard

    # --- after the pipeline -------------------------------------------------------------------------

    def finish(self) -> list[str]:
        """Check what the pipeline made the repository reference; when it holds a path a person's git must
        never write, put every held file back and return what was found and done (for the command's
        failure); [] when nothing is wrong."""
        found = _git_dirs(self.policy)
        if found is None and not self.dirs:
            return []
        top, common, dirs = found if found is not None else (self.top, self.common, self.dirs)
        dirs = list(dict.fromkeys([*self.dirs, *dirs]))
        self.common = common
        try:
            after = _hold(dirs)
        except (GuardRefused, OSError) as e:
            return self._put_back(dirs, [f"could not read what the repository references now: {e}"])
        changed = [p for p in dict.fromkeys([*self.before, *after]) if self.before.get(p) != after.get(p)]
        if not changed:
            return []
        assert top is not None
        try:
            bad = self._inspect(top, dirs, after, changed)
        except _Unlistable as e:
            bad = [str(e)]
        except (OSError, ValueError) as e:  # fail closed, also on what this reader did not foresee
            bad = [f"could not check what the repository now references: {e}"]
        if not bad:
            return []
        text = self._put_back(dirs, bad, after)
        return [text[0] + self._drop_secrets()] + text[1:]

    def _drop_secrets(self) -> str:
        """Remove the loose objects of self.secrets (the refs and the index that named them are put back, so
        nothing of the operator's names them); what was done, for the message."""
        gone, kept = 0, []
        objects = os.path.join(str(self.common), "objects")
        for oid in self._not_before(self.secrets):
            path = os.path.join(objects, oid[:2], oid[2:])
            try:
                os.unlink(path)
                gone += 1
            except FileNotFoundError:
                kept.append(oid[:12])  # packed (a file past core.bigFileThreshold): left, and said
            except OSError as e:
                kept.append(f"{oid[:12]} ({e.strerror or e})")
        text = f"; removed the {gone} object(s) git wrote from files scripts never read" if gone else ""
        if kept:
            text += (f"; could not remove the object(s) {', '.join(kept)} holding such a file's content (`git gc "
                     "--prune=now` removes them)")
        return text

    def _inspect(self, top: str, dirs: list[str], after: dict[str, bytes], changed: list[str]) -> list[str]:
        odd = [p for p in changed if "/reftable/" in p or _odd(after.get(p, b""))]
        if odd:  # a reftable this reader cannot read, a ref that is a symlink or a FIFO: fail closed
            return [f"{self._show(odd[0])} (a ref DAL cannot hold: a symbolic link, not a regular file, or a reftable)"]
        # A replace ref makes every git the operator runs show another object for the one it
        # names (a tracked dal.toml's blob), and `git checkout` write it; the guard's own git ignores them, so what
        # it checks is not what the operator would get. Any change to one fails closed (a pack-refs is none).
        old_r, new_r = _replace_refs(self.before, dirs), _replace_refs(after, dirs)
        bad = [f"{self._show(os.path.join(d, name))} (a replace ref: every git a person runs, checkout included, "
               "would show the object it names in place of the one it replaces)"
               for d, name in sorted(k for k in {*old_r, *new_r} if old_r.get(k) != new_r.get(k))]
        try:
            bad += self._found(top, dirs, after, changed)
        except _Unlistable as e:
            if not bad:
                raise
            bad.append(str(e))
        # Without the wall nothing else removes what git wrote into the work tree meanwhile: a lookalike's HEAD
        # goes, as the wall's walk would remove it (inside the wall it is gone already).
        for wtop, folder in self.lookalikes:
            _drop_head(wtop, folder)
        return bad

    def _found(self, top: str, dirs: list[str], after: dict[str, bytes], changed: list[str]) -> list[str]:
        old_tips = set().union(*(_oids(p, d) for p, d in self.before.items()))
        new_tips = set().union(*(_oids(p, after[p]) for p in changed if p in after)) - old_tips
        # A ref the command made or moved to an object the repository already had (one an operator's tag
        # names, say) is typed too: a ref to a blob (refs/notes/x) is never the script's to make.
        before = _refs(self.before, dirs)
        moved = {m.group(1).decode().lower() for k, v in _refs(after, dirs).items()
                 if before.get(k) != v and (m := _OID.match(v))} - new_tips
        if moved:
            self._types_of(moved)
        # Held against what the repository held before (_baseline), per git folder: (folder, its work tree)
        found: dict[tuple[str, str], dict[tuple, str]] = {}
        fresh: dict[tuple, str] = {}  # what new commits add to their first parents: the script's, all of it
        if new_tips:
            commits, trees = self._new_objects(new_tips, old_tips)
            for tree, name in trees:
                for key, text in self._findings(top, self._ls_tree(tree)).items():
                    found.setdefault((dirs[0], top), {}).setdefault(key, f"{text}, in the tree {name[:12]} a ref names")
            if commits:
                fresh = self._commit_findings(top, commits)
        for p in changed:
            if os.path.basename(p) != "index" or p not in after or not after[p]:
                continue
            d = os.path.dirname(p)
            where = (d, _work_tree(d, top))
            try:
                entries = gitindex.index_entries_with_modes(after[p])
            except gitindex.IndexUnreadable as e:
                found.setdefault(where, {})[("index", p)] = f"{self._show(p)} cannot be read ({e})"
                continue
            for key, text in self._findings(where[1], entries).items():
                found.setdefault(where, {}).setdefault(key, f"{text}, in {self._show(p)}")
        hits = [(top, key, text) for key, text in fresh.items() if not self._operators(top, key)]
        for (d, dtop), items in found.items():
            known = self._baseline(d, dtop)
            hits += [(dtop, key, text) for key, text in items.items() if key not in known and key not in fresh
                     and not self._operators(dtop, key)]
        self.lookalikes = list(dict.fromkeys((wtop, key[1]) for wtop, key, _ in hits
                                             if key[0] in ("lookalike", "gitdir")))
        # A blob git wrote from a file scripts never read (the run store) would stay in objects/
        # after the index is put back, for a later `git cat-file --batch-all-objects` to copy out.
        self.secrets = list(dict.fromkeys(key[2] for wtop, key, _ in hits if key[0] == "protected"
                                          and self.policy.secrecy(os.path.realpath(os.path.join(wtop, key[1])))))
        return [text for _, _, text in hits]

    def _baseline(self, d: str, top: str) -> set[tuple]:
        """What the git folder `d` already held before the pipeline (its old HEAD's tree and its old index):
        a tracked dal.toml, a test fixture that is a bare repository, are not the script's."""
        known: set[tuple] = set()
        head = _resolve(self.before, d, str(self.common))
        if head is not None:
            try:
                known |= set(self._findings(top, self._ls_tree(head + "^{tree}")))
            except _Unlistable:
                pass
        data = self.before.get(os.path.join(d, "index"))
        if data:
            try:
                known |= set(self._findings(top, gitindex.index_entries_with_modes(data)))
            except gitindex.IndexUnreadable:
                pass
        return known

    def _operators(self, top: str, key: tuple) -> bool:
        """A protected file the wall kept read-only, staged with the content it has on disk: the operator's."""
        if key[0] != "protected":
            return False
        path = os.path.realpath(os.path.join(top, key[1]))
        if path not in self.held_paths:
            return False
        oid = bytes.fromhex(key[2])
        try:
            with open(path, "rb") as f:
                return gitindex.blob_id(f.read(), len(oid)) == oid
        except OSError:
            return False

    def _findings(self, top: str, entries: list[tuple[str, bytes, int]] | list[tuple[str, str, int]]
                  ) -> dict[tuple, str]:
        """What of `entries` (a whole listing: path, object name, mode) a person's git must never write: a `.git`
        component, a protected path, a folder whose entries -- listed, and on disk -- pass for a git directory,
        and each entry of such a folder that git reads as configuration or code (_LIVE), with its content and
        mode (a hook made executable, a config made a symlink, keep their object name)."""
        out: dict[tuple, str] = {}
        children: dict[str, set[str]] = {}
        listed: list[tuple[str, str, int]] = []
        for path, oid, mode in entries:
            parts = path.split("/")
            for i, part in enumerate(parts):
                children.setdefault("/".join(parts[:i]), set()).add(part)
            listed.append((path, oid.hex() if isinstance(oid, bytes) else oid, mode))
            out.update(self._names(top, path, listed[-1][1]))
        folders: set[str] = set()
        for folder, names in children.items():
            found = _lookalike(top, folder, names)
            out.update(found)
            folders.update(folder for _ in found)
        if folders:
            for path, oid, mode in listed:
                out.update(_live_entries(path, oid, mode, folders))
        return out

    def _names(self, top: str, path: str, oid: str) -> dict[tuple, str]:
        if gitindex.bad_component(path):
            return {("git", path): f"{path} (a .git component: git would write into a repository's own folder)"}
        if self.policy.protection(os.path.join(top, path)):
            return {("protected", path, oid): f"{path} (protected)"}
        return {}

    def _commit_findings(self, top: str, commits: list[str]) -> dict[tuple, str]:
        """What each new commit adds to its first parent (a root commit: all it holds), one `git diff-tree`
        for them all: every finding of a new commit is added there, or is in its first parent, which is new
        (and listed too) or was already in the repository. A folder to which a commit adds HEAD, objects,
        refs or commondir -- or changes what git reads there as configuration or code (_LIVE) -- is listed
        whole in that commit, and counted with what is on disk; in one that passes, each such entry the
        commit adds or changes is a finding of its own (a tracked fixture's config rewritten, say)."""
        out: dict[tuple, str] = {}
        data = self._run(["diff-tree", "--stdin", "-r", "-t", "-z", "--root", "--diff-merges=first-parent",
                          "--no-renames"], ("\n".join(commits) + "\n").encode())
        tokens = data.split(b"\0")
        marks: dict[tuple[str, str], None] = {}
        changes: dict[str, list[tuple[str, str]]] = {}  # what each commit adds or changes: (path, object)
        commit = ""
        i = 0
        while i < len(tokens):
            tok = tokens[i]
            i += 1
            if not tok.startswith(b":"):
                commit = tok.decode(errors="replace").strip() or commit
                continue
            path = tokens[i].decode("utf-8", errors="surrogateescape") if i < len(tokens) else ""
            i += 1
            fields = tok[1:].split()
            if len(fields) < 5 or fields[4].startswith(b"D"):
                continue
            self.entries += 1
            if self.entries > _MAX_ENTRIES:
                raise _Unlistable(f"more than {_MAX_ENTRIES} paths in the new commits to check")
            for key, text in self._names(top, path, fields[3].decode()).items():
                out.setdefault(key, f"{text}, in commit {commit[:12]}")
            changes.setdefault(commit, []).append((path, fields[3].decode(), _mode(fields[1])))
            if os.path.basename(path) in _MARKS | _LIVE:  # -t lists every tree on the way as an entry too
                marks[(commit, os.path.dirname(path))] = None
        for commit, folder in marks:
            names = {os.path.basename(p) for p, _, _ in self._ls_tree(commit, folder)}
            found = _lookalike(top, folder, names)
            if not found:
                continue
            inside = [e for e in changes[commit] if not folder or e[0].startswith(folder + "/")]
            live = [(k, t) for p, oid, mode in inside for k, t in _live_entries(p, oid, mode, {folder}).items()]
            live.sort(key=lambda item: item[0][3].startswith("040000"))  # name a file before the folder holding it
            # the lookalike first when the commit gives the folder its HEAD; what it changes in one first when not
            made = any((p[len(folder) + 1 :] if folder else p) == "HEAD" for p, _, _ in inside)
            for key, text in [*found.items(), *live] if made else [*live, *found.items()]:
                out.setdefault(key, f"{text}, in commit {commit[:12]}")
        return out

    # --- git, run by DAL outside any wall on the repository's objects only ------------------------------

    def _run(self, args: list[str], stdin: bytes = b"") -> bytes:
        if self.git is None:
            raise _Unlistable("git is not installed, so what the repository now references cannot be listed")
        # The real objects, as they are stored: no replacements, no commit-graph or multi-pack index (files a
        # program could have written to show other parents or trees), and the shallow list from before the
        # pipeline (a new one could hide a new commit's parents).
        shallow = self.before.get(os.path.join(str(self.common), "shallow"))
        env = {"PATH": TRUSTED_PATH, "HOME": "/nonexistent", "GIT_CONFIG_NOSYSTEM": "1", "GIT_NO_REPLACE_OBJECTS": "1",
               "GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", "GIT_SHALLOW_FILE": os.devnull,
               "GIT_LITERAL_PATHSPECS": "1", "GIT_NO_LAZY_FETCH": "1"}
        # No transport at all: a partial clone's missing objects are not fetched (git 2.45+ also honours
        # GIT_NO_LAZY_FETCH); a missing object then fails the check, closed.
        argv = [self.git, "-c", "safe.directory=*", "-c", "core.fsmonitor=false", "-c", "core.commitGraph=false",
                "-c", "core.multiPackIndex=false", "-c", "protocol.allow=never", f"--git-dir={self.common}", *args]
        import tempfile

        try:
            with tempfile.NamedTemporaryFile(prefix="dal-shallow-") as f:
                if shallow:
                    f.write(shallow)
                    f.flush()
                    env["GIT_SHALLOW_FILE"] = f.name
                done = subprocess.run(argv, input=stdin, capture_output=True, env=env, timeout=_GIT_TIMEOUT, cwd="/")
        except (OSError, subprocess.TimeoutExpired) as e:
            raise _Unlistable(f"could not list what the repository now references: {e}") from None
        if done.returncode != 0:
            why = done.stderr.decode(errors="replace").strip().splitlines()
            raise _Unlistable(f"could not list what the repository now references: git {args[0]}: "
                              f"{why[0] if why else 'exit ' + str(done.returncode)}")
        return done.stdout

    def _types_of(self, names: set[str]) -> list[tuple[str, str, str]]:
        """(name, the object it peels to, that object's type) for each of `names`; _Unlistable for a missing
        one or one that peels to a blob (or a tag of one): nothing a person's git checks out, and nothing
        this check lists."""
        ordered = sorted(names)
        out = self._run(["cat-file", "--batch-check=%(objectname) %(objecttype)"],
                        "".join(f"{n}^{{}}\n" for n in ordered).encode())
        typed: list[tuple[str, str, str]] = []
        for name, line in zip(ordered, out.decode(errors="replace").splitlines(), strict=False):
            parts = line.split()
            if len(parts) != 2 or parts[1] == "missing":
                raise _Unlistable(f"a ref names {name}, which is not in the repository")
            if parts[1] not in ("commit", "tree"):
                raise _Unlistable(f"a ref names {name[:12]}, a {parts[1]}: DAL lets a command make refs to commits "
                                  "and trees only")
            typed.append((name, parts[0], parts[1]))
        return typed

    def _new_objects(self, new: set[str], old: set[str]) -> tuple[list[str], list[tuple[str, str]]]:
        """(every commit reachable from `new` and from none of `old`, (tree, name) of every new ref naming a
        tree); _Unlistable when a new name is missing or there are more than _MAX_COMMITS commits."""
        tips: list[str] = []
        trees: list[tuple[str, str]] = []
        for name, peeled, kind in self._types_of(new):
            if kind == "commit":
                tips.append(peeled)
            else:
                trees.append((peeled, name))
        if not tips:
            return [], trees
        lines = [*tips, *("^" + o for o in sorted(old))]
        out = self._run(["rev-list", "--ignore-missing", f"--max-count={_MAX_COMMITS + 1}", "--stdin"],
                        ("\n".join(lines) + "\n").encode())
        commits = out.decode(errors="replace").split()
        if len(commits) > _MAX_COMMITS:
            raise _Unlistable(f"more than {_MAX_COMMITS} new commits to check")
        return commits, trees

    def _ls_tree(self, tree: str, folder: str | None = None) -> list[tuple[str, str, int]]:
        """(path, object name, mode) of everything in `tree`, or only of the entries directly in its `folder`."""
        args = ["ls-tree", "-z", tree] if folder is None else ["ls-tree", "-z", tree, "--", folder + "/"]
        if folder is None:
            args[1:1] = ["-r", "-t", "--full-tree"]
        elif not folder:
            args = ["ls-tree", "-z", tree]
        out = self._run(args)
        entries: list[tuple[str, str, int]] = []
        for item in out.split(b"\0"):
            if not item:
                continue
            head, _, path = item.partition(b"\t")
            fields = head.split()
            oid = fields[2].decode() if len(fields) > 2 else ""
            entries.append((path.decode("utf-8", errors="surrogateescape"), oid, _mode(fields[0] if fields else b"")))
        self.entries += len(entries)
        if self.entries > _MAX_ENTRIES:
            raise _Unlistable(f"more than {_MAX_ENTRIES} paths in the new commits to check")
        return entries

    # --- putting back -----------------------------------------------------------------------------------

    def _put_back(self, dirs: list[str], bad: list[str], after: dict[str, bytes] | None = None) -> list[str]:
        """Write every held file back as it was before the pipeline and remove the ones it made; the
        messages for the command's failure."""
        if after is None:
            try:
                after = _hold(dirs, bounded=False)
            except OSError:
                after = {}
        undone: list[str] = []
        failed: list[str] = []
        for path in dict.fromkeys([*self.before, *after]):
            old = self.before.get(path)
            if old == after.get(path):
                continue
            if old is None and os.path.basename(path) == "HEAD" and after[path].startswith(b"ref: "):
                continue  # a repository made by the pipeline: HEAD names a branch, which goes (unborn again)
            try:
                _write_back(path, old, dirs)
                undone.append(self._show(path))
            except OSError as e:
                failed.append(f"{self._show(path)} ({e.strerror or e})")
        shown = ", ".join(undone[:8]) + (f" and {len(undone) - 8} more" if len(undone) > 8 else "")
        text = f"git: {bad[0]}" + (f" (and {len(bad) - 1} more)" if len(bad) > 1 else "")
        text += (f"; a person's `git reset --hard`, `git checkout`, `git stash pop` or `git switch` would write it, so "
                 f"the repository's refs, HEAD and index were put back as they were before the command ({shown})")
        if failed:
            text += f"; could not put back {', '.join(failed)}: check the repository before running git there"
        return [text]

    def _not_before(self, oids: list[str]) -> list[str]:
        """Those of `oids` nothing held before the pipeline names -- its indexes, and every object reachable
        from what its refs, reflogs and pseudo-refs named -- so that an empty file's blob, or a tracked file
        with the same bytes, stays; [] when that cannot be listed (nothing is removed then)."""
        left = set(oids)
        for path, data in self.before.items():
            if os.path.basename(path) == "index" and data and left:
                try:
                    left -= {oid.hex() for _, oid, _ in gitindex.index_entries_with_modes(data)}
                except gitindex.IndexUnreadable:
                    return []
        tips = sorted(set().union(*(_oids(p, d) for p, d in self.before.items())))
        if left and tips:
            try:
                out = self._run(["rev-list", "--objects", "--no-object-names", "--ignore-missing", "--stdin"],
                                stdin="".join(t + "\n" for t in tips).encode())
            except _Unlistable:
                return []
            left -= set(out.decode().split())
        return [o for o in oids if o in left]

    def _show(self, path: str) -> str:
        ws = self.policy.workspace
        return os.path.relpath(path, ws) if P.within(path, [ws]) else path


def _find_git() -> str | None:
    """The git program on the trusted PATH (the one the policy's `git` is), if installed."""
    for d in TRUSTED_PATH.split(":"):
        candidate = os.path.join(d, "git")
        if os.access(candidate, os.X_OK) and not os.path.isdir(candidate):
            return candidate
    return None


def _work_tree(d: str, top: str) -> str:
    """The work tree of the git folder `d`: a linked worktree's (its `gitdir` file names its `.git`), else `top`."""
    if os.path.basename(os.path.dirname(d)) != "worktrees":
        return top
    text = gitrepo.git_text(os.path.join(d, "gitdir"))
    return os.path.dirname(os.path.realpath(text)) if text else top


def _lookalike(top: str, folder: str, names: set[str]) -> dict[tuple, str]:
    """The finding for `folder` when its listed entries, with those on disk, pass for a git directory."""
    if not names & _MARKS:
        return {}
    every = names | _on_disk(top, folder)
    if "HEAD" not in every or not ({"objects", "refs"} <= every or "commondir" in every):
        return {}
    mark = "HEAD" if "HEAD" in names else sorted(names & _MARKS)[0]
    return {("lookalike", folder): f"{os.path.join(folder, mark)} ({folder or 'the top of the work tree'} would pass "
                                   "for a git directory: HEAD, objects/, refs/)"}


_live = gitrepo.is_live


def _mode(text: bytes) -> int:
    """A mode as git prints it (octal digits); 0 for anything else."""
    try:
        return int(text, 8)
    except ValueError:
        return 0


def _live_entries(path: str, oid: str, mode: int, folders: set[str]) -> dict[tuple, str]:
    """The findings for `path` (with its object name and mode) when it is a live entry of one of `folders`,
    each a folder that passes for a git directory."""
    out: dict[tuple, str] = {}
    parts = path.split("/")
    for i in range(len(parts)):
        folder = "/".join(parts[:i])
        if folder in folders and _live("/".join(parts[i:])):
            out[("gitdir", folder, path, f"{mode:06o} {oid}")] = (
                f"{path} ({folder or 'the top of the work tree'} passes for a git directory, and git run there would "
                "read this as its configuration or code)")
    return out


def _drop_head(top: str, folder: str) -> None:
    """Remove `folder`'s HEAD from the work tree `top` while the folder passes for a git directory on disk,
    opening each folder on the way without following a symlink."""
    try:
        fd = os.open(top, os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return
    try:
        for name in [c for c in folder.split("/") if c]:
            nxt = os.open(name, os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = nxt
        names = set(os.listdir(fd))
        if "HEAD" in names and ({"objects", "refs"} <= names or "commondir" in names):
            if not stat.S_ISDIR(os.stat("HEAD", dir_fd=fd, follow_symlinks=False).st_mode):
                os.unlink("HEAD", dir_fd=fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _on_disk(top: str, folder: str) -> set[str]:
    """The names in the work tree's `folder` (not through a symlink), for the lookalike count."""
    path = os.path.join(top, folder) if folder else top
    if os.path.realpath(path) != os.path.normpath(path):
        return set()
    try:
        return set(os.listdir(path))
    except OSError:
        return set()


def _write_back(path: str, data: bytes | None, roots: list[str]) -> None:
    """Put `data` at `path` (None: remove it), inside one of the git folders `roots`, never following a
    symlink on the way: the folders are opened one by one with O_NOFOLLOW from the git folder."""
    root = next(r for r in sorted(roots, key=len, reverse=True) if path.startswith(r + "/"))
    parts = path[len(root) + 1 :].split("/")
    fd = os.open(root, os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        for name in parts[:-1]:
            if data is not None:
                try:
                    os.mkdir(name, 0o755, dir_fd=fd)
                except FileExistsError:
                    pass
            try:
                nxt = os.open(name, os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            except FileNotFoundError:
                return  # removing something whose folder is gone already
            os.close(fd)
            fd = nxt
        name = parts[-1]
        try:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                import shutil

                shutil.rmtree(name, dir_fd=fd)
            else:
                os.unlink(name, dir_fd=fd)
        except FileNotFoundError:
            pass
        if data is None:
            return
        if data.startswith(_LINK):
            os.symlink(os.fsdecode(data[len(_LINK) :].partition(b"\0")[0]), name, dir_fd=fd)
            return
        if data == _SPECIAL:
            raise OSError(errno.EINVAL, "was not a regular file")
        tmp = name + ".dal-restore"
        wfd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=fd)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(wfd, view) :]
        finally:
            os.close(wfd)
        os.rename(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
    finally:
        os.close(fd)
