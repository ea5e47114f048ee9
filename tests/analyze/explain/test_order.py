"""order.py: sort orders that cost nothing on sorted data, and the tid lookup."""
import numpy as np
import pytest

from analyze.explain.order import Lookup, argsort_unless_sorted, thread_time_order, unique_of


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


@pytest.mark.parametrize("keys", [[0, 3, 7], [1000, 1001, 1099], [-4, 0, 9], [30000, 32767],
                                  [2, 1 << 40]])
@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.uint16, np.int32, np.uint32, np.int64,
                                   np.uint64])
def test_lookup_answers_alike_for_every_integer_type(keys, dtype):
    """The direct path (values inside the table, read as they are) and the general one
    (copied to int64, clipped) give the same answers as a sorted search, whatever the
    values' type; a type that cannot take the table's offset goes the general way."""
    keys = np.array(keys, np.int64)
    want_vals = np.r_[keys, keys - 1, keys + 1, keys[::-1]]
    info = np.iinfo(dtype)
    want_vals = want_vals[(want_vals >= info.min) & (want_vals <= info.max)]
    vals = want_vals.astype(dtype)
    inside = vals[(vals.astype(np.int64) >= keys[0]) & (vals.astype(np.int64) <= keys[-1])]
    for v in (vals, inside):
        g, ok = Lookup(keys)(v)
        pos = np.searchsorted(keys, v.astype(np.int64))
        hit = np.isin(v.astype(np.int64), keys)
        assert ok.tolist() == hit.tolist()
        assert g[ok].tolist() == pos[ok].tolist() and (g[~ok] == 0).all()


def test_unique_of_small_ids_from_a_table_equal_a_sort():
    rng = np.random.default_rng(3)
    a = rng.integers(0, 5000, 10_000).astype(np.int32)
    b = rng.integers(0, 70, 500).astype(np.int16)
    c = np.array([1 << 30, 7], np.int64)                 # a wide range: the sorting way
    for arrays in ((a, b), (a, b, c), (b,), (np.zeros(0, np.int32), b)):
        want = np.unique(np.concatenate([x.astype(np.int64) for x in arrays]))
        got = unique_of(*arrays)
        assert got.dtype == np.int64 and got.tolist() == want.tolist()
