"""byoc.gc_pause: full collections wait during bulk work; everything is restored after."""

from __future__ import annotations

import gc

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
