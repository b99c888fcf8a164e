// What the batch assembler and the Loader need from a dataset: its size, each sample's source and
// resized size without any I/O (so a batch's padded size is known before anything is decoded),
// and a load that decodes and transforms one sample straight into its slot of the batch.
//
// Implementations: CocoDataset (coco_dataset.h); tests define small in-memory ones.
// Thread-safety: load() is called concurrently from the Loader's worker threads on a const
// dataset; implementations must make it safe (no shared mutable state).
#pragma once

#include <cstdint>

#include "benchmark/data/transforms.h"

namespace mrcnn::data {

// Names the epoch whose samples are being produced: flips derive from (seed, epoch, index).
struct EpochKey {
  uint64_t seed = 0;
  int64_t epoch = 0;
};

// One sample's ground truth after the transforms: boxes and polygons in resized (and, when
// flipped, mirrored) pixels.
struct SampleTargets {
  int64_t image_id = -1;
  ImageSize original;  // source image size (the annotation file's width, height)
  ImageSize resized;   // size after resize, before padding
  bool flipped = false;
  InstanceTargets targets;
};

class Dataset {
 public:
  virtual ~Dataset() = default;

  virtual int64_t size() const = 0;
  // Source size of sample `index` (from the annotations; no I/O).
  virtual ImageSize original_size(int64_t index) const = 0;
  // Size after the resize transform (no I/O).
  virtual ImageSize resized_size(int64_t index) const = 0;
  // Decodes and transforms sample `index` and writes it, normalized, into `slot`: a contiguous
  // float32 [3, slot_h, slot_w] buffer with slot_h >= resized height and slot_w >= resized width.
  // The image goes top-left; every other element of the slot is set to 0. Returns the targets.
  // Throws std::runtime_error naming the file on any bad input.
  virtual SampleTargets load(int64_t index, const EpochKey& key, float* slot, int64_t slot_h,
                             int64_t slot_w) const = 0;
};

}  // namespace mrcnn::data
