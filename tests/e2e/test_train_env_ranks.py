"""End to end: two ranks that MPI did not start, on the TCP communicator.

1. `launch --scheduler torchrun`, i.e. `torchrun --standalone --nproc-per-node 2 --no-python
   mlperf-maskrcnn train` (torchrun from the project's .venv: its agent hosts the store,
   TORCHELASTIC_USE_AGENT_STORE=True) and two processes given
   RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT by hand (launch.communicator "auto", which must
   find them) give bit-identical losses at every step and identical eval_accuracy values; so
   does `mpirun -np 2` on the MPI communicator where the build has one (with two ranks every
   all-reduced element is a + b on both).
2. Rank 1 killed (SIGKILL) in the middle of training: rank 0 ends within 30 s with exit status 1
   and one message naming rank 1 and the lost connection, and its MLPerf log is closed with
   run_stop "aborted".
3. Rank 1 stopped (SIGSTOP, a hung host): rank 0's collective fails after the collective timeout
   (5 s without a byte) within 30 s, with a message naming rank 1, and closes its log as in 2.
"""
# Two ranks of one intra-op thread each, side by side:
# ctest processors: 2
import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import time

import mrcnn_testenv as env

SYSTEM = env.SOURCE_DIR / "systems" / "cpu-dev.json"


LAYOUT = ["--set", "launch.ranks_per_node=2", "--set", "launch.threads_per_rank=1"]


def run_args(data, out, *extra):
    return ["--quiet", "--no-progress", "--set", f'run.data_dir="{data}"', "--out", str(out),
            "--set", "data.loader_threads=1", "--set", "run.eval_threads=1", *extra]


def train_args(data, out, *extra):
    return [str(env.mlperf_maskrcnn()), "train", "--system", str(SYSTEM), *LAYOUT, *run_args(data, out, *extra)]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_env(**extra):
    e = {k: v for k, v in os.environ.items()
         if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
         and not k.startswith(("OMPI_", "PMIX_", "PMI_", "SLURM_", "TORCHELASTIC_"))}
    e.update(extra)
    return e


def start_by_hand(data, out, *extra, port):
    """Two rank processes with the variables torchrun would give them, set by hand."""
    procs = []
    for rank in range(2):
        e = clean_env(RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        procs.append(subprocess.Popen(train_args(data, out, *extra, "--set", 'launch.communicator="auto"'), env=e, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    return procs


def hurt_rank_1(data, out, sig, *extra):
    """Starts two hand-set ranks, sends `sig` to rank 1 at step 3; rank 0's time to end, output."""
    long_run = ["--set", "run.max_epochs=50", "--set", "run.target_bbox=0.99", "--set", "run.target_segm=0.99",
                "--seed", "22", *extra]
    procs = start_by_hand(data, out, *long_run, port=free_port())
    deadline = time.time() + 600
    metrics = None
    while time.time() < deadline and procs[0].poll() is None:
        found = list(out.glob("*/metrics.jsonl"))
        if found and found[0].read_text().count('"step"') >= 3:
            metrics = found[0]
            break
        time.sleep(0.2)
    assert metrics is not None, "the run did not reach step 3"
    procs[1].send_signal(sig)
    hurt = time.monotonic()
    out0 = procs[0].communicate(timeout=120)[0]
    took = time.monotonic() - hurt
    procs[1].kill()
    procs[1].communicate()
    assert procs[0].returncode == 1, f"rank 0 exit {procs[0].returncode}:\n{out0[-3000:]}"
    # Rank 0 survives and closes its MLPerf log.
    stops = [r for r in env.mllog_records(metrics.parent / "mlperf_log.txt") if r["key"] == "run_stop"]
    assert len(stops) == 1 and stops[0]["metadata"]["status"] == "aborted", stops
    return took, out0


def main():
    with env.scratch_dir("e2e-env-ranks") as tmp:
        tmp = pathlib.Path(tmp)
        data = tmp / "data"
        env.synth_dataset(data, "--train", "96", "--val", "8", "--seed", "5")
        # Targets reached at the first evaluation, scored before training goes on: every launch
        # trains exactly one epoch (12 steps of 8 images) and ends with success (exit 0).
        fixed = ["--set", "run.max_epochs=2", "--set", "run.target_bbox=0", "--set", "run.target_segm=0",
                 "--set", "run.async_eval=false", "--seed", "21"]

        # torchrun as `launch` starts it (the .venv's torchrun first on PATH).
        path = f"{pathlib.Path(env.PYTHON).parent}:{os.environ.get('PATH', '')}"
        t = env.run([env.mlperf_maskrcnn(), "launch", "--system", SYSTEM, "--scheduler", "torchrun", *LAYOUT,
                     "--set", 'launch.communicator="tcp"', "--", *run_args(data, tmp / "torchrun", *fixed)],
                    env=clean_env(PATH=path), timeout=900)
        assert t.returncode == 0, f"torchrun run failed ({t.returncode}):\n{t.stdout[-3000:]}\n{t.stderr[-3000:]}"
        a = (tmp / "torchrun" / "latest").resolve()
        losses, accuracies = env.step_losses(a), env.eval_accuracies(a)
        assert len(losses) == 12 and sorted(accuracies) == [1], (len(losses), accuracies)
        ranks = json.loads((a / "fingerprint.json").read_text())["ranks"]
        assert ranks["communicator_resolved"] == "tcp" and ranks["world_size"] == 2, ranks

        procs = start_by_hand(data, tmp / "hand", *fixed, port=free_port())
        outs = [p.communicate(timeout=900)[0] for p in procs]
        assert [p.returncode for p in procs] == [0, 0], "\n".join(o[-3000:] for o in outs)
        b = (tmp / "hand" / "latest").resolve()
        assert env.step_losses(b) == losses and env.eval_accuracies(b) == accuracies, \
            f"torchrun and hand-set ranks differ:\n{losses[:2]}\n{env.step_losses(b)[:2]}"
        print(f"torchrun = hand-set RANK/WORLD_SIZE: {len(losses)} identical losses, accuracies {accuracies}")

        helptext = env.run([env.mlperf_maskrcnn(), "train", "--help"]).stdout
        if shutil.which("mpirun") and "communicators built in: local, mpi" in helptext:
            m = env.run(["mpirun", "-np", "2", "--oversubscribe", "--bind-to", "none",
                         *train_args(data, tmp / "mpi", *fixed, "--set", 'launch.communicator="mpi"')],
                        env=clean_env(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                                      ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0"),
                        timeout=900)
            assert m.returncode == 0, m.stdout[-3000:]
            c = (tmp / "mpi" / "latest").resolve()
            assert env.step_losses(c) == losses and env.eval_accuracies(c) == accuracies, \
                f"MPI and TCP ranks differ:\n{losses[:2]}\n{env.step_losses(c)[:2]}"
            print("mpirun on the MPI communicator: the same losses and accuracies, bit for bit")
        else:
            print("(no MPI communicator in this build: the MPI comparison is skipped)")

        took, out0 = hurt_rank_1(data, tmp / "killed", signal.SIGKILL)
        assert took < 30, f"rank 0 took {took:.1f} s to end after rank 1 was killed"
        assert "lost the connection to rank 1 (" in out0, out0[-3000:]
        errors = [line for line in out0.splitlines() if "error" in line.lower()]
        assert len(errors) == 1, "expected one error line:\n" + "\n".join(errors)
        print(f"rank 1 killed: rank 0 ended in {took:.1f} s with: {errors[0].strip()}")

        took, out0 = hurt_rank_1(data, tmp / "hung", signal.SIGSTOP, "--set", "launch.collective_timeout_s=5")
        assert took < 30, f"rank 0 took {took:.1f} s to end after rank 1 stopped"
        line = next((l for l in out0.splitlines() if "no data moved" in l), None)
        assert line and "[rank 0]" in line and "from rank 1 (" in line and "dead or hung" in line, out0[-3000:]
        print(f"rank 1 stopped: rank 0 ended in {took:.1f} s with: {line.strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
