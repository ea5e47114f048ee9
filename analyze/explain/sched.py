"""Scheduler views of a run: the run's run-queue latency, per thread, per mutex, CPU placement.

sched_figures   -> summary.json sched: runq_p50_us, runq_p99_us, voluntary, involuntary,
                   migrations

df_threads      -> threads.csv: tid, comm, role, runq_ns, oncpu_ns, offcpu_ns,
                   voluntary, involuntary, migrations, cpus ("0,1": CPUs it ran on)
df_locks        -> locks.csv: mutex, symbol, acquisitions, contended, hold_p50_ns,
                   hold_p99_ns, wait_p50_ns, wait_p99_ns, top_stack
df_runq_hist    -> log2 buckets of run-queue latency like runqlat: lo_us, hi_us, count
df_cpu_placement-> tid × cpu on-CPU ns

On-CPU time of a thread is measured between its recorded switches: from each
switch-in (t_on, cpu_on) to the next switch-out of the same thread, so time
before its first and after its last recorded switch is not counted.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..load.load import per_run
from .antagonists import CLASSES, has_occupancy, thread_antagonists
from .order import Lookup, switch_order, unique_of

THREAD_COLS = ["tid", "ns_tid", "comm", "role", "runq_ns", "oncpu_ns", "offcpu_ns", "voluntary",
               "involuntary", "migrations", "cpus"]
# with the cpu event: who held the CPU while the thread was runnable (shares of runq_ns)
ANTAGONIST_COLS = [f"runq_{c}_share" for c in CLASSES] + ["top_antagonist", "top_antagonist_share"]
LOCK_COLS = ["mutex", "symbol", "acquisitions", "contended", "hold_p50_ns", "hold_p99_ns",
             "wait_p50_ns", "wait_p99_ns", "top_stack"]
STACK_FRAMES = 4  # frames shown in top_stack
LOCK_FUNCS = ("pthread_mutex_lock", "pthread_mutex_trylock", "__pthread_mutex_lock",
              "___pthread_mutex_lock", "__GI___pthread_mutex_lock")


def _oncpu_by_cpu(run) -> pd.DataFrame:
    """On-CPU ns of each thread (index tid) on each CPU (columns cpu), summed over its slices
    between consecutive switches; only threads and CPUs with a slice. Kept on the run."""
    sw = run.switches
    return per_run(run, "_oncpu_by_cpu", (id(sw), len(sw)), lambda: _oncpu_table(run))


def _oncpu_table(run) -> pd.DataFrame:
    sw = run.switches
    o = switch_order(run)

    def col(c):
        v = sw[c].to_numpy()
        return v if o is None else v[o]

    tid = col("tid")
    same = tid[1:] == tid[:-1]               # a slice: a switch-in to the thread's next switch-out
    dur = np.maximum(col("t_off_ns")[1:] - col("t_on_ns")[:-1], 0)[same]
    cpu, tid = col("cpu_on")[:-1][same], tid[:-1][same]
    tids, cpus = unique_of(tid), unique_of(cpu)
    cell = Lookup(tids)(tid)[0] * len(cpus) + Lookup(cpus)(cpu)[0]
    ns = np.bincount(cell, weights=dur, minlength=len(tids) * len(cpus))  # exact below 2**53
    return pd.DataFrame(ns.astype(np.int64).reshape(len(tids), len(cpus)),
                        index=pd.Index(tids, name="tid"), columns=pd.Index(cpus, name="cpu"))


def _runnable_ns(rq: pd.DataFrame) -> np.ndarray:
    """Each runq interval's length (int64 ns)."""
    return rq["t_run_ns"].to_numpy(np.int64) - rq["t_runnable_ns"].to_numpy(np.int64)


def _per_thread(n: int, g: np.ndarray, weights=None) -> np.ndarray:
    """Sum of weights (count without) per thread index g (of n threads), int64 (exact below
    2**53)."""
    return np.bincount(g, weights=weights, minlength=n).astype(np.int64)


def df_threads(run) -> pd.DataFrame:
    """One row per thread seen in tasks, switches or runq (columns THREAD_COLS, and with
    the cpu event ANTAGONIST_COLS: the shares of its runnable time by what held its CPU,
    and the process that held it most)."""
    sw, rq = run.switches, run.runq
    tids = unique_of(run.tasks["tid"].to_numpy(), sw["tid"].to_numpy(), rq["tid"].to_numpy())
    n, thread = len(tids), Lookup(tids)
    g_sw, g_rq = thread(sw["tid"].to_numpy())[0], thread(rq["tid"].to_numpy())[0]  # all known
    df = pd.DataFrame({"tid": tids}).set_index("tid")
    t = run.tasks.drop_duplicates("tid", keep="last").set_index("tid")
    # the thread's id in its own PID namespace (a container's), where it is not the host's
    ns = (t["ns_tid"].reindex(df.index).fillna(0).astype(np.int64) if "ns_tid" in t
          else pd.Series(0, index=df.index, dtype=np.int64))
    df["ns_tid"] = ns.where(ns != df.index.to_series(), 0)
    df["comm"] = t["comm"].reindex(df.index).fillna("").astype(str)
    df["role"] = t["role"].reindex(df.index).fillna("other").astype(str)
    df["runq_ns"] = _per_thread(n, g_rq, _runnable_ns(rq))
    df["oncpu_ns"] = _oncpu_by_cpu(run).sum(axis=1).reindex(df.index, fill_value=0)
    df["offcpu_ns"] = _per_thread(n, g_sw, sw["t_on_ns"].to_numpy() - sw["t_off_ns"].to_numpy())
    vol = _per_thread(n, g_sw, sw["voluntary"].to_numpy(np.float64))
    df["voluntary"] = vol
    df["involuntary"] = _per_thread(n, g_sw) - vol
    df["migrations"] = t["migrations"].reindex(df.index).fillna(0).astype(np.int64)
    cpus = _cpu_lists(n, ((g_sw, sw["cpu_on"]), (g_sw, sw["cpu_off"]), (g_rq, rq["cpu"])))
    df["cpus"] = pd.Series(cpus, index=df.index, dtype=object)
    for c in ("runq_ns", "oncpu_ns", "offcpu_ns", "voluntary", "involuntary"):
        df[c] = df[c].astype(np.int64)
    if not has_occupancy(run):
        return df.reset_index()[THREAD_COLS]
    ant = thread_antagonists(run).set_index("tid")
    for c in CLASSES:
        df[f"runq_{c}_share"] = ant[f"{c}_share"].reindex(df.index)
    df["top_antagonist"] = ant["top_antagonist"].reindex(df.index).fillna("")
    df["top_antagonist_share"] = ant["top_share"].reindex(df.index)
    return df.reset_index()[THREAD_COLS + ANTAGONIST_COLS]


def _cpu_lists(n: int, pairs) -> list[str]:
    """'0,1' for each of n threads: the CPUs of its (thread index, cpu) pairs, ascending."""
    cpus = unique_of(*(c.to_numpy() for _, c in pairs))
    if not len(cpus):
        return [""] * n
    cpu_of = Lookup(cpus)
    seen = np.zeros(n * len(cpus), bool)
    for g, cpu in pairs:
        seen[g * len(cpus) + cpu_of(cpu.to_numpy())[0]] = True
    seen = seen.reshape(n, -1)
    return [",".join(str(int(c)) for c in cpus[row]) for row in seen]


def _stack_text(run, sid) -> str:
    frames = run.stacks.get(("locks", int(sid)), [])
    # Skip the locking functions themselves: show where the lock is taken.
    i = 0
    while i < len(frames) - 1 and any(frames[i].startswith(f) for f in LOCK_FUNCS):
        i += 1
    return ";".join(frames[i:i + STACK_FRAMES])


def df_locks(run) -> pd.DataFrame:
    """One row per mutex, most contended first (columns LOCK_COLS)."""
    lk = run.locks
    if len(lk) == 0:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in LOCK_COLS})
    g = lk.groupby("mutex")
    df = pd.DataFrame({"acquisitions": g.size(), "contended": g["contended"].sum()})
    q = g[["hold_ns", "wait_ns"]].quantile([0.5, 0.99]).unstack()
    df["hold_p50_ns"], df["hold_p99_ns"] = q[("hold_ns", 0.5)], q[("hold_ns", 0.99)]
    df["wait_p50_ns"], df["wait_p99_ns"] = q[("wait_ns", 0.5)], q[("wait_ns", 0.99)]
    # Most frequent acquirer stack (contended acquisitions first, else all).
    st = lk[lk["ustack_id"] >= 0]
    pref = st[st["contended"]]
    st = pd.concat([pref, st[~st["mutex"].isin(pref["mutex"])]])
    top = (st.groupby(["mutex", "ustack_id"]).size().rename("k").reset_index()
           .sort_values(["mutex", "k", "ustack_id"], ascending=[True, False, True])
           .drop_duplicates("mutex").set_index("mutex")["ustack_id"])
    df["top_stack"] = [_stack_text(run, top[m]) if m in top.index else "" for m in df.index]
    df["symbol"] = [f"0x{int(m):x}" for m in df.index]
    df = df.reset_index().sort_values(["contended", "acquisitions"], ascending=False, kind="stable")
    df["contended"] = df["contended"].astype(np.int64)
    return df[LOCK_COLS].reset_index(drop=True)


def sched_figures(run) -> dict:
    """The run's scheduler figures (summary.json sched): run-queue latency runq_p50_us,
    runq_p99_us over every traced runnable interval (None without any), voluntary and
    involuntary switches, migrations."""
    d = _runnable_ns(run.runq)
    p50, p99 = np.percentile(d, [50, 99]) / 1e3 if len(d) else (None, None)
    sw = run.switches
    return {"runq_p50_us": p50, "runq_p99_us": p99,
            "voluntary": int(sw["voluntary"].sum()),
            "involuntary": int((~sw["voluntary"]).sum()),
            "migrations": int(run.tasks["migrations"].sum())}


def df_runq_hist(run) -> pd.DataFrame:
    """Run-queue latency histogram: slot k holds [2^(k-1), 2^k − 1] µs (slot 0: 0 µs)."""
    us = np.maximum(_runnable_ns(run.runq), 0) // 1000
    if len(us) == 0:
        return pd.DataFrame({"lo_us": pd.Series(dtype=np.int64), "hi_us": pd.Series(dtype=np.int64),
                             "count": pd.Series(dtype=np.int64)})
    # slot = bit length of us (frexp's exponent is exact below 2**53)
    slot = np.frexp(us.astype(np.float64))[1].astype(np.int64)
    counts = np.bincount(slot)
    k = np.arange(len(counts))
    lo = np.where(k == 0, 0, 1 << np.maximum(k - 1, 0))
    hi = (1 << k) - 1
    return pd.DataFrame({"lo_us": lo.astype(np.int64), "hi_us": hi.astype(np.int64),
                         "count": counts.astype(np.int64)})


def df_cpu_placement(run) -> pd.DataFrame:
    """On-CPU ns per thread (index tid) and CPU (columns), from on-CPU slices."""
    p = _oncpu_by_cpu(run)
    return pd.DataFrame(dtype=np.int64) if p.empty else p.copy()
