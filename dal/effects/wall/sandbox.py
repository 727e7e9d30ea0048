"""The second wall: bubblewrap around every program, where the OS lets us use it (docs/policy.md, "The wall").

Every program runs in a user namespace with no capabilities (and no way to make a user namespace of its
own to regain some), its own PID, IPC and UTS namespaces, no network unless the policy allows it, killed
with DAL. Its filesystem shows only what the policy lets it read: the system's program and library
folders, a few files of /etc, the workspace and every read root read-only, every write root writable,
the protected paths read-only again on top, its own /proc, an empty /dev, and a private, size-capped /tmp.
Everything else of the host is not there at all.
"""

from __future__ import annotations

import errno
import functools
import os
import select
import signal
import stat
import time
from collections.abc import Iterable

from dal.core import statedir
from dal.effects.policy import WORKSPACE_PROTECTED, Policy
from dal.effects.wall import bwrap, probed, seccomp
from dal.effects.wall.limits import CommandLimits
from dal.effects.wall.plan import WallPlan, scrubbed_env

__all__ = ["sandbox_status", "start_probe", "Wall", "WallRefused", "BWRAP", "plan_of"]

BWRAP = "/usr/bin/bwrap"
_PROBE_TIMEOUT = 10  # seconds
# Binds by descriptor (--bind-fd, bubblewrap 0.10, also in Debian 12's 0.8.0-2+deb12u1): what is mounted is the folder
# DAL opened and checked, and bubblewrap verifies it after mounting. Without it (older bubblewrap), binds
# by path, which a process of the script running meanwhile could swap (docs/policy.md).
_BIND_BY_FD = True

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# What programs read from /etc: the dynamic loader's cache, name service switch, time zone, the
# alternatives programs under /usr point through, git's system configuration. passwd and group are
# written by DAL (only the user DAL runs as, root and nobody), not the host's.
ETC_ALWAYS = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "ld.so.preload", "nsswitch.conf", "localtime",
              "alternatives", "gitconfig", "mime.types", "magic")
# With the network: name resolution and the CA certificates (never the private keys of /etc/ssl).
ETC_NET = ("resolv.conf", "hosts", "host.conf", "gai.conf", "services", "protocols", "ssl/certs",
           "ssl/openssl.cnf", "ca-certificates", "ca-certificates.conf", "pki/tls/certs", "pki/tls/openssl.cnf",
           "pki/ca-trust/extracted", "crypto-policies/back-ends")
# Kernel interfaces: never bound, whatever the roots say (the check denies them too).
_NEVER = ("/proc", "/sys", "/dev")
# Protected entries the wall holds with a read-only placeholder while they do not exist, so that a script
# cannot create them: the workspace's policy file (`dal.toml`, read by the next run) and its store. Each
# placeholder is an empty folder, which git (`git add -A`) and the policy loader (it reads a file) ignore,
# removed when the pipeline ends. Only for pipelines that run a program outside the default toolset: the
# check sees every file the default toolset writes (and denies these names), while an allowed interpreter,
# or git checking out a tree, may create any file; a placeholder shows in `ls`.
PLACEHOLDERS = ("dal.toml", ".dal")
# Entries of the workspace's `.git` folder (policy.WORKSPACE_PROTECTED) held the same way while they do not
# exist, so that no program in the wall creates what a person's git outside DAL would act on later: hook
# folders, info/attributes, submodule git directories, legacy remote files, object alternates. An empty
# folder there means nothing to git.
GIT_PLACEHOLDERS = (".git/hooks", ".git/info", ".git/modules", ".git/remotes", ".git/branches",
                    ".git/objects/info/alternates", ".git/objects/info/http-alternates")
_FILE_PLACEHOLDERS = frozenset({"alternates", "http-alternates"})  # an empty file: no alternates (a folder warns)
# Entries whose mere existence changes what git does, so that no placeholder can stand in for them
# (commondir moves the whole repository; rebase-merge/, rebase-apply/ and sequencer/ mean "an operation is
# in progress" to every git command, and hold the todo lists whose `exec` lines `git rebase --continue`
# runs; config.worktree is configuration): when one that did not exist when the pipeline started exists
# after it, with every process of the wall gone, it is removed, and the command fails saying so. A git
# operation that finishes within one command removes its own state first; one that stops half-way (a
# rebase with a conflict) loses it, as it could not go on in a later wall anyway.
GIT_SWEPT = ("commondir", "rebase-merge", "rebase-apply", "sequencer", "config.worktree")
# And anywhere in the write roots (the check denies all of these by name or by what is on disk; a program
# without a model, or git checking out a tree, can make them): a `.git` file or symlink that was not there
# before the pipeline (git makes a `.git` file only for `git worktree add`, pointing into .git/worktrees/,
# which is kept) is removed, and so is the HEAD of a folder that passes for a git directory now and did not
# before, so that a person's git run there later does not read its config. A new `.git` folder is kept: it
# is what `git init` and `git clone` make. The write roots are walked before and after such a pipeline, not
# following symlinks, up to _GIT_SCAN_LIMIT entries. Past that it fails closed (docs/policy.md): before the
# pipeline, the wall is refused (nothing starts); after it, what the partial walk found new is undone and the
# command fails, naming the roots it could not check.
_GIT_SCAN_LIMIT = 50_000
# A folder that passed for a git directory before the pipeline (a tracked bare-repository fixture) is the
# operator's only as it was: what git reads in it as configuration or code (gitrepo.LIVE_NAMES: config,
# hooks/, info/, commondir, HEAD, objects/info/, ...) is fingerprinted by lstat (inode, size, times: ctime
# cannot be set back) before, and when anything of it was added, changed or removed, its HEAD is removed
# after, as for a new one (more than _LIVE_LIMIT entries there: the wall is refused).
_LIVE_LIMIT = 10_000
# The same walk finds every policy file and store below the write roots (a subfolder's `dal.toml` is the
# policy a later `cd sub && dal run` reads, its `.dal` that run's store and journal): those that exist are
# bound read-only (and stores hidden), at most _NESTED_LIMIT of them; after the pipeline a new one is removed
# and a changed one put back, and the command fails naming it (docs/policy.md, "Protected names anywhere").
NESTED_NAMES = frozenset({"dal.toml", ".dal"})
# After a pipeline that grew the write roots past _GIT_SCAN_LIMIT, the undo's walk goes on up to this many.
_UNDO_SCAN_LIMIT = 5_000_000
_NESTED_LIMIT = 256
_NESTED_FILE_LIMIT = 1 << 20  # a policy file larger than this is not kept to put back: it is refused
# bubblewrap takes at most 9000 arguments (MAX_WORDS in check.py leaves room below it for the wall's own)
_MAX_WALL_ARGS = 4000
# HOME inside the wall (executor.scrubbed_env): a folder of the private /tmp, so empty for every pipeline,
# and /dev/shm's (private too) when a root covers it.
WALL_HOME = "/tmp/.dal-home"
_WALL_HOME_ELSE = "/dev/shm/.dal-home"

_DIR_FLAGS = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class WallRefused(Exception):
    """The wall cannot be set up so that it keeps the policy's promises; nothing runs."""


def _within(path: str, roots: Iterable[str]) -> bool:
    for root in roots:
        if path == root or root == "/" or path.startswith(root + "/"):
            return True
    return False


def _depth(path: str) -> int:
    return 0 if path == "/" else path.count("/")


@functools.lru_cache(maxsize=1)
def _system_dirs() -> tuple[str, ...]:
    return tuple(os.path.realpath(d) for d in SYSTEM_DIRS if os.path.isdir(d))


@functools.lru_cache(maxsize=2)
def _system_view(allow_net: bool) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]:
    """The system folders and /etc files a program sees, as (path, source) read-only binds and (path,
    target) symlinks, probed once per process: symlinks (a merged /usr's /bin -> usr/bin) are kept as
    symlinks, missing entries left out."""
    binds: list[tuple[str, str]] = []
    links: list[tuple[str, str]] = []
    for d in SYSTEM_DIRS:
        if os.path.islink(d):
            links.append((d, os.readlink(d)))
        elif os.path.isdir(d):
            binds.append((d, d))
    system = _system_dirs()
    for name in ETC_ALWAYS + (ETC_NET if allow_net else ()):
        path = "/etc/" + name
        if os.path.islink(path) and _within(os.path.realpath(path), system):
            links.append((path, os.readlink(path)))  # e.g. localtime -> /usr/share/zoneinfo/...
        elif os.path.exists(path):
            binds.append((path, os.path.realpath(path)))
    return tuple(binds), tuple(links)


@functools.lru_cache(maxsize=1)
def _identity() -> tuple[bytes, bytes]:
    """/etc/passwd and /etc/group as the wall shows them: the user DAL runs as, root and nobody. Inside the
    user namespace every other owner shows as nobody anyway, and the host's user list stays out."""
    import grp
    import pwd

    uid, gid = os.getuid(), os.getgid()
    try:
        user = pwd.getpwuid(uid).pw_name
    except KeyError:
        user = "dal"
    try:
        group = grp.getgrgid(gid).gr_name
    except KeyError:
        group = user
    users = {0: ("root", 0), uid: (user, gid), 65534: ("nobody", 65534)}
    groups = {0: "root", gid: group, 65534: "nogroup"}
    # "*" in the password field: no password, and no line of the host's own file (where it is "x").
    passwd = "".join(f"{n}:*:{u}:{g}:{n}:/:/usr/sbin/nologin\n" for u, (n, g) in users.items())
    groupf = "".join(f"{n}:*:{g}:\n" for g, n in groups.items())
    return passwd.encode(), groupf.encode()


def _open_nofollow(path: str, want_dir: bool = False) -> int:
    """An O_PATH descriptor for the absolute `path` (a folder, or with `want_dir` false also a file), walked
    from / without following any symlink: FileNotFoundError when it is missing, WallRefused when one of its
    components is a symlink (or a folder on the way is not one)."""
    fd = os.open("/", _DIR_FLAGS)
    names = [c for c in path.split("/") if c]
    try:
        for i, name in enumerate(names):
            last = i == len(names) - 1
            flags = _DIR_FLAGS if (want_dir or not last) else os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC
            try:
                nxt = os.open(name, flags, dir_fd=fd)
            except OSError as e:
                if e.errno in (errno.ELOOP, errno.ENOTDIR):
                    shown = "/" + "/".join(names[: i + 1])
                    raise WallRefused(f"{shown} is now a symbolic link or not a folder, so {path} is not what "
                                      "the policy named") from None
                raise
            os.close(fd)
            fd = nxt
        if stat.S_ISLNK(os.fstat(fd).st_mode):  # O_PATH | O_NOFOLLOW opens a symlink itself
            raise WallRefused(f"{path} is now a symbolic link, so it is not what the policy named")
        return fd
    except BaseException:
        os.close(fd)
        raise


def _filters(network: bool) -> tuple[str, ...]:
    """The seccomp filters a program gets (seccomp.py): none on a machine DAL has no table for."""
    if not seccomp.available():
        return ()
    return ("setuid",) if network else ("setuid", "unix-sockets")


def _present(path: str) -> bool:
    """Whether `path` is there, walked as the bind will walk it (WallRefused for a symlink on the way)."""
    try:
        os.close(_open_nofollow(path))
    except FileNotFoundError:
        return False
    return True


def plan_of(policy: Policy, executables: Iterable[str], limits: CommandLimits, placeholders: bool = True,
            lock_git: bool = False) -> WallPlan:
    """The plan of the wall a pipeline would run in now, without making or opening anything (`dal policy
    check --wall`, tests)."""
    with Wall(policy, executables, limits.tmp_size, placeholders, lock_git, limits=limits, dry=True) as wall:
        return wall.plan


class Wall:
    """The bubblewrap wall for one pipeline of a command, made just before it starts (so it sees the tree an
    earlier pipeline left): its plan (plan.py), the descriptors of every bind, the placeholders it created,
    and what close() checks and undoes afterwards. close() releases it all; use it as a context manager.
    With `dry`, only the plan: nothing is made or opened, and close() undoes nothing (plan_of())."""

    def __init__(self, policy: Policy, executables: Iterable[str], tmp_size: int, placeholders: bool = True,
                 lock_git: bool = False, *, limits: CommandLimits | None = None, dry: bool = False) -> None:
        self.fds: list[int] = []
        self.dry = dry
        self.make_placeholders = placeholders
        # A program other than git (and the default toolset) runs: every `.git` folder in the write roots is
        # read-only as a whole (docs/policy.md, "`.git` is read-only").
        self.lock_git = lock_git
        self.undone: list[str] = []  # protected names made, changed or removed in the wall, and what close() did
        self._nested: dict[str, bytes | None] = {}  # nested policy files and stores before: content (files)
        self._nested_git: set[str] = set()  # `.git` folders in the write roots before the pipeline
        self._absent: list[str] = []  # protected paths (`[paths] protect`, WS/.gitconfig) missing before it
        self.own_identity = True  # the synthetic passwd and group (not when a read root shows the real ones)
        self.placeholders: list[tuple[str, int, int]] = []  # (path, st_dev, st_ino) of the folders it made
        self._planned: dict[str, str] = {}  # placeholders (path -> "folder" | "file") and folders DAL makes
        self.home = WALL_HOME  # HOME for the programs inside
        self.swept: list[str] = []  # what close() removed (GIT_SWEPT), as paths relative to the workspace
        self._sweep_at: tuple[str, str, tuple[str, ...], bool] | None = None  # (ws, real .git, absent, had .git)
        self._write_roots: list[str] = []
        self._git_marks: set[str] | None = None  # `.git` entries and git-directory folders before the pipeline
        self.unchecked: list[str] = []  # write roots the walk after the pipeline could not finish (fail closed)
        self._index: tuple[str, bytes | None, Policy] | None = None  # (WS/.git/index, its bytes before, policy)
        self._gitfiles: dict[str, bytes] = {}  # the `.git` files in the write roots before, and their content
        self._live: dict[str, dict[str, tuple[int, ...]]] = {}  # lookalike folders before: their live entries
        self._sweep_ws = ""
        self._view: tuple[list[str], list[str]] = ([], [])
        try:
            self.plan = self._build(policy, executables, tmp_size, limits)
            self._view = bwrap.view(self.plan, self._bind_fd if _BIND_BY_FD and not dry else None)
            size = len(self._view[0]) + len(self._view[1])
            if size > _MAX_WALL_ARGS:
                raise WallRefused(f"the write roots hold too many protected entries (policy files, stores, `.git` "
                                  f"folders) for the wall to bind read-only ({size} arguments, at most "
                                  f"{_MAX_WALL_ARGS}); only the default toolset runs in this tree")
        except BaseException:
            self.close()
            raise
        if dry:  # nothing ran: nothing to check afterwards
            self._sweep_at = self._index = self._git_marks = None

    def __enter__(self) -> Wall:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def argv(self, argv: list[str], data_fds: tuple[int, int], info_fd: int, block_fd: int,
             seccomp_fd: int | None = None) -> list[str]:
        """The whole command line: bubblewrap, the view, the synthetic passwd and group read from
        `data_fds`, the descriptors for the start-up handshake, the seccomp filter (seccomp.py) to read from
        `seccomp_fd`, then the program's own argv."""
        return bwrap.command(BWRAP, self.plan, self._view, argv, identity_fds=data_fds, info_fd=info_fd,
                             block_fd=block_fd, seccomp_fd=seccomp_fd)

    def _bind_fd(self, path: str) -> int:
        fd = _open_nofollow(path)
        self.fds.append(fd)
        return fd

    def _build(self, p: Policy, executables: Iterable[str], tmp_size: int,
               limits: CommandLimits | None) -> WallPlan:
        ws, allow_net = p.workspace, p.allow_net
        write_roots = _outermost(r for r in p.write_roots if not _within(r, _NEVER))
        read_roots = _outermost(r for r in p.read_roots if not _within(r, _NEVER) and not _within(r, write_roots))
        self._write_roots = write_roots
        self._sweep_ws = ws
        self.own_identity = not any(_within(f, [*read_roots, *write_roots]) for f in ("/etc/passwd", "/etc/group"))
        read_all = "/" in read_roots  # the policy lets programs read everything
        system, links = ((), ()) if read_all else _system_view(allow_net)
        if any(r != "/" and (_within(WALL_HOME, [r]) or _within(r, [WALL_HOME])) for r in [*read_roots, *write_roots]):
            self.home = _WALL_HOME_ELSE  # a root shows the host's /tmp there
        # a read root that does not exist shows nothing, as the check would find nothing
        read = [root for root in sorted(read_roots, key=_depth) if root != "/" and _present(root)]
        write: list[str] = []
        make: list[str] = []
        for root in sorted(write_roots, key=_depth):
            if _present(root):
                write.append(root)
            elif _within(root, [ws]):
                # A write root inside the workspace that does not exist yet (`--allow-write=out`): made here, so
                # that a program may create files in it as the check allows (the workspace is read-only then).
                make.append(root)
                write.append(root)
                self._planned[root] = "folder"
                if not self.dry:
                    _make_dirs(root, ws)
            # else a write root elsewhere that does not exist: nothing to show
        extra: list[str] = []
        if self.make_placeholders:
            marks, complete = _git_marks(write_roots)
            if not complete:
                raise WallRefused(f"the write roots hold more than {_GIT_SCAN_LIMIT} entries (or a folder DAL cannot "
                                  "look into), too many to check what a program leaves there for git or a later "
                                  "run (a `.git` file, a folder passing for a git directory, a dal.toml); only the "
                                  "default toolset runs in such a tree")
            self._git_marks = marks
            extra = self._nested_protected(marks, ws)
            self._live = {m: _live_state(m) for m in marks if os.path.basename(m) not in (".git", *NESTED_NAMES)}
            if sum(len(v) for v in self._live.values()) > _LIVE_LIMIT:
                raise WallRefused(f"the folders passing for a git directory in the write roots hold more than "
                                  f"{_LIVE_LIMIT} entries of configuration, hooks and the like, too many to check "
                                  "what a program changes there; only the default toolset runs in such a tree")
            # What records runs changes while a pipeline runs (SQLite's -wal beside a store elsewhere): never
            # undone; nor `.git` entries (the placeholders and GIT_SWEPT above) or the workspace's `.dal`.
            records = [*p.hidden, os.path.join(ws, ".dal")]
            self._absent = [path for path in p.protected if _within(path, write_roots) and not _within(path, records)
                            and ".git" not in path.split("/") and not os.path.lexists(path)]
        own, made = _own_state(write_roots, self.dry)
        for d in made:
            make.append(d)
            self._planned[d] = "folder"
        protected = self._protected(p, ws, write_roots, [*extra, *own])
        git = os.path.join(ws, ".git")
        if self.make_placeholders and _within(os.path.realpath(git), write_roots):
            # and a config missing from an existing .git (not from a new one: `git init` writes it)
            names = (*GIT_SWEPT, "config") if os.path.isdir(git) else GIT_SWEPT
            absent = tuple(n for n in names if not os.path.lexists(os.path.join(git, n)))
            self._sweep_at = (ws, os.path.realpath(git), absent, os.path.lexists(git))
            if os.path.isdir(git):
                index = os.path.join(os.path.realpath(git), "index")
                self._index = (index, _read_small(index), p)
        if self._git_marks is not None:
            self._gitfiles = {m: data for m in self._git_marks if os.path.basename(m) == ".git"
                              and (data := _gitfile_bytes(m)) is not None}
        stores = [m for m in self._nested if os.path.basename(m) == ".dal"]
        if self.make_placeholders:  # a program the check cannot see may read: every store below the roots
            nested, complete = _nested_stores([*read_roots, *write_roots])
            if not complete:
                raise WallRefused(f"the read and write roots hold more than {_GIT_SCAN_LIMIT} entries, too many to "
                                  "find every run store (`.dal`) in them to hide; only the default toolset runs in "
                                  "so large a tree")
            stores = list(dict.fromkeys([*stores, *nested]))
        hidden = _hidden(p, ws, [*read_roots, *write_roots], [*stores, *own], self._planned)
        system_dirs = _system_dirs()
        programs: list[str] = []
        for exe in dict.fromkeys(executables):
            real = os.path.realpath(exe)
            if not _within(real, system_dirs) and not _within(real, read_roots) and os.path.isfile(real):
                programs.append(real)  # a program installed outside /usr (its own file only)
        placeholders = tuple((path, kind) for path, kind in self._planned.items() if path not in make)
        return WallPlan(
            kind="bubblewrap", workspace=ws, network=allow_net, read_all=read_all, system=system, links=links,
            identity=self.own_identity, home=self.home, tmp_size=tmp_size, read=tuple(read), write=tuple(write),
            make=tuple(make), protected=tuple(protected), placeholders=placeholders, hidden=tuple(hidden),
            programs=tuple(dict.fromkeys(programs)), seccomp=_filters(allow_net),
            env=tuple(scrubbed_env(self.home).items()), limits=limits,
        )

    def _protected(self, p: Policy, ws: str, write_roots: list[str], extra: Iterable[str] = ()) -> list[str]:
        """The protected paths inside a write root (and the nested ones in `extra`) that the wall binds
        read-only, outermost first (one inside another protected folder is covered by it); bwrap.view pins
        the folders between the root and each of them."""
        named = [os.path.join(ws, n) for n in WORKSPACE_PROTECTED]
        if self.lock_git:
            named.insert(0, os.path.realpath(os.path.join(ws, ".git")))  # where it really is, when a symlink
        candidates = [path for path in dict.fromkeys([*p.protected, *named, *extra]) if _within(path, write_roots)]
        found: dict[str, None] = {}
        for path in candidates:
            if self.dry and path in self._planned:  # a folder DAL would make before the wall
                found[path] = None
                continue
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                made = self._placeholder(path, ws)  # where it really is, when `.git` is a symlink
                if made is not None:
                    found[made] = None
                continue
            except OSError:
                continue  # e.g. `.git` is a file (a linked worktree): none of its entries are here
            if stat.S_ISLNK(st.st_mode):
                raise WallRefused(f"{path} is a symbolic link: the wall cannot keep a script from replacing it "
                                  "(make it a real file or folder)")
            real = os.path.realpath(path)  # not `path` when a folder on the way is a symlink (`.git` -> ...)
            if _within(real, write_roots):
                found[real] = None  # else it is read-only in the wall, or not there at all
        done: list[str] = []
        for path in sorted(found, key=_depth):
            if not _within(path, done):
                done.append(path)
        return done

    def _placeholder(self, path: str, ws: str) -> str | None:
        """Create the read-only stand-in for a protected entry that does not exist (PLACEHOLDERS); dry: say
        which it would be."""
        name = os.path.basename(path)
        at_top = os.path.dirname(path) == ws and name in PLACEHOLDERS
        # A `[paths] protect` entry, WS/.gitconfig, WS/.config/git, a recorded policy file that is missing: held
        # too (an empty read-only folder), when the folder it would be in exists.
        absent = path in self._absent
        if not self.make_placeholders or not (at_top or absent or os.path.relpath(path, ws) in GIT_PLACEHOLDERS):
            return None
        if self.lock_git and not at_top and not absent:
            return None  # inside a `.git` that is read-only as a whole
        parent = os.path.realpath(os.path.dirname(path))  # where `.git` really is, when it is a symlink
        if not _within(parent, self._write_roots):
            return None  # read-only in the wall, or not there at all
        # The others are empty folders: `git add -A` ignores one (an empty file would be committed), and one a
        # killed DAL left is no file anything reads, no policy a later run could load.
        is_file = name in _FILE_PLACEHOLDERS and not at_top and not absent
        if self.dry:
            if not os.path.isdir(parent):
                return None
            path = os.path.join(parent, name)
            self._planned[path] = "file" if is_file else "folder"
            return path
        try:
            dirfd = _open_nofollow(parent, want_dir=True)
        except FileNotFoundError:
            return None  # no .git (or no .git/objects/info): nothing there for git to read either
        path = os.path.join(parent, name)
        try:
            if is_file:
                os.close(os.open(name, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
                                 dir_fd=dirfd))
            else:
                os.mkdir(name, 0o755, dir_fd=dirfd)  # read-only by its bind, not by its mode
            st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
        except FileExistsError:
            return path
        finally:
            os.close(dirfd)
        self.placeholders.append((path, st.st_dev, st.st_ino))
        self._planned[path] = "file" if is_file else "folder"
        return path

    def _nested_protected(self, marks: set[str], ws: str) -> list[str]:
        """What of the walk's finds the wall binds read-only: every policy file and store in the write roots
        (also in subfolders: a later `cd sub && dal run` takes them as its policy and store), and each `.git`
        folder's protected entries -- the whole folder when a program other than git runs. Remembers their
        content, for close() to put back what changed anyway."""
        out: list[str] = []
        git_entries = [n[len(".git/"):] for n in WORKSPACE_PROTECTED if n.startswith(".git/")]
        for m in sorted(marks):
            name = os.path.basename(m)
            if name in NESTED_NAMES:
                if len(self._nested) >= _NESTED_LIMIT:
                    raise WallRefused(f"the write roots hold more than {_NESTED_LIMIT} policy files and stores, too "
                                      "many for the wall to hold; only the default toolset runs in this tree")
                self._nested[m] = _protected_bytes(m)
                out.append(m)
            elif name == ".git" and os.path.isdir(m) and not os.path.islink(m):
                self._nested_git.add(m)
                out += [m] if self.lock_git else [os.path.join(m, e) for e in git_entries]
        return out

    def _undo_nested(self, after: set[str]) -> list[str]:
        """Put back what a program did to the protected names the walk finds: a new policy file or store
        anywhere is removed (but the workspace's own `.dal` and the run's store: DAL's), a changed or removed
        one written back as it was, and, when a program other than git ran, a new `.git` folder removed (git
        init's cannot be told from a script's). Returns what it did, for the command's failure."""
        done: list[str] = []
        keep = {os.path.join(self._sweep_ws, ".dal")}
        for m in sorted(after):
            name = os.path.basename(m)
            fresh = m not in self._nested and m not in self._git_marks_before()
            if name in NESTED_NAMES and fresh and m not in keep:
                done.append(_remove_entry(m, "made inside the wall"))
            elif name == ".git" and self.lock_git and m not in self._nested_git and os.path.isdir(m) \
                    and not os.path.islink(m):
                # new, or a `.git` file or symlink replaced by a folder
                done.append(_remove_entry(m, "a git repository made inside the wall by a program other than git"))
                if m in self._gitfiles:
                    done.append(_put_back(m, self._gitfiles[m]))
        for m, data in self._nested.items():
            if data is None or _protected_bytes(m) == data:
                continue
            done.append(_put_back(m, data))
        done += [_remove_entry(path, "a protected path made inside the wall") for path in self._absent
                 if os.path.lexists(path)]
        return done

    # --- kept in .dal/held while the pipeline runs (held.py) ------------------------------------------

    def state(self) -> dict | None:
        """What close() needs after the pipeline, for a record a later start can close the wall from when DAL
        is killed meanwhile (the bytes as latin-1 text); None when there is nothing to undo."""
        if not self.placeholders and self._sweep_at is None and self._index is None and self._git_marks is None:
            return None

        def text(b: bytes | None) -> str | None:
            return None if b is None else b.decode("latin-1")

        return {
            "placeholders": [list(x) for x in self.placeholders],
            "sweep_at": None if self._sweep_at is None else [*self._sweep_at[:2], list(self._sweep_at[2]),
                                                              self._sweep_at[3]],
            "index": None if self._index is None else [self._index[0], text(self._index[1])],
            "git_marks": None if self._git_marks is None else sorted(self._git_marks),
            "write_roots": list(self._write_roots), "ws": self._sweep_ws, "lock_git": self.lock_git,
            "nested": {k: text(v) for k, v in self._nested.items()}, "nested_git": sorted(self._nested_git),
            "absent": list(self._absent), "gitfiles": {k: text(v) for k, v in self._gitfiles.items()},
            "live": {k: {r: list(v) for r, v in d.items()} for k, d in self._live.items()},
        }

    @classmethod
    def from_state(cls, policy: Policy, state: dict) -> Wall:
        """The wall a killed DAL set up, as its record (state()) keeps it, to close() now: no descriptors."""
        def raw(t: str | None) -> bytes | None:
            return None if t is None else t.encode("latin-1")

        wall = cls.__new__(cls)
        wall.fds = []
        wall.dry = False
        wall.make_placeholders = True
        wall.lock_git = bool(state["lock_git"])
        wall.undone, wall.swept, wall.unchecked = [], [], []
        wall.placeholders = [(p, int(d), int(i)) for p, d, i in state["placeholders"]]
        sw = state["sweep_at"]
        wall._sweep_at = None if sw is None else (sw[0], sw[1], tuple(sw[2]), bool(sw[3]))
        ix = state["index"]
        wall._index = None if ix is None else (ix[0], raw(ix[1]), policy)
        wall._git_marks = None if state["git_marks"] is None else set(state["git_marks"])
        wall._write_roots = list(state["write_roots"])
        wall._sweep_ws = state["ws"]
        wall._nested = {k: raw(v) for k, v in state["nested"].items()}
        wall._nested_git = set(state["nested_git"])
        wall._absent = list(state["absent"])
        wall._gitfiles = {k: v for k, t in state["gitfiles"].items() if (v := raw(t)) is not None}
        wall._live = {k: {r: tuple(v) for r, v in d.items()} for k, d in state.get("live", {}).items()}
        return wall

    def _git_marks_before(self) -> set[str]:
        return self._git_marks or set()

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds = []
        for path, dev, ino in self.placeholders:
            try:
                st = os.lstat(path)
                if (st.st_dev, st.st_ino) == (dev, ino):
                    if stat.S_ISDIR(st.st_mode):
                        os.rmdir(path)  # only ours, and only while empty
                    elif st.st_size == 0:
                        os.unlink(path)
            except OSError:
                pass  # left behind (kill -9): an empty folder, which is no policy file and no store
        self.placeholders = []
        if self._sweep_at is not None:
            self.swept = _sweep(*self._sweep_at)
            self._sweep_at = None
        if self._index is not None:
            self.swept += _check_index(*self._index)
            self._index = None
        if self._git_marks is not None:
            after, complete = _git_marks(self._write_roots)
            if not complete:
                # A program may grow the tree past the limit (in an order it can learn) to keep
                # a nested dal.toml out of a partial walk. What it made exists anyway: walk all of it, up to a
                # far larger bound, so that what the undo acts on is complete.
                after, complete = _git_marks(self._write_roots, _UNDO_SCAN_LIMIT)
            ws = self._sweep_ws
            self.undone += [os.path.relpath(p, ws) if _within(p, [ws]) else p for p in self._undo_nested(after)]
            after = {m for m in after if os.path.basename(m) not in NESTED_NAMES}
            self.swept += [os.path.relpath(p, ws) if _within(p, [ws]) else p
                           for p in _neutralise(sorted(after - self._git_marks))]
            changed = sorted(m for m, state in self._live.items() if m in after and _live_state(m) != state)
            self.swept += [(os.path.relpath(p, ws) if _within(p, [ws]) else p) + " (its folder passed for a git "
                           "directory, and what git reads there as configuration or code changed)"
                           for p in _neutralise(changed)]
            self.swept += [os.path.relpath(p, ws) if _within(p, [ws]) else p for p in _restore_gitfiles(self._gitfiles)]
            if not complete:
                self.unchecked = list(self._write_roots)
            self._git_marks = None


def _git_marks(roots: Iterable[str], limit: int | None = None) -> tuple[set[str], bool]:
    """Every entry named `.git` and every folder that passes for a git directory (HEAD, objects/ and refs/,
    or HEAD and commondir) below `roots`, walked without following symlinks and not into either; and whether
    the walk was complete (False: it stopped at _GIT_SCAN_LIMIT entries, and what it found is only part)."""
    found: set[str] = set()
    count = 0
    stack = list(roots)
    while stack:
        top = stack.pop()
        try:
            entries = _entries(top)
        except PermissionError:
            return found, False  # a folder nobody could look into: fail closed, as past the limit
        except OSError:
            continue
        count += len(entries)
        if count > (_GIT_SCAN_LIMIT if limit is None else limit):
            return found, False
        names = {e.name for e in entries}
        if "HEAD" in names and ({"objects", "refs"} <= names or "commondir" in names):
            found.add(top)
            # not into git's own folders of it, but a policy file or store may hide anywhere else in it
            found.update(e.path for e in entries if e.name in NESTED_NAMES)
            stack.extend(e.path for e in entries if e.name not in ("objects", "refs", *NESTED_NAMES)
                         and e.is_dir(follow_symlinks=False))
            continue
        for e in entries:
            if e.name == ".git" or e.name in NESTED_NAMES:
                found.add(e.path)
            elif e.is_dir(follow_symlinks=False):
                stack.append(e.path)
    return found, True


def _live_state(folder: str) -> dict[str, tuple[int, ...]]:
    """What git reads as configuration or code in the git-directory folder `folder` (gitrepo.is_live), by
    lstat, not following symlinks: {path below it: (mode, inode, size, mtime, ctime)}. Stops a little past
    _LIVE_LIMIT entries (the caller refuses that many)."""
    from dal.effects.git import repo as gitrepo

    out: dict[str, tuple[int, ...]] = {}

    def note(path: str, rel: str) -> bool:
        try:
            st = os.lstat(path)
        except OSError:
            return False
        out[rel] = (st.st_mode, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        return stat.S_ISDIR(st.st_mode)

    stack = [""]
    while stack and len(out) <= _LIVE_LIMIT:
        rel = stack.pop()
        try:
            with os.scandir(os.path.join(folder, rel) if rel else folder) as it:
                names = [e.name for e in it]
        except OSError:
            continue
        for name in names:
            sub = f"{rel}/{name}" if rel else name
            if gitrepo.is_live(sub) or sub == "objects":
                if note(os.path.join(folder, sub), sub):
                    stack.append(sub)
    out.pop("objects", None)  # its times change with every object written: only objects/info/ counts
    return out


def _entries(folder: str) -> list[os.DirEntry]:
    """The entries of `folder`. A folder DAL's user cannot list (a program of the script did `chmod 311 sub`
    after writing `sub/dal.toml`: still reachable by name) gets its owner's rwx back first, so that the walk
    sees inside; PermissionError when it still cannot (not DAL's user's own folder)."""
    try:
        with os.scandir(folder) as it:
            return list(it)
    except PermissionError:
        st = os.lstat(folder)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
            raise
        os.chmod(folder, stat.S_IMODE(st.st_mode) | stat.S_IRWXU)  # no process of the wall is left to swap it
        with os.scandir(folder) as it:
            return list(it)


def _gitfile_bytes(path: str) -> bytes | None:
    """The content of the `.git` file (not symlink, not folder) at `path`, up to what git reads (1 MiB)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, (1 << 20) + 1)
    finally:
        os.close(fd)


def _restore_gitfiles(before: dict[str, bytes]) -> list[str]:
    """An existing `.git` file (a submodule's) rewritten in the wall (`gitdir: ../.evil`)
    would point the operator's git at a repository the script made. Each one whose content changed, or that
    became a symlink, is written back as it was; returns the paths, for the command's failure message
    (one that became a folder is named but left: git init may make one where a file was removed)."""
    changed: list[str] = []
    for path, data in before.items():
        try:
            st = os.lstat(path)
        except OSError:
            continue  # gone (`git rm sub`): nothing points anywhere
        if stat.S_ISREG(st.st_mode) and _gitfile_bytes(path) == data:
            continue
        folder = os.path.dirname(path)
        try:
            fd = _open_nofollow(folder, want_dir=True)
        except (OSError, WallRefused):
            changed.append(f"{path} (changed; could not put it back)")
            continue
        try:
            if stat.S_ISDIR(st.st_mode):
                changed.append(f"{path} (a `.git` file replaced by a folder; left)")
                continue
            if not stat.S_ISREG(st.st_mode):
                os.unlink(".git", dir_fd=fd)
            wfd = os.open(".git", os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
                          dir_fd=fd)
            try:
                os.write(wfd, data)
            finally:
                os.close(wfd)
            changed.append(f"{path} (rewritten; put back as it was)")
        except OSError as e:
            changed.append(f"{path} (changed; could not put it back: {e.strerror})")
        finally:
            os.close(fd)
    return changed


_INDEX_LIMIT = 256 << 20  # an index larger than this is not kept to put back (a forged one is then removed)


def _read_small(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            data = f.read(_INDEX_LIMIT + 1)
    except OSError:
        return None
    return data if len(data) <= _INDEX_LIMIT else None


def _check_index(index: str, before: bytes | None, policy: Policy) -> list[str]:
    """Attack4 findings 04, 05: WS/.git/index is writable in the wall (git needs it), and git checks out an
    index entry's path without verify_path, so a forged entry for `.git/hooks/pre-commit`, `.git/config` or a
    dal.toml makes the operator's `git checkout -- .` write it. After the pipeline, a changed index whose
    entries name such a path (or that this reader cannot read) is put back as it was (removed if it did
    not exist); returns what it did, for the command's failure message."""
    from dal.effects.git import index as gitindex

    after = _read_small(index)
    if after == before or (after is None and not os.path.lexists(index)):
        return []
    try:
        bad = [] if after is None else _forged(gitindex.index_entries(after), before, policy)
        if not bad and after is not None:
            return []
        why = f"an entry for {bad[0]}" if bad else "too large to read"
    except gitindex.IndexUnreadable as e:
        why = f"unreadable: {e}"
    folder, name = os.path.split(index)
    try:
        fd = _open_nofollow(folder, want_dir=True)
    except (OSError, WallRefused):
        return [f".git/index (forged, {why}; could not put it back)"]
    try:
        if before is None:
            os.unlink(name, dir_fd=fd)
            return [f".git/index (forged, {why}; removed)"]
        tmp = name + ".dal-restore"
        wfd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=fd)
        try:
            os.write(wfd, before)
        finally:
            os.close(wfd)
        os.rename(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
        return [f".git/index (forged, {why}; put back as it was before)"]
    except OSError as e:
        return [f".git/index (forged, {why}; could not put it back: {e.strerror})"]
    finally:
        os.close(fd)


def _forged(entries: list[tuple[str, bytes]], before: bytes | None, policy: Policy) -> list[str]:
    """The entries git could never have written: a path verify_path rejects; or a protected path (a tracked
    dal.toml) whose object changed to one that is not the file's content on disk (`git add` reads the
    file, which is read-only in the wall: another object is forged, and `git checkout` would write it)."""
    from dal.effects.git import index as gitindex

    old: dict[str, bytes] = {}
    if before is not None:
        try:
            old = dict(gitindex.index_entries(before))
        except gitindex.IndexUnreadable:
            pass
    bad = []
    for name, oid in entries:
        if gitindex.bad_component(name):
            bad.append(name)
            continue
        path = os.path.join(policy.workspace, name)
        if old.get(name) == oid or not policy.protection(path):
            continue
        try:
            with open(path, "rb") as f:
                on_disk = gitindex.blob_id(f.read(), len(oid))
        except OSError:
            on_disk = None
        if on_disk != oid:
            bad.append(name)
    return bad


def _first_line(path: str) -> str | None:
    """The file as git reads a `.git` file or a commondir: whole, trailing CR/LF stripped (gitrepo.git_text;
    reading one line missed `gitdir: ../.git/worktrees/w\\n../../evil`)."""
    from dal.effects.git.repo import git_text

    return git_text(path)


def _worktree_link(path: str) -> bool:
    """Whether the `.git` file at `path` is what `git worktree add` writes: `gitdir: X/.git/worktrees/NAME`,
    whose own `commondir` leads back to X/.git, so that git reads its config and hooks there (protected, and
    read-only in the wall) and not from a folder the script chose."""
    line = _first_line(path)
    if line is None or not line.startswith("gitdir: "):
        return False
    target = os.path.realpath(os.path.join(os.path.dirname(path), line[len("gitdir: "):]))
    worktrees = os.path.dirname(target)
    main = os.path.dirname(worktrees)
    if os.path.basename(worktrees) != "worktrees" or os.path.basename(main) != ".git":
        return False
    common = _first_line(os.path.join(target, "commondir"))
    return common is not None and os.path.realpath(os.path.join(target, common)) == main


def _neutralise(new: list[str]) -> list[str]:
    """Remove what of `new` (paths _git_marks found after a pipeline, not before) would make a person's git
    use a repository the script made: a `.git` file or symlink (but a worktree's), a git-directory folder's
    HEAD. Each removed with unlinkat from a folder opened without following symlinks; returns what went."""
    removed: list[str] = []
    for path in new:
        name = os.path.basename(path)
        folder, victim = (os.path.dirname(path), ".git") if name == ".git" else (path, "HEAD")
        try:
            fd = _open_nofollow(folder, want_dir=True)
        except (OSError, WallRefused):
            continue
        try:
            st = os.stat(victim, dir_fd=fd, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode) or (victim == ".git" and stat.S_ISREG(st.st_mode) and _worktree_link(path)):
                continue  # `git init` / `git clone` made it, or `git worktree add`
            os.unlink(victim, dir_fd=fd)
            removed.append(os.path.join(folder, victim))
        except OSError:
            pass
        finally:
            os.close(fd)
    return removed


def _sweep(ws: str, git_dir: str, absent: tuple[str, ...], had_git: bool) -> list[str]:
    """Remove what a pipeline made of GIT_SWEPT in WS/.git (the names in `absent` did not exist before it),
    and a `.git` that was not there before and is now a file or a symlink (git init and git clone make a
    folder; a `gitdir:` file or a link points git at a repository the script made). Never follows a
    symlink; returns what it removed, relative to the workspace."""
    import shutil

    removed: list[str] = []
    try:
        wsfd = _open_nofollow(ws, want_dir=True)
    except (OSError, WallRefused):
        return removed
    try:
        try:
            st = os.stat(".git", dir_fd=wsfd, follow_symlinks=False)
        except FileNotFoundError:
            return removed
        if not stat.S_ISDIR(st.st_mode) and not had_git:
            os.unlink(".git", dir_fd=wsfd)
            removed.append(".git")
            return removed
        try:
            gitfd = _open_nofollow(git_dir, want_dir=True)
        except (OSError, WallRefused):
            return removed
        try:
            for name in absent:
                try:
                    st = os.stat(name, dir_fd=gitfd, follow_symlinks=False)
                except FileNotFoundError:
                    continue
                if stat.S_ISDIR(st.st_mode):
                    shutil.rmtree(name, dir_fd=gitfd, ignore_errors=True)
                else:
                    os.unlink(name, dir_fd=gitfd)
                removed.append(".git/" + name)
        finally:
            os.close(gitfd)
    except OSError:
        pass
    finally:
        os.close(wsfd)
    return removed


def _nested_stores(roots: Iterable[str]) -> tuple[list[str], bool]:
    """Every entry named `.dal` below `roots` (another workspace's store and receipts: a nested project's
    journal holds the env() values its runs were allowed), walked without following symlinks, not into
    `.dal` or `.git` nor the system folders; and whether the walk was complete (False past _GIT_SCAN_LIMIT
    entries: the caller refuses the wall, fail closed)."""
    found: list[str] = []
    count = 0
    system = _system_dirs()
    stack = [r for r in roots if r != "/" and not _within(r, _NEVER)] if "/" not in roots else ["/"]
    while stack:
        top = stack.pop()
        try:
            with os.scandir(top) as it:
                entries = list(it)
        except OSError:
            continue
        count += len(entries)
        if count > _GIT_SCAN_LIMIT:
            return found, False
        for e in entries:
            if e.name == ".dal":
                found.append(e.path)
            elif (e.name != ".git" and e.is_dir(follow_symlinks=False) and not _within(e.path, _NEVER)
                  and not _within(e.path, system)):
                stack.append(e.path)
    return found, True


def _own_state(write_roots: list[str], dry: bool = False) -> tuple[list[str], list[str]]:
    """DAL's own state folders (statedir.py: held.key among them), each made (mode 0700) when a write root
    would show it missing: the wall then covers a folder (read-only, empty) with its parents pinned, not a
    name a program could fill with a key of its own for the next start to sign and trust records with.
    Returns them and those it made (dry: would make)."""
    statedir.clear()
    dirs = list(statedir.state_dirs())
    made: list[str] = []
    for d in dirs:
        if _within(d, write_roots) and not os.path.lexists(d):
            if dry:
                made.append(d)
                continue
            try:
                os.makedirs(d, mode=0o700, exist_ok=True)
                made.append(d)
            except OSError:
                pass  # then the check's rule alone keeps it (a program the check cannot see might make it)
    statedir.clear()
    return list(dict.fromkeys([*dirs, *statedir.state_dirs()])), made


def _hidden(p: Policy, ws: str, shown: list[str], nested: Iterable[str] = (),
            planned: dict[str, str] | None = None) -> list[tuple[str, str]]:
    """Cover what records runs (the store and its side files, the locks, the receipts: `Policy.hidden`,
    the workspace's `.dal/`, and every other `.dal` in `nested`) where the wall would show it: a folder with
    an empty read-only tmpfs, a file with /dev/null, read-only. Programs read nothing of it, whatever they
    are (docs/policy.md, "The run store is not readable"). After the protected binds, so that each covers
    its read-only bind. `planned`: what DAL makes before the wall starts (path -> "folder" | "file")."""
    if "/" in shown:
        shown = ["/"]
    out: list[tuple[str, str]] = []
    done: list[str] = []
    wanted = [*p.hidden, os.path.join(ws, ".dal"), *nested]
    for path in sorted(dict.fromkeys(os.path.realpath(h) for h in wanted), key=_depth):
        if _within(path, done) or not _within(path, shown) or _within(path, _NEVER):
            continue
        try:
            kind = "folder" if stat.S_ISDIR(os.stat(path).st_mode) else "file"
        except OSError:
            if planned is None or path not in planned:
                continue  # not there: nothing to read (WS/.dal is held by its placeholder)
            kind = planned[path]
        out.append((path, kind))
        done.append(path)
    return out


def _protected_bytes(path: str) -> bytes | None:
    """A nested policy file's content, to put back ("" for a folder: a store, or a placeholder-like folder,
    whose inside is not kept); None when it is not there. Refuses the wall for one too large to keep."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if stat.S_ISDIR(st.st_mode):
        return b""
    if not stat.S_ISREG(st.st_mode):
        return b"\0link"  # the wall refuses a protected symlink (Wall._protected); nothing to keep
    if st.st_size > _NESTED_FILE_LIMIT:
        raise WallRefused(f"{path} is larger than {_NESTED_FILE_LIMIT} bytes: too large for the wall to keep")
    data = _gitfile_bytes(path)
    return data if data is not None else b""


def _remove_entry(path: str, why: str) -> str:
    """Remove `path` (a file, or a folder with everything in it) without following a symlink; says what it did."""
    import shutil

    folder, name = os.path.split(path)
    try:
        fd = _open_nofollow(folder, want_dir=True)
    except (OSError, WallRefused):
        return f"{path} ({why}; could not remove it)"
    try:
        if stat.S_ISDIR(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
            shutil.rmtree(name, dir_fd=fd)
        else:
            os.unlink(name, dir_fd=fd)
        return f"{path} ({why}; removed)"
    except OSError as e:
        return f"{path} ({why}; could not remove it: {e.strerror})"
    finally:
        os.close(fd)


def _put_back(path: str, data: bytes) -> str:
    """Write a nested policy file back as it was before the pipeline (or a store folder back to a folder)."""
    import shutil

    folder, name = os.path.split(path)
    try:
        fd = _open_nofollow(folder, want_dir=True)
    except (OSError, WallRefused):
        return f"{path} (changed inside the wall; could not put it back)"
    try:
        try:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                if data == b"":
                    return f"{path} (changed inside the wall; left)"
                shutil.rmtree(name, dir_fd=fd)
            else:
                os.unlink(name, dir_fd=fd)
        except FileNotFoundError:
            pass
        if data == b"" and os.path.basename(path) == ".dal":
            os.mkdir(name, 0o755, dir_fd=fd)
            return f"{path} (removed inside the wall; an empty folder put back, its content is lost)"
        wfd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=fd)
        try:
            os.write(wfd, data)
        finally:
            os.close(wfd)
        return f"{path} (changed inside the wall; put back as it was)"
    except OSError as e:
        return f"{path} (changed inside the wall; could not put it back: {e.strerror})"
    finally:
        os.close(fd)


def _outermost(paths: Iterable[str]) -> list[str]:
    """The paths that are not inside another of them (a nested root is already shown by its parent)."""
    items = sorted(dict.fromkeys(paths), key=_depth)
    out: list[str] = []
    for path in items:
        if not _within(path, out):
            out.append(path)
    return out


def _make_dirs(path: str, ws: str) -> None:
    """mkdir -p `path` below the workspace without following a symlink on the way."""
    rel = [c for c in path[len(ws):].split("/") if c]
    fd = _open_nofollow(ws, want_dir=True)
    try:
        for name in rel:
            try:
                os.mkdir(name, 0o755, dir_fd=fd)
            except FileExistsError:
                pass
            try:
                nxt = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError as e:
                raise WallRefused(f"cannot make the write root {path}: {e.strerror}") from None
            os.close(fd)
            fd = nxt
    finally:
        os.close(fd)


# --- the probe ----------------------------------------------------------------------------------------


def _which(name: str, path: str) -> str | None:
    """`shutil.which(name, path=path)` on POSIX, without importing shutil (and its compression modules)."""
    for directory in dict.fromkeys(path.split(os.pathsep)):
        candidate = os.path.join(directory, name)
        if os.path.exists(candidate) and os.access(candidate, os.F_OK | os.X_OK) and not os.path.isdir(candidate):
            return candidate
    return None


def _base(probe_fd: int, by_fd: bool = True) -> list[str]:
    """The probe's bubblewrap command line up to `--`: every option a command's wall uses, binds by
    descriptor included, so that a bubblewrap lacking one is found out here, once, not at each run()."""
    argv = [BWRAP, *bwrap.system_ops(*_system_view(False)), *bwrap.private(1 << 20)]
    argv += ["--ro-bind-fd", str(probe_fd), "/tmp/.dal-probe"] if by_fd else ["--ro-bind", "/usr", "/tmp/.dal-probe"]
    argv += ["--remount-ro", "/", *bwrap.namespaces("/", False)]
    return argv


class _Probe:
    """`true` run inside the wall, with stdin from /dev/null and its stderr read back: what
    `subprocess.run(argv, stdin=DEVNULL, capture_output=True, timeout=10)` did, through os.posix_spawn,
    so that it can be started early and read later (start_probe), and so that a run does not import
    subprocess for it."""

    def __init__(self, argv: list[str], keep: tuple[int, ...] = ()) -> None:
        self.argv = argv
        read_end, write_end = os.pipe()
        actions: list[tuple] = [
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
            (os.POSIX_SPAWN_DUP2, write_end, 2),
        ]
        actions += [(os.POSIX_SPAWN_CLOSE, fd) for fd in _inherited_fds() if fd not in keep]  # close_fds
        try:
            self.pid = os.posix_spawn(argv[0], argv, os.environ, file_actions=actions)
        except BaseException:
            os.close(read_end)
            raise
        finally:
            os.close(write_end)
        self.fd = read_end
        self.deadline = time.monotonic() + _PROBE_TIMEOUT

    def status(self) -> tuple[bool, str]:
        """Wait for the probe (at most 10 s from its start) and say what it found."""
        err = b""
        try:
            while True:
                left = self.deadline - time.monotonic()
                if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                    self._kill()
                    return False, (f"bubblewrap does not start here: Command '{self.argv}' timed out after "
                                   f"{_PROBE_TIMEOUT} seconds")
                chunk = os.read(self.fd, 65536)
                if not chunk:
                    break
                err += chunk
            _, wait_status = os.waitpid(self.pid, 0)
        except BaseException:
            self._kill()
            raise
        finally:
            os.close(self.fd)
        code = os.waitstatus_to_exitcode(wait_status)
        if code != 0:
            lines = err.decode("utf-8", errors="replace").strip().splitlines()
            return False, f"bubblewrap does not work here: {lines[0] if lines else f'exit {code}'}"
        return True, f"bubblewrap at {BWRAP}"

    def _kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except OSError:
            pass


def _inherited_fds() -> list[int]:
    """Descriptors above 2 that a child would inherit (none that DAL opens itself: Python's are not)."""
    try:
        fds = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        return []
    out = []
    for fd in fds:
        try:
            if fd > 2 and os.get_inheritable(fd):
                out.append(fd)
        except OSError:  # the listing's own descriptor, closed by now
            pass
    return out


class _FdProbe:
    """The probe with its bind descriptor, closed once the probe is read; when bubblewrap does not know
    --ro-bind-fd, probed again with binds by path (and the walls made afterwards bind by path)."""

    def __init__(self, true: str) -> None:
        self.true = true
        self.fd = os.open(os.path.dirname(true), os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)  # any folder will do
        try:
            os.set_inheritable(self.fd, True)
            self.probe = _Probe([*_base(self.fd), "--", true], keep=(self.fd,))
        except BaseException:
            os.close(self.fd)
            raise

    def status(self) -> tuple[bool, str]:
        global _BIND_BY_FD
        try:
            found = self.probe.status()
        finally:
            os.close(self.fd)
        if not found[0] and "--ro-bind-fd" in found[1]:
            again = _Probe([*_base(-1, by_fd=False), "--", self.true]).status()
            if again[0]:
                _BIND_BY_FD = False
                return again
        if found[0]:
            probed.remember_good(_remembered(self.true))
        return found


def _remembered(true: str) -> list[str]:
    """The probe's command line as probed.py keys it (its descriptor's number varies by process)."""
    return [*_base(-1), "--", true]


def _spawn_probe() -> _FdProbe | tuple[bool, str]:
    """Start the probe, or say why there is nothing to start."""
    exe = _which("bwrap", "/usr/bin:/usr/local/bin:/bin")
    if exe is None:
        return False, "bubblewrap (bwrap) is not installed"
    global BWRAP
    BWRAP = exe
    true = _which("true", "/usr/bin:/bin") or "/bin/true"
    if _BIND_BY_FD and probed.known_good(_remembered(true)):
        return True, f"bubblewrap at {exe}"  # as this probe succeeded before, under the same conditions
    try:
        return _FdProbe(true)
    except OSError as e:
        return False, f"bubblewrap does not start here: {e}"


_pending: _FdProbe | tuple[bool, str] | None = None  # what start_probe() began, for sandbox_status()


def start_probe() -> None:
    """Start probing in the background: bubblewrap takes 5-10 ms to set up its namespaces, time that can
    overlap the caller's own start-up (`dal run` imports the runner meanwhile). The first
    sandbox_status() collects the result; the probe still runs once per process."""
    global _pending
    if _pending is None and sandbox_status.cache_info().currsize == 0:
        _pending = _spawn_probe()


@functools.lru_cache(maxsize=1)
def sandbox_status() -> tuple[bool, str]:
    """(available, reason), probed once per process by running `true` inside the wall."""
    global _pending
    found, _pending = _pending or _spawn_probe(), None
    return found.status() if not isinstance(found, tuple) else found
