"""trace_summary.py's allocator figures: from a trace recorded with profile_memory, per device, the
peaks within the steps, what was allocated and reserved at the end of each mrcnn:: stage, and
the ops that allocated the most (a trace_summary.Trace in, a dict out)."""
import bisect
import collections
import statistics


def memory_summary(tr):
    """The allocator's figures in a trace recorded with profile_memory, per device: the peaks
    within the steps, what was allocated and reserved when mrcnn::forward, mrcnn::backward and
    mrcnn::optimizer ended, and the ops that allocated the most."""
    devices = {}
    by_op = collections.defaultdict(lambda: collections.defaultdict(lambda: [0, 0]))
    events = sorted(tr.memory, key=lambda m: m[0])
    for ts, pid, tid, a in events:
        if tr.step_of(ts) is None:
            continue
        dev = f"{'cuda' if a.get('Device Type') == 1 else 'cpu'}:{a.get('Device Id', -1)}"
        d = devices.setdefault(dev, {"peak_allocated_mb": 0.0, "peak_reserved_mb": 0.0, "at_scope_end": {}})
        d["peak_allocated_mb"] = max(d["peak_allocated_mb"], a.get("Total Allocated", 0) / 2**20)
        d["peak_reserved_mb"] = max(d["peak_reserved_mb"], a.get("Total Reserved", 0) / 2**20)
        if a.get("Bytes", 0) > 0:
            key = (pid, tid)
            op = tr.innermost(ts, tr.is_op, thread=key) if key in tr.threads else None
            o = by_op[dev][op.name if op else "(no op)"]
            o[0] += 1
            o[1] += a["Bytes"]
    stamps = [m[0] for m in events]
    for name in ("mrcnn::forward", "mrcnn::backward", "mrcnn::optimizer"):
        ends = [h.end for h in tr.host if h.name == name and h.step is not None]
        for dev, d in devices.items():
            at = []
            for end in ends:
                for j in range(bisect.bisect_right(stamps, end) - 1, -1, -1):
                    ts, _, _, a = events[j]
                    if f"{'cuda' if a.get('Device Type') == 1 else 'cpu'}:{a.get('Device Id', -1)}" == dev:
                        at.append((a.get("Total Allocated", 0) / 2**20, a.get("Total Reserved", 0) / 2**20))
                        break
            if at:
                d["at_scope_end"][name] = {"allocated_mb": statistics.median(x[0] for x in at),
                                           "reserved_mb": statistics.median(x[1] for x in at)}
    n = len(tr.steps)
    for dev, d in devices.items():
        d["top_allocating_ops"] = [{"op": op, "allocations_per_step": c / n, "mb_per_step": b / n / 2**20}
                                   for op, (c, b) in sorted(by_op[dev].items(), key=lambda kv: -kv[1][1])[:15]]
    return devices
