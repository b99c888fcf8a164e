"""Fused proposal generation against a slow, per-image and per-level reference written here with
torchvision's building blocks, against torchvision's own RPN filtering, and on the edge cases
(batch of one, a level without proposals, all scores equal, boxes outside the image, degenerate
boxes, per-batch selection, thread-count determinism, malformed input)."""
import torch
import torchvision
from torchvision.models.detection import _utils as det_utils
from torchvision.models.detection.anchor_utils import AnchorGenerator
from torchvision.models.detection.image_list import ImageList
from torchvision.models.detection.rpn import (RegionProposalNetwork, RPNHead,
                                              concat_box_prediction_layers)

from ops_common import assert_close, expect_error, ops, run, with_threads

PAD_H, PAD_W = 256, 320
SIZES = (32.0, 64.0, 128.0, 256.0, 512.0)
A = 3


def grids(h=PAD_H, w=PAD_W):
    g = [(h // 4, w // 4)]
    for _ in range(4):
        g.append(((g[-1][0] + 1) // 2, (g[-1][1] + 1) // 2))
    return g


def anchors_for(h=PAD_H, w=PAD_W):
    return ops.grid_anchors(list(SIZES), [0.5, 1.0, 2.0], [x for g in grids(h, w) for x in g],
                            [h, w])


def head_outputs(gen, n, delta_scale=0.5, h=PAD_H, w=PAD_W):
    """Objectness logits without ties (a permutation of evenly spaced values in (-4, 4)) and
    random deltas, per level."""
    shapes = [(n, A, gh, gw) for gh, gw in grids(h, w)]
    total = sum(s[0] * s[1] * s[2] * s[3] for s in shapes)
    values = (torch.randperm(total, generator=gen).double() / total * 8 - 4).float()
    obj, deltas, off = [], [], 0
    for s in shapes:
        cnt = s[0] * s[1] * s[2] * s[3]
        obj.append(values[off:off + cnt].view(s))
        off += cnt
        deltas.append(torch.randn(s[0], 4 * A, s[2], s[3], generator=gen) * delta_scale)
    return obj, deltas


def reference(obj, deltas, anchors, image_sizes, pre, post, thr, min_size, per_batch, score_thr):
    """proposals.h, spelled out per image and per level."""
    coder = det_utils.BoxCoder((1.0, 1.0, 1.0, 1.0))
    n_img = obj[0].shape[0]
    merged = []
    for n in range(n_img):
        h, w = image_sizes[n]
        kept = []   # (prob, level, rank, box)
        for lvl, (o, d, a) in enumerate(zip(obj, deltas, anchors)):
            na, gh, gw = o.shape[1:]
            logits = o[n].permute(1, 2, 0).reshape(-1)                      # (y, x, anchor)
            dl = d[n].view(na, 4, gh, gw).permute(2, 3, 0, 1).reshape(-1, 4)
            order = torch.sort(logits, descending=True, stable=True).indices[:pre]
            boxes = coder.decode_single(dl[order], a[order])
            boxes = torchvision.ops.clip_boxes_to_image(boxes, (h, w))
            prob = torch.sigmoid(logits[order])
            ws, hs = boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]
            valid = torch.where((ws >= min_size) & (hs >= min_size) & (prob >= score_thr))[0]
            keep = torchvision.ops.nms(boxes[valid], prob[valid], thr)
            for rank, j in enumerate(valid[keep].tolist()):
                kept.append((prob[j].item(), lvl, rank, boxes[j]))
        kept.sort(key=lambda e: (-e[0], e[1], e[2]))
        merged.append(kept)
    if per_batch:
        flat = sorted((-e[0], n, i) for n, m in enumerate(merged) for i, e in enumerate(m))[:post]
        take = [sum(1 for _, m, _ in flat if m == n) for n in range(n_img)]
    else:
        take = [min(post, len(m)) for m in merged]
    boxes = torch.zeros(n_img, post, 4)
    scores = torch.zeros(n_img, post)
    for n in range(n_img):
        for i in range(take[n]):
            boxes[n, i] = merged[n][i][3]
            scores[n, i] = merged[n][i][0]
    return boxes, scores, torch.tensor(take)


def compare(obj, deltas, anchors, image_sizes, pre, post, thr=0.7, min_size=0.0, per_batch=False,
            score_thr=0.0, what=""):
    ours = ops.generate_proposals(obj, deltas, anchors, torch.tensor(image_sizes), pre, post, thr,
                                  min_size, per_batch, score_thr)
    ref = reference(obj, deltas, anchors, image_sizes, pre, post, thr, min_size, per_batch,
                    score_thr)
    assert torch.equal(ours[2], ref[2]), f"{what}: counts {ours[2].tolist()} vs {ref[2].tolist()}"
    assert_close(ours[0], ref[0], 1e-5, 1e-6, what=what + " boxes")
    assert_close(ours[1], ref[1], 1e-6, what=what + " scores")
    assert ours[0].shape == (len(image_sizes), post, 4)
    return ours


def check_matches_reference():
    gen = torch.Generator().manual_seed(21)
    anchors = anchors_for()
    obj, deltas = head_outputs(gen, 2)
    sizes = [(PAD_H, PAD_W - 20), (PAD_H - 56, PAD_W - 100)]    # true sizes inside the padding
    for pre, post, thr, min_size, per_batch, score_thr in (
            (2000, 1000, 0.7, 0.0, False, 0.0),   # torchvision / reference testing shape
            (2000, 1000, 0.7, 0.0, True, 0.0),    # reference training: top-k over the batch
            (300, 150, 0.5, 1e-3, False, 0.0),
            (300, 400, 0.7, 8.0, True, 0.3),
            (50, 2000, 0.9, 0.0, False, 0.6)):
        compare(obj, deltas, anchors, sizes, pre, post, thr, min_size, per_batch, score_thr,
                what=f"pre={pre} post={post} thr={thr} min={min_size} batch={per_batch} "
                     f"score={score_thr}")


def check_matches_torchvision_rpn():
    """torchvision's own pipeline: decode every anchor, then RegionProposalNetwork.filter_proposals."""
    gen = torch.Generator().manual_seed(22)
    obj, deltas = head_outputs(gen, 2)
    sizes = [(PAD_H, PAD_W), (PAD_H - 30, PAD_W - 70)]
    gen_ref = AnchorGenerator(tuple((s,) for s in SIZES), ((0.5, 1.0, 2.0),) * 5)
    images = ImageList(torch.zeros(2, 3, PAD_H, PAD_W), sizes)
    anchors = gen_ref(images, [torch.zeros(2, 1, gh, gw) for gh, gw in grids()])
    rpn = RegionProposalNetwork(gen_ref, RPNHead(1, A), 0.7, 0.3, 256, 0.5,
                                dict(training=600, testing=600), dict(training=300, testing=300),
                                0.7, score_thresh=0.0).eval()
    o_flat, d_flat = concat_box_prediction_layers(obj, deltas)
    proposals = rpn.box_coder.decode(d_flat.detach(), anchors).view(2, -1, 4)
    boxes, scores = rpn.filter_proposals(proposals, o_flat, sizes, [o[0].numel() for o in obj])
    ours = ops.generate_proposals(obj, deltas, anchors_for(), torch.tensor(sizes), 600, 300, 0.7,
                                  1e-3, False, 0.0)
    for n in range(2):
        c = int(ours[2][n])
        assert c == boxes[n].shape[0], (c, boxes[n].shape)
        assert_close(ours[0][n, :c], boxes[n], 1e-5, 1e-6, what=f"image {n} boxes")
        assert_close(ours[1][n, :c], scores[n], 1e-6, what=f"image {n} scores")


def check_edge_cases():
    gen = torch.Generator().manual_seed(23)
    anchors = anchors_for()
    # Batch of one; boxes pushed far outside the image by large deltas (clipped), some degenerate.
    obj, deltas = head_outputs(gen, 1, delta_scale=3.0)
    compare(obj, deltas, anchors, [(PAD_H - 16, PAD_W)], 1000, 500, what="batch of one, wild")
    compare(obj, deltas, anchors, [(PAD_H - 16, PAD_W)], 1000, 500, min_size=2.0,
            what="batch of one, min size")
    # A level without any proposal: P4's logits below the score threshold.
    obj, deltas = head_outputs(gen, 2)
    obj[2] = torch.full_like(obj[2], -10.0)
    out = compare(obj, deltas, anchors, [(PAD_H, PAD_W)] * 2, 500, 800, score_thr=0.05,
                  what="empty level")
    assert out[2].min() > 0
    # All scores equal: ties resolved by level, then anchor index, in both.
    obj = [torch.zeros_like(o) for o in obj]
    compare(obj, deltas, anchors, [(PAD_H, PAD_W)] * 2, 400, 600, what="all equal")
    compare(obj, deltas, anchors, [(PAD_H, PAD_W)] * 2, 400, 600, per_batch=True,
            what="all equal, per batch")
    # Zero deltas on equal logits: anchors themselves; pre_nms above a level's anchor count.
    zero = [torch.zeros_like(d) for d in deltas]
    compare(obj, zero, anchors, [(PAD_H, PAD_W)] * 2, 100000, 300, what="pre_nms > anchors")
    # post_nms_top_n == 0 and an empty image.
    res = ops.generate_proposals(obj, deltas, anchors, torch.tensor([[PAD_H, PAD_W]] * 2), 100, 0)
    assert res[0].shape == (2, 0, 4) and res[2].tolist() == [0, 0]
    res = ops.generate_proposals(obj, deltas, anchors, torch.tensor([[0, 0], [PAD_H, PAD_W]]), 100,
                                 50, 0.7, 0.5)
    assert res[2][0] == 0 and res[2][1] > 0, "a zero-size image keeps nothing with min_size > 0"
    # float64 inputs.
    obj, deltas = head_outputs(gen, 2)
    compare([o.double() for o in obj], [d.double() for d in deltas],
            [a.double() for a in anchors], [(PAD_H, PAD_W)] * 2, 300, 300, what="float64")


def check_thread_determinism():
    gen = torch.Generator().manual_seed(24)
    anchors = anchors_for(512, 640)
    obj, deltas = head_outputs(gen, 2, h=512, w=640)
    obj = [torch.round(o * 4) / 4 for o in obj]   # plenty of ties
    sizes = torch.tensor([[512, 600], [480, 640]])
    fn = lambda: ops.generate_proposals(obj, deltas, anchors, sizes, 2000, 1000, 0.7, 0.0, True)  # noqa: E731
    a = with_threads(1, fn)
    b = with_threads(2, fn)
    for x, y in zip(a, b):
        assert torch.equal(x, y), "proposals differ between 1 and 2 threads"


def check_errors():
    gen = torch.Generator().manual_seed(25)
    anchors = anchors_for()
    obj, deltas = head_outputs(gen, 2)
    sizes = torch.tensor([[PAD_H, PAD_W]] * 2)
    bad = [o.clone() for o in obj]
    bad[1][1, 0, 3, 4] = float("nan")
    expect_error(lambda: ops.generate_proposals(bad, deltas, anchors, sizes, 100, 50),
                 "objectness[1] of image 1 contains NaN")
    expect_error(lambda: ops.generate_proposals(obj, deltas[:4], anchors, sizes, 100, 50),
                 "as many levels")
    expect_error(lambda: ops.generate_proposals(obj, [d[:, :8] for d in deltas], anchors, sizes,
                                                100, 50), "box_deltas[0] must be")
    expect_error(lambda: ops.generate_proposals(obj, deltas, anchors[::-1], sizes, 100, 50),
                 "anchors[0] must be [H*W*A, 4]")
    expect_error(lambda: ops.generate_proposals(obj, deltas, anchors, sizes[:1], 100, 50),
                 "image_sizes must be")
    expect_error(lambda: ops.generate_proposals(obj, deltas, anchors, sizes, 0, 50),
                 "pre_nms_top_n must be > 0")


if __name__ == "__main__":
    run([check_matches_reference, check_matches_torchvision_rpn, check_edge_cases,
         check_thread_determinism, check_errors])
