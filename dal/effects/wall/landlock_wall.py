"""The Landlock wall: the view bubblewrap's wall would mount, as Landlock rules, for hosts where bubblewrap
cannot make a user namespace (docs/policy.md, "The Landlock wall").

The pipeline's sandbox.Wall is made as for bubblewrap -- its plan (plan.py), its placeholders, what it
remembers to put back, its binds opened by descriptor -- and the plan's paths become rules: a read-only
path reads and executes beneath it, a writable one has every right but making devices, a hidden path (a
store, DAL's state) none.
Landlock only adds rights going down a tree, so where a path needs fewer rights than the folder around it
(a hidden `.dal`, a protected `dal.toml` in a write root), the folders on the way get only listing and each
of their other entries gets the folder's rights by a rule of its own: those folders take no new entries.
For a pipeline of the default toolset alone (whose every write the check sees) the roots are granted whole
and only the kernel's own folders are carved out. What Landlock cannot carve out -- the entries of a `.git`
folder git writes in -- the wall's undo and git's guard hold, as they do behind bubblewrap.

Besides the filesystem: no TCP bind or connect and no socket(2) at all while the network is off (socketpair
stays), abstract unix sockets and signals scoped to the pipeline's own processes, no System V IPC and no
kernel keyrings (seccomp), no capability, not even for root, and a private TMPDIR and HOME in a folder of
the pipeline's own, removed after it.
"""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import signal
import stat
import struct
import tempfile
from collections.abc import Callable, Iterable

import attrs

from dal.core import liveness
from dal.effects.policy import Policy
from dal.effects.wall import landlock, landlock_kept, seccomp
from dal.effects.wall.limits import CommandLimits, format_bytes
from dal.effects.wall.plan import WallPlan, scrubbed_env
from dal.effects.wall.sandbox import Wall, WallRefused, _open_nofollow

__all__ = ["LandlockWall", "missing", "MIN_ABI"]

# Scoped signals and abstract unix sockets (ABI 6): below it a program could kill DAL (`kill -1`), which no
# other part of this wall prevents.
MIN_ABI = 6
RO = landlock.READ | landlock.EXECUTE
RW = landlock.WRITE_ALL
_NEVER = ("/proc", "/sys", "/dev")  # the kernel's interfaces: never granted, whatever the roots say
# Devices a program may use: the ones that hold nothing (read and written, `> /dev/null` truncates) and the
# random sources (read).
DEVICES = {"/dev/null": landlock.READ_FILE | landlock.WRITE_FILE | landlock.TRUNCATE,
           "/dev/zero": landlock.READ_FILE | landlock.WRITE_FILE | landlock.TRUNCATE,
           "/dev/full": landlock.READ_FILE | landlock.WRITE_FILE | landlock.TRUNCATE,
           "/dev/random": landlock.READ_FILE, "/dev/urandom": landlock.READ_FILE}
_MAX_RULES = 20_000  # entries granted one by one on the way to hidden paths, at most


def missing() -> str | None:
    """Why the Landlock wall cannot be had here; None when it can."""
    why = landlock.missing()
    if why is not None:
        return why
    if landlock.abi() < MIN_ABI:
        return (f"the kernel's Landlock is ABI {landlock.abi()}; the wall needs ABI {MIN_ABI} (Linux 6.12) to keep "
                "signals and abstract unix sockets inside")
    if not seccomp.available():
        return seccomp.missing()
    return None


def _tmp_prefix() -> str:
    """The wall's temporary folders are named for this boot, PID namespace and DAL process, so that the next
    start can tell the ones a killed DAL left (_sweep_leftovers)."""
    return f"dal-wall-{(liveness.boot_id() or 'x')[:8]}-{liveness.pid_namespace() or 0}-"


_swept = False


def _sweep_leftovers() -> None:
    """Once per process: remove the temporary folders (TMPDIR, HOME) of walls whose DAL process is gone, of
    this user, this boot and this PID namespace (another's are left: this process cannot tell)."""
    global _swept
    if _swept:
        return
    _swept = True
    top, prefix = tempfile.gettempdir(), _tmp_prefix()
    try:
        names = [n for n in os.listdir(top) if n.startswith(prefix)]
    except OSError:
        return
    for name in names:
        try:
            pid, start = (int(x) for x in name[len(prefix):].split("-")[:2])
            st = os.lstat(os.path.join(top, name))
        except (ValueError, OSError):
            continue
        if stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and liveness.verdict(pid, start, None) == "gone":
            shutil.rmtree(os.path.join(top, name), ignore_errors=True)


class _TooMuchToKeep(Exception):
    pass


def _writes_on_the_way(plan: WallPlan, writes: list[str]) -> bool:
    """Whether a write lands directly in a folder on the way to a hidden or protected path (one that takes no
    new entries when the wall is carved), or is such a folder."""
    way: set[str] = set()
    for path in [*plan.protected, *(h for h, _ in plan.hidden)]:
        root = next((r for r in plan.write if _within(path, r)), None)
        parent = os.path.dirname(path)
        while root is not None and _within(parent, root):
            way.add(parent)
            if parent == root:
                break
            parent = os.path.dirname(parent)
    def lands_in(path: str) -> str:  # the folder the write makes an entry in: the nearest that exists (mkdir -p)
        parent = os.path.dirname(path)
        while parent != "/" and not os.path.lexists(parent):
            parent = os.path.dirname(parent)
        return parent

    return any(w in way or lands_in(w) in way for w in writes)


def _in_git(path: str) -> bool:
    """Whether `path` is inside a folder named `.git` (not that folder itself)."""
    return ".git" in path.split("/")[:-1]


class LandlockWall(Wall):
    """sandbox.Wall rendered to a Landlock ruleset: its undo (close()), record (state()) and placeholders are
    the bubblewrap wall's; preexec() restricts the child instead of bubblewrap's argv."""

    def __init__(self, policy: Policy, executables: Iterable[str], tmp_size: int, placeholders: bool = True,
                 lock_git: bool = False, *, limits: CommandLimits | None = None,
                 writes: Iterable[str] | None = None) -> None:
        """`writes`: what the check says the command writes (Decision.writes), for a pipeline of the default
        toolset alone (`placeholders` False): none directly in a folder on the way to a hidden or protected
        path, and its wall is carved as for other programs; else the roots are granted whole."""
        writes = None if writes is None else tuple(writes)
        try:
            self._make(policy, executables, tmp_size, placeholders, lock_git, limits, writes)
        except _TooMuchToKeep:
            # `.git`'s held entries (submodules' repositories in .git/modules) are too large to copy: the
            # whole `.git` read-only instead, as for a program other than git
            self._make(policy, executables, tmp_size, placeholders, True, limits, writes)

    def _make(self, policy: Policy, executables: Iterable[str], tmp_size: int, placeholders: bool, lock_git: bool,
              limits: CommandLimits | None, writes: tuple[str, ...] | None) -> None:
        self.ruleset: landlock.Ruleset | None = None
        self.tmpdir: str | None = None
        self._fd_of: dict[str, int] = {}
        self._kept: dict = {}  # protected paths the rules do not hold read-only: their copies (landlock_kept.py)
        super().__init__(policy, executables, tmp_size, placeholders, lock_git, limits=limits)
        try:
            hidden = [h for h, _ in self.plan.hidden]
            self.descend = placeholders or (writes is not None and not _writes_on_the_way(
                self.plan, [os.path.normpath(os.path.join(policy.workspace, w)) for w in writes]))
            # What the rules cannot hold read-only is kept and put back: with the roots granted whole, every
            # protected path; else the entries of a `.git` git writes in (its folder must take new files).
            kept = [p for p in self.plan.protected if p not in self._nested and not any(_within(p, h) for h in hidden)
                    and (not self.descend or _in_git(p))]
            try:
                self._kept = landlock_kept.snapshot(kept)
            except WallRefused:
                if not lock_git and placeholders:
                    self.close()
                    raise _TooMuchToKeep from None
                raise
            self.ruleset = landlock.Ruleset(network=policy.allow_net)
            self.rules = render(mounts_of(self.plan, self._fd_of), Rules(self.ruleset), descend=self.descend)
            _sweep_leftovers()
            self.tmpdir = tempfile.mkdtemp(prefix=f"{_tmp_prefix()}{os.getpid()}-{liveness.start_time(os.getpid())}-")
            self.home = os.path.join(self.tmpdir, "home")
            os.mkdir(self.home, 0o700)
            for dev, rights in DEVICES.items():
                self.ruleset.allow(dev, rights)
            self.ruleset.allow(self.tmpdir, RW, follow=False)
            filters = (*self.plan.seccomp, "ipc-keyrings", *(() if policy.allow_net else ("sockets",)))
            self.plan = attrs.evolve(self.plan, kind="landlock", home=self.home, seccomp=filters,
                                     env=tuple(self.env(scrubbed_env(self.home)).items()))
        except _TooMuchToKeep:
            raise
        except landlock.LandlockError as e:
            self.close()
            raise WallRefused(str(e)) from None
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self._kept:
            ws = self._sweep_ws
            self.undone += [os.path.relpath(p, ws) if _within(p, ws) else p for p in landlock_kept.restore(self._kept)]
            self._kept = {}
        if self.ruleset is not None:
            self.ruleset.close()
            self.ruleset = None
        if self.tmpdir is not None:
            shutil.rmtree(self.tmpdir, ignore_errors=True)
            self.tmpdir = None
        super().close()

    def state(self) -> dict | None:
        """The bubblewrap wall's record (sandbox.Wall.state), with the copies of what is kept to put back."""
        base = super().state()
        if not self._kept:
            return base
        if base is None:
            base = {"placeholders": [], "sweep_at": None, "index": None, "git_marks": None,
                    "write_roots": list(self._write_roots), "ws": self._sweep_ws, "lock_git": self.lock_git,
                    "nested": {}, "nested_git": [], "absent": [], "gitfiles": {}, "live": {}}
        return {**base, "kind": "landlock", "kept": self._kept}

    @classmethod
    def from_state(cls, policy: Policy, state: dict) -> LandlockWall:
        """The wall a killed DAL set up, from its record, to close() now (held.py)."""
        wall = Wall.from_state.__func__(cls, policy, state)  # type: ignore[attr-defined]
        wall.ruleset, wall.tmpdir, wall._fd_of = None, None, {}
        wall._kept = dict(state.get("kept") or {})
        return wall

    def env(self, base: dict[str, str]) -> dict[str, str]:
        """The program's environment: `base` (executor.scrubbed_env of self.home) with TMPDIR the wall's own."""
        assert self.tmpdir is not None
        return {**base, "TMPDIR": self.tmpdir}

    def preexec(self) -> Callable[[], None]:
        """For preexec_fn, after the limits: the stage's init splits off (stage_init), and the program's half
        goes on with no capability, no_new_privs, the ruleset, then the filters."""
        if self.ruleset is None:
            raise WallRefused("the Landlock wall is closed")
        split = stage_init()
        restrict = self.ruleset.restrictor()
        setuid = seccomp.install()
        offline = _install(program(seccomp.machine(), network=self._network, root=os.geteuid() == 0))

        def setup() -> None:
            split()
            restrict()
            setuid()
            offline()

        return setup

    @property
    def _network(self) -> bool:
        return bool(self.ruleset is not None and self.ruleset.network)

    def _bind_fd(self, path: str) -> int:
        fd = super()._bind_fd(path)
        self._fd_of[path] = fd  # the descriptor sandbox.Wall opened and checked: the rule is made from it
        return fd


class Mount:
    """One mount point of the bubblewrap view: its path, the rights beneath it (None: hidden), and the
    descriptor sandbox.Wall opened for it (or None: a path to open)."""

    __slots__ = ("path", "rights", "fd")

    def __init__(self, path: str, rights: int | None, fd: int | None = None) -> None:
        self.path, self.rights, self.fd = path, rights, fd

    def __repr__(self) -> str:
        return f"Mount({self.path!r}, {self.rights!r})"


def describe(plan: WallPlan) -> list[str]:
    """The plan as the Landlock wall holds it (WallPlan.describe for kind "landlock"), one line a fact."""
    def paths(items: Iterable[str]) -> str:
        return ", ".join(items) or "(none)"

    held = [p for p in plan.protected if not _in_git(p)]
    kept = [p for p in plan.protected if _in_git(p)]
    filters = dict.fromkeys((*plan.seccomp, "ipc-keyrings", *(() if plan.network else ("sockets",))))
    shown = "everything, read-only (but /proc, /sys, /dev)" if plan.read_all else \
        ", ".join(source for _, source in plan.system)
    lines = [
        "wall:         landlock",
        f"network:      {'allowed' if plan.network else 'off (no socket(2); TCP bind and connect refused)'}",
        f"reads:        {paths(plan.read)}",
        f"writes:       {paths(plan.write)}",
        f"read-only:    {paths(held)} (the folders on the way list only and take no new entries; for the "
        "default toolset alone the roots are whole and these are copied and put back)",
        f"put back:     {paths(kept)} (copied before, put back after: git writes in their folder)",
        f"placeholders: {paths(p for p, _ in plan.placeholders)}",
        f"hidden:       {paths(p for p, _ in plan.hidden)} (no file read; names listable)",
        f"system:       {shown}; /dev: {', '.join(DEVICES)}",
        f"programs:     {paths(plan.programs) if plan.programs else '(all in the system folders)'}",
        "identity:     /etc/passwd and /etc/group refused",
        "/tmp:         refused; TMPDIR and HOME in a folder of the pipeline's own, removed after it",
        f"seccomp:      {', '.join(filters)}",
        "processes:    no capability; signals and abstract unix sockets stay inside the stage; its init kills "
        "what it leaves",
        f"working dir:  {plan.workspace}",
    ]
    if plan.limits is not None:
        lim = plan.limits
        lines.append(f"limits:       {lim.processes} processes, files up to {format_bytes(lim.file_size)}, "
                     f"memory {format_bytes(lim.memory)}, {lim.cpu_seconds} CPU seconds a process")
    return lines


def mounts_of(plan: WallPlan, fds: dict[str, int] | None = None) -> list[Mount]:
    """The plan's paths in bubblewrap's mount order (bwrap.view: a later one covers an earlier one), each
    with the descriptor the wall opened for it in `fds`, if any. Its private /tmp, /proc, /dev and
    symlinks have their Landlock counterparts elsewhere (DEVICES, the wall's own TMPDIR)."""
    fds = fds or {}
    out = [Mount("/", RO, fds.get("/"))] if plan.read_all else [Mount(source, RO) for _, source in plan.system]
    out += [Mount(p, RO, fds.get(p)) for p in plan.read]
    out += [Mount(p, RW, fds.get(p)) for p in plan.write]
    out += [Mount(p, RO, fds.get(p)) for p in plan.protected]
    out += [Mount(p, None) for p, _ in plan.hidden]
    out += [Mount(p, RO) for p in plan.programs]
    return out


class Rules:
    """What render() grants, path by path: to a Landlock ruleset, and kept as (path, rights) for the tests and
    for printing the wall."""

    def __init__(self, ruleset: landlock.Ruleset | None = None) -> None:
        self.ruleset = ruleset
        self.granted: list[tuple[str, int]] = []

    def grant(self, path: str, fd: int, rights: int) -> None:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            rights &= landlock.FILE_RIGHTS
        if not rights:
            return
        if self.ruleset is not None:
            self.ruleset.allow_fd(fd, rights)
        self.granted.append((path, rights))
        if len(self.granted) > _MAX_RULES:
            raise WallRefused(f"more than {_MAX_RULES} entries beside the hidden and protected paths to grant one "
                              "by one; only the default toolset runs in so large a tree under the Landlock wall")


def _within(path: str, root: str) -> bool:
    return path == root or root == "/" or path.startswith(root + "/")


def render(mounts: list[Mount], rules: Rules, descend: bool = True) -> Rules:
    """Grant `mounts` (later mounts win at and beneath their path, as bubblewrap stacks them): beneath each
    path the rights the view gives it. With `descend`, a path that needs fewer rights than the folder around
    it gets them exactly: its folders on the way list only, and their other entries get rules of their own.
    Without it only the kernel's folders are carved out that way, and a hidden or read-only path inside a
    root keeps the root's rights (the check holds it, as it does without a wall)."""
    view: dict[str, Mount] = {}
    for m in mounts:
        view.pop(m.path, None)
        view[m.path] = m  # a later mount at the same path replaces the earlier one
    for never in _NEVER:
        if any(_within(never, p) for p in view):
            view[never] = Mount(never, None)
    # inside `.git` git must make files: what it must not change there is kept and put back (LandlockWall)
    strict = {p for p in view if (descend and not _in_git(p)) or p in _NEVER}
    tops = [p for p in view if not any(_within(p, q) and p != q for q in view)]
    for top in sorted(tops):
        fd, own = _open_mount(view[top])
        if fd is not None:
            _place(top, view[top].rights or 0, 0, fd, own, view, strict, rules)
    return rules


def _open_mount(m: Mount) -> tuple[int | None, bool]:
    """A descriptor for the mount point (the wall's own, or opened here, walked from / without following a
    symlink: owned); None when it is missing. The plan's paths are resolved: a symlink on the way now is a
    swap, and refuses the wall."""
    if m.fd is not None:
        return m.fd, False
    try:
        return _open_nofollow(m.path), True
    except (FileNotFoundError, NotADirectoryError):
        return None, False


def _gitignore(path: str, fd: int, rules: Rules) -> None:
    """A hidden store's `.gitignore` (DAL's `*`, dal.core.gitignored) stays readable, so that git, which can list
    the hidden folder's names, ignores them (`git add -A` would fail on a file it cannot read)."""
    try:
        sub = os.open(".gitignore", os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
    except OSError:
        return
    try:
        st = os.fstat(sub)
        if stat.S_ISREG(st.st_mode) and st.st_nlink == 1:
            rules.grant(path + "/.gitignore", sub, landlock.READ_FILE)
    finally:
        os.close(sub)


def _place(path: str, want: int, above: int, fd: int, own: bool, view: dict[str, Mount], strict: set[str],
           rules: Rules) -> None:
    """Grant `want` beneath `path` (open at `fd`; closed here when `own`), given the rights `above` already
    granted to the folders around it; the mount points below it get theirs."""
    try:
        if path in view and view[path].rights is None and path in strict:
            _gitignore(path, fd, rules)
        below = [p for p in view if p != path and _within(p, path)]
        floor = want
        for p in below:
            if p in strict:
                floor &= (view[p].rights or 0) | landlock.READ_DIR  # the names on the way stay listable
        if floor == want or not stat.S_ISDIR(os.fstat(fd).st_mode):
            if want & ~above:
                rules.grant(path, fd, want)
            nearest = [p for p in below if not any(_within(p, q) and q not in (p, path) for q in below)]
            for p in sorted(nearest):
                sub_fd, sub_own = _open_mount(view[p])
                if sub_fd is not None:
                    _place(p, view[p].rights or 0, above | want, sub_fd, sub_own, view, strict, rules)
            return
        if floor & ~above:
            rules.grant(path, fd, floor)
        listing = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=fd)
        try:
            names = sorted(os.listdir(listing))
        finally:
            os.close(listing)
        for name in names:
            sub = path.rstrip("/") + "/" + name
            if sub in view:
                sub_fd, sub_own = _open_mount(view[sub])
                if sub_fd is not None:
                    _place(sub, view[sub].rights or 0, above | floor, sub_fd, sub_own, view, strict, rules)
                continue
            try:
                sub_fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            except FileNotFoundError:
                continue
            if stat.S_ISLNK(os.fstat(sub_fd).st_mode):
                os.close(sub_fd)  # it leads where its target's own rules say
                continue
            if any(_within(p, sub) for p in below):
                _place(sub, want, above | floor, sub_fd, True, view, strict, rules)
            elif os.fstat(sub_fd).st_nlink > 1 and not stat.S_ISDIR(os.fstat(sub_fd).st_mode):
                os.close(sub_fd)  # a rule is on the file, not the name: it would grant every other name too
            else:
                try:
                    if want & ~(above | floor):
                        rules.grant(sub, sub_fd, want)
                finally:
                    os.close(sub_fd)
    finally:
        if own:
            os.close(fd)


# --- each stage's init ---------------------------------------------------------------------------------
# bubblewrap's wall ends with its program: the sandbox's init is pid 1 of its own PID namespace, and when it
# exits every process left inside is killed. Landlock has no namespace, so each stage gets an init of its
# own: the child DAL forks splits in two between fork and exec; one half restricts itself and execs the
# program, the other stays outside the ruleset (no program of the stage can signal it: signals are
# scoped), as a child subreaper, so that whatever the program leaves behind (`setsid cmd &`) is its child.
# When the program exits, or DAL stops the stage (SIGTERM), or DAL dies, it kills every process left, reaps
# them, and exits with the program's status: nothing of a stage outlives it to act after the wall's undo.
_PR_SET_CHILD_SUBREAPER, _PR_SET_PDEATHSIG = 36, 1
_STOP = {signal.SIGTERM, signal.SIGHUP, signal.SIGINT}


def stage_init() -> Callable[[], None]:
    """For preexec_fn, first: returns in the program's half; the init's half never returns."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    dal = os.getpid()
    watched = {signal.SIGCHLD, *_STOP}

    def split() -> None:
        if prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "cannot make the stage's init")
        old = signal.pthread_sigmask(signal.SIG_BLOCK, watched)  # none lost between the fork and the wait
        pid = os.fork()
        if pid == 0:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)
            return
        try:
            prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)  # DAL gone: stop the stage, not only this half
            os.closerange(0, 1 << 20)  # no pipe of the stage's, nor subprocess's exec report, held open here
            code = _watch(pid, dal, watched)
        except BaseException:
            code = 126
        try:
            _kill_children()
        finally:
            os._exit(code)

    return split


def _watch(program: int, dal: int, watched: set[int]) -> int:
    """Wait for the program (reaping orphans meanwhile): its exit status, or 137 when stopped first."""
    if os.getppid() != dal:
        return 137
    while True:
        info = signal.sigwaitinfo(watched)
        if info.si_signo != signal.SIGCHLD:
            return 137
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return 137
            if pid == 0:
                break
            if pid == program:
                return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)


def _kill_children() -> None:
    """SIGKILL every child (orphans of the stage become this subreaper's), until none is left."""
    while True:
        for pid in _children():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def _children() -> list[int]:
    me = os.getpid()
    try:
        with open(f"/proc/{me}/task/{me}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        pass
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == me:
                        out.append(int(name))
            except (OSError, ValueError, IndexError):
                pass
    return out


# --- the filter beside Landlock ----------------------------------------------------------------------
# What Landlock does not cover and bubblewrap's namespaces did: a network namespace (here: no socket(2) at
# all while the network is off; Landlock refuses TCP, not UDP, raw or netlink sockets, nor connect(2) to a
# unix socket in a read root), an IPC namespace (System V shared memory, semaphores and message queues of
# DAL's user), and the kernel keyrings of DAL's user, which no namespace of bubblewrap's wall separates
# either. Numbers: arch/x86/entry/syscalls/syscall_64.tbl, include/uapi/asm-generic/unistd.h.
SOCKET = {"x86_64": 41, "aarch64": 198}
REFUSED = {
    "x86_64": {"shmget": 29, "shmat": 30, "shmctl": 31, "semget": 64, "semop": 65, "semctl": 66, "shmdt": 67,
               "msgget": 68, "msgsnd": 69, "msgrcv": 70, "msgctl": 71, "semtimedop": 220, "add_key": 248,
               "request_key": 249, "keyctl": 250},
    "aarch64": {"msgget": 186, "msgctl": 187, "msgrcv": 188, "msgsnd": 189, "semget": 190, "semctl": 191,
                "semtimedop": 192, "semop": 193, "shmget": 194, "shmctl": 195, "shmat": 196, "shmdt": 197,
                "add_key": 217, "request_key": 218, "keyctl": 219},
}
_LD_ABS_W, _JEQ, _RET = 0x20, 0x15, 0x06
_ALLOW, _ERRNO = 0x7FFF0000, 0x00050000


# Landlock checks opening, making and removing files, not changing what the kernel keeps about them: by
# name, a program could chmod, chown or touch any file of DAL's user anywhere. So every call that changes a
# file's mode, owner, times, extended attributes or inode flags (file_setattr) by name is refused
# (utimensat only with a name: with none it is futimens). Through a descriptor the change stays on a file
# Landlock let the program open to read or write (an O_PATH descriptor, which Landlock does not check, gives
# EBADF), so `touch`, `cp -p` and `tar x` work; for root, whose files the read roots' system files are,
# those are refused too but futimens. git init, clone and config chmod their lock file by name and fail
# (docs/policy.md, "The Landlock wall").
BY_NAME = {
    "x86_64": {"chmod": 90, "chown": 92, "lchown": 94, "utime": 132, "setxattr": 188, "lsetxattr": 189,
               "removexattr": 197, "lremovexattr": 198, "utimes": 235, "fchownat": 260, "futimesat": 261,
               "fchmodat": 268, "fchmodat2": 452, "setxattrat": 463, "removexattrat": 466, "file_setattr": 469},
    "aarch64": {"setxattr": 5, "lsetxattr": 6, "removexattr": 14, "lremovexattr": 15, "fchmodat": 53,
                "fchownat": 54, "fchmodat2": 452, "setxattrat": 463, "removexattrat": 466, "file_setattr": 469},
}
BY_DESCRIPTOR = {
    "x86_64": {"fchmod": 91, "fchown": 93, "fsetxattr": 190, "fremovexattr": 199},
    "aarch64": {"fsetxattr": 7, "fremovexattr": 16, "fchmod": 52, "fchown": 55},
}
UTIMENSAT = {"x86_64": 280, "aarch64": 88}


def program(machine: str, network: bool, root: bool = False) -> bytes:
    """The filter as struct sock_filter[]: each refused call returns its errno (socket(2): EACCES, the
    others EPERM); the metadata calls by name refused, utimensat only with a name, and for `root` those by
    descriptor too; every other call, and every other ABI (the set-user-ID filter refuses those), passes."""
    refused = [(nr, errno.EPERM) for nr in (*REFUSED[machine].values(), *BY_NAME[machine].values(),
                                            *(BY_DESCRIPTOR[machine].values() if root else ()))]
    if not network:
        refused.append((SOCKET[machine], errno.EACCES))
    arch = seccomp.ABIS[machine].arch
    # after the checks: utimensat's name (args[1], both halves) must be NULL
    tail = [(_JEQ, 0, 5, UTIMENSAT[machine]), (_LD_ABS_W, 0, 0, 24), (_JEQ, 0, 2, 0), (_LD_ABS_W, 0, 0, 28),
            (_JEQ, 1, 0, 0), (_RET, 0, 0, _ERRNO | errno.EPERM)]
    ins = [(_LD_ABS_W, 0, 0, 4), (_JEQ, 0, 2 * len(refused) + len(tail) + 1, arch), (_LD_ABS_W, 0, 0, 0)]
    for nr, err in refused:
        ins += [(_JEQ, 0, 1, nr), (_RET, 0, 0, _ERRNO | err)]
    ins += tail
    ins.append((_RET, 0, 0, _ALLOW))
    return b"".join(struct.pack("<HBBI", *i) for i in ins)


def _install(code: bytes) -> Callable[[], None]:
    """A function for the child that installs the filter `code` (no_new_privs is already set by then)."""

    class _Fprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    buf = ctypes.create_string_buffer(code, len(code))
    prog = _Fprog(len(code) // 8, ctypes.cast(buf, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    syscall, ref = libc.syscall, ctypes.byref(prog)
    nr = seccomp.ABIS[seccomp.machine()].seccomp_nr

    def setup() -> None:
        if syscall(nr, 1, 0, ref) != 0:  # SECCOMP_SET_MODE_FILTER
            raise OSError(ctypes.get_errno(), "cannot install the Landlock wall's seccomp filter")

    setup.keep = (buf, prog)  # type: ignore[attr-defined]
    return setup
