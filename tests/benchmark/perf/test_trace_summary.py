"""benchmark/perf/trace_summary.py, the tables of a profiled GPU visit, checked without a GPU.

1. A hand-made GPU-like trace of three steps, every figure known in advance: two streams, launches
   tied to their kernels by correlation id (one only by its flow events), a host thread for the
   backward, a memcpy, a memset, two syncs, known idle gaps, a convolution with its shapes, and a
   kernel before the first step that belongs to none.
2. A real CPU trace from torch.profiler, three steps of the same small computation: three steps
   found, the same positive ATen op counts in each, every GPU figure absent (None), said so.
3. The gzipped trace reads the same as the plain one.
4. Malformed traces (not JSON, a broken gzip, no steps, an event without a time, a missing file)
   end with one line naming the file and a non-zero exit, no traceback.

Runs under ctest (label python) or pytest, or as a script.
"""
import copy
import gzip
import json
import math
import pathlib
import subprocess
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[3]
SCRIPT = REPO / "benchmark" / "perf" / "trace_summary.py"
sys.path.insert(0, str(SCRIPT.parent))
import trace_summary as ts  # noqa: E402

HOST, MAIN, BWD = 100, 1, 2        # the host process, its main thread and the autograd thread
GPU, S7, S8 = 0, 7, 8              # the device, two streams
FPROP = "sm80_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nhwc"
DGRAD = "sm80_xmma_dgrad_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nhwc"
WGRAD = "sm80_xmma_wgrad_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nhwc"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>"
CONV_ARGS = {"Input Dims": [[2, 4, 16, 16], [8, 4, 3, 3], [8], [], [], [], [], [], []],
             "Input type": ["c10::Half", "c10::Half", "c10::Half"] + ["ScalarList"] * 6,
             "Input Strides": [[1024, 1, 64, 4], [36, 1, 12, 4], [1], [], [], [], [], [], []],
             # A one-element dilation, as C++ callers pass it.
             "Concrete Inputs": ["", "", "", "[2, 2]", "[1, 1]", "[1]", "False", "[0, 0]", "1"]}
CONV_BWD_ARGS = {"Input Dims": [[2, 8, 8, 8], [2, 4, 16, 16], [8, 4, 3, 3], [], [], [], [], [], [], [], []],
                 "Input type": ["c10::Half", "c10::Half", "c10::Half"] + ["ScalarList"] * 8,
                 "Input Strides": [[512, 1, 64, 8], [1024, 1, 64, 4], [36, 1, 12, 4]] + [[]] * 8,
                 "Concrete Inputs": ["", "", "", "[8]", "[2, 2]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1",
                                     "[True, True, False]"]}
# 2 * N * K * P * Q * C * R * S FLOPs: 2 * 2 * 8 * 8 * 8 * 4 * 3 * 3
CONV_GFLOP = 73728 / 1e9


def x(cat, name, t0, t1, pid=HOST, tid=MAIN, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": t0, "dur": t1 - t0, "args": args}


def step_events(base, corr, wall, dgrad_us):
    """One step at time `base`, of `wall` us. GPU (union): [10,35) [36,38) [60,75) [86,88), so 44
    us busy; idle gaps at 0 (10 us), 35 (1), 38 (22), 75 (11) and 88 (wall - 88)."""
    def t(v):
        return base + v
    ev = [
        x("user_annotation", "mrcnn::train_step", t(0), t(wall)),
        x("cpu_op", "mrcnn::forward", t(1), t(50)),
        x("cpu_op", "aten::conv2d", t(2), t(20)),
        x("cpu_op", "aten::convolution", t(3), t(19), **CONV_ARGS),
        x("cpu_op", "aten::cudnn_convolution", t(4), t(18)),
        x("cuda_runtime", "cudaLaunchKernel", t(5), t(7), correlation=corr + 1),
        x("kernel", FPROP, t(10), t(30), pid=GPU, tid=S7, correlation=corr + 1, stream=S7),
        x("cpu_op", "aten::add_", t(20), t(25)),
        x("cuda_runtime", "cudaLaunchKernel", t(21), t(22), correlation=corr + 2),
        x("kernel", ADD, t(25), t(35), pid=GPU, tid=S8, correlation=corr + 2, stream=S8),
        x("cpu_op", "aten::nonzero", t(30), t(45)),
        x("cuda_runtime", "cudaMemcpyAsync", t(31), t(32), correlation=corr + 3),
        x("gpu_memcpy", "Memcpy DtoH (Device -> Pageable)", t(36), t(38), pid=GPU, tid=S7,
          correlation=corr + 3, stream=S7),
        x("cuda_runtime", "cudaStreamSynchronize", t(32), t(44), correlation=corr + 7),
        # The step's last read of the device, 3 us before the backward starts.
        x("user_annotation", "mrcnn::read", t(45), t(47)),
        x("user_annotation", "mrcnn::backward", t(50), t(95)),
        x("cpu_op", "autograd::engine::evaluate_function: ConvolutionBackward0", t(52), t(80), tid=BWD),
        x("cpu_op", "ConvolutionBackward0", t(53), t(79), tid=BWD),
        x("cpu_op", "aten::convolution_backward", t(54), t(78), tid=BWD, **CONV_BWD_ARGS),
        x("cuda_runtime", "cudaLaunchKernel", t(55), t(56), tid=BWD, correlation=corr + 4),
        x("kernel", DGRAD, t(60), t(60 + dgrad_us), pid=GPU, tid=S7, correlation=corr + 4, stream=S7),
        # Tied to its launch by the flow events only.
        x("cuda_driver", "cuLaunchKernel", t(57), t(58), tid=BWD, correlation=corr + 5),
        x("kernel", WGRAD, t(65), t(75), pid=GPU, tid=S8, stream=S8),
        {"ph": "s", "cat": "ac2g", "id": corr + 5, "pid": HOST, "tid": BWD, "ts": t(57), "name": "ac2g"},
        {"ph": "f", "cat": "ac2g", "id": corr + 5, "pid": GPU, "tid": S8, "ts": t(65), "bp": "e", "name": "ac2g"},
        x("cpu_op", "aten::zero_", t(81), t(85), tid=BWD),
        x("cuda_runtime", "cudaMemsetAsync", t(82), t(83), tid=BWD, correlation=corr + 6),
        x("gpu_memset", "Memset (Device)", t(86), t(88), pid=GPU, tid=S7, correlation=corr + 6, stream=S7),
        x("cuda_runtime", "cudaDeviceSynchronize", t(95), t(wall - 1), correlation=corr + 8),
        # Kineto's copy of the step on the GPU's timeline: no step of its own.
        x("gpu_user_annotation", "mrcnn::train_step", t(10), t(88), pid=GPU, tid=S7),
    ]
    return ev


def synthetic_trace():
    events = [{"ph": "M", "name": "process_name", "pid": HOST, "tid": 0, "args": {"name": "python"}},
              # Before the first step (a warm-up's kernel): part of no step.
              x("cuda_runtime", "cudaLaunchKernel", -50, -49, correlation=900),
              x("kernel", ADD, -40, -30, pid=GPU, tid=S7, correlation=900, stream=S7)]
    events += step_events(0, 0, 100, 10) + step_events(100, 10, 100, 10) + step_events(200, 20, 120, 12)
    return {"schemaVersion": 1, "traceEvents": events}


def close(a, b):
    return a is not None and math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-9)


def test_synthetic_gpu_trace(tmp_path):
    tmp = tmp_path
    path = tmp / "gpu.json"
    path.write_text(json.dumps(synthetic_trace()))
    s = ts.summarize(path, "ours")
    assert s["steps"] == 3 and s["gpu"] is True
    walls = [r["wall_us"] for r in s["per_step"]]
    assert walls == [100, 100, 120], walls
    assert [r["gpu_busy_us"] for r in s["per_step"]] == [44, 44, 44]
    assert [r["gpu_idle_us"] for r in s["per_step"]] == [56, 56, 76]
    assert s["median"]["wall_us"] == 100 and s["median"]["gpu_busy_us"] == 44 and s["median"]["gpu_idle_us"] == 56
    for r in s["per_step"]:
        assert r["kernels"] == 4, r          # the memcpy and the memset are not kernels
        assert r["launches"] == 4 and r["launches_by_name"] == {"cudaLaunchKernel": 3, "cuLaunchKernel": 1}, r
        assert r["syncs"] == 2, r
        assert r["aten_ops"] == 7 and r["aten_ops_top_level"] == 5, r
    assert [r["sync_wait_us"] for r in s["per_step"]] == [16, 16, 36]
    assert s["median"]["sync_wait_us"] == 16 and s["median"]["syncs"] == 2

    # The idle gaps, longest first, with the host op and scope when each opened and what closed it.
    gaps = [(g["start_us"], g["us"], g["op"], g["scope"], g["next_kernel"], g["next_launch_op"])
            for g in s["per_step"][0]["top_gaps"]]
    assert gaps == [
        (38, 22, "aten::nonzero", "mrcnn::forward", DGRAD, "aten::convolution_backward"),
        (88, 12, "mrcnn::backward", "mrcnn::backward", None, None),
        (75, 11, "aten::convolution_backward", "mrcnn::backward", "Memset (Device)", "aten::zero_"),
        (0, 10, "mrcnn::train_step", "mrcnn::train_step", FPROP, "aten::cudnn_convolution"),
        (35, 1, "aten::nonzero", "mrcnn::forward", "Memcpy DtoH (Device -> Pageable)", "aten::nonzero"),
    ], gaps
    assert [g["us"] for g in s["per_step"][2]["top_gaps"]] == [32, 22, 11, 10, 1]
    assert [g["us"] for g in s["per_step"][2]["idle_gaps"]] == [32, 22]   # over 20 us

    syncs = {(r["name"], r["op"], r["scope"]): r for r in s["syncs"]}
    assert set(syncs) == {("cudaStreamSynchronize", "aten::nonzero", "mrcnn::forward"),
                          ("cudaDeviceSynchronize", "mrcnn::train_step", "mrcnn::train_step")}, syncs
    dev = syncs[("cudaDeviceSynchronize", "mrcnn::train_step", "mrcnn::train_step")]
    assert close(dev["count_per_step"], 1) and close(dev["wait_us_per_step"], 32 / 3) and dev["max_us"] == 24

    k = {r["name"]: r for r in s["kernels"]}
    assert set(k) == {FPROP, ADD, DGRAD, WGRAD, "Memcpy DtoH (Device -> Pageable)", "Memset (Device)"}
    assert s["kernels"][0]["name"] == FPROP                      # the largest total first
    assert k[FPROP]["category"] == "conv fprop" and k[ADD]["category"] == "elementwise"
    assert k[DGRAD]["category"] == "conv dgrad" and k[WGRAD]["category"] == "conv wgrad"
    assert k["Memset (Device)"]["category"] == "memset"
    assert k["Memcpy DtoH (Device -> Pageable)"]["category"] == "cast/copy"
    d = k[DGRAD]
    assert d["calls_per_step"] == 1 and close(d["total_us_per_step"], 32 / 3) and close(d["mean_us"], 32 / 3)
    assert d["min_us"] == 10 and d["max_us"] == 12 and d["streams"] == {str(S7): 3}
    assert d["scopes"] == {"mrcnn::backward": 3}
    assert k[ADD]["calls_per_step"] == 1, "the kernel before the first step was counted"
    assert k[WGRAD]["scopes"] == {"mrcnn::backward": 3}, "the flow-linked kernel's launch was not found"
    assert k[FPROP]["scopes"] == {"mrcnn::forward": 3}
    cats = s["categories"]
    assert close(cats["conv fprop"]["us_per_step"], 20) and close(cats["conv dgrad"]["us_per_step"], 32 / 3)
    assert close(cats["memset"]["us_per_step"], 2) and close(cats["cast/copy"]["us_per_step"], 2)
    assert close(sum(c["share"] for c in cats.values()), 1)

    sc = s["scopes"]
    assert close(sc["mrcnn::train_step"]["host_us_per_step"], 320 / 3)
    assert close(sc["mrcnn::train_step"]["gpu_us_per_step"], (54 + 54 + 56) / 3)
    assert close(sc["mrcnn::forward"]["host_us_per_step"], 49) and close(sc["mrcnn::forward"]["gpu_us_per_step"], 32)
    assert sc["mrcnn::forward"]["kernels_per_step"] == 2 and sc["mrcnn::backward"]["kernels_per_step"] == 2
    assert cats["conv fprop"]["distinct_kernels"] == 1 and cats["cast/copy"]["calls_per_step"] == 1
    assert close(sc["mrcnn::backward"]["host_us_per_step"], 45)
    assert close(sc["mrcnn::backward"]["gpu_us_per_step"], (22 + 22 + 24) / 3)

    (c,) = s["convs"]
    assert c["shape"] == "2x4x16x16 * 8x4x3x3 s2 p1 c10::Half nhwc", c["shape"]
    assert close(c["gflop_per_direction"], CONV_GFLOP)
    assert c["fwd_calls_per_step"] == 1 and c["bwd_calls_per_step"] == 1
    assert close(c["fprop_gpu_us_per_step"], 20) and close(c["fprop_tflops"], CONV_GFLOP / 20 * 1e3)
    assert close(c["dgrad_tflops"], CONV_GFLOP * 3 / 32 * 1e3) and close(c["wgrad_tflops"], CONV_GFLOP / 10 * 1e3)
    assert c["fprop_engines"] == [FPROP] and c["dgrad_engines"] == [DGRAD]

    st = s["cpu_self_time"]
    assert st["aten::nonzero"]["calls_per_step"] == 1 and close(st["aten::nonzero"]["self_us_per_step"], 15)
    ev = st["autograd::engine::evaluate_function"]
    assert ev["calls_per_step"] == 1 and close(ev["total_us_per_step"], 28) and close(ev["self_us_per_step"], 2)
    assert st["aten::randperm"]["calls_per_step"] == 0
    ops = {r["name"]: r for r in s["host_ops"]}
    assert close(ops["aten::convolution"]["self_us_per_step"], 2)     # 16 us less its child's 14

    assert [r["host_after_read_us"] for r in s["per_step"]] == [3, 3, 3] and s["median"]["host_after_read_us"] == 3
    t = ts.text([s])
    assert "PROFILE label=ours steps=3 wall_ms=0.10 gpu_busy_ms=0.04 gpu_idle_ms=0.06 kernels=4 launches=4 " \
           "syncs=2 sync_wait_ms=0.02 aten_ops=7 aten_top_level=5" in t, t
    assert "no GPU activity" not in t
    print("synthetic GPU trace: every figure as built")


def cpu_trace(path):
    """Three profiled steps of a small forward and backward on the CPU, after one unprofiled."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function
    torch.manual_seed(0)
    w = torch.randn(16, 16, requires_grad=True)
    data = torch.randn(8, 16)

    def step():
        w.grad = None
        with record_function("mrcnn::forward"):
            loss = (data @ w).relu().index_select(0, torch.arange(4)).sum()
        with record_function("mrcnn::backward"):
            loss.backward()

    step()
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in range(3):
            with record_function("mrcnn::train_step"):
                step()
    prof.export_chrome_trace(str(path))


def test_cpu_trace(tmp_path):
    tmp = tmp_path
    path = tmp / "cpu.json"
    cpu_trace(path)
    s = ts.summarize(path, "cpu")
    assert s["steps"] == 3 and s["gpu"] is False
    counts = [(r["aten_ops"], r["aten_ops_top_level"]) for r in s["per_step"]]
    assert counts[0][0] > counts[0][1] > 0 and len(set(counts)) == 1, counts
    for key in ("gpu_busy_us", "gpu_idle_us", "kernels", "launches", "syncs", "sync_wait_us", "host_after_read_us"):
        assert s["median"][key] is None and all(r[key] is None for r in s["per_step"]), key
    assert s["kernels"] == [] and s["categories"] == {}
    assert all(r["wall_us"] > 0 for r in s["per_step"])
    assert s["scopes"]["mrcnn::forward"]["calls_per_step"] == 1
    assert s["scopes"]["mrcnn::forward"]["gpu_us_per_step"] is None
    assert s["cpu_self_time"]["aten::index_select"]["calls_per_step"] == 1
    assert s["cpu_self_time"]["autograd::engine::evaluate_function"]["calls_per_step"] > 0
    out = subprocess.run([sys.executable, SCRIPT, path, "--label", "a", "--compare", path, "--compare-label", "b",
                          "--json", tmp / "both.json"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "no GPU activity in this trace" in out.stdout, out.stdout
    assert f"aten_ops={counts[0][0]} " in out.stdout and "PROFILE label=b " in out.stdout, out.stdout
    both = json.loads((tmp / "both.json").read_text())["summaries"]
    assert [b["label"] for b in both] == ["a", "b"] and both[0]["per_step"] == both[1]["per_step"]
    print(f"CPU trace: 3 steps of {counts[0][0]} ATen ops ({counts[0][1]} top-level) each, GPU figures absent")


def test_gzip_reads_the_same(tmp_path):
    tmp = tmp_path
    plain = tmp / "t.json"
    plain.write_text(json.dumps(synthetic_trace()))
    packed = tmp / "t.json.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    a, b = ts.summarize(plain, "x"), ts.summarize(packed, "x")
    assert a.pop("trace") != b.pop("trace")
    assert a == b
    print("gzipped trace: the same tables")


def test_malformed(tmp_path):
    tmp = tmp_path
    good = synthetic_trace()
    no_ts = copy.deepcopy(good)
    del next(e for e in no_ts["traceEvents"] if e.get("name") == "aten::add_")["ts"]
    cases = {
        "broken.json": (b'{"traceEvents": [', "not a JSON trace"),
        "broken.json.gz": (gzip.compress(json.dumps(good).encode())[:-20], "not a readable gzip file"),
        "nosteps.json": (json.dumps({"traceEvents": [x("cpu_op", "aten::add", 0, 1)]}).encode(),
                         "no 'mrcnn::train_step' events"),
        "nots.json": (json.dumps(no_ts).encode(), "has no numeric 'ts'"),
        "object.json": (b'{"a": 1}', "no traceEvents list"),
    }
    for name, (content, why) in cases.items():
        (tmp / name).write_bytes(content)
    cases["missing.json"] = (None, "cannot read it")
    for name, (_, why) in cases.items():
        p = subprocess.run([sys.executable, SCRIPT, tmp / name], capture_output=True, text=True)
        lines = p.stderr.strip().splitlines()
        assert p.returncode == 2 and len(lines) == 1, (name, p.returncode, p.stderr)
        assert str(tmp / name) in lines[0] and why in lines[0] and "Traceback" not in p.stderr, (name, lines)
    # The second trace's error names the second file.
    (tmp / "good.json").write_text(json.dumps(good))
    p = subprocess.run([sys.executable, SCRIPT, tmp / "good.json", "--compare", tmp / "broken.json"],
                       capture_output=True, text=True)
    assert p.returncode == 2 and str(tmp / "broken.json") in p.stderr and not p.stdout, (p.stderr, p.stdout)
    print(f"malformed traces: {len(cases)} cases, each one line naming the file, exit 2")


def main():
    for test in (test_synthetic_gpu_trace, test_cpu_trace, test_gzip_reads_the_same, test_malformed):
        with tempfile.TemporaryDirectory(prefix="mrcnn-trace-summary-") as d:
            test(pathlib.Path(d))


if __name__ == "__main__":
    main()
