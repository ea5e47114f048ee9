"""Protocol-buffer wire encoding of many messages of one shape at once, with numpy: for the
millions of same-shaped packets of a trace, where making a message object per row costs
tens of microseconds.

A Col is N rows of bytes: (data, lens), data a (N, W) uint8 array whose row i holds lens[i]
bytes. A message is a Seq of parts (Cols and Seqs) laid one after the other on each row; a
nested message is a Seq behind its tag and its length (a varint Col computed from the Seq's
lens). Nothing is copied while the tree is built: `rows_bytes` computes where every leaf
goes on every row and writes each leaf once. Fields come out in the order they are given: in
field-number order, the bytes are the protobuf runtime's own
(tests/analyze/render/test_pftrace.py compares them).
"""
from __future__ import annotations

import numpy as np

VARINT, FIXED64, LEN = 0, 1, 2


class Col:
    """N rows of bytes (module doc)."""

    def __init__(self, data: np.ndarray, lens: np.ndarray):
        self.data, self.lens = data, lens.astype(np.int64, copy=False)

    def __len__(self) -> int:
        return len(self.lens)

    def leaves(self):
        yield self


class Seq:
    """Parts laid one after the other on each row."""

    def __init__(self, parts):
        self.parts = list(parts)
        self.lens = sum(p.lens for p in self.parts)

    def __len__(self) -> int:
        return len(self.lens)

    def leaves(self):
        for p in self.parts:
            yield from p.leaves()


def number(msg_class, field: str) -> int:
    """A field's number, as the message's descriptor gives it."""
    return msg_class.DESCRIPTOR.fields_by_name[field].number


def varint_bytes(v: int) -> bytes:
    """One value as a varint."""
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def const(b: bytes, n: int) -> Col:
    """The same bytes on n rows."""
    return Col(np.broadcast_to(np.frombuffer(b, np.uint8), (n, len(b))),
               np.full(n, len(b), np.int64))


def varints(v) -> Col:
    """Each value as a varint (negative ones as their 64-bit two's complement: 10 bytes)."""
    u = np.asarray(v).astype(np.int64, copy=False).view(np.uint64)
    data = np.zeros((len(u), 10), np.uint8)
    lens = np.ones(len(u), np.int64)
    for k in range(10):
        rest = u >> np.uint64(7 * (k + 1))
        more = rest != 0
        data[:, k] = ((u >> np.uint64(7 * k)) & np.uint64(0x7F)).astype(np.uint8) \
            | (more.astype(np.uint8) << 7)
        lens += more
        if not more.any():
            return Col(data[:, :k + 1], lens)
    return Col(data, lens)


def fixed64(v) -> Col:
    u = np.ascontiguousarray(np.asarray(v).astype(np.int64, copy=False))
    return Col(u.view(np.uint8).reshape(len(u), 8), np.full(len(u), 8, np.int64))


def table(strings: list[bytes], index) -> Col:
    """Row i: strings[index[i]]."""
    width = max((len(s) for s in strings), default=0)
    t = np.zeros((len(strings), max(width, 1)), np.uint8)
    for i, s in enumerate(strings):
        t[i, :len(s)] = np.frombuffer(s, np.uint8)
    idx = np.asarray(index, np.int64)
    return Col(t[idx], np.array([len(s) for s in strings], np.int64)[idx])


def concat(*parts) -> Seq:
    """Row i: the parts' rows i, one after the other."""
    return Seq(parts)


def tag(num: int, wire: int, n: int) -> Col:
    return const(varint_bytes(num << 3 | wire), n)


def field_varint(num: int, v) -> Col:
    c = varints(v)
    return concat(tag(num, VARINT, len(c)), c)


def field_fixed64(num: int, v) -> Col:
    c = fixed64(v)
    return concat(tag(num, FIXED64, len(c)), c)


def framed(num: int, body: bytes) -> bytes:
    """One length-delimited field num holding body."""
    return varint_bytes(num << 3 | LEN) + varint_bytes(len(body)) + body


def field_len(num: int, inner: Col) -> Col:
    """A string, bytes or nested-message field holding inner's rows."""
    return concat(tag(num, LEN, len(inner)), varints(inner.lens), inner)


def packed_varint(num: int, v) -> bytes:
    """A packed repeated varint field holding the values v (nothing when v is empty, as the
    protobuf runtime writes it)."""
    if not len(v):
        return b""
    return framed(num, rows_bytes(varints(v)))


def present(part, mask):
    """part where mask holds, nothing elsewhere (an optional field left out)."""
    keep = np.asarray(mask, bool)
    if isinstance(part, Col):
        return Col(part.data, np.where(keep, part.lens, 0))
    return Seq([present(p, keep) for p in part.parts])


def rows_bytes(part) -> bytes:
    """The rows end to end. The leaves side by side make one (N, sum of widths) array whose
    row i holds row i's bytes in order, padding between them; a mask of the bytes each leaf
    holds on each row takes them out in row-major order, which is the rows end to end."""
    leaves = [leaf for leaf in part.leaves() if leaf.data.shape[1]]
    if not leaves or not len(part):
        return b""
    data = np.hstack([leaf.data for leaf in leaves])
    keep = np.hstack([np.arange(leaf.data.shape[1]) < leaf.lens[:, None] for leaf in leaves])
    return data[keep].tobytes()
