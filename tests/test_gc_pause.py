"""byoc.gc_pause: full collections wait during bulk work; everything is restored after."""

from __future__ import annotations

import gc
import sys
import threading

import pytest

from byoc.gc_pause import _NEVER, full_collections_deferred


@pytest.fixture
def thresholds():
    saved = gc.get_threshold()
    yield saved
    gc.set_threshold(*saved)


def test_young_collections_run_and_full_ones_wait(thresholds):
    with full_collections_deferred():
        inside = gc.get_threshold()
        enabled_inside = gc.isenabled()
    assert gc.get_threshold() == thresholds
    if inside[2] == _NEVER:  # a generational collector: only the full collections wait
        assert inside[:2] == thresholds[:2]
        assert enabled_inside
    else:  # an incremental collector ignores the third threshold: switched off instead
        assert not enabled_inside
    assert gc.isenabled()


def test_thresholds_come_back_after_an_error(thresholds):
    with pytest.raises(ValueError), full_collections_deferred():
        raise ValueError("inside")
    assert gc.get_threshold() == thresholds
    assert gc.isenabled()


def test_nested_deferrals_restore_the_outer_state(thresholds):
    with full_collections_deferred():
        outer = gc.get_threshold()
        with full_collections_deferred():
            pass
        assert gc.get_threshold() == outer
    assert gc.get_threshold() == thresholds


def test_a_collector_the_caller_switched_off_stays_off(thresholds):
    gc.disable()
    try:
        with full_collections_deferred():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_overlapping_deferrals_in_threads_restore_the_thresholds(thresholds):
    """Thread A enters, thread B enters, A leaves, B leaves: full collections wait
    until the last one leaves, and then the thresholds are what they were before."""
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def a():
        with full_collections_deferred():
            a_in.set()
            b_in.wait()
        a_out.set()

    def b():
        a_in.wait()
        with full_collections_deferred():
            b_in.set()
            a_out.wait()
            seen["after A left"] = gc.get_threshold(), gc.isenabled()

    with full_collections_deferred():
        seen["deferred"] = gc.get_threshold(), gc.isenabled()
    threads = [threading.Thread(target=a), threading.Thread(target=b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen["after A left"] == seen["deferred"] != (thresholds, True)
    assert gc.get_threshold() == thresholds
    assert gc.isenabled()


def test_many_threads_leave_the_collector_as_they_found_it(thresholds):
    barrier = threading.Barrier(8)

    def work():
        barrier.wait()
        for depth in range(200):
            with full_collections_deferred():
                if depth % 2:
                    with full_collections_deferred():
                        pass

    threads = [threading.Thread(target=work) for _ in range(8)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert gc.get_threshold() == thresholds
    assert gc.isenabled()
