"""A Slurm cluster on this machine, for tests: munged with a fresh key, slurmctld and slurmd from
Debian's slurm-wlm, a generated slurm.conf (the node as `slurmd -C` sees it, free ports,
task/affinity for CPU masks, PMIx for MPI), all under one scratch folder and stopped on exit.
Clients find it through SLURM_CONF (`cluster.env`). One node by default; given the hosts of a
netns_cluster.NetnsCluster, one slurmd on each host (NodeName = its host name, NodeAddr = its
address) and slurmctld on the bridge's address.

    with SlurmCluster(folder) as cluster:
        subprocess.run(["sbatch", "--wait", script], env=cluster.env)

By hand: python3 tests/e2e/slurm_cluster.py FOLDER starts one and waits (Ctrl-C stops it);
`SLURM_CONF=FOLDER/slurm.conf sinfo` shows it.
"""
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import time

DAEMONS = ("munged", "mungekey", "slurmctld", "slurmd", "sbatch", "srun", "sinfo", "scontrol")


# Every cgroup hierarchy mounted under /sys/fs/cgroup here, mounted again where `ip netns exec`
# left a bare /sys: the unified v2 tree where it is the root, else each v1 controller by name
# (and a v2 tree mounted beside them).
MOUNT_CGROUPS = (
    "if awk '$2 == \"/sys/fs/cgroup\" && $3 == \"cgroup2\" {found=1} END {exit !found}' /proc/1/mounts; "
    "then mount -t cgroup2 none /sys/fs/cgroup; else "
    "mount -t tmpfs cgroup_root /sys/fs/cgroup && "
    "awk '$2 ~ \"^/sys/fs/cgroup/\" {print $3, $2, $4}' /proc/1/mounts | "
    "while read type dir opts; do mkdir -p \"$dir\" && "
    "if [ \"$type\" = cgroup2 ]; then mount -t cgroup2 none \"$dir\"; "
    "else mount -t cgroup -o \"$(echo \"$opts\" | tr , '\\n' | grep -v -e '^rw$' -e '^relatime$' | paste -sd,)\" "
    "cgroup \"$dir\"; fi || exit 1; done; fi")


def missing_reason():
    """Why no cluster can start here, or None."""
    absent = [d for d in DAEMONS if shutil.which(d) is None]
    if absent:
        return (f"{', '.join(absent)} not installed (apt-get install slurm-wlm munge; run_scripts/bootstrap.sh --test "
                "installs them)")
    if os.geteuid() != 0:
        return "the Slurm and munge daemons of this fixture run as root (SlurmUser=root)"
    return None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class SlurmCluster:
    def __init__(self, folder, hosts=None):
        self.hosts = hosts
        self.dir = pathlib.Path(folder)
        self.conf = self.dir / "slurm.conf"
        self.env = dict(os.environ, SLURM_CONF=str(self.conf))
        self.munge_pid = self.dir / "munge" / "munged.pid"

    def _run(self, cmd, check=True):
        p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=self.env, timeout=60)
        if check and p.returncode != 0:
            raise RuntimeError(f"{' '.join(map(str, cmd))}: exit {p.returncode}: {p.stderr.strip()}")
        return p

    def __enter__(self):
        d = self.dir
        for sub in ("munge", "state", "spool", "log", "tmp"):
            (d / sub).mkdir(parents=True, exist_ok=True)
        os.chmod(d, 0o755)  # munged wants the socket's folders searchable by everyone
        os.chmod(d / "munge", 0o755)
        key, sock = d / "munge" / "munge.key", d / "munge" / "munge.sock"
        self._run(["mungekey", "--create", "--force", f"--keyfile={key}"])
        os.chmod(key, 0o600)
        self._run(["munged", "--force", f"--socket={sock}", f"--key-file={key}", f"--pid-file={self.munge_pid}",
                   f"--log-file={d / 'munge' / 'munged.log'}", f"--seed-file={d / 'munge' / 'seed'}"])
        node = self._run(["slurmd", "-C"]).stdout.splitlines()[0]  # "NodeName=vm CPUs=2 ... RealMemory=N"
        node_name = node.split()[0].split("=", 1)[1]
        controller = "127.0.0.1"
        nodes = [f"{node} NodeAddr=127.0.0.1 State=UNKNOWN"]
        if self.hosts is not None:  # every host a node with this machine's hardware
            controller = self.hosts.bridge_address
            hardware = " ".join(node.split()[1:])
            nodes = [f"NodeName={n} {hardware} NodeAddr={a} State=UNKNOWN"
                     for n, a in zip(self.hosts.names, self.hosts.addresses)]
        spool = d / "spool" / ("%n" if self.hosts is not None else "")
        self.conf.write_text("\n".join([
            "ClusterName=mrcnn-test",
            f"SlurmctldHost={node_name}({controller})",
            "SlurmUser=root", "SlurmdUser=root",
            f"SlurmctldPort={free_port()}", f"SlurmdPort={free_port()}",
            "AuthType=auth/munge", "CredType=cred/munge", f"AuthInfo=socket={sock}",
            f"StateSaveLocation={d / 'state'}", f"SlurmdSpoolDir={spool}",
            # Each node's own temporary folder (PMIx makes its step folders there; the hosts share /tmp).
            f"TmpFS={d / 'tmp' / ('%n' if self.hosts is not None else '')}",
            f"SlurmctldPidFile={d / 'slurmctld.pid'}", f"SlurmdPidFile={d / 'slurmd-%n.pid'}",
            f"SlurmctldLogFile={d / 'log' / 'slurmctld.log'}", f"SlurmdLogFile={d / 'log' / 'slurmd-%n.log'}",
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/affinity",
            "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core",
            "MpiDefault=none", "ReturnToService=2", "SchedulerType=sched/backfill",
            "KillWait=5", "MessageTimeout=20",
            # No completed job's record is purged (this cluster lives for one test): then sbatch
            # --wait polls every 2 s. It stretches its polls 2 -> 8 -> 32 s while they stay under
            # half of MinJobAge (default 300 s), so a job of 3 s returned after 10 s.
            "MinJobAge=0",
            *nodes,
            "PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO", ""]))
        try:
            self._run(["slurmctld", "-c", "-f", self.conf])
            if self.hosts is None:
                self._run(["slurmd", "-f", self.conf])
            else:
                for k, name in enumerate(self.hosts.names):
                    (d / "spool" / name).mkdir(parents=True, exist_ok=True)
                    (d / "tmp" / name).mkdir(parents=True, exist_ok=True)
                    # `ip netns exec` mounts a fresh /sys without the cgroup file systems slurmd needs:
                    # the hierarchies this machine has, mounted again (the same ones) in the host's view.
                    self._run(self.hosts.command(k, ["sh", "-c", MOUNT_CGROUPS + ' && exec "$@"', "sh",
                                                     "slurmd", "-f", self.conf]))
            self.wait_idle("did not come up")
            return self
        except BaseException:
            self.__exit__(None, None, None)
            raise

    def wait_idle(self, what="did not come back to idle", timeout=60):
        """Returns once every node is idle: after a job, its nodes are still completing for a moment
        after sbatch --wait returns, and a job submitted then gets the other nodes."""
        deadline = time.time() + timeout
        state = ""
        while time.time() < deadline:
            states = self._run(["sinfo", "-h", "-N", "-o", "%T"], check=False).stdout.split()
            state = ",".join(states)
            if states and all(s == "idle" for s in states):
                return
            time.sleep(0.2)
        raise RuntimeError(f"the Slurm nodes {what} (state '{state}'): see {self.dir / 'log'}")

    def __exit__(self, *exc):
        self._run(["scontrol", "shutdown"], check=False)
        for pid_file in (*self.dir.glob("slurmd-*.pid"), self.dir / "slurmctld.pid", self.munge_pid):
            try:
                pid = int(pid_file.read_text())
            except (OSError, ValueError):
                continue
            for _ in range(50):  # until it is gone (scontrol shutdown stops the Slurm daemons)
                try:
                    os.kill(pid, 15)
                except ProcessLookupError:
                    break
                time.sleep(0.1)
        return False


if __name__ == "__main__":
    if missing_reason():
        sys.exit(missing_reason())
    with SlurmCluster(sys.argv[1] if len(sys.argv) > 1 else "/tmp/mrcnn-slurm") as c:
        print(f"Slurm is up: SLURM_CONF={c.conf}  (Ctrl-C stops it)")
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
