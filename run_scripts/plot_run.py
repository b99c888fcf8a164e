#!/usr/bin/env python3
"""Plots a training run: losses and learning rate over time, COCO box/mask AP per epoch against
the MLPerf targets, with the time to train. Reads RUN_DIR/metrics.jsonl and RUN_DIR/mlperf_log.txt
and writes RUN_DIR/training.png (or --out).

    .venv/bin/python run_scripts/plot_run.py out/cpu-dev/latest
"""
import argparse
import json
import pathlib
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from mlperf_log_reader import records  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run_dir", type=pathlib.Path)
    ap.add_argument("--out", type=pathlib.Path)
    args = ap.parse_args()
    run = args.run_dir.resolve()
    metrics_file, log_file = run / "metrics.jsonl", run / "mlperf_log.txt"
    for f in (metrics_file, log_file):
        if not f.is_file():
            sys.exit(f"plot_run: {f} does not exist (is {run} a run folder?)")
    events = records(log_file)
    keyed = {}
    for e in events:
        keyed.setdefault(e["key"], []).append(e)
    if "run_start" not in keyed:
        sys.exit(f"plot_run: {log_file} has no run_start")
    t0 = keyed["run_start"][0]["time_ms"]
    targets = (0.377, 0.339)
    steps = [json.loads(l) for l in metrics_file.read_text().splitlines() if '"event":"step"' in l]
    if not steps:
        sys.exit(f"plot_run: {metrics_file} has no steps")

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.8))
    t = [(s["time_ms"] - t0) / 60000 for s in steps]
    names = sorted(steps[0]["losses"])
    window = max(1, len(steps) // 50)

    def smooth(v):
        out, acc = [], 0.0
        for i, x in enumerate(v):
            acc += x
            if i >= window:
                acc -= v[i - window]
            out.append(acc / min(i + 1, window))
        return out

    ax1.plot(t, smooth([s["loss"] for s in steps]), color="black", lw=2, label="total")
    for n in names:
        ax1.plot(t, smooth([s["losses"][n] for s in steps]), lw=1, label=n)
    ax1.set_yscale("log")
    ax1.set_xlabel("minutes since run_start")
    ax1.set_ylabel(f"loss (moving mean of {window} steps)")
    ax1.set_title(f"training losses ({len(steps)} steps)")
    lr_ax = ax1.twinx()
    lr_ax.plot(t, [s["lr"] for s in steps], color="grey", ls=":", lw=1)
    lr_ax.set_ylabel("learning rate (dotted)")
    ax1.legend(fontsize=8, loc="upper right")

    acc = keyed.get("eval_accuracy", [])
    epochs = [e["metadata"]["epoch_num"] for e in acc]
    ax2.plot(epochs, [e["value"]["BBOX"] for e in acc], "o-", label="box AP (BBOX)")
    ax2.plot(epochs, [e["value"]["SEGM"] for e in acc], "s-", label="mask AP (SEGM)")
    ax2.axhline(targets[0], color="C0", ls="--", lw=1, label=f"BBOX target {targets[0]}")
    ax2.axhline(targets[1], color="C1", ls="--", lw=1, label=f"SEGM target {targets[1]}")
    ax2.set_xlabel("epoch")
    ax2.set_ylabel("COCO AP@[.5:.95]")
    ax2.set_ylim(0, 1)
    ax2.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    stop = keyed.get("run_stop", [{}])[0]
    status = stop.get("metadata", {}).get("status", "running")
    title = f"accuracy per epoch: {status}"
    if "time_ms" in stop:
        title += f", time to train {(stop['time_ms'] - t0) / 60000:.2f} min"
    ax2.set_title(title)
    ax2.legend(fontsize=8, loc="lower right")
    ax2.grid(alpha=0.3)
    fig.tight_layout()
    out = args.out or run / "training.png"
    fig.savefig(out, dpi=110)
    print(out)


if __name__ == "__main__":
    main()
