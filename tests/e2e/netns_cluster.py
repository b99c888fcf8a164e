"""Separate hosts on this machine, for tests: each host a network namespace with its own eth0 (a
veth pair to one bridge), its own IPv4 address, its own host name (a UTS namespace for every
process started on it) and an /etc/hosts naming every host (`ip netns exec` mounts
/etc/netns/<namespace>/hosts over /etc/hosts). The bridge, in this machine's own namespace,
has the first address, so processes here (mpirun, a test) reach every host.

    with NetnsCluster(2) as c:
        p = c.popen(1, ["mlperf-maskrcnn", "train", ...], env=...)   # runs on host1
        c.cut_link(1)                                                 # host1's cable pulled
        c.shape(1, "1gbit")                                           # host1's link at 1 Gbit/s

Links can be cut and shaped with tbf (rate); netem (loss, delay) needs the kernel's sch_netem,
which `netem_reason()` says is absent where it is. Needs root and iproute2: `missing_reason()`.
By hand: python3 tests/e2e/netns_cluster.py N starts N hosts and waits (Ctrl-C removes them).
"""
import ctypes
import ipaddress
import json
import os
import pathlib
import random
import shutil
import signal
import subprocess
import sys
import time

# Every cluster's resources, by the pid of the process that made them: a cluster whose process died
# without cleaning up (killed by a test timeout) is removed by the next one.
STATE = pathlib.Path("/run/mrcnn-netns")


def _ip(*args, check=True):
    p = subprocess.run(["ip", *map(str, args)], capture_output=True, text=True, timeout=30)
    if check and p.returncode != 0:
        raise RuntimeError(f"ip {' '.join(map(str, args))}: {p.stderr.strip()}")
    return p


def _die_with_parent():
    """preexec_fn: the child is killed when the test process dies (a timeout's SIGKILL included)."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _remove(state):
    for ns in state.get("namespaces", []):
        pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split()
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        _ip("netns", "del", ns, check=False)
        shutil.rmtree(pathlib.Path("/etc/netns") / ns, ignore_errors=True)
    if state.get("bridge"):
        _ip("link", "del", state["bridge"], check=False)


def sweep_stale():
    """Removes the clusters of processes that no longer run."""
    for f in STATE.glob("*.json") if STATE.is_dir() else []:
        try:
            state = json.loads(f.read_text())
            os.kill(int(state["pid"]), 0)
            continue  # its owner still runs
        except ProcessLookupError:
            pass
        except (ValueError, KeyError, OSError):
            pass
        _remove(state if isinstance(state, dict) else {})
        f.unlink(missing_ok=True)


def _free_subnet():
    """A /24 of 198.18.0.0/15 (set aside for network tests) that no route of this machine covers."""
    routes = subprocess.run(["ip", "-4", "route", "show"], capture_output=True, text=True).stdout.split("\n")
    taken = [ipaddress.ip_network(r.split()[0], strict=False) for r in routes if r and r.split()[0][0].isdigit()]
    for _ in range(100):
        net = ipaddress.ip_network(f"198.{18 + random.randrange(2)}.{random.randrange(256)}.0/24")
        if not any(net.overlaps(t) for t in taken):
            return net
    raise RuntimeError("no free /24 in 198.18.0.0/15 for the test hosts")


def missing_reason():
    """Why no hosts can be made here, or None."""
    if shutil.which("ip") is None or shutil.which("unshare") is None:
        return "iproute2 or util-linux (ip, unshare) not installed"
    if os.geteuid() != 0:
        return "network namespaces need root (CI runs as root)"
    probe = f"mrcnn-probe-{os.getpid()}"
    p = _ip("netns", "add", probe, check=False)
    if p.returncode != 0:
        return f"the kernel refuses network namespaces here: {p.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


class NetnsCluster:
    def __init__(self, hosts):
        self.n = hosts
        tag = f"{random.randrange(16 ** 6):06x}"  # random: concurrent clusters never share a name
        self.bridge = f"mrb{tag}"
        self.namespaces = [f"mrcnn-{tag}-h{k}" for k in range(hosts)]
        self.names = [f"host{k}" for k in range(hosts)]
        self._veths = [f"mrv{tag}h{k}" for k in range(hosts)]  # the bridge's ends (15 characters at most)
        self._state = STATE / f"{tag}.json"

    def __enter__(self):
        sweep_stale()
        net = _free_subnet()
        self.subnet = str(net)  # e.g. "198.18.7.0/24"
        hosts = list(net.hosts())
        self.bridge_address = str(hosts[0])
        self.addresses = [str(hosts[9 + k]) for k in range(self.n)]
        STATE.mkdir(parents=True, exist_ok=True)
        # Written before anything is made: what a later sweep removes if this process dies.
        self._state.write_text(json.dumps({"pid": os.getpid(), "namespaces": self.namespaces, "bridge": self.bridge}))
        try:
            _ip("link", "add", self.bridge, "type", "bridge")
            _ip("addr", "add", f"{self.bridge_address}/24", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
            hosts = "127.0.0.1 localhost\n" + "".join(f"{a} {n}\n" for a, n in zip(self.addresses, self.names))
            for ns, veth, address in zip(self.namespaces, self._veths, self.addresses):
                _ip("netns", "add", ns)
                etc = pathlib.Path("/etc/netns") / ns
                etc.mkdir(parents=True, exist_ok=True)
                (etc / "hosts").write_text(hosts)
                _ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
                _ip("link", "set", veth, "master", self.bridge, "up")
                _ip("-n", ns, "addr", "add", f"{address}/24", "dev", "eth0")
                _ip("-n", ns, "link", "set", "eth0", "up")
                _ip("-n", ns, "link", "set", "lo", "up")
            return self
        except BaseException:
            self.__exit__(None, None, None)
            raise

    def __exit__(self, *exc):
        _remove({"namespaces": self.namespaces, "bridge": self.bridge})  # whatever runs on a host goes with it
        self._state.unlink(missing_ok=True)
        return False

    def command(self, k, argv):
        """argv run on host k: in its network namespace, with its own host name."""
        return ["ip", "netns", "exec", self.namespaces[k], "unshare", "--uts", "sh", "-c",
                'hostname "$0" && exec "$@"', self.names[k], *map(str, argv)]

    def popen(self, k, argv, **kw):
        return subprocess.Popen(self.command(k, argv), preexec_fn=_die_with_parent, **kw)

    def run(self, k, argv, **kw):
        return subprocess.run(self.command(k, argv), preexec_fn=_die_with_parent, **kw)

    def cut_link(self, k):
        """Host k's cable pulled: its bridge port down (nothing is sent or received, no reset)."""
        _ip("link", "set", self._veths[k], "down")

    def restore_link(self, k):
        _ip("link", "set", self._veths[k], "up")

    def shape(self, k, rate):
        """Host k's outgoing traffic at `rate` ("1gbit"), by a token bucket on its eth0."""
        burst = "256kb"
        p = subprocess.run(["ip", "netns", "exec", self.namespaces[k], "tc", "qdisc", "replace", "dev", "eth0",
                            "root", "tbf", "rate", rate, "burst", burst, "latency", "100ms"],
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"tc tbf on {self.names[k]}: {p.stderr.strip()}")

    def unshape(self, k):
        subprocess.run(["ip", "netns", "exec", self.namespaces[k], "tc", "qdisc", "del", "dev", "eth0", "root"],
                       capture_output=True)

    def netem_reason(self):
        """Why loss and delay (tc netem) cannot be set here, or None."""
        p = subprocess.run(["ip", "netns", "exec", self.namespaces[0], "tc", "qdisc", "add", "dev", "lo", "root",
                            "netem", "delay", "1ms"], capture_output=True, text=True)
        if p.returncode != 0:
            return f"tc netem: {p.stderr.strip()} (the kernel has no sch_netem)"
        subprocess.run(["ip", "netns", "exec", self.namespaces[0], "tc", "qdisc", "del", "dev", "lo", "root"])
        return None


if __name__ == "__main__":
    reason = missing_reason()
    if reason:
        sys.exit(f"cannot start hosts: {reason}")
    with NetnsCluster(int(sys.argv[1]) if len(sys.argv) > 1 else 2) as c:
        for ns, name, address in zip(c.namespaces, c.names, c.addresses):
            print(f"{name}: {address} (ip netns exec {ns} ...)")
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
