"""Builds tests/logging/public_rulesets_maskrcnn.tar.xz: the published Mask R-CNN logs that
test_rulesets_public.py checks under every ruleset, from checkouts of
https://github.com/mlcommons/training_results_v1.0 ... v3.1 (Apache 2.0), each in its tree's path.

The logs are trimmed: lines without ':::MLLOG ' and the per-step `throughput` and `tracked_stats`
records are dropped (the compliance rules read neither); every other record is kept byte for
byte. The official checker's verdict on each trimmed log is asserted, under the six rulesets, to be
the one test_rulesets_public.FIXTURES gives (measured on the whole published logs).

    .venv/bin/python tests/logging/make_ruleset_fixtures.py DIR
    (DIR holds training_results_v1.0 ... training_results_v3.1)
"""
import io
import pathlib
import subprocess
import sys
import tarfile
import tempfile

sys.path[:0] = [str(pathlib.Path(__file__).resolve().parent), str(pathlib.Path(__file__).resolve().parents[1])]
from test_rulesets_public import FIXTURE, FIXTURES, RULESETS  # noqa: E402

DROPPED = ('"key": "throughput"', '"key": "tracked_stats"')


def trimmed(text):
    return "".join(line for line in text.splitlines(keepends=True)
                   if ":::MLLOG " in line and not any(d in line for d in DROPPED))


def verdicts(path, workdir):
    out = ""
    for r in RULESETS:
        p = subprocess.run([sys.executable, "-m", "mlperf_logging.compliance_checker", "--usage", "training",
                            "--ruleset", r, str(path), "--log_output", str(pathlib.Path(workdir) / "cc.log")],
                           capture_output=True, cwd=workdir)
        out += "P" if p.returncode == 0 else "F"
    return out


def main(root):
    root = pathlib.Path(root)
    with tempfile.TemporaryDirectory() as tmp, tarfile.open(FIXTURE, "w:xz", preset=9) as tar:
        for name, want in FIXTURES.items():
            text = trimmed((root / name).read_text("latin-1"))
            check = pathlib.Path(tmp) / "log.txt"
            check.write_text(text, "latin-1")
            got = verdicts(check, tmp)
            assert got == want, (name, got, want)
            data = text.encode("latin-1")
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            tar.addfile(info, io.BytesIO(data))
            print(f"{name}: {len(data)} bytes, official {got}")
    print(f"{FIXTURE}: {FIXTURE.stat().st_size} bytes")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
