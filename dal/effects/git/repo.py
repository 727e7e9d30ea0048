"""What git will find on the filesystem: the repository it discovers, the remotes its configuration names,
where a remote URL leads, the paths a patch names. No policy here: check.py decides with these facts.

Everything is read the way git 2.39 reads it (setup.c's discovery, config.c's syntax, transport.c's URL
kinds, apply.c's patch headers), but only as far as a decision needs: where this code is unsure, the answer
leans to the one the checker denies.
"""

from __future__ import annotations

import os
import re

__all__ = [
    "find_git_dir", "repository_at", "common_dir", "config_entries", "remote_urls", "configured_remotes",
    "url_kind", "patch_paths", "legacy_remotes", "alternates", "LIVE_NAMES", "is_live",
]

# What git reads in a git directory as its configuration or code, or as where the rest of it is: the config
# (and config.worktree), hooks/, info/ (attributes, exclude, grafts), commondir, HEAD, the git directories of
# submodules and linked worktrees, a rebase's or sequencer's todo list (`exec` lines), legacy remote files;
# and objects/info/ (alternates). Not the objects and refs it stores. In a folder that passes for a git
# directory each of these is the repository's own (a tracked fixture's config rewritten too).
LIVE_NAMES = frozenset({"HEAD", "commondir", "config", "config.worktree", "hooks", "info", "modules", "worktrees",
                        "rebase-merge", "rebase-apply", "sequencer", "remotes", "branches", "gitdir"})


def is_live(rel: str) -> bool:
    """Whether `rel`, a path inside a git directory, is one of LIVE_NAMES or below one, or in objects/info/."""
    first, _, rest = rel.partition("/")
    return first in LIVE_NAMES or (first == "objects" and rest.partition("/")[0] == "info")


def _is_git_directory(d: str) -> bool:
    """setup.c's is_git_directory: HEAD, objects/ and refs/ (or a commondir file standing for the last two)."""
    if not os.path.lexists(os.path.join(d, "HEAD")):
        return False
    if os.path.isfile(os.path.join(d, "commondir")):
        return True
    return os.path.isdir(os.path.join(d, "objects")) and os.path.isdir(os.path.join(d, "refs"))


def _gitfile(path: str) -> str | None:
    """The repository a `.git` file points to (`gitdir: PATH`, relative to the file's folder). Read whole, as
    git does (setup.c read_gitfile_gently strips only trailing CR and LF: a path may hold a newline)."""
    text = git_text(path)
    if text is None or not text.startswith("gitdir: "):
        return None
    return os.path.realpath(os.path.join(os.path.dirname(path), text[len("gitdir: ") :]))


def git_text(path: str) -> str | None:
    """A one-value file of git's (`.git` file, commondir) as git reads it: the whole file with trailing CR and
    LF stripped; None if unreadable or larger than git accepts (1 MiB)."""
    try:
        with open(path, "rb") as f:
            data = f.read((1 << 20) + 1)
    except OSError:
        return None
    if len(data) > 1 << 20:
        return None
    return data.decode("utf-8", errors="surrogateescape").rstrip("\r\n")


def repository_at(top: str) -> str | None:
    """The git directory of the repository at the folder `top`: top/.git (a folder, or a file pointing
    elsewhere), or top itself when it is a bare repository."""
    dotgit = os.path.join(top, ".git")
    if os.path.isdir(dotgit) and _is_git_directory(dotgit):  # a .git folder that is not a repository: skipped
        return os.path.realpath(dotgit)
    if os.path.isfile(dotgit):
        return _gitfile(dotgit) or os.path.realpath(dotgit)
    if _is_git_directory(top):
        return os.path.realpath(top)
    return None


def find_git_dir(cwd: str) -> tuple[str, str] | None:
    """(top, git directory) of the repository git discovers from `cwd` (setup_git_directory_gently: the
    nearest folder upward holding `.git`, or being a bare repository itself), or None outside any."""
    d = os.path.realpath(cwd)
    while True:
        found = repository_at(d)
        if found is not None:
            return d, found
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent


def common_dir(git_dir: str) -> str | None:
    """The main repository of a linked worktree's git directory (its `commondir` file), or None."""
    try:
        with open(os.path.join(git_dir, "commondir"), encoding="utf-8", errors="surrogateescape") as f:
            text = f.read(4096).strip()
    except OSError:
        return None
    return os.path.realpath(os.path.join(git_dir, text)) if text else None


# --- configuration ----------------------------------------------------------------------------------

_SECTION = re.compile(r'\[\s*([A-Za-z0-9.-]+)(?:\s+"((?:[^"\\\n]|\\.)*)")?\s*\]')
_KEY = re.compile(r"([A-Za-z][A-Za-z0-9-]*)\s*(?:=(.*))?$")
_MAX_CONFIG = 1 << 20
_UNESCAPE = re.compile(r"\\(.)")


def _value(raw: str) -> str:
    """A config value: quotes removed, escapes decoded, an unquoted # or ; starting a comment."""
    out: list[str] = []
    quoted = False
    i = 0
    while i < len(raw):
        c = raw[i]
        if c == '"':
            quoted = not quoted
        elif c == "\\" and i + 1 < len(raw):
            out.append({"n": "\n", "t": "\t", "b": "\b"}.get(raw[i + 1], raw[i + 1]))
            i += 1
        elif c in "#;" and not quoted:
            break
        else:
            out.append(c)
        i += 1
    return "".join(out).strip()


def config_entries(path: str, home: str | None, _depth: int = 0) -> list[tuple[str, str]]:
    """(`section.subsection.key` lower-cased but the subsection, value) of one config file, its includes
    followed (`include.path`, and `includeIf` whatever its condition: reading more only denies more)."""
    if _depth > 10:
        return []
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as f:
            text = f.read(_MAX_CONFIG)
    except OSError:
        return []
    text = re.sub(r"\\\n", "", text)  # continuation lines
    entries: list[tuple[str, str]] = []
    section = ""
    for line in text.splitlines():
        rest = line.strip()
        while rest:
            if rest[0] in "#;":
                break
            m = _SECTION.match(rest)
            if m:
                name = m.group(1).lower()
                if m.group(2) is not None:
                    section = name + "." + _UNESCAPE.sub(r"\1", m.group(2))
                else:
                    head, dot, sub = name.partition(".")  # the old [remote.origin] spelling
                    section = f"{head}.{sub}" if dot else head
                rest = rest[m.end() :].strip()
                continue
            m = _KEY.match(rest)
            if m and section:
                key = f"{section}.{m.group(1).lower()}"
                value = _value(m.group(2)) if m.group(2) is not None else "true"
                entries.append((key, value))
                if key == "include.path" or (key.startswith("includeif.") and key.endswith(".path")):
                    if value.startswith("~/") and home is None:
                        break  # in a HOME that is empty when the program starts
                    inc = os.path.join(home, value[2:]) if value.startswith("~/") and home else value
                    inc = os.path.join(os.path.dirname(path), inc)
                    entries += config_entries(inc, home, _depth + 1)
            break
    return entries


def configured(git_dir: str | None, home: str | None = None) -> list[tuple[str, str]]:
    """Every config entry git reads in a repository: system, global (only with a `home`: programs DAL runs
    have a HOME of their own, empty when they start, so they read none), the repository's own and its
    worktree's."""
    files = ["/etc/gitconfig"]
    if home is not None:
        files += [os.path.join(home, ".config", "git", "config"), os.path.join(home, ".gitconfig")]
    if git_dir is not None:
        common = common_dir(git_dir) or git_dir
        files += [os.path.join(common, "config"), os.path.join(git_dir, "config.worktree")]
    out: list[tuple[str, str]] = []
    for f in files:
        out += config_entries(f, home)
    return out


def configured_remotes(entries: list[tuple[str, str]]) -> set[str]:
    return {k[len("remote.") : -len(".url")] for k, _ in entries if k.startswith("remote.") and k.endswith(".url")}


def _rewrite(url: str, entries: list[tuple[str, str]], push: bool) -> str:
    """url.BASE.insteadOf (and pushInsteadOf): the longest matching prefix is replaced by BASE."""
    best = ("", "")
    keys = ("insteadof", "pushinsteadof") if push else ("insteadof",)
    for k, v in entries:
        if k.startswith("url.") and k.rsplit(".", 1)[-1] in keys and url.startswith(v) and len(v) > len(best[1]):
            best = (k[len("url.") : k.rindex(".")], v)
    return best[0] + url[len(best[1]) :] if best[1] else url


def _valid_nick(name: str) -> bool:
    """remote.c's valid_remote_nick: a name git may look up as a remote rather than take for a URL."""
    return bool(name) and name not in (".", "..") and "/" not in name


def legacy_remotes(git_dir: str | None) -> dict[str, list[str]]:
    """The remotes of the files git still reads when the configuration names no such remote (remote.c,
    read_remotes_file and read_branches_file): `remotes/NAME` (`URL: ...` lines) and `branches/NAME`
    (`URL#branch`), in the repository's common directory. {name: [urls]}."""
    out: dict[str, list[str]] = {}
    if git_dir is None:
        return out
    common = common_dir(git_dir) or git_dir
    for folder in ("remotes", "branches"):
        top = os.path.join(common, folder)
        try:
            names = sorted(os.listdir(top))
        except OSError:
            continue
        for name in names[:1000]:
            try:
                with open(os.path.join(top, name), encoding="utf-8", errors="surrogateescape") as f:
                    text = f.read(1 << 16)
            except OSError:
                continue
            urls = out.setdefault(name, [])
            for line in text.splitlines():
                line = line.strip()
                if folder == "remotes" and line.startswith("URL:"):
                    urls.append(line[4:].strip())
                elif folder == "branches" and line:
                    urls.append(line.split("#", 1)[0])
                    break
    return out


def remote_urls(name_or_url: str, entries: list[tuple[str, str]],
                legacy: dict[str, list[str]] | None = None) -> list[str]:
    """The URLs git may use for a remote operand: a configured remote's url and pushurl, those of a legacy
    remote file of that name (`legacy_remotes`), else the operand itself; each rewritten by insteadOf. Where
    git would take one and not another, all are returned: the checker checks each."""
    urls = [v for k, v in entries if k in (f"remote.{name_or_url}.url", f"remote.{name_or_url}.pushurl")]
    if _valid_nick(name_or_url):
        urls += (legacy or {}).get(name_or_url, [])
    if not urls:
        urls = [name_or_url]
    return [u for url in urls for u in {_rewrite(url, entries, False), _rewrite(url, entries, True)}]


def alternates(objects_dir: str, _depth: int = 0) -> list[str]:
    """The object folders `objects_dir/info/alternates` adds (one path a line, relative to `objects_dir`,
    C-quoted or not, `#` comments), and theirs in turn, as far as git follows them (5 levels): git reads
    every object there as if it were the repository's own."""
    if _depth > 5:
        return []
    try:
        with open(os.path.join(objects_dir, "info", "alternates"), encoding="utf-8", errors="surrogateescape") as f:
            text = f.read(1 << 20)
    except OSError:
        return []
    out: list[str] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        path = os.path.realpath(os.path.join(objects_dir, _unquote(line)))
        out.append(path)
        out += alternates(path, _depth + 1)
    return out


def url_kind(url: str) -> tuple[str, str]:
    """(kind, detail) of a remote URL as transport.c sees it: ("network", url) for http(s)/ftp(s)/git,
    ("ssh", host) for ssh:// and scp-like host:path, ("helper", name) for `name::address` and other
    schemes (git runs git-remote-NAME), ("local", path) for a path or file:// URL."""
    m = re.match(r"([A-Za-z0-9][A-Za-z0-9+.-]*)::", url)
    if m:
        return "helper", m.group(1)
    m = re.match(r"([A-Za-z][A-Za-z0-9+.-]*)://(.*)", url)
    if m:
        scheme = m.group(1).lower()
        if scheme in ("http", "https", "ftp", "ftps", "git"):
            return "network", url
        if scheme in ("ssh", "git+ssh", "ssh+git"):
            return "ssh", m.group(2).split("/", 1)[0]
        if scheme == "file":
            return "local", m.group(2)
        return "helper", scheme
    colon, slash = url.find(":"), url.find("/")
    if colon > 0 and (slash < 0 or colon < slash):
        return "ssh", url[:colon]
    return "local", url


# --- patches ----------------------------------------------------------------------------------------

_MAX_PATCH = 16 << 20
_HEADER = re.compile(r"^(?:diff --git (.+)|(?:---|\+\+\+) (.+)|(?:rename|copy) (?:from|to) (.+))$")


def _unquote(p: str) -> str:
    """A C-quoted path as git writes one ("a/sp\\303\\251cial")."""
    if len(p) >= 2 and p[0] == '"' and p[-1] == '"':
        body = p[1:-1].encode("latin-1", errors="replace").decode("unicode_escape", errors="replace")
        return body.encode("latin-1", errors="replace").decode("utf-8", errors="surrogateescape")
    return p


def patch_paths(path: str, mail: bool = False) -> list[str] | None:
    """Every path a patch file names in its headers, or None when it cannot be read (or is too big).

    With `mail` (`git am`), the file is a mailbox, and git decodes each message before it looks for the
    patch (mailsplit, mailinfo: MIME parts, base64 and quoted-printable bodies, format=flowed lines): the
    headers are looked for in what every decoding gives as well as in the raw text. A StGit series file,
    which names other patch files for git to read, gives None."""
    try:
        with open(path, "rb") as f:
            data = f.read(_MAX_PATCH + 1)
    except OSError:
        return None
    if len(data) > _MAX_PATCH:
        return None
    texts = [data]
    if mail:
        if data.lstrip(b"\n").startswith(b"# This series applies on GIT commit"):
            return None  # am.c's detect_patch_format: PATCH_FORMAT_STGIT_SERIES
        texts += _mail_texts(data)
    out: list[str] = []
    for text in texts:
        out += _header_paths(text.decode("utf-8", errors="surrogateescape"))
    return list(dict.fromkeys(p for p in out if p != "/dev/null"))


def _header_paths(text: str) -> list[str]:
    out: list[str] = []
    for line in text.splitlines():
        m = _HEADER.match(line)
        if not m:
            continue
        if m.group(1) is not None:
            out += [_unquote(p) for p in re.findall(r'"(?:[^"\\]|\\.)*"|\S+', m.group(1))]
            out += _space_cuts(m.group(1))
        else:
            text = (m.group(2) or m.group(3)).split("\t", 1)[0]
            out.append(_unquote(text))
            out += _space_cuts(text)
    return out


def _space_cuts(text: str) -> list[str]:
    """Every name git could take from an unquoted header holding spaces: apply.c's find_name_traditional
    drops a timestamp after spaces (`+++ b/x 2024-01-01 00:00:00 +0000`, diff_timestamp_len), and
    git_header_name splits `diff --git a/x y b/x y` where the two halves agree. Rather than model those
    heuristics, every prefix ending before a space and every suffix starting after one is a candidate:
    checking more names only denies more."""
    if text.startswith('"'):
        return []
    cuts = [m.start() for m in re.finditer(r"[ \t]+", text)]
    out = [text[:i] for i in cuts if i > 0]
    out += [text[m.end():] for m in re.finditer(r"[ \t]+", text) if m.end() < len(text)]
    return [c for c in out if c]


_BASE64_LINE = re.compile(rb"^[A-Za-z0-9+/]+={0,2}\r?$")


def _mail_texts(data: bytes) -> list[bytes]:
    """What git may see as the body of the messages in a mailbox, decoded every way it might decode them:
    each MIME part's payload as Python's email package decodes it (split at every `From ` line, as
    mailsplit does), with format=flowed lines joined both ways; and, in case a part boundary is read
    differently, the whole file quoted-printable-decoded and every run of base64-looking lines decoded.
    Reading more only finds more paths, and every path found is checked."""
    import binascii
    import email
    import email.policy
    import quopri

    out: list[bytes] = []
    messages = re.split(rb"(?m)^From .*\n", data)
    for raw in messages[:10_000]:
        if not raw.strip():
            continue
        msg = email.message_from_bytes(raw, policy=email.policy.compat32)
        for part in msg.walk():
            if part.is_multipart():
                continue
            payload = part.get_payload(decode=True)
            if not isinstance(payload, bytes):
                continue
            out.append(payload)
            if (part.get_param("format") or "").lower() == "flowed":
                out += [_unflow(payload, delsp) for delsp in (False, True)]
    out.append(quopri.decodestring(data))
    run: list[bytes] = []
    for line in [*data.splitlines(), b""]:
        if _BASE64_LINE.match(line) and len(line) >= 4:
            run.append(line.strip())
            continue
        if run:
            try:
                out.append(binascii.a2b_base64(b"".join(run)))
            except binascii.Error:
                pass
            run = []
    return out


def _unflow(body: bytes, delsp: bool) -> bytes:
    """RFC 3676 format=flowed: a line ending in a space goes on in the next (without that space, with
    delsp=yes); space-stuffing removed; the signature separator is not flowed."""
    lines: list[bytes] = []
    carry = b""
    for line in body.split(b"\n"):
        line = line.rstrip(b"\r")
        if line.startswith(b" "):
            line = line[1:]
        if line.endswith(b" ") and line != b"-- ":
            carry += line[:-1] if delsp else line
            continue
        lines.append(carry + line)
        carry = b""
    if carry:
        lines.append(carry)
    return b"\n".join(lines)
