"""Figures of one run (and of several, for compare): matplotlib, Agg backend.

Every `plot_*` takes DataFrames in the shapes of the analysis contract and a
path, writes one PNG there and returns the path. Nothing here computes a
statistic the report prints: the figures draw what df_* functions produced
(the percentile curve and the timeline's rolling P99 excepted, which are
drawing aids).
"""
from __future__ import annotations

import os
from typing import Callable, Mapping, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402,F401
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from ..explain.attribute import adds_up  # noqa: E402
from ..explain.decompose import PARTS  # noqa: E402

#: Parts of a request's latency, in stacking order, with one colour each.
PART_LABELS = {
    "queue_wait": "queue wait (no worker yet)",
    "oncpu": "on CPU",
    "runq_wakeup": "runnable after wakeup",
    "runq_preempt": "runnable after preemption",
    "throttled": "throttled by a CPU quota",
    "lock_wait": "lock wait (futex: mutex, condvar)",
    "io_wait": "I/O wait (socket, pipe, poll)",
    "sleep": "sleep (timers)",
    "blocked": "blocked, other",
}
PART_COLORS = {
    "queue_wait": "#8c9bb0",
    "oncpu": "#3b8f4f",
    "runq_wakeup": "#f28e2b",
    "runq_preempt": "#d1402f",
    "throttled": "#7a1f1f",
    "lock_wait": "#8e5fb8",
    "io_wait": "#4e79a7",
    "sleep": "#a0cbe8",
    "blocked": "#c9d3df",
}
_DPI = 110
_PCTL_TICKS = [0.0, 0.5, 0.9, 0.99, 0.999, 0.9999, 0.99999, 0.999999]


def _save(fig, path) -> str:
    path = os.fspath(path)
    fig.savefig(path, dpi=_DPI, bbox_inches="tight", facecolor="white")
    plt.close(fig)
    return path


def _empty(path, title: str, message: str, size=(8, 3)) -> str:
    """A figure that says why there is nothing to draw (never a broken image)."""
    fig, ax = plt.subplots(figsize=size)
    ax.set_axis_off()
    ax.set_title(title)
    ax.text(0.5, 0.5, message, ha="center", va="center", fontsize=11, color="#555",
            transform=ax.transAxes, wrap=True)
    return _save(fig, path)


def _pct_label(p: float) -> str:
    if p == 0:
        return "0%"
    return f"{p * 100:.{max(0, len(str(p)) - 4)}f}%"


def percentile_points(values_ns, max_points: int = 2000):
    """(x, y_ms) of a percentile curve: x = 1/(1-p), p = rank/n, thinned on log x."""
    v = np.sort(np.asarray(values_ns, dtype=np.float64))
    v = v[np.isfinite(v)]
    n = len(v)
    if n == 0:
        return np.array([]), np.array([])
    x = n / (n - np.arange(n, dtype=np.float64))  # = 1/(1-p), p = rank/n
    if n > max_points:  # keep points evenly spread on the log axis, and the max
        grid = np.unique(np.geomspace(1, x[-1], max_points).astype(np.int64))
        idx = np.unique(np.clip(n - np.ceil(n / grid).astype(np.int64), 0, n - 1))
        idx = np.union1d(idx, [n - 1])
        x, v = x[idx], v[idx]
    return x, v / 1e6


def plot_percentiles(data: pd.DataFrame | Mapping[str, pd.DataFrame], path,
                     column: str = "latency_ns", title: str | None = None) -> str:
    """Latency by percentile, HdrHistogram style (x = 1/(1-p) on a log scale).

    `data` is one decomposition (draws service time, and end-to-end time when
    it differs) or {run label: decomposition} (one curve per run, `column`).
    """
    if isinstance(data, pd.DataFrame):
        curves = {"service time (t_end − t_start)": data[column]}
        if "e2e_ns" in data and column == "latency_ns" and \
                (data["e2e_ns"] != data["latency_ns"]).any():
            curves["end to end (incl. queue wait)"] = data["e2e_ns"]
    else:
        curves = {label: df[column] for label, df in data.items()}
    title = title or "Latency by percentile"
    if not curves or all(len(c) == 0 for c in curves.values()):
        return _empty(path, title, "no requests in this run")
    fig, ax = plt.subplots(figsize=(9, 4.8))
    xmax = 10.0
    for label, vals in curves.items():
        x, y = percentile_points(vals)
        if len(x) == 0:
            continue
        xmax = max(xmax, x[-1])
        ax.plot(x, y, lw=1.8, label=f"{label} (n={len(vals):,})", drawstyle="steps-post")
    ax.set_xscale("log")
    ticks = [p for p in _PCTL_TICKS if 1 / (1 - p) <= xmax * 1.01]
    ax.set_xticks([1 / (1 - p) for p in ticks])
    ax.set_xticklabels([_pct_label(p) for p in ticks])
    ax.minorticks_off()
    ax.set_xlim(1, xmax * 1.2)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("percentile")
    ax.set_ylabel("latency (ms)")
    ax.set_title(title)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="upper left", fontsize=9)
    return _save(fig, path)


def plot_decomposition(bands: pd.DataFrame, path, title: str | None = None) -> str:
    """Where the time went, per percentile band: mean ms, or µs if all are under 1 ms
    (left), shares (right)."""
    title = title or "Where the time went, per latency band"
    parts = [p for p in PARTS if f"{p}_ms" in bands]
    if bands.empty or not parts:
        return _empty(path, title, "no decomposition (needs probes)")
    labels = [f"{b}\n(n={int(n):,})" for b, n in zip(bands.index, bands["n"])]
    x = np.arange(len(bands))
    # µs when even the slowest band's mean is under a millisecond (report.html does the same)
    top = bands[[f"{p}_ms" for p in parts]].fillna(0).sum(axis=1).max()
    unit, scale = ("µs", 1e3) if top < 1 else ("ms", 1.0)
    fig, (ax_ms, ax_sh) = plt.subplots(1, 2, figsize=(12, 4.8))
    bottom_ms = np.zeros(len(bands))
    bottom_sh = np.zeros(len(bands))
    # a band whose parts do not add up gets no share bars (attribute.adds_up)
    fits = np.array([adds_up(r) for _, r in bands.iterrows()])
    for p in parts:
        ms = bands[f"{p}_ms"].fillna(0).to_numpy(dtype=float) * scale
        share = bands[f"{p}_share"].fillna(0).to_numpy(dtype=float) * 100 \
            if f"{p}_share" in bands else np.zeros(len(bands))
        share = np.where(fits, share, 0.0)
        kw = dict(color=PART_COLORS[p], edgecolor="white", linewidth=0.5, width=0.62)
        ax_ms.bar(x, ms, bottom=bottom_ms, label=PART_LABELS[p], **kw)
        ax_sh.bar(x, share, bottom=bottom_sh, **kw)
        for i, s in enumerate(share):
            if s >= 6:
                ax_sh.text(x[i], bottom_sh[i] + s / 2, f"{s:.0f}%", ha="center", va="center",
                           fontsize=8.5, color="black" if p in ("blocked", "queue_wait") else "white")
        bottom_ms += ms
        bottom_sh += share
    for i, tot in enumerate(bottom_ms):
        ax_ms.text(x[i], tot, f"{tot:.2f} {unit}", ha="center", va="bottom", fontsize=8.5)
    for i in np.flatnonzero(~fits):
        ax_sh.text(x[i], 50, "parts do not\nadd up:\nno shares", ha="center", va="center",
                   fontsize=8.5, color="#b00020")
    for ax in (ax_ms, ax_sh):
        ax.set_xticks(x)
        ax.set_xticklabels(labels, fontsize=9)
        ax.grid(True, axis="y", alpha=0.3)
        ax.set_axisbelow(True)
    ax_ms.set_ylabel(f"mean time per request ({unit})")
    ax_ms.set_title(f"mean per request ({unit})", fontsize=10)
    ax_ms.set_ylim(0, max(bottom_ms.max(), 1e-9) * 1.12)
    ax_sh.set_ylabel("share of end-to-end time (%)")
    ax_sh.set_title("share of each part (%)", fontsize=10)
    ax_sh.set_ylim(0, 100)
    fig.suptitle(title)
    fig.legend(*ax_ms.get_legend_handles_labels(), loc="lower center", ncol=3, fontsize=9,
               bbox_to_anchor=(0.5, -0.1), frameon=False)
    return _save(fig, path)


def _thin(df: pd.DataFrame, col: str, max_points: int) -> pd.DataFrame:
    """At most max_points rows: every row above the P99 of col, a sample of the rest."""
    if len(df) <= max_points:
        return df
    tail = df[df[col] >= df[col].quantile(0.99)]
    rest = df.drop(tail.index)
    keep = max(max_points - len(tail), 1)
    return pd.concat([tail, rest.sample(n=min(keep, len(rest)), random_state=0)]).sort_index()


def plot_timeline(decomp: pd.DataFrame, path, t0_ns: int | None = None,
                  title: str | None = None, max_points: int = 20000) -> str:
    """Each request's latency at the time it started, runnable time overlaid."""
    title = title or "Request latency over time"
    if decomp.empty:
        return _empty(path, title, "no requests in this run")
    t0 = decomp["t_start_ns"].min() if t0_ns is None else t0_ns
    d = _thin(decomp, "latency_ns", max_points)
    t_s = (d["t_start_ns"] - t0) / 1e9
    fig, ax = plt.subplots(figsize=(12, 4.5))
    ax.scatter(t_s, d["latency_ns"] / 1e6, s=7, color="#2f5f98", alpha=0.6, lw=0,
               label="service time", rasterized=True)
    if "runnable_ns" in d and d["runnable_ns"].notna().any():
        ax.scatter(t_s, d["runnable_ns"] / 1e6, s=5, color=PART_COLORS["runq_preempt"], alpha=0.6,
                   lw=0, label="of which runnable (waiting for a CPU)", rasterized=True)
    # Rolling P99 over ~50 time bins: the trend the dots hide.
    full_t = (decomp["t_start_ns"] - t0) / 1e9
    nbins = int(min(50, max(5, len(decomp) // 200)))
    if len(decomp) >= 200 and full_t.max() > full_t.min():
        bins = pd.cut(full_t, nbins)
        p99 = decomp["latency_ns"].groupby(bins, observed=True).quantile(0.99) / 1e6
        mids = [iv.mid for iv in p99.index]
        ax.plot(mids, p99.to_numpy(), color="black", lw=1.3, label="P99 per time bin")
    ax.set_yscale("log")
    ys = [d["latency_ns"]] + ([d["runnable_ns"]] if "runnable_ns" in d else [])
    pos = pd.concat(ys)
    pos = pos[pos > 0]
    if len(pos):
        ax.set_ylim(bottom=max(pos.min() / 1e6 / 2, 1e-4))
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xlabel("time since the run started (s)")
    ax.set_ylabel("latency (ms, log scale)")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9, markerscale=3,
              frameon=False)
    return _save(fig, path)


def _us_label(us: float) -> str:
    if us >= 1e6:
        return f"{us / 1e6:g}s"
    if us >= 1e3:
        return f"{us / 1e3:g}ms"
    return f"{us:g}µs"


def plot_runq_hist(hist: pd.DataFrame, path, title: str | None = None) -> str:
    """Run-queue latency, log2 buckets (lo_us, hi_us, count), like runqlat."""
    title = title or "Run-queue latency (time runnable before running)"
    if hist.empty or hist["count"].sum() == 0:
        return _empty(path, title, "no run-queue events (needs the runq probe)")
    h = hist[hist["count"] > 0]
    h = hist.loc[h.index.min():h.index.max()]  # trim empty buckets at both ends
    labels = [f"{_us_label(lo)}–{_us_label(hi)}" for lo, hi in zip(h["lo_us"], h["hi_us"])]
    counts = h["count"].to_numpy()
    fig, ax = plt.subplots(figsize=(10, 4.2))
    x = np.arange(len(h))
    ax.bar(x, counts, color="#f28e2b", width=0.8)
    total = counts.sum()
    for i, c in enumerate(counts):
        if c:
            ax.text(i, c, f"{c:,}\n{c / total:.0%}" if c / total >= 0.01 else f"{c:,}",
                    ha="center", va="bottom", fontsize=7.5)
    ax.set_xticks(x)
    ax.set_xticklabels(labels, rotation=40, ha="right", fontsize=8.5)
    ax.set_yscale("log")
    ax.set_ylim(0.8, counts.max() * 4)
    ax.set_xlabel("time runnable before getting a CPU (log2 buckets)")
    ax.set_ylabel("runnable intervals (log)")
    ax.set_title(f"{title}, n={total:,}")
    ax.grid(True, axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    return _save(fig, path)


def placement_matrix(placement: pd.DataFrame) -> pd.DataFrame:
    """tid × cpu on-CPU ns as a wide matrix, whichever shape df_cpu_placement returned."""
    if {"tid", "cpu", "oncpu_ns"} <= set(placement.columns):
        m = placement.pivot_table(index="tid", columns="cpu", values="oncpu_ns",
                                  aggfunc="sum", fill_value=0)
    else:
        m = placement.copy()
        if "tid" in m.columns:
            m = m.set_index("tid")
        m = m.select_dtypes("number")
    m.columns = [int(c) if not isinstance(c, str) and float(c).is_integer() else c
                 for c in m.columns]
    return m.sort_index(axis=1)


def plot_cpu_placement(placement: pd.DataFrame, path, names: Mapping[int, str] | None = None,
                       top: int = 40, title: str | None = None) -> str:
    """Heat map thread × CPU: share of each thread's on-CPU time spent on each CPU."""
    title = title or "CPU placement: share of each thread's on-CPU time per CPU"
    m = placement_matrix(placement) if not placement.empty else placement
    if m.empty or m.to_numpy().sum() == 0:
        return _empty(path, title, "no on-CPU data (needs the sched probe)")
    tot = m.sum(axis=1)
    m = m.loc[tot.sort_values(ascending=False).index[:top]].sort_index()
    share = m.div(m.sum(axis=1).replace(0, np.nan), axis=0).fillna(0)
    names = names or {}
    rows = [f"{names.get(t, '')} {t}".strip() for t in share.index]
    h = min(2 + 0.28 * len(share), 14)
    w = min(4 + 0.6 * share.shape[1], 14)
    fig, ax = plt.subplots(figsize=(max(w, 6), h))
    im = ax.imshow(share.to_numpy(), aspect="auto", cmap="Blues", vmin=0, vmax=1)
    if share.size <= 400:
        for (i, j), v in np.ndenumerate(share.to_numpy()):
            if v >= 0.005:
                ax.text(j, i, f"{v:.0%}", ha="center", va="center", fontsize=7.5,
                        color="white" if v > 0.6 else "black")
    ax.set_xticks(range(share.shape[1]))
    ax.set_xticklabels([f"CPU {c}" for c in share.columns], fontsize=8.5)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(rows, fontsize=8)
    ax.set_ylabel("thread (comm tid)")
    ax.set_title(title, fontsize=10.5)
    fig.colorbar(im, ax=ax, fraction=0.04, pad=0.02, label="share of the thread's on-CPU time")
    return _save(fig, path)


def plot_workers(knee: pd.DataFrame, path) -> str:
    """P99 (left axis) and throughput (right) vs pool workers, one line pair per
    connection count (analyze/sweep.df_knee)."""
    if knee.empty:
        return _empty(path, "Pool workers", "no pool runs at 3 or more worker counts")
    fig, ax = plt.subplots(figsize=(9, 4.8))
    ax2 = ax.twinx()
    for conns, g in knee.groupby("conns"):
        ax.plot(g["workers"], g["p99_ms"], "o-", lw=1.8, label=f"P99, {int(conns)} conns")
        ax2.plot(g["workers"], g["throughput_rps"], "s--", lw=1.2, alpha=0.7,
                 label=f"throughput, {int(conns)} conns")
    ax.set_xscale("log")
    ax.set_xticks(sorted(knee["workers"].unique()))
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.minorticks_off()
    ax.set_xlabel("pool workers")
    ax.set_ylabel("P99 end to end (ms)")
    ax2.set_ylabel("throughput (req/s)")
    ax.set_ylim(bottom=0)
    ax2.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    lines = ax.get_legend_handles_labels()
    lines2 = ax2.get_legend_handles_labels()
    ax.legend(lines[0] + lines2[0], lines[1] + lines2[1], loc="upper left", fontsize=9)
    ax.set_title("P99 and throughput vs pool workers")
    return _save(fig, path)


def plot_percentiles_runs(decomps: Sequence[tuple[str, pd.DataFrame]], path,
                          column: str = "e2e_ns", title: str | None = None) -> str:
    """Several runs on one percentile plot (compare); labels must be unique."""
    return plot_percentiles({label: d for label, d in decomps}, path, column=column,
                            title=title or "Latency by percentile, all runs")


STATE_COLORS = {"Running": PART_COLORS["oncpu"], "Runnable": PART_COLORS["runq_preempt"],
                "Lock wait": PART_COLORS["lock_wait"], "I/O wait": PART_COLORS["io_wait"],
                "Sleep": PART_COLORS["sleep"], "Blocked": PART_COLORS["blocked"]}


def _cp_lanes(req, segs: pd.DataFrame, max_wakers: int) -> list:
    """[request thread, its first-hop wakers by time waited on them (at most max_wakers)]."""
    mine = segs[(segs["request_row"] == req.Index) & (segs["depth"] == 0)
                & segs["blame"].astype(bool)]
    by = (mine["t_end_ns"] - mine["t_start_ns"]).groupby(mine["waker_tid"]).sum()
    return [int(req.tid)] + [int(t) for t in by.sort_values(ascending=False).index[:max_wakers]]


CLASS_COLORS = {"sibling": "#f0a030", "peer": "#17becf", "other": "#3b3b3b",
                "kernel": "#9aa5b1", "irq": "#d62728", "idle": "#e8ecf0", "unknown": "#ffffff"}


def _cpu_lanes(ax, occ: pd.DataFrame, req, y0: int, s0: int, s1: int,
               traced: set) -> list[str]:
    """Lanes below the threads': who held each CPU during the request (occupancy
    segments, coloured by antagonist class relative to the request's process)."""
    from ..explain.antagonists import classify
    # occ lies by CPU, then time (df_occupancy): each CPU's segments inside [s0, s1] are
    # one slice, found by two searches (not a mask over every CPU's whole run)
    cpus = occ["cpu"].to_numpy()
    t_from, t_to = occ["t_from_ns"].to_numpy(), occ["t_to_ns"].to_numpy()
    labels = []
    for cpu in pd.unique(cpus):
        lo, hi = np.searchsorted(cpus, cpu, "left"), np.searchsorted(cpus, cpu, "right")
        first = lo + np.searchsorted(t_to[lo:hi], s0, "right")      # ends after s0
        last = lo + np.searchsorted(t_from[lo:hi], s1, "left")      # starts before s1
        if first >= last:
            continue                 # no lane for a CPU without a segment inside
        g = occ.iloc[first:last]
        y = y0 + len(labels)
        cls = classify(int(req.tid), int(req.pid), g["tid"].to_numpy(np.int64),
                        g["pid"].to_numpy(np.int64), g["flags"].to_numpy(np.int64),
                        traced - {int(req.pid)})
        cls = np.where(g["tid"].to_numpy() == int(req.tid), "self", cls)
        a = (np.maximum(g["t_from_ns"].to_numpy(), s0) - s0) / 1e6
        b = (np.minimum(g["t_to_ns"].to_numpy(), s1) - s0) / 1e6
        for c in pd.unique(cls):
            m = cls == c
            ax.broken_barh(list(zip(a[m], (b - a)[m])), (-y - 0.4, 0.8),
                           color=STATE_COLORS["Running"] if c == "self" else CLASS_COLORS[c],
                           edgecolor="#bbb" if c == "unknown" else None,
                           label="the request's thread" if c == "self" else f"CPU: {c}")
        labels.append(f"CPU {int(cpu)}")
    return labels


def plot_critical_path(decomp: pd.DataFrame, segs: pd.DataFrame,
                       states_in: Callable[[np.ndarray], pd.DataFrame], path,
                       names: Mapping | None = None, k: int = 4, max_wakers: int = 3,
                       title: str | None = None, occ: pd.DataFrame | None = None,
                       traced: set | None = None) -> str:
    """The k slowest requests with waits, each as a timeline: the request's thread and the
    threads that ended its waits, coloured by state (states_in(windows): the thread states
    inside the requests' [[t_start_ns, t_end_ns], ...], as perfetto.df_thread_states gives
    them), an arrow at each wakeup from the waker's lane to the request's; with occupancy
    segments (antagonists.df_occupancy), one lane per CPU: who held it, by antagonist class
    (traced: the pids traced together, each one's peers)."""
    title = title or "Critical path of the slowest requests (own thread and waker lanes)"
    names = names or {}
    has = segs["request_row"].unique() if len(segs) else []
    top = decomp[np.isin(decomp.index, has)].nlargest(k, "latency_ns")
    states = states_in(top[["t_start_ns", "t_end_ns"]].to_numpy(np.int64)) if len(top) else None
    if top.empty or states.empty:
        return _empty(path, title, "no waits with a recorded waker")
    extra = 0.5 * occ["cpu"].nunique() if occ is not None and len(occ) else 0
    fig, axes = plt.subplots(len(top), 1, figsize=(12, 1.2 + (1.05 * 2 + extra) * len(top)),
                             squeeze=False)
    for ax, req in zip(axes[:, 0], top.itertuples()):
        lanes = _cp_lanes(req, segs, max_wakers)
        s0, s1 = int(req.t_start_ns), int(req.t_end_ns)
        for y, tid in enumerate(lanes):
            st = states[(states["tid"] == tid) & (states["t_end_ns"] > s0)
                        & (states["t_start_ns"] < s1)]
            for state, g in st.groupby(st["state"].astype(str)):   # by name: legend order
                a = (np.maximum(g["t_start_ns"], s0) - s0) / 1e6
                b = (np.minimum(g["t_end_ns"], s1) - s0) / 1e6
                ax.broken_barh(list(zip(a, b - a)), (-y - 0.4, 0.8),
                               color=STATE_COLORS.get(state, "#999"), label=state)
        mine = segs[(segs["request_row"] == req.Index) & (segs["depth"] == 0)
                    & segs["blame"].astype(bool) & segs["waker_tid"].isin(lanes[1:])]
        if len(mine):       # one arrow per wakeup, drawn as one collection
            x = (mine["t_end_ns"].to_numpy(np.int64) - s0) / 1e6
            y = -np.array([lanes.index(int(t)) for t in mine["waker_tid"]], np.float64)
            ax.quiver(x, y, np.zeros_like(x), -y, angles="xy", scale_units="xy", scale=1,
                      width=0.0012, headwidth=6, headlength=7, headaxislength=6,
                      color="black", zorder=3)
        labels = [f"{names.get(t, 'tid')} {t}" + (" (request)" if i == 0 else "")
                  for i, t in enumerate(lanes)]
        if occ is not None and len(occ):
            labels += _cpu_lanes(ax, occ, req, len(lanes), s0, s1, traced or set())
        ax.set_yticks(-np.arange(len(labels)))
        ax.set_yticklabels(labels, fontsize=8)
        ax.set_xlim(0, (s1 - s0) / 1e6)
        ax.set_title(f"request {int(req.id)}: {(s1 - s0) / 1e6:.1f} ms", fontsize=9, loc="left")
        ax.grid(True, axis="x", alpha=0.3)
    axes[-1, 0].set_xlabel("ms since the request started")
    handles = {h.get_label(): h for ax in axes[:, 0] for h in ax.get_legend_handles_labels()[0]}
    fig.legend(list(handles.values()), list(handles.keys()), loc="upper right", fontsize=8,
               ncol=len(handles), frameon=False)
    fig.suptitle(title, x=0.01, ha="left", fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    return _save(fig, path)
