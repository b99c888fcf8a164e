// Batch assembly: several transformed samples -> one padded model::Batch (model/structures.h).
//   images     float32 [N, 3, Hp, Wp], Hp and Wp the largest resized size rounded up to a multiple
//              of size_divisible (32), or the fixed shape that holds it (BatchOptions::shapes);
//              padding is 0 (after normalization);
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
  // Fixed shapes (height, width) to pad batches to, so that a run meets a few known shapes (CUDA
  // graphs and cuDNN plans made once, before the clock), as NVIDIA's ALWAYS_PAD_TO_MAX does with
  // (800, 1344) and (1344, 800). Empty: each batch is padded to its own size. Each shape is
  // positive and a multiple of size_divisible. See batch_shape().
  std::vector<ImageSize> shapes;
};

// The padded size of a batch of images of these sizes: the largest height and width, each
// rounded up to a multiple of size_divisible. Throws on an empty list.
ImageSize padded_batch_size(const std::vector<ImageSize>& sizes, int64_t size_divisible);

// Throws std::invalid_argument, naming the shape, unless every shape is positive and a multiple
// of size_divisible (>= 1).
void validate_shapes(const std::vector<ImageSize>& shapes, int64_t size_divisible);

// The size a batch of images of these sizes is padded to. Without options.shapes, its own padded
// size (padded_batch_size). With them, the shape of least area (ties: the first listed) whose
// height and width both hold the batch's own padded size; a batch that no shape holds keeps its
// own padded size. Throws std::invalid_argument on an empty list or a bad shape (validate_shapes).
ImageSize batch_shape(const std::vector<ImageSize>& sizes, const BatchOptions& options);

// Loads samples `indices` of `dataset` (in that order) into one batch on the host, padded to
// batch_shape().
// Images are written straight into their slots; nothing is copied twice.
model::Batch load_batch(const Dataset& dataset, std::span<const int64_t> indices,
                        const EpochKey& key, const BatchOptions& options = {});

// Pads already-normalized images (each float32 [3, h, w], sizes matching samples[i].resized) and
// assembles the targets: the general path, for callers that hold images rather than a Dataset.
// Padded to batch_shape(), as load_batch.
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
