"""The paths a git index file names, read the way git's read-cache.c reads them (versions 2, 3 and 4).

Git checks a path's components (verify_path: no `.git`, case-insensitively) when it reads a tree into the
index, but not when it loads an index file: an index a program forged inside the wall would make the
operator's `git checkout -- .` write anywhere below the work tree, `.git/hooks` and `.git/config`
included. The wall (sandbox.py) reads the index after a pipeline and puts back the one from before when
an entry names such a path. Anything this reader does not understand counts as forged.
"""

from __future__ import annotations

import struct

__all__ = ["IndexUnreadable", "index_entries", "index_entries_with_modes", "bad_component", "blob_id"]

_HASH_LENGTHS = (20, 32)  # SHA-1, SHA-256 object names


class IndexUnreadable(Exception):
    """Not an index file this reader understands."""


def index_entries(data: bytes) -> list[tuple[str, bytes]]:
    """Every entry's (path, object name), the path's undecoded bytes as surrogate escapes; IndexUnreadable if
    the data is not an index of version 2, 3 or 4 with SHA-1 or SHA-256 object names, or uses a split index
    (its entries are in another file)."""
    return [(path, oid) for path, oid, _ in index_entries_with_modes(data)]


def index_entries_with_modes(data: bytes) -> list[tuple[str, bytes, int]]:
    """As index_entries, with each entry's mode (0o100644, 0o100755, 0o120000 a symlink, 0o160000 a gitlink)."""
    if len(data) < 12 or data[:4] != b"DIRC":
        raise IndexUnreadable("no index header")
    version, count = struct.unpack(">II", data[4:12])
    if version not in (2, 3, 4):
        raise IndexUnreadable(f"index version {version}")
    for hash_len in _HASH_LENGTHS:
        try:
            paths, end = _entries(data, version, count, hash_len)
        except IndexUnreadable:
            continue
        if _extensions_fit(data, end, hash_len):
            return paths
    raise IndexUnreadable("entries or extensions do not fit")


def _entries(data: bytes, version: int, count: int, hash_len: int) -> tuple[list[tuple[str, bytes, int]], int]:
    pos, prev = 12, b""
    paths: list[tuple[str, bytes, int]] = []
    fixed = 40 + hash_len + 2
    for _ in range(count):
        start = pos
        if pos + fixed > len(data):
            raise IndexUnreadable("truncated entry")
        oid = data[pos + 40 : pos + 40 + hash_len]
        (mode,) = struct.unpack(">I", data[pos + 24 : pos + 28])
        (flags,) = struct.unpack(">H", data[pos + fixed - 2 : pos + fixed])
        pos += fixed
        if flags & 0x4000:
            if version < 3:
                raise IndexUnreadable("extended flags in a version 2 index")
            pos += 2
        if version == 4:
            strip, pos = _varint(data, pos)
            if strip > len(prev):
                raise IndexUnreadable("bad prefix")
            nul = data.find(b"\0", pos)
            if nul < 0:
                raise IndexUnreadable("unterminated path")
            name = prev[: len(prev) - strip] + data[pos:nul]
            pos = nul + 1
        else:
            nul = data.find(b"\0", pos)
            if nul < 0:
                raise IndexUnreadable("unterminated path")
            name = data[pos:nul]
            pos = start + ((nul - start) // 8 + 1) * 8  # NUL padding to a multiple of 8
        prev = name
        paths.append((name.decode("utf-8", errors="surrogateescape"), oid, mode))
    return paths, pos


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """git's varint.c decode_varint."""
    if pos >= len(data):
        raise IndexUnreadable("truncated varint")
    c = data[pos]
    pos += 1
    val = c & 127
    while c & 128:
        if pos >= len(data) or val > 1 << 32:
            raise IndexUnreadable("bad varint")
        c = data[pos]
        pos += 1
        val = ((val + 1) << 7) + (c & 127)
    return val, pos


def _extensions_fit(data: bytes, pos: int, hash_len: int) -> bool:
    """The extensions after the entries end exactly at the trailing hash, and none is a split index link."""
    end = len(data) - hash_len
    while pos + 8 <= end:
        sig = data[pos : pos + 4]
        (size,) = struct.unpack(">I", data[pos + 4 : pos + 8])
        if sig == b"link":
            raise IndexUnreadable("a split index (entries in a sharedindex file)")
        pos += 8 + size
    return pos == end


def blob_id(content: bytes, hash_len: int) -> bytes:
    """The object name git gives a file's content as a blob (SHA-1 or SHA-256 by the length)."""
    import hashlib

    h = hashlib.sha1 if hash_len == 20 else hashlib.sha256
    return h(b"blob %d\0" % len(content) + content).digest()


# Code points HFS+ ignores when it compares names (git's utf8.c is_hfs_dotgit skips them): `.g\u200cit` is
# `.git` there.
_HFS_IGNORED = frozenset([*range(0x200C, 0x2010), *range(0x202A, 0x202F), *range(0x206A, 0x2070), 0xFEFF])


def bad_component(path: str) -> bool:
    """Whether git's verify_path (with core.protectHFS/NTFS, leaning to refuse) would reject `path`: a
    `.git` component in any case, also with trailing dots or spaces, with code points HFS+ ignores, after
    a backslash or before a colon (NTFS), or as the short name GIT~1 (any GIT~N); `..`, `.` or an empty
    component; an absolute path."""
    if path.startswith("/"):
        return True
    for part in path.split("/"):
        if part in ("", ".", ".."):
            return True
        folded = "".join(c for c in part if ord(c) not in _HFS_IGNORED).lower()
        for piece in folded.replace(":", "\\").split("\\"):
            if piece.rstrip(". ") == ".git" or piece.startswith("git~"):
                return True
    return False
