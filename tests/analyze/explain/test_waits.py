"""waits.py: each wait joined to the wakeup that ended it."""
import numpy as np
import pytest

from analyze.explain.waits import _match


@pytest.mark.parametrize("long_run", [False, True])
def test_match_takes_the_last_equal_key_and_finds_nothing_else(long_run):
    """(tid, t) pairs: the index of the last equal one among the wakeups, whatever the
    order they come in; a wait with no wakeup of its own (another thread's, another time)
    matches nothing. long_run: times 2^61 ns apart, beyond one packed key."""
    far = 1 << 61 if long_run else 1000
    r_tid = np.array([7, 5, 7, 5, 9, 7], np.int64)
    r_t = np.array([far, 20, far, 10, 30, 3 * far], np.int64)
    w_tid = np.array([7, 5, 5, 9, 9, 8, 7], np.int64)
    w_t = np.array([far, 10, 20, 30, 31, 20, 2 * far], np.int64)
    pos, found = _match(r_tid, r_t, w_tid, w_t)
    assert found.tolist() == [True, True, True, True, False, False, False]
    assert pos[found].tolist() == [2, 3, 1, 4]       # (7, far) twice: the last, row 2


def test_match_with_nothing_on_one_side():
    pos, found = _match(np.zeros(0, np.int64), np.zeros(0, np.int64),
                        np.array([1, 2]), np.array([5, 6]))
    assert not found.any() and len(pos) == 2
