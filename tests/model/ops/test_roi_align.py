"""RoIAlign and multi-level RoIAlign against torchvision (roi_align, MultiScaleRoIAlign,
LevelMapper): forward within 1e-5, input gradients within 1e-4, float64 gradcheck, both memory
formats, edge cases, thread-count determinism and error messages."""
from collections import OrderedDict

import torch
import torchvision
from torchvision.ops.poolers import LevelMapper

from ops_common import (assert_close, expect_error, ops, random_boxes, rois_from_boxes, run,
                        with_threads)

FWD_TOL = 1e-5
GRAD_TOL = 1e-4


def roi_inputs(gen, n=2, c=5, h=24, w=31, k=40, dtype=torch.float32, scale=0.25):
    """Features and RoIs in image pixels; some boxes poke out of the image, a few are degenerate."""
    x = torch.randn(n, c, h, w, generator=gen, dtype=dtype)
    img_w, img_h = w / scale, h / scale
    boxes = random_boxes(k, img_w * 1.2, img_h * 1.2, min_size=0.0, gen=gen, dtype=torch.float64)
    boxes -= torch.tensor([img_w, img_h, img_w, img_h]) * 0.1     # partly outside on every side
    boxes[:3, 2] = boxes[:3, 0]                                   # zero width
    boxes[3:5, 3] = boxes[3:5, 1]                                 # zero height
    return x, rois_from_boxes(boxes.to(dtype), n, gen)


def check_roi_align_matches_torchvision():
    gen = torch.Generator().manual_seed(1)
    for dtype in (torch.float32, torch.float64):
        for channels_last in (False, True):
            for aligned in (False, True):
                for sampling_ratio in (2, 0, 3):
                    for pooled in ((7, 7), (14, 9)):
                        x, rois = roi_inputs(gen, dtype=dtype)
                        if channels_last:
                            x = x.contiguous(memory_format=torch.channels_last)
                        x.requires_grad_(True)
                        what = (f"{dtype} cl={channels_last} aligned={aligned} "
                                f"sr={sampling_ratio} pooled={pooled}")
                        ours = ops.roi_align(x, rois, 0.25, pooled[0], pooled[1], sampling_ratio,
                                             aligned)
                        ref = torchvision.ops.roi_align(x, rois, pooled, 0.25, sampling_ratio,
                                                        aligned)
                        assert_close(ours, ref, FWD_TOL, what="forward " + what)
                        if channels_last:
                            assert ours.is_contiguous(memory_format=torch.channels_last), what
                        g = torch.randn(ref.shape, generator=gen, dtype=dtype)
                        (gx,) = torch.autograd.grad(ours, x, g)
                        (gr,) = torch.autograd.grad(ref, x, g)
                        assert_close(gx, gr, GRAD_TOL, what="grad " + what)


def check_non_contiguous_inputs():
    gen = torch.Generator().manual_seed(2)
    x, rois = roi_inputs(gen, c=6)
    x_nc = x.transpose(2, 3).contiguous().transpose(2, 3)[:, ::2]   # strided channels
    rois_nc = torch.cat([rois, rois], 1)[:, :5]                      # strided rows
    assert not x_nc.is_contiguous() and not rois_nc.is_contiguous()
    ours = ops.roi_align(x_nc, rois_nc, 0.25, 7, 7, 2, False)
    ref = torchvision.ops.roi_align(x_nc, rois_nc, 7, 0.25, 2, False)
    assert_close(ours, ref, FWD_TOL, what="non-contiguous forward")
    # A non-contiguous gradient (e.g. from a transposing consumer).
    xg = x.clone().requires_grad_(True)
    out = ops.roi_align(xg, rois, 0.25, 5, 5, 2, False)
    g = torch.randn(out.shape[0], out.shape[1], 5, 5, generator=gen).transpose(2, 3)
    (ga,) = torch.autograd.grad(out, xg, g)
    xr = x.clone().requires_grad_(True)
    (gb,) = torch.autograd.grad(torchvision.ops.roi_align(xr, rois, 5, 0.25, 2, False), xr, g)
    assert_close(ga, gb, GRAD_TOL, what="non-contiguous grad")


def check_gradcheck_float64():
    gen = torch.Generator().manual_seed(3)
    for channels_last in (False, True):
        for aligned in (False, True):
            x = torch.randn(2, 2, 6, 7, generator=gen, dtype=torch.float64)
            if channels_last:
                x = x.contiguous(memory_format=torch.channels_last)
            x.requires_grad_(True)
            rois = torch.tensor([[0, 1.0, 1.3, 14.2, 20.5], [1, 3.0, 2.0, 8.0, 9.0],
                                 [1, -4.0, -3.0, 30.0, 27.0], [0, 5.5, 5.5, 5.5, 9.0]],
                                dtype=torch.float64)
            fn = lambda t: ops.roi_align(t, rois, 0.5, 3, 2, 2, aligned)  # noqa: E731
            assert torch.autograd.gradcheck(fn, (x,), eps=1e-6, atol=1e-5), (channels_last, aligned)


def check_empty_and_single_image():
    x = torch.randn(1, 3, 10, 12, requires_grad=True)
    rois = torch.zeros(0, 5)
    out = ops.roi_align(x, rois, 1.0, 7, 7, 2, False)
    assert out.shape == (0, 3, 7, 7)
    (g,) = torch.autograd.grad(out.sum(), x)
    assert g.shape == x.shape and not g.any()
    # Batch of one, box covering the whole map.
    rois = torch.tensor([[0.0, 0.0, 0.0, 12.0, 10.0]])
    assert_close(ops.roi_align(x, rois, 1.0, 4, 4, 2, False),
                 torchvision.ops.roi_align(x, rois, 4, 1.0, 2, False), FWD_TOL, what="batch of one")
    # A box entirely outside the map pools zeros.
    far = torch.tensor([[0.0, 100.0, 100.0, 120.0, 130.0]])
    assert not ops.roi_align(x, far, 1.0, 3, 3, 2, False).any()


def check_thread_count_determinism():
    gen = torch.Generator().manual_seed(4)
    for channels_last in (False, True):
        x, rois = roi_inputs(gen, n=2, c=37, h=40, w=48, k=300)
        if channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        g = torch.randn(rois.shape[0], 37, 7, 7, generator=gen)

        def fwd_bwd():
            xx = x.clone().requires_grad_(True)
            out = ops.roi_align(xx, rois, 0.25, 7, 7, 2, False)
            (gx,) = torch.autograd.grad(out, xx, g)
            return out, gx

        out1, g1 = with_threads(1, fwd_bwd)
        out2, g2 = with_threads(2, fwd_bwd)
        assert torch.equal(out1, out2), "forward differs between 1 and 2 threads"
        assert torch.equal(g1, g2), "backward differs between 1 and 2 threads"


def check_roi_align_errors():
    x = torch.randn(2, 3, 8, 8)
    expect_error(lambda: ops.roi_align(x, torch.tensor([[2.0, 0, 0, 4, 4]]), 1.0, 2, 2, 2, False),
                 "is not a batch index in [0, 2)")
    expect_error(lambda: ops.roi_align(x, torch.tensor([[0.5, 0, 0, 4, 4]]), 1.0, 2, 2, 2, False),
                 "is not a batch index")
    expect_error(lambda: ops.roi_align(x, torch.zeros(3, 4), 1.0, 2, 2, 2, False),
                 "rois must have shape [K, 5]")
    expect_error(lambda: ops.roi_align(x, torch.zeros(3, 5, dtype=torch.float64), 1.0, 2, 2, 2,
                                       False), "dtype")
    expect_error(lambda: ops.roi_align(x, torch.tensor([[0.0, 0, float("nan"), 4, 4]]), 1.0, 2, 2,
                                       2, False), "finite")
    expect_error(lambda: ops.roi_align(x[0], torch.zeros(1, 5), 1.0, 2, 2, 2, False),
                 "[N, C, H, W]")


# ---- multi-level ---------------------------------------------------------------------------------

IMG_H, IMG_W = 512, 640
SCALES = [0.25, 0.125, 0.0625, 0.03125]


def pyramid(gen, n=2, c=3, dtype=torch.float32, channels_last=False, levels=4):
    feats = []
    for lvl in range(levels):
        s = 4 * 2 ** lvl
        f = torch.randn(n, c, IMG_H // s, IMG_W // s, generator=gen, dtype=dtype)
        if channels_last:
            f = f.contiguous(memory_format=torch.channels_last)
        feats.append(f.requires_grad_(True))
    return feats


def pyramid_boxes(gen, per_image=(30, 25), dtype=torch.float32):
    """Boxes of every size class (levels 2..5) plus canonical-size and degenerate boxes."""
    boxes = []
    for k in per_image:
        b = random_boxes(k, IMG_W, IMG_H, min_size=4.0, max_frac=0.9, gen=gen, dtype=torch.float64)
        b[0] = torch.tensor([10.0, 10.0, 234.0, 234.0])   # exactly 224 x 224: level 4
        b[1] = torch.tensor([3.0, 7.0, 115.0, 119.0])     # exactly 112 x 112: level 3
        b[2] = torch.tensor([50.0, 60.0, 50.0, 90.0])     # zero area: lowest level
        boxes.append(b.to(dtype))
    return boxes


def torchvision_pool(feats, boxes, output_size, sampling_ratio, image_sizes):
    pool = torchvision.ops.MultiScaleRoIAlign([str(i) for i in range(len(feats))], output_size,
                                              sampling_ratio)
    return pool(OrderedDict((str(i), f) for i, f in enumerate(feats)), boxes, image_sizes)


def to_rois(boxes):
    return torch.cat([torch.cat([torch.full((b.shape[0], 1), float(i), dtype=b.dtype), b], 1)
                      for i, b in enumerate(boxes)])


def check_level_mapping_matches_torchvision():
    gen = torch.Generator().manual_seed(5)
    boxes = pyramid_boxes(gen, per_image=(400,))[0]
    boxes = torch.cat([boxes, torch.tensor([[0.0, 0.0, 448.0, 448.0], [0.0, 0.0, 1000.0, 900.0],
                                            [0.0, 0.0, 1.0, 1.0], [5.0, 5.0, 5.0, 5.0]])])
    ref = LevelMapper(2, 5)([boxes])
    ours = ops.map_rois_to_levels(rois_from_boxes(boxes, 1, gen), 2, 5)
    assert torch.equal(ours, ref), (ours != ref).nonzero()
    assert set(ours.tolist()) == {0, 1, 2, 3}, "every level should be exercised"


def check_multilevel_matches_torchvision():
    gen = torch.Generator().manual_seed(6)
    image_sizes = [(IMG_H, IMG_W), (IMG_H - 40, IMG_W - 100)]
    for dtype in (torch.float32, torch.float64):
        for channels_last in (False, True):
            for output_size, sampling_ratio in ((7, 2), (14, 2), (5, 0)):
                feats = pyramid(gen, dtype=dtype, channels_last=channels_last)
                boxes = pyramid_boxes(gen, dtype=dtype)
                ref = torchvision_pool(feats, boxes, output_size, sampling_ratio, image_sizes)
                ours = ops.multilevel_roi_align(feats, to_rois(boxes), output_size, sampling_ratio,
                                                False, SCALES)
                what = f"{dtype} cl={channels_last} S={output_size} sr={sampling_ratio}"
                assert_close(ours, ref, FWD_TOL, what="forward " + what)
                g = torch.randn(ref.shape, generator=gen, dtype=dtype)
                gr = torch.autograd.grad(ref, feats, g)
                go = torch.autograd.grad(ours, feats, g)
                for lvl, (a, b) in enumerate(zip(go, gr)):
                    assert_close(a, b, GRAD_TOL, what=f"grad level {lvl} " + what)


def check_multilevel_level_without_rois():
    gen = torch.Generator().manual_seed(7)
    feats = pyramid(gen, n=1, channels_last=True)
    small = random_boxes(12, 100, 100, min_size=2.0, max_frac=0.3, gen=gen)   # all on P2/P3
    rois = rois_from_boxes(small, 1, gen)
    assert ops.map_rois_to_levels(rois, 2, 5).max() <= 1
    out = ops.multilevel_roi_align(feats, rois, 7, 2, False, SCALES)
    ref = torchvision_pool(feats, [small], 7, 2, [(IMG_H, IMG_W)])
    assert_close(out, ref, FWD_TOL, what="forward")
    grads = torch.autograd.grad(out.sum(), feats)
    assert not grads[2].any() and not grads[3].any(), "levels without RoIs get zero gradient"
    assert grads[0].any()
    for f, g in zip(feats, grads):
        assert g.shape == f.shape
    # No RoIs at all.
    empty = ops.multilevel_roi_align(feats, torch.zeros(0, 5), 7, 2, False, SCALES)
    assert empty.shape == (0, 3, 7, 7)
    grads = torch.autograd.grad(empty.sum(), feats, allow_unused=True)
    assert all(g is None or not g.any() for g in grads)


def check_multilevel_gradcheck_float64():
    gen = torch.Generator().manual_seed(8)
    for channels_last in (False, True):
        feats = [torch.randn(2, 2, 8, 10, generator=gen, dtype=torch.float64),
                 torch.randn(2, 2, 4, 5, generator=gen, dtype=torch.float64)]
        if channels_last:
            feats = [f.contiguous(memory_format=torch.channels_last) for f in feats]
        feats = [f.requires_grad_(True) for f in feats]
        # Canonical scale 16 at level 1 (scale 1/2): boxes of side < 32 go to level 1, larger
        # ones to level 2 (scale 1/4).
        rois = torch.tensor([[0, 1.0, 2.0, 9.0, 11.5], [1, 3.5, 1.0, 18.0, 15.0],
                             [0, 0.0, 0.0, 36.0, 30.0], [1, 10.0, 4.0, 45.0, 40.0]],
                            dtype=torch.float64)
        lv = ops.map_rois_to_levels(rois, 1, 2, 16, 1)
        assert lv.tolist() == [0, 0, 1, 1], lv

        def fn(a, b):
            return ops.multilevel_roi_align([a, b], rois, 3, 2, False, [0.5, 0.25], 16, 1)

        assert torch.autograd.gradcheck(fn, tuple(feats), eps=1e-6, atol=1e-5), channels_last


def check_multilevel_thread_determinism():
    gen = torch.Generator().manual_seed(9)
    feats = [f.detach() for f in pyramid(gen, c=19)]
    rois = to_rois(pyramid_boxes(gen, per_image=(150, 150)))
    g = torch.randn(rois.shape[0], 19, 7, 7, generator=gen)

    def fwd_bwd():
        fs = [f.clone().requires_grad_(True) for f in feats]
        out = ops.multilevel_roi_align(fs, rois, 7, 2, False, SCALES)
        return [out] + list(torch.autograd.grad(out, fs, g))

    r1 = with_threads(1, fwd_bwd)
    r2 = with_threads(2, fwd_bwd)
    for a, b in zip(r1, r2):
        assert torch.equal(a, b), "multilevel result differs between 1 and 2 threads"


def check_multilevel_errors():
    feats = [torch.randn(1, 2, 8, 8), torch.randn(1, 2, 4, 4)]
    rois = torch.tensor([[0.0, 0, 0, 10, 10]])
    expect_error(lambda: ops.multilevel_roi_align(feats, rois, 7, 2, False, [0.25]),
                 "one spatial scale per level")
    expect_error(lambda: ops.multilevel_roi_align(feats, rois, 7, 2, False, [0.25, 0.2]),
                 "not a power of two")
    expect_error(lambda: ops.multilevel_roi_align(feats, rois, 7, 2, False, [0.25, 0.0625]),
                 "halve")
    expect_error(lambda: ops.multilevel_roi_align([feats[0], torch.randn(1, 3, 4, 4)], rois, 7,
                                                  2, False, [0.25, 0.125]), "like features[0]")
    expect_error(lambda: ops.multilevel_roi_align(feats, torch.tensor([[1.0, 0, 0, 4, 4]]), 7, 2,
                                                  False, [0.25, 0.125]), "batch index")


def check_autocast_cpu_bfloat16():
    gen = torch.Generator().manual_seed(10)
    x, rois = roi_inputs(gen)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = ops.roi_align(x.bfloat16(), rois.bfloat16(), 0.25, 7, 7, 2, False)
    assert out.dtype == torch.bfloat16
    ref = ops.roi_align(x.bfloat16().float(), rois.bfloat16().float(), 0.25, 7, 7, 2, False)
    assert_close(out.float(), ref, 2e-2, 1e-2, what="autocast bfloat16")


if __name__ == "__main__":
    run([check_roi_align_matches_torchvision, check_non_contiguous_inputs,
         check_gradcheck_float64, check_empty_and_single_image, check_thread_count_determinism,
         check_roi_align_errors, check_level_mapping_matches_torchvision,
         check_multilevel_matches_torchvision, check_multilevel_level_without_rois,
         check_multilevel_gradcheck_float64, check_multilevel_thread_determinism,
         check_multilevel_errors, check_autocast_cpu_bfloat16])
