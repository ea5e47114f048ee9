"""run.sh's small JSON jobs on a run directory.

    runinfo.py write-run DIR LABEL ARGV...     run.json: how run.sh was invoked
    runinfo.py mark-incomplete DIR REASON      meta.json: "incomplete": true

Exit status 0 on success, 1 with a one-line message otherwise.
"""
import json
import os
import platform
import sys
import time


def json_write_atomic(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)


def cmd_write_run(run_dir, label, *argv):
    info = {
        "label": label,
        "command": list(argv),
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "t_start_monotonic_ns": time.clock_gettime_ns(time.CLOCK_MONOTONIC),
        "kernel": platform.release(),
        "cpus": os.cpu_count(),
    }
    json_write_atomic(os.path.join(run_dir, "run.json"), info)


def cmd_mark_incomplete(run_dir, reason):
    """Set meta.json's "incomplete" (creating a minimal meta.json if tailtrace wrote none)."""
    path = os.path.join(run_dir, "meta.json")
    meta = {}
    if os.path.exists(path):
        try:
            with open(path) as f:
                meta = json.load(f)
        except (OSError, ValueError):
            os.replace(path, path + ".broken")
            meta = {"note": "meta.json was unreadable (kept as meta.json.broken)"}
    if meta.get("incomplete") is not True:
        meta["incomplete"] = True
    meta.setdefault("incomplete_reason", reason)
    meta.setdefault("marked_by", "run.sh")
    json_write_atomic(path, meta)


def main(argv):
    cmds = {"write-run": (cmd_write_run, 2), "mark-incomplete": (cmd_mark_incomplete, 2)}
    if len(argv) < 2 or argv[1] not in cmds or len(argv) - 2 < cmds[argv[1]][1]:
        print("runinfo.py: usage: write-run DIR LABEL ARGV... | mark-incomplete DIR REASON",
              file=sys.stderr)
        return 1
    fn = cmds[argv[1]][0]
    try:
        fn(*argv[2:])
    except (OSError, ValueError, KeyError) as e:
        print(f"runinfo.py {argv[1]}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
