"""Argument models of curl and wget (docs/policy.md, "curl and wget"): every file either names or derives
from a URL, written or read, becomes a path the check checks; what cannot be known before the program runs
(a name the server chooses, a config file's commands, a program to run) is denied.

Neither is in the default toolset: a policy allows them by name. Their option grammars are their own: curl
7.88's (clusters `-sSLo F`, unique prefixes of long options, `--no-` before a boolean, no `--opt=value`)
and GNU wget 1.21's (getopt_long: prefixes, `--opt=value`, `-nv`-style `-n LETTERS`). An option the model
does not know is denied, as for every model: it might name a file.
"""

from __future__ import annotations

import os
import re
import urllib.parse
from collections.abc import Callable

from dal.effects.classify.programs import ArgUse

__all__ = ["analyze_curl", "analyze_wget", "FETCHERS"]

FLAG, VALUE, READ, WRITE, RW = "flag", "value", "read", "write", "rw"


class _Deny(Exception):
    pass


def _table(flags: str, **kinds: str) -> dict[str, str]:
    d = dict.fromkeys(flags.split(), FLAG)
    d.update({k.replace("_", "-"): v for k, v in kinds.items()})
    return d


# --- curl ------------------------------------------------------------------------------------------------

# curl 7.88.1's `curl --help all`, every option. Special kinds: "data" (`@FILE` reads FILE), "urlenc"
# (`@FILE` or `NAME@FILE`), "form" (`NAME=@FILE`, `NAME=<FILE`), "cookie" (a file unless it holds `=`),
# "cert" (`FILE[:PASSWORD]`), "pin" (a file unless `sha256//`), "header" (`@FILE`), "writeout" (`@FILE`),
# "url", "outdir", "output", "deny:<why>".
_CURL_FLAGS = (
    "anyauth append basic cert-status compressed compressed-ssh create-dirs crlf digest disable disable-eprt "
    "disable-epsv disallow-username-in-url doh-cert-status doh-insecure fail fail-early fail-with-body false-start "
    "form-escape ftp-create-dirs ftp-pasv ftp-pret ftp-skip-pasv-ip ftp-ssl-ccc ftp-ssl-control get globoff "
    "haproxy-protocol head http0.9 http1.0 http1.1 http2 http2-prior-knowledge http3 http3-only "
    "ignore-content-length include insecure ipv4 ipv6 junk-session-cookies list-only location location-trusted "
    "mail-rcpt-allowfails manual negotiate netrc netrc-optional next no-alpn no-buffer no-clobber no-keepalive "
    "no-npn no-progress-meter no-sessionid ntlm ntlm-wb parallel parallel-immediate path-as-is post301 post302 "
    "post303 progress-bar proxy-anyauth proxy-basic proxy-digest proxy-insecure proxy-negotiate proxy-ntlm "
    "proxy-ssl-allow-beast proxy-ssl-auto-client-cert proxy-tlsv1 proxytunnel raw remote-name remote-name-all "
    "remote-time remove-on-error retry-all-errors retry-connrefused sasl-ir show-error silent socks5-basic "
    "socks5-gssapi socks5-gssapi-nec ssl ssl-allow-beast ssl-auto-client-cert ssl-no-revoke ssl-reqd "
    "ssl-revoke-best-effort sslv2 sslv3 styled-output suppress-connect-headers tcp-fastopen tcp-nodelay "
    "tftp-no-options tlsv1 tlsv1.0 tlsv1.1 tlsv1.2 tlsv1.3 tr-encoding trace-time use-ascii verbose version xattr "
    "help"
)
_CURL_VALUES = (
    "aws-sigv4 cert-type ciphers connect-timeout connect-to continue-at create-file-mode curves delegation "
    "dns-interface dns-ipv4-addr dns-ipv6-addr dns-servers doh-url expect100-timeout form-string ftp-account "
    "ftp-alternative-to-user ftp-method ftp-port ftp-ssl-ccc-mode happy-eyeballs-timeout-ms hostpubmd5 "
    "hostpubsha256 interface keepalive-time key-type krb limit-rate local-port login-options mail-auth mail-from "
    "mail-rcpt max-filesize max-redirs max-time noproxy oauth2-bearer parallel-max pass proto "
    "proxy-cert-type proxy-ciphers proxy-key-type proxy-pass proxy-service-name "
    "proxy-tls13-ciphers proxy-tlsauthtype proxy-tlspassword proxy-tlsuser proxy-user quote range rate "
    "referer request request-target resolve retry retry-delay retry-max-time sasl-authzid service-name "
    "socks5-gssapi-service speed-limit speed-time telnet-option tftp-blksize "
    "tls-max tls13-ciphers tlsauthtype tlspassword tlsuser user user-agent data-raw"
)
CURL_LONG: dict[str, str] = {
    **dict.fromkeys(_CURL_FLAGS.split(), FLAG),
    **dict.fromkeys(_CURL_VALUES.split(), VALUE),
    **_table(
        "",
        output="output", output_dir="outdir", url="url",
        dump_header=WRITE, cookie_jar=WRITE, trace=WRITE, trace_ascii=WRITE, stderr=WRITE, etag_save=WRITE,
        libcurl=WRITE,
        hsts=RW, alt_svc=RW,
        cacert=READ, capath=READ, crlfile=READ, egd_file=READ, random_file=READ, etag_compare=READ,
        netrc_file=READ, proxy_cacert=READ, proxy_capath=READ, proxy_crlfile=READ, unix_socket=READ,
        upload_file="upload", key=READ, proxy_key=READ, pubkey=READ,
        cert="cert", proxy_cert="cert", pinnedpubkey="pin", proxy_pinnedpubkey="pin", cookie="cookie",
        data="data", data_ascii="data", data_binary="data", json="data", data_urlencode="urlenc",
        url_query="urlenc", form="form", header="header", proxy_header="header", write_out="writeout",
        config="deny:reads options (and URLs, output files) from a file the check cannot see",
        engine="engine", proto_default="protodefault", proto_redir="protoredir", proxy="proxy", preproxy="proxy",
        socks4="proxy", socks4a="proxy", socks5="proxy", socks5_hostname="proxy",
        time_cond="timecond", **{"proxy1.0": "proxy"},
        abstract_unix_socket="deny:connects to a socket outside the filesystem's roots",
        remote_header_name="deny:takes the file name from the server's reply, which the check cannot see",
        metalink="deny:takes file names from a metalink file",
    ),
}
CURL_SHORT: dict[str, str] = {
    "a": "append", "q": "disable", "f": "fail", "G": "get", "g": "globoff", "I": "head", "0": "http1.0",
    "i": "include", "k": "insecure", "4": "ipv4", "6": "ipv6", "j": "junk-session-cookies", "l": "list-only",
    "L": "location", "M": "manual", "n": "netrc", ":": "next", "N": "no-buffer", "Z": "parallel",
    "#": "progress-bar", "p": "proxytunnel", "O": "remote-name", "R": "remote-time", "S": "show-error",
    "s": "silent", "2": "sslv2", "3": "sslv3", "1": "tlsv1", "B": "use-ascii", "v": "verbose", "V": "version",
    "h": "help", "J": "remote-header-name",
    "E": "cert", "K": "config", "C": "continue-at", "b": "cookie", "c": "cookie-jar", "d": "data",
    "D": "dump-header", "F": "form", "P": "ftp-port", "H": "header", "m": "max-time", "o": "output",
    "x": "proxy", "U": "proxy-user", "Q": "quote", "r": "range", "e": "referer", "X": "request",
    "Y": "speed-limit", "y": "speed-time", "t": "telnet-option", "z": "time-cond", "T": "upload-file",
    "u": "user", "A": "user-agent", "w": "write-out",
}
_GLOB = re.compile(r"[\[{]")
_OUT_GLOB = re.compile(r"#[0-9]")


def _curl_long(word: str) -> tuple[str, bool]:
    """The option `--word` names, curl's way: the exact name, else its unique prefix; `--no-NAME` for a
    boolean NAME. (name, negated)."""
    negated = False
    if word.startswith("no-") and word not in CURL_LONG and not any(n.startswith(word) for n in CURL_LONG):
        word, negated = word[3:], True
    if word in CURL_LONG:
        name = word
    else:
        hits = [n for n in CURL_LONG if n.startswith(word)] if word else []
        if len(hits) != 1:
            raise _Deny(f"curl --{word}: {'ambiguous' if hits else 'unknown'} option")
        name = hits[0]
    if negated and CURL_LONG[name] != FLAG:
        raise _Deny(f"curl --no-{word}: --no- before an option that takes a value")
    return name, negated


def _file_url(url: str) -> str | None:
    """The local path of a file: URL (FILE:/x, file:///x, file://localhost/x), None for any other scheme."""
    m = re.match(r"([A-Za-z][A-Za-z0-9+.-]*):", url)
    if m is None or m.group(1).lower() != "file":
        return None
    rest = url[m.end():]
    if rest.startswith("//"):
        host, slash, path = rest[2:].partition("/")
        if host.lower() not in ("", "localhost", "127.0.0.1"):
            raise _Deny(f"curl {url}: a file: URL on another host")
        rest = slash + path
    rest = rest.split("?", 1)[0].split("#", 1)[0]
    return urllib.parse.unquote(rest)


def _proxy_socket(opt: str, value: str) -> list[str]:
    """The unix socket a proxy names, as paths to check as read: curl 7.88 connects a SOCKS proxy whose host
    is `localhost` (any case, percent-decoded, with any port or user) and whose path is more than `/` to the
    socket at that path (percent-decoded). Every proxy option is read this way, whatever its scheme (a
    scheme-less `-x` after `--socks5` is a SOCKS proxy too). curl takes `NAME:/` as a scheme (`socks5h:/h/`
    and `socks5h:///h/` too) and `NAME:PORT` as a host: both readings are checked. A host the check would have
    to decode further (not ASCII letters, digits, `.`, `-`, `_` or an IPv6 address) is denied."""
    if re.search(r"[\\\s\x00-\x1f\x7f-\U0010ffff]", value):
        raise _Deny(f"curl {opt} {value!r}: a proxy with a backslash, a space or a character outside ASCII")
    scheme = re.match(r"[A-Za-z][A-Za-z0-9+.-]*:/+", value)
    paths: set[str] = set()
    readings = [value[scheme.end():], value] if scheme else [value]
    for n, rest in enumerate(readings):
        cut = re.search(r"[/?#]", rest)
        authority, path = (rest[:cut.start()], rest[cut.start():]) if cut else (rest, "")
        host = urllib.parse.unquote(authority.rsplit("@", 1)[-1]).lower()
        host = host[1:host.find("]")] if host.startswith("[") and "]" in host else host.split(":", 1)[0]
        if n == 0 and not re.fullmatch(r"[a-z0-9._-]*|[0-9a-f:.]+", host):
            raise _Deny(f"curl {opt} {value}: a proxy host the check cannot read as curl does")
        if host == "localhost":
            paths |= {urllib.parse.unquote(p) for p in (path, re.split(r"[?#]", path, maxsplit=1)[0])}
    return sorted(p for p in paths if p.startswith("/") and p != "/")


def _literal_scheme(url: str) -> None:
    """With globbing on, a URL's scheme must be written out: curl expands `{file,x}://`, `[e-f]ile:///` and
    `{file:,x}/` before it reads the scheme, so a glob before `://` (or, with no `://`, before the first
    `/`) could make a file: URL the check never saw."""
    if re.match(r"[A-Za-z][A-Za-z0-9+.-]*://", url):
        return
    if _GLOB.search(url.split("/", 1)[0]):
        raise _Deny(f"curl {url}: a URL glob before its scheme is known (write the scheme out, or add -g)")


def _remote_names(url: str) -> list[str]:
    """The names -O may save `url` under: what follows its last `/` (or `\\`), with and without the query,
    as written and percent-decoded (curl 7.88 takes the path's last part as written; every reading is
    checked, so that none is a protected name)."""
    rest = url.split("://", 1)[1] if "://" in url else url
    names = []
    for text in (rest, rest.split("?", 1)[0].split("#", 1)[0]):
        cut = max(text.rfind("/"), text.rfind("\\"))
        if cut < 0:
            continue
        name = text[cut + 1:]
        names += [name, urllib.parse.unquote(name)]
    return [n for n in dict.fromkeys(names) if n and "/" not in n and n not in (".", "..")]


def _at_file(value: str) -> str | None:
    return value[1:] if value.startswith("@") and value[1:] not in ("", "-") else None


def _file_value(kind: str, value: str, reads: list[str], writes: list[str], dash_is_stdout: bool = True) -> bool:
    """An option value that is a file read, written or both, added where it goes; False for any other kind
    (curl's and wget's own, handled by their callers). A written `-` is standard output where the program
    says so (every curl option; wget's -o and -a), else a file named `-`, which may be a symlink."""
    if kind == READ:
        reads.append(value)
    elif kind == WRITE:
        if value != "-" or not dash_is_stdout:
            writes.append(value)
    elif kind == RW:
        reads.append(value)
        writes.append(value)
    else:
        return False
    return True


def _curl_value(kind: str, opt: str, value: str, reads: list[str], writes: list[str]) -> None:
    if kind.startswith("deny:"):
        raise _Deny(f"curl {opt}: {kind[5:]}")
    if not value and kind in (READ, WRITE, RW):
        return  # `--alt-svc ""`: the feature without a file
    if kind == "proxy":
        reads.extend(_proxy_socket(opt, value))
        return
    if kind == "timecond":
        if value.lstrip("+-="):
            reads.append(value.lstrip("+-="))  # a date, or else the file whose time curl takes: checked either way
        return
    if _file_value(kind, value, reads, writes):
        pass
    elif kind in ("data", "header", "writeout"):
        if kind == "writeout" and "%output{" in value:
            raise _Deny(f"curl {opt}: %output{{...}} writes a file the check cannot follow")
        if (f := _at_file(value)) is not None:
            reads.append(f)
    elif kind == "urlenc":
        text = value[1:] if kind == "urlenc" and opt.endswith("url-query") and value.startswith("+") else value
        at = re.search(r"[@=]", text)
        if at is not None and at.group() == "@" and text[at.end():] not in ("", "-"):
            reads.append(text[at.end():])
    elif kind == "form":
        _curl_form(opt, value, reads)
    elif kind == "cookie":
        if value and "=" not in value and value != "-":
            reads.append(value)
    elif kind == "cert":
        reads.append(value)
        if ":" in value:
            reads.append(value.split(":", 1)[0])
    elif kind == "pin":
        if not value.startswith("sha256//"):
            reads.append(value)
    elif kind == "protodefault":
        if value.strip().lower() == "file":
            raise _Deny(f"curl {opt} {value}: every URL without a scheme would name a local file")
    elif kind == "protoredir":
        if "file" in value.lower() or "all" in value.lower():
            raise _Deny(f"curl {opt} {value}: a redirect could then read a local file")
    elif kind == "engine":
        if value != "list":
            raise _Deny(f"curl {opt}: loads an OpenSSL engine, which may be a library of the script's")


def _curl_form(opt: str, value: str, reads: list[str]) -> None:
    """-F NAME=@FILE[;type=..][;filename=..] and NAME=<FILE read FILE; `headers=@FILE` reads FILE too. A
    quoted file name is denied (its quoting is curl's own)."""
    _, eq, content = value.partition("=")
    if not eq:
        raise _Deny(f"curl {opt} {value}: expected NAME=CONTENT")
    parts = content.split(";")
    if content[:1] in ("@", "<"):
        name = parts[0][1:]
        if name.startswith('"'):
            raise _Deny(f"curl {opt} {value}: a quoted file name")
        if name not in ("", "-"):
            reads += [name, *(n for n in name.split(",") if n)]
    for param in parts[1:]:
        key, _, val = param.partition("=")
        if key.strip().lower() == "headers" and val[:1] in ("@", "<"):
            reads.append(val[1:])


def analyze_curl(argv: tuple[str, ...]) -> ArgUse:
    try:
        return _curl(argv[1:])
    except _Deny as e:
        return ArgUse(unsafe=str(e), idempotent=False)


def _curl(args: tuple[str, ...]) -> ArgUse:
    reads: list[str] = []
    writes: list[str] = []
    groups: list[dict] = []

    def group() -> dict:
        return {"urls": [], "outputs": [], "dirs": [], "remote": False, "globoff": False, "uploads": [],
                "create": False}

    g = group()
    i = 0
    options_done = False

    def take(kind: str, opt: str, value: str) -> None:
        if kind == "output":
            g["outputs"].append(value)
        elif kind == "outdir":
            g["dirs"].append(value)
        elif kind == "url":
            g["urls"].append(value)
        elif kind == "upload":
            if _GLOB.search(value):
                raise _Deny(f"curl {opt} {value}: a glob pattern names files the check cannot list")
            if value not in ("-", "."):
                reads.append(value)
            g["uploads"].append(value)
        else:
            _curl_value(kind, opt, value, reads, writes)

    def flag(name: str, negated: bool) -> None:
        nonlocal g
        if name == "next":
            groups.append(g)
            g = group()
        elif name in ("remote-name", "remote-name-all") and not negated:
            g["remote"] = True
        elif name == "globoff":
            g["globoff"] = not negated
        elif name == "create-dirs":
            g["create"] = not negated

    while i < len(args):
        arg = args[i]
        i += 1
        if options_done or not arg.startswith("-") or arg == "-":
            g["urls"].append(arg)
            continue
        if arg == "--":
            options_done = True
            continue
        if arg.startswith("--"):
            name, negated = _curl_long(arg[2:])
            kind = CURL_LONG[name]
            if kind == FLAG:
                flag(name, negated)
                continue
            if kind.startswith("deny:"):
                raise _Deny(f"curl --{name}: {kind[5:]}")
            if i >= len(args):
                raise _Deny(f"curl --{name} needs a value")
            take(kind, f"--{name}", args[i])
            i += 1
            continue
        j = 1
        while j < len(arg):
            ch = arg[j]
            name = CURL_SHORT.get(ch)
            if name is None:
                raise _Deny(f"curl -{ch}: unknown option")
            kind = CURL_LONG[name]
            if kind == FLAG:
                flag(name, False)
                j += 1
                continue
            if kind.startswith("deny:"):
                raise _Deny(f"curl -{ch}: {kind[5:]}")
            value = arg[j + 1:]
            if not value:
                if i >= len(args):
                    raise _Deny(f"curl -{ch} needs a value")
                value = args[i]
                i += 1
            take(kind, f"-{ch}", value)
            break
    groups.append(g)
    for g in groups:
        _curl_group(g, reads, writes)
    return ArgUse(tuple(reads), tuple(writes), idempotent=False)


def _curl_group(g: dict, reads: list[str], writes: list[str]) -> None:
    """The files one `--next`-separated part of a curl command line reads and writes through its URLs."""
    outdir = g["dirs"][-1] if g["dirs"] else None

    def placed(name: str) -> list[str]:
        # curl 7.88 puts OUTDIR + "/" + NAME, also for an absolute NAME (`--output-dir d -o /x` is d//x)
        return [name] if outdir is None else [outdir + "/" + name, name]

    for value in g["outputs"]:
        if value == "-":
            continue
        if _OUT_GLOB.search(value) and not g["globoff"] and any(_GLOB.search(u) for u in g["urls"]):
            raise _Deny(f"curl -o {value}: #N takes text from a URL glob; the names it makes cannot be checked")
        writes.extend(placed(value))
    if outdir is not None and g["create"]:
        writes.append(outdir)
    for url in g["urls"]:
        if not g["globoff"]:
            _literal_scheme(url)
        if _GLOB.search(url) and not g["globoff"] and (g["remote"] or _file_url(url) is not None):
            raise _Deny(f"curl {url}: a URL glob names files the check cannot list (add -g to turn globbing off)")
        if g["remote"]:
            for name in _remote_names(url):
                writes.extend(placed(name))
        local = _file_url(url)
        if local is None:
            continue
        if g["uploads"]:
            writes.append(local)  # -T to a file: URL writes that file (or FILE/NAME for a folder URL)
            writes.extend(local.rstrip("/") + "/" + u.rsplit("/", 1)[-1] for u in g["uploads"] if u not in ("-", "."))
        else:
            reads.append(local)


# --- wget ------------------------------------------------------------------------------------------------

_WGET_FLAGS = (
    "version help background debug quiet verbose no-verbose force-html no-config retry-connrefused no-clobber "
    "no-netrc continue show-progress timestamping no-if-modified-since no-use-server-timestamps server-response "
    "spider random-wait no-proxy no-dns-cache ignore-case inet4-only inet6-only ask-password no-iri unlink xattr "
    "no-directories no-host-directories no-cache ignore-length no-http-keep-alive no-cookies "
    "keep-session-cookies auth-no-challenge https-only no-check-certificate no-hsts no-remove-listing no-glob "
    "no-passive-ftp preserve-permissions retr-symlinks ftps-implicit ftps-resume-ssl ftps-clear-data-connection "
    "ftps-fallback-to-ftp convert-links convert-file-only strict-comments follow-ftp span-hosts relative "
    "no-parent delete-after force-directories backup-converted save-headers content-on-error"
)
_WGET_VALUES = (
    "report-speed base tries retry-on-http-error start-pos progress timeout dns-timeout connect-timeout "
    "read-timeout wait waitretry quota bind-address limit-rate prefer-family user password cut-dirs http-user "
    "http-password header compression max-redirect proxy-user "
    "proxy-password referer user-agent post-data method body-data secure-protocol certificate-type "
    "private-key-type ciphers ftp-user ftp-password accept reject accept-regex reject-regex regex-type domains "
    "exclude-domains follow-tags ignore-tags include-directories exclude-directories"
)
_WGET_UNMODELLED = "takes file names from the server or a page, which the check cannot see"
WGET_LONG: dict[str, str] = {
    **dict.fromkeys(_WGET_FLAGS.split(), FLAG),
    **dict.fromkeys(_WGET_VALUES.split(), VALUE),
    **_table(
        "",
        output_document="document", output_file=WRITE, append_output=WRITE, save_cookies=WRITE,
        rejected_log=WRITE, directory_prefix="prefix", default_page="page",
        hsts_file=RW, input_file="input", post_file=READ, body_file=READ, load_cookies=READ, certificate=READ,
        private_key=READ, ca_certificate=READ, ca_directory=READ, crl_file=READ, pinnedpubkey="pin",
        execute="execute", backups="backups", restrict_file_names="restrict",
        local_encoding="deny:changes how a URL's name becomes a file name",
        remote_encoding="deny:changes how a URL's name becomes a file name",
        config="deny:reads commands (output files among them) from a file the check cannot see",
        use_askpass="deny:runs a program",
        recursive="deny:" + _WGET_UNMODELLED, level="deny:" + _WGET_UNMODELLED,
        mirror="deny:" + _WGET_UNMODELLED, page_requisites="deny:" + _WGET_UNMODELLED,
        content_disposition="deny:" + _WGET_UNMODELLED, trust_server_names="deny:" + _WGET_UNMODELLED,
        adjust_extension="deny:adds an extension chosen by the server's content type",
        protocol_directories="deny:makes folders named by the URL's scheme",
        warc_file="deny:writes WARC files under names the check does not model",
        warc_tempdir="deny:writes WARC files under names the check does not model",
        warc_dedup="deny:writes WARC files under names the check does not model",
        warc_cdx="deny:writes WARC files under names the check does not model",
    ),
}
WGET_SHORT: dict[str, str] = {
    "V": "version", "h": "help", "b": "background", "e": "execute", "o": "output-file", "a": "append-output",
    "d": "debug", "q": "quiet", "v": "verbose", "i": "input-file", "F": "force-html", "B": "base", "t": "tries",
    "O": "output-document", "c": "continue", "N": "timestamping", "S": "server-response", "T": "timeout",
    "w": "wait", "Q": "quota", "x": "force-directories", "P": "directory-prefix", "E": "adjust-extension",
    "U": "user-agent", "r": "recursive", "l": "level", "k": "convert-links", "K": "backup-converted",
    "m": "mirror", "p": "page-requisites", "A": "accept", "R": "reject", "D": "domains", "H": "span-hosts",
    "L": "relative", "I": "include-directories", "X": "exclude-directories", "n": "-n",
}
WGET_LONG["background"] = "deny:runs on after the command ends, writing wget-log"
# wgetrc commands `-e` may run, each with the long option that runs the same command (main.c option_data):
# a command is allowed only when its option is a flag or a plain value here (so `-e remoteencoding=` is denied
# as --remote-encoding is). None: no option, a command that names no file (robots: recursion only). Names are
# compared as wget does: case, `_` and `-` ignored.
_WGET_E_OPTIONS: dict[str, str | None] = {
    "robots": None, "tries": "tries", "timeout": "timeout", "readtimeout": "read-timeout",
    "connecttimeout": "connect-timeout", "dnstimeout": "dns-timeout", "wait": "wait", "waitretry": "waitretry",
    "randomwait": "random-wait", "verbose": "verbose", "quiet": "quiet", "useragent": "user-agent",
    "header": "header", "checkcertificate": "no-check-certificate", "httpsonly": "https-only",
    "inet4only": "inet4-only", "inet6only": "inet6-only", "preferfamily": "prefer-family",
    "limitrate": "limit-rate", "maxredirect": "max-redirect", "retryconnrefused": "retry-connrefused",
    "serverresponse": "server-response", "showprogress": "show-progress", "progress": "progress",
    "method": "method", "compression": "compression", "httpkeepalive": "no-http-keep-alive",
    "cache": "no-cache", "cookies": "no-cookies", "iri": "no-iri", "localencoding": "local-encoding",
    "remoteencoding": "remote-encoding", "secureprotocol": "secure-protocol", "ciphers": "ciphers",
    "noparent": "no-parent", "timestamping": "timestamping", "noclobber": "no-clobber", "continue": "continue",
    "referer": "referer", "debug": "debug", "reportspeed": "report-speed",
}
_WGET_E_SAFE = frozenset(cmd for cmd, opt in _WGET_E_OPTIONS.items() if opt is None or WGET_LONG[opt] in (FLAG, VALUE))
# -e commands that turn off what the option turns on (`-nc -e noclobber=off` numbers copies again)
_WGET_E_TOGGLES = {"timestamping": "timestamping", "noclobber": "no-clobber", "continue": "continue"}


def _wget_long(word: str) -> str:
    name, _, _ = word.partition("=")
    if name in WGET_LONG:
        return name
    hits = [n for n in WGET_LONG if n.startswith(name)] if name else []
    if len(hits) != 1:
        raise _Deny(f"wget --{name}: {'ambiguous' if hits else 'unknown'} option")
    return hits[0]


def analyze_wget(argv: tuple[str, ...], exists: Callable[[str], bool] | None = None) -> ArgUse:
    try:
        return _wget(argv[1:], exists or (lambda p: False))
    except _Deny as e:
        return ArgUse(unsafe=str(e), idempotent=False)


def _wget(args: tuple[str, ...], exists: Callable[[str], bool]) -> ArgUse:
    reads: list[str] = []
    writes: list[str] = []
    urls: list[str] = []
    seen: dict[str, list[str | None]] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            urls += args[i:]
            break
        if not arg.startswith("-") or arg == "-":
            urls.append(arg)
            continue
        pairs: list[tuple[str, str | None]] = []
        if arg.startswith("--"):
            name = _wget_long(arg[2:])
            kind = WGET_LONG[name]
            if kind.startswith("deny:"):
                raise _Deny(f"wget --{name}: {kind[5:]}")
            _, eq, value = arg[2:].partition("=")
            if kind == FLAG:
                if eq:
                    raise _Deny(f"wget --{name} takes no value")
                pairs.append((name, None))
            else:
                if not eq:
                    if i >= len(args):
                        raise _Deny(f"wget --{name} needs a value")
                    value = args[i]
                    i += 1
                pairs.append((name, value))
        else:
            j = 1
            while j < len(arg):
                name = WGET_SHORT.get(arg[j])
                if name is None:
                    raise _Deny(f"wget -{arg[j]}: unknown option")
                kind = "value" if name == "-n" else WGET_LONG[name]
                if kind.startswith("deny:"):
                    raise _Deny(f"wget -{arg[j]}: {kind[5:]}")
                if kind == FLAG:
                    pairs.append((name, None))
                    j += 1
                    continue
                value = arg[j + 1:]
                if not value:
                    if i >= len(args):
                        raise _Deny(f"wget -{arg[j]} needs a value")
                    value = args[i]
                    i += 1
                pairs.append((name, value))
                break
        for name, value in pairs:
            if name == "-n":
                for letter in value or "":
                    long = {"v": "no-verbose", "H": "no-host-directories", "d": "no-directories", "c": "no-clobber",
                            "p": "no-parent"}.get(letter)
                    if long is None:
                        raise _Deny(f"wget -n{value}: unknown option")
                    _note(seen, long, None)
                continue
            kind = WGET_LONG[name]
            _note(seen, name, value)
            if value is None:
                continue
            # wget writes its log to stdout for `-o -`/`-a -`; `--save-cookies -` and `--rejected-log -` are
            # files named `-` (wget 1.21's log.c and cookies.c).
            if _file_value(kind, value, reads, writes, name in ("output-file", "append-output")):
                pass
            elif kind == "pin":
                if not value.startswith("sha256//"):
                    reads.append(value)
            elif kind == "input":
                if any(value[:len(lead)].lower() == lead for lead in _WGET_SCHEMES):
                    urls.append(value)  # wget -i URL: fetches the list, saved as that URL's name (or -O's)
                elif value != "-":
                    reads.append(value)
            elif kind == "execute":
                cmd, _, setting = value.partition("=")
                cmd = cmd.strip().lower().replace("_", "").replace("-", "")
                if cmd not in _WGET_E_SAFE:
                    raise _Deny(f"wget -e {value}: a wgetrc command that may name a file or a program, or "
                                "change a file's name (allowed: robots=off and others that name none)")
                if cmd in _WGET_E_TOGGLES:
                    on = setting.strip().lower()
                    if on not in ("on", "yes", "1", "off", "no", "0"):
                        raise _Deny(f"wget -e {value}: not on or off")
                    if on in ("on", "yes", "1"):
                        _note(seen, _WGET_E_TOGGLES[cmd], None)
                    else:
                        seen.pop(_WGET_E_TOGGLES[cmd], None)
            elif kind == "restrict":
                if not set(value.lower().split(",")) <= {"unix", "nocontrol", "ascii"}:
                    raise _Deny(f"wget --restrict-file-names={value}: changes the names of the files it writes "
                                "(unix, nocontrol and ascii are allowed)")
            elif kind == "backups":
                if not value.isdigit() or int(value) > 100:
                    raise _Deny(f"wget --backups={value}: at most 100")
    _wget_outputs(urls, seen, writes, exists)
    return ArgUse(tuple(reads), tuple(writes), idempotent=False, opened_only=_wget_opened_only(seen))


# The options under which wget only opens its logs (-o, -a) and -O's document -- never unlinks, renames,
# rewrites or gives them another mode, time or attribute -- an allow-list (attack9 01): an option not named
# here, one added to the model later included, makes none of them only opened. Left out: the options that act
# on the files wget saves beyond writing them: --unlink, --backups, -N, --xattr, -k, -K, --convert-file-only,
# --preserve-permissions, --retr-symlinks, -c. Executed with wget 1.21.3, -O onto a private /dev/null and a
# text/plain page, only --unlink replaced it (a regular file was left there); the others did nothing to it
# there, but what they do depends on the version and on the server's answer (-k rewrites an HTML page), and
# a list of what is safe fails closed for the next one. --delete-after never removes -O's file (strace:
# opened, written, left) and is on the list.
_WGET_OPENS_ONLY = frozenset((
    "version help debug quiet verbose no-verbose force-html no-config retry-connrefused no-clobber no-netrc "
    "show-progress no-if-modified-since no-use-server-timestamps server-response spider random-wait no-proxy "
    "no-dns-cache ignore-case inet4-only inet6-only ask-password no-iri no-directories no-host-directories "
    "force-directories no-cache ignore-length no-http-keep-alive no-cookies keep-session-cookies "
    "auth-no-challenge https-only no-check-certificate no-hsts no-remove-listing no-glob no-passive-ftp "
    "ftps-implicit ftps-resume-ssl ftps-clear-data-connection ftps-fallback-to-ftp strict-comments follow-ftp "
    "span-hosts relative no-parent delete-after save-headers content-on-error "
    "report-speed base tries retry-on-http-error start-pos progress timeout dns-timeout connect-timeout "
    "read-timeout wait waitretry quota bind-address limit-rate prefer-family user password cut-dirs http-user "
    "http-password header compression max-redirect proxy-user proxy-password referer user-agent post-data "
    "method body-data secure-protocol certificate-type private-key-type ciphers ftp-user ftp-password accept "
    "reject accept-regex reject-regex regex-type domains exclude-domains follow-tags ignore-tags "
    "include-directories exclude-directories "
    "output-document output-file append-output directory-prefix default-page input-file post-file body-file "
    "load-cookies certificate private-key ca-certificate ca-directory crl-file pinnedpubkey restrict-file-names "
    "execute hsts-file save-cookies rejected-log"  # the other outputs: never /dev/null (not in opened_only)
).split())


def _wget_opened_only(seen: dict[str, list[str | None]]) -> tuple[str, ...]:
    """The files wget only opens: its logs (-o, -a) and -O's document, when every option given (each `-e`
    command as the option that runs it) is on the allow-list _WGET_OPENS_ONLY; else none. The names wget makes
    from URLs are never only opened (`--delete-after -nc` unlinks the one that exists)."""
    given = set(seen)
    for value in seen.get("execute", []):
        cmd = (value or "").partition("=")[0].strip().lower().replace("_", "").replace("-", "")
        given.add(_WGET_E_OPTIONS.get(cmd) or "execute")  # None: robots, which names no file
    if not given <= _WGET_OPENS_ONLY:
        return ()
    logs = [v for name in ("output-file", "append-output") for v in seen.get(name, []) if v is not None]
    document = _last(seen, "output-document")
    if document is not None:
        logs.append(document)
    return tuple(logs)


def _note(seen: dict[str, list[str | None]], name: str, value: str | None) -> None:
    """Record an option in the order given: of -x and -nd the last one wins, as in wget."""
    other = {"force-directories": "no-directories", "no-directories": "force-directories"}.get(name)
    if other is not None:
        seen.pop(other, None)
    seen.setdefault(name, []).append(value)


def _last(seen: dict[str, list[str | None]], name: str) -> str | None:
    values = seen.get(name)
    return values[-1] if values else None


def _wget_outputs(urls: list[str], seen: dict[str, list[str | None]], writes: list[str],
                  exists: Callable[[str], bool]) -> None:
    """The files wget saves its URLs as: -O's file; else each URL's local name (built as wget 1.21's
    url_file_name builds it, see _wget_names) below -P, and the numbered names (`NAME.1`, ...) wget picks
    when NAME exists; for an FTP URL also the `.listing` it may write beside that name, -O or not."""
    document = _last(seen, "output-document")
    if document is not None and document != "-":
        writes.append(document)
    prefix = _last(seen, "directory-prefix")
    page = _last(seen, "default-page") or "index.html"
    if "/" in page:
        raise _Deny(f"wget --default-page={page}: a path")
    cut = _last(seen, "cut-dirs") or "0"
    if not cut.isdigit():
        raise _Deny(f"wget --cut-dirs={cut}: not a number")
    tree = "force-directories" in seen
    restrict = set((_last(seen, "restrict-file-names") or "unix").lower().split(","))
    if prefix is not None:
        writes.append(prefix)

    def placed(rel: str) -> str:
        return rel if prefix is None else prefix.rstrip("/") + "/" + rel

    if "input-file" in seen:
        if document is None:
            raise _Deny("wget -i FILE without -O: the URLs, and so the files written, are in the file")
        if "no-glob" not in seen or tree or {"timestamping", "preserve-permissions"} & seen.keys():
            raise _Deny("wget -i FILE: needs --no-glob and no -x, -N or --preserve-permissions (an FTP URL in "
                        "the file could make files and symlinks the server's listing names)")
        writes.append(placed(".listing"))  # an FTP folder URL in the file: its listing, beside -O's file
    numbered = not ({"no-clobber", "timestamping", "continue"} & seen.keys())
    backups = int(_last(seen, "backups") or "0")
    for url in urls:
        ftp, names, units = _wget_names(url, page, tree, "no-host-directories" in seen, int(cut), restrict)
        if ftp:
            folder = names[0].rpartition("/")[0]
            writes.append(placed(folder + "/.listing" if folder else ".listing"))
        if document is not None or "spider" in seen:
            continue
        for rel in names + _wget_cut_names(names[0], units, lambda r: exists(placed(r))):
            path = placed(rel)
            writes.append(path)
            if "backup-converted" in seen:
                writes.append(path + ".orig")
            for n in range(1, backups + 1):
                writes.append(f"{path}.{n}")
            if numbered:
                n = 1
                while exists(path if n == 1 else f"{path}.{n - 1}"):
                    writes.append(f"{path}.{n}")
                    n += 1
                    if n > 1000:
                        raise _Deny(f"wget {url}: more than 1000 numbered copies of {path}")


# wget 1.21's schemes (url.c supported_schemes): the leading string, matched in any case, and the default port
_WGET_SCHEMES = {"http://": 80, "https://": 443, "ftp://": 21, "ftps://": 21}
_NAME_MAX_CUT = 255 - 19  # url.c: a file name element longer than NAME_MAX - CHOMP_BUFFER is cut to that


def _wget_shorthand(url: str) -> str:
    """wget's rewrite_shorthand_url: with no scheme, `HOST:PATH` is `ftp://HOST/PATH` (NcFTP's syntax) unless
    PATH is a port (`HOST:DIGITS` or `HOST:DIGITS/...`), and anything else is `http://` + URL."""
    if any(url[:len(lead)].lower() == lead for lead in _WGET_SCHEMES):
        return url
    m = re.search(r"[:/]", url)
    if m is not None and m.start() == 0:
        return url
    if m is not None and m.group() == ":":
        if url[m.start():m.start() + 3] == "://":
            return url
        if not re.match(r"[0-9]+(/|$)", url[m.end():]):
            return "ftp://" + url[:m.start()] + "/" + url[m.end():]
    return "http://" + url


def _unescape(raw: bytes) -> bytes:
    """url.c url_unescape: `%HH` becomes the byte, except `%00`; a `%` without two hex digits stays."""
    return re.sub(rb"%([0-9A-Fa-f]{2})", lambda m: m.group() if m.group(1) == b"00" else bytes([int(m.group(1), 16)]),
                  raw)


def _pathel(raw: bytes, restrict: set[str]) -> list[bytes]:
    """url.c append_uri_pathel: one path element, URL-unescaped, `..` defanged as `%2E%2E`, then `/`, control
    characters (unless `nocontrol`) and bytes outside ASCII (with `ascii`) quoted as `%HH`. The units it is
    made of (a byte or a `%HH`), so that a cut never splits a quoted one, as wget's does not."""
    text = _unescape(raw)
    if text == b"..":
        text = b"%2E%2E"
    units = []
    for byte in text:
        quote = byte == 0x2F or ("nocontrol" not in restrict and (byte < 0x20 or byte == 0x7F)) or (
            "ascii" in restrict and byte >= 0x80)
        units.append(b"%%%02X" % byte if quote else bytes([byte]))
    return units


def _wget_names(url: str, page: str, tree: bool, no_host: bool, cut: int,
                restrict: set[str]) -> tuple[bool, list[str], list[bytes]]:
    """Whether `url` is an FTP URL; the names (relative to -P) wget 1.21 may save it as: first the one
    url_file_name makes, then the URL's last part as written (a second reading, in case); and the units of
    the file name's last part (for _wget_cut_names). wget parses the URL
    (url.c url_parse: `[user@]host[:port]`, for FTP `;params` and no `?query`, `#fragment` dropped), then
    builds the name: under -x HOST[:PORT] (lower case, the port unless the scheme's default) and each folder
    of the path, unescaped once, after --cut-dirs; then the file name, unescaped twice (once by split_path,
    once more with its `?query`), or --default-page for a folder URL. What it would decode further (a `%` in
    the host, IDNA) is denied."""
    full = _wget_shorthand(url)
    lead = next((lead for lead in _WGET_SCHEMES if full[:len(lead)].lower() == lead), None)
    if lead is None:
        raise _Deny(f"wget {url}: not an http, https, ftp or ftps URL")
    ftp = lead.startswith("ftp")
    rest = full[len(lead):]
    m = re.search(r"[@/?#;]", rest)
    if m is not None and m.group() == "@":
        rest = rest[m.end():]
    written_host = re.split(r"[/?#;]", rest, maxsplit=1)[0]
    seps = "/;#" if ftp else "/?#"
    if rest.startswith("["):
        end = rest.find("]")
        host, rest = (rest[1:end], rest[end + 1:]) if end > 0 else ("", "")
        if rest[:1] not in ("", ":", *seps) or not re.fullmatch(r"[0-9A-Fa-f:.]+", host):
            raise _Deny(f"wget {url}: not an IPv6 address wget takes")
    else:
        m = re.search("[:" + re.escape(seps) + "]", rest)
        host, rest = (rest[:m.start()], rest[m.start():]) if m else (rest, "")
    if not host:
        raise _Deny(f"wget {url}: no host")
    port = _WGET_SCHEMES[lead]
    if rest.startswith(":"):
        m = re.search("[" + re.escape(seps) + "]", rest)
        digits, rest = (rest[1:m.start()], rest[m.start():]) if m else (rest[1:], "")
        if digits and not (re.fullmatch(r"[0-9]+", digits) and int(digits) <= 0xFFFF):
            raise _Deny(f"wget {url}: a bad port")
        port = int(digits) if digits else port
    path = query = None
    if rest.startswith("/"):
        m = re.search("[" + re.escape(seps[1:]) + "]", rest)
        path, rest = (rest[1:m.start()], rest[m.start():]) if m else (rest[1:], "")
    if not ftp and rest.startswith("?"):
        m = rest.find("#")
        query = rest[1:m] if m >= 0 else rest[1:]
    path = path or ""
    raw_path = os.fsencode(path)
    segments = path.split("/")
    if any(s in (".", "..") for s in segments):
        raise _Deny(f"wget {url}: a `.` or `..` in the name it would save")
    if ftp and (re.search(r"[*?\[\]]", path + os.fsdecode(_unescape(_unescape(raw_path)))) or not segments[-1]):
        raise _Deny(f"wget {url}: an FTP glob or folder: the server's listing names the files written")
    parts: list[bytes] = []
    if tree:
        if not no_host:
            if "%" in host or not re.fullmatch(r"[A-Za-z0-9._-]+|[0-9A-Fa-f:.]+", host):
                raise _Deny(f"wget -x {url}: a host name wget would rewrite (decode, IDNA) before it names a "
                            "folder after it")
            folder = "%2E%2E" if host == ".." else host.lower()
            parts.append(os.fsencode(folder if port == _WGET_SCHEMES[lead] else f"{folder}:{port}"))
        for n, element in enumerate(raw_path.split(b"/")[:-1]):
            if n >= cut and element:
                parts.append(b"".join(_pathel(element, restrict)))
                if len(parts[-1]) > 100:
                    raise _Deny(f"wget -x {url}: a folder name wget may cut short")
    file = _unescape(raw_path.rsplit(b"/", 1)[-1]) or os.fsencode(page)
    name = _pathel(file + (b"" if query is None else b"?" + os.fsencode(query)), restrict)
    exact = "/".join(os.fsdecode(p) for p in [*parts, b"".join(name)])
    as_written = segments[-1] or page
    if query is not None:
        as_written += "?" + query
    folder = exact.rpartition("/")[0]
    names = [exact] + ([folder + "/" * bool(folder) + as_written.replace("/", "%2F")]
                       if as_written != exact.rpartition("/")[2] else [])
    if tree and not no_host and written_host != os.fsdecode(parts[0]):
        names.append(written_host + "/" + exact.split("/", 1)[1])  # the host folder as written, in case
    if any(s in (".", "..", "") for s in exact.split("/")):
        raise _Deny(f"wget {url}: a `.` or `..` in the name it would save")
    return ftp, names, name


def _wget_cut_names(exact: str, units: list[bytes], exists: Callable[[str], bool]) -> list[str]:
    """The names wget makes of a file name too long for the file system: cut to NAME_MAX - 19 bytes (236 on
    ext4, xfs, btrfs, tmpfs), never inside a `%HH`. On a file system with a smaller NAME_MAX the cut is
    shorter: every shorter cut that already exists (a symlink the script made) is checked as well. A name
    of at most 100 bytes is taken as never cut."""
    if sum(map(len, units)) <= 100:
        return []
    folder = exact.rpartition("/")[0]

    def rel(n: int) -> str:
        return folder + "/" * bool(folder) + os.fsdecode(b"".join(units[:n]))

    out, size = [], 0
    for n, unit in enumerate(units):
        if size + len(unit) > _NAME_MAX_CUT:
            out.append(rel(n))
            break
        size += len(unit)
        if n + 1 < len(units) and exists(rel(n + 1)):
            out.append(rel(n + 1))
    return out


FETCHERS = frozenset({"curl", "wget"})
