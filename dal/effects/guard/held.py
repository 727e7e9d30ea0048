"""What a pipeline holds, kept on disk while it runs, so that a DAL killed meanwhile does not skip the checks
after it (docs/policy.md, "Killed with DAL").

Before a pipeline that runs a program outside the default toolset, GitGuard holds what the workspace's
repository references and the Wall holds the protected names (placeholders, nested policy files and stores,
`.git` files, the index). Both are checked and undone when the pipeline ends. A DAL killed with `kill -9`
meanwhile never got there: so the same state is written, durably, to WORKSPACE/.dal/held/OWNER-N.json before
the pipeline's first stage starts, and removed once the checks are done. `.dal/` is never writable by a
script (the check denies it, the wall shows it read-only). A later run in the workspace, before its first
effect (recover.py), finishes each record whose DAL process is gone: the checks run as they would have, what
they find is undone, and the run names it (stderr and its receipt's policy.notices). A record that cannot be
read stops that run (fail closed).
"""

from __future__ import annotations

import json
import os
import stat
import sys

from dal.core import statedir
from dal.effects.guard.gitguard import GitGuard
from dal.effects.policy import Policy
from dal.effects.wall import owners, reaper
from dal.effects.wall.sandbox import GIT_SWEPT, Wall

__all__ = ["Held", "HeldUnreadable", "finish_dead"]

_VERSION = 1
_counter = [0]


class HeldUnreadable(Exception):
    """A record a killed DAL left cannot be read: the run does not start (the checks it holds cannot run)."""


def _key() -> bytes | None:
    """The operator's own key for records (32 random bytes in $XDG_STATE_HOME/dal/held.key, else
    ~/.local/state/dal/held.key, mode 0600), made on first use; None when it cannot be had. A record is only
    finished when its MAC checks: a record some other local user planted in an enclosing folder (/tmp/.dal/held)
    or a script had git write into a nested `.dal` would otherwise make the operator's next `dal run` write and
    remove files of its choosing. No script reads or changes it, also when a root covers HOME
    (the operator runs DAL in ~, or as root in /root): its folder is DAL's own state (statedir.py), which
    every policy hides and protects and the wall covers. A record's power is bounded besides,
    whatever its MAC (_bounded)."""
    folder = statedir.state_dir()
    key = _key_in(folder, own_folder=False) if folder is not None else None
    if key is None:  # a HOME that cannot hold it (a service user's /nonexistent): /tmp's folder, if ours alone
        key = _key_in(statedir.fallback_dir(), own_folder=True)
    return key


def _key_in(folder: str, own_folder: bool) -> bytes | None:
    path = os.path.join(folder, "held.key")
    try:
        if own_folder:
            try:
                os.mkdir(folder, 0o700)
            except FileExistsError:
                pass
            st = os.lstat(folder)  # another user may have made it first: then it is not a place for a secret
            if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
                return None
        else:
            os.makedirs(folder, mode=0o700, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except FileExistsError:
            pass
        else:
            try:
                os.write(fd, os.urandom(32))
                os.fsync(fd)
            finally:
                os.close(fd)
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            st = os.fstat(fd)
            if st.st_uid != os.geteuid() or st.st_mode & 0o077:
                return None  # not the operator's own, or readable by others: not a secret
            key = os.read(fd, 64)
        finally:
            os.close(fd)
    except OSError:
        return None
    return key if len(key) == 32 else None


def _mac(key: bytes, body: bytes) -> str:
    import hashlib  # here: OpenSSL loads with it (2 ms), and most commands write no record
    import hmac

    return hmac.new(key, body, hashlib.sha256).hexdigest()


def _same(a: str, b: str) -> bool:
    import hmac

    return hmac.compare_digest(a, b)


def _folder(policy: Policy) -> str:
    return folder_of(policy.workspace)


def folder_of(workspace: str) -> str:
    return os.path.join(workspace, ".dal", "held")


class Held:
    """The record of one pipeline's guard and wall; remove() once both are finished."""

    def __init__(self, path: str | None, made: list[str] | None = None) -> None:
        self.path = path
        self.made = made or []  # folders made for it (.dal/held, a placeholder .dal): removed with it when empty

    @classmethod
    def write(cls, policy: Policy, guard: GitGuard | None, wall: Wall | None) -> Held:
        """Write the record (fsynced, with its folder) before the pipeline starts; nothing when neither holds
        anything. An OSError means the pipeline must not start."""
        gstate = guard.state() if guard is not None and guard.dirs else None
        wstate = wall.state() if wall is not None else None
        if gstate is None and wstate is None:
            return cls(None)
        folder = _folder(policy)
        made = [folder] if not os.path.isdir(folder) else []
        dal = os.path.dirname(folder)
        if wall is not None and any(p == dal for p, _, _ in wall.placeholders):
            made.append(dal)  # the wall's stand-in for a missing .dal: it could not remove it, with this inside
        os.makedirs(folder, mode=0o755, exist_ok=True)
        _counter[0] += 1
        name = f"{reaper.owner_tag(os.getpid())}-{_counter[0]}.json"
        # "owner": where this process runs (its pid and start time are the name's), so that a start in a
        # container sharing the workspace, or on another host, does not take it for gone (owners.verdict).
        body = json.dumps({"version": _VERSION, "workspace": policy.workspace, "owner": owners.here(),
                           "guard": gstate, "wall": wstate})
        key = _key()
        if key is None:
            # An unsigned record is never finished, so a kill -9 would leave the pipeline's undo undone without
            # a word: such a pipeline does not start.
            folder_of_key = statedir.state_dir()
            raise OSError(f"there is no key of the operator's to sign it with (DAL keeps one in "
                          f"{folder_of_key + '/held.key' if folder_of_key else '$HOME/.local/state/dal/held.key'}, "
                          f"else {statedir.fallback_dir()}/held.key, mode 0600, made on first use, and can use "
                          "neither here); give DAL a folder of yours: XDG_STATE_HOME=/an/absolute/folder")
        data = json.dumps({"body": body, "mac": _mac(key, body.encode())}).encode()
        tmp = os.path.join(folder, "." + name)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        path = os.path.join(folder, name)
        os.rename(tmp, path)
        _fsync_dir(folder)
        return cls(path, made)

    def remove(self) -> None:
        if self.path is not None:
            try:
                os.unlink(self.path)
            except OSError:
                pass
            self.path = None
        for folder in self.made:
            try:
                os.rmdir(folder)  # only while empty
            except OSError:
                break
        self.made = []


def _fsync_dir(folder: str) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _owner_of(name: str) -> tuple[int, int] | None:
    """The (pid, start time) of the DAL process that wrote the record `name` (PID-START-N.json)."""
    parts = name.split(".")[0].split("-")
    if len(parts) < 2 or not (parts[0].isdigit() and parts[1].isdigit()):
        return None
    return int(parts[0]), int(parts[1])


def finish_dead(policy: Policy) -> list[str]:
    """Finish the checks of every record in the workspace whose DAL process is provably gone (owners.verdict):
    what they undid, as notices. HeldUnreadable when one cannot be read (it is left for the operator to look
    at). A record of a DAL process that ran elsewhere (another pid namespace, another host) is left alone,
    said in one line on stderr: from here it cannot be told whether that process still runs its pipeline."""
    folder = _folder(policy)
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    notices: list[str] = []
    me = reaper.owner_tag(os.getpid())
    for name in names:
        owner = _owner_of(name) if name.endswith(".json") and not name.startswith(".") else None
        if owner is None:
            continue
        # Read whatever its pid names here: a record of an earlier boot of this host is its DAL's although the
        # pid and start time now name a process again (early-boot processes get the same ones each boot).
        path = os.path.join(folder, name)
        try:
            with open(path, "rb") as f:
                outer = json.loads(f.read())
            body, mac = outer.get("body"), outer.get("mac")
        except FileNotFoundError:
            continue  # its pipeline ended meanwhile
        except (OSError, ValueError, AttributeError) as e:
            if not owners.gone(*owner):
                continue  # its pid names a process that runs here: not ours to judge (nor to refuse on)
            raise HeldUnreadable(f"{path}: {e}") from None
        key = _key()
        if not (isinstance(body, str) and isinstance(mac, str) and key is not None
                and _same(mac, _mac(key, body.encode()))):
            continue  # not written by this operator's DAL (or by one without a key): not acted on, left in place
        try:
            record = json.loads(body)
            if record.get("version") != _VERSION or record.get("workspace") != policy.workspace:
                raise ValueError(f"version {record.get('version')!r}, workspace {record.get('workspace')!r}")
            _bounded(policy, record)
        except (ValueError, AttributeError) as e:
            raise HeldUnreadable(f"{path}: {e}") from None
        where = record.get("owner")
        verdict = owners.verdict(*owner, where)
        if verdict is None:
            sys.stderr.write(f"dal: note: left alone {path}: its DAL process ran {owners.describe(where)} and may "
                             "still run that pipeline; once it is over, that DAL's next start finishes the record "
                             "(or, if that cannot happen, the operator checks the repository and protected files "
                             "and removes it)\n")
            continue
        if verdict != "gone":
            continue
        # Claimed by renaming: two runs starting at once do not both undo the same pipeline.
        claimed = os.path.join(folder, f"{me}-claim-{name}")
        try:
            os.rename(path, claimed)
        except OSError:
            continue
        done = _finish(policy, record)
        os.unlink(claimed)
        if done:
            notices.append("a DAL process killed while a command ran in this workspace did not check what that "
                           "command left; checked now: " + "; ".join(done))
    return notices


def _bounded(policy: Policy, record: dict) -> None:
    """ValueError unless every path the record names is inside the workspace it was found in or a write root
    of the policy finishing it -- where the pipeline it records could have acted -- (a git work tree's top: an
    enclosing folder). The MAC says who wrote a record; this bounds what any record, a forged one too (a key
    stolen), can make a start write or remove: never a file outside."""
    roots = list(dict.fromkeys(os.path.normpath(r) for r in (policy.workspace, *policy.write_roots)))

    def inside(path: object, what: str) -> None:
        if not isinstance(path, str) or not path.startswith("/") or os.path.normpath(path) != path:
            raise ValueError(f"{what}: {path!r} is not a plain absolute path")
        real = os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))
        if not all(any(p == r or r == "/" or p.startswith(r + "/") for r in roots) for p in (path, real)):
            raise ValueError(f"{what} names {path}, outside the workspace and this policy's write roots: a record "
                             "DAL writes names nothing there, so it is not acted on")

    def each(items: object, what: str) -> None:
        if not isinstance(items, list | dict):
            raise ValueError(f"{what}: not a list")
        for item in items:
            inside(item, what)

    try:
        wall, guard = record.get("wall"), record.get("guard")
        if wall is not None:
            inside(wall["ws"], "the wall's workspace")
            each(wall["write_roots"], "the wall's write roots")
            each([p[0] for p in wall["placeholders"]], "a placeholder")
            if wall["sweep_at"] is not None:
                each(wall["sweep_at"][:2], "the repository swept")
                if not set(wall["sweep_at"][2]) <= {*GIT_SWEPT, "config"}:
                    raise ValueError(f"the repository swept: {wall['sweep_at'][2]!r} are not the names DAL sweeps")
            if wall["index"] is not None:
                inside(wall["index"][0], "the index")
            for key in ("git_marks", "nested", "nested_git", "absent", "gitfiles", "live", "kept"):
                each(wall.get(key) or [], f"the wall's {key.replace('_', ' ')}")
        if guard is not None:
            for key in ("held_paths", "dirs", "before"):
                each(guard[key], f"the repository's {key.replace('_', ' ')}")
            if guard["common"] is not None:
                inside(guard["common"], "the repository")
            top = guard["top"]
            if top is not None and not (isinstance(top, str) and (policy.workspace == top or top == "/"
                                                                   or policy.workspace.startswith(top + "/"))):
                raise ValueError(f"the work tree's top {top!r} does not enclose the workspace")
    except (KeyError, TypeError, IndexError) as e:
        raise ValueError(f"not a record DAL writes ({type(e).__name__}: {e})") from None


def _finish(policy: Policy, record: dict) -> list[str]:
    """Close the recorded wall, then finish the recorded guard, as executor._run_pipeline would have."""
    out: list[str] = []
    if record.get("wall") is not None:
        if record["wall"].get("kind") == "landlock":  # imported only then: it brings shutil and tempfile
            from dal.effects.wall.landlock_wall import LandlockWall

            kind: type = LandlockWall
        else:
            kind = Wall
        wall = kind.from_state(policy, record["wall"])
        wall.close()
        if wall.undone:
            out.append("undid what a program did to protected names: " + ", ".join(wall.undone))
        if wall.swept:
            out.append("removed " + ", ".join(wall.swept))
        if wall.unchecked:
            out.append("could not check " + ", ".join(wall.unchecked))
    if record.get("guard") is not None:
        out += GitGuard.from_state(policy, record["guard"]).finish()
    return out
