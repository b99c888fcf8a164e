// The untimed warm-up before run_start (run.warm_up): what a device does once per batch shape,
// done inside MLPerf's init (at most 30 minutes in the closed division) instead of on the clock.
// NVIDIA's harness does the same: it pads every batch to one shape per orientation, captures a
// CUDA graph for each and runs synthetic batches through the finished model before run_start, so
// that cuDNN's plans are made untimed.
//
// For each shape of data.pad_to_shapes, `passes` training forwards and backwards of a synthetic
// batch of the rank's size (the first captures the shape's CUDA graphs where the run uses them;
// cuDNN plans, and times with run.cudnn_benchmark, every convolution it meets); then the mask head
// at every RoI count its bucket lets a step meet (mask_head.roi_bucket up to the most positives a
// step can sample), since its convolutions see that count as their batch size.
//
// It touches no dataset file (its batches are made here from a fixed seed), draws from none of
// the run's random streams (the trainer seeds every step itself), updates nothing (gradients are
// dropped, no optimizer step, no all-reduce: the gradient reducer ignores gradients outside a
// step) and changes no parameter's storage (the graphs it captures stay valid): a run with it
// trains bit for bit as one without.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <vector>

#include "benchmark/data/dataset.h"
#include "model/mask_rcnn.h"

namespace mrcnn::run {

struct WarmUpPlan {
  std::vector<data::ImageSize> shapes;  // padded batch shapes (data.pad_to_shapes)
  int64_t images = 1;                   // images a batch (the rank's share of the global batch)
  int64_t passes = 2;                   // forward and backward passes per shape
  std::vector<int64_t> mask_head_rois;  // RoI counts the mask head is run at (one pass each)
};

// The plan a system's run follows: its shapes and images per rank, and the mask head's counts:
// every multiple of mask_head.roi_bucket up to the most positive RoIs a step can sample (images ×
// box_head.batch_size_per_image × positive_fraction); none without a bucket (every count from 1
// up would be too many to warm).
WarmUpPlan warm_up_plan(const std::vector<data::ImageSize>& shapes, int64_t images, const model::ModelOptions& options);

// One synthetic training batch of `images` images, each the whole `shape`, with three boxes (and
// their rectangles as polygons) each: on the host, as the loader gives one.
model::Batch warm_up_batch(const data::ImageSize& shape, int64_t images, int64_t num_classes, uint64_t seed);

struct WarmUpReport {
  double seconds = 0;
  int64_t batches = 0;          // training passes run
  int64_t mask_head_sizes = 0;  // mask head passes run
  int64_t graphs_captured = 0;  // shapes whose CUDA graphs now exist (0 without graphs)
};

// Runs the plan on `net` (already on its device, in training mode), with the batches moved to
// `device` as the loader moves them. Leaves every parameter's gradient undefined.
WarmUpReport warm_up(model::MaskRCNN& net, const WarmUpPlan& plan, const c10::Device& device);

}  // namespace mrcnn::run
