"""git's long options, and how git matches an option word against them (parse-options.c, git 2.39).

git's parse-options takes any unambiguous prefix of a long option for it (`git stash --al` is `--all`),
takes `--no-NAME` for the negation of NAME (and a prefix of that, `--no-al`), and `--NAME` for the negation of
an option that is itself named `no-NAME`; a word that is exactly an option's name is that option, whatever
else it abbreviates; a prefix of two options is an error ("ambiguous option"). A table parsed with
KEEP_UNKNOWN_OPT (log, format-patch, cherry-pick: the revision machinery takes what is left, by exact names)
takes no abbreviations. The model (gitmodel.py) reads every long option through `long_option`, so its rules
name options in full and see what git will do whatever the spelling.

TABLE was measured on git 2.39 (`git SUB [ACTION] --git-completion-helper-all`, and a probe for whether a
prefix is taken): `python tests/effects/test_git_option_prefixes.py` prints it again, and that test compares
it with the git installed. Per table: (takes abbreviations, its options, those of them git has no `--no-`
form of). A later git adds options; a prefix unique here is then either still that option or ambiguous (an
error), never another option.
"""

from __future__ import annotations

import functools

from dal.effects.classify.programs import Unsafe

__all__ = ["ALIASES", "TABLE", "long_option"]

# fmt: off
# Options several tables share: (names, names without a --no- form)
_DIFF = (
    "patch unified function-context raw patch-with-raw patch-with-stat numstat shortstat dirstat cumulative "
    "dirstat-by-file check summary name-only name-status stat stat-width stat-name-width stat-graph-width "
    "stat-count compact-summary binary full-index color ws-error-highlight abbrev src-prefix dst-prefix "
    "line-prefix no-prefix inter-hunk-context output-indicator-new output-indicator-old "
    "output-indicator-context break-rewrites find-renames irreversible-delete find-copies find-copies-harder "
    "no-renames rename-empty follow minimal ignore-all-space ignore-space-change ignore-space-at-eol "
    "ignore-cr-at-eol ignore-blank-lines ignore-matching-lines indent-heuristic patience histogram "
    "diff-algorithm anchored word-diff word-diff-regex color-words color-moved color-moved-ws relative text "
    "exit-code quiet ext-diff textconv ignore-submodules submodule ita-invisible-in-index ita-visible-in-index "
    "pickaxe-all pickaxe-regex rotate-to skip-to find-object diff-filter output",
    "unified raw patch-with-raw patch-with-stat numstat shortstat dirstat cumulative dirstat-by-file check "
    "summary name-only name-status stat stat-width stat-name-width stat-graph-width stat-count binary "
    "ws-error-highlight src-prefix dst-prefix line-prefix inter-hunk-context output-indicator-new "
    "output-indicator-old output-indicator-context break-rewrites find-renames irreversible-delete find-copies "
    "ignore-all-space ignore-space-change ignore-space-at-eol ignore-cr-at-eol ignore-blank-lines patience "
    "histogram diff-algorithm anchored word-diff word-diff-regex color-words ignore-submodules submodule "
    "ita-invisible-in-index ita-visible-in-index pickaxe-all pickaxe-regex rotate-to skip-to find-object "
    "diff-filter output",
)
_BLAME = (
    "incremental root show-stats progress score-debug show-name show-number porcelain line-porcelain show-email "
    "ignore-rev ignore-revs-file color-lines color-by-age minimal contents abbrev",
    "",
)
_LOG = (
    "quiet source use-mailmap mailmap clear-decorations decorate-refs decorate-refs-exclude decorate",
    "clear-decorations",
)

TABLE: dict[str, tuple[bool, str, str]] = {
    "add": (
        True,
        "dry-run verbose interactive patch edit force update renormalize intent-to-add all ignore-removal "
        "refresh ignore-errors ignore-missing sparse chmod warn-embedded-repo pathspec-from-file "
        "pathspec-file-nul",
        "",
    ),
    "am": (
        True,
        "interactive binary 3way quiet signoff utf8 keep keep-non-patch message-id keep-cr scissors quoted-cr "
        "whitespace ignore-space-change ignore-whitespace directory exclude include patch-format reject "
        "resolvemsg continue resolved skip abort quit show-current-patch allow-empty "
        "committer-date-is-author-date ignore-date rerere-autoupdate gpg-sign empty rebasing",
        "quoted-cr continue resolved skip abort quit show-current-patch allow-empty empty",
    ),
    "annotate": (False, *_DIFF),
    "apply": (
        True,
        "exclude include stat allow-binary-replacement binary numstat summary check index intent-to-add cached "
        "unsafe-paths apply 3way build-fake-ancestor whitespace ignore-space-change ignore-whitespace reverse "
        "unidiff-zero reject allow-overlap verbose quiet inaccurate-eof recount directory allow-empty add",
        "exclude include",
    ),
    "archive": (
        True,
        "output remote exec",
        "",
    ),
    "blame": (True, *_BLAME),
    "branch": (
        True,
        "verbose quiet track set-upstream set-upstream-to unset-upstream color remotes contains with without "
        "abbrev all delete move copy list show-current create-reflog edit-description force merged column sort "
        "points-at ignore-case recurse-submodules format",
        "with without",
    ),
    "bundle create": (
        True,
        "quiet progress all-progress all-progress-implied version",
        "",
    ),
    "bundle verify": (True, "quiet", ""),
    "bundle unbundle": (True, "progress", ""),
    "cat-file": (
        True,
        "allow-unknown-type use-mailmap mailmap batch batch-check batch-command batch-all-objects buffer "
        "follow-symlinks unordered textconv filters path",
        "batch batch-check batch-command batch-all-objects textconv filters",
    ),
    "check-attr": (
        True,
        "all cached stdin",
        "",
    ),
    "check-ignore": (
        True,
        "quiet verbose stdin non-matching index",
        "",
    ),
    "checkout": (
        True,
        "guess overlay quiet recurse-submodules progress merge conflict detach track force orphan "
        "overwrite-ignore ignore-other-worktrees ours theirs patch ignore-skip-worktree-bits pathspec-from-file "
        "pathspec-file-nul",
        "ours theirs",
    ),
    "cherry": (
        True,
        "abbrev verbose",
        "",
    ),
    "cherry-pick": (
        False,
        "quit continue abort skip cleanup edit signoff mainline rerere-autoupdate strategy strategy-option "
        "gpg-sign ff allow-empty allow-empty-message keep-redundant-commits commit",
        "quit continue abort skip",
    ),
    "clone": (
        True,
        "verbose quiet progress reject-shallow bare naked mirror local shared recurse-submodules recursive jobs "
        "template reference reference-if-able dissociate origin branch upload-pack depth shallow-since "
        "shallow-exclude single-branch shallow-submodules separate-git-dir config server-option ipv4 ipv6 "
        "filter also-filter-submodules remote-submodules sparse bundle-uri checkout hardlinks tags",
        "",
    ),
    "commit": (
        True,
        "quiet verbose file author date message reedit-message reuse-message fixup squash reset-author trailer "
        "signoff template edit cleanup status gpg-sign all include interactive patch only dry-run short branch "
        "ahead-behind porcelain long null amend untracked-files pathspec-from-file pathspec-file-nul "
        "allow-empty allow-empty-message verify post-rewrite",
        "trailer",
    ),
    "count-objects": (
        True,
        "verbose human-readable",
        "",
    ),
    "describe": (
        True,
        "contains debug all tags long first-parent abbrev exact-match candidates match exclude always dirty "
        "broken",
        "",
    ),
    "diff": (False, *_DIFF),
    "diff-files": (False, *_DIFF),
    "diff-index": (False, *_DIFF),
    "diff-tree": (False, *_DIFF),
    "fetch": (
        True,
        "verbose quiet all set-upstream append atomic upload-pack force multiple tags jobs prefetch prune "
        "prune-tags recurse-submodules dry-run write-fetch-head keep update-head-ok progress depth "
        "shallow-since shallow-exclude deepen unshallow refetch submodule-prefix recurse-submodules-default "
        "update-shallow refmap server-option ipv4 ipv6 negotiation-tip negotiate-only filter auto-maintenance "
        "auto-gc show-forced-updates write-commit-graph stdin",
        "unshallow refetch refmap",
    ),
    "for-each-ref": (
        True,
        "shell perl python tcl count format color sort points-at merged contains ignore-case",
        "",
    ),
    "format-patch": (
        False,
        "numbered signoff stdout cover-letter numbered-files suffix start-number reroll-count "
        "filename-max-length rfc cover-from-description subject-prefix output-directory keep-subject "
        "zero-commit ignore-if-in-upstream no-stat add-header to cc from in-reply-to attach inline thread "
        "signature base signature-file quiet progress interdiff range-diff creation-factor force-in-body-from "
        "binary",
        "rfc subject-prefix output-directory keep-subject inline",
    ),
    "grep": (
        True,
        "cached untracked exclude-standard recurse-submodules invert-match ignore-case word-regexp text "
        "textconv recursive max-depth extended-regexp basic-regexp fixed-strings perl-regexp line-number column "
        "full-name files-with-matches name-only files-without-match null only-matching count color break "
        "heading context before-context after-context threads show-function function-context and or not quiet "
        "all-match open-files-in-pager ext-grep max-count index",
        "max-depth and not",
    ),
    "init": (
        True,
        "template bare shared quiet separate-git-dir initial-branch object-format",
        "shared",
    ),
    "log": (False, *_LOG),
    "ls-files": (
        True,
        "cached deleted modified others ignored stage killed directory eol empty-directory unmerged "
        "resolve-undo exclude exclude-from exclude-per-directory exclude-standard full-name recurse-submodules "
        "error-unmatch with-tree abbrev debug deduplicate sparse format",
        "exclude exclude-from exclude-standard full-name format",
    ),
    "ls-remote": (
        True,
        "quiet upload-pack exec tags heads refs get-url sort exit-code symref server-option",
        "",
    ),
    "ls-tree": (
        True,
        "long name-only name-status object-only full-name full-tree format abbrev",
        "long name-only name-status object-only format",
    ),
    "merge": (
        True,
        "stat summary log squash commit edit cleanup ff ff-only rerere-autoupdate verify-signatures strategy "
        "strategy-option message file into-name verbose quiet abort quit continue allow-unrelated-histories "
        "progress gpg-sign autostash overwrite-ignore signoff verify",
        "ff-only file",
    ),
    "merge-base": (
        True,
        "all octopus independent is-ancestor fork-point",
        "octopus independent is-ancestor fork-point",
    ),
    "mv": (
        True,
        "verbose dry-run force sparse",
        "",
    ),
    "name-rev": (
        True,
        "name-only tags refs exclude all stdin annotate-stdin undefined always peel-tag",
        "",
    ),
    "pull": (
        True,
        "verbose quiet progress recurse-submodules rebase stat summary log signoff squash commit edit cleanup "
        "ff ff-only verify verify-signatures autostash strategy strategy-option gpg-sign "
        "allow-unrelated-histories all append upload-pack force tags prune jobs dry-run keep depth "
        "shallow-since shallow-exclude deepen unshallow update-shallow refmap server-option ipv4 ipv6 "
        "negotiation-tip show-forced-updates set-upstream",
        "ff-only unshallow refmap",
    ),
    "push": (
        True,
        "verbose quiet repo all mirror delete tags dry-run porcelain force force-with-lease force-if-includes "
        "recurse-submodules thin receive-pack exec set-upstream progress prune follow-tags signed atomic "
        "push-option ipv4 ipv6 verify",
        "",
    ),
    "range-diff": (
        True,
        "creation-factor notes left-only right-only patch unified function-context raw patch-with-raw "
        "patch-with-stat numstat shortstat dirstat cumulative dirstat-by-file check summary name-only "
        "name-status stat stat-width stat-name-width stat-graph-width stat-count compact-summary binary "
        "full-index color ws-error-highlight abbrev src-prefix dst-prefix line-prefix no-prefix "
        "inter-hunk-context output-indicator-new output-indicator-old output-indicator-context break-rewrites "
        "find-renames irreversible-delete find-copies find-copies-harder no-renames rename-empty follow minimal "
        "ignore-all-space ignore-space-change ignore-space-at-eol ignore-cr-at-eol ignore-blank-lines "
        "ignore-matching-lines indent-heuristic patience histogram diff-algorithm anchored word-diff "
        "word-diff-regex color-words color-moved color-moved-ws relative text exit-code quiet ext-diff textconv "
        "ignore-submodules submodule ita-invisible-in-index ita-visible-in-index pickaxe-all pickaxe-regex "
        "rotate-to skip-to find-object diff-filter output dual-color",
        "unified raw patch-with-raw patch-with-stat numstat shortstat dirstat cumulative dirstat-by-file check "
        "summary name-only name-status stat stat-width stat-name-width stat-graph-width stat-count binary "
        "ws-error-highlight src-prefix dst-prefix line-prefix inter-hunk-context output-indicator-new "
        "output-indicator-old output-indicator-context break-rewrites find-renames irreversible-delete "
        "find-copies ignore-all-space ignore-space-change ignore-space-at-eol ignore-cr-at-eol "
        "ignore-blank-lines patience histogram diff-algorithm anchored word-diff word-diff-regex color-words "
        "ignore-submodules submodule ita-invisible-in-index ita-visible-in-index pickaxe-all pickaxe-regex "
        "rotate-to skip-to find-object diff-filter output",
    ),
    "rebase": (
        True,
        "onto keep-base quiet verbose signoff committer-date-is-author-date reset-author-date ignore-date "
        "ignore-whitespace whitespace force-rebase continue skip abort quit edit-todo show-current-patch apply "
        "merge interactive preserve-merges rerere-autoupdate empty keep-empty autosquash update-refs gpg-sign "
        "autostash exec allow-empty-message rebase-merges fork-point strategy strategy-option root "
        "reschedule-failed-exec reapply-cherry-picks verify stat ff",
        "continue skip abort quit edit-todo show-current-patch apply merge interactive empty",
    ),
    "remote add": (
        True,
        "fetch tags track master mirror",
        "",
    ),
    "remote rename": (True, "progress", ""),
    "remote set-head": (
        True,
        "auto delete",
        "",
    ),
    "remote set-branches": (
        True,
        "add",
        "",
    ),
    "remote get-url": (
        True,
        "push all",
        "",
    ),
    "remote set-url": (
        True,
        "push add delete",
        "",
    ),
    "remote prune": (
        True,
        "dry-run",
        "",
    ),
    "remote update": (
        True,
        "prune",
        "",
    ),
    "reset": (
        True,
        "quiet mixed soft hard merge keep recurse-submodules patch intent-to-add pathspec-from-file "
        "pathspec-file-nul refresh",
        "",
    ),
    "restore": (
        True,
        "source staged worktree ignore-unmerged overlay quiet recurse-submodules progress merge conflict ours "
        "theirs patch ignore-skip-worktree-bits pathspec-from-file pathspec-file-nul",
        "ours theirs",
    ),
    "rev-list": (False, *_DIFF),
    "revert": (
        False,
        "quit continue abort skip cleanup edit signoff mainline rerere-autoupdate strategy strategy-option "
        "gpg-sign reference commit",
        "quit continue abort skip",
    ),
    "rm": (
        True,
        "dry-run quiet cached force ignore-unmatch sparse pathspec-from-file pathspec-file-nul",
        "",
    ),
    "shortlog": (
        True,
        "committer numbered summary email group",
        "",
    ),
    "show": (False, *_LOG),
    "show-branch": (
        True,
        "all remotes color more list current sha1-name merge-base independent topo-order topics sparse "
        "date-order reflog name",
        "reflog",
    ),
    "show-ref": (
        True,
        "tags heads verify head dereference hash abbrev quiet exclude-existing",
        "exclude-existing",
    ),
    "stash push": (
        True,
        "keep-index staged patch quiet include-untracked all message pathspec-from-file pathspec-file-nul",
        "",
    ),
    "stash save": (
        True,
        "keep-index staged patch quiet include-untracked all message",
        "",
    ),
    "stash show": (
        True,
        "include-untracked only-untracked",
        "only-untracked",
    ),
    "stash pop": (True, "quiet index", ""),
    "stash apply": (True, "quiet index", ""),
    "stash drop": (True, "quiet", ""),
    "stash store": (
        True,
        "quiet message",
        "",
    ),
    "status": (
        True,
        "verbose short branch show-stash ahead-behind porcelain long null untracked-files ignored "
        "ignore-submodules column find-renames renames",
        "find-renames",
    ),
    "switch": (
        True,
        "create force-create guess discard-changes quiet recurse-submodules progress merge conflict detach "
        "track force orphan overwrite-ignore ignore-other-worktrees",
        "",
    ),
    "tag": (
        True,
        "list delete verify annotate message file edit sign cleanup local-user force create-reflog column "
        "contains with without merged sort points-at format color ignore-case",
        "list delete verify message with without",
    ),
    "version": (
        True,
        "build-options",
        "",
    ),
    "whatchanged": (False, *_LOG),
    "worktree add": (
        True,
        "force detach checkout lock reason quiet track guess-remote",
        "",
    ),
    "worktree move": (True, "force", ""),
    "worktree remove": (True, "force", ""),
    "worktree list": (
        True,
        "porcelain verbose expire",
        "",
    ),
    "worktree prune": (
        True,
        "dry-run verbose expire",
        "",
    ),
    "worktree lock": (
        True,
        "reason",
        "",
    ),
    "archive (archive.c)": (
        True,
        "format prefix add-file add-virtual-file worktree-attributes verbose list",
        "format prefix add-file add-virtual-file worktree-attributes verbose list",
    ),
    "annotate (blame)": (True, *_BLAME),
}
# fmt: on

# Options git lists as another's alias (`git SUB -h`: "alias of --NAME"): a prefix of both is not ambiguous.
ALIASES: dict[str, dict[str, str]] = {
    "cat-file": {"mailmap": "use-mailmap"},
    "clone": {"recursive": "recurse-submodules"},
    "log": {"mailmap": "use-mailmap"},
    "show": {"mailmap": "use-mailmap"},
    "whatchanged": {"mailmap": "use-mailmap"},
}


@functools.cache
def _options(sub: str) -> tuple[tuple[str, bool, bool], ...]:
    """(name, git takes `--no-NAME` for it, git takes a prefix of it) for every option of the subcommand's
    tables (its actions' too: the model sees a word before it knows the action)."""
    out: dict[tuple[str, bool], bool] = {}
    for key, (abbreviates, names, fixed) in TABLE.items():
        if key.split()[0] == sub:
            no_neg = set(fixed.split())
            for n in names.split():
                out[n, n not in no_neg] = out.get((n, n not in no_neg), False) or abbreviates
    return tuple((n, neg, ab) for (n, neg), ab in out.items())


def spellings(sub: str) -> frozenset[str]:
    """Every word git takes in full as an option of `git SUB` (without the dashes)."""
    words: set[str] = set()
    for n, negatable, _ in _options(sub):
        words.add(n)
        if negatable:
            words.add(n[3:] if n.startswith("no-") else "no-" + n)
    return frozenset(words)


def _reads(n: str, negatable: bool, abbreviates: bool, arg: str, attached: bool) -> str | None:
    """How git's parse_long_opt reads `--ARG` against the option `n`: its spelling in full, or None."""
    if abbreviates and n.startswith(arg):
        return n
    if not negatable:
        return None
    if "no-".startswith(arg) and not attached:  # "negated and abbreviated very much": `--n`, `--no`, `--no-`
        return n[3:] if n.startswith("no-") else "no-" + n
    if not arg.startswith("no-"):
        if n.startswith("no-") and (n[3:] == arg or abbreviates and n[3:].startswith(arg)):
            return n[3:]  # `--NAME` negates the option `no-NAME`
        return None
    if n.startswith(arg[3:]) and (abbreviates or n == arg[3:]):
        return "no-" + n
    return None


def long_option(sub: str, word: str, attached: bool = False) -> str | None:
    """The long option (`--name`, `--no-name` for a negation) that git reads the option word `word` (with
    its dashes, without `=VALUE`; `attached`: it had one) of `git SUB` as; None when none of the tables has
    it (the caller's rules decide). Raises Unsafe for a prefix of several options: git refuses it, and a
    later git may not."""
    arg = word[2:]
    if arg in spellings(sub):
        return word  # an option's own name: that option, whatever else it abbreviates
    aliases = ALIASES.get(sub, {})
    hits: dict[str, str] = {}  # option -> how git reads the word for it
    for n, negatable, abbreviates in _options(sub):
        read = _reads(n, negatable, abbreviates, arg, attached)
        if read is not None:
            hits.setdefault(aliases.get(n, n), read if n not in aliases else read.replace(n, aliases[n]))
    if len(hits) > 1:
        shown = ", ".join("--" + w for w in sorted(hits.values())[:6]) + (", ..." if len(hits) > 6 else "")
        raise Unsafe(f"git {sub} {word}: git takes it for any of {shown} (an abbreviation); write the option in full")
    return "--" + hits.popitem()[1] if hits else None
