#!/usr/bin/env python3
"""One reader of MLPerf logs for every script of the project: the JSON records of the
`:::MLLOG {...}` lines, and the time to train they imply.

    from mlperf_log_reader import records, run_seconds
    recs = records("out/cpu-dev/latest/mlperf_log.txt")
    seconds, status = run_seconds(recs)          # (None, status) without run_start and run_stop

As a command, prints a log's run seconds (run_stop - run_start, 3 decimals) or NA:

    usage: .venv/bin/python run_scripts/mlperf_log_reader.py --run-seconds LOG
"""
import json
import pathlib
import sys

MARKER = ":::MLLOG "


def records(log, skip_malformed=False):
    """The records of a log file (a path) in order. A line whose JSON does not parse raises
    ValueError naming the file and line, unless skip_malformed."""
    path = pathlib.Path(log)
    out = []
    for n, line in enumerate(path.read_text(encoding="latin-1").splitlines(), 1):
        if MARKER not in line:
            continue
        try:
            out.append(json.loads(line.split(MARKER, 1)[1]))
        except json.JSONDecodeError as e:
            if not skip_malformed:
                raise ValueError(f"{path}:{n}: not a valid :::MLLOG record ({e})") from None
    return out


def run_seconds(recs):
    """(run_stop - run_start in seconds, run_stop's status); seconds is None when either is missing."""
    t, status = {}, None
    for r in recs:
        if r.get("key") in ("run_start", "run_stop"):
            t[r["key"]] = r["time_ms"]
            if r["key"] == "run_stop":
                status = (r.get("metadata") or {}).get("status")
    if len(t) != 2:
        return None, status
    return (t["run_stop"] - t["run_start"]) / 1000.0, status


def main(argv):
    if any(a in ("-h", "--help") for a in argv[1:]):
        print(__doc__)
        return 0
    if len(argv) != 3 or argv[1] != "--run-seconds":
        print(__doc__, file=sys.stderr)
        return 2
    seconds, _ = run_seconds(records(argv[2], skip_malformed=True))
    print("NA" if seconds is None else f"{seconds:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
