"""End to end on two ranks: `mpirun -np 2 mlperf-maskrcnn train` on a small synthetic dataset.

1. Two 2-rank runs with the same seed give identical losses at every step and identical
   eval_accuracy values: gradient all-reduce, the shared stop decision and the gathering of
   detections are deterministic. A third run that reduces the gradients after the backward pass
   (launch.overlap_allreduce false) instead of bucket by bucket during it, and reads its step
   results every third step (run.results_every_steps 3), is bit-identical too.
2. The last epoch's eval_accuracy, scored on rank 0 from both ranks' detections, equals what
   `mlperf-maskrcnn eval` gives for the saved weights in one process over the whole validation
   set (a rank's detections lost on the way would show as a much lower recall and AP).
3. A 2-rank run with targets lowered by configuration ends with run_stop "success" on every rank
   (exit 0), and its log, written by rank 0 alone, passes `mlperf-maskrcnn check` and the
   official compliance checker.
Skipped (exit 77) when mpirun is absent or the build has no MPI communicator.
"""
# Two ranks of one intra-op thread each, side by side:
# ctest processors: 2
import json
import os
import pathlib
import shutil
import sys

import mrcnn_testenv as env

SYSTEM = env.SOURCE_DIR / "systems" / "cpu-dev.json"
SKIP = 77


def mpi_train(data, out, *extra):
    cmd = ["mpirun", "-np", "2", "--oversubscribe", "--bind-to", "none",
           env.mlperf_maskrcnn(), "train", "--system", SYSTEM, "--quiet", "--no-progress",
           "--set", f'run.data_dir="{data}"', "--out", out,
           "--set", "launch.ranks_per_node=2", "--set", "launch.threads_per_rank=1",
           "--set", 'launch.communicator="mpi"', "--set", "data.loader_threads=1",
           "--set", "run.eval_threads=1", *extra]
    mpi_env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                   OMPI_MCA_rmaps_base_oversubscribe="1")
    if os.environ.get("MRCNN_SANITIZER") == "asan":
        # OpenMPI's plugins leak at MPI_Finalize and are unloaded before LeakSanitizer reports, so
        # their leaks cannot be suppressed by name; memory errors are still detected.
        mpi_env["ASAN_OPTIONS"] = os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0"
    p = env.run(cmd, env=mpi_env, timeout=900)
    return p, (pathlib.Path(out) / "latest").resolve()


def main():
    if shutil.which("mpirun") is None:
        print("skipped: mpirun is not installed (run_scripts/bootstrap.sh installs OpenMPI)")
        return SKIP
    helptext = env.run([env.mlperf_maskrcnn(), "train", "--help"]).stdout
    if "communicators built in: local, mpi" not in helptext:
        print("skipped: this build has no MPI communicator (CMake did not find MPI)")
        return SKIP

    with env.scratch_dir("e2e-mpi") as tmp:
        tmp = pathlib.Path(tmp)
        data = tmp / "data"
        env.synth_dataset(data, "--train", "160", "--val", "16", "--seed", "3")

        # Unreachable targets: both runs train and score exactly three epochs.
        fixed = ["--set", "run.max_epochs=3", "--set", "run.target_bbox=0.99", "--set", "run.target_segm=0.99",
                 "--seed", "11"]
        pa, a = mpi_train(data, tmp / "a", *fixed)
        assert pa.returncode == 3, f"expected 'targets not reached' (3), got {pa.returncode}\n{pa.stdout[-3000:]}"
        pb, b = mpi_train(data, tmp / "b", *fixed)
        assert pb.returncode == 3, pb.stdout[-3000:]
        sa, sb = env.step_losses(a), env.step_losses(b)
        # 160 images, global batch 8: 20 steps per epoch.
        assert len(sa) == 60 and sa == sb, f"losses differ between two 2-rank runs with the same seed:\n{sa[:3]}\n{sb[:3]}"
        aa, ab = env.eval_accuracies(a), env.eval_accuracies(b)
        assert sorted(aa) == [1, 2, 3] and aa == ab, (aa, ab)
        print(f"2 ranks, same seed: {len(sa)} steps with identical losses, accuracies {aa}")

        # The gradient buckets reduced after the backward pass instead of during it: with two ranks
        # every element is the same a + b, so the run is bit-identical. The same run reads its step
        # results every third step (each epoch ends with two unread): all ranks read, and all-reduce
        # the losses, at the same steps, and every step is still in the metrics.
        pn, n = mpi_train(data, tmp / "after", *fixed, "--set", "launch.overlap_allreduce=false",
                          "--set", "run.results_every_steps=3")
        assert pn.returncode == 3, pn.stdout[-3000:]
        assert env.step_losses(n) == sa and env.eval_accuracies(n) == aa, \
            f"overlapped and post-backward all-reduce differ:\n{sa[:2]}\n{env.step_losses(n)[:2]}"
        print("all-reduce overlapped with backward = after backward, results read every step = every third: "
              "bit-identical losses and accuracies")

        # The gathered score against a one-process evaluation of the same weights.
        stats = tmp / "eval.json"
        pe = env.run([env.mlperf_maskrcnn(), "eval", "--system", SYSTEM, "--weights", a / "model.safetensors",
                      "--data", data, "--json", stats, "--set", "launch.threads_per_rank=1"])
        assert pe.returncode == 0, pe.stderr[-3000:]
        one = json.loads(stats.read_text())
        bbox, segm = aa[3]
        assert bbox > 0.05 and segm > 0.05, f"too little signal to compare: {aa[3]}"
        assert abs(one["bbox"][0] - bbox) < 2e-3 and abs(one["segm"][0] - segm) < 2e-3, \
            f"2-rank score {aa[3]} differs from the one-process eval ({one['bbox'][0]}, {one['segm'][0]})"
        print(f"gathered score {aa[3]} = one-process eval ({one['bbox'][0]:.6f}, {one['segm'][0]:.6f})")

        # Lowered targets: every rank stops with success at the same step; rank 0's log passes.
        pc, c = mpi_train(data, tmp / "c", "--set", "run.max_epochs=3", "--set", "run.target_bbox=0",
                          "--set", "run.target_segm=0", "--seed", "12")
        assert pc.returncode == 0, pc.stdout[-3000:]
        log = c / "mlperf_log.txt"
        assert '"status": "success"' in log.read_text()
        ours = env.run([env.mlperf_maskrcnn(), "check", log])
        assert ours.returncode == 0, ours.stdout
        official = env.run([env.PYTHON, "-m", "mlperf_logging.compliance_checker", "--usage", "training",
                            "--ruleset", "3.1.0", log, "--log_output", tmp / "cc.log"], cwd=tmp)
        assert official.returncode == 0, official.stdout + official.stderr
        print("2-rank converged run: log passes mlperf-maskrcnn check and the official checker")
    return 0


if __name__ == "__main__":
    sys.exit(main())
