"""order.py: sort orders that cost nothing on sorted data, and the tid lookup."""
import numpy as np
import pytest

from analyze.order import Lookup, argsort_unless_sorted, thread_time_order, unique_of


def test_argsort_unless_sorted():
    assert argsort_unless_sorted(np.array([1, 1, 2, 5])) is None
    assert argsort_unless_sorted(np.array([], np.int64)) is None
    k = np.array([3, 1, 3, 0, 1])
    assert argsort_unless_sorted(k, stable=True).tolist() == [3, 1, 4, 0, 2]


def test_thread_time_order_is_a_stable_sort_by_thread_then_time():
    tid = np.array([7, 5, 7, 5, 5])
    t = np.array([1, 9, 0, 9, 3])
    assert thread_time_order(tid, t).tolist() == [4, 1, 3, 2, 0]   # ties keep their order
    assert thread_time_order(np.array([5, 5, 7]), np.array([1, 2, 0])) is None


@pytest.mark.parametrize("keys", [[-1, 5, 9, 1000], [3, 1 << 40]])
def test_lookup_finds_each_key_and_nothing_else(keys):
    """A table over a small range (negative keys too) or a search over a wide one: the
    same answers; values below, between and above the keys are not found."""
    keys = np.array(keys, np.int64)
    vals = np.r_[keys[::-1], keys[0] - 7, keys[0] + 1, keys[-1] + 1]
    g, ok = Lookup(keys)(vals.astype(np.int64))
    n = len(keys)
    assert ok.tolist() == [True] * n + [False] * 3
    assert g[:n].tolist() == list(range(n))[::-1]
    assert Lookup(np.zeros(0, np.int64))(np.array([1]))[1].tolist() == [False]


def test_unique_of_merges_arrays_of_any_int_type():
    u = unique_of(np.array([5, 3], np.int32), np.array([], np.int64), np.array([3, 9], np.int64))
    assert u.tolist() == [3, 5, 9] and u.dtype == np.int64
