#include "model/seeding.h"
#include "model/targets.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>

#include "model/ops/device_faults.h"
#include "model/ops/host_copy.h"

namespace mrcnn::model {
namespace {

[[noreturn]] void bad(const std::string& field, const std::string& expected,
                      const std::string& got) {
  throw std::invalid_argument("Batch." + field + ": expected " + expected + ", got " + got);
}

std::string shape_of(const at::Tensor& t) {
  if (!t.defined()) return "an undefined tensor";
  std::ostringstream os;
  os << t.scalar_type() << " " << t.sizes();
  return os.str();
}

void check_shape(const std::string& field, const at::Tensor& t, at::ScalarType dtype,
                 std::vector<int64_t> shape, const std::string& expected) {
  bool ok = t.defined() && t.scalar_type() == dtype && t.dim() == static_cast<int64_t>(shape.size());
  for (size_t d = 0; ok && d < shape.size(); ++d) ok = shape[d] < 0 || t.size(d) == shape[d];
  if (!ok) bad(field, expected, shape_of(t));
}

void check_targets_on_host(const Batch& batch, const at::Tensor& counts, int64_t num_classes) {
  const at::Tensor boxes = batch.gt_boxes.to(at::kDouble);
  auto c = counts.accessor<int64_t, 1>();
  auto b = boxes.accessor<double, 3>();
  auto l = batch.gt_labels.accessor<int64_t, 2>();
  for (int64_t i = 0; i < counts.size(0); ++i) {
    for (int64_t j = 0; j < c[i]; ++j) {
      const std::string row = "[" + std::to_string(i) + "][" + std::to_string(j) + "]";
      if (l[i][j] < 1 || l[i][j] >= num_classes)
        bad("gt_labels" + row, "a label in 1.." + std::to_string(num_classes - 1),
            std::to_string(l[i][j]));
      if (!(std::isfinite(b[i][j][0]) && std::isfinite(b[i][j][1]) && std::isfinite(b[i][j][2]) &&
            std::isfinite(b[i][j][3]) && b[i][j][2] > b[i][j][0] && b[i][j][3] > b[i][j][1])) {
        std::ostringstream got;
        got << "(" << b[i][j][0] << ", " << b[i][j][1] << ", " << b[i][j][2] << ", " << b[i][j][3]
            << ")";
        bad("gt_boxes" + row, "a finite box with x2 > x1 and y2 > y1", got.str());
      }
    }
  }
}

// The ground-truth rows below each image's count: a label outside 1..num_classes-1 or a box that
// is not finite with x2 > x1 and y2 > y1 sets kFaultBatchTargets, without reading the device.
void check_targets_on_device(const Batch& batch, const at::Tensor& counts_host, int64_t num_classes) {
  const c10::Device dev = batch.gt_boxes.device();
  const int64_t g = batch.gt_boxes.size(1);
  const at::Tensor counts = ops::copy_to_device_async(counts_host.contiguous(), dev);
  const at::Tensor rows = at::arange(g, at::TensorOptions().dtype(at::kLong).device(dev)).unsqueeze(0) <
                          counts.unsqueeze(1);  // [N, G]
  const at::Tensor b = batch.gt_boxes;
  const at::Tensor l = batch.gt_labels.to(dev);
  const at::Tensor box_ok = b.isfinite().all(2) & (b.select(2, 2) > b.select(2, 0)) & (b.select(2, 3) > b.select(2, 1));
  const at::Tensor label_ok = (l >= 1) & (l < num_classes);
  const at::Tensor bad_rows = rows & (box_ok & label_ok).logical_not();
  ops::device_fault_word(dev).bitwise_or_(bad_rows.any().to(at::kInt) * static_cast<int32_t>(ops::kFaultBatchTargets));
}

}  // namespace

void check_batch(const Batch& batch, int64_t num_classes, bool need_targets) {
  const at::Tensor& images = batch.images;
  if (!images.defined() || images.dim() != 4 || images.size(1) != 3 ||
      !at::isFloatingType(images.scalar_type()))
    bad("images", "a floating tensor [N, 3, H, W]", shape_of(images));
  const int64_t n = images.size(0), hp = images.size(2), wp = images.size(3);
  if (n < 1) bad("images", "at least one image", "an empty batch");
  if (hp % 32 != 0 || wp % 32 != 0)
    bad("images", "a padded size that is a multiple of 32",
        std::to_string(hp) + "x" + std::to_string(wp));

  check_shape("image_sizes", batch.image_sizes, at::kLong, {n, 2}, "int64 [N, 2] (N = images)");
  const at::Tensor sizes = batch.image_sizes.cpu();
  auto sz = sizes.accessor<int64_t, 2>();
  for (int64_t i = 0; i < n; ++i)
    if (sz[i][0] < 1 || sz[i][0] > hp || sz[i][1] < 1 || sz[i][1] > wp)
      bad("image_sizes[" + std::to_string(i) + "]",
          "a size within the padded " + std::to_string(hp) + "x" + std::to_string(wp),
          std::to_string(sz[i][0]) + "x" + std::to_string(sz[i][1]));
  if (batch.original_sizes.defined()) {
    check_shape("original_sizes", batch.original_sizes, at::kLong, {n, 2}, "int64 [N, 2]");
    if ((batch.original_sizes < 1).any().item<bool>())
      bad("original_sizes", "sizes >= 1", "a size below 1");
  }
  if (!batch.image_ids.empty() && static_cast<int64_t>(batch.image_ids.size()) != n)
    bad("image_ids", "none or one per image (" + std::to_string(n) + ")",
        std::to_string(batch.image_ids.size()));
  if (!need_targets) return;

  check_shape("gt_counts", batch.gt_counts, at::kLong, {n}, "int64 [N]");
  if (!batch.gt_boxes.defined() || batch.gt_boxes.dim() != 3 || batch.gt_boxes.size(0) != n ||
      batch.gt_boxes.size(2) != 4 || !at::isFloatingType(batch.gt_boxes.scalar_type()))
    bad("gt_boxes", "a floating tensor [N, G, 4]", shape_of(batch.gt_boxes));
  const int64_t g = batch.gt_boxes.size(1);
  check_shape("gt_labels", batch.gt_labels, at::kLong, {n, g}, "int64 [N, G] (G of gt_boxes)");
  if (static_cast<int64_t>(batch.gt_polygons.size()) != n)
    bad("gt_polygons", "one PolygonList per image (" + std::to_string(n) + ")",
        std::to_string(batch.gt_polygons.size()));

  const at::Tensor counts = batch.gt_counts.cpu();
  auto c = counts.accessor<int64_t, 1>();
  for (int64_t i = 0; i < n; ++i)
    if (c[i] < 0 || c[i] > g)
      bad("gt_counts[" + std::to_string(i) + "]", "a count in [0, " + std::to_string(g) + "]", std::to_string(c[i]));
  // Boxes and labels on a GPU are checked there, into the fault word the step reads anyway
  // (ops/device_faults.h): reading them back here would stall the device every step.
  if (batch.gt_boxes.is_cpu() && batch.gt_labels.is_cpu()) {
    check_targets_on_host(batch, counts, num_classes);
  } else {
    check_targets_on_device(batch, counts, num_classes);
  }
  for (int64_t i = 0; i < n; ++i) {
    const std::string img = "[" + std::to_string(i) + "]";
    try {
      batch.gt_polygons[i].check();
    } catch (const std::exception& e) {
      bad("gt_polygons" + img, "a consistent PolygonList", e.what());
    }
    if (batch.gt_polygons[i].num_instances() != c[i])
      bad("gt_polygons" + img, "gt_counts" + img + " = " + std::to_string(c[i]) + " instances",
          std::to_string(batch.gt_polygons[i].num_instances()));
  }
}

std::vector<ImageTargets> slice_targets(const Batch& batch, const c10::Device& device,
                                        at::ScalarType box_dtype) {
  const int64_t n = batch.size();
  const at::Tensor counts = batch.gt_counts.cpu();
  const at::Tensor sizes = batch.image_sizes.cpu();
  const at::Tensor boxes = batch.gt_boxes.to(device, box_dtype);
  const at::Tensor labels = batch.gt_labels.to(device);
  // Host values through accessors: a tensor per value (select, item) would be four operators an image.
  const auto c = counts.accessor<int64_t, 1>();
  const auto hw = sizes.accessor<int64_t, 2>();
  const std::vector<at::Tensor> image_boxes = boxes.unbind(0), image_labels = labels.unbind(0);
  std::vector<ImageTargets> out(n);
  for (int64_t i = 0; i < n; ++i) {
    out[i].boxes = image_boxes[i].slice(0, 0, c[i]);
    out[i].labels = image_labels[i].slice(0, 0, c[i]);
    out[i].polygons = &batch.gt_polygons[i];
    out[i].height = hw[i][0];
    out[i].width = hw[i][1];
  }
  return out;
}

std::vector<int64_t> image_keys(const Batch& batch) {
  if (!batch.image_ids.empty()) return batch.image_ids;
  std::vector<int64_t> keys(batch.size());
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = static_cast<int64_t>(i);
  return keys;
}

SampleStreams::SampleStreams(SamplingStreams mode, at::Generator& step_generator,
                             const std::vector<int64_t>& image_keys)
    : step_(&step_generator) {
  if (mode == SamplingStreams::kShared) return;
  // One draw per step, whatever the batch holds.
  const uint64_t step_draw = static_cast<uint64_t>(
      at::randint(std::numeric_limits<int64_t>::max(), {1}, step_generator,
                  at::TensorOptions().dtype(at::kLong).device(step_generator.device()))
          .item<int64_t>());
  per_image_.reserve(image_keys.size());
  for (int64_t key : image_keys)
    per_image_.push_back(at::make_generator<at::CPUGeneratorImpl>(seeding::image_sample_seed(step_draw, key)));
}

at::Generator& SampleStreams::for_image(int64_t i) {
  return per_image_.empty() ? *step_ : per_image_.at(static_cast<size_t>(i));
}

}  // namespace mrcnn::model
