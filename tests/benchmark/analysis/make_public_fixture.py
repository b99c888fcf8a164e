"""Builds tests/benchmark/analysis/public_v3.0_maskrcnn.tar.xz: a few published MLPerf Training v3.0
Mask R-CNN results, as test_report_public.py reads them, from a checkout of
https://github.com/mlcommons/training_results_v3.0 (Apache 2.0).

The logs are trimmed: lines without ':::MLLOG ' and NVIDIA's `tracked_stats` records (each repeats
the `throughput` record beside it, with the step's losses) are dropped; every other record is kept
byte for byte, so the official checkers and the throughput events read as in the original.
One BERT result of the same system rides along, trimmed to its first records, to check that a whole
results tree is read for Mask R-CNN only.

    .venv/bin/python tests/benchmark/analysis/make_public_fixture.py PATH/training_results_v3.0
"""
import io
import pathlib
import sys
import tarfile

OUT = pathlib.Path(__file__).with_name("public_v3.0_maskrcnn.tar.xz")
SYSTEMS = {
    "NVIDIA": ["dgxh100_ngc23.04_pytorch", "dgxh100_n8_ngc23.04_pytorch", "dgxh100_n48_ngc23.04_pytorch"],
    "Dell": ["XE8545x4A100-SXM-40GB", "2xXE8545x4A100-SXM-40GB", "4xXE8545x4A100-SXM-40GB"],
}
OTHER_BENCHMARK = ("NVIDIA", "dgxh100_ngc23.04_pytorch", "bert", 40)  # org, system, benchmark, records kept


def trimmed(text, limit=None):
    keep = [line for line in text.splitlines(keepends=True)
            if ":::MLLOG " in line and '"key": "tracked_stats"' not in line]
    return "".join(keep[:limit])


def add(tar, name, text):
    data = text.encode("latin-1")
    info = tarfile.TarInfo(f"training_results_v3.0/{name}")
    info.size, info.mtime, info.mode = len(data), 0, 0o644
    tar.addfile(info, io.BytesIO(data))


def main(root):
    root = pathlib.Path(root)
    with tarfile.open(OUT, "w:xz", preset=9) as tar:
        for org, systems in SYSTEMS.items():
            for system in systems:
                add(tar, f"{org}/systems/{system}.json", (root / org / "systems" / f"{system}.json").read_text("latin-1"))
                for log in sorted((root / org / "results" / system / "maskrcnn").glob("result_*.txt")):
                    add(tar, f"{org}/results/{system}/maskrcnn/{log.name}", trimmed(log.read_text("latin-1")))
        org, system, bench, limit = OTHER_BENCHMARK
        log = root / org / "results" / system / bench / "result_0.txt"
        add(tar, f"{org}/results/{system}/{bench}/result_0.txt", trimmed(log.read_text("latin-1"), limit))
    print(f"{OUT}: {OUT.stat().st_size} bytes")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
