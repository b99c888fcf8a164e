"""End to end: `mlperf-maskrcnn train` stopped by signals.

1. SIGTERM mid-run: the run stops after the current step, the MLPerf log ends with run_stop
   "aborted" (one run_start, one run_stop), the epoch checkpoint already written stays, stderr
   says so in one error line, the exit status is 128 + 15, and no weights are saved.
2. Two stop signals: the second ends the process at once (SIGINT and SIGTERM delivered together:
   exit 128 + the second's number with the "second stop signal" line, no run_stop).
3. A temporary file that a killed run left beside its checkpoints is removed by the next run.
"""
# Its runs train systems/cpu-dev.json on its 2 intra-op threads:
# ctest processors: 2
import os
import pathlib
import signal
import subprocess
import time

import mrcnn_testenv as env

SYSTEM = env.SOURCE_DIR / "systems" / "cpu-dev.json"


def start(data, out, leaks_reported=True):
    cmd = [env.mlperf_maskrcnn(), "train", "--system", SYSTEM, "--quiet", "--no-progress",
           "--set", f'run.data_dir="{data}"', "--out", out, "--set", "run.max_epochs=50",
           "--set", "run.target_bbox=0.99", "--set", "run.target_segm=0.99",
           "--set", "run.checkpoint_every_epoch=true", "--set", "data.loader_threads=1"]
    if os.environ.get("MRCNN_SANITIZER") == "tsan":  # LibTorch's OpenMP barriers are invisible to tsan
        cmd += ["--set", "launch.threads_per_rank=1"]
    e = dict(os.environ)
    if not leaks_reported:  # exiting at once leaves the loader's threads unjoined, by design
        e["TSAN_OPTIONS"] = e.get("TSAN_OPTIONS", "") + ":report_thread_leaks=0"
    return subprocess.Popen([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e)


def wait_for(predicate, seconds, what):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def main():
    with env.scratch_dir("signals") as tmp:
        tmp = pathlib.Path(tmp)
        data = tmp / "data"
        env.synth_dataset(data, "--train", "16", "--val", "4", "--seed", "5")

        # A temporary file of a writer that no longer runs (a pid above any pid_max).
        stale = tmp / "out" / "20000101T000000Z-seed1" / "checkpoints" / "epoch_1.safetensors.tmp.4194999"
        stale.parent.mkdir(parents=True)
        stale.write_bytes(b"half a checkpoint")

        proc = start(data, tmp / "out")
        run = tmp / "out" / "latest"
        wait_for(lambda: (run / "checkpoints" / "epoch_1.safetensors").is_file(), 300, "epoch 1's checkpoint")
        assert not stale.exists(), "the stale temporary file was not removed"
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 128 + signal.SIGTERM, f"exit {proc.returncode}\n{err[-3000:]}"
        errors = [line for line in err.splitlines() if "[error]" in line or "error:" in line]
        assert len(errors) == 1 and "stopped by SIGTERM" in errors[0] and "run_stop aborted" in errors[0], err
        records = env.mllog_records(run / "mlperf_log.txt")
        keys = [r["key"] for r in records]
        assert keys.count("run_start") == 1 and keys.count("run_stop") == 1, keys
        assert records[-1]["key"] == "run_stop" and records[-1]["metadata"]["status"] == "aborted", records[-1]
        assert (run / "checkpoints" / "epoch_1.safetensors").is_file()
        assert not (run / "model.safetensors").exists(), "weights saved from a stopped run"
        assert not list(run.rglob("*.tmp.*")), list(run.rglob("*.tmp.*"))
        print(f"SIGTERM: stopped cleanly after {keys.count('epoch_start')} epoch(s), checkpoint kept")

        # Two signals at once: stop the process, queue SIGINT and SIGTERM, let it go on.
        proc = start(data, tmp / "out2", leaks_reported=False)
        wait_for(lambda: (tmp / "out2" / "latest" / "metrics.jsonl").is_file()
                 and (tmp / "out2" / "latest" / "metrics.jsonl").stat().st_size > 0, 300, "the first step")
        os.kill(proc.pid, signal.SIGSTOP)
        os.kill(proc.pid, signal.SIGINT)
        os.kill(proc.pid, signal.SIGTERM)
        t0 = time.time()
        os.kill(proc.pid, signal.SIGCONT)
        out, err = proc.communicate(timeout=60)
        # Which of the two is handled second depends on the thread the kernel picks for each.
        assert proc.returncode in (128 + signal.SIGINT, 128 + signal.SIGTERM), f"exit {proc.returncode}\n{err[-3000:]}"
        assert "second stop signal, exiting at once" in err, err[-3000:]
        keys = [r["key"] for r in env.mllog_records(tmp / "out2" / "latest" / "mlperf_log.txt")]
        assert "run_stop" not in keys, keys
        print(f"two signals: exited at once ({time.time() - t0:.2f} s)")


if __name__ == "__main__":
    main()
