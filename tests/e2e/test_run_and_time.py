"""run_scripts/run_and_time.sh, the submission launcher.

1. The launch command of every multi-rank system file: mpirun with the rank count, the rank
   binding of launch.cpu_binding (threads_per_rank cores per rank), every launch.env variable
   exported, OMP_NUM_THREADS = threads_per_rank (DRY_RUN=1 prints it without running).
2. A real run of the local system on a tiny synthetic set (targets lowered through EXTRA_ARGS):
   exit 0, the MLPerf log copied to RESULTS_DIR/<system>/maskrcnn/result_<N>.txt, and a RESULT
   line whose seconds are the log's run_stop - run_start.
"""
import json
import os
import pathlib
import re

import mrcnn_testenv as env

SCRIPT = env.SOURCE_DIR / "run_scripts" / "run_and_time.sh"


def launcher(system, **extra):
    e = dict(os.environ, SYSTEM=system, BUILD_DIR=str(env.BUILD_DIR), **extra)
    return env.run(["bash", SCRIPT], env=e, timeout=600)


def main():
    systems = sorted(p.stem for p in (env.SOURCE_DIR / "systems").glob("*.json"))
    multi = 0
    for name in systems:
        launch = json.loads((env.SOURCE_DIR / "systems" / f"{name}.json").read_text())["launch"]
        p = launcher(name, DRY_RUN="1", SEED="5")
        assert p.returncode == 0, p.stderr
        cmd = p.stdout.split()
        ranks = launch["nodes"] * launch["ranks_per_node"]
        train = cmd.index("train")
        assert cmd[train - 1].endswith("mlperf-maskrcnn") and "--seed" in cmd and cmd[cmd.index("--seed") + 1] == "5"
        if ranks == 1:
            assert cmd[0].endswith("mlperf-maskrcnn"), cmd
            continue
        multi += 1
        assert cmd[:3] == ["mpirun", "-np", str(ranks)], cmd
        mpi = " ".join(cmd[:train - 1])
        binding = launch.get("cpu_binding", "none")
        expected = {"core": f"--map-by socket:PE={launch['threads_per_rank']} --bind-to core",
                    "socket": "--map-by socket --bind-to socket",
                    "none": "--map-by slot --bind-to none"}[binding]
        assert expected in mpi, (name, mpi)
        assert mpi.count("--bind-to") == 1, f"{name}: conflicting bindings: {mpi}"
        for k, v in launch.get("env", {}).items():
            assert f"-x {k}={v}" in mpi, (name, k, mpi)
        assert f"-x OMP_NUM_THREADS={launch['threads_per_rank']}" in mpi, mpi
    assert multi >= 4, f"expected the four multi-rank systems, saw {multi}"
    print(f"launch commands of {len(systems)} system files as their launch settings say")

    with env.scratch_dir("run-and-time") as tmp:
        tmp = pathlib.Path(tmp)
        data = tmp / "data"
        env.synth_dataset(data, "--train", "24", "--val", "8", "--seed", "3")
        extra = (f'--quiet --set run.data_dir="{data}" --set run.max_epochs=2 --set run.target_bbox=0 '
                 f'--set run.target_segm=0 --set data.loader_threads=1')
        p = launcher("cpu-dev", SEED="21", RESULT_INDEX="3", RESULTS_DIR=str(tmp / "results"), EXTRA_ARGS=extra)
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
        result = tmp / "results" / "cpu-dev" / "maskrcnn" / "result_3.txt"
        assert result.is_file(), p.stdout
        line = re.search(r"^RESULT,MASKRCNN,21,([0-9.]+),mlperf-maskrcnn,", p.stdout, re.M)
        assert line, p.stdout
        t = {}
        for r in env.mllog_records(result):
            if r["key"] in ("run_start", "run_stop"):
                t[r["key"]] = r["time_ms"]
            if r["key"] == "seed":
                assert r["value"] == 21, r
        assert abs(float(line.group(1)) - (t["run_stop"] - t["run_start"]) / 1000) < 1e-3, (line.group(0), t)
        check = env.run([env.mlperf_maskrcnn(), "check", result])
        assert check.returncode == 0, check.stdout
        print(f"real run: {result.name} written, {line.group(0)}")


if __name__ == "__main__":
    main()
