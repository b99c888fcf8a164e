"""run_scripts/package_submission.py: five timed runs filed by run_and_time.sh become an MLPerf
submission folder that the official package checker accepts, with the result summarizer's score.

1. Five short cpu-dev runs (tiny synthetic set, targets lowered) -> exit 0, the rules' layout,
   LICENSE (Apache 2.0) at the package's top and in the sources, the official verdict
   "no errors", and the score equal to the olympic mean of the five logs' run_stop - run_start.
2. Two logs cut before run_stop -> the package checker finds errors -> exit 1.
3. Four result files, or an existing package without --force -> exit 2, nothing written.
"""
# Its five timed runs train systems/cpu-dev.json on its 2 intra-op threads:
# ctest processors: 2
import json
import os
import pathlib
import shutil

import mrcnn_testenv as env

SCRIPT = env.SOURCE_DIR / "run_scripts" / "package_submission.py"


def package(results, out, *extra):
    return env.run([env.PYTHON, SCRIPT, "--system", "cpu-dev", "--results", results, "--out", out,
                    "--build-dir", env.BUILD_DIR, *extra], timeout=600)


def main():
    with env.scratch_dir("package") as tmp:
        tmp = pathlib.Path(tmp)
        data = tmp / "data"
        env.synth_dataset(data, "--train", "24", "--val", "8", "--seed", "3")
        results = tmp / "results"
        extra = (f'--quiet --set run.data_dir="{data}" --set run.max_epochs=2 --set run.target_bbox=0 '
                 f'--set run.target_segm=0 --set data.loader_threads=1')
        for i in range(5):
            e = dict(os.environ, SYSTEM="cpu-dev", RESULT_INDEX=str(i), SEED=str(40 + i), RESULTS_DIR=str(results),
                     BUILD_DIR=str(env.BUILD_DIR), EXTRA_ARGS=extra)
            p = env.run(["bash", env.SOURCE_DIR / "run_scripts" / "run_and_time.sh"], env=e, timeout=600)
            assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]

        out = tmp / "submission"
        p = package(results, out)
        assert p.returncode == 0, p.stdout + p.stderr
        root = out / "mlperf-maskrcnn"
        assert json.loads((root / "systems" / "cpu-dev.json").read_text())["system_name"] == "cpu-dev"
        assert sorted(x.name for x in (root / "results" / "cpu-dev" / "maskrcnn").iterdir()) == \
            [f"result_{i}.txt" for i in range(5)]
        impl = root / "benchmarks" / "maskrcnn" / "implementations"
        assert (impl / "mlperf-maskrcnn" / "CMakeLists.txt").is_file() and (impl / "cpu-dev" / "README.md").is_file()
        # The licence travels with the sources: at the package's top and inside the source snapshot.
        licence = (env.SOURCE_DIR / "LICENSE").read_text()
        assert "Apache License" in licence and "Version 2.0" in licence
        assert (root / "LICENSE").read_text() == licence
        assert (impl / "mlperf-maskrcnn" / "LICENSE").read_text() == licence
        assert "official package_checker 3.1.0: no errors" in p.stdout, p.stdout
        report = json.loads((out / "mlperf-maskrcnn_submission_report.json").read_text())
        secs = sorted(r["seconds"] for r in report["runs"])
        assert len(secs) == 5 and all(r["check"] == "passed" for r in report["runs"]), report
        expected = sum(secs[1:4]) / 3 / 60
        assert abs(report["score"]["minutes"] - expected) < 1e-6, (report["score"], expected)
        print(f"package accepted by the official checker; score {report['score']['minutes']:.5f} min "
              f"= olympic mean of {secs}")

        # An existing package is not replaced without --force.
        p = package(results, out)
        assert p.returncode == 2 and "--force" in p.stderr, p.stderr

        # Two runs that never stopped: more than the one failure olympic scoring forgives.
        broken = tmp / "broken"
        shutil.copytree(results, broken)
        for i in (1, 3):
            log = broken / "cpu-dev" / "maskrcnn" / f"result_{i}.txt"
            log.write_text("".join(l for l in log.read_text().splitlines(True) if '"run_stop"' not in l))
        p = package(broken, tmp / "broken-out")
        assert p.returncode == 1 and "ERRORS" in p.stdout, p.stdout + p.stderr
        print("two logs without run_stop: the package checker's errors give exit 1")

        # Four result files: refused before anything is written.
        (broken / "cpu-dev" / "maskrcnn" / "result_4.txt").unlink()
        p = package(broken, tmp / "four-out")
        assert p.returncode == 2 and "result_0.txt .. result_4.txt" in p.stderr, p.stderr
        assert not (tmp / "four-out").exists()
        print("four result files: exit 2, nothing written")


if __name__ == "__main__":
    main()
