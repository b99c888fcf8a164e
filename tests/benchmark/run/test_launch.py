"""`mlperf-maskrcnn launch --dry-run` for every system file and both schedulers, checked against
the node's topology rather than by string equality: the mpirun command and the Slurm script are
parsed, and their numbers must place every rank on cores of its own (no core in two ranks, no
rank with more intra-op threads than physical cores, every core used once where the cores divide
evenly), one rank per accelerator, and the network environment of the system. The topology is
read here from the system description, independently of the C++ code.
Then the layouts that cannot work must be refused with exit 2 and a message naming the key."""
import json
import os
import pathlib
import re
import shlex
import subprocess
import sys

import mrcnn_testenv as env

SYSTEMS = sorted((env.SOURCE_DIR / "systems").glob("*.json"))


def resolved(system, *sets):
    p = env.run([env.mlperf_maskrcnn(), "config", "--system", system, *sets])
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def topology(cfg):
    sd = cfg["system"]
    sockets, cores = int(sd["host_processors_per_node"]), int(sd["host_processor_core_count"])
    vcpus, acc = int(sd["host_processor_vcpu_count"]), int(sd["accelerators_per_node"])
    assert vcpus % (sockets * cores) == 0
    return sockets, cores, vcpus // (sockets * cores), acc


def launch(system, *args, environ=None):
    e = {k: v for k, v in os.environ.items() if k not in ("CONT", "MOUNTS")}
    e.update(environ or {})
    return env.run([env.mlperf_maskrcnn(), "launch", "--system", system, *args], env=e)


def check_mpirun(name, cfg, argv):
    S, C, T, A = topology(cfg)
    L = cfg["launch"]
    R, threads, nodes = L["ranks_per_node"], L["threads_per_rank"], L["nodes"]
    if nodes * R == 1:
        assert argv[0] != "mpirun" and argv[1] == "train", argv
        return "1 rank, started directly"
    assert argv[0] == "mpirun", argv
    opt = {argv[i]: argv[i + 1] for i in range(1, len(argv) - 1) if argv[i].startswith("-")}
    assert int(opt["-np"]) == nodes * R, (name, opt["-np"])
    env_x = dict(argv[i + 1].split("=", 1) for i in range(len(argv) - 1) if argv[i] == "-x")
    assert int(env_x["OMP_NUM_THREADS"]) == threads
    for k, v in L.get("env", {}).items():
        assert env_x[k] == v, (name, k)
    if L.get("nccl_net_plugin_dir"):
        assert env_x["LD_LIBRARY_PATH"].split(":")[0] == L["nccl_net_plugin_dir"], name
    train = argv[argv.index("train") - 1:]
    assert pathlib.Path(train[0]).name == "mlperf-maskrcnn" and train[2:4] == ["--system", str(pathlib.Path(
        cfg["_file"]).resolve())], train[:4]
    if L["cpu_binding"] != "core":
        return f"{nodes}x{R} ranks, binding {L['cpu_binding']}"
    m = re.fullmatch(r"ppr:(\d+):(socket|node):PE=(\d+)", opt["--map-by"])
    assert m, opt["--map-by"]
    per_socket, pe = int(m[1]), int(m[3])
    assert opt["--bind-to"] == "core"
    if m[2] == "node":  # fewer ranks than sockets: each rank on cores of one socket
        assert R < S and per_socket == R and pe <= C and threads <= pe, (name, opt["--map-by"])
        return f"{nodes}x{R} ranks, {R} per node (fewer than its {S} sockets) x {pe} cores, {threads} threads"
    assert per_socket * S == R, f"{name}: {per_socket} ranks on each of {S} sockets, but {R} ranks per node"
    assert per_socket * pe <= C, f"{name}: {per_socket} ranks x {pe} cores oversubscribe a {C}-core socket"
    if C % per_socket == 0:
        assert per_socket * pe == C, f"{name}: {C - per_socket * pe} cores of each socket left idle"
    assert threads <= pe, f"{name}: {threads} intra-op threads on {pe} cores"
    if A:
        assert R <= A and A % R == 0, f"{name}: {R} ranks for {A} accelerators"
    return f"{nodes}x{R} ranks, {per_socket} per socket x {pe} cores, {threads} threads"


def check_slurm(name, cfg, script):
    S, C, T, A = topology(cfg)
    L = cfg["launch"]
    R, threads, nodes = L["ranks_per_node"], L["threads_per_rank"], L["nodes"]
    sbatch = dict(re.findall(r"^#SBATCH --([\w-]+)=(\S+)$", script, re.M))
    assert int(sbatch["nodes"]) == nodes and int(sbatch["ntasks-per-node"]) == R, sbatch
    if cfg["run"]["device"].startswith("cuda"):
        assert int(sbatch["gpus-per-node"]) == A, (name, sbatch)
    assert re.search(rf"^export OMP_NUM_THREADS={threads}$", script, re.M)
    srun = shlex.split(next(line for line in script.splitlines() if line.startswith("srun ")))
    assert "--mpi=pmix" in srun and "--kill-on-bad-exit=1" in srun
    bind = next(a for a in srun if a.startswith("--cpu-bind="))
    if L["cpu_binding"] == "none":
        assert bind == "--cpu-bind=none"
        return f"{nodes}x{R} tasks, unbound"
    masks = [int(h, 16) for h in bind.split("mask_cpu:")[1].split(",")]
    assert len(masks) == R, f"{name}: {len(masks)} masks for {R} tasks per node"
    assert "--mem-bind=local" in srun
    ncores = S * C
    seen = set()
    for i, m in enumerate(masks):
        cpus = {c for c in range(S * C * T) if m >> c & 1}
        assert m >> (S * C * T) == 0, f"{name}: rank {i} mask names CPUs the node does not have"
        assert not cpus & seen, f"{name}: rank {i} shares CPUs {sorted(cpus & seen)} with another rank"
        seen |= cpus
        cores = {c % ncores for c in cpus}
        for core in cores:  # whole cores: every hyper-thread sibling with it
            assert all(core + h * ncores in cpus for h in range(T)), f"{name}: rank {i} has part of core {core}"
        assert len({c // C for c in cores}) == 1, f"{name}: rank {i} spans sockets"
        if L["cpu_binding"] == "core":
            assert threads <= len(cores), f"{name}: rank {i}: {threads} threads on {len(cores)} cores"
    if L["cpu_binding"] == "core" and R >= S and C % (R // S) == 0:
        assert len(seen) == S * C * T, f"{name}: {S * C * T - len(seen)} CPUs used by no rank"
    return f"{nodes}x{R} tasks, masks {', '.join(hex(m) for m in masks)}"


def check_ranks_without_mpi(p3dn):
    """torchrun, and Slurm's srun --mpi=none with several runs in one allocation."""
    p5 = env.SOURCE_DIR / "systems" / "aws-p5.48xlarge.json"
    for system, threads, ifname in ((p3dn, 6, "ens5"), (p5, 12, "^docker,lo,veth")):
        p = launch(system, "--dry-run", "--scheduler", "torchrun", "--", "--seed", "7")
        assert p.returncode == 0, p.stderr
        argv = shlex.split(p.stdout)
        at = argv.index("torchrun")
        assert f"OMP_NUM_THREADS={threads}" in argv[:at] and f"NCCL_SOCKET_IFNAME={ifname}" in argv[:at], argv[:at]
        assert argv[at:at + 8] == ["torchrun", "--nnodes", "1", "--nproc-per-node", "8", "--standalone",
                                   "--numa-binding=node", "--no-python"], argv
        assert argv[at + 8:at + 10] == [str(env.mlperf_maskrcnn().resolve()), "train"], argv
        assert argv[-2:] == ["--seed", "7"], argv
    p = launch(p3dn, "--dry-run", "--scheduler", "torchrun", "--nodes", "2", "--rendezvous", "node1:29400")
    argv = shlex.split(p.stdout)
    assert p.returncode == 0 and argv[argv.index("--nnodes") + 1] == "2", p.stdout + p.stderr
    assert argv[argv.index("--rdzv-endpoint") + 1] == "node1:29400" and "--standalone" not in argv, argv
    cpu = env.SOURCE_DIR / "systems" / "cpu-dev.json"
    p = launch(cpu, "--dry-run", "--scheduler", "torchrun", "--set", "launch.ranks_per_node=2",
               "--set", "launch.threads_per_rank=1", "--set", 'launch.communicator="tcp"')
    assert p.returncode == 0 and "--numa-binding" not in p.stdout, p.stdout + p.stderr  # CPU ranks: no GPU to follow
    # The printed line runs as printed: an environment value with a space stays an assignment.
    p = launch(cpu, "--dry-run", "--scheduler", "torchrun", "--set", 'launch.env={"MRCNN_NOTE": "a b"}')
    assert p.returncode == 0 and p.stdout.startswith("MRCNN_NOTE='a b' "), p.stdout + p.stderr
    print("torchrun: --standalone on one node, a c10d rendezvous on two, NUMA binding on GPUs, the rank environment")

    # The batch script with srun --mpi=none and 3 runs, run with stand-ins for srun and scontrol.
    with env.scratch_dir("launch-runs") as tmp:
        tmp = pathlib.Path(tmp)
        runs_out = tmp / "runs"
        p = launch(p3dn, "--dry-run", "--scheduler", "slurm", "--nodes", "2", "--srun-mpi", "none", "--runs", "3",
                   "--", "--seed", "010", "--out", str(runs_out))
        assert p.returncode == 0, p.stderr
        script = tmp / "job.sbatch"
        script.write_text(p.stdout)
        # srun's stand-in records its arguments; the second run fails with status 3.
        for tool, body in (("srun", 'echo "$MASTER_ADDR $MASTER_PORT $*" >> "$CALLS"\n'
                                    '[ "$(wc -l < "$CALLS")" -eq 2 ] && exit 3\nexit 0\n'),
                           ("scontrol", '[ "$1 $2 $3" = "show hostnames node[1-2]" ] && printf "node1\\nnode2\\n"\n')):
            (tmp / tool).write_text("#!/bin/sh\n" + body)
            (tmp / tool).chmod(0o755)
        calls = tmp / "calls"
        r = subprocess.run(["bash", script], capture_output=True, text=True,
                           env=dict(os.environ, PATH=f"{tmp}:{os.environ['PATH']}", CALLS=str(calls),
                                    SLURM_JOB_NODELIST="node[1-2]", SLURM_JOB_ID="4242"))
        assert r.returncode == 3, r.stdout + r.stderr  # the first failing run's status
        statuses = [(runs_out / f"run_{i}" / "exit_status").read_text().strip() for i in range(3)]
        assert statuses == ["0", "3", "0"], statuses
        runs = [shlex.split(line) for line in calls.read_text().splitlines()]
        assert len(runs) == 3, runs
        for i, argv in enumerate(runs):
            assert argv[:2] == ["node1", str(20000 + 4242 % 20000)], argv[:2]
            assert argv[2] == "--mpi=none" and argv.count("--seed") == 1 and argv.count("--out") == 1, argv
            assert argv[argv.index("--seed") + 1] == str(10 + i), argv
            assert argv[argv.index("--out") + 1] == f"{runs_out}/run_{i}", argv
        print("slurm --srun-mpi none --runs 3: MASTER_ADDR the allocation's first host; seeds 10, 11, 12 (from "
              "--seed 010, decimal) into run_0..run_2, each run's exit status kept, the job's the first failing one's "
              "(the script run with stand-ins for srun and scontrol)")

    gaudi = env.SOURCE_DIR / "systems" / "habana-gaudi2-hls.json"
    for system, args, message in (
            (p3dn, ["--scheduler", "torchrun", "--nodes", "2"], "needs --rendezvous HOST:PORT"),
            (gaudi, ["--scheduler", "torchrun"], 'launch.communicator "mpi" needs ranks that MPI starts'),
            (gaudi, ["--scheduler", "slurm", "--srun-mpi", "none"], 'launch.communicator "mpi" needs ranks'),
            (p3dn, ["--scheduler", "slurm", "--runs", "0"], "--runs 0: expected"),
            (p3dn, ["--scheduler", "slurm", "--runs", "2", "--", "--seed", "x1"], "--runs counts seeds up"),
            (p3dn, ["--runs", "2"], "--runs and --srun-mpi are for --scheduler slurm"),
            (p3dn, ["--scheduler", "slurm", "--srun-mpi", "pmi2"], "--srun-mpi: expected pmix or none"),
            (p3dn, ["--rendezvous", "node1:29400"], "--rendezvous is for --scheduler torchrun"),
            (p3dn, ["--scheduler", "torchrun", "--rendezvous", "node1"], "--rendezvous node1: expected HOST:PORT"),
            (p3dn, ["--scheduler", "torchrun", "--hostfile", str(SYSTEMS[0])], "--hostfile: torchrun")):
        p = launch(system, "--dry-run", *args)
        assert p.returncode == 2 and message in p.stderr, (system.name, args, p.returncode, p.stderr)
    print("refused: torchrun on 2 nodes without a rendezvous, MPI's communicator on ranks MPI did not start, "
          "bad --runs/--srun-mpi/--rendezvous, options of another scheduler")


def main():
    assert len(SYSTEMS) >= 13, SYSTEMS
    for f in SYSTEMS:
        cfg = resolved(f)
        cfg["_file"] = str(f)
        p = launch(f, "--dry-run", "--", "--seed", "7")
        assert p.returncode == 0, f"{f.name}: {p.stderr}"
        what = check_mpirun(f.name, cfg, shlex.split(p.stdout))
        p = launch(f, "--dry-run", "--scheduler", "slurm", "--", "--seed", "7")
        assert p.returncode == 0, f"{f.name}: {p.stderr}"
        what_slurm = check_slurm(f.name, cfg, p.stdout)
        # the closed systems' global batch is spread evenly: every rank the same number of images
        assert cfg["hyperparameters"]["global_batch_size"] % (cfg["launch"]["nodes"] * cfg["launch"]["ranks_per_node"]) == 0
        print(f"{f.name:30s} mpirun: {what}; slurm: {what_slurm}")

    # The multi-node EFA files: EFA through the plugin, NCCL told to use it. GPUDirect RDMA on H100
    # (p5), never on V100 (p3dn), whose send/recv path also needs NCCL's simple protocol; on p5 the
    # plugin keeps LL/LL128 for its RDMA protocol only while NCCL_PROTO is unset.
    for family, rdma, proto in (("aws-p3dn.24xlarge", "0", "simple"), ("aws-p5.48xlarge", "1", None)):
        for nodes in (2, 4, 8, 16):
            cfg = resolved(env.SOURCE_DIR / "systems" / f"{family}-{nodes}n.json")
            e = cfg["launch"]["env"]
            assert e["FI_PROVIDER"] == "efa" and e["FI_EFA_USE_DEVICE_RDMA"] == rdma, (family, nodes, e)
            assert e["NCCL_NET"] == "AWS Libfabric" and e.get("NCCL_PROTO") == proto, (family, nodes, e)
            assert cfg["launch"]["nccl_net_plugin_dir"] == "/opt/amazon/ofi-nccl/lib", (family, nodes)
            assert cfg["system"]["number_of_nodes"] == str(nodes) and cfg["launch"]["nodes"] == nodes
    assert "FI_PROVIDER" not in resolved(env.SOURCE_DIR / "systems" / "aws-p3.16xlarge-4n.json")["launch"]["env"]

    # --nodes: a one-node file on two nodes.
    p3dn = env.SOURCE_DIR / "systems" / "aws-p3dn.24xlarge.json"
    p = launch(p3dn, "--nodes", "2", "--dry-run")
    assert p.returncode == 0 and shlex.split(p.stdout)[1:3] == ["-np", "16"], p.stdout + p.stderr
    # One rank per node on a two-socket node: one rank on each node, not two on the first.
    one = ["--nodes", "2", "--set", "launch.ranks_per_node=1", "--set", "hyperparameters.global_batch_size=64"]
    cfg = resolved(p3dn, "--set", "launch.nodes=2", "--set", 'system.number_of_nodes="2"',
                   "--set", "launch.ranks_per_node=1")
    cfg["_file"] = str(p3dn)
    p = launch(p3dn, *one, "--dry-run")
    assert p.returncode == 0, p.stderr
    print(f"aws-p3dn.24xlarge, 2 nodes x 1 rank: mpirun: {check_mpirun('p3dn 2x1', cfg, shlex.split(p.stdout))}")
    assert "ppr:1:node:PE=24" in p.stdout, p.stdout
    p = launch(p3dn, *one, "--dry-run", "--scheduler", "slurm")
    assert p.returncode == 0, p.stderr
    print(f"aws-p3dn.24xlarge, 2 nodes x 1 rank: slurm: {check_slurm('p3dn 2x1', cfg, p.stdout)}")

    # Slurm's time limit and a pyxis container, from the options or NVIDIA's CONT and MOUNTS.
    for args, environ in ((["--time", "2:00:00", "--container", "nvcr.io/org/mrcnn:1", "--container-mounts",
                            "/fsx/coco:/data"], {}),
                          (["--time=2:00:00"], {"CONT": "nvcr.io/org/mrcnn:1", "MOUNTS": "/fsx/coco:/data"})):
        p = launch(p3dn, *one, "--dry-run", "--scheduler", "slurm", *args, environ=environ)
        assert p.returncode == 0, p.stderr
        assert re.search(r"^#SBATCH --time=2:00:00$", p.stdout, re.M), p.stdout
        srun = shlex.split(next(line for line in p.stdout.splitlines() if line.startswith("srun ")))
        assert "--container-image=nvcr.io/org/mrcnn:1" in srun and "--container-mounts=/fsx/coco:/data" in srun, srun
        check_slurm("p3dn 2x1 in a container", cfg, p.stdout)
    p = launch(p3dn, *one, "--dry-run", "--scheduler", "slurm")
    assert "--time" not in p.stdout and "--container" not in p.stdout, p.stdout
    print("slurm: --time and the container (options or CONT/MOUNTS) in the script; neither when not asked")

    p5 = env.SOURCE_DIR / "systems" / "aws-p5.48xlarge.json"
    refused = [
        (p3dn, ["--set", "launch.threads_per_rank=12"], "launch.threads_per_rank 12 is more than the 6 physical cores"),
        (p5, ["--set", "launch.threads_per_rank=13"], "launch.threads_per_rank 13 is more than the 12 physical cores"),
        (p3dn, ["--set", "launch.ranks_per_node=16"], "does not divide the node's 8 accelerators"),
        (env.SOURCE_DIR / "systems" / "habana-gaudi-hls1.json", ["--set", "launch.threads_per_rank=6"],
         "more than the 5 physical cores"),
        (p3dn, ["--set", 'system.host_processor_vcpu_count="95"'], "not a multiple of the node's 48 physical cores"),
        (p3dn, ["--set", 'system.number_of_nodes="2"'], "launch.nodes 1 differs from system.number_of_nodes"),
        (env.SOURCE_DIR / "systems" / "cpu-dev.json", ["--set", "launch.ranks_per_node=4", "--set",
                                                       "launch.threads_per_rank=1", "--set",
                                                       'launch.communicator="mpi"'], "more ranks than cores"),
        (env.SOURCE_DIR / "systems" / "cpu-dev.json", ["--set", "launch.ranks_per_node=2", "--set",
                                                       "launch.threads_per_rank=1"],
         'launch.communicator "local" is one process, but launch asks for 2 ranks'),
    ]
    for system, args, message in refused:
        for scheduler in ("mpirun", "slurm"):
            p = launch(system, "--dry-run", "--scheduler", scheduler, *args)
            assert p.returncode == 2 and message in p.stderr, f"{system.name} {args}: {p.returncode} {p.stderr}"
        print(f"refused: {system.name} {' '.join(args)}: {p.stderr.strip().splitlines()[-1][:150]}")

    for args, message in ((["--scheduler", "slurm", "--time", "two hours"], "--time two hours: expected"),
                          (["--scheduler", "slurm", "--time", "2:00"], "--time 2:00: expected"),  # 2 minutes to Slurm
                          (["--", "--set=launch.threads_per_rank=12"], "more than the 6 physical cores"),
                          (["--time", "1:00:00"], "are for --scheduler slurm"),
                          (["--scheduler", "slurm", "--container-mounts", "/a:/b"], "--container-mounts without a container")):
        p = launch(p3dn, "--dry-run", *args)
        assert p.returncode == 2 and message in p.stderr, (args, p.returncode, p.stderr)
    print("refused: a malformed --time, --time with mpirun, mounts without a container; "
          "train's --set=K=V shapes the launch as --set K=V does")
    # NVIDIA's MOUNTS (or CONT) in the environment is for Slurm jobs: mpirun launches ignore it.
    p = launch(p3dn, "--dry-run", environ={"MOUNTS": "/fsx:/fsx"})
    assert p.returncode == 0 and "container" not in p.stdout, p.stderr

    check_ranks_without_mpi(p3dn)

    # Without the dry run, a missing NCCL network plugin stops the launch before anything starts.
    p = launch(env.SOURCE_DIR / "systems" / "aws-p3dn.24xlarge-2n.json", "--set",
               'launch.nccl_net_plugin_dir="/nonexistent/ofi-nccl/lib"')
    assert p.returncode == 2 and "no NCCL network plugin" in p.stderr, p.stderr
    print("refused: a missing aws-ofi-nccl plugin folder")
    return 0


if __name__ == "__main__":
    sys.exit(main())
