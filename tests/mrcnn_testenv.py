"""Shared helpers for the Python reference checks that ctest runs (tests/**/test_*.py).

ctest sets MRCNN_SOURCE_DIR and MRCNN_BUILD_DIR; running a check by hand works too:
    MRCNN_BUILD_DIR=build .venv/bin/python tests/logging/test_checker_parity.py
"""
import json
import os
import pathlib
import subprocess
import sys
import tempfile

SOURCE_DIR = pathlib.Path(os.environ.get("MRCNN_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[1]))
BUILD_DIR = pathlib.Path(os.environ.get("MRCNN_BUILD_DIR", SOURCE_DIR / "build")).resolve()
PYTHON = sys.executable

sys.path.insert(0, str(SOURCE_DIR / "run_scripts"))
import mlperf_log_reader  # noqa: E402  (the project's one reader of :::MLLOG lines)


def binary(name: str) -> pathlib.Path:
    """Path of a built executable (searched under the build folder), or a clear failure."""
    for candidate in (BUILD_DIR / "benchmark" / name, BUILD_DIR / name):
        if candidate.is_file():
            return candidate
    for candidate in BUILD_DIR.rglob(name):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    raise SystemExit(f"{name} not found under {BUILD_DIR}: build the project first")


def mlperf_maskrcnn() -> pathlib.Path:
    return binary("mlperf-maskrcnn")


def scratch_dir(prefix: str) -> tempfile.TemporaryDirectory:
    """A temporary folder, removed when the returned object is cleaned up."""
    return tempfile.TemporaryDirectory(prefix=f"mrcnn-{prefix}-")


def run(cmd, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)


def synth_dataset(out, *args) -> pathlib.Path:
    """The synthetic COCO dataset `mlperf-maskrcnn synth --out OUT ARGS... --quiet` writes; fails
    the test when it cannot be made."""
    p = run([mlperf_maskrcnn(), "synth", "--out", out, *args, "--quiet"])
    assert p.returncode == 0, p.stderr
    return pathlib.Path(out)


def mllog_records(log) -> list:
    """The JSON records of an MLPerf log's `:::MLLOG ` lines, in order (the project's one reader)."""
    return mlperf_log_reader.records(log)


def eval_accuracies(run_dir) -> dict:
    """{epoch_num: (BBOX, SEGM)} from a run folder's mlperf_log.txt."""
    return {r["metadata"]["epoch_num"]: (r["value"]["BBOX"], r["value"]["SEGM"])
            for r in mllog_records(pathlib.Path(run_dir) / "mlperf_log.txt") if r["key"] == "eval_accuracy"}


def step_losses(run_dir) -> list:
    """(step, loss, sorted named losses) of every training step in a run folder's metrics.jsonl."""
    out = []
    for line in (pathlib.Path(run_dir) / "metrics.jsonl").read_text().splitlines():
        m = json.loads(line)
        if m["event"] == "step":
            out.append((m["step"], m["loss"], tuple(sorted(m["losses"].items()))))
    return out
