"""The CUDA kernels against torchvision's CUDA ops on the same GPU: roi_align (forward: within 1e-5
of torchvision's CPU op, whose rounding the kernels reproduce, and no farther from torchvision's
CUDA op than that op is from its own CPU op plus 1e-5: nvcc contracts torchvision's sample-point
arithmetic into FMAs, and on an H200 ours and torchvision's CUDA op were 1.4e-5 (roi_align) and
7.5e-5 (MultiScaleRoIAlign) apart, past a plain 1e-5; input gradients within 1e-4 with
at most 0.1% of elements beyond, both memory formats),
MultiScaleRoIAlign (same tolerances), nms and batched_nms (keeps equal; ties are broken
alike), float64 gradcheck of roi_align on CUDA, and the autocast path (float16 features give
float16 RoIAlign outputs close to the float32 ones). Exits 77 (ctest: skipped) with the reason
where there is no CUDA device or the ops were built without CUDA kernels."""
import sys
from collections import OrderedDict

import torch

if not torch.cuda.is_available():
    print("skipped: no CUDA device here (torch.cuda.is_available() is False)")
    sys.exit(77)

import torchvision  # noqa: E402

from ops_common import assert_close, ops, random_boxes, rois_from_boxes, run  # noqa: E402

if not torch._C._dispatch_has_kernel_for_dispatch_key("mrcnn::roi_align", "CUDA"):
    print("skipped: libmrcnn_ops has no CUDA kernels (built without nvcc or a CUDA LibTorch)")
    sys.exit(77)

DEV = torch.device("cuda")
FWD_TOL = 1e-5
GRAD_TOL = 1e-4
GRAD_MISMATCH_RATE = 1e-3   # atomics on both sides: additions in varying order


def close_with_rate(actual, expected, atol, rate, what):
    """All but `rate` of the elements within atol (and those few within 100x atol)."""
    diff = (actual.double() - expected.double()).abs()
    beyond = (diff > atol).double().mean().item()
    if beyond > rate or diff.max().item() > 100 * atol:
        raise AssertionError(f"{what}: {beyond:.2%} of elements beyond {atol} (allowed "
                             f"{rate:.2%}); max diff {diff.max().item():.3g}")


def forward_matches(ours, ref_cuda, ref_cpu, what):
    """Ours within FWD_TOL of torchvision's CPU op; from its CUDA op, within FWD_TOL plus the
    distance between torchvision's two ops (printed, with ours', for the record)."""
    ours_cpu = ours.detach().cpu()
    spread = (ref_cuda.detach().cpu().double() - ref_cpu.detach().double()).abs().max().item()
    to_cuda = (ours_cpu.double() - ref_cuda.detach().cpu().double()).abs().max().item()
    to_cpu = (ours_cpu.double() - ref_cpu.detach().double()).abs().max().item()
    print(f"  {what}: max |torchvision CUDA - torchvision CPU| {spread:.3g}; ours vs torchvision CPU "
          f"{to_cpu:.3g}, vs torchvision CUDA {to_cuda:.3g}")
    assert_close(ours_cpu, ref_cpu.detach(), FWD_TOL, what=what + " forward vs torchvision's CPU op")
    assert_close(ours, ref_cuda, FWD_TOL + spread, what=what + " forward vs torchvision's CUDA op")


def check_roi_align_matches_torchvision_cuda():
    gen = torch.Generator().manual_seed(1)
    for aligned in (False, True):
        for fmt in (torch.contiguous_format, torch.channels_last):
            x = torch.randn(2, 16, 50, 68, generator=gen).to(DEV).contiguous(memory_format=fmt)
            boxes = random_boxes(300, 68 * 4, 50 * 4, gen=gen)
            rois = rois_from_boxes(boxes, 2, gen).to(DEV)
            a = x.detach().requires_grad_(True)
            b = x.detach().requires_grad_(True)
            ours = ops.roi_align(a, rois, 0.25, 7, 7, 2, aligned)
            ref = torchvision.ops.roi_align(b, rois, (7, 7), 0.25, 2, aligned)
            what = f"aligned={aligned} {fmt}"
            ref_cpu = torchvision.ops.roi_align(x.cpu(), rois.cpu(), (7, 7), 0.25, 2, aligned)
            forward_matches(ours, ref, ref_cpu, what)
            g = torch.randn(ref.shape, generator=gen).to(DEV)
            ours.backward(g)
            ref.backward(g)
            close_with_rate(a.grad, b.grad, GRAD_TOL, GRAD_MISMATCH_RATE, what + " backward")


def check_multiscale_matches_torchvision_cuda():
    gen = torch.Generator().manual_seed(2)
    sizes = [(800, 1333), (800, 1200)]
    feats = [torch.randn(2, 32, 800 // s, 1344 // s, generator=gen).to(DEV) for s in (4, 8, 16, 32)]
    boxes = [random_boxes(256, w, h, gen=gen).to(DEV) for h, w in sizes]
    rois = torch.cat([torch.cat([torch.full((b.shape[0], 1), float(i), device=DEV), b], 1)
                      for i, b in enumerate(boxes)])
    pool = torchvision.ops.MultiScaleRoIAlign(["0", "1", "2", "3"], 7, 2)
    a = [f.detach().requires_grad_(True) for f in feats]
    b = [f.detach().requires_grad_(True) for f in feats]
    ours = ops.multilevel_roi_align(a, rois, 7, 2, False, [0.25, 0.125, 0.0625, 0.03125])
    ref = pool(OrderedDict((str(i), f) for i, f in enumerate(b)), boxes, sizes)
    ref_cpu = pool(OrderedDict((str(i), f.detach().cpu()) for i, f in enumerate(b)),
                   [x.cpu() for x in boxes], sizes)
    forward_matches(ours, ref, ref_cpu, "MultiScaleRoIAlign")
    g = torch.randn(ref.shape, generator=gen).to(DEV)
    ga = torch.autograd.grad(ours, a, g)
    gb = torch.autograd.grad(ref, b, g)
    for level, (x, y) in enumerate(zip(ga, gb)):
        close_with_rate(x, y, GRAD_TOL, GRAD_MISMATCH_RATE, f"level {level} backward")


def check_nms_matches_torchvision_cuda():
    gen = torch.Generator().manual_seed(3)
    for dtype in (torch.float32, torch.float64):
        boxes = random_boxes(3000, 600, 400, dtype=dtype, gen=gen).to(DEV)
        scores = torch.rand(3000, generator=gen, dtype=dtype).to(DEV)
        idxs = torch.randint(0, 8, (3000,), generator=gen).to(DEV)
        for thr in (0.3, 0.5, 0.7):
            keep = ops.nms(boxes, scores, thr)
            ref = torchvision.ops.nms(boxes, scores, thr)
            assert torch.equal(keep, ref), f"{dtype} nms {thr}: {keep.numel()} vs {ref.numel()} kept"
            keep = ops.batched_nms(boxes, scores, idxs, thr)
            ref = torchvision.ops.batched_nms(boxes, scores, idxs, thr)
            assert torch.equal(keep, ref), f"{dtype} batched_nms {thr}"


def check_roi_align_gradcheck_cuda_float64():
    gen = torch.Generator().manual_seed(4)
    x = torch.randn(1, 2, 6, 7, generator=gen, dtype=torch.float64).to(DEV).requires_grad_(True)
    rois = torch.tensor([[0, 0.5, 0.5, 5.2, 4.1], [0, 1.0, 2.0, 6.5, 5.5]],
                        dtype=torch.float64, device=DEV)
    assert torch.autograd.gradcheck(lambda t: ops.roi_align(t, rois, 1.0, 3, 3, 2, False), (x,))


def check_autocast_float16_cuda():
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(2, 8, 32, 32, generator=gen).to(DEV)
    rois = rois_from_boxes(random_boxes(64, 128, 128, gen=gen), 2, gen).to(DEV)
    full = ops.roi_align(x, rois, 0.25, 7, 7, 2, False)
    with torch.autocast("cuda", dtype=torch.float16):
        half = ops.roi_align(x.half(), rois, 0.25, 7, 7, 2, False)
    assert half.dtype == torch.float16, half.dtype
    assert_close(half.float(), full, 2e-2, rtol=1e-2, what="float16 autocast")


run([check_roi_align_matches_torchvision_cuda, check_multiscale_matches_torchvision_cuda,
     check_nms_matches_torchvision_cuda, check_roi_align_gradcheck_cuda_float64,
     check_autocast_float16_cuda])
