// Batch assembly: several transformed samples -> one padded model::Batch (model/structures.h).
//   images     float32 [N, 3, Hp, Wp], Hp and Wp the largest resized size rounded up to a multiple
//              of size_divisible (32); padding is 0 (after normalization);
//   gt_*       padded to the batch's largest instance count G (rows >= gt_counts[i] are 0);
//   image_sizes, original_sizes, image_ids, gt_polygons per image.
// A batch where no image has an instance has G = 0 (gt_boxes [N, 0, 4]).
//
// Thread-safety: free functions; safe to call concurrently on different outputs.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <span>
#include <vector>

#include "benchmark/data/dataset.h"
#include "model/structures.h"

namespace mrcnn::data {

struct BatchOptions {
  // Padded height and width are multiples of this (the FPN's coarsest stride). >= 1.
  int64_t size_divisible = 32;
  // Allocate the batch in page-locked host memory, so that a later non-blocking copy to a CUDA
  // device overlaps with compute. Needs a CUDA runtime: leave off on CPU-only machines.
  bool pin_memory = false;
};

// The padded size of a batch of images of these sizes. Throws on an empty list.
ImageSize padded_batch_size(const std::vector<ImageSize>& sizes, int64_t size_divisible);

// Loads samples `indices` of `dataset` (in that order) into one padded batch on the host.
// Images are written straight into their slots; nothing is copied twice.
model::Batch load_batch(const Dataset& dataset, std::span<const int64_t> indices,
                        const EpochKey& key, const BatchOptions& options = {});

// Pads already-normalized images (each float32 [3, h, w], sizes matching samples[i].resized) and
// assembles the targets: the general path, for callers that hold images rather than a Dataset.
model::Batch collate(const std::vector<at::Tensor>& images, const std::vector<SampleTargets>& samples,
                     const BatchOptions& options = {});

// Fills every field but `images` from per-sample targets (images.size(0) == samples.size()).
void assemble_targets(model::Batch& batch, const std::vector<SampleTargets>& samples, bool pin_memory);

// The batch with its images, gt_boxes and gt_labels on `device`; the per-image metadata
// (image_sizes, gt_counts, original_sizes) and gt_polygons stay on the host, where the model
// reads them (model/structures.h). With a CUDA device and pinned host tensors, `non_blocking`
// copies asynchronously on the current stream. On the CPU it returns the batch as is.
model::Batch batch_to(const model::Batch& batch, const c10::Device& device, bool non_blocking);

}  // namespace mrcnn::data
