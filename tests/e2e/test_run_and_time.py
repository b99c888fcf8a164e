"""run_scripts/run_and_time.sh, the submission launcher.

1. DRY_RUN=1 prints, for every system file, what `mlperf-maskrcnn launch --dry-run` prints for it
   (the mpirun command, or with SCHEDULER=slurm the batch script) with the script's own train
   arguments: the launch itself is checked against each system's topology by
   tests/benchmark/run/test_launch.py. A layout that cannot work stops the script with exit 2.
2. Two real runs (NEXP=2) of the local system on a tiny synthetic set (DATADIR; targets lowered
   through EXTRA_ARGS): exit 0, each MLPerf log copied to LOGDIR/result_<N>.txt with seeds SEED
   and SEED+1, each run folder kept beside it with the launch command and the official
   compliance checker's report (SUCCESS), and RESULT lines whose seconds are the logs'
   run_stop - run_start. Without LOGDIR the files go to RESULTS_DIR/<system>/maskrcnn.
3. Slurm (a real one-node cluster, slurm_cluster.py): NEXP=2 with SCHEDULER=slurm is one batch
   job (one allocation, as NVIDIA's run.sub), its ranks started by srun --mpi=none (SRUN_MPI):
   result_0 and result_1 with seeds SEED and SEED+1, each filed and compliant.
4. Bad input: NEXP=0, a DATADIR that is no folder: exit 2 before anything runs.
"""
# Its timed runs train systems/cpu-dev.json on its 2 intra-op threads:
# ctest processors: 2
import json
import os
import pathlib
import re

import mrcnn_testenv as env
import slurm_cluster

SCRIPT = env.SOURCE_DIR / "run_scripts" / "run_and_time.sh"


def launcher(system, cwd=None, base=None, **extra):
    e = dict(base or os.environ, SYSTEM=system, BUILD_DIR=str(env.BUILD_DIR), **extra)
    return env.run(["bash", SCRIPT], env=e, timeout=600, cwd=cwd)


def main():
    systems = sorted((env.SOURCE_DIR / "systems").glob("*.json"))
    multi = 0
    for f in systems:
        for scheduler in ("mpirun", "slurm"):
            p = launcher(f.stem, DRY_RUN="1", SEED="5", SCHEDULER=scheduler)
            assert p.returncode == 0, p.stderr
            out = re.sub(r"--out \S+", "--out OUT", p.stdout)
            want = env.run([env.mlperf_maskrcnn(), "launch", "--system", f, "--scheduler", scheduler, "--dry-run",
                            "--", "--seed", "5", "--out", "OUT", "--no-progress"])
            assert want.returncode == 0, want.stderr
            assert out == want.stdout, f"{f.stem} ({scheduler}):\n{out}\nvs launch --dry-run:\n{want.stdout}"
            multi += scheduler == "mpirun" and out.startswith("mpirun ")
    assert multi >= 12, f"expected the multi-rank systems to launch through mpirun, saw {multi}"
    p = launcher("cpu-dev", DRY_RUN="1", SEED="010")
    assert p.returncode == 0 and "--seed 10 " in p.stdout, p.stdout  # decimal, not octal
    for system, cores in (("aws-p3dn.24xlarge", 6), ("aws-p5.48xlarge", 12)):
        p = launcher(system, DRY_RUN="1", EXTRA_ARGS=f"--set launch.threads_per_rank={2 * cores}")
        assert p.returncode == 2 and f"more than the {cores} physical cores" in p.stderr, (system, p.stderr)
    print(f"DRY_RUN of {len(systems)} system files = launch --dry-run (mpirun and slurm); a bad layout: exit 2")

    with env.scratch_dir("run-and-time") as tmp:
        tmp = pathlib.Path(tmp)
        data = tmp / "data"
        env.synth_dataset(data, "--train", "24", "--val", "8", "--seed", "3")
        extra = ('--quiet --set run.max_epochs=2 --set run.target_bbox=0 --set run.target_segm=0 '
                 '--set data.loader_threads=1')
        logdir = tmp / "logs"
        p = launcher("cpu-dev", SEED="21", RESULT_INDEX="3", NEXP="2", DATADIR=str(data), LOGDIR=str(logdir),
                     RESULTS_DIR=str(tmp / "results"), EXTRA_ARGS=extra)
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
        for index, seed in ((3, 21), (4, 22)):
            result = logdir / f"result_{index}.txt"
            assert result.is_file(), p.stdout
            line = re.search(rf"^RESULT,MASKRCNN,{seed},([0-9.]+),mlperf-maskrcnn,", p.stdout, re.M)
            assert line, p.stdout
            t = {}
            for r in env.mllog_records(result):
                if r["key"] in ("run_start", "run_stop"):
                    t[r["key"]] = r["time_ms"]
                if r["key"] == "seed":
                    assert r["value"] == seed, r
            assert abs(float(line.group(1)) - (t["run_stop"] - t["run_start"]) / 1000) < 1e-3, (line.group(0), t)
            kept = logdir / "runs" / f"result_{index}"
            for name in ("config.json", "metrics.jsonl", "fingerprint.json", "model.safetensors", "launch.txt",
                         "compliance_checker.log"):
                assert (kept / name).is_file(), f"run folder lacks {name}: {sorted(x.name for x in kept.iterdir())}"
            assert "train" in (kept / "launch.txt").read_text()
            assert f'run.data_dir="{data}"' in (kept / "launch.txt").read_text()
            assert "SUCCESS" in (kept / "compliance_checker.log").read_text()
            assert f"compliance check: result_{index}.txt passed" in p.stdout, p.stdout
            check = env.run([env.mlperf_maskrcnn(), "check", result])
            assert check.returncode == 0 and check.stdout.splitlines()[-1] == "SUCCESS", check.stdout
        assert not (tmp / "results" / "cpu-dev").exists(), "LOGDIR given: nothing under RESULTS_DIR/<system>"
        print(f"NEXP=2: result_3.txt and result_4.txt (seeds 21, 22) in LOGDIR, each compliant, "
              f"{re.findall(r'^RESULT,.*$', p.stdout, re.M)}")

        # 3. NEXP runs in one Slurm allocation.
        reason = slurm_cluster.missing_reason()
        if reason:
            print(f"Slurm part skipped: {reason}")
        else:
            with slurm_cluster.SlurmCluster(tmp / "slurm") as cluster:
                jobs = tmp / "jobs"
                jobs.mkdir()
                p = launcher("cpu-dev", cwd=jobs, base=cluster.env, SCHEDULER="slurm", SRUN_MPI="none", NEXP="2",
                             SEED="31", DATADIR=str(data), LOGDIR=str(tmp / "slurm-logs"),
                             RESULTS_DIR=str(tmp / "results"), EXTRA_ARGS=extra)
                outputs = sorted(jobs.glob("slurm-*.out"))
                assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:] + "".join(o.read_text() for o in outputs)
                assert len(outputs) == 1, f"expected one batch job, saw {outputs}"
                for index, seed in ((0, 31), (1, 32)):
                    result = tmp / "slurm-logs" / f"result_{index}.txt"
                    assert [r["value"] for r in env.mllog_records(result) if r["key"] == "seed"] == [seed]
                    assert re.search(rf"^RESULT,MASKRCNN,{seed},", p.stdout, re.M), p.stdout
                    kept = tmp / "slurm-logs" / "runs" / f"result_{index}"
                    script = (kept / "launch.sbatch").read_text()
                    assert "for ((i = 0; i < 2; i++))" in script and "srun --mpi=none" in script, script
                    assert "SUCCESS" in (kept / "compliance_checker.log").read_text()
                print("SCHEDULER=slurm NEXP=2: one batch job, result_0 and result_1 (seeds 31, 32), each compliant")

        # 4. bad input
        (tmp / "a-file").write_text("")
        for extra_env, text in (({"NEXP": "0"}, "NEXP=0"), ({"DATADIR": str(tmp / "nowhere")}, "is not a folder"),
                                ({"LOGDIR": str(tmp / "a-file" / "logs")}, "cannot write results into")):
            p = launcher("cpu-dev", RESULTS_DIR=str(tmp / "results"), **extra_env)
            assert p.returncode == 2 and text in p.stderr and "STARTING" not in p.stdout, (extra_env, p.stderr)
        print("bad input: NEXP=0, a missing DATADIR and an unwritable LOGDIR stop with exit 2 before any run")

if __name__ == "__main__":
    main()
