"""The training step's FLOP count (model/flop_count.h, through benchmark/perf/flops_roofline.py)
against torch.utils.flop_counter's count of torchvision's step on the same weights and inputs
(the demo's small configuration, one step, no timing).

Forward: backbone, FPN and box head agree exactly; the mask head differs by exactly the logits of
the classes other than each RoI's own (ours computes only that one); the RPN by the head rerun
with gradients on the sampled anchors. Backward: the total differs by exactly the RPN's (whole map
in torchvision, sampled anchors in ours) and twice the mask-logit saving. Both sides must have
sampled the same RoIs, or the comparison says nothing.
"""
# Its training steps run on 2 intra-op threads:
# ctest processors: 2
import argparse
import pathlib
import sys
import tempfile

import mrcnn_testenv as env

sys.path.insert(0, str(env.SOURCE_DIR / "benchmark" / "perf"))
import flops_roofline  # noqa: E402


def main():
    bench = env.BUILD_DIR / "benchmark" / "perf" / "bench_model_train_step"
    if not bench.exists():
        print(f"skipped: {bench} is not built (MRCNN_BUILD_BENCHMARKS=OFF)")
        sys.exit(77)
    args = argparse.Namespace(warmup=0, steps=1, threads=2, roofline=False, lock=False, bench=bench)
    with tempfile.TemporaryDirectory(prefix="mrcnn-flops-test-") as d:
        r = flops_roofline.measure("small", args, pathlib.Path(d))
    flops_roofline.print_summary("small", r)
    st, e = r["stages"], r["explained"]
    assert e["same_roi_counts"], r["counts"]
    for stage in ("backbone", "fpn", "roi_box"):
        assert st[stage]["forward_flops"] > 0, stage
        assert st[stage]["first_step_forward_flops"] == st[stage]["torchvision_forward_flops"], (stage, st[stage])
        # every trainable layer: an input and a weight gradient (the stem's input has none)
        assert st[stage]["backward_flops"] <= 2 * st[stage]["forward_flops"], (stage, st[stage])
    assert st["roi_mask"]["torchvision_forward_flops"] - st["roi_mask"]["first_step_forward_flops"] == \
        e["mask_logits_saved_forward"] > 0, st["roi_mask"]
    assert e["rpn_sampled_gemm"] > 0
    # beyond the sampled GEMM, the RPN adds only the positive anchors' box deltas (4 x C each)
    extra = e["rpn_extra_forward"] - e["rpn_sampled_gemm"]
    assert 0 <= extra <= 2 * r["counts"]["ours"]["rpn_sampled"] * 4 * r["config"]["fpn"], e
    assert e["forward_residual"] == 0 and e["backward_residual"] == 0, e
    assert st["other"]["forward_flops"] == 0 and st["other"]["backward_flops"] == 0, st["other"]
    print("ok: the step's FLOPs equal torchvision's, up to the two explained differences")


if __name__ == "__main__":
    main()
