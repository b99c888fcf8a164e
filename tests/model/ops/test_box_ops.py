"""NMS, batched NMS, box utilities, box coder, anchors, matcher, sampler and mask paste against
torchvision's implementations on seeded random inputs, plus their edge cases."""
import torch
import torchvision
from torchvision.models.detection import _utils as det_utils
from torchvision.models.detection.anchor_utils import AnchorGenerator
from torchvision.models.detection.image_list import ImageList
from torchvision.models.detection.roi_heads import paste_masks_in_image

from ops_common import assert_close, expect_error, ops, random_boxes, run, with_threads


def distinct_scores(n, gen, dtype=torch.float32):
    """Scores without ties (a permutation of well-separated values)."""
    return (torch.randperm(n, generator=gen).to(torch.float64) / n + 0.001).to(dtype)


def check_nms_matches_torchvision():
    gen = torch.Generator().manual_seed(11)
    for dtype in (torch.float32, torch.float64):
        for n in (1, 7, 64, 65, 500):
            boxes = random_boxes(n, 200, 150, min_size=0.0, max_frac=0.3, gen=gen, dtype=dtype)
            scores = distinct_scores(n, gen, dtype)
            for thr in (0.0, 0.3, 0.5, 0.7, 1.0):
                ours = ops.nms(boxes, scores, thr)
                ref = torchvision.ops.nms(boxes, scores, thr)
                assert torch.equal(ours, ref), (dtype, n, thr)
                assert ours.dtype == torch.int64


def check_nms_ties_and_degenerate():
    gen = torch.Generator().manual_seed(12)
    boxes = random_boxes(200, 100, 100, min_size=0.0, max_frac=0.4, gen=gen)
    boxes[:20, 2] = boxes[:20, 0]                       # zero-area boxes never suppress
    equal = torch.full((200,), 0.5)
    ours = ops.nms(boxes, equal, 0.5)
    assert torch.equal(ours, torchvision.ops.nms(boxes, equal, 0.5)), "all scores equal"
    assert ours[0] == 0, "equal scores: lower index first"
    # Identical boxes: only the best survives; an IoU exactly at the threshold is kept.
    b = torch.tensor([[0.0, 0, 10, 10], [0.0, 0, 10, 10], [0.0, 0, 10, 5]])
    s = torch.tensor([0.5, 0.9, 0.7])
    assert ops.nms(b, s, 0.5).tolist() == [1, 2]       # IoU(1, 2) == 0.5 is not > 0.5
    assert ops.nms(b, s, 0.49).tolist() == [1]
    empty = ops.nms(torch.zeros(0, 4), torch.zeros(0), 0.5)
    assert empty.shape == (0,) and empty.dtype == torch.int64


def check_batched_nms_matches_torchvision():
    gen = torch.Generator().manual_seed(13)
    for n in (0, 1, 50, 3000):
        boxes = random_boxes(n, 300, 300, min_size=0.5, max_frac=0.2, gen=gen)
        scores = distinct_scores(n, gen)
        idxs = torch.randint(0, 7, (n,), generator=gen)
        for thr in (0.3, 0.7):
            ours = ops.batched_nms(boxes, scores, idxs, thr)
            ref = torchvision.ops.batched_nms(boxes, scores, idxs, thr)
            assert torch.equal(ours, ref), (n, thr)
    # Boxes of different categories never suppress each other.
    b = torch.tensor([[0.0, 0, 10, 10]] * 3)
    assert ops.batched_nms(b, torch.tensor([0.9, 0.8, 0.7]), torch.tensor([0, 1, 0]),
                           0.5).tolist() == [0, 1]
    # Thread count does not matter.
    boxes = random_boxes(4000, 300, 300, gen=gen)
    scores, idxs = distinct_scores(4000, gen), torch.randint(0, 20, (4000,), generator=gen)
    a = with_threads(1, lambda: ops.batched_nms(boxes, scores, idxs, 0.5))
    b = with_threads(2, lambda: ops.batched_nms(boxes, scores, idxs, 0.5))
    assert torch.equal(a, b)


def check_nms_errors():
    expect_error(lambda: ops.nms(torch.zeros(3, 5), torch.zeros(3), 0.5), "boxes must be [K, 4]")
    expect_error(lambda: ops.nms(torch.zeros(3, 4), torch.zeros(2), 0.5), "scores must be [K]")
    expect_error(lambda: ops.nms(torch.zeros(3, 4), torch.zeros(3, dtype=torch.float64), 0.5),
                 "same dtype")
    expect_error(lambda: ops.batched_nms(torch.zeros(3, 4), torch.zeros(3), torch.zeros(3), 0.5),
                 "idxs must be an integer")


def check_box_utilities():
    gen = torch.Generator().manual_seed(14)
    a = random_boxes(40, 100, 80, min_size=0.0, gen=gen)
    b = random_boxes(30, 100, 80, min_size=0.0, gen=gen)
    assert_close(ops.box_area(a), torchvision.ops.box_area(a), 1e-5, what="box_area")
    ours, ref = ops.box_iou(a, b), torchvision.ops.box_iou(a, b)
    assert torch.equal(torch.isnan(ours), torch.isnan(ref))
    assert_close(torch.nan_to_num(ours), torch.nan_to_num(ref), 1e-6, what="box_iou")
    assert ops.box_iou(a[:0], b).shape == (0, 30) and ops.box_iou(a, b[:0]).shape == (40, 0)
    outside = a * 2 - 50
    assert torch.equal(ops.clip_boxes_to_image(outside, 80, 100),
                       torchvision.ops.clip_boxes_to_image(outside, (80, 100)))
    for min_size in (0.0, 1e-3, 5.0, 30.0):
        assert torch.equal(ops.remove_small_boxes(a, min_size),
                           torchvision.ops.remove_small_boxes(a, min_size)), min_size


def check_box_coder_matches_torchvision():
    gen = torch.Generator().manual_seed(15)
    for weights in ((1.0, 1.0, 1.0, 1.0), (10.0, 10.0, 5.0, 5.0)):
        ref = det_utils.BoxCoder(weights)
        proposals = random_boxes(300, 600, 400, min_size=1.0, gen=gen)
        gt = random_boxes(300, 600, 400, min_size=1.0, gen=gen)
        assert_close(ops.box_encode(gt, proposals, list(weights)),
                     ref.encode_single(gt, proposals), 1e-5, 1e-5, what=f"encode {weights}")
        for classes in (1, 5):
            codes = torch.randn(300, 4 * classes, generator=gen) * 2
            codes[:10, 2::4] = 50.0                          # exercises the log(1000/16) clamp
            ours = ops.box_decode(codes, proposals, list(weights))
            theirs = ref.decode_single(codes, proposals)
            assert_close(ours, theirs, 1e-5, 1e-6, what=f"decode {weights} C={classes}")
        # Round trip, where the size ratio stays inside the clamp (exp(log(1000/16)) = 62.5).
        codes = ops.box_encode(gt, proposals, list(weights))
        inside = (codes[:, 2:] / torch.tensor(weights[2:])).max(1).values < 4.1
        assert inside.sum() > 200
        assert_close(ops.box_decode(codes, proposals, list(weights))[inside], gt[inside], 1e-3,
                     1e-5, what="round trip")


def check_anchors_match_torchvision():
    sizes = (32.0, 64.0, 128.0, 256.0, 512.0)
    ref = AnchorGenerator(tuple((s,) for s in sizes), ((0.5, 1.0, 2.0),) * 5)
    for (h, w) in ((800, 1344), (1344, 800), (800, 1088), (96, 160)):
        grids = [(h // 4, w // 4)]
        for _ in range(3):
            grids.append(((grids[-1][0] + 1) // 2, (grids[-1][1] + 1) // 2))
        grids.append(((grids[-1][0] + 1) // 2, (grids[-1][1] + 1) // 2))    # P6 by max-pool
        feats = [torch.zeros(1, 1, gh, gw) for gh, gw in grids]
        theirs = ref(ImageList(torch.zeros(1, 3, h, w), [(h, w)]), feats)[0]
        ours = ops.grid_anchors(list(sizes), [0.5, 1.0, 2.0], [x for g in grids for x in g], [h, w])
        assert [a.shape[0] for a in ours] == [gh * gw * 3 for gh, gw in grids]
        assert torch.equal(torch.cat(ours), theirs), (h, w)


def check_matcher_matches_torchvision():
    gen = torch.Generator().manual_seed(16)
    for high, low, allow in ((0.7, 0.3, True), (0.5, 0.5, False), (0.7, 0.3, False)):
        ref = det_utils.Matcher(high, low, allow)
        for g, p in ((1, 50), (5, 300), (20, 1000)):
            # Quantized IoUs: plenty of ties, some exactly at the thresholds.
            q = (torch.rand(g, p, generator=gen) * 20).floor() / 20
            q[:, :3] = 0.0
            assert torch.equal(ops.match(q, high, low, allow), ref(q)), (high, low, allow, g, p)
    # No ground truth: all background, where torchvision raises.
    out = ops.match(torch.zeros(0, 6), 0.7, 0.3, True)
    assert out.tolist() == [-1] * 6
    assert ops.match(torch.zeros(3, 0), 0.7, 0.3, True).shape == (0,)
    expect_error(lambda: ops.match(torch.zeros(2, 2), 0.3, 0.7, True), "low_threshold")


def check_sampler_reproduces_torchvision():
    gen = torch.Generator().manual_seed(17)
    ref = det_utils.BalancedPositiveNegativeSampler(256, 0.5)
    for trial in range(6):
        n = [0, 10, 500, 3000, 3000, 40][trial]
        labels = torch.randint(-1, 3, (n,), generator=gen)
        if trial == 4:
            labels[:] = 0                                       # no positives at all
        seed = 1000 + trial
        torch.manual_seed(seed)
        (pos_ref,), (neg_ref,) = ref([labels])
        ours_gen = torch.Generator().manual_seed(seed)
        pos, neg = ops.sample_positive_negative(labels, 256, 0.5, ours_gen)
        assert pos.dtype == torch.bool and neg.dtype == torch.bool
        assert torch.equal(pos, pos_ref.bool()) and torch.equal(neg, neg_ref.bool()), trial
        assert int(pos.sum()) <= 128 and int(pos.sum() + neg.sum()) <= 256
        assert not (pos & (labels < 1)).any() and not (neg & (labels != 0)).any()
    expect_error(lambda: ops.sample_positive_negative(torch.zeros(3, dtype=torch.int64), 4, 0.5,
                                                      None), "generator")


def check_paste_masks_match_torchvision():
    gen = torch.Generator().manual_seed(18)
    im_h, im_w = 90, 120
    for m in (28, 7):
        masks = torch.rand(40, 1, m, m, generator=gen)
        boxes = random_boxes(40, im_w, im_h, min_size=0.0, max_frac=0.7, gen=gen)
        boxes[0] = torch.tensor([-15.0, -10.0, 30.0, 25.0])       # beyond the top-left corner
        boxes[1] = torch.tensor([100.0, 70.0, 140.0, 95.0])       # beyond the bottom-right
        boxes[2] = torch.tensor([50.0, 40.0, 50.4, 40.2])         # tiny
        boxes[3] = torch.tensor([0.0, 0.0, 120.0, 90.0])          # whole image
        ref = paste_masks_in_image(masks, boxes, (im_h, im_w), padding=1)[:, 0]
        ours = ops.paste_masks_in_image(masks[:, 0], boxes, im_h, im_w, 1)
        assert_close(ours, ref, 1e-5, what=f"paste M={m}")
        binary = ops.paste_masks_in_image_binary(masks[:, 0], boxes, im_h, im_w, 1, 0.5)
        assert binary.dtype == torch.uint8
        assert torch.equal(binary.bool(), ours > 0.5), "binary paste == float paste > 0.5"
        assert (binary.bool() == (ref > 0.5)).float().mean() > 0.9999
    ours0 = ops.paste_masks_in_image(torch.zeros(0, 28, 28), torch.zeros(0, 4), 10, 12, 1)
    assert ours0.shape == (0, 10, 12)
    # Padding 0 and 2 too.
    masks = torch.rand(5, 1, 14, 14, generator=gen)
    boxes = random_boxes(5, 60, 60, gen=gen)
    for padding in (0, 2):
        assert_close(ops.paste_masks_in_image(masks[:, 0], boxes, 64, 64, padding),
                     paste_masks_in_image(masks, boxes, (64, 64), padding=padding)[:, 0], 1e-5,
                     what=f"padding {padding}")
    # A box entirely outside the image pastes nothing (torchvision fails on it).
    assert not ops.paste_masks_in_image(masks[:1, 0], torch.tensor([[-50.0, -40.0, -20.0, -5.0]]),
                                        64, 64, 1).any()
    expect_error(lambda: ops.paste_masks_in_image(torch.rand(2, 5, 5), torch.zeros(3, 4), 8, 8, 1),
                 "boxes must be [D, 4]")


if __name__ == "__main__":
    run([check_nms_matches_torchvision, check_nms_ties_and_degenerate,
         check_batched_nms_matches_torchvision, check_nms_errors, check_box_utilities,
         check_box_coder_matches_torchvision, check_anchors_match_torchvision,
         check_matcher_matches_torchvision, check_sampler_reproduces_torchvision,
         check_paste_masks_match_torchvision])
