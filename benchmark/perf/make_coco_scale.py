"""A generated COCO train2017-scale annotation file, for timing annotation readers at full scale.

The real instances_train2017.json (469,785,474 bytes) cannot ship with the project, and the
reading cost of a file scales with what is in it: how many images and instances, how many
polygon points, how long the crowd RLEs are. This writes a file with train2017's counts and the
shape of its contents, so a reader's time and memory on it are what they would be on the real one:

  * 118,287 images with COCO-like ids (below 581,930; file_name = 12-digit id + ".jpg") and the
    image sizes of the genuine train2017 cuts; 1,021 of them without annotations;
  * 860,001 instances, instances per image drawn from the cuts' distribution and rescaled to that
    total; about 0.9% crowd regions as *uncompressed* RLE ({"counts": [...], "size": [h, w]})
    with an integer bbox one pixel narrower and shorter than the mask's box, as COCO has them;
  * COCO's 80 categories (ids 1..90 with ten missing) and names, drawn with the cuts' frequencies;
  * polygons with the cuts' point counts (4..315) and polygons per instance (1..7), star-shaped
    around a centre so that each is simple; coordinates with 2 decimals, inside the image;
    bbox = the extent of the instance's points, area = the sum of its polygons' shoelace areas.

Every table below was measured on the genuine train2017 cuts coco128 and tiny80 (208 images,
1,644 instances; see `--print-stats DIR...`, which prints them again), so the script works in a
clone without those files. Same arguments, same bytes (numpy's seeded PCG64, fixed chunking).

  python benchmark/perf/make_coco_scale.py --out /tmp/coco-scale [--scale 1.0] [--seed 2017] [--images]
                                           [--split train2017|val2017]

writes DIR/annotations/instances_train2017.json and DIR/train2017/ (empty; with --images, one
small solid-grey JPEG of the record's size per image). At scale 1: 505,229,810 bytes (+7.5%
against the release), 35 s and 270 MB peak RSS on a 2-core EPYC; annotations are generated and
written a chunk of images at a time.
"""
import argparse
import io
import json
import os
import sys
import time

import numpy as np

# ---- the full release's counts ---------------------------------------------------------------
FULL_IMAGES = 118_287
FULL_INSTANCES = 860_001
FULL_EMPTY_IMAGES = 1_021
FULL_BYTES = 469_785_474
CROWD_FRACTION = 0.009
MAX_IMAGE_ID = 581_929          # train2017's ids lie in 9..581,929
MAX_ANNOTATION_ID = 2_240_000   # its non-crowd annotation ids lie below this
MIN_BOX = 4.0                   # px: every box is wider and taller than 1 px (the training filter)

INFO = {"description": "COCO 2017 Dataset", "url": "http://cocodataset.org", "version": "1.0",
        "year": 2017, "contributor": "COCO Consortium", "date_created": "2017/09/01"}

# ---- measured on the genuine cuts (coco128 + tiny80); value: count ---------------------------
INSTANCES_PER_IMAGE = {
    1: 16, 2: 35, 3: 25, 4: 19, 5: 11, 6: 12, 7: 9, 8: 11, 9: 8, 10: 5, 11: 5, 12: 5, 13: 8,
    14: 5, 15: 4, 16: 1, 17: 6, 18: 4, 20: 1, 21: 4, 23: 3, 24: 2, 25: 1, 32: 1, 34: 2, 40: 2,
    42: 1}
IMAGE_SIZES = {  # (width, height)
    (213, 140): 1, (333, 500): 2, (359, 640): 2, (360, 640): 1, (375, 500): 1, (381, 500): 1,
    (389, 500): 1, (400, 302): 1, (409, 500): 1, (416, 640): 1, (423, 640): 1, (426, 640): 2,
    (427, 640): 8, (428, 640): 1, (446, 640): 1, (448, 336): 2, (449, 640): 1, (450, 600): 1,
    (460, 312): 1, (469, 469): 1, (473, 500): 1, (480, 640): 20, (481, 640): 1, (500, 313): 1,
    (500, 332): 1, (500, 333): 3, (500, 346): 1, (500, 374): 2, (500, 375): 6, (500, 495): 1,
    (512, 640): 1, (516, 640): 1, (520, 640): 1, (565, 640): 1, (591, 640): 1, (600, 500): 1,
    (600, 593): 1, (600, 600): 1, (612, 612): 1, (638, 640): 1, (640, 218): 1, (640, 226): 1,
    (640, 248): 1, (640, 327): 1, (640, 359): 1, (640, 360): 1, (640, 383): 1, (640, 389): 1,
    (640, 406): 1, (640, 407): 1, (640, 409): 1, (640, 416): 1, (640, 418): 1, (640, 420): 1,
    (640, 421): 1, (640, 424): 3, (640, 425): 4, (640, 426): 8, (640, 427): 22, (640, 428): 6,
    (640, 429): 1, (640, 433): 1, (640, 446): 1, (640, 449): 1, (640, 457): 1, (640, 478): 2,
    (640, 480): 49, (640, 481): 2, (640, 482): 1, (640, 483): 1, (640, 484): 2, (640, 488): 1,
    (640, 489): 1, (640, 491): 1, (640, 498): 1, (640, 512): 1, (640, 513): 1, (640, 536): 1,
    (640, 573): 1, (640, 580): 1, (640, 611): 1}
POLYGONS_PER_INSTANCE = {1: 1491, 2: 103, 3: 22, 4: 8, 5: 2, 7: 2}
POINTS_PER_POLYGON = {
    4: 53, 5: 49, 6: 72, 7: 77, 8: 85, 9: 97, 10: 102, 11: 93, 12: 79, 13: 75, 14: 71, 15: 73,
    16: 73, 17: 55, 18: 45, 19: 50, 20: 46, 21: 41, 22: 38, 23: 35, 24: 32, 25: 29, 26: 26,
    27: 23, 28: 26, 29: 26, 30: 18, 31: 18, 32: 17, 33: 23, 34: 12, 35: 11, 36: 12, 37: 17,
    38: 10, 39: 11, 40: 8, 41: 9, 42: 6, 43: 5, 44: 14, 45: 6, 46: 8, 47: 5, 48: 3, 49: 6, 50: 4,
    51: 11, 52: 3, 53: 5, 54: 7, 55: 5, 56: 5, 57: 4, 58: 7, 59: 2, 60: 4, 61: 3, 63: 2, 64: 1,
    65: 2, 67: 3, 68: 3, 69: 2, 70: 4, 71: 1, 72: 1, 73: 2, 74: 5, 75: 2, 76: 3, 77: 2, 78: 1,
    79: 2, 80: 1, 81: 2, 82: 1, 83: 1, 86: 1, 87: 1, 89: 2, 90: 2, 91: 1, 93: 1, 95: 1, 96: 1,
    97: 1, 98: 2, 99: 1, 100: 1, 103: 3, 114: 1, 117: 1, 120: 1, 122: 2, 126: 2, 127: 1, 220: 1,
    315: 1}
CATEGORY_COUNTS = {  # non-crowd instances
    1: 394, 2: 13, 3: 93, 4: 9, 5: 9, 6: 8, 7: 4, 8: 18, 9: 8, 10: 34, 11: 2, 13: 4, 14: 3, 15: 15,
    16: 18, 17: 7, 18: 13, 19: 4, 20: 12, 21: 13, 22: 18, 23: 2, 24: 7, 25: 11, 27: 13, 28: 24,
    31: 32, 32: 8, 33: 6, 34: 6, 35: 5, 36: 8, 37: 11, 38: 11, 39: 7, 40: 11, 41: 7, 42: 4, 43: 8,
    44: 101, 46: 18, 47: 55, 48: 10, 49: 23, 50: 25, 51: 49, 52: 17, 53: 10, 54: 3, 55: 9, 56: 13,
    57: 50, 58: 3, 59: 6, 60: 16, 61: 7, 62: 61, 63: 10, 64: 22, 65: 9, 67: 26, 70: 7, 72: 7,
    73: 20, 74: 5, 75: 13, 76: 9, 77: 12, 78: 5, 79: 12, 80: 1, 81: 12, 82: 9, 84: 44, 85: 12,
    86: 5, 87: 2, 88: 22, 89: 1, 90: 7}
CROWD_CATEGORY_COUNTS = {1: 8, 3: 1, 28: 1, 44: 2, 57: 1, 60: 1, 62: 1, 84: 1}
LICENSE_COUNTS = {1: 62, 2: 27, 3: 55, 4: 28, 5: 21, 6: 12, 7: 3}
# Non-crowd box size sqrt(w*h / (W*H)) and aspect log(w/h) at the 0, 2.5, ..., 100th percentile.
SIZE_QUANTILES = [
    0.0036, 0.0143, 0.0191, 0.0221, 0.0251, 0.0288, 0.0332, 0.0363, 0.0393, 0.0427, 0.0451,
    0.0492, 0.0523, 0.0582, 0.0632, 0.0694, 0.074, 0.0803, 0.0888, 0.0966, 0.1041, 0.1099,
    0.1189, 0.1301, 0.1395, 0.1499, 0.1619, 0.1749, 0.1929, 0.2127, 0.2281, 0.2464, 0.2756,
    0.3096, 0.3517, 0.3991, 0.4514, 0.5267, 0.6421, 0.7911, 0.9989]
ASPECT_QUANTILES = [
    -2.258, -1.507, -1.289, -1.175, -1.078, -0.988, -0.903, -0.846, -0.782, -0.704, -0.65,
    -0.586, -0.533, -0.467, -0.424, -0.356, -0.306, -0.269, -0.219, -0.162, -0.121, -0.077,
    -0.038, 0.007, 0.041, 0.089, 0.136, 0.19, 0.241, 0.288, 0.332, 0.405, 0.47, 0.556, 0.637,
    0.72, 0.822, 0.925, 1.127, 1.39, 2.604]
CROWD_BOXES = [  # (w / W, h / H) of every crowd region in the cuts
    (0.09, 0.139), (0.163, 0.148), (0.166, 0.205), (0.19, 0.301), (0.27, 0.335), (0.287, 0.499),
    (0.45, 0.342), (0.62, 0.259), (0.63, 0.631), (0.717, 0.079), (0.823, 0.283), (0.838, 0.483),
    (0.955, 0.371), (0.958, 0.295), (0.996, 0.209), (0.998, 0.813)]
CATEGORIES = [  # (id, name, supercategory), as in the release
    (1, "person", "person"), (2, "bicycle", "vehicle"), (3, "car", "vehicle"),
    (4, "motorcycle", "vehicle"), (5, "airplane", "vehicle"), (6, "bus", "vehicle"),
    (7, "train", "vehicle"), (8, "truck", "vehicle"), (9, "boat", "vehicle"),
    (10, "traffic light", "outdoor"), (11, "fire hydrant", "outdoor"), (13, "stop sign", "outdoor"),
    (14, "parking meter", "outdoor"), (15, "bench", "outdoor"), (16, "bird", "animal"),
    (17, "cat", "animal"), (18, "dog", "animal"), (19, "horse", "animal"), (20, "sheep", "animal"),
    (21, "cow", "animal"), (22, "elephant", "animal"), (23, "bear", "animal"),
    (24, "zebra", "animal"), (25, "giraffe", "animal"), (27, "backpack", "accessory"),
    (28, "umbrella", "accessory"), (31, "handbag", "accessory"), (32, "tie", "accessory"),
    (33, "suitcase", "accessory"), (34, "frisbee", "sports"), (35, "skis", "sports"),
    (36, "snowboard", "sports"), (37, "sports ball", "sports"), (38, "kite", "sports"),
    (39, "baseball bat", "sports"), (40, "baseball glove", "sports"), (41, "skateboard", "sports"),
    (42, "surfboard", "sports"), (43, "tennis racket", "sports"), (44, "bottle", "kitchen"),
    (46, "wine glass", "kitchen"), (47, "cup", "kitchen"), (48, "fork", "kitchen"),
    (49, "knife", "kitchen"), (50, "spoon", "kitchen"), (51, "bowl", "kitchen"),
    (52, "banana", "food"), (53, "apple", "food"), (54, "sandwich", "food"), (55, "orange", "food"),
    (56, "broccoli", "food"), (57, "carrot", "food"), (58, "hot dog", "food"), (59, "pizza", "food"),
    (60, "donut", "food"), (61, "cake", "food"), (62, "chair", "furniture"),
    (63, "couch", "furniture"), (64, "potted plant", "furniture"), (65, "bed", "furniture"),
    (67, "dining table", "furniture"), (70, "toilet", "furniture"), (72, "tv", "electronic"),
    (73, "laptop", "electronic"), (74, "mouse", "electronic"), (75, "remote", "electronic"),
    (76, "keyboard", "electronic"), (77, "cell phone", "electronic"),
    (78, "microwave", "appliance"), (79, "oven", "appliance"), (80, "toaster", "appliance"),
    (81, "sink", "appliance"), (82, "refrigerator", "appliance"), (84, "book", "indoor"),
    (85, "clock", "indoor"), (86, "vase", "indoor"), (87, "scissors", "indoor"),
    (88, "teddy bear", "indoor"), (89, "hair drier", "indoor"), (90, "toothbrush", "indoor")]
LICENSES = [  # (id, name, url)
    (1, "Attribution-NonCommercial-ShareAlike License", "http://creativecommons.org/licenses/by-nc-sa/2.0/"),
    (2, "Attribution-NonCommercial License", "http://creativecommons.org/licenses/by-nc/2.0/"),
    (3, "Attribution-NonCommercial-NoDerivs License", "http://creativecommons.org/licenses/by-nc-nd/2.0/"),
    (4, "Attribution License", "http://creativecommons.org/licenses/by/2.0/"),
    (5, "Attribution-ShareAlike License", "http://creativecommons.org/licenses/by-sa/2.0/"),
    (6, "Attribution-NoDerivs License", "http://creativecommons.org/licenses/by-nd/2.0/"),
    (7, "No known copyright restrictions", "http://flickr.com/commons/usage/"),
    (8, "United States Government Work", "http://www.usa.gov/copyright.shtml")]

IMAGES_PER_CHUNK = 1000   # fixed: the bytes must not depend on anything but the arguments


def table(counts):
    """(values, probabilities) of a value: count table."""
    values = list(counts)
    weights = np.array([counts[v] for v in values], dtype=np.float64)
    return values, weights / weights.sum()


def draw(rng, counts, n):
    values, p = table(counts)
    return np.asarray(values)[rng.choice(len(values), size=n, p=p)]


class Progress:
    """A line on stderr at most every 2 s: the large file takes a minute."""

    def __init__(self, what, total):
        self.what, self.total, self.t0, self.last = what, total, time.perf_counter(), 0.0

    def __call__(self, done, final=False):
        now = time.perf_counter() - self.t0
        if final or now - self.last >= 2.0:
            self.last = now
            print(f"{self.what}: {done:,} of {self.total:,} ({100.0 * done / max(self.total, 1):.0f}%), "
                  f"{now:.1f} s", file=sys.stderr, flush=True)


# ---- the plan: how many of everything, where -------------------------------------------------

def instances_per_image(rng, n_nonempty, n_instances):
    """Draws from the cuts' distribution, rescaled so that the total is exactly n_instances.

    The cuts average 7.98 instances per annotated image and train2017 7.33: scaling each draw
    (with random rounding, never below 1) keeps the distribution's shape with the release's mean.
    """
    if n_instances < n_nonempty:
        raise SystemExit(f"error: {n_instances} instances cannot cover {n_nonempty} images")
    d = draw(rng, INSTANCES_PER_IMAGE, n_nonempty).astype(np.float64)
    d *= n_instances / d.sum()
    counts = np.maximum(1, np.floor(d + rng.random(n_nonempty))).astype(np.int64)
    while (diff := n_instances - int(counts.sum())) != 0:
        if diff > 0:
            np.add.at(counts, rng.choice(n_nonempty, size=diff), 1)
        else:
            above = np.flatnonzero(counts > 1)
            counts[rng.choice(above, size=min(-diff, above.size), replace=False)] -= 1
    return counts


def make_images(rng, n):
    ids = rng.choice(MAX_IMAGE_ID, size=n, replace=False) + 1   # random order, as in the release
    sizes = draw_sizes(rng, n)
    lic = draw(rng, LICENSE_COUNTS, n)
    day = rng.integers(14, 26, size=n)
    secs = rng.integers(0, 86400, size=n)
    farm = rng.integers(1, 10, size=n)
    server = rng.integers(1, 9000, size=n)
    photo = rng.integers(10**9, 10**10, size=n)
    secret = rng.integers(0, 16**10, size=n)
    images = []
    for i in range(n):
        name = f"{ids[i]:012d}.jpg"
        s = int(secs[i])
        images.append({
            "license": int(lic[i]), "file_name": name,
            "coco_url": f"http://images.cocodataset.org/train2017/{name}",
            "height": int(sizes[i, 1]), "width": int(sizes[i, 0]),
            "date_captured": f"2013-11-{day[i]:02d} {s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}",
            "flickr_url": f"http://farm{farm[i]}.staticflickr.com/{server[i]}/{photo[i]}_{secret[i]:010x}_z.jpg",
            "id": int(ids[i])})
    return images


def draw_sizes(rng, n):
    values, p = table(IMAGE_SIZES)
    return np.asarray(values, dtype=np.int64)[rng.choice(len(values), size=n, p=p)]


# ---- polygons: a chunk of instances at once ----------------------------------------------------

def polygon_instances(rng, W, H):
    """Non-crowd instances for images of sizes (W[i], H[i]), one entry per instance.

    Returns (per-instance arrays, per-polygon point counts and owners, the points): each polygon
    is star-shaped around its box's centre (angles strictly increasing, radii 0.55..1 of the
    half-box), so it is simple and lies inside its box, which lies inside the image.
    """
    n = W.size
    q = np.linspace(0.0, 1.0, len(SIZE_QUANTILES))
    size = np.interp(rng.random(n), q, SIZE_QUANTILES) * np.sqrt(W * H)
    aspect = np.exp(np.interp(rng.random(n), q, ASPECT_QUANTILES))
    bw = np.clip(size * np.sqrt(aspect), MIN_BOX, W)
    bh = np.clip(size / np.sqrt(aspect), MIN_BOX, H)
    bx = rng.random(n) * (W - bw)
    by = rng.random(n) * (H - bh)

    # An instance of several polygons (an occluded object) spreads them over its box.
    npoly = draw(rng, POLYGONS_PER_INSTANCE, n)
    owner = np.repeat(np.arange(n), npoly)
    P = owner.size
    single = npoly[owner] == 1
    frac = np.where(single, 1.0, 0.3 + 0.4 * rng.random(P))
    fy = np.where(single, 1.0, 0.3 + 0.4 * rng.random(P))
    pw = np.maximum(bw[owner] * frac, MIN_BOX * 0.5)
    ph = np.maximum(bh[owner] * fy, MIN_BOX * 0.5)
    px = bx[owner] + rng.random(P) * (bw[owner] - pw)
    py = by[owner] + rng.random(P) * (bh[owner] - ph)

    k = draw(rng, POINTS_PER_POLYGON, P)
    start = np.concatenate(([0], np.cumsum(k)[:-1]))
    poly_of = np.repeat(np.arange(P), k)
    Q = poly_of.size
    # Angles: cumulative positive gaps, normalised per polygon to one turn, plus a phase.
    gaps = 0.2 + rng.random(Q)
    c = np.cumsum(gaps)
    before = np.where(start > 0, c[start - 1], 0.0)
    total = np.add.reduceat(gaps, start)
    theta = 2 * np.pi * (c - before[poly_of]) / total[poly_of] + 2 * np.pi * rng.random(P)[poly_of]
    r = 0.55 + 0.45 * rng.random(Q)
    x = px[poly_of] + 0.5 * pw[poly_of] * (1 + r * np.cos(theta))
    y = py[poly_of] + 0.5 * ph[poly_of] * (1 + r * np.sin(theta))
    # 2 decimals as COCO has them; a value inside [0, W] stays inside when rounded.
    x = np.clip(np.round(x, 2), 0, W[owner][poly_of])
    y = np.clip(np.round(y, 2), 0, H[owner][poly_of])

    # Shoelace over the rounded points (what a reader sees), each polygon closed on itself.
    nxt = np.arange(1, Q + 1)
    nxt[start + k - 1] = start
    area_poly = 0.5 * np.abs(np.add.reduceat(x * y[nxt] - x[nxt] * y, start))
    pstart = np.concatenate(([0], np.cumsum(npoly)[:-1]))
    area = np.add.reduceat(area_poly, pstart)
    istart = start[pstart]
    x0, y0 = np.minimum.reduceat(x, istart), np.minimum.reduceat(y, istart)
    x1, y1 = np.maximum.reduceat(x, istart), np.maximum.reduceat(y, istart)
    bbox = np.stack([x0, y0, np.round(x1 - x0, 2), np.round(y1 - y0, 2)], axis=1)

    xy = np.empty(2 * Q)
    xy[0::2], xy[1::2] = x, y
    return npoly, k, area, bbox, xy


def crowd_rle(rng, W, H):
    """An uncompressed RLE blob of an image W x H: (counts, box [x, y, w, h] of the mask, pixels).

    One run of rows per column (a quarter of the columns split in two by a gap), top and bottom
    edges as random walks, so the counts are as long as COCO's (2-3 per column of the box).
    """
    rw, rh = CROWD_BOXES[rng.integers(len(CROWD_BOXES))]
    w = int(np.clip(round(rw * W * (0.8 + 0.4 * rng.random())), 8, W))
    h = int(np.clip(round(rh * H * (0.8 + 0.4 * rng.random())), 8, H))
    x0, y0 = int(rng.integers(0, W - w + 1)), int(rng.integers(0, H - h + 1))
    half = h // 2
    top = np.clip(np.cumsum(rng.integers(-2, 3, size=w)) + half // 2, 0, half - 1)
    bot = np.clip(np.cumsum(rng.integers(-2, 3, size=w)) + half // 2, 0, h - half - 1)
    top[rng.integers(w)] = 0                 # the mask touches its box's four sides
    bot[rng.integers(w)] = 0
    top, bot = y0 + top, y0 + h - 1 - bot   # inclusive rows, top <= y0+half-1 < y0+half <= bot
    cols = np.arange(x0, x0 + w)
    starts = cols * H + top
    ends = cols * H + bot + 1
    split = (rng.random(w) < 0.25) & (bot - top >= 4)
    gap0 = np.where(split, top + (bot - top) // 3, 0)
    gap1 = np.where(split, top + 2 * (bot - top) // 3, 0)
    starts = np.concatenate([starts, (cols * H + gap1)[split]])
    ends = np.concatenate([np.where(split, cols * H + gap0, ends), ends[split]])
    order = np.argsort(starts, kind="stable")
    starts, ends = starts[order], ends[order]
    # Runs that touch (a column ending on the last row, the next starting on the first) merge:
    # an RLE never holds an empty run after the first.
    brk = np.flatnonzero(starts[1:] != ends[:-1])
    first, last = np.concatenate(([0], brk + 1)), np.concatenate((brk, [starts.size - 1]))
    starts, ends = starts[first], ends[last]
    edges = np.empty(2 * starts.size + 1, dtype=np.int64)
    edges[0] = 0
    edges[1::2], edges[2::2] = starts, ends
    counts = np.diff(np.append(edges, W * H))
    return counts, (x0, y0, w, h), int((ends - starts).sum())


# ---- writing ---------------------------------------------------------------------------------

def annotation_chunks(rng, images, counts, crowd_images, ann_ids, stats):
    """Yields the JSON text of the non-crowd annotations, a chunk of images at a time, and
    collects the crowd ones (written last, as in the release)."""
    n = len(images)
    W = np.array([im["width"] for im in images], dtype=np.float64)
    H = np.array([im["height"] for im in images], dtype=np.float64)
    plain = counts - crowd_images
    next_id = 0
    crowd_text = []
    progress = Progress("annotations", int(counts.sum()))
    done = 0
    for lo in range(0, n, IMAGES_PER_CHUNK):
        hi = min(n, lo + IMAGES_PER_CHUNK)
        owner = np.repeat(np.arange(lo, hi), plain[lo:hi])
        npoly, k, area, bbox, xy = polygon_instances(rng, W[owner], H[owner])
        cats = draw(rng, CATEGORY_COUNTS, owner.size)
        xy, bbox, area = xy.tolist(), bbox.tolist(), area.tolist()
        anns = []
        p = q = 0
        for i in range(owner.size):
            seg = []
            for _ in range(npoly[i]):
                seg.append(xy[2 * q:2 * (q + k[p])])
                q += int(k[p])
                p += 1
            anns.append({"segmentation": seg, "area": area[i], "iscrowd": 0,
                         "image_id": images[owner[i]]["id"], "bbox": bbox[i],
                         "category_id": int(cats[i]), "id": int(ann_ids[next_id])})
            next_id += 1
        stats["polygons"] += p
        stats["points"] += q
        for j in np.flatnonzero(crowd_images[lo:hi]) + lo:
            crowd_text.append(crowd_annotation(rng, images[j]))
        done += owner.size + int(crowd_images[lo:hi].sum())
        progress(done)
        if anns:
            yield json.dumps(anns)[1:-1]
    progress(done, final=True)
    if crowd_text:
        yield ", ".join(crowd_text)


def crowd_annotation(rng, image):
    W, H = image["width"], image["height"]
    counts, (x, y, w, h), pixels = crowd_rle(rng, W, H)
    cat = int(draw(rng, CROWD_CATEGORY_COUNTS, 1)[0])
    # COCO's stored crowd fields, not the mask's: the box one pixel narrower and shorter, the
    # area an integer that is usually not the pixel count (readers must use the fields).
    area = int(pixels * (0.85 + 0.15 * rng.random()))
    return json.dumps({"segmentation": {"counts": counts.tolist(), "size": [H, W]}, "area": area,
                       "iscrowd": 1, "image_id": image["id"], "bbox": [x, y, w - 1, h - 1],
                       "category_id": cat, "id": 900_000_000_000 + cat * 100_000_000 + image["id"]})


# val2017's counts: 5,000 images, 48 of them without annotations, 36,781 instances.
VAL_IMAGES, VAL_EMPTY_IMAGES, VAL_INSTANCES = 5_000, 48, 36_781


def generate(out, scale, seed, with_images, split="train2017"):
    rng = np.random.default_rng(seed)
    if split == "val2017":
        n_images, n_empty, n_instances = VAL_IMAGES, VAL_EMPTY_IMAGES, VAL_INSTANCES
    else:
        n_images = max(1, round(FULL_IMAGES * scale))
        n_empty = min(n_images - 1, round(FULL_EMPTY_IMAGES * scale))
        n_instances = max(n_images - n_empty, round(FULL_INSTANCES * scale))
    n_crowd = round(CROWD_FRACTION * n_instances)

    images = make_images(rng, n_images)
    counts = np.zeros(n_images, dtype=np.int64)
    nonempty = np.sort(rng.choice(n_images, size=n_images - n_empty, replace=False))
    counts[nonempty] = instances_per_image(rng, nonempty.size, n_instances)
    # At most one crowd region per image here (COCO's crowd ids encode image and category).
    crowd_images = np.zeros(n_images, dtype=np.int64)
    crowd_images[rng.choice(nonempty, size=min(n_crowd, nonempty.size), replace=False)] = 1
    ann_ids = rng.choice(MAX_ANNOTATION_ID, size=n_instances - int(crowd_images.sum()), replace=False) + 1

    os.makedirs(os.path.join(out, "annotations"), exist_ok=True)
    os.makedirs(os.path.join(out, split), exist_ok=True)
    path = os.path.join(out, "annotations", f"instances_{split}.json")
    stats = {"polygons": 0, "points": 0}
    head = {"info": INFO,
            "licenses": [{"url": u, "id": i, "name": nm} for i, nm, u in LICENSES]}
    cats = [{"supercategory": s, "id": i, "name": nm} for i, nm, s in CATEGORIES]
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="ascii") as f:
        f.write(json.dumps(head)[:-1])
        f.write(', "images": ')
        f.write(json.dumps(images))
        f.write(', "annotations": [')
        first = True
        for text in annotation_chunks(rng, images, counts, crowd_images, ann_ids, stats):
            if not first:
                f.write(", ")
            f.write(text)
            first = False
        f.write('], "categories": ')
        f.write(json.dumps(cats))
        f.write("}")
    os.replace(tmp, path)
    if with_images:
        write_images(out, images, split)

    size = os.path.getsize(path)
    if split == "val2017":
        print(f"{path}: {size:,} bytes")
    else:
        target = FULL_BYTES * scale
        print(f"{path}: {size:,} bytes ({100.0 * (size / target - 1):+.1f}% against train2017's "
              f"{FULL_BYTES:,} x {scale:g})")
    print(f"images {n_images:,} (without annotations {n_empty:,}), instances {n_instances:,} "
          f"(crowd {int(crowd_images.sum()):,}), polygons {stats['polygons']:,}, "
          f"points {stats['points']:,}, categories {len(CATEGORIES)}")
    return path


def write_images(out, images, split="train2017"):
    """One solid grey JPEG per record, of the record's size (a few KB each): enough for tools
    that open every image, nothing for a decoder to chew on."""
    from PIL import Image
    cache = {}
    progress = Progress("images", len(images))
    for i, im in enumerate(images):
        key = (im["width"], im["height"])
        if key not in cache:
            buf = io.BytesIO()
            Image.new("RGB", key, (118, 118, 118)).save(buf, format="JPEG", quality=50)
            cache[key] = buf.getvalue()
        with open(os.path.join(out, split, im["file_name"]), "wb") as f:
            f.write(cache[key])
        progress(i + 1, final=i + 1 == len(images))


def print_stats(dirs):
    """The tables above, measured again on COCO folders (the genuine cuts)."""
    import collections
    imgs, anns, cats = [], [], None
    for d in dirs:
        with open(os.path.join(d, "annotations", "instances_train2017.json")) as f:
            j = json.load(f)
        imgs += j["images"]
        anns += j["annotations"]
        cats = cats or j["categories"]
    by_id = {im["id"]: im for im in imgs}
    per = collections.Counter(a["image_id"] for a in anns)
    plain = [a for a in anns if not a["iscrowd"]]
    crowd = [a for a in anns if a["iscrowd"]]

    def c(xs):
        return dict(sorted(collections.Counter(xs).items()))

    rel = [(a["bbox"][2] * a["bbox"][3]) / (by_id[a["image_id"]]["width"] * by_id[a["image_id"]]["height"])
           for a in plain]
    q = np.linspace(0, 100, len(SIZE_QUANTILES))
    print("INSTANCES_PER_IMAGE =", c(per[im["id"]] for im in imgs if per[im["id"]]))
    print("IMAGE_SIZES =", c((im["width"], im["height"]) for im in imgs))
    print("POLYGONS_PER_INSTANCE =", c(len(a["segmentation"]) for a in plain))
    print("POINTS_PER_POLYGON =", c(len(p) // 2 for a in plain for p in a["segmentation"]))
    print("CATEGORY_COUNTS =", c(a["category_id"] for a in plain))
    print("CROWD_CATEGORY_COUNTS =", c(a["category_id"] for a in crowd))
    print("LICENSE_COUNTS =", c(im["license"] for im in imgs))
    print("SIZE_QUANTILES =", [round(float(v), 4) for v in np.percentile(np.sqrt(rel), q)])
    print("ASPECT_QUANTILES =", [round(float(v), 3) for v in
                                 np.percentile([np.log(a["bbox"][2] / a["bbox"][3]) for a in plain], q)])
    print("CROWD_BOXES =", sorted((round(a["bbox"][2] / by_id[a["image_id"]]["width"], 3),
                                   round(a["bbox"][3] / by_id[a["image_id"]]["height"], 3)) for a in crowd))
    print("CATEGORIES =", [(x["id"], x["name"], x["supercategory"]) for x in cats])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="folder to write annotations/instances_train2017.json and train2017/ into")
    ap.add_argument("--scale", type=float, default=1.0, help="fraction of train2017's image count (default 1)")
    ap.add_argument("--seed", type=int, default=2017)
    ap.add_argument("--images", action="store_true", help="also write a small JPEG per image record")
    ap.add_argument("--split", choices=["train2017", "val2017"], default="train2017",
                    help="val2017: val2017's counts (5,000 images, 36,781 instances; --scale is "
                         "ignored) in annotations/instances_val2017.json and val2017/")
    ap.add_argument("--print-stats", nargs="+", metavar="DIR",
                    help="print the distribution tables measured on these COCO folders, write nothing")
    a = ap.parse_args()
    if a.print_stats:
        print_stats(a.print_stats)
        return 0
    if not a.out:
        ap.error("--out is required")
    if not 0 < a.scale <= 10:
        ap.error("--scale must lie in (0, 10]")
    t0 = time.perf_counter()
    generate(a.out, a.scale, a.seed, a.images, a.split)
    print(f"written in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
