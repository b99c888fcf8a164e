// The synthetic shapes dataset: the project's built-in default dataset, a real COCO-format
// folder that the whole pipeline (loader, training, COCO evaluation) runs on unchanged:
//   DIR/annotations/instances_train2017.json, DIR/annotations/instances_val2017.json,
//   DIR/train2017/000000000001.jpg ..., DIR/val2017/...
//
// Each image shows 1-3 flat-coloured shapes of four classes -- disc (a 48-gon), square, triangle,
// cross -- on a mildly textured, low-saturation background. Each class has its own hue (red,
// green, blue, yellow, with some brightness jitter), objects are large (25-60% of the short
// side by default) and never touch one another (so no object is occluded and each polygon is
// exactly the region drawn), edges are anti-aliased over one pixel. Every annotation is the exact
// polygon that was rasterized, with coordinates rounded to 1/100 pixel before drawing.
//
// Why these defaults (320 training and 64 validation images of 128 x 128): a small Mask R-CNN
// trained from scratch on a 2-core CPU consumes about 2 images/s at this size, so an epoch takes
// minutes; the task is meant to be easy enough (four classes with colour cues, large isolated
// objects, exact masks) for box and mask AP to pass the MLPerf targets (0.377 / 0.339) within a
// few epochs -- the demo's training run is what demonstrates it. Generation takes well under a
// second per hundred images.
//
// Determinism: every image comes from its own generator seeded by (seed, split, index), JSON is
// written with sorted keys and shortest round-trip numbers, JPEGs with fixed encoder settings:
// the same arguments give byte-identical files, whatever the thread count. (Another libjpeg-turbo
// version may encode different JPEG bytes; the JSON does not depend on it.)
//
// Thread-safety: render_synthetic_image is a pure function; write_synthetic_dataset uses its own
// worker threads and must not run twice on the same folder at once.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "benchmark/data/image_codec.h"

namespace mrcnn::data {

struct SynthOptions {
  std::string out_dir;             // created if missing; existing files are overwritten
  int64_t train_images = 320;
  int64_t val_images = 64;
  int64_t width = 128;             // image size in pixels, >= 32
  int64_t height = 128;
  // Sizes (width, height) the images take in turn (image i of a split: sizes[i % n]) instead of
  // width x height: e.g. COCO's own sizes (synth --sizes-from), so that a loader and a model meet
  // its mix of sizes and both orientations. Each side from 32 to 8192.
  std::vector<std::array<int64_t, 2>> sizes;
  uint64_t seed = 1;
  int64_t min_objects = 1;         // per image, 1 <= min <= max <= 8
  int64_t max_objects = 3;
  double min_object_scale = 0.25;  // object extent as a fraction of the short side, in (0, 0.9]
  double max_object_scale = 0.60;
  int jpeg_quality = 92;           // 4:4:4 chroma: colour edges stay crisp
  int threads = 0;                 // 0: one per hardware thread
  bool progress = true;            // a progress line on stderr

  // Throws std::invalid_argument naming the option when a value is out of range.
  void validate() const;
};

// The classes, in category-id order (ids 1..4).
inline constexpr std::array<const char*, 4> kSynthCategories = {"disc", "square", "triangle", "cross"};

struct SynthObject {
  int category_id = 0;             // 1..4
  std::vector<double> polygon;     // x0, y0, x1, y1, ... (pixels, rounded to 0.01)
  std::array<double, 4> bbox{};    // COCO [x, y, w, h] of the polygon
  double area = 0.0;               // polygon area (shoelace)
};

struct SynthImage {
  Image image;
  std::vector<SynthObject> objects;
};

enum class SynthSplit : uint64_t { kTrain = 0, kVal = 1 };

// The (width, height) of image `index` of either split.
std::array<int64_t, 2> synth_image_size(const SynthOptions& options, int64_t index);

// Image `index` of `split`, as write_synthetic_dataset draws it.
SynthImage render_synthetic_image(const SynthOptions& options, SynthSplit split, int64_t index);

struct SynthSummary {
  int64_t train_images = 0, val_images = 0;
  int64_t train_objects = 0, val_objects = 0;
  double seconds = 0.0;
};

// Writes the whole dataset. Throws std::runtime_error naming the file on I/O errors.
SynthSummary write_synthetic_dataset(const SynthOptions& options);

}  // namespace mrcnn::data
