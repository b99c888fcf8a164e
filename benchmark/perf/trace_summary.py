#!/usr/bin/env python3
"""Where the time of consecutive training steps goes, from a Kineto (Chrome) trace: one side, or
ours beside torchvision's. JSON and the standard library only: the tables of a GPU visit can be
recomputed from its traces on any machine, later.

A step is one complete event named mrcnn::train_step (bench_model_train_step --mrcnn_trace_steps
and compare_model_train_step.py's worker --trace-steps mark each profiled step so). Per step, and
as medians over the steps:
  - wall time; GPU busy time: the union of kernel, memcpy and memset intervals over all streams
    within the step; idle time; the 15 largest idle gaps, each with the host op and the mrcnn::
    scope running when it opened and the kernel that closed it;
  - kernel launches (cudaLaunchKernel*, cuLaunchKernel*, cudaGraphLaunch) and host syncs
    (cuda/cu *Synchronize, synchronous cudaMemcpy), each sync with its wait and the op that waited;
  - ATen ops (aten::*): all, and top-level only (not inside another aten:: op on the same thread);
  - the host's time from the end of the last read of the device (the mrcnn::read scope) to the
    backward's start (mrcnn::backward): what a GPU waits for after the step's blocking read;
  - the kernels: per name a category (CATEGORIES), calls, total/mean/min/max us, streams, scopes;
  - host us and GPU us per mrcnn:: scope: a kernel counts toward the scopes around its launch,
    which Kineto ties to it by a correlation id (args "correlation", or its "ac2g" flow events);
  - the convolution shapes (with record_shapes): time per direction and TFLOP/s;
  - CPU self time of the host ops on the step's critical host path (SELF_TIME_OPS) and the top
    ops by self time;
  - from a trace recorded with profile_memory: the allocator's figures (memory_summary).
Steps are cut by the host's step events; a kernel belongs to the step whose interval holds its
launch. A trace without GPU activity (a CPU run) says so, and its GPU figures are None.

Usage: trace_summary.py TRACE [--label ours] [--compare TRACE2 --compare-label torchvision]
           [--json OUT] [--text OUT] [--step NAME]
TRACE may be gzipped. The text goes to stdout unless --text names a file; its PROFILE lines hold
the headline figures, one line per side.
"""
import argparse
import bisect
import collections
import gzip
import json
import pathlib
import re
import statistics
import sys
import zlib

from trace_memory import memory_summary  # noqa: F401  (re-exported)
from trace_text import TOP_GAPS, TOP_KERNELS, headline, text  # noqa: F401  (text re-exported)

STEP = "mrcnn::train_step"
SCOPE_PREFIX = "mrcnn::"
READ_SCOPE, BACKWARD_SCOPE = "mrcnn::read", "mrcnn::backward"
HOST_CATS = {"cpu_op", "operator", "user_annotation"}
RUNTIME_CATS = {"cuda_runtime", "cuda_driver", "runtime"}
GPU_CATS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "memcpy": "memcpy",
            "gpu_memset": "memset", "memset": "memset"}
LAUNCH = re.compile(r"^(cudaLaunchKernel|cuLaunchKernel|cudaLaunchCooperativeKernel|cudaGraphLaunch|cuGraphLaunch)")
# Calls that block the host until the device catches up. cudaMemcpyAsync is not one by itself: a
# copy to pageable host memory is followed by the cudaStreamSynchronize that waits for it.
SYNC = re.compile(r"^(cuda(Stream|Device|Event)Synchronize|cu(Stream|Ctx|Event)Synchronize"
                  r"|cudaMemcpy(2D|3D)?|cuMemcpy(DtoH|HtoD|DtoD)?(_v2)?)$")
# The host ops whose CPU time the step's host path is made of (draws, compactions, gathers, the
# autograd engine's per-node work); a name ending in ":" is a prefix.
SELF_TIME_OPS = ("aten::randperm", "aten::nonzero_static", "aten::nonzero", "aten::index_select",
                 "autograd::engine::evaluate_function:")
GAP_LIST_US = 20.0     # the JSON lists every idle gap longer than this, per step ...
GAP_LIST_MAX = 500     # ... up to this many, the longest
CONV_OPS = ("aten::convolution", "aten::convolution_backward")

# Kernel categories, first match wins (case-insensitive search in the kernel's name). Order
# matters: cuDNN's dgrad/wgrad kernels are implicit GEMMs too, and the optimizer's foreach
# kernels are elementwise.
CATEGORIES = [
    ("optimizer", r"multi_tensor_apply|_foreach_|fused_sgd|sgd_|adam|lamb_|non_finite_check_and_unscale"
                  r"|amp_update_scale|unscale"),
    ("conv dgrad", r"dgrad|backward_data|bwd_data|convolvebackwarddata"),
    ("conv wgrad", r"wgrad|backward_filter|bwd_filter|backward_weight|convolvebackwardfilter"),
    ("conv fprop", r"fprop|implicit_convolve|explicit_convolve|convolve_common|conv2d|convolution"
                   r"|winograd|fft2d|cudnn_infer|\bconv_"),
    ("layout transpose", r"nchwtonhwc|nhwctonchw|nchw_to_nhwc|nhwc_to_nchw|transpose|permute"),
    ("gemm", r"gemm|gemv|cublas|cutlass|splitkreduce|matmul|\bdot_kernel"),
    ("roi_align", r"roi_?align|roi_?pool|map_levels"),
    ("nms/proposals", r"nms|proposal|decode_kernel|anchor|box_iou|clip_boxes|batched_nms"),
    ("mask targets/paste", r"mask_targets|paste"),
    ("sort/topk/scan", r"sort|topk|radix|scan|select_k|unique|randperm"),
    ("index/gather/scatter", r"index|gather|scatter|masked_select|nonzero|embedding"),
    ("cast/copy", r"copy|catarray|cat_|_to_copy|memcpy|convert|cast"),
    ("reduction", r"reduce|reduction|softmax|norm|welford|moments|sum_|mean|nll_loss|cross_entropy"
                  r"|argmax|argmin|max_|min_|cumsum|binary_cross_entropy|smooth_l1"),
    ("elementwise", r"elementwise|pointwise|functor|fill|add_|mul_|div_|threshold|relu|sigmoid|clamp"
                    r"|where|exp|log|sqrt|abs|neg"),
]
_CATEGORIES = [(c, re.compile(p, re.I)) for c, p in CATEGORIES]


class TraceError(Exception):
    """A trace that cannot be read: the message names the file."""


def category(name, kind="kernel"):
    """A GPU activity's category: memset and memcpy by their kind, kernels by CATEGORIES."""
    if kind == "memset":
        return "memset"
    if kind == "memcpy":
        return "cast/copy"
    for c, rx in _CATEGORIES:
        if rx.search(name):
            return c
    return "other"


class Event:
    __slots__ = ("name", "cat", "kind", "pid", "tid", "ts", "dur", "end", "args", "parent",
                 "child_us", "in_aten", "step")

    def __init__(self, name, cat, kind, pid, tid, ts, dur, args):
        self.name, self.cat, self.kind = name, cat, kind
        self.pid, self.tid, self.ts, self.dur, self.end = pid, tid, ts, dur, ts + dur
        self.args = args
        self.parent, self.child_us, self.in_aten, self.step = None, 0.0, False, None


def load(path):
    """The trace's event list; plain or gzipped JSON, a {"traceEvents": [...]} object or a list."""
    path = pathlib.Path(path)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise TraceError(f"{path}: cannot read it: {e.strerror or e}") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as e:
            raise TraceError(f"{path}: not a readable gzip file: {e}") from None
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise TraceError(f"{path}: not a JSON trace: {e}") from None
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list):
        raise TraceError(f"{path}: not a Chrome trace (no traceEvents list)")
    return events


def _number(path, i, e, key):
    v = e.get(key)
    if isinstance(v, str):
        try:
            v = float(v)
        except ValueError:
            v = None
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        raise TraceError(f"{path}: event {i} ({e.get('name', '?')!r}) has no numeric {key!r}")
    return float(v)


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def union(intervals):
    """Sorted, merged [start, end) intervals."""
    out = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


class Trace:
    def __init__(self, path, step_name=STEP):
        self.path = pathlib.Path(path)
        events = load(path)
        self.host, self.runtime, self.gpu, self.memory = [], [], [], []
        flows_s, flows_f = {}, {}
        for i, e in enumerate(events):
            if not isinstance(e, dict):
                raise TraceError(f"{path}: event {i} is not a JSON object")
            ph, cat = e.get("ph"), str(e.get("cat", "")).lower()
            if ph == "X":
                if cat in HOST_CATS:
                    kind, into = "host", self.host
                elif cat in RUNTIME_CATS:
                    kind, into = "runtime", self.runtime
                elif cat in GPU_CATS:
                    kind, into = GPU_CATS[cat], self.gpu
                else:
                    continue
                args = e.get("args") if isinstance(e.get("args"), dict) else {}
                into.append(Event(str(e.get("name", "")), cat, kind, e.get("pid"), e.get("tid"),
                                  _number(path, i, e, "ts"), max(0.0, _number(path, i, e, "dur")), args))
            elif ph in ("s", "f") and cat == "ac2g" and "id" in e:
                (flows_s if ph == "s" else flows_f)[e["id"]] = (e.get("pid"), e.get("tid"), _number(path, i, e, "ts"))
            elif ph == "i" and e.get("name") == "[memory]" and isinstance(e.get("args"), dict):
                self.memory.append((_number(path, i, e, "ts"), e.get("pid"), e.get("tid"), e["args"]))
        self.steps = sorted((h for h in self.host if h.name == step_name), key=lambda s: s.ts)
        if not self.steps:
            raise TraceError(f"{self.path}: no {step_name!r} events: not a trace of marked training steps "
                             f"(bench_model_train_step --mrcnn_trace_steps, or the worker's --trace-steps)")
        for a, b in zip(self.steps, self.steps[1:]):
            if b.ts < a.end:
                raise TraceError(f"{self.path}: {step_name!r} events overlap (at ts {b.ts}): steps must be consecutive")
        self._starts = [s.ts for s in self.steps]
        self._nest()
        self._link(flows_s, flows_f)
        for e in self.host + self.runtime:
            e.step = self.step_of(e.ts)
        for k in self.gpu:
            launch = k.args.get("_launch")
            k.step = launch.step if launch is not None else self.step_of(k.ts)

    def step_of(self, t):
        i = bisect.bisect_right(self._starts, t) - 1
        return i if i >= 0 and t < self.steps[i].end else None

    def _nest(self):
        """Each host and runtime event's parent on its thread (the innermost event around it), the
        time of its child ops (for self time) and whether it runs inside an aten:: op."""
        by_thread = collections.defaultdict(list)
        for e in self.host + self.runtime:
            by_thread[(e.pid, e.tid)].append(e)
        self.threads = {}
        for key, evs in by_thread.items():
            evs.sort(key=lambda e: (e.ts, -e.dur))
            stack = []
            for e in evs:
                while stack and stack[-1].end <= e.ts:
                    stack.pop()
                if stack:
                    p = e.parent = stack[-1]
                    e.in_aten = p.in_aten or (p.kind == "host" and p.name.startswith("aten::"))
                    if e.kind == "host" and p.kind == "host":
                        p.child_us += e.dur
                stack.append(e)
            self.threads[key] = (evs, [e.ts for e in evs])

    def _link(self, flows_s, flows_f):
        """Each GPU event's launch: the runtime call with its correlation id, else the one its
        ac2g flow starts at."""
        by_corr = {e.args["correlation"]: e for e in self.runtime if "correlation" in e.args}
        by_place = {(e.pid, e.tid, e.ts): e for e in self.runtime}
        flow_at = {v: k for k, v in flows_f.items()}
        for k in self.gpu:
            launch = by_corr.get(k.args.get("correlation"))
            if launch is None:
                fid = flow_at.get((k.pid, k.tid, k.ts))
                if fid is not None and fid in flows_s:
                    launch = by_place.get(flows_s[fid])
            k.args["_launch"] = launch

    def innermost(self, t, want, thread=None):
        """The innermost event running at time t that `want` accepts: on `thread`, or, over all
        threads, the one that started last (the host's most specific activity then)."""
        best = None
        keys = [thread] if thread is not None else self.threads
        for key in keys:
            evs, starts = self.threads[key]
            i = bisect.bisect_right(starts, t) - 1
            e = evs[i] if i >= 0 else None
            while e is not None and not (e.end > t and want(e)):
                e = e.parent
            if e is not None and (best is None or e.ts > best.ts):
                best = e
        return best

    @staticmethod
    def is_op(e):
        return e.kind == "host"

    @staticmethod
    def is_scope(e):
        return e.kind == "host" and e.name.startswith(SCOPE_PREFIX)

    def scope_chain(self, t):
        """The mrcnn:: scopes around time t, innermost first."""
        s = self.innermost(t, self.is_scope)
        chain = []
        while s is not None:
            if self.is_scope(s) and s.end > t:
                chain.append(s.name)
            s = s.parent
        return chain

    def op_of(self, e):
        """The host op that issued a runtime call (its innermost host parent)."""
        p = e.parent
        while p is not None and p.kind != "host":
            p = p.parent
        return p


def _conv_shape(op):
    """(key, GFLOP of one direction, output mask) of an aten::convolution(_backward) with
    record_shapes, or None: 2 FLOPs per multiply-add, N*K*P*Q*(C/groups)*R*S of them."""
    dims, concrete = op.args.get("Input Dims"), op.args.get("Concrete Inputs")
    if not isinstance(dims, list) or not isinstance(concrete, list):
        return None

    def pair(text):   # a one-element list (C++ callers pass {1}) means both dimensions
        v = json.loads(text)
        return v * 2 if len(v) == 1 else v
    try:
        if op.name == "aten::convolution":
            x, w = dims[0], dims[1]
            stride, pad, dil = (pair(concrete[i]) for i in (3, 4, 5))
            groups, mask = int(concrete[8]), [True, True, True]
            if len(x) != 4 or concrete[6] == "True":   # 2-D, not transposed
                return None
            out_hw = [(x[2 + i] + 2 * pad[i] - dil[i] * (w[2 + i] - 1) - 1) // stride[i] + 1 for i in (0, 1)]
            types = op.args.get("Input type", [""])
        else:
            g, x, w = dims[0], dims[1], dims[2]
            stride, pad = pair(concrete[4]), pair(concrete[5])
            groups, mask = int(concrete[9]), json.loads(concrete[10].lower())
            if len(x) != 4 or concrete[7] == "True":
                return None
            out_hw = g[2:4]
            types = op.args.get("Input type", ["", ""])[1:]
    except (ValueError, IndexError, TypeError):
        return None
    n, c, h, wd = x
    k, _, r, s = w
    flops = 2 * n * k * out_hw[0] * out_hw[1] * (c // max(groups, 1)) * r * s
    strides = op.args.get("Input Strides") or []
    xs = strides[1 if op.name != "aten::convolution" else 0] if len(strides) > 1 else []
    layout = "nhwc" if len(xs) == 4 and xs[1] == 1 and c > 1 else "nchw"
    key = (f"{n}x{c}x{h}x{wd} * {k}x{c // max(groups, 1)}x{r}x{s} s{stride[0]} p{pad[0]}"
           + (f" g{groups}" if groups != 1 else "") + f" {types[0] if types else ''} {layout}").strip()
    return key, flops / 1e9, mask


def _step_gaps(s, inside):
    """Step s's idle (start, end) gaps between its busy intervals `inside`, in time order."""
    gaps, t = [], s.ts
    for a, b in inside + [(s.end, s.end)]:
        if a > t:
            gaps.append((t, a))
        t = max(t, b)
    return gaps


def _describe_gap(tr, s, a, b, gpu_starts):
    """An idle gap's row: start, length, host op and scope then, the kernel closing it and its launching op."""
    op = tr.innermost(a, tr.is_op)
    chain = tr.scope_chain(a)
    nxt = min(gpu_starts.get(b, []), key=lambda k: k.dur, default=None)
    launch = nxt.args["_launch"] if nxt is not None else None
    lop = tr.op_of(launch) if launch is not None else None
    return {"start_us": a - s.ts, "us": b - a, "op": op.name if op else None,
            "scope": chain[0] if chain else None,
            "next_kernel": nxt.name if nxt is not None else None,
            "next_launch_op": lop.name if lop is not None else None}


def _gpu_time(tr):
    """Per step, a dict of GPU busy and idle us and its largest idle gaps (None and none without GPU activity)."""
    if not tr.gpu:
        return [dict(gpu_busy_us=None, gpu_idle_us=None, top_gaps=[], idle_gaps=[]) for _ in tr.steps]
    # The union over all streams, within the step's wall interval.
    merged = union((k.ts, k.end) for k in tr.gpu)
    gpu_starts = collections.defaultdict(list)
    for k in tr.gpu:
        gpu_starts[k.ts].append(k)
    out = []
    for s in tr.steps:
        inside = [(max(a, s.ts), min(b, s.end)) for a, b in merged if b > s.ts and a < s.end]
        busy = sum(b - a for a, b in inside)
        described = []
        for a, b in sorted(_step_gaps(s, inside), key=lambda g: g[0] - g[1])[:GAP_LIST_MAX]:
            if b - a <= GAP_LIST_US and len(described) >= TOP_GAPS:
                break
            described.append(_describe_gap(tr, s, a, b, gpu_starts))
        out.append(dict(gpu_busy_us=busy, gpu_idle_us=s.dur - busy, top_gaps=described[:TOP_GAPS],
                        idle_gaps=[g for g in described if g["us"] > GAP_LIST_US]))
    return out


def _runtime_calls(tr, n):
    """Per step, its kernel launches (a Counter by call) and its host syncs (a row each, with the op that waited)."""
    launches = [collections.Counter() for _ in range(n)]
    syncs = [[] for _ in range(n)]
    for e in tr.runtime:
        if e.step is None:
            continue
        if LAUNCH.match(e.name):
            launches[e.step][e.name] += 1
        elif SYNC.match(e.name):
            op = tr.op_of(e)
            chain = tr.scope_chain(e.ts)
            syncs[e.step].append({"name": e.name, "start_us": e.ts - tr.steps[e.step].ts, "us": e.dur,
                                  "op": op.name if op else None, "scope": chain[0] if chain else None})
    return launches, syncs


def _runtime_figures(tr, launches, syncs):
    """Per step, a dict of its launch and sync counts, wait and rows (counts None without runtime events)."""
    counted = bool(tr.gpu) or bool(tr.runtime)
    return [dict(launches=sum(lc.values()) if counted else None, launches_by_name=dict(lc),
                 syncs=len(sl) if counted else None,
                 sync_wait_us=sum(x["us"] for x in sl) if counted else None, sync_list=sl)
            for lc, sl in zip(launches, syncs)]


def _host_ops(tr):
    """The steps' host ops (not annotations) by name: [calls, total us, self us]."""
    ops = collections.defaultdict(lambda: [0, 0.0, 0.0])
    for e in tr.host:
        if e.step is None or e.cat == "user_annotation":
            continue
        o = ops[e.name]
        o[0] += 1
        o[1] += e.dur
        o[2] += max(0.0, e.dur - e.child_us)
    return ops


def _aten_counts(tr, n):
    """Per step, a dict of its ATen op count: all, and top-level only (not inside another)."""
    aten_all, aten_top = [0] * n, [0] * n
    for e in tr.host:
        if e.step is None or e.cat == "user_annotation" or not e.name.startswith("aten::"):
            continue
        aten_all[e.step] += 1
        aten_top[e.step] += not e.in_aten
    return [dict(aten_ops=a, aten_ops_top_level=t) for a, t in zip(aten_all, aten_top)]


def _after_read(tr, n):
    """Per step, the host's time from the end of its last read of the device before the backward
    (the last mrcnn::read scope; the step's blocking one on a GPU) to the backward's start
    (mrcnn::backward): the host work a GPU waits for after that read. None where a step has
    neither scope."""
    reads, backward = [[] for _ in range(n)], [None] * n
    for e in tr.host:
        if e.step is None:
            continue
        if e.name == READ_SCOPE:
            reads[e.step].append(e.end)
        elif e.name == BACKWARD_SCOPE and (backward[e.step] is None or e.ts < backward[e.step]):
            backward[e.step] = e.ts
    out = []
    for ends, start in zip(reads, backward):
        before = [t for t in ends if start is not None and t <= start]
        out.append({"host_after_read_us": start - max(before) if before else None})
    return out


def _scope_host_time(tr, has_gpu):
    """The mrcnn:: scopes by name: calls and host us in the steps; GPU us and kernels 0 (None without GPU)."""
    scopes = collections.defaultdict(lambda: {"calls": 0, "host_us": 0.0, "gpu_us": 0.0 if has_gpu else None,
                                              "kernels": 0 if has_gpu else None})
    for e in tr.host:
        if e.step is not None and e.name.startswith(SCOPE_PREFIX):
            scopes[e.name]["calls"] += 1
            scopes[e.name]["host_us"] += e.dur
    return scopes


def _placed_gpu(tr):
    """The steps' GPU events, each as (event, its launch or None, the mrcnn:: scopes around the launch)."""
    placed = []
    for k in tr.gpu:
        if k.step is None:
            continue
        launch = k.args["_launch"]
        placed.append((k, launch, tr.scope_chain(launch.ts if launch is not None else k.ts)))
    return placed


def _scope_gpu_time(scopes, placed):
    """`scopes` with each GPU event's time (and kernel count) added to every scope around its launch."""
    for k, _, chain in placed:
        for name in dict.fromkeys(chain):
            scopes[name]["gpu_us"] += k.dur
            scopes[name]["kernels"] += k.kind == "kernel"
    return scopes


def _kernel_totals(placed):
    """The GPU events by name: kind, category, calls, total/min/max us, streams and innermost scopes."""
    kernels = {}
    for k, _, chain in placed:
        r = kernels.get(k.name)
        if r is None:
            r = kernels[k.name] = {"name": k.name, "kind": k.kind, "category": category(k.name, k.kind),
                                   "calls": 0, "total_us": 0.0, "min_us": k.dur, "max_us": k.dur,
                                   "streams": collections.Counter(), "scopes": collections.Counter()}
        r["calls"] += 1
        r["total_us"] += k.dur
        r["min_us"], r["max_us"] = min(r["min_us"], k.dur), max(r["max_us"], k.dur)
        r["streams"][str(k.args.get("stream", k.tid))] += 1
        r["scopes"][chain[0] if chain else "(none)"] += 1
    return kernels


def _kernel_rows(kernels, n):
    """The kernel table's rows, per step and per call, largest total first."""
    return [{"name": r["name"], "category": r["category"], "kind": r["kind"],
             "calls_per_step": r["calls"] / n, "total_us_per_step": r["total_us"] / n,
             "mean_us": r["total_us"] / r["calls"], "min_us": r["min_us"], "max_us": r["max_us"],
             "streams": dict(r["streams"]), "scopes": dict(r["scopes"].most_common())}
            for r in sorted(kernels.values(), key=lambda r: -r["total_us"])]


def _categories(kernels, kernel_rows, n):
    """The kernel categories, largest first: calls and us per step, distinct kernels, share of the GPU time."""
    total_gpu = sum(r["total_us"] for r in kernels.values())
    categories = collections.defaultdict(lambda: {"calls_per_step": 0.0, "us_per_step": 0.0, "distinct_kernels": 0})
    for r in kernel_rows:
        c = categories[r["category"]]
        c["calls_per_step"] += r["calls_per_step"]
        c["us_per_step"] += r["total_us_per_step"]
        c["distinct_kernels"] += 1
    for c in categories.values():
        c["share"] = c["us_per_step"] * n / total_gpu if total_gpu else None
    return dict(sorted(categories.items(), key=lambda kv: -kv[1]["us_per_step"]))


def _conv_kernels(placed):
    """The GPU events launched inside each convolution op: {id(op): (op, [events])}."""
    conv_ops = {}
    for k, launch, _ in placed:
        if launch is None:
            continue
        p = launch.parent
        while p is not None and p.name not in CONV_OPS:
            p = p.parent
        if p is not None:
            conv_ops.setdefault(id(p), (p, []))[1].append(k)
    return conv_ops


def _conv_totals(tr, conv_ops):
    """The steps' convolutions by shape: calls and host us per direction, their kernels' GPU us and engines."""
    convs = {}
    for e in tr.host:
        if e.step is None or e.name not in CONV_OPS:
            continue
        shape = _conv_shape(e)
        if shape is None:
            continue
        key, gflop, mask = shape
        c = convs.setdefault(key, {"shape": key, "gflop": gflop, "fwd_calls": 0, "bwd_calls": 0,
                                   "fwd_host_us": 0.0, "bwd_host_us": 0.0, "dgrad_calls": 0, "wgrad_calls": 0,
                                   "gpu_us": collections.Counter(),
                                   "engines": collections.defaultdict(collections.Counter)})
        fwd = e.name == "aten::convolution"
        c["fwd_calls" if fwd else "bwd_calls"] += 1
        c["fwd_host_us" if fwd else "bwd_host_us"] += e.dur
        if not fwd:
            c["dgrad_calls"] += bool(mask[0])
            c["wgrad_calls"] += bool(mask[1])
        for k in conv_ops.get(id(e), (None, []))[1]:
            cat = category(k.name, k.kind)
            direction = "fprop" if fwd else {"conv dgrad": "dgrad", "conv wgrad": "wgrad"}.get(cat, "bwd other")
            c["gpu_us"][direction] += k.dur
            if cat.startswith("conv") or cat == "gemm":
                c["engines"][direction][k.name] += 1
    return convs


def _conv_row(c, n, has_gpu):
    """One shape's row: calls and host us per step; GPU us, TFLOP/s, engines per direction (or host GFLOP/s)."""
    row = {"shape": c["shape"], "gflop_per_direction": c["gflop"],
           "fwd_calls_per_step": c["fwd_calls"] / n, "bwd_calls_per_step": c["bwd_calls"] / n,
           "fwd_host_us_per_step": c["fwd_host_us"] / n, "bwd_host_us_per_step": c["bwd_host_us"] / n}
    if has_gpu:
        work = {"fprop": c["fwd_calls"], "dgrad": c["dgrad_calls"], "wgrad": c["wgrad_calls"]}
        for d in ("fprop", "dgrad", "wgrad", "bwd other"):
            us = c["gpu_us"].get(d, 0.0)
            row[f"{d}_gpu_us_per_step"] = us / n
            if d in work:
                # 1 GFLOP per us is 1000 TFLOP/s.
                row[f"{d}_tflops"] = c["gflop"] * work[d] / us * 1e3 if us and work[d] else None
                row[f"{d}_engines"] = [name for name, _ in c["engines"][d].most_common(3)]
    else:   # the host's rate: the whole op, forward and backward
        fl = c["gflop"] * (c["fwd_calls"] + c["dgrad_calls"] + c["wgrad_calls"])
        us = c["fwd_host_us"] + c["bwd_host_us"]
        row["host_gflops"] = fl / us * 1e6 if us else None
    return row


def _conv_rows(convs, n, has_gpu):
    """The convolution table's rows, the most GPU time (else host time) first."""
    conv_rows = [_conv_row(c, n, has_gpu) for c in convs.values()]
    directions = ("fprop", "dgrad", "wgrad", "bwd other")
    conv_rows.sort(key=lambda r: -(sum(r.get(f"{d}_gpu_us_per_step", 0.0) for d in directions)
                                   or r["fwd_host_us_per_step"] + r["bwd_host_us_per_step"]))
    return conv_rows


def _self_time(ops, n):
    """The SELF_TIME_OPS (a prefix's ops together): calls, total and self us per step."""
    self_time = {}
    for want in SELF_TIME_OPS:
        rows = [(name, o) for name, o in ops.items() if (name.startswith(want) if want.endswith(":") else name == want)]
        self_time[want.rstrip(":")] = {"calls_per_step": sum(o[0] for _, o in rows) / n,
                                       "total_us_per_step": sum(o[1] for _, o in rows) / n,
                                       "self_us_per_step": sum(o[2] for _, o in rows) / n}
    return self_time


def _top_host_ops(ops, n):
    """The TOP_KERNELS host ops with the most self time: calls, self and total us per step."""
    return [{"name": name, "calls_per_step": o[0] / n, "self_us_per_step": o[2] / n, "total_us_per_step": o[1] / n}
            for name, o in sorted(ops.items(), key=lambda kv: -kv[1][2])[:TOP_KERNELS]]


def _sync_rows(syncs, n):
    """The host syncs by call, op and scope, most wait first: count and wait us per step, longest wait."""
    sync_sites = collections.defaultdict(lambda: {"count_per_step": 0.0, "wait_us_per_step": 0.0, "max_us": 0.0})
    for lst in syncs:
        for x in lst:
            site = sync_sites[(x["name"], x["op"], x["scope"])]
            site["count_per_step"] += 1 / n
            site["wait_us_per_step"] += x["us"] / n
            site["max_us"] = max(site["max_us"], x["us"])
    return [dict(name=a, op=b, scope=c, **v) for (a, b, c), v in
            sorted(sync_sites.items(), key=lambda kv: -kv[1]["wait_us_per_step"])]


def _scope_rows(scopes, n):
    """The scope table by name: calls, host us, GPU us and kernels per step."""
    return {name: {"calls_per_step": v["calls"] / n, "host_us_per_step": v["host_us"] / n,
                   "gpu_us_per_step": v["gpu_us"] / n if v["gpu_us"] is not None else None,
                   "kernels_per_step": v["kernels"] / n if v["kernels"] is not None else None}
            for name, v in sorted(scopes.items())}


def _medians(per_step):
    """The headline figures' medians over the steps, and the median step's index (by wall time)."""
    keys = ["wall_us", "gpu_busy_us", "gpu_idle_us", "kernels", "launches", "syncs", "sync_wait_us",
            "aten_ops", "aten_ops_top_level", "host_after_read_us"]
    med = {k: median(r[k] for r in per_step) for k in keys}
    walls = [r["wall_us"] for r in per_step]
    return med, sorted(range(len(per_step)), key=lambda i: walls[i])[(len(per_step) - 1) // 2]


def summarize(path, label=None, step_name=STEP):
    """Every table of one trace, as a JSON-ready dict (figures per step are per-step averages over
    the trace's steps unless named median)."""
    tr = Trace(path, step_name)
    n = len(tr.steps)
    has_gpu = bool(tr.gpu)
    per_step = [dict(index=i, wall_us=s.dur) for i, s in enumerate(tr.steps)]
    launches, syncs = _runtime_calls(tr, n)
    # Each step's figures, in the order its JSON lists them.
    for parts in (_gpu_time(tr), _runtime_figures(tr, launches, syncs), _aten_counts(tr, n), _after_read(tr, n)):
        for rec, figures in zip(per_step, parts):
            rec.update(figures)
    # A kernel counts toward the step and the scopes around its launch.
    placed = _placed_gpu(tr)
    kernels_per_step = [0] * n
    for k, _, _ in placed:
        kernels_per_step[k.step] += k.kind == "kernel"
    for i, rec in enumerate(per_step):
        rec["kernels"] = kernels_per_step[i] if has_gpu else None
    scopes = _scope_gpu_time(_scope_host_time(tr, has_gpu), placed)
    kernels = _kernel_totals(placed)
    kernel_rows = _kernel_rows(kernels, n)
    ops = _host_ops(tr)
    med, median_step = _medians(per_step)
    out = {"label": label, "trace": str(path), "step_name": step_name, "steps": n, "gpu": has_gpu,
           "median": med, "median_step": median_step, "per_step": per_step,
           "categories": _categories(kernels, kernel_rows, n),
           "kernels": kernel_rows, "scopes": _scope_rows(scopes, n), "syncs": _sync_rows(syncs, n),
           "convs": _conv_rows(_conv_totals(tr, _conv_kernels(placed)), n, has_gpu),
           "cpu_self_time": _self_time(ops, n), "host_ops": _top_host_ops(ops, n)}
    if tr.memory:
        out["memory"] = memory_summary(tr)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--label", default="ours")
    ap.add_argument("--compare", metavar="TRACE2", help="a second trace, shown beside the first")
    ap.add_argument("--compare-label", default="torchvision")
    ap.add_argument("--json", help="write the tables here (one side's dict, or {'summaries': [both]})")
    ap.add_argument("--text", help="write the text summary here instead of stdout")
    ap.add_argument("--step", default=STEP, help=f"the step events' name (default {STEP})")
    args = ap.parse_args(argv)
    if args.compare and args.compare_label == args.label:
        ap.error("--label and --compare-label must differ")
    try:
        summaries = [summarize(args.trace, args.label, args.step)]
        if args.compare:
            summaries.append(summarize(args.compare, args.compare_label, args.step))
    except TraceError as e:
        print(f"trace_summary: {e}", file=sys.stderr)
        return 2
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(summaries[0] if len(summaries) == 1 else {"summaries": summaries},
                                                      indent=1))
    t = text(summaries)
    if args.text:
        pathlib.Path(args.text).write_text(t)
    else:
        sys.stdout.write(t)
    return 0


if __name__ == "__main__":
    sys.exit(main())
