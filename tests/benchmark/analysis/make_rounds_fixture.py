"""Builds tests/benchmark/analysis/public_rounds_maskrcnn.tar.xz: published Mask R-CNN results of
MLPerf Training v1.0, v1.1, v2.0 and v2.1, as test_report_rounds.py reads them, from checkouts of
https://github.com/mlcommons/training_results_v1.0 ... v2.1 (Apache 2.0), each under its tree's
name (training_results_vX.Y), with the systems' descriptions.

The logs are trimmed: lines without ':::MLLOG ' and NVIDIA's `tracked_stats` records are dropped,
and of the `throughput` records (one every few steps) every tenth is kept; every other record is
kept byte for byte, so that the official checker, result_summarizer and rcp_checker read them as
the originals (test_report_rounds.py compares with them on the fixture itself).

    .venv/bin/python tests/benchmark/analysis/make_rounds_fixture.py DIR
    (DIR holds training_results_v1.0 ... training_results_v2.1)
"""
import io
import pathlib
import sys
import tarfile

OUT = pathlib.Path(__file__).with_name("public_rounds_maskrcnn.tar.xz")
SYSTEMS = {
    "training_results_v1.0": {
        "Google": ["tpu-v4-128-TF"],                     # blocks only; submission lines after run_stop
        "Supermicro": ["SYS-420GP-TNAR+"],               # division after init_stop: scored by 1.0.0 only
        "NVIDIA": ["dgxa100_ngc21.05_pytorch"],          # DGX A100, v1.0
    },
    "training_results_v1.1": {
        "NVIDIA": ["dgxa100_ngc21.09_pytorch", "dgxa100_n4_ngc21.09_pytorch"],  # one run of n4 misses the target
    },
    "training_results_v2.0": {
        "Google": ["cloud-tpu-v4-2048-TF"],              # blocks only
        "NVIDIA": ["2xa30_ngc22.04_pytorch", "dgxa100_ngc22.04_pytorch"],  # A30: batch 8, an RCP point from 2.0.0
    },
    "training_results_v2.1": {
        "Dell": ["32xXE8545x4A100-SXM-40GB"],            # runs at batch 256 (x4) and 128 (x1)
        "NVIDIA": ["dgxa100_ngc22.09_pytorch", "dgxh100_preview"],  # the first H100 beside the A100
    },
}
EVERY_NTH_THROUGHPUT = 10


def trimmed(text):
    keep, n = [], 0
    for line in text.splitlines(keepends=True):
        if ":::MLLOG " not in line or '"key": "tracked_stats"' in line:
            continue
        if '"key": "throughput"' in line:
            n += 1
            if n % EVERY_NTH_THROUGHPUT != 1:
                continue
        keep.append(line)
    return "".join(keep)


def add(tar, name, text):
    data = text.encode("latin-1")
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), 0, 0o644
    tar.addfile(info, io.BytesIO(data))


def main(root):
    root = pathlib.Path(root)
    with tarfile.open(OUT, "w:xz", preset=9) as tar:
        for tree, orgs in SYSTEMS.items():
            for org, systems in orgs.items():
                for system in systems:
                    add(tar, f"{tree}/{org}/systems/{system}.json",
                        (root / tree / org / "systems" / f"{system}.json").read_text("latin-1"))
                    folder = root / tree / org / "results" / system / "maskrcnn"
                    for log in sorted(folder.glob("result_*.txt")):
                        add(tar, f"{tree}/{org}/results/{system}/maskrcnn/{log.name}", trimmed(log.read_text("latin-1")))
    print(f"{OUT}: {OUT.stat().st_size} bytes")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
