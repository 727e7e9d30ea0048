"""The `dal` command's entry point: the installed `dal` script (scripts/dal) and `python -m dal` call
`main()` here.

Ctrl-C must end `dal` with `dal: interrupted` and exit 130 at any instant. The command's own handling
(main's `except KeyboardInterrupt`, the runner's graceful stop while a script runs) exists only once its
modules are imported, and importing them is most of a cold start; a KeyboardInterrupt raised inside an
import printed a traceback. So SIGINT is taken before DAL imports anything (the `dal` script does it on
its first line, and `main()` here again, for `python -m dal`), and handled in three phases:

- while DAL starts (the imports, the argument parser), a Ctrl-C says so and exits 130 at once:
  nothing has run yet, and there is nothing to record;
- when a command starts (`command_started`), Python's own handler is back: a KeyboardInterrupt,
  which the commands and main handle as before (the runner swaps in its own while a script runs).
  A KeyboardInterrupt raised where Python cannot propagate it — inside a weakref callback or a `__del__`,
  such as importlib's module-lock clean-up during a lazy import — is "unraisable": Python printed
  `Exception ignored` and dropped it, and the run went on as if no Ctrl-C had come. While a command runs,
  such a KeyboardInterrupt is not dropped but delivered again (`_redeliver`): a moment later SIGINT is
  marked as arrived anew, and its handler — Python's, or the runner's by then — acts on it;
- when the command has returned (`command_done`), SIGINT is ignored, so the exit code is the
  command's and a late Ctrl-C cannot turn the exit into a traceback.

`command_started` and `command_done` change nothing in a process that did not start in `main()`
(dal.cli.main.main called from Python, as the tests do). Before the `dal` script's first line runs,
Python itself is starting (its streams, `site`): a Ctrl-C there is Python's to handle (docs/cli.md).
"""

from __future__ import annotations

import _signal  # the C module under `signal`, which would import enum first
import os
import sys
from typing import Any

_installed = False
_unraisable_hook: Any = None


def _interrupted_while_starting(signum: int, frame: object) -> None:
    os.write(2, b"dal: interrupted\n")
    os._exit(130)


def _redeliver(unraisable: Any) -> None:
    """sys.unraisablehook while a command runs: a Ctrl-C that landed where it could not be raised is
    signalled again instead of dropped; everything else goes to the hook that was there."""
    if isinstance(unraisable.exc_value, KeyboardInterrupt):
        # From another thread, once this one lets go of the interpreter: signalled here, the handler would
        # run here, inside the hook, and its KeyboardInterrupt would be dropped again.
        import _thread

        _thread.start_new_thread(_thread.interrupt_main, (_signal.SIGINT,))
    else:
        _unraisable_hook(unraisable)


def command_started(*, one_shot: bool = False) -> None:
    """A command is about to run: Ctrl-C is a KeyboardInterrupt from here on. `one_shot`: the command
    builds one script (or checks a few) and exits, so what it builds may stay out of the garbage
    collector's way for good (dal/core/gcpause.py); not the REPL or `dal test`, which run one after another."""
    if _installed:
        # Imported while a Ctrl-C still exits at once: an import that a KeyboardInterrupt cut short
        # printed a traceback (issue 13).
        from dal.core import gcpause

        if one_shot:
            gcpause.keep_frozen = True  # and the collector stays off until its script is parsed
        else:
            gcpause.end_start()
        global _unraisable_hook
        if _unraisable_hook is None:
            _unraisable_hook = sys.unraisablehook
            sys.unraisablehook = _redeliver
        _signal.signal(_signal.SIGINT, _signal.default_int_handler)


def command_done() -> None:
    """The command has returned (or is saying that it was interrupted): SIGINT is ignored to the exit."""
    if _installed:
        _signal.signal(_signal.SIGINT, _signal.SIG_IGN)


closed_at_start: set[str] = set()  # which of stdin, stdout, stderr `dal` was started without


def _fill_closed_streams() -> None:
    """A supervisor may start `dal` with stdin, stdout or stderr closed (`<&-`, `>&-`). Python then has no
    sys.stdout (every print was a traceback), and worse, the next file DAL opens would get descriptor 1 and
    receive what the run prints. Each closed one is opened on /dev/null, and remembered: `dal run -` says
    that there is no script on a closed stdin."""
    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        try:
            os.fstat(fd)
            continue
        except OSError:
            pass
        got = os.open(os.devnull, os.O_RDWR)
        if got != fd:
            os.dup2(got, fd)
            os.close(got)
        closed_at_start.add(name)
        setattr(sys, name, open(fd, "r" if fd == 0 else "w", encoding="utf-8", errors="backslashreplace",
                                closefd=False))


def main() -> int:
    """The `dal` command line."""
    global _installed
    _signal.signal(_signal.SIGINT, _interrupted_while_starting)
    _installed = True
    from dal.core.gcpause import pause_start

    pause_start()  # the collector off while DAL starts (dal/core/gcpause.py)
    _fill_closed_streams()
    from dal.cli.main import main as dal_main

    try:
        return dal_main()
    finally:
        command_done()
