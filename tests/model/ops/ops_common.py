"""Shared helpers of the mrcnn_ops Python checks (not a test module itself).

Loads libmrcnn_ops.so from $MRCNN_BUILD_DIR so that torch.ops.mrcnn.* sits next to
torchvision.ops.*, and provides small seeded input generators and a minimal test runner (each
check is a plain function; a failure prints the check's name and exits non-zero).
"""
import os
import sys
import time
import traceback

import torch

BUILD_DIR = os.environ.get("MRCNN_BUILD_DIR")
if not BUILD_DIR:
    sys.exit("MRCNN_BUILD_DIR is not set (ctest sets it; run through ctest)")
LIB = os.path.join(BUILD_DIR, "model", "libmrcnn_ops.so")
if not os.path.exists(LIB):
    sys.exit(f"{LIB} does not exist: build the mrcnn_ops target first")
torch.ops.load_library(LIB)

# MRCNN_OPS=portable runs the same checks against the portable ATen compositions
# (model/ops/portable, registered as mrcnn_portable::<op> with the native ops' schemas); the ops
# that have no native kernel (box coder, matcher, ...) are the same either way.
IMPLEMENTATION = os.environ.get("MRCNN_OPS", "native")
if IMPLEMENTATION not in ("native", "portable"):
    sys.exit(f"MRCNN_OPS must be native or portable, got {IMPLEMENTATION!r}")
PORTABLE_OPS = frozenset({
    "roi_align", "multilevel_roi_align", "map_rois_to_levels", "nms", "batched_nms",
    "generate_proposals", "mask_targets", "paste_masks_in_image", "paste_masks_in_image_binary"})


class _PortableOps:
    """torch.ops.mrcnn with the portable twin of every op that has one."""

    def __getattr__(self, name):
        if name in PORTABLE_OPS:
            return getattr(torch.ops.mrcnn_portable, name)
        return getattr(torch.ops.mrcnn, name)


ops = torch.ops.mrcnn if IMPLEMENTATION == "native" else _PortableOps()

# LibTorch starts with one intra-op thread; the checks use two (the cores of the CI machine).
torch.set_num_threads(2)


def random_boxes(n, width, height, min_size=1.0, max_frac=0.6, dtype=torch.float32, gen=None):
    """n XYXY boxes inside [0, width] x [0, height] (some degenerate when min_size == 0)."""
    xy = torch.rand(n, 2, generator=gen, dtype=torch.float64) * torch.tensor([width, height])
    wh = torch.rand(n, 2, generator=gen, dtype=torch.float64) * torch.tensor([width, height]) * max_frac
    wh = wh + min_size
    b = torch.cat([xy, xy + wh], 1)
    return b.to(dtype)


def rois_from_boxes(boxes, batch_size, gen=None):
    idx = torch.randint(0, batch_size, (boxes.shape[0], 1), generator=gen).to(boxes.dtype)
    return torch.cat([idx, boxes], 1)


def assert_close(actual, expected, atol, rtol=0.0, what=""):
    if actual.shape != expected.shape:
        raise AssertionError(f"{what}: shape {tuple(actual.shape)} != {tuple(expected.shape)}")
    if actual.numel() == 0:
        return
    diff = (actual.double() - expected.double()).abs()
    tol = atol + rtol * expected.double().abs()
    bad = diff > tol
    if bad.any():
        i = int(torch.nonzero(bad.flatten())[0])
        raise AssertionError(
            f"{what}: {int(bad.sum())} of {diff.numel()} elements differ; max diff "
            f"{diff.max().item():.3g}; first at flat index {i}: {actual.flatten()[i].item()} vs "
            f"{expected.flatten()[i].item()}")


def expect_error(fn, fragment):
    """fn() must raise an error (c10::Error -> RuntimeError, std::invalid_argument -> ValueError)
    whose message contains `fragment`."""
    try:
        fn()
    except (RuntimeError, ValueError) as e:
        if fragment not in str(e):
            raise AssertionError(f"error message {str(e)!r} lacks {fragment!r}") from e
        return
    raise AssertionError(f"expected an error mentioning {fragment!r}")


def with_threads(n, fn):
    old = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        return fn()
    finally:
        torch.set_num_threads(old)


def run(checks):
    """Runs every check; prints one line each; exits 1 if any failed."""
    failed = 0
    for check in checks:
        t = time.perf_counter()
        try:
            check()
            print(f"ok    {check.__name__} ({time.perf_counter() - t:.2f} s)")
        except Exception:  # report every failing check, not only the first
            failed += 1
            print(f"FAIL  {check.__name__}")
            traceback.print_exc()
    print(f"{len(checks) - failed} of {len(checks)} checks passed")
    sys.exit(1 if failed else 0)
