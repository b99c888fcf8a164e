"""Beyond one process, launched as users launch: through `mlperf-maskrcnn launch`.

1. A one-process run (global batch 8) is the reference; it asks for the page cache to be dropped,
   and its log's cache_clear says whether this machine allowed it.
2. mpirun over two "nodes" (a hostfile naming nodeA and nodeB, one slot each; an ssh stand-in
   starts their daemons here; ranks talk over TCP on loopback): 2 ranks x 4 images. Both "nodes"
   are this machine, so MPI still sees one node (local ranks 0 and 1): what depends on the node
   (a rank's GPU, the page cache) is not exercised across real nodes.
3. Slurm: a real one-node cluster (slurm_cluster.py: munged, slurmctld, slurmd) running the
   generated batch script with sbatch --wait: 2 tasks x 4 images, each bound to its own core.
   The mpirun and Slurm runs log bit-identical losses and accuracies (same ranks, same work), and
   both logs pass `mlperf-maskrcnn check` and the official compliance checker. The same job with
   srun --mpi=none (ranks from SLURM_*, the TCP communicator) and two runs in one allocation:
   the first bit-identical again, the second with the next seed.
   Against the one-process run, at the first step (the same weights, broadcast from rank 0): every
   loss but the mask loss equals it within float tolerance. The runs use per-image proposals
   (model.rpn.post_nms_per_batch_train false) for that: with the reference's per-batch top-N, a
   rank's proposals depend on its own 4 images. The mask loss is a mean over each rank's
   positive RoIs, averaged over ranks (the reference's data-parallel loss), so it differs from
   the mean over all 8 images by the ranks' unequal positive counts; it, and every later step
   (whose weights took those gradients), is held to 10 %.
4. Rank safety: two ranks started with different configurations are refused at start (exit 2, naming rank
   1); a rank killed mid-run ends the job in under 30 s with a message naming it; a rank stopped
   mid-run (hung) is noticed by the other's collective timeout and ends the job in under 30 s,
   rank 0's MLPerf log closed (run_stop aborted) by the watchdog before it ends the rank.
Parts skip (exit 77 when nothing could run) when mpirun, MPI or the Slurm daemons are missing.
"""
# Two ranks of one intra-op thread each, side by side:
# ctest processors: 2
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import time

import mrcnn_testenv as env
import slurm_cluster

SYSTEM = env.SOURCE_DIR / "systems" / "cpu-dev.json"
SKIP = 77
MPI_ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
# 2 ranks of one intra-op thread each, bound to a core of their own (cpu-dev declares 2 cores).
RANKS = ["--set", "launch.threads_per_rank=1", "--set", 'launch.communicator="mpi"',
         "--set", 'launch.cpu_binding="core"']


def train_args(data, out, *extra):
    return ["--quiet", "--no-progress", "--set", f'run.data_dir="{data}"', "--out", out,
            "--set", "data.loader_threads=1", "--set", "run.eval_threads=1", "--seed", "5", *extra]


ONE_EPOCH = ["--set", "run.max_epochs=1", "--set", "run.target_bbox=0", "--set", "run.target_segm=0",
             "--set", "model.rpn.post_nms_per_batch_train=false"]


def run_dir(out):
    logs = list(pathlib.Path(out).glob("**/mlperf_log.txt"))
    assert len(logs) == 1, logs
    return logs[0].parent


def compare_losses(what, ref, got):
    """Step 0: every loss but loss_mask within float tolerance; loss_mask and later steps within 10 %."""
    assert len(ref) == len(got) and len(ref) >= 4, (what, len(ref), len(got))
    exact, loose = 0.0, 0.0
    for (s0, l0, n0), (s1, l1, n1) in zip(ref, got):
        assert s0 == s1
        for (k0, v0), (k1, v1) in zip((("loss", l0),) + n0, (("loss", l1),) + n1):
            assert k0 == k1
            rel = abs(v0 - v1) / max(abs(v0), 1e-6)
            if s0 == 0 and k0 not in ("loss", "loss_mask"):
                exact = max(exact, rel)
                assert rel < 1e-5, f"{what}: step 0 {k0}: {v1} vs the one-process {v0} (relative {rel:.2e})"
            elif k0 in ("loss", "loss_mask"):
                loose = max(loose, rel)
                assert rel < 0.1, f"{what}: step {s0} {k0}: {v1} vs the one-process {v0} (relative {rel:.2e})"
    print(f"{what}: step 0 losses (but the mask loss) equal the one-process run's to {exact:.1e}; "
          f"loss and loss_mask within {loose:.1e} over {len(got)} steps")


def check_log(what, folder, tmp):
    log = folder / "mlperf_log.txt"
    text = log.read_text()
    assert '"status": "success"' in text, text[-2000:]
    ours = env.run([env.mlperf_maskrcnn(), "check", log])
    assert ours.returncode == 0, ours.stdout
    official = env.run([env.PYTHON, "-m", "mlperf_logging.compliance_checker", "--usage", "training",
                        "--ruleset", "3.1.0", log, "--log_output", tmp / "cc.log"], cwd=tmp)
    assert official.returncode == 0, official.stdout + official.stderr
    print(f"{what}: log passes mlperf-maskrcnn check and the official compliance checker")


def rank_pids(out):
    """PIDs of the training processes writing under `out`, by MPI rank."""
    pids = {}
    for proc in pathlib.Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().split(b"\0")
            environ = (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"train" not in cmd or str(out).encode() not in cmd:
            continue
        for e in environ:
            if e.startswith(b"OMPI_COMM_WORLD_RANK="):
                pids[int(e.split(b"=")[1])] = int(proc.name)
    return pids


def start_and_hurt(data, out, sig, *extra):
    """Starts a 2-rank run, sends `sig` to rank 1 after its third step, and returns
    (exit status, seconds from the signal to the end of the job, output)."""
    cmd = [env.mlperf_maskrcnn(), "launch", "--system", SYSTEM, "--set", "launch.ranks_per_node=2", *RANKS, *extra,
           "--", *train_args(data, out, "--set", "run.max_epochs=50", "--set", "run.target_bbox=0.99",
                             "--set", "run.target_segm=0.99")]
    p = subprocess.Popen([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env=MPI_ENV)
    pids = {}
    try:
        deadline = time.time() + 300
        while time.time() < deadline and p.poll() is None:
            metrics = list(pathlib.Path(out).glob("**/metrics.jsonl"))
            if metrics and sum('"step"' in line for line in metrics[0].read_text().splitlines()) >= 3:
                pids = rank_pids(out)
                if 1 in pids:
                    break
            time.sleep(0.2)
        assert 1 in pids and p.poll() is None, f"the run did not get going: {p.poll()} {pids}"
        os.kill(pids[1], sig)
        hurt = time.time()
        output, _ = p.communicate(timeout=120)
        return p.returncode, time.time() - hurt, output
    finally:
        if p.poll() is None:
            p.kill()
        for pid in pids.values():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def main():
    if shutil.which("mpirun") is None:
        print("skipped: mpirun is not installed (run_scripts/bootstrap.sh installs OpenMPI)")
        return SKIP
    if "communicators built in: local, mpi" not in env.run([env.mlperf_maskrcnn(), "train", "--help"]).stdout:
        print("skipped: this build has no MPI communicator (CMake did not find MPI)")
        return SKIP
    with env.scratch_dir("e2e-cluster") as tmp:
        tmp = pathlib.Path(tmp)
        data = env.synth_dataset(tmp / "data", "--train", "32", "--val", "8", "--seed", "4")

        # 1. The reference: one process, one thread, the whole global batch of 8. It asks for the
        # page cache to be dropped: the log says whether that could be done here.
        p = env.run([env.mlperf_maskrcnn(), "train", "--system", SYSTEM, "--set", "launch.threads_per_rank=1",
                     "--set", "run.cache_clear=true", *train_args(data, tmp / "one", *ONE_EPOCH)])
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
        ref = env.step_losses(run_dir(tmp / "one"))
        cleared = [r["value"] for r in env.mllog_records(run_dir(tmp / "one") / "mlperf_log.txt")
                   if r["key"] == "cache_clear"]
        can_drop = os.access("/proc/sys/vm/drop_caches", os.W_OK)
        assert cleared == [can_drop], (cleared, can_drop)
        assert can_drop or "cannot be dropped here" in p.stdout + p.stderr
        print(f"cache_clear requested: logged {cleared[0]} (/proc/sys/vm/drop_caches writable: {can_drop})")

        # 2. mpirun over two "nodes".
        agent = tmp / "fake_ssh.sh"
        agent.write_text('#!/bin/sh\n# ssh stand-in: drop the options and the host name, run the rest here\n'
                         'while [ $# -gt 0 ]; do case "$1" in -*) shift;; *) break;; esac; done\nshift\nexec sh -c "$*"\n')
        agent.chmod(0o755)
        hostfile = tmp / "hosts"
        hostfile.write_text("nodeA slots=1\nnodeB slots=1\n")
        mpirun_args = json.dumps(["--mca", "plm_rsh_agent", str(agent), "--mca", "btl", "self,tcp",
                                  "--mca", "btl_tcp_if_include", "lo", "--mca", "oob_tcp_if_include", "lo"])
        # Each "node" declared with two sockets of one core: its one rank is bound to one core
        # (mapped per node, as with fewer ranks than sockets).
        two_sockets = ["--set", 'system.host_processors_per_node="2"', "--set", 'system.host_processor_core_count="1"',
                       "--set", 'system.host_processor_vcpu_count="2"']
        cmd = [env.mlperf_maskrcnn(), "launch", "--system", SYSTEM, "--nodes", "2", "--hostfile", hostfile,
               "--set", "launch.ranks_per_node=1", *RANKS, *two_sockets, "--set", f"launch.mpirun_args={mpirun_args}",
               "--", *train_args(data, tmp / "mpirun", *ONE_EPOCH)]
        p = env.run(cmd, env=MPI_ENV, timeout=900)
        assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
        # --report-bindings: each rank bound to one core of its "node".
        for rank in (0, 1):
            assert re.search(rf"MCW rank {rank} bound to socket 0\[core \d\[hwt 0\]\]", p.stderr), p.stderr[-2000:]
        folder = run_dir(tmp / "mpirun")
        compare_losses("mpirun, 2 nodes x 1 rank", ref, env.step_losses(folder))
        check_log("mpirun, 2 nodes x 1 rank", folder, tmp)
        assert json.loads((folder / "config.json").read_text())["system"]["number_of_nodes"] == "2"

        # 3. Slurm.
        reason = slurm_cluster.missing_reason()
        if reason:
            print(f"Slurm part skipped: {reason}")
        else:
            with slurm_cluster.SlurmCluster(tmp / "slurm") as cluster:
                script = tmp / "job.sbatch"
                cmd = [env.mlperf_maskrcnn(), "launch", "--system", SYSTEM, "--scheduler", "slurm", "--script", script,
                       "--set", "launch.ranks_per_node=2", *RANKS, "--", *train_args(data, tmp / "slurm-run", *ONE_EPOCH)]
                p = env.run(cmd, env=dict(cluster.env, **{k: v for k, v in MPI_ENV.items() if k.startswith("OMPI")}),
                            cwd=tmp, timeout=900)
                job_output = "".join(f.read_text() for f in tmp.glob("slurm-*.out"))
                assert p.returncode == 0, f"sbatch: {p.returncode}\n{p.stderr[-2000:]}\n{job_output[-4000:]}"
                assert "mask 0x1 set" in job_output and "mask 0x2 set" in job_output, job_output[-2000:]
                folder = run_dir(tmp / "slurm-run")
                assert env.step_losses(folder) == env.step_losses(run_dir(tmp / "mpirun")), "Slurm and mpirun differ"
                assert env.eval_accuracies(folder) == env.eval_accuracies(run_dir(tmp / "mpirun"))
                print(f"Slurm, 2 tasks: losses and accuracies bit-identical to the mpirun run's")
                check_log("Slurm, 2 tasks", folder, tmp)

                # The same allocation kind without MPI: srun --mpi=none, the ranks meeting at the
                # allocation's first host on the TCP communicator, two runs in one job (seeds 5, 6).
                script = tmp / "job-env.sbatch"
                env_ranks = [a if a != 'launch.communicator="mpi"' else 'launch.communicator="tcp"' for a in RANKS]
                cmd = [env.mlperf_maskrcnn(), "launch", "--system", SYSTEM, "--scheduler", "slurm", "--script", script,
                       "--srun-mpi", "none", "--runs", "2", "--set", "launch.ranks_per_node=2", *env_ranks,
                       "--", *train_args(data, tmp / "slurm-env", *ONE_EPOCH)]
                p = env.run(cmd, env=cluster.env, cwd=tmp, timeout=900)
                job_output = "".join(f.read_text() for f in tmp.glob("slurm-*.out"))
                assert p.returncode == 0, f"sbatch: {p.returncode}\n{p.stderr[-2000:]}\n{job_output[-4000:]}"
                first, second = run_dir(tmp / "slurm-env" / "run_0"), run_dir(tmp / "slurm-env" / "run_1")
                assert env.step_losses(first) == env.step_losses(folder), "srun --mpi=none (tcp) and pmix (mpi) differ"
                assert env.eval_accuracies(first) == env.eval_accuracies(folder)
                seeds = [[r["value"] for r in env.mllog_records(f / "mlperf_log.txt") if r["key"] == "seed"]
                         for f in (first, second)]
                assert seeds == [[5], [6]], seeds
                fingerprint = json.loads((first / "fingerprint.json").read_text())
                assert fingerprint["ranks"]["communicator_resolved"] == "tcp", fingerprint["ranks"]
                check_log("Slurm, srun --mpi=none, run 2 of 2", second, tmp)
                print("Slurm, srun --mpi=none on the TCP communicator, 2 runs in one allocation: run 1 bit-identical "
                      "to the pmix run, run 2 with seed 6")

        # 4. Rank safety. Two ranks with different configurations: refused before anything runs.
        base = [env.mlperf_maskrcnn(), "train", "--system", SYSTEM, "--set", "launch.ranks_per_node=2", *RANKS,
                *train_args(data, tmp / "mismatch", *ONE_EPOCH)]
        p = env.run(["mpirun", "--oversubscribe", "--bind-to", "none", "-np", "1", *base, ":", "-np", "1", *base,
                     "--set", "run.max_epochs=2"], env=MPI_ENV, timeout=300)
        assert p.returncode == 2 and "rank 1 has a different configuration" in p.stdout + p.stderr, \
            f"{p.returncode}\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}"
        print("different configurations on two ranks: refused at start (exit 2, rank 1 named)")

        # A rank killed mid-run: mpirun ends the job and names it.
        status, seconds, output = start_and_hurt(data, tmp / "killed", signal.SIGKILL)
        assert status != 0 and seconds < 30, (status, seconds, output[-2000:])
        assert re.search(r"rank 1 .*signal 9", output.replace("\n", " ")), output[-2000:]
        print(f"rank 1 killed: the job ended {seconds:.1f} s later (exit {status}): "
              f"{next(l for l in output.splitlines() if 'signal 9' in l).strip()}")

        # A rank that hangs (stopped): the other's collective times out and the job ends.
        status, seconds, output = start_and_hurt(data, tmp / "hung", signal.SIGSTOP,
                                                 "--set", "launch.collective_timeout_s=5")
        assert status != 0 and seconds < 30, (status, seconds, output[-2000:])
        line = next((l for l in output.splitlines() if "has waited" in l), None)
        assert line and "[rank 0]" in line and "dead or hung" in line, output[-2000:]
        # The watchdog ended rank 0 inside the collective, but closed its MLPerf log first.
        stops = [r for r in env.mllog_records(run_dir(tmp / "hung") / "mlperf_log.txt") if r["key"] == "run_stop"]
        assert len(stops) == 1 and stops[0]["metadata"]["status"] == "aborted", stops
        print(f"rank 1 hung: the job ended {seconds:.1f} s later (exit {status}): {line.strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
