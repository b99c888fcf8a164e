// Per-image views of a padded Batch that the training losses work on, and the random streams
// the samplers draw from.
//
// Lifetime: an ImageTargets points at the PolygonList of the Batch it was sliced from; it must
// not outlive that Batch. Thread-safety: plain values; SampleStreams mutates generators and is
// for one thread.
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <vector>

#include "model/options.h"
#include "model/structures.h"

namespace mrcnn::model {

// Ground truth of one image without its padding rows.
struct ImageTargets {
  at::Tensor boxes;   // [G, 4] XYXY in resized-image pixels, model's device and dtype
  at::Tensor labels;  // int64 [G] contiguous labels 1..num_classes-1, on the model's device
  const PolygonList* polygons = nullptr;  // the instances' polygons (CPU), owned by the Batch
  int64_t height = 0;                     // true (resized, unpadded) image size
  int64_t width = 0;
};

// Checks `batch` (shapes, dtypes, sizes within the padding, counts within the padding, labels in
// 1..num_classes-1, one PolygonList per image holding gt_counts[i] instances when
// `need_targets`) and throws std::invalid_argument naming the field, what was expected and what
// arrived. Ground-truth boxes and labels on a GPU are checked there without a device read: an
// invalid one sets ops::kFaultBatchTargets in the fault word, which the trainer reads with the
// step's losses and reports as that step's error.
void check_batch(const Batch& batch, int64_t num_classes, bool need_targets);

// The per-image ground truth of a checked batch, moved to `device`, boxes in `box_dtype`.
std::vector<ImageTargets> slice_targets(const Batch& batch, const c10::Device& device,
                                        at::ScalarType box_dtype = at::kFloat);

// The random streams of one training step. kShared hands out the step's generator for every
// image; kPerImage derives one CPU generator per image from a single draw of the step's
// generator and the image's key (its COCO id, or its position when the batch has no ids), so
// an image's samples do not depend on its neighbours or its position in the batch.
class SampleStreams {
 public:
  // step_generator must outlive this object.
  SampleStreams(SamplingStreams mode, at::Generator& step_generator,
                const std::vector<int64_t>& image_keys);

  at::Generator& for_image(int64_t i);

 private:
  at::Generator* step_;
  std::vector<at::Generator> per_image_;  // empty in kShared mode
};

// The keys of SampleStreams for a batch: image_ids when present, else 0..N-1.
std::vector<int64_t> image_keys(const Batch& batch);

}  // namespace mrcnn::model
