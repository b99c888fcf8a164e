"""Separate hosts: training across network namespaces (netns_cluster.py), each host with its own
address on a bridge, its own host name and /etc/hosts.

1. Two hosts x 1 rank on the TCP communicator (RANK/WORLD_SIZE/MASTER_ADDR set on each host, the
   store at host0's address): the losses and accuracies of 2 ranks on one host, bit for bit;
   rank 0's console names both hosts, each rank local rank 0 of 1 on its own (so each picks its
   node's first device and clears its node's page cache).
2. mpirun across the hosts: a hostfile of their names, mpirun's launch agent entering each host
   (where ssh would log in), TCP on their eth0: MPI sees two nodes, and the losses are the same.
   Slurm across the hosts (slurm_cluster.py with one slurmd per host, NodeAddr its address):
   `launch --scheduler slurm --nodes 2` with srun --mpi=none (the ranks meet at the first host
   of the allocation, from `scontrol show hostnames`) and with srun --mpi=pmix: the same losses.
3. Faults (collective timeout 10 s), each ending the job within the collective timeout + 30 s
   with a message naming the host, rank 0 closing its log (run_stop aborted) and keeping its
   checkpoints:
   - host1's link cut in the middle of training (its bridge port down: no reset, only silence);
     `--resume` from the last checkpoint on the two hosts then continues the uninterrupted run's
     losses bit for bit;
   - host0's processes killed (SIGKILL): rank 1 on host1 names rank 0 and host0;
   - host1's processes frozen (SIGSTOP): rank 0 names host1 after the collective timeout;
   - the disk full under rank 0's output folder (a 400 kB tmpfs): rank 0 names the checkpoint it
     cannot write, keeps what it wrote, and rank 1 on the other host ends too.
   Loss and delay (tc netem) are skipped with the reason where the kernel has no sch_netem.
4. The gradient all-reduce (176.5 MB of float32, buckets of 25 MB, allreduce_probe) on 2 and 4
   hosts, links unshaped and shaped to 1 and 5 Gbit/s (tc tbf): measured against the ring
   model 2(p-1)/p x bytes / rate (benchmark/README.md), never below it; and a training step on
   2 hosts at 1 Gbit/s with the all-reduce overlapping backward and after it (printed).
Skipped (exit 77) where namespaces cannot be made (not root, no iproute2).
"""
# Two hosts' ranks of one intra-op thread each, side by side:
# ctest processors: 2
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

import mrcnn_testenv as env
import netns_cluster
import slurm_cluster

SYSTEM = env.SOURCE_DIR / "systems" / "cpu-dev.json"
SKIP = 77
# The collective timeout of the runs with a fault: long enough that a loaded 2-core machine never
# trips it in a healthy run (a checkpoint, a rank starting late), short enough to wait for.
FAULT_TIMEOUT = 10
ONE_THREAD = ["--set", "launch.threads_per_rank=1", "--set", "data.loader_threads=1", "--set", "run.eval_threads=1"]


def run_args(data, out, *extra):
    return [str(env.mlperf_maskrcnn()), "train", "--system", str(SYSTEM), "--quiet", "--no-progress",
            "--set", f'run.data_dir="{data}"', "--out", str(out), "--set", "launch.ranks_per_node=1",
            "--set", "launch.nodes=2", "--set", 'system.number_of_nodes="2"', "--set", 'launch.communicator="tcp"',
            *ONE_THREAD, *extra]


def rank_env(rank, world, master, port):
    e = {k: v for k, v in os.environ.items()
         if not k.startswith(("OMPI_", "PMIX_", "PMI_", "SLURM_", "TORCHELASTIC_", "MRCNN_"))
         and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}
    e.update(RANK=str(rank), WORLD_SIZE=str(world), MASTER_ADDR=master, MASTER_PORT=str(port))
    return e


def start(cluster, argv, world=2):
    """One rank per host, rank k on host k (the store on host0, whose ports no other job uses)."""
    return [cluster.popen(k, argv, env=rank_env(k, world, cluster.addresses[0], 29500), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True) for k in range(world)]


def finish(procs, timeout=900):
    outs = [p.communicate(timeout=timeout)[0] for p in procs]
    return [p.returncode for p in procs], outs


def wait_for(path_glob, root, what, procs, timeout=600):
    deadline = time.time() + timeout
    while time.time() < deadline:
        found = sorted(pathlib.Path(root).glob(path_glob))
        if found:
            return found
        assert all(p.poll() is None for p in procs), f"a rank ended before {what}"
        time.sleep(0.2)
    raise AssertionError(f"no {what} after {timeout} s")


def main():
    reason = netns_cluster.missing_reason()
    if reason:
        print(f"skipped: {reason}")
        return SKIP
    with env.scratch_dir("e2e-hosts") as tmp:
        tmp = pathlib.Path(tmp)
        os.chmod(tmp, 0o755)
        data = env.synth_dataset(tmp / "data", "--train", "32", "--val", "8", "--seed", "6")
        fixed = ["--set", "run.max_epochs=3", "--set", "run.target_bbox=0.99", "--set", "run.target_segm=0.99",
                 "--seed", "9"]

        # The reference: two ranks on this one host.
        port = slurm_cluster.free_port()
        one_host = [subprocess.Popen(run_args(data, tmp / "one-host", *fixed), stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True,
                                     env=rank_env(r, 2, "127.0.0.1", port)) for r in range(2)]
        codes, outs = finish(one_host)
        assert codes == [3, 3], "\n".join(o[-2000:] for o in outs)
        ref = (tmp / "one-host" / "latest").resolve()
        ref_losses, ref_acc = env.step_losses(ref), env.eval_accuracies(ref)
        assert len(ref_losses) == 12, len(ref_losses)

        with netns_cluster.NetnsCluster(4) as cluster:
            # 1. Two hosts, one rank each, on the TCP communicator.
            codes, outs = finish(start(cluster, run_args(data, tmp / "two-hosts", *fixed)))
            assert codes == [3, 3], "\n".join(o[-2000:] for o in outs)
            two = (tmp / "two-hosts" / "latest").resolve()
            assert env.step_losses(two) == ref_losses and env.eval_accuracies(two) == ref_acc, \
                "two hosts and one host differ"
            placement = next(l for l in outs[0].splitlines() if "tcp communicator, 2 ranks" in l)
            assert "0 on host0 (local rank 0 of 1)" in placement and "1 on host1 (local rank 0 of 1)" in placement, \
                placement
            print(f"2 hosts x 1 rank (tcp): {len(ref_losses)} losses and accuracies = one host's, bit for bit; "
                  f"{placement.split('] ')[-1]}")

            check_converged_log(cluster, data, tmp)
            check_mpirun(cluster, data, tmp, fixed, ref_losses)
            check_slurm(cluster, data, tmp, fixed, ref_losses)
            check_link_cut(cluster, data, tmp)
            check_host_killed(cluster, data, tmp)
            check_host_frozen(cluster, data, tmp)
            check_disk_full(cluster, data, tmp)
            reason = cluster.netem_reason()
            print(f"20 % loss and 100 ms delay: skipped here: {reason}" if reason else "netem available (not run)")
            measure_allreduce(cluster)
            measure_overlap(cluster, data, tmp)
    return 0


def check_converged_log(cluster, data, tmp):
    """A 2-host run that reaches its (lowered) targets: rank 0's log passes both checkers."""
    codes, outs = finish(start(cluster, run_args(data, tmp / "converged", "--set", "run.max_epochs=2",
                                                 "--set", "run.target_bbox=0", "--set", "run.target_segm=0",
                                                 "--seed", "10")))
    assert codes == [0, 0], "\n".join(o[-2000:] for o in outs)
    log = (tmp / "converged" / "latest").resolve() / "mlperf_log.txt"
    ours = env.run([env.mlperf_maskrcnn(), "check", log])
    assert ours.returncode == 0, ours.stdout
    official = env.run([env.PYTHON, "-m", "mlperf_logging.compliance_checker", "--usage", "training",
                        "--ruleset", "3.1.0", log, "--log_output", tmp / "cc.log"], cwd=tmp)
    assert official.returncode == 0, official.stdout + official.stderr
    # Every rank's own step times, per epoch (what forecast grows the slowest rank from).
    # The run stops after epoch 1 or during epoch 2, as early as epoch 1's score arrives (scoring
    # runs beside training): every epoch it started logs its ranks' step times, whichever it was.
    events = [json.loads(line.split(":::MLLOG ", 1)[1]) for line in log.read_text().splitlines()
              if ":::MLLOG " in line]
    started = [e["metadata"]["epoch_num"] for e in events if e["key"] == "epoch_start"]
    per_epoch = [e for e in events if e["key"] == "rank_step_seconds"]
    assert started[:1] == [1] and [r["metadata"]["epoch_num"] for r in per_epoch] == started, \
        (started, per_epoch)
    for r in per_epoch:
        med, p95 = r["value"]["median"], r["value"]["p95"]
        assert len(med) == len(p95) == 2 and all(0 < m <= p for m, p in zip(med, p95)), r
    print("2 hosts, targets reached: rank 0's log passes mlperf-maskrcnn check and the official checker; "
          "both ranks' own step times logged (median " +
          ", ".join(f"{m * 1e3:.0f}" for m in per_epoch[-1]["value"]["median"]) + " ms)")


def has_mpi():
    return shutil.which("mpirun") is not None and \
        "local, mpi" in env.run([env.mlperf_maskrcnn(), "train", "--help"]).stdout


def mpirun_options(cluster, tmp, hosts):
    """A hostfile of the first `hosts` hosts' names and the mpirun options that reach them: in
    ssh's place a launch agent that enters the named host, TCP over their eth0."""
    agent = tmp / "enter_host.sh"
    lines = [f'  {name}) ns={ns};;' for name, ns in zip(cluster.names, cluster.namespaces)]
    agent.write_text("#!/bin/sh\n# ssh's place for mpirun: run the command on the named host (its namespace).\n"
                     "while [ $# -gt 0 ]; do case \"$1\" in -*) shift;; *) break;; esac; done\n"
                     "host=$1; shift\ncase \"$host\" in\n" + "\n".join(lines) +
                     "\n  *) echo \"no host $host\" >&2; exit 255;;\nesac\n"
                     "exec ip netns exec \"$ns\" unshare --uts sh -c 'hostname \"$0\" && exec sh -c \"$*\"' \"$host\" \"$*\"\n")
    agent.chmod(0o755)
    hostfile = tmp / f"hosts{hosts}"
    hostfile.write_text("".join(f"{name} slots=1\n" for name in cluster.names[:hosts]))
    subnet = cluster.subnet
    return hostfile, ["--mca", "plm_rsh_agent", str(agent), "--mca", "btl", "self,tcp",
                      "--mca", "btl_tcp_if_include", subnet, "--mca", "oob_tcp_if_include", subnet]


MPI_ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")


def mpirun(cluster, tmp, hosts, argv):
    """mpirun of argv, one rank on each of the first `hosts` hosts."""
    hostfile, options = mpirun_options(cluster, tmp, hosts)
    cmd = ["mpirun", "-np", str(hosts), "--hostfile", hostfile, *options, "--bind-to", "none",
           "-x", "OMP_NUM_THREADS=1", *argv]
    return env.run(cmd, env=MPI_ENV, timeout=900)


def check_mpirun(cluster, data, tmp, fixed, ref_losses):
    """`launch --nodes 2 --hostfile` across the hosts: what --dry-run prints is what runs, each
    rank bound on its own host as the plan says."""
    if not has_mpi():
        print("mpirun part skipped: no mpirun or no MPI communicator in this build")
        return
    hostfile, options = mpirun_options(cluster, tmp, 2)
    args = run_args(data, tmp / "mpirun", *fixed, "--set", 'launch.communicator="mpi"')[2:]  # after "train"
    launch = [env.mlperf_maskrcnn(), "launch", "--system", SYSTEM, "--nodes", "2", "--hostfile", hostfile,
              "--set", "launch.ranks_per_node=1", "--set", "launch.threads_per_rank=1",
              "--set", 'launch.communicator="mpi"', "--set", 'launch.cpu_binding="core"',
              "--set", f"launch.mpirun_args={json.dumps(options)}",
              # Each host declared as two sockets of one core: its rank is bound to one core (on a
              # 2-core host the plan's 2 cores would be all of them, which binds nothing).
              "--set", 'system.host_processors_per_node="2"', "--set", 'system.host_processor_core_count="1"',
              "--set", 'system.host_processor_vcpu_count="2"']
    dry = env.run([*launch, "--dry-run", "--", *args[args.index("--quiet"):]])
    assert dry.returncode == 0, dry.stderr
    planned = dry.stdout.split()
    pe = next(a for a in planned if ":PE=" in a).split("PE=")[1]
    assert planned[:3] == ["mpirun", "-np", "2"] and "--bind-to" in planned, planned[:12]
    p = env.run([*launch, "--", *args[args.index("--quiet"):]], env=MPI_ENV, timeout=900)
    assert p.returncode == 3, p.stdout[-3000:] + p.stderr[-3000:]
    run = (tmp / "mpirun" / "latest").resolve()
    assert env.step_losses(run) == ref_losses, "mpirun across hosts differs from the tcp runs"
    output = p.stdout + p.stderr
    placement = next(l for l in output.splitlines() if "mpi communicator, 2 ranks" in l)
    assert "0 on host0 (local rank 0 of 1)" in placement and "1 on host1 (local rank 0 of 1)" in placement, placement
    bindings = [l for l in output.splitlines() if "MCW rank" in l and "bound to" in l]
    for rank in (0, 1):
        line = next((l for l in bindings if f"MCW rank {rank} bound" in l), "")
        assert line.count("core ") == int(pe), (pe, bindings)  # PE cores each, as planned
        assert "host0" in line if rank == 0 else "host1" in line, bindings
    print(f"launch --nodes 2 --hostfile (mpirun through a launch agent entering each host): the same losses; "
          f"each rank bound to the {pe} cores --dry-run planned (--report-bindings); {placement.split('] ')[-1]}")


def check_slurm(cluster, data, tmp, fixed, ref_losses):
    reason = slurm_cluster.missing_reason()
    if reason:
        print(f"Slurm part skipped: {reason}")
        return
    subnet = cluster.subnet
    with slurm_cluster.SlurmCluster(tmp / "slurm", hosts=cluster) as slurm:
        for srun_mpi, communicator in (("none", "tcp"), ("pmix", "mpi")):
            out = tmp / f"slurm-{srun_mpi}"
            script = tmp / f"job-{srun_mpi}.sbatch"
            mpi_env = json.dumps({"OMPI_MCA_btl": "self,tcp", "OMPI_MCA_btl_tcp_if_include": subnet,
                                  "OMPI_MCA_oob_tcp_if_include": subnet, "OMPI_ALLOW_RUN_AS_ROOT": "1",
                                  "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"})
            args = run_args(data, out, *fixed, "--set", f'launch.communicator="{communicator}"')[2:]  # after "train"
            cmd = [env.mlperf_maskrcnn(), "launch", "--system", SYSTEM, "--scheduler", "slurm", "--nodes", "2",
                   "--srun-mpi", srun_mpi, "--script", script, "--set", "launch.ranks_per_node=1",
                   "--set", "launch.threads_per_rank=1", "--set", 'launch.cpu_binding="none"',
                   "--set", f"launch.env={mpi_env}", "--", *args[args.index("--quiet"):]]
            # Every node idle first: the job is placed on the first two hosts, as the placement
            # below asserts (the previous job's nodes may still be completing).
            slurm.wait_idle()
            before = set(tmp.glob("slurm-*.out"))
            p = env.run(cmd, env=slurm.env, cwd=tmp, timeout=900)
            job = "".join(f.read_text() for f in set(tmp.glob("slurm-*.out")) - before)
            assert p.returncode == 3, f"sbatch ({srun_mpi}): {p.returncode}\n{p.stderr[-2000:]}\n{job[-4000:]}"
            run = (out / "latest").resolve()
            assert env.step_losses(run) == ref_losses, f"Slurm across hosts ({srun_mpi}) differs"
            placement = next(l for l in job.splitlines() if f"{communicator} communicator, 2 ranks" in l)
            assert "0 on host0 (local rank 0 of 1)" in placement and "1 on host1 (local rank 0 of 1)" in placement, \
                placement
            print(f"Slurm, 2 nodes (one slurmd per host), srun --mpi={srun_mpi}: the same losses; "
                  f"{placement.split('] ')[-1]}")


def check_link_cut(cluster, data, tmp):
    """host1's cable pulled after epoch 1's checkpoint; then --resume on both hosts."""
    fixed = ["--set", "run.max_epochs=3", "--set", "run.target_bbox=0.99", "--set", "run.target_segm=0.99",
             "--set", "run.checkpoint_every_epoch=true", "--set", f"launch.collective_timeout_s={FAULT_TIMEOUT}",
             "--seed", "12"]
    codes, outs = finish(start(cluster, run_args(data, tmp / "whole", *fixed)))
    assert codes == [3, 3], "\n".join(o[-2000:] for o in outs)
    whole = env.step_losses((tmp / "whole" / "latest").resolve())

    procs = start(cluster, run_args(data, tmp / "cut", *fixed))
    wait_for("*/checkpoints/epoch_1.safetensors", tmp / "cut", "epoch 1 checkpoint", procs)
    cluster.cut_link(1)
    cut = time.monotonic()
    try:
        out0 = procs[0].communicate(timeout=120)[0]
        took = time.monotonic() - cut
    finally:
        cluster.restore_link(1)
    codes, outs = finish(procs[1:], timeout=120)
    assert procs[0].returncode == 1, out0[-3000:]
    assert codes[0] != 0, f"rank 1 on the cut host ended with {codes[0]}"
    assert took < FAULT_TIMEOUT + 30, f"rank 0 took {took:.1f} s after the cut"
    line = next((l for l in out0.splitlines() if "[error]" in l), "")
    assert "host1" in line and "rank 1" in line, out0[-3000:]
    run = next((tmp / "cut").glob("*/mlperf_log.txt")).parent
    stops = [r for r in env.mllog_records(run / "mlperf_log.txt") if r["key"] == "run_stop"]
    assert len(stops) == 1 and stops[0]["metadata"]["status"] == "aborted", stops
    checkpoints = sorted((run / "checkpoints").glob("epoch_*.safetensors"))
    assert checkpoints, "no checkpoint kept"
    print(f"host1's link cut: rank 0 ended in {took:.1f} s (timeout {FAULT_TIMEOUT} s): {line.split('] ')[-1]}; "
          f"log closed (run_stop aborted), checkpoints kept: {[c.name for c in checkpoints]}")

    # Both hosts resume from the last checkpoint: the rest of the uninterrupted run, bit for bit.
    resumed = start(cluster, run_args(data, tmp / "resumed", *fixed, "--resume", checkpoints[-1]))
    codes, outs = finish(resumed)
    assert codes == [3, 3], "\n".join(o[-2000:] for o in outs)
    later = env.step_losses((tmp / "resumed" / "latest").resolve())
    assert later and later == [s for s in whole if s[0] >= later[0][0]], "resumed losses differ"
    print(f"--resume from {checkpoints[-1].name} on both hosts: {len(later)} steps = the uninterrupted run's")


def signal_host(cluster, data, out, host, sig, seed):
    """A long 2-host run; at its third step every process of `host` gets `sig`. Returns the other
    rank's (exit status, seconds from the signal to its end, output, metrics file)."""
    fixed = ["--set", "run.max_epochs=50", "--set", "run.target_bbox=0.99", "--set", "run.target_segm=0.99",
             "--set", f"launch.collective_timeout_s={FAULT_TIMEOUT}", "--seed", str(seed)]
    procs = start(cluster, run_args(data, out, *fixed))
    metrics = wait_for("*/metrics.jsonl", out, "metrics", procs)[0]
    deadline = time.time() + 300
    while metrics.read_text().count('"step"') < 3 and time.time() < deadline:
        time.sleep(0.2)
    assert metrics.read_text().count('"step"') >= 3, "the run did not reach step 3"
    pids = subprocess.run(["ip", "netns", "pids", cluster.namespaces[host]], capture_output=True,
                          text=True).stdout.split()
    for pid in pids:
        os.kill(int(pid), sig)
    hurt = time.monotonic()
    survivor = procs[1 - host]
    try:
        out = survivor.communicate(timeout=120)[0]
        took = time.monotonic() - hurt
    finally:
        for pid in pids:  # a frozen host's processes may end now
            try:
                os.kill(int(pid), signal.SIGCONT)
            except ProcessLookupError:
                pass
    procs[host].kill()
    procs[host].communicate(timeout=120)
    assert survivor.returncode == 1 and took < FAULT_TIMEOUT + 30, (survivor.returncode, took, out[-2000:])
    return took, out, metrics


def check_host_killed(cluster, data, tmp):
    """Every process of host0 (rank 0's host) killed: rank 1 on host1 must end and name it."""
    took, out1, _ = signal_host(cluster, data, tmp / "killed", 0, signal.SIGKILL, 13)
    line = next((l for l in out1.splitlines() if "[error]" in l), "")
    assert "rank 0 (host0" in line, out1[-3000:]
    print(f"host0 killed: rank 1 on host1 ended in {took:.1f} s: {line.split('] ')[-1]}")


def check_host_frozen(cluster, data, tmp):
    """host1's processes stopped (a hung host): rank 0's collective times out and names host1."""
    took, out0, metrics = signal_host(cluster, data, tmp / "frozen", 1, signal.SIGSTOP, 14)
    line = next((l for l in out0.splitlines() if "[error]" in l), "")
    assert "no data moved" in line and "rank 1 (host1" in line, out0[-3000:]
    stops = [r for r in env.mllog_records(metrics.parent / "mlperf_log.txt") if r["key"] == "run_stop"]
    assert len(stops) == 1 and stops[0]["metadata"]["status"] == "aborted", stops
    print(f"host1 frozen: rank 0 ended in {took:.1f} s (timeout {FAULT_TIMEOUT} s): {line.split('] ')[-1]}")


def check_disk_full(cluster, data, tmp):
    """Rank 0's output folder on a 400 kB file system: the first checkpoint does not fit."""
    out = tmp / "full"
    out.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=400k", "tmpfs", str(out)], check=True)
    try:
        fixed = ["--set", "run.max_epochs=3", "--set", "run.target_bbox=0.99", "--set", "run.target_segm=0.99",
                 "--set", "run.checkpoint_every_epoch=true", "--set", f"launch.collective_timeout_s={FAULT_TIMEOUT}",
                 "--seed", "15"]
        procs = start(cluster, run_args(data, out, *fixed))
        codes, outs = finish(procs, timeout=300)
        assert codes == [1, 1], (codes, [o[-1500:] for o in outs])
        line0 = next((l for l in outs[0].splitlines() if "[error]" in l), "")
        assert "cannot write checkpoint" in line0 and "epoch_1.safetensors" in line0, outs[0][-2000:]
        line1 = next((l for l in outs[1].splitlines() if "[error]" in l), "")
        assert "rank 0 (host0" in line1, outs[1][-2000:]
        run = next(out.glob("*/mlperf_log.txt")).parent
        stops = [r for r in env.mllog_records(run / "mlperf_log.txt") if r["key"] == "run_stop"]
        assert len(stops) == 1 and stops[0]["metadata"]["status"] == "aborted", stops
        assert env.step_losses(run), "the metrics written before the disk filled are gone"
        assert not list((run / "checkpoints").glob("*")), "a partial checkpoint was left"
        print(f"disk full under rank 0's output: {line0.split('] ')[-1]}; rank 1: {line1.split('] ')[-1][:90]}...; "
              "the log closed, the metrics kept, no partial checkpoint")
    finally:
        subprocess.run(["umount", "-l", str(out)])


def probe(cluster, hosts):
    """allreduce_probe on the first `hosts` hosts (tcp): rank 0's JSON line."""
    exe = env.BUILD_DIR / "benchmark" / "perf" / "allreduce_probe"
    procs = [cluster.popen(k, [exe, "--communicator", "tcp", "--iterations", "3", "--timeout", "120"],
                           env=dict(rank_env(k, hosts, cluster.addresses[0], 29500), OMP_NUM_THREADS="1"),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for k in range(hosts)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-1000:] for o in outs]
    return json.loads(outs[0][0].strip().splitlines()[-1])


def measure_allreduce(cluster):
    """The ring model against the ring: unshaped links first (what the hosts' CPUs and the veth
    pairs sustain), then every host's link shaped to 1 and 5 Gbit/s."""
    if not (env.BUILD_DIR / "benchmark" / "perf" / "allreduce_probe").exists():
        print("all-reduce measurement skipped: allreduce_probe not built (MRCNN_BUILD_BENCHMARKS=OFF)")
        return []
    unshaped = {hosts: probe(cluster, hosts) for hosts in (2, 4)}
    for hosts, r in unshaped.items():
        print(f"all-reduce of {r['bytes'] / 1e6:.1f} MB on {hosts} hosts, links unshaped: {r['median_s']:.3f} s, "
              f"bus bandwidth {r['busbw_GBps'] * 8:.2f} Gbit/s")
    rows = []
    for rate_gbit in (1.0, 5.0):
        for k in range(cluster.n):
            cluster.shape(k, f"{rate_gbit:g}gbit")
        for hosts in (2, 4):
            r = probe(cluster, hosts)
            moved = 2 * (hosts - 1) / hosts * r["bytes"]  # through every link of the ring
            line = moved / (rate_gbit * 1e9 / 8)
            # The line rate alone, and the fit of benchmark/README.md: the ring's own cost on these
            # hosts (the unshaped time) half hidden behind the line time, or the other way round.
            own = unshaped[hosts]["median_s"]
            fit = max(line, own) + min(line, own) / 2
            rows.append({"hosts": hosts, "gbit": rate_gbit, "measured_s": r["median_s"], "line_s": line, "fit_s": fit})
            print(f"  {rate_gbit:g} Gbit/s, {hosts} hosts: measured {r['median_s']:.2f} s; line rate {line:.2f} s "
                  f"(measured/line {r['median_s'] / line:.2f}); max(line, own) + min(line, own)/2 {fit:.2f} s "
                  f"(measured/that {r['median_s'] / fit:.2f})")
            # The link's rate bounds the ring from below.
            assert r["median_s"] > 0.9 * line, (r, line)
    for k in range(cluster.n):
        cluster.unshape(k)
    return rows


def measure_overlap(cluster, data, tmp):
    """Training steps on 2 hosts over mpirun with 1 Gbit/s links: the gradient buckets summed while
    backward runs (MPI_Iallreduce, launch.overlap_allreduce) against after it."""
    if not has_mpi():
        print("overlap measurement skipped: no MPI")
        return
    for k in range(2):
        cluster.shape(k, "1gbit")
    seconds, gradients = {}, ""
    for overlap in ("true", "false", "unshaped"):
        if overlap == "unshaped":
            for k in range(2):
                cluster.unshape(k)
        out = tmp / f"overlap-{overlap}"
        p = mpirun(cluster, tmp, 2, run_args(data, out, "--set", "run.max_epochs=2", "--set", "run.target_bbox=0.99",
                                             "--set", "run.target_segm=0.99", "--seed", "16",
                                             "--set", 'launch.communicator="mpi"',
                                             "--set", f"launch.overlap_allreduce={overlap != 'false'}".lower()))
        assert p.returncode == 3, p.stdout[-2000:] + p.stderr[-2000:]
        gradients = next(l for l in (p.stdout + p.stderr).splitlines() if "MB of float32 gradients" in l)
        steps = [json.loads(l) for l in ((out / "latest").resolve() / "metrics.jsonl").read_text().splitlines()
                 if '"event":"step"' in l]
        # Step times: the gaps between consecutive step records of one epoch (the first step of an
        # epoch, which waits for the loader's first batch, has no gap before it).
        per_step = sorted((b["time_ms"] - a["time_ms"]) / 1000 for a, b in zip(steps, steps[1:])
                          if a["epoch"] == b["epoch"])
        seconds[overlap] = per_step[len(per_step) // 2]
    mb = gradients.split(", ")[-1].split(" MB")[0]
    print(f"training step on 2 hosts at 1 Gbit/s (mpirun, 4 images per rank, cpu-dev's network: {mb} MB of gradients): "
          f"{seconds['true']:.2f} s with the all-reduce overlapping backward, {seconds['false']:.2f} s after it "
          f"({seconds['false'] - seconds['true']:+.2f} s); {seconds['unshaped']:.2f} s unshaped: scaling efficiency "
          f"at 1 Gbit/s {seconds['unshaped'] / seconds['true']:.2f}")


if __name__ == "__main__":
    sys.exit(main())
