"""Argument models against the real programs: run each example with GNU coreutils, findutils, grep and diffutils
in a scratch folder, watch with inotify which files it opens, changes, creates, removes or renames, and require
every one of them to be a path the model says it reads or writes.

The table in docs/policy.md ("What each model assumes") says what each model takes an operand for; these
examples, the obsolete forms among them, hold each assumption to the program's real behaviour. A second test
holds every option the models know to the arity (flag or value) that the program's own --help gives it.
"""

from __future__ import annotations

import ctypes
import os
import re
import struct
import subprocess
from pathlib import Path

import pytest

from dal.effects.classify.check import find_program
from dal.effects.classify.programs import FLAG, MODELS, OPTIONAL, ArgUse, analyze_argv

_LIBC = ctypes.CDLL(None, use_errno=True)
IN_OPEN, IN_MODIFY, IN_ATTRIB, IN_MOVED_FROM, IN_MOVED_TO, IN_CREATE, IN_DELETE = (
    0x20, 0x2, 0x4, 0x40, 0x80, 0x100, 0x200)  # fmt: skip
IN_ISDIR = 0x40000000
_WRITE_EVENTS = IN_MODIFY | IN_ATTRIB | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE


class Watch:
    """inotify on every folder of a tree: what a program opened and what it changed, as relative paths."""

    def __init__(self, top: Path) -> None:
        self.top = top
        self.fd = _LIBC.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        assert self.fd >= 0, os.strerror(ctypes.get_errno())
        self.dirs: dict[int, str] = {}
        for dirpath in [d for d, _, _ in os.walk(top)]:  # listed first: the walk itself opens them
            self._add(dirpath)

    def _add(self, path: str) -> None:
        mask = IN_OPEN | _WRITE_EVENTS
        wd = _LIBC.inotify_add_watch(self.fd, os.fsencode(path), mask)
        assert wd >= 0, os.strerror(ctypes.get_errno())
        self.dirs[wd] = os.path.relpath(path, self.top)

    def events(self) -> tuple[set[str], set[str]]:
        opened: set[str] = set()
        changed: set[str] = set()
        while True:
            try:
                buf = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                break
            i = 0
            while i < len(buf):
                wd, mask, _cookie, length = struct.unpack_from("iIII", buf, i)
                name = buf[i + 16 : i + 16 + length].rstrip(b"\0").decode()
                i += 16 + length
                path = os.path.normpath(os.path.join(self.dirs.get(wd, "?"), name))
                if mask & IN_OPEN:
                    opened.add(path)
                if mask & _WRITE_EVENTS and not (mask & IN_ISDIR and mask & IN_ATTRIB and not name):
                    changed.add(path)
        os.close(self.fd)
        return opened, changed


def _setup(top: Path) -> None:
    (top / "A").write_text("b\na\na\nc\n")
    (top / "B").write_text("a\nb\nd\n")
    (top / "D").mkdir()
    (top / "D" / "A").write_text("a\n")
    (top / "D" / "x").write_text("x\n")
    (top / "E").mkdir()
    (top / "E" / "A").write_text("a\nz\n")
    (top / "DATES").write_text("2020-01-01\n")


# (command, the paths the model must read, the paths it must write); None: only the inotify cross-check.
CASES: list[tuple[str, set[str] | None, set[str] | None]] = [
    # uniq [INPUT [OUTPUT]], and the obsolete +N (skip N characters) / -N (skip N fields) anywhere before --
    ("uniq +0 A B", {"A"}, {"B"}),
    ("uniq A +0", {"A"}, set()),
    ("uniq -1 A C", {"A"}, {"C"}),
    ("uniq -c A", {"A"}, set()),
    ("uniq -- A C", {"A"}, {"C"}),
    # sort: +POS1 -POS2 is a key; -o and -T are written
    ("sort +0 -1 A", {"A"}, set()),
    ("sort -o S A", {"A"}, {"S"}),
    ("sort -o +1 A", {"A"}, {"+1"}),
    ("sort -m A B", {"A", "B"}, set()),
    # head -NUM[bkmcqvlz] first only; tail [+-]NUM[bcl] with one file, else +N is a file
    ("head -2c A", {"A"}, set()),
    ("head -n 1 A B", {"A", "B"}, set()),
    ("tail +2 A", {"A"}, set()),
    ("tail -2c A", {"A"}, set()),
    ("tail -c +2 A", {"A"}, set()),
    ("tail +2 A B", {"+2", "A", "B"}, set()),
    # touch: the obsolete MMDDhhmm first operand is a file under the POSIX 2008 default DAL runs with
    ("touch 01010000 T", set(), {"01010000", "T"}),
    ("touch -r A T", {"A"}, {"T"}),
    ("touch -c -d 2020-01-01 A", set(), {"A"}),
    ("date -r A +%s", {"A"}, set()),
    ("date -f DATES +%F", {"DATES"}, set()),
    ("cut -d, -f1 A B", {"A", "B"}, set()),
    ("paste -s -d, A B", {"A", "B"}, set()),
    ("comm -12 A B", {"A", "B"}, set()),
    # diff FILE DIR compares FILE with DIR/FILE; two folders entry by entry; --from-file / --to-file
    ("diff A D", {"A", "D", "D/A"}, set()),
    ("diff D A", {"A", "D", "D/A"}, set()),
    ("diff --from-file=B A D", {"A", "B", "D", "D/B"}, set()),
    ("diff --to-file=D A", {"A", "D", "D/A"}, set()),
    ("diff D E", None, set()),
    ("diff -r --no-dereference D E", None, set()),
    ("diff -u A B", {"A", "B"}, set()),
    ("stat -c %s A D", {"A", "D"}, set()),
    ("du -s D", {"D"}, set()),
    ("ls -R D", {"D"}, set()),
    ("ls", {"."}, set()),
    ("wc -l A B", {"A", "B"}, set()),
    ("grep -f A B", {"A", "B"}, set()),
    ("grep -r a D", {"D"}, set()),
    ("grep -e a -f B A", {"A", "B"}, set()),
    ("readlink -f A", {"A"}, set()),
    ("realpath --relative-to=D A", {"A", "D"}, set()),
    ("sha256sum A B", {"A", "B"}, set()),
    ("cat A B", {"A", "B"}, set()),
    ("test A -nt B", {"A", "B"}, set()),
    ("[ -e A -a -d D ]", {"A", "D"}, set()),
    ("find D -newer A -name x", {"D", "A"}, set()),
    ("seq 3", set(), set()),
    ("sleep 0", set(), set()),
    # cp and mv: DIR/name for a folder destination, -t, -T, --parents, backups (-b, -S implies -b)
    ("cp A C", {"A"}, {"C"}),
    ("cp A D", {"A"}, {"D/A"}),
    ("cp -t D A B", {"A", "B"}, {"D", "D/A", "D/B"}),  # -t DIR: the folder is checked as written too
    ("cp -T A C", {"A"}, {"C"}),
    ("cp --parents D/A E", {"D/A"}, {"E/D", "E/D/A"}),  # and every folder it makes on the way
    ("cp --parents ./D//A E", {"D/A"}, {"E/D", "E/D/A"}),
    # a source ending in `.` (or `..`: the hostile corpus, cp-r-dotdot-into-git) is copied into the
    # destination itself (cp.c)
    ("cp -r D/. E", {"D"}, {"E"}),
    ("cp -r D F", {"D"}, {"F"}),
    ("cp -b A B", {"A"}, {"B", "B~", "B.~1~"}),
    ("cp -S .bak A B", {"A"}, {"B", "B.bak", "B.~1~"}),
    ("mv A C", {"A"}, {"A", "C"}),
    ("mv A D", {"A"}, {"A", "D/A"}),
    ("mv -b A B", {"A"}, {"A", "B", "B~", "B.~1~"}),
    ("rm -f A", set(), {"A"}),
    ("rm -r D", set(), {"D"}),
    ("mkdir -p d1/d2", set(), {"d1/d2"}),
    ("mkdir -m 700 d3", set(), {"d3"}),
    ("tee T1 T2", set(), {"T1", "T2"}),
    ("tee -a A", set(), {"A"}),
]


def _norm(paths: tuple[str, ...] | set[str]) -> set[str]:
    return {os.path.normpath(p) for p in paths}


def _model_paths(use: ArgUse) -> tuple[set[str], set[str], set[str]]:
    """(paths read, paths written, trees read or written as a whole) of a model's answer."""
    reads = _norm(use.reads) | _norm(set(use.read_entries))
    writes = _norm(use.writes) | _norm(use.writes_nofollow)
    trees = _norm(set(use.read_trees)) | _norm(set(use.read_entries)) | {os.path.normpath(s) for s, _, _ in use.places}
    trees |= {os.path.normpath(d) for _, d, _ in use.places}
    return reads, writes, trees


def _covered(path: str, paths: set[str], trees: set[str]) -> bool:
    if path in paths or path == ".":
        return True
    return any(path.startswith(t + "/") for t in trees | paths if t != ".") or any(
        p.startswith(path + "/") for p in paths  # a folder on the way to a path (mkdir -p, cp --parents)
    )


@pytest.mark.parametrize(("command", "reads", "writes"), CASES)
def test_the_real_program_touches_only_what_its_model_says(
    tmp_path: Path, command: str, reads: set[str] | None, writes: set[str] | None
) -> None:
    argv = tuple(command.split())
    top = tmp_path / "s"
    top.mkdir()
    _setup(top)
    use = analyze_argv(argv, lambda p: (top / p).is_dir())
    assert use is not None and use.unsafe is None, use
    model_reads, model_writes, trees = _model_paths(use)
    if reads is not None:
        assert model_reads == reads, f"{command}: the model reads {model_reads}"
    if writes is not None:
        assert model_writes == writes, f"{command}: the model writes {model_writes}"
    exe = find_program(argv[0])
    assert exe is not None
    watch = Watch(top)
    subprocess.run([exe, *argv[1:]], cwd=top, stdin=subprocess.DEVNULL, capture_output=True, timeout=10,
                   env={"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8", "HOME": str(top)})  # fmt: skip
    opened, changed = watch.events()
    for path in sorted(changed):
        assert _covered(path, model_writes, trees), f"{command} changed {path}; the model writes {model_writes}"
    for path in sorted(opened - changed):
        assert _covered(path, model_reads | model_writes, trees), (
            f"{command} opened {path}; the model reads {model_reads}"
        )


def test_the_obsolete_forms_really_mean_what_the_models_say(tmp_path: Path) -> None:
    """The forms whose meaning surprised: checked on their output, not only on the files touched."""
    _setup(tmp_path)

    def run(cmd: str) -> str:
        return subprocess.run(cmd.split(), cwd=tmp_path, capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"},
                              stdin=subprocess.DEVNULL).stdout  # fmt: skip

    run("uniq +0 A OUT")
    assert (tmp_path / "OUT").read_text() == "b\na\nc\n"  # read A, wrote OUT
    assert run("tail +3 A") == "a\nc\n"
    assert run("head -2c A") == "b\n"
    assert run("sort +1 -2 A") == run("sort -k2,2 A")
    run("touch 01010000 T")
    assert (tmp_path / "01010000").exists() and (tmp_path / "T").exists()


@pytest.mark.parametrize("command", ["tail -3f A", "tail +2f A", "date 010100002020", "diff -r D E"])
def test_the_dangerous_obsolete_forms_are_unsafe(command: str) -> None:
    use = analyze_argv(tuple(command.split()), lambda p: p in ("D", "E"))
    assert use is not None and use.unsafe


_LONG = re.compile(r"^--([\w-]+)(\[=[^\]]+\]|=\S+|\s+[A-Z]\S*)?")
# What the --help scraping below reads wrongly (checked by hand against the manuals):
# ls -p is a flag ("-p, --indicator-style=slash" names the value it sets); sort -c/-C likewise; stat's
# "-c  --format=FORMAT" has no comma; du --time is listed both bare and as --time=WORD; coreutils 9.1's
# cp/mv --update is a flag (the models accept --update=X, which the program then refuses).
_SCRAPE_EXCEPTIONS = {("ls", "-p"), ("sort", "-c"), ("sort", "-C"), ("sort", "--check"), ("stat", "-c"),
                      ("du", "--time"), ("cp", "--update"), ("mv", "--update")}  # fmt: skip


def _help_arity(program: str) -> tuple[dict[str, str], dict[str, str]]:
    out = subprocess.run([program, "--help"], capture_output=True, text=True, env={"LC_ALL": "C"}).stdout
    shorts: dict[str, str] = {}
    longs: dict[str, str] = {}
    for line in out.splitlines():
        spec = re.split(r"\s{2,}", line.strip())[0]
        if not spec.startswith("-"):
            continue
        parts = [p.strip() for p in re.split(r",\s*", spec)]
        value = "flag"
        for part in parts:
            m = _LONG.match(part)
            if m and m.group(2):
                value = "optional" if m.group(2).startswith("[") else "value"
        for part in parts:
            m = _LONG.match(part)
            if m:
                g = m.group(2) or ""
                longs[m.group(1)] = "optional" if g.startswith("[") else ("value" if g else "flag")
            elif m := re.match(r"^-(\w)(\[\S+\]|\s+\S+)?$", part):
                g = m.group(2) or ""
                shorts[m.group(1)] = "optional" if g.startswith("[") else ("value" if g or value == "value" else "flag")
    return shorts, longs


def _arity(kind: str) -> str:
    return "flag" if kind == FLAG else "optional" if kind == OPTIONAL else "value"


@pytest.mark.parametrize("program", sorted(n for n, m in MODELS.items() if not m.raw))
def test_every_option_a_model_knows_takes_a_value_exactly_when_the_manual_says(program: str) -> None:
    shorts, longs = _help_arity(program)
    assert longs, f"{program} --help lists no options"
    model = MODELS[program]
    for table, helped, dash in ((model.short, shorts, "-"), (model.long, longs, "--")):
        for name, kind in table.items():
            if name not in helped or (program, dash + name) in _SCRAPE_EXCEPTIONS:
                continue
            assert _arity(kind) == helped[name], f"{program} {dash}{name}: {program} --help says {helped[name]}"
