#include "benchmark/run/warm_up.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <chrono>
#include <stdexcept>
#include <string>

#include "benchmark/data/batch.h"
#include "model/stage_losses.h"

namespace mrcnn::run {

WarmUpPlan warm_up_plan(const std::vector<data::ImageSize>& shapes, int64_t images, const model::ModelOptions& options) {
  if (images < 1) throw std::invalid_argument("warm-up: images per batch must be >= 1, got " + std::to_string(images));
  WarmUpPlan plan{.shapes = shapes, .images = images};
  const int64_t bucket = options.mask_head.roi_bucket;
  if (bucket > 1) {
    const auto most = static_cast<int64_t>(static_cast<double>(images * options.box_head.batch_size_per_image) *
                                           options.box_head.positive_fraction);
    for (int64_t k = bucket; k < most + bucket; k += bucket) plan.mask_head_rois.push_back(k);
  }
  return plan;
}

model::Batch warm_up_batch(const data::ImageSize& shape, int64_t images, int64_t num_classes, uint64_t seed) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const int64_t n = images, h = shape.height, w = shape.width, g = 3;
  model::Batch b;
  b.images = at::randn({n, 3, h, w}, gen).mul_(0.5);
  b.image_sizes = at::tensor({h, w}, at::kLong).repeat({n, 1});
  b.original_sizes = b.image_sizes.clone();
  b.gt_counts = at::full({n}, g, at::kLong);
  b.gt_boxes = at::empty({n, g, 4});
  b.gt_labels = at::empty({n, g}, at::kLong);
  const double hd = static_cast<double>(h), wd = static_cast<double>(w);
  for (int64_t i = 0; i < n; ++i) {
    std::vector<double> coords;
    for (int64_t j = 0; j < g; ++j) {
      // Boxes of a quarter, a third and a half of the image, offset per image: positives for
      // both stages, on several pyramid levels.
      const double f = 0.25 + 0.125 * static_cast<double>(j), off = 0.05 * static_cast<double>(i % 4);
      const double x1 = wd * off, y1 = hd * off, x2 = x1 + wd * f * 1.2, y2 = y1 + hd * f;
      b.gt_boxes[i][j] = at::tensor({x1, y1, x2, y2}, at::kFloat);
      b.gt_labels[i][j] = 1 + (i * g + j) % (num_classes - 1);
      coords.insert(coords.end(), {x1, y1, x2, y1, x2, y2, x1, y2});
    }
    b.gt_polygons.push_back(model::PolygonList{at::tensor(coords, at::kDouble), at::tensor({0, 8, 16, 24}, at::kLong),
                                               at::tensor({0, 1, 2, 3}, at::kLong)});
    b.image_ids.push_back(-1 - i);  // no COCO image has a negative id
  }
  return b;
}

WarmUpReport warm_up(model::MaskRCNN& net, const WarmUpPlan& plan, const c10::Device& device) {
  const auto t0 = std::chrono::steady_clock::now();
  WarmUpReport report;
  auto drop_gradients = [&net] {
    for (at::Tensor& p : net->parameters())
      if (p.grad().defined()) p.mutable_grad() = at::Tensor();
  };
  const int64_t classes = net->options().num_classes;
  net->train(true);
  at::Tensor last_loss;
  uint64_t seed = 0x5741524d;  // the warm-up's own: no stream of the run is drawn from
  for (const data::ImageSize& shape : plan.shapes) {
    const model::Batch batch = data::batch_to(warm_up_batch(shape, plan.images, classes, seed), device, false);
    for (int64_t pass = 0; pass < plan.passes; ++pass) {
      at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed++);
      last_loss = model::total_loss(net->forward_train(batch, gen).losses);
      last_loss.backward();
      drop_gradients();
      ++report.batches;
    }
  }
  if (!plan.shapes.empty() && !plan.mask_head_rois.empty()) {
    // On the first shape's features: the head's convolutions see the RoI count, not the shape.
    const model::Batch batch = data::batch_to(warm_up_batch(plan.shapes.front(), plan.images, classes, seed), device, false);
    net->warm_up_mask_head(batch, plan.mask_head_rois);
    drop_gradients();
    report.mask_head_sizes = static_cast<int64_t>(plan.mask_head_rois.size());
  }
  // The queued work done before the clock starts: reading a loss waits for its stream.
  if (last_loss.defined()) (void)last_loss.item<float>();
  if (const model::FeatureGraphs* graphs = net->feature_graphs()) report.graphs_captured = graphs->stats().captured;
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return report;
}

}  // namespace mrcnn::run
