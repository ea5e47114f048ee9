"""The kernel matrix (scripts/kernels.sh) from the kernel suite's junit files.

    python3 scripts/lib/kernel_matrix.py OUT NAME...

reads OUT/NAME.xml (tests/kernels, with each test's feature, outcome, hook, fallbacks,
figures and the kernel events written, lost and unmatched as properties), OUT/NAME.uname and
OUT/NAME.rc, and prints markdown: feature x kernel (pass, refused, FAIL, or not run), the hook,
figures and events of each cell, then every fallback and refusal each kernel's runs reported. Exits 1 when a kernel failed (a test failed, or the
suite did not finish).
"""
from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

ORDER = ["default events", "--cgroup", "throttled", "--pid of a pre-fork server", "wait reasons", "--span BIN:SYMBOL",
         "--span usdt:", "--span usdt: one mark", "--span tcp",
         "--flight-recorder",
         "--aggregate", "--listen", "--events …,locks", "--events …,irq", "main job"]


def cases(xml: Path) -> list[dict]:
    """One dict a test case: feature, outcome (pass/refused/FAIL), hook, fallbacks, figures,
    message (why it failed)."""
    out = []
    for tc in ET.parse(xml).getroot().iter("testcase"):
        props = {p.get("name"): p.get("value") for p in tc.iter("property")}
        failed = tc.find("failure") is not None or tc.find("error") is not None
        skipped = tc.find("skipped") is not None
        feature = props.get("feature") or tc.get("name", "?").removeprefix("test_")
        msg = ""
        if failed:
            el = tc.find("failure") if tc.find("failure") is not None else tc.find("error")
            msg = (el.get("message") or "").splitlines()[0][:160] if el is not None else ""
        out.append({"feature": feature,
                    "outcome": "FAIL" if failed else props.get("outcome", "skipped")
                    if skipped and props.get("outcome", "").startswith("xfail")
                    else "skipped" if skipped else props.get("outcome", "pass"),
                    "hook": props.get("hook", ""),
                    "fallbacks": json.loads(props.get("fallbacks") or "[]"),
                    "figures": json.loads(props.get("figures") or "{}"),
                    "events": json.loads(props.get("events") or "{}"),
                    "message": msg})
    return out


def counted(ev: dict) -> str:
    """What the run's kernel events came to: '; events E, lost L, unmatched U' (meta.json's
    events, lost_events and unmatched_events, summed over the kinds), or '' when not told."""
    if not ev:
        return ""
    return f"; events {ev['events']}, lost {ev['lost']}, unmatched {ev['unmatched']}"


def cell(c: dict | None) -> str:
    if c is None:
        return "not run"
    figs = ", ".join(f"{k} {v}" for k, v in c["figures"].items() if k not in ("needs", "since"))
    if c["outcome"] == "refused":
        return (f"refused: needs {c['figures'].get('needs')} ({c['figures'].get('since')}+)"
                + counted(c["events"]))
    if c["outcome"] == "FAIL":
        return f"**FAIL** {c['message']}"
    hook = f" ({c['hook']})" if c["hook"] else ""
    return f"{c['outcome']}{hook}" + (f": {figs}" if figs else "") + counted(c["events"])


def main(out: Path, names: list[str]) -> int:
    table, bad, notes = {}, [], {}
    heads = []
    for n in names:
        uname = (out / f"{n}.uname").read_text().strip() if (out / f"{n}.uname").exists() else "?"
        heads.append(f"{n} ({uname})" if n != uname else n)
        xml = out / f"{n}.xml"
        rc = (out / f"{n}.rc").read_text().strip() if (out / f"{n}.rc").exists() else "missing"
        cs = cases(xml) if xml.exists() else []
        if rc not in ("0", "missing") or not cs or any(c["outcome"] == "FAIL" for c in cs):
            bad.append(f"{n}: suite exit {rc}, {sum(c['outcome'] == 'FAIL' for c in cs)} failed"
                       f" (log: {out / (n + '.log')})")
        table[n] = {c["feature"]: c for c in cs}
        seen = []
        for c in cs:
            for f in c["fallbacks"]:
                since = f"{f['since']}+" if f.get("since") else "a build option"
                line = (f"{f['what']}: needs {f['needs']} ({since}): "
                        + ("refused" if f.get("refused") else f.get("instead", ""))
                        + (f"; {f['loses']}" if f.get("loses") else ""))
                if line not in seen:
                    seen.append(line)
        notes[n] = seen
    features = ORDER + sorted({f for t in table.values() for f in t} - set(ORDER))
    print("| feature | " + " | ".join(heads) + " |")
    print("|---|" + "---|" * len(heads))
    for f in features:
        print(f"| {f} | " + " | ".join(cell(table[n].get(f)) for n in names) + " |")
    print()
    for n in names:
        print(f"{n}: " + ("; ".join(notes[n]) if notes[n] else "no fallback"))
    if bad:
        print("\nFAILED: " + "; ".join(bad))
        return 1
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: kernel_matrix.py OUT NAME...")
    sys.exit(main(Path(sys.argv[1]), sys.argv[2:]))
