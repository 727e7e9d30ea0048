"""The decision corpus: everyday commands a tool loop needs are allowed, every escape denied for its reason.

A policy that denies everything fails the ALLOW half; one that allows too much fails the DENY half.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dal.effects import Policy, check_command

ALLOW = [
    # the article's two commands
    "test -e 'COO-FILESYSTEM/articles/drafts/example.md' && echo present || echo missing",
    "mkdir -p 'COO-FILESYSTEM/articles/drafts' && "
    "printf '%s\\n' '# Draft' > 'COO-FILESYSTEM/articles/drafts/example.md'",
    "ls",
    "ls -la docs",
    "ls -l --color=never",
    "ls -R docs",
    "ls -- docs",
    "ls docs/../docs",
    "cat notes.txt",
    "cat ./notes.txt",
    "cat 'my file.txt'",
    'cat "my file.txt"',
    "cat my\\ file.txt",
    "cat -- notes.txt",
    "cat link_in/a.md",
    "cat sub/up/notes.txt",
    "cat notes.txt | sort | uniq -c | sort -rn | head -5",
    "cat notes.txt &> both.txt",
    "grep -rn TODO docs",  # (`grep -r TODO .` here would read the canary through hard_canary: denied below)
    "grep -r --include='*.md' TODO docs",
    'grep -r --include="*.md" TODO docs',
    "grep -c beta notes.txt 2>&1",
    "grep -e foo -e bar notes.txt",
    "grep -f docs/a.md notes.txt",
    "grep --file=docs/a.md notes.txt",
    "grep -q beta notes.txt && echo yes",
    "grep -l -r beta --exclude-dir=.git docs sub",
    "grep -- -x notes.txt",
    "grep -A 2 -B1 TODO notes.txt",
    "wc -l notes.txt",
    "wc -l < notes.txt",
    "wc -w 'my file.txt' docs/a.md",
    "head -n 3 notes.txt",
    "head -3 notes.txt",
    "tail -n 2 notes.txt",
    "tail -n +2 notes.txt",
    "touch new.txt",
    "touch -c notes.txt",
    "cp notes.txt copy.txt",
    "cp -r docs docs2",
    "cp -r docs sub",
    "cp -b --suffix=.bak notes.txt copy.txt",
    "cp notes.txt docs/",
    "cp -t docs notes.txt",
    "cp --target-directory=docs notes.txt",
    "cp --target=docs notes.txt",
    "mv notes.txt renamed.txt",
    "mv -t docs notes.txt",
    "mkdir out",
    "mkdir -p a/b/c && touch a/b/c/d.txt",
    "echo hello > out.txt",
    "echo more >> out.txt",
    "echo hi >&2",
    "ls&&echo ok",
    "echo hi>out.txt",
    "ls|wc -l",
    "echo done > /dev/null",
    "ls nope 2>/dev/null || echo none",
    "ls > listing.txt 2>&1",
    "test ! -e missing.txt",
    "[ -d docs ] && echo dir",
    "[ -f notes.txt ]",
    "[ ! -e x -o -d docs ]",
    "test -n 'x' ; echo done",
    "echo a; echo b",
    "echo a;",
    "printf '%s\\n' a b c",
    'echo "quoted \\"inner\\" text"',
    "echo 'single $HOME stays literal'",
    'echo "not \\$HOME"',
    "echo '--include=*.md'",
    "echo a\\;b",
    "echo '#not a comment'",
    "echo 'two\nlines inside quotes'",
    "find . -name '*.md'",
    "find docs -maxdepth 2 -type f",
    "find . -name '*.md' -print0",
    "find . -newer notes.txt",
    "find . \\( -name '*.md' -o -name '*.txt' \\) -print",
    "sort -o sorted.txt notes.txt",
    "sort notes.txt > sorted.txt",
    "sort -k2 -t, notes.txt",
    "uniq notes.txt uniq_out.txt",
    "diff notes.txt docs/a.md",
    "diff -u notes.txt docs/a.md",
    "diff -r --no-dereference docs docs",
    "stat notes.txt",
    "stat -c %s notes.txt",
    "sha256sum notes.txt",
    "md5sum notes.txt docs/a.md",
    "basename /some/where/file.txt",
    "dirname a/b/c",
    "pwd",
    "true",
    "false || true",
    "rm -f copy.txt",
    "rm -f notes.md~",  # `~` is literal except at the start of a word
    "cp notes.txt notes.txt~",
    "rm -rf docs2",
    "rm sub/up/notes.txt",
    "rm link_out",
    "rm -f hard_canary",  # removes a name; the file's other names stay as they are
    "ls hard_tree",
    "rm -rf sub/up",
    "tee out2.txt < notes.txt",
    "cut -d, -f1 notes.txt",
    "tr a-z A-Z < notes.txt",
    "seq 1 5",
    "sleep 0",
    "date -u +%Y-%m-%dT%H:%M:%SZ",
    "date -Iseconds",
    "realpath docs/a.md",
    "readlink -f link_in",
    "du -sh docs",
    "paste -d, notes.txt notes.txt",
    "comm -12 notes.txt notes.txt",
    # protected paths may be read
    "cat .git/config",
    "cp .git/config config.bak",
    "ls -la .git/hooks",
    "grep -c core .git/config",
    # directory operands that stay inside
    "diff notes.txt docs",
    "diff docs link_in",
    "diff -r --no-dereference docs link_in",
    "diff --from-file=notes.txt docs/a.md docs",
    "cp -a sub sub_copy",  # sub/up -> .. still points inside from sub_copy/up
    "cp -P link_in link_in2",
    "mv deep/a deep/b",
    "mv tpl templates",
    "rm -rf tpl",
]

# (command, a fragment the denial reason must contain)
DENY = [
    # paths outside, directly or through `..`
    ("cat /etc/passwd", "outside"),
    ("cat ../outside/canary.txt", "outside"),
    ("cat docs/../../outside/canary.txt", "outside"),
    ("ls /", "outside"),
    ("ls ..", "outside"),
    ("stat /etc/passwd", "outside"),
    ("find / -name x", "outside"),
    ("grep x /etc/passwd", "outside"),
    ("diff notes.txt /etc/passwd", "outside"),
    # every kind of symlink
    ("cat link_out/canary.txt", "outside"),
    ("cat link_passwd", "outside"),
    ("cat file_link_out", "outside"),
    ("echo x > link_out/new", "outside"),
    ("echo x > file_link_out", "outside"),
    ("echo x > dangling", "outside"),
    ("touch dangling", "outside"),
    ("cp notes.txt link_out", "outside"),
    ("rm link_out/canary.txt", "outside"),
    ("ls link_out/", "outside"),
    ("cp -r docs dest", "dest/docs/a.md"),
    ("cp -a docs/ dest/", "dest/docs/a.md"),
    ("cp docs/a.md dest/docs", "outside"),
    # redirections outside
    ("echo x > ../outside/canary.txt", "outside"),
    ("echo x >> /etc/passwd", "outside"),
    ("printf x > /tmp/evil", "outside"),
    ("cat < /etc/shadow", "outside"),
    ("ls 2> /tmp/err", "outside"),
    ("ls &> ../both", "outside"),
    # writes outside through operands and option values
    ("touch ../outside/x", "outside"),
    ("mkdir /tmp/evil", "outside"),
    ("cp notes.txt ../outside/", "outside"),
    ("cp -t ../outside notes.txt", "outside"),
    ("cp --target-directory=../outside notes.txt", "outside"),
    ("cp --target=../outside notes.txt", "outside"),
    ("cp --targ ../outside notes.txt", "outside"),
    ("mv notes.txt /tmp/", "outside"),
    ("mv ../outside/canary.txt here", "outside"),
    ("grep -f /etc/passwd notes.txt", "outside"),
    ("grep --file=/etc/passwd x", "outside"),
    ("touch -r /etc/passwd x", "outside"),
    ("sort -o /etc/x notes.txt", "outside"),
    ("sort --output=../out notes.txt", "outside"),
    ("uniq notes.txt /tmp/out", "outside"),
    ("tee /tmp/x < notes.txt", "outside"),
    ("grep --exclude-from=/etc/passwd -r x .", "outside"),
    ("diff --from-file=/etc/passwd notes.txt", "outside"),
    ("touch --reference=/etc/passwd x", "outside"),
    ("touch --ref=/etc/passwd x", "outside"),
    ("sort -T /tmp notes.txt", "outside"),
    ("cp -t/tmp notes.txt", "outside"),
    ("grep -f/etc/passwd x", "outside"),
    ("grep -rf/etc/passwd x", "outside"),
    ("head -n1 /etc/passwd", "outside"),
    # quoting tricks
    ("cat '/etc/'passwd", "outside"),
    ('cat "/etc"/passwd', "outside"),
    ("cat /et\\c/passwd", "outside"),
    ("cat '/etc/passwd' 'notes.txt'", "outside"),
    ("cat notes.txt\\ /../../../etc/passwd", "outside"),
    # separators without spaces
    ("ls;cat /etc/passwd", "outside"),
    ("ls&&cat /etc/passwd", "outside"),
    ("ls||cat /etc/passwd", "outside"),
    ("ls|cat /etc/passwd", "outside"),
    ("echo hi>/tmp/x", "outside"),
    ("find . -newer /etc/passwd", "outside"),
    ("rm -rf /", "outside"),
    ("rm -rf ..", "outside"),
    ("rm -rf .", "workspace itself"),
    ("rm -rf sub/up/", "workspace itself"),
    ("mv . ../elsewhere", "outside"),
    # unsafe flags
    ("rm --no-preserve-root -rf /", "removes /"),
    ("cp --suffix=/../../x -b notes.txt copy.txt", "suffix"),
    ("mv -S /x -b notes.txt copy.txt", "suffix"),
    ("cp -L -r docs x", "-L"),
    ("cp --dereference -r docs x", "--dereference"),
    ("grep -R x .", "-R"),
    ("grep --dereference-recursive x .", "symlink"),
    ("wc --files0-from=list.txt", "files0-from"),
    ("find . -exec cat notes.txt ;", "-exec"),
    ("find . -execdir cat ;", "-execdir"),
    ("find . -delete", "-delete"),
    ("find . -fprint out.txt", "-fprint"),
    ("find -L .", "-L"),
    ("find . -follow", "-follow"),
    ("find . -ok cat ;", "-ok"),
    ("sort --compress-program=sh notes.txt", "runs a program"),
    ("tail -f notes.txt", "-f"),
    ("diff -r docs docs", "symlink"),
    ("sha256sum -c sums.txt", "-c"),
    ("ls -L -R docs", "-L"),
    ("date 010100002020", "sets the clock"),
    ("date --set=now", "sets the clock"),
    ("du -L docs", "-L"),
    ("realpath --relative-to=/ docs", "outside"),
    ("cat --bogus notes.txt", "unknown option"),
    ("grep --fi=x y", "ambiguous"),
    # /proc, /dev and bash's fake sockets
    ("head /proc/self/environ", "/proc"),
    ("cat /proc/1/cmdline", "/proc"),
    ("echo x > /dev/tcp/127.0.0.1/80", "network"),
    ("cat < /dev/tcp/example.com/80", "network"),
    ("cat /dev/sda", "/dev"),
    # substitution and expansion
    ("echo $(id)", "command substitution"),
    ("echo `id`", "backticks"),
    ('echo "$(id)"', "command substitution"),
    ("cat <(ls)", "process substitution"),
    ("echo $HOME", "variable expansion"),
    ("echo ${HOME}", "parameter expansion"),
    ('echo "$HOME"', "expansion"),
    ('echo x > "$HOME/x"', "expansion"),
    ("echo $((1+1))", "arithmetic"),
    ("echo $'\\x41'", "ANSI-C"),
    ("cat 'a'$'b'", "ANSI-C"),
    ("ls *.md", "glob"),
    ("ls ?.md", "glob"),
    ("ls [ab].md", "glob"),
    ("grep --include=*.md x", "glob"),
    ("echo {a,b}", "brace"),
    ("cat ~/.ssh/id_rsa", "tilde"),
    ("echo x > ~/x", "tilde"),
    ("ls a=~/x", "tilde"),
    # heredocs, compound commands, assignments, separators
    ("cat <<EOF\nx\nEOF", "heredoc"),
    ("cat <<< x", "here-string"),
    ("(ls)", "subshell"),
    ("{ ls; }", "group"),
    ("f() { ls; }; f", "function"),
    ("for i in a; do echo x; done", "loop"),
    ("while true; do ls; done", "loop"),
    ("if true; then ls; fi", "if"),
    ("case x in x) ls;; esac", "case"),
    ("X=1 ls", "assignment"),
    ("X=1", "assignment"),
    ("export X=1", "declaration"),
    ("ls &", "&"),
    ("ls & ls", "&"),
    ("ls\nls", "newline"),
    ("echo a\\\nb", "line continuation"),
    ("! ls", "negation"),
    ("ls # comment", "comment"),
    ("ls ;; ls", "';;'"),
    ("ls |& wc", "|&"),
    ("ls >| x", ">|"),
    ("ls 3> x", "descriptor 3"),
    ("echo x >& out.txt", ">&"),
    ("ls 2>&-", "redirection"),
    ("ls > out.txt notes.txt", "redirection that cannot be analysed"),
    ("cat <&0", "redirection <&"),
    ("ls 10>x", "descriptor 10"),
    ("[[ -e x ]]", "[["),
    ("echo ((", "syntax error"),
    ("", "empty"),
    # interpreters and wrappers
    ("sh -c ls", "runs other programs"),
    ("bash -c 'ls'", "runs other programs"),
    ("python3 -c 'print(1)'", "runs other programs"),
    ("env ls", "runs other programs"),
    ("xargs rm", "runs other programs"),
    ("timeout 5 ls", "runs other programs"),
    ("nohup ls", "runs other programs"),
    ("sudo ls", "runs other programs"),
    ("command ls", "runs other programs"),
    ("exec ls", "runs other programs"),
    ("eval ls", "runs other programs"),
    ("source x.sh", "runs other programs"),
    (". x.sh", "runs other programs"),
    ("awk '{print}' notes.txt", "runs other programs"),
    ("sed -i s/a/b/ notes.txt", "runs other programs"),
    ("cat notes.txt | sh", "runs other programs"),
    ("ls && bash", "runs other programs"),
    # hard links: a name inside for a file that may be outside (here: the canary)
    ("cat hard_canary", "hard links"),
    ("echo x > hard_canary", "hard links"),
    ("echo x >> hard_tree/docs/a.md", "hard links"),
    ("cp notes.txt hard_canary", "hard links"),
    ("touch hard_canary", "hard links"),
    ("wc -l < hard_canary", "hard links"),
    ("cp -r docs hard_tree", "hard links"),
    ("grep -rn TODO .", "hard links"),  # a walked tree: grep -r would read hard_canary
    ("grep -r canary --exclude-dir=hard_tree .", "hard_canary"),
    ("cp -r hard_tree copied", "hard links"),
    ("diff -r --no-dereference hard_tree docs", "hard links"),
    # protected paths: written, removed or renamed, directly, through a symlink, or as part of a tree
    ("printf '[run]\\nallow = [\"sh\"]\\n' > dal.toml", "protected"),
    ("echo x > sub/dal.toml", "protected"),
    ("echo x >> .git/config", "protected"),
    ("touch .git/hooks/pre-commit", "protected"),
    ("cp notes.txt .git/hooks/pre-commit", "protected"),
    ("cp notes.txt .git/info", "protected"),
    ("mkdir -p .git/hooks/x", "protected"),
    ("mkdir .dal2 .dal", "protected"),
    ("tee .dal/dal.db < notes.txt", "protected"),
    ("sort -o .git/info/attributes notes.txt", "protected"),
    ("sort -T .git/hooks notes.txt", "protected"),
    ("ls > nested/.git/config", "protected"),
    ("echo x > sub/up/.git/config", "protected"),
    ("rm -rf .git/hooks", "protected"),
    ("rm .git/config", "protected"),
    ("rm -rf .git", ".git file or folder"),
    ("rm -rf nested", "holds a protected path"),
    ("rm -rf .dal", "protected"),
    ("mv .dal elsewhere", "protected"),
    ("mv nested other", "holds a protected path"),
    ("mv notes.txt sub/dal.toml", "protected"),
    ("mv tpl nested/.git/modules", "protected"),
    ("cp -r tpl sub/.git", "protected"),
    ("cp -r tpl x/.git", "protected"),
    # directory operands: the paths diff derives, the entries it opens, the trees it walks
    ("diff notes.txt trap", "outside"),
    ("diff trap notes.txt", "outside"),
    ("diff --from-file=notes.txt trap", "outside"),
    ("diff --to-file=trap notes.txt", "outside"),
    ("diff trap docs", "outside"),
    ("diff --from-file=docs trap", "outside"),
    # symlinks that would point out from where the command puts them
    ("cp -P sub/up up2", "symlink that points outside"),
    ("cp -d sub/up up2", "symlink that points outside"),
    ("cp -r sub/up up2", "symlink that points outside"),
    ("cp --no-dereference deep/a/up2 docs/", "symlink that points outside"),
    ("mv deep/a top_a", "symlink that points outside"),
    ("cp -a deep/a top_a", "symlink that points outside"),
    ("mv sub/up ./up2", "symlink that points outside"),
    # programs by path or in disguise
    ("/bin/ls", "path-qualified"),
    ("./script.sh", "path-qualified"),
    ("../bin/ls", "path-qualified"),
    ("\\rm x", "backslash"),
    ("'rm' x", "quoted"),
    ('"ls"', "quoted"),
    ("l's'", "quoted"),
    ("curl http://example.com", "not an allowed program"),
    ("git status", "not an allowed program"),
    ("cd /", "builtin"),
    ("nosuchprogram", "not an allowed program"),
]


@pytest.fixture(scope="module")
def policy(shared_workspace: Path) -> Policy:
    return Policy.load(shared_workspace)


def test_corpus_is_big_enough() -> None:
    assert len(ALLOW) + len(DENY) >= 120
    assert len(set(ALLOW)) == len(ALLOW)
    assert len({c for c, _ in DENY}) == len(DENY)


@pytest.mark.parametrize("command", ALLOW)
def test_everyday_command_is_allowed(command: str, policy: Policy) -> None:
    decision = check_command(command, policy)
    assert decision.allowed, decision.reason
    assert not decision.approval_required


@pytest.mark.parametrize(("command", "why"), DENY)
def test_hostile_command_is_denied_for_its_reason(command: str, why: str, policy: Policy) -> None:
    decision = check_command(command, policy)
    assert not decision.allowed
    assert why in decision.reason


def test_article_commands_report_class_and_paths(policy: Policy) -> None:
    check = check_command(ALLOW[0], policy)
    assert check.effect_class == "read"
    assert check.reads == ("COO-FILESYSTEM/articles/drafts/example.md",)
    create = check_command(ALLOW[1], policy)
    assert create.effect_class == "local"
    assert create.idempotent
    assert create.writes == ("COO-FILESYSTEM/articles/drafts", "COO-FILESYSTEM/articles/drafts/example.md")
    assert create.programs == ("mkdir", "printf")


def test_copy_into_directory_writes_the_file_inside_it(policy: Policy) -> None:
    assert check_command("cp notes.txt docs/", policy).writes == ("docs/notes.txt",)
    assert check_command("cp notes.txt docs", policy).writes == ("docs/notes.txt",)
    assert check_command("mv notes.txt new.txt", policy).writes == ("new.txt", "notes.txt")


def test_append_is_not_idempotent_and_mkdir_needs_p(policy: Policy) -> None:
    assert not check_command("echo x >> log.txt", policy).idempotent
    assert check_command("echo x > log.txt", policy).idempotent
    assert not check_command("mkdir d", policy).idempotent
    assert check_command("rm -f x", policy).idempotent
    assert not check_command("rm x", policy).idempotent
