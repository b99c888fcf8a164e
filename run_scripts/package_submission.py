#!/usr/bin/env python3
"""Assemble an MLPerf Training submission folder for one system and check it officially.

    .venv/bin/python run_scripts/package_submission.py --system aws-p3dn.24xlarge [--out out/submission]

Reads the five timed runs that run_scripts/run_and_time.sh filed under
results/<system>/maskrcnn/result_{0..4}.txt and writes, in the layout the MLPerf rules and
mlperf_logging's package_checker expect:

    <out>/<org>/LICENSE                                     the sources' licence (Apache 2.0)
    <out>/<org>/systems/<system>.json                       the MLPerf system description
    <out>/<org>/results/<system>/maskrcnn/result_N.txt      the five logs
    <out>/<org>/benchmarks/maskrcnn/implementations/
        mlperf-maskrcnn/                                    this repository's committed sources (LICENSE too)
        <system>/<system>_mlperf-maskrcnn.json, README.md    the full system file, how to run it

Then it checks every log with `mlperf-maskrcnn check`, runs the official package checker and
result summarizer (ruleset 3.1.0), and prints the score: the olympic mean time to train in
minutes (with the RCP scaling factor in the closed division). Everything it learnt is also in
<out>/<org>_submission_report.json (beside the package, which holds only what the rules ask).

Exit status: 0 the package checker found no errors, 1 it found errors, 2 bad input (nothing is
written then; an existing <out>/<org> is left alone unless --force).
"""
import argparse
import io
import json
import pathlib
import shutil
import subprocess
import sys
import tarfile

REPO = pathlib.Path(__file__).resolve().parents[1]
RULESET = "3.1.0"

sys.path.insert(0, str(REPO / "run_scripts"))
from mlperf_log_reader import records, run_seconds  # noqa: E402


class BadInput(Exception):
    pass


def load_inputs(args):
    if not (REPO / "LICENSE").is_file():
        raise BadInput(f"{REPO / 'LICENSE'}: missing (a package ships the sources with their licence)")
    system_file = REPO / "systems" / f"{args.system}.json"
    if not system_file.is_file():
        raise BadInput(f"{system_file}: no such system file")
    # The executable reads, validates and resolves the system file, as `train` does.
    binary = pathlib.Path(args.build_dir) / "benchmark" / "mlperf-maskrcnn"
    if not binary.is_file():
        raise BadInput(f"{binary} not built (run_scripts/bootstrap.sh, then cmake --build)")
    p = subprocess.run([str(binary), "config", "--system", str(system_file)], capture_output=True, text=True)
    if p.returncode != 0:
        raise BadInput(p.stderr.strip().removeprefix("mlperf-maskrcnn config: error: "))
    config = json.loads(p.stdout)
    org = config["submission"]["org"]
    if not org or "/" in org:
        raise BadInput(f"{system_file}: submission.org must be a non-empty name without '/'")
    results = pathlib.Path(args.results) / args.system / "maskrcnn"
    logs = sorted(results.glob("result_*.txt"))
    names = sorted(p.name for p in logs)
    if names != [f"result_{i}.txt" for i in range(5)]:
        raise BadInput(f"{results}: a Mask R-CNN submission needs exactly result_0.txt .. result_4.txt, "
                       f"found {names or 'none'} (run_scripts/run_and_time.sh with RESULT_INDEX=0..4 files them)")
    return system_file, config, org, logs


def source_snapshot(dest):
    """The committed sources (git archive HEAD), so that the package says what produced it."""
    p = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", "HEAD"], capture_output=True)
    if p.returncode != 0:
        raise BadInput(f"{REPO}: cannot archive the sources with git ({p.stderr.decode(errors='replace').strip()})")
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    with tarfile.open(fileobj=io.BytesIO(p.stdout)) as tar:
        tar.extractall(dest, filter="data")
    return commit


def implementation_readme(system, config, commit):
    launch = config.get("launch", {})
    ranks = launch.get("nodes", 1) * launch.get("ranks_per_node", 1)
    return f"""# mlperf-maskrcnn on {system}

Sources: `../mlperf-maskrcnn/` (commit {commit}).
System file: `{system}_mlperf-maskrcnn.json` (a copy of `systems/{system}.json`).

    run_scripts/bootstrap.sh
    cmake -S . -B build -G Ninja && cmake --build build
    SYSTEM={system} RESULT_INDEX=N run_scripts/run_and_time.sh     # N = 0..4, one timed run each

{ranks} rank(s), {launch.get('threads_per_rank', '?')} threads each; `run.data_dir` in the system
file names the COCO 2017 folder, `run.initial_weights` the converted ImageNet ResNet-50.
"""


def official(cwd, module, *extra):
    cmd = [sys.executable, "-m", f"mlperf_logging.{module}", *extra]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)


def parse_args():
    """The command line's arguments."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--system", required=True, help="a systems/<name>.json")
    ap.add_argument("--results", default=str(REPO / "results"), help="the results tree run_and_time.sh wrote")
    ap.add_argument("--out", default=str(REPO / "out" / "submission"))
    ap.add_argument("--build-dir", default=str(REPO / "build"))
    ap.add_argument("--force", action="store_true", help="replace an existing <out>/<org>")
    ap.add_argument("--rcp-bypass", action="store_true", help="pass --rcp-bypass to the package checker")
    return ap.parse_args()


def write_package(args, system_file, config, org, logs, root):
    """The commit of the packaged sources; the package is built beside root, then moved there."""
    staging = pathlib.Path(args.out) / f".{org}.partial"
    shutil.rmtree(staging, ignore_errors=True)
    (staging / "systems").mkdir(parents=True)
    # The licence of the shipped sources at the package's top, as published results trees carry theirs.
    shutil.copy2(REPO / "LICENSE", staging / "LICENSE")
    (staging / "systems" / f"{args.system}.json").write_text(json.dumps(config["system"], indent=2) + "\n")
    res = staging / "results" / args.system / "maskrcnn"
    res.mkdir(parents=True)
    for log in logs:
        shutil.copy2(log, res / log.name)
    impl = staging / "benchmarks" / "maskrcnn" / "implementations"
    try:
        commit = source_snapshot(impl / "mlperf-maskrcnn")
    except BadInput:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    (impl / args.system).mkdir(parents=True)
    shutil.copy2(system_file, impl / args.system / f"{args.system}_mlperf-maskrcnn.json")
    (impl / args.system / "README.md").write_text(implementation_readme(args.system, config, commit))
    if root.exists():
        shutil.rmtree(root)
    staging.rename(root)
    return commit


def check_logs(res, build_dir):
    """One record per packaged log: its run_stop status, seconds and `mlperf-maskrcnn check` verdict."""
    runs = []
    binary = pathlib.Path(build_dir) / "benchmark" / "mlperf-maskrcnn"
    for log in sorted(res.glob("result_*.txt")):
        seconds, status = run_seconds(records(log, skip_malformed=True))
        verdict = None
        if binary.is_file():
            p = subprocess.run([str(binary), "check", str(log)], capture_output=True, text=True)
            verdict = "passed" if p.returncode == 0 else "failed"
            if p.returncode != 0:
                print(p.stdout.rstrip())
        runs.append({"file": log.name, "seconds": seconds, "status": status, "check": verdict})
        print(f"[package] {log.name}: run_stop {status}, {seconds if seconds is not None else 'no'} s, "
              f"mlperf-maskrcnn check {verdict or 'not run (no build)'}")
    return runs


def run_package_checker(args, org):
    """True when the official package checker found no errors (its errors printed otherwise)."""
    extra = ["--rcp-bypass"] if args.rcp_bypass else []
    pc = official(args.out, "package_checker", org, "training", RULESET, "--log_output",
                  f"{org}_package_checker.log", *extra)
    text = pc.stdout + pc.stderr
    # The package checker's exit status is 0 either way: its verdict is in the text.
    ok = "PACKAGE CHECKER FOUND NO ERRORS" in text
    print(f"[package] official package_checker {RULESET}: {'no errors' if ok else 'ERRORS'} "
          f"(log: {pathlib.Path(args.out) / (org + '_package_checker.log')})")
    if not ok:
        for line in text.splitlines():
            if "ERROR" in line or "FAIL" in line:
                print("  " + line)
    return ok


def summarize_score(args, org, root):
    """The result summarizer's score ({minutes, rcp_scaling_factor}) or None, printed either way."""
    summary_dir = pathlib.Path(args.out) / f".{org}.summary"
    summary_dir.mkdir(exist_ok=True)
    rs = official(summary_dir, "result_summarizer", str(root.resolve()), "training", RULESET)
    score = None
    summary = summary_dir / "summary.json"
    if summary.is_file():
        rows = [r for r in json.loads(summary.read_text()) if r.get("system") == args.system]
        if rows:
            score = {"minutes": rows[0].get("maskrcnn:time_to_train"),
                     "rcp_scaling_factor": rows[0].get("maskrcnn:rcp_scaling_factor")}
    shutil.rmtree(summary_dir, ignore_errors=True)
    if score and score["minutes"] is not None:
        print(f"[package] score (result_summarizer): {score['minutes']:.4f} min time to train "
              f"(RCP scaling factor {score['rcp_scaling_factor']})")
    else:
        print("[package] result_summarizer gave no score:\n" + (rs.stdout + rs.stderr)[-2000:])
    return score


def main():
    args = parse_args()
    try:
        system_file, config, org, logs = load_inputs(args)
        root = pathlib.Path(args.out) / org
        if root.exists() and not args.force:
            raise BadInput(f"{root} exists (pass --force to replace it)")
        commit = write_package(args, system_file, config, org, logs, root)
    except BadInput as e:
        print(f"package_submission: error: {e}", file=sys.stderr)
        return 2
    print(f"[package] {root}")

    # Every log through the project's checker (it names the failing lines), then the official tools.
    report = {"system": args.system, "org": org, "commit": commit,
              "runs": check_logs(root / "results" / args.system / "maskrcnn", args.build_dir)}
    ok = run_package_checker(args, org)
    report["package_checker"] = "success" if ok else "errors"
    report["score"] = summarize_score(args, org, root)
    (pathlib.Path(args.out) / f"{org}_submission_report.json").write_text(json.dumps(report, indent=2) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
