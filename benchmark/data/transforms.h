// The reference's per-image transforms (maskrcnn-benchmark, the MLPerf Mask R-CNN reference):
//   Resize(800, 1333) -> RandomHorizontalFlip(0.5) -> ToTensor -> Normalize(to_bgr255=True)
// applied to the image (see resample.h for the pixels) and to its ground truth (here).
//
// Box convention. The reference converts COCO [x, y, w, h] to XYXY with TO_REMOVE = 1
// (x2 = x + w - 1), clips to [0, W-1] x [0, H-1], and flips with x' = W - x - 1, for boxes and for
// polygon coordinates alike. `legacy_plus_one` (default on, as the reference) selects that
// convention; off gives the continuous one of torchvision and detectron2 (x2 = x + w, clip to
// [0, W], flip x' = W - x). The model's box coder must use the same convention.
//
// Flip decisions are a pure function of (run seed, epoch, dataset index): they never depend on
// which thread loads the sample or in what order.
//
// Thread-safety: everything here is a pure function or an immutable value.
#pragma once

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

namespace mrcnn::data {

struct TransformOptions {
  // Resize: the short side becomes min_size unless the long side would exceed max_size, in which
  // case the long side becomes (about) max_size. MLPerf: 800 / 1333 for training and evaluation.
  int64_t min_size = 800;
  int64_t max_size = 1333;  // <= 0: no limit
  // Probability of a horizontal flip. MLPerf training: 0.5; evaluation: 0.
  double flip_probability = 0.5;
  // Pixel encoding for the backbone's weights. MLPerf (Caffe2 R-50 weights): BGR, 0..255,
  // mean [102.9801, 115.9465, 122.7717], std [1, 1, 1]. torchvision weights: see torchvision().
  // mean/std are given in the output channel order (B, G, R when to_bgr255).
  bool to_bgr255 = true;
  std::array<float, 3> pixel_mean = {102.9801f, 115.9465f, 122.7717f};
  std::array<float, 3> pixel_std = {1.0f, 1.0f, 1.0f};
  // The reference's TO_REMOVE = 1 box convention (see above).
  bool legacy_plus_one = true;
  // Decode JPEGs at 1/2..1/8 scale when the target is at most half the source (image_codec.h).
  // Never triggers at COCO's 800 px; saves most of the decode time for small targets.
  bool dct_downscale = true;

  // The MLPerf reference's training transform (the defaults above).
  static TransformOptions mlperf_train() { return {}; }
  // The same for evaluation: no flip.
  static TransformOptions mlperf_eval() {
    TransformOptions o;
    o.flip_probability = 0.0;
    return o;
  }
  // torchvision's detection weights: RGB in 0..1, ImageNet mean and std, continuous boxes.
  static TransformOptions torchvision() {
    TransformOptions o;
    o.to_bgr255 = false;
    o.pixel_mean = {0.485f, 0.456f, 0.406f};
    o.pixel_std = {0.229f, 0.224f, 0.225f};
    o.legacy_plus_one = false;
    return o;
  }

  // Throws std::invalid_argument naming the field when a value is out of range.
  void validate() const;
};

struct ImageSize {
  int64_t height = 0;
  int64_t width = 0;
  friend bool operator==(const ImageSize&, const ImageSize&) = default;
};

// The reference's Resize.get_size, to the same rounding: with w, h the source size,
//   size = min_size; if max(w,h)/min(w,h) * size > max_size: size = round_half_even(max_size *
//   min(w,h) / max(w,h)); if the short side already equals size: unchanged; else the short side
//   becomes size and the long side int(size * long / short) (truncated).
// REQUIRES: positive sizes. Throws std::invalid_argument otherwise.
ImageSize reference_resize_size(ImageSize source, int64_t min_size, int64_t max_size);

// True when sample `index` of `epoch` is flipped, with probability `p`.
bool flip_decision(uint64_t seed, int64_t epoch, int64_t index, double p);

// The ground truth of one image: boxes XYXY float32, contiguous labels, and each instance's
// polygons (flattened as in model::PolygonList: instance i owns polygons
// instance_offsets[i]..instance_offsets[i+1]-1, polygon j owns coords[poly_offsets[j] ..
// poly_offsets[j+1]) = x0, y0, x1, y1, ...).
struct InstanceTargets {
  std::vector<float> boxes;  // 4 per instance
  std::vector<int64_t> labels;
  std::vector<double> coords;
  std::vector<int64_t> poly_offsets{0};
  std::vector<int64_t> instance_offsets{0};

  int64_t size() const { return static_cast<int64_t>(labels.size()); }
};

// COCO [x, y, w, h] (float32, as the reference reads it) to XYXY under the convention.
std::array<float, 4> coco_box_to_xyxy(const std::array<float, 4>& xywh, bool legacy_plus_one);

// Clamps an XYXY box to the image and says whether it is still non-empty (x2 > x1, y2 > y1): the
// reference's clip_to_image(remove_empty=True).
bool clip_box(std::array<float, 4>& box, ImageSize image, bool legacy_plus_one);

// Scales boxes (float32, as the reference) and polygons (float64) from `from` to `to` pixels.
void resize_targets(InstanceTargets& t, ImageSize from, ImageSize to);

// Mirrors boxes and polygons left-right within an image `width` pixels wide.
void flip_targets(InstanceTargets& t, int64_t width, bool legacy_plus_one);

}  // namespace mrcnn::data
