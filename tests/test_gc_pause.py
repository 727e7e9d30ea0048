"""The collector is paused while a script is built (dal/core/gcpause.py), and a process that goes on running
scripts (the API, the REPL, a test suite) still frees each finished one as soon as Python would."""

from __future__ import annotations

import gc
import threading
import tracemalloc

from dal.core import gcpause

# A 16 MB string in a global, and a function: the globals, the function and the compiled code refer
# to each other, so only the cycle collector frees them.
SCRIPT = 'fn grow(s) { return s + s }\nlet s = "x"\nfor i in range(24) { s = grow(s) }\nprint(len(s))\n'


def test_a_finished_script_and_its_values_are_freed_by_the_young_collections(dal) -> None:
    dal.run(SCRIPT)
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for _ in range(3):
            assert dal.run(SCRIPT).stdout == "16777216\n"
            gc.collect(1)  # what Python's own young collections do as the process goes on
        held = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    # Moving what was built to the oldest generation kept each script, and its 16 MB string, until a
    # full collection.
    assert held < 4_000_000, held
    assert not gcpause.keep_frozen  # only a one-shot `dal` command freezes


def test_the_collector_is_off_while_building_and_back_on_after_even_when_nested_or_concurrent() -> None:
    assert gc.isenabled()
    inside = []
    go, done = threading.Event(), threading.Event()

    def other() -> None:
        with gcpause.gc_paused():
            go.set()
            done.wait(5)
            inside.append(gc.isenabled())

    t = threading.Thread(target=other)
    t.start()
    go.wait(5)
    with gcpause.gc_paused():
        with gcpause.gc_paused():
            inside.append(gc.isenabled())
        inside.append(gc.isenabled())
    inside.append(gc.isenabled())  # the other thread's pause still holds
    done.set()
    t.join()
    assert inside == [False, False, False, False]
    assert gc.isenabled()


def test_a_collector_the_host_turned_off_stays_off() -> None:
    gc.disable()
    try:
        with gcpause.gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_dal_process_starts_with_the_collector_off_and_turns_it_on_when_its_script_is_parsed_or_its_command_starts(
) -> None:
    try:
        gcpause.pause_start()  # what dal.cli.entry.main does first
        assert not gc.isenabled()
        with gcpause.gc_paused():  # a one-shot command's parse
            assert not gc.isenabled()
        assert gc.isenabled()  # the script itself runs with the collector, as before
        gcpause.end_start()  # nothing left to end
        assert gc.isenabled()

        gcpause.pause_start()
        gcpause.end_start()  # any other command (the REPL, a worker) starts with it on
        assert gc.isenabled()
    finally:
        gc.enable()


def test_a_collector_the_host_turned_off_is_not_turned_on_by_the_start_pause() -> None:
    gc.disable()
    try:
        gcpause.pause_start()
        gcpause.end_start()
        with gcpause.gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
