#include "benchmark/data/batch.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

namespace mrcnn::data {

namespace {

at::TensorOptions host(at::ScalarType dtype, bool pin) {
  return at::TensorOptions().dtype(dtype).device(at::kCPU).pinned_memory(pin);
}

at::Tensor zeros_host(at::IntArrayRef sizes, at::ScalarType dtype, bool pin) {
  return at::empty(sizes, host(dtype, pin)).zero_();
}

template <typename T>
at::Tensor vector_tensor(const std::vector<T>& v, at::ScalarType dtype) {
  at::Tensor t = at::empty({static_cast<int64_t>(v.size())}, host(dtype, false));
  if (!v.empty()) std::memcpy(t.data_ptr(), v.data(), v.size() * sizeof(T));
  return t;
}

void check_targets(const SampleTargets& s, size_t j) {
  const InstanceTargets& t = s.targets;
  const auto n = static_cast<size_t>(t.size());
  const bool ok = t.boxes.size() == 4 * n && t.instance_offsets.size() == n + 1 &&
                  !t.poly_offsets.empty() && t.poly_offsets.front() == 0 &&
                  t.poly_offsets.back() == static_cast<int64_t>(t.coords.size()) &&
                  t.instance_offsets.front() == 0 &&
                  t.instance_offsets.back() == static_cast<int64_t>(t.poly_offsets.size()) - 1;
  if (!ok)
    throw std::invalid_argument("batch: targets of sample " + std::to_string(j) + " (image id " +
                                std::to_string(s.image_id) + ") are inconsistent");
}

}  // namespace

ImageSize padded_batch_size(const std::vector<ImageSize>& sizes, int64_t size_divisible) {
  if (sizes.empty()) throw std::invalid_argument("padded_batch_size: empty batch");
  if (size_divisible < 1)
    throw std::invalid_argument("padded_batch_size: size_divisible must be >= 1, got " +
                                std::to_string(size_divisible));
  ImageSize m;
  for (const ImageSize& s : sizes) {
    m.height = std::max(m.height, s.height);
    m.width = std::max(m.width, s.width);
  }
  m.height = (m.height + size_divisible - 1) / size_divisible * size_divisible;
  m.width = (m.width + size_divisible - 1) / size_divisible * size_divisible;
  return m;
}

void validate_shapes(const std::vector<ImageSize>& shapes, int64_t size_divisible) {
  if (size_divisible < 1)
    throw std::invalid_argument("pad shapes: size_divisible must be >= 1, got " + std::to_string(size_divisible));
  for (size_t k = 0; k < shapes.size(); ++k) {
    const ImageSize& s = shapes[k];
    if (s.height < 1 || s.width < 1 || s.height % size_divisible != 0 || s.width % size_divisible != 0)
      throw std::invalid_argument("pad shapes: shape " + std::to_string(k) + " (" + std::to_string(s.height) +
                                  "x" + std::to_string(s.width) +
                                  ") must be positive and a multiple of size_divisible " +
                                  std::to_string(size_divisible) + " in height and width");
  }
}

ImageSize batch_shape(const std::vector<ImageSize>& sizes, const BatchOptions& options) {
  const ImageSize own = padded_batch_size(sizes, options.size_divisible);
  if (options.shapes.empty()) return own;
  validate_shapes(options.shapes, options.size_divisible);
  const ImageSize* best = nullptr;
  for (const ImageSize& s : options.shapes)
    if (s.height >= own.height && s.width >= own.width &&
        (best == nullptr || s.height * s.width < best->height * best->width))
      best = &s;
  return best != nullptr ? *best : own;
}

void assemble_targets(model::Batch& batch, const std::vector<SampleTargets>& samples, bool pin) {
  const auto n = static_cast<int64_t>(samples.size());
  int64_t g = 0;
  for (size_t j = 0; j < samples.size(); ++j) {
    check_targets(samples[j], j);
    g = std::max(g, samples[j].targets.size());
  }
  batch.gt_boxes = zeros_host({n, g, 4}, at::kFloat, pin);
  batch.gt_labels = zeros_host({n, g}, at::kLong, pin);
  batch.gt_counts = zeros_host({n}, at::kLong, pin);
  batch.image_sizes = zeros_host({n, 2}, at::kLong, pin);
  batch.original_sizes = zeros_host({n, 2}, at::kLong, pin);
  float* boxes = batch.gt_boxes.data_ptr<float>();
  int64_t* labels = batch.gt_labels.data_ptr<int64_t>();
  int64_t* counts = batch.gt_counts.data_ptr<int64_t>();
  int64_t* sizes = batch.image_sizes.data_ptr<int64_t>();
  int64_t* orig = batch.original_sizes.data_ptr<int64_t>();
  batch.gt_polygons.clear();
  batch.image_ids.clear();
  batch.gt_polygons.reserve(samples.size());
  batch.image_ids.reserve(samples.size());
  for (int64_t i = 0; i < n; ++i) {
    const SampleTargets& s = samples[static_cast<size_t>(i)];
    const InstanceTargets& t = s.targets;
    const int64_t c = t.size();
    counts[i] = c;
    if (c > 0) {
      std::memcpy(boxes + i * g * 4, t.boxes.data(), sizeof(float) * static_cast<size_t>(c * 4));
      std::memcpy(labels + i * g, t.labels.data(), sizeof(int64_t) * static_cast<size_t>(c));
    }
    sizes[2 * i] = s.resized.height;
    sizes[2 * i + 1] = s.resized.width;
    orig[2 * i] = s.original.height;
    orig[2 * i + 1] = s.original.width;
    batch.gt_polygons.push_back(model::PolygonList{vector_tensor(t.coords, at::kDouble),
                                                   vector_tensor(t.poly_offsets, at::kLong),
                                                   vector_tensor(t.instance_offsets, at::kLong)});
    batch.image_ids.push_back(s.image_id);
  }
}

model::Batch load_batch(const Dataset& dataset, std::span<const int64_t> indices,
                        const EpochKey& key, const BatchOptions& options) {
  if (indices.empty()) throw std::invalid_argument("load_batch: empty list of samples");
  std::vector<ImageSize> sizes;
  sizes.reserve(indices.size());
  for (int64_t i : indices) {
    if (i < 0 || i >= dataset.size())
      throw std::out_of_range("load_batch: sample index " + std::to_string(i) +
                              " outside the dataset of " + std::to_string(dataset.size()));
    sizes.push_back(dataset.resized_size(i));
  }
  const ImageSize pad = batch_shape(sizes, options);
  const auto n = static_cast<int64_t>(indices.size());
  model::Batch batch;
  batch.images = at::empty({n, 3, pad.height, pad.width}, host(at::kFloat, options.pin_memory));
  float* base = batch.images.data_ptr<float>();
  const int64_t slot = 3 * pad.height * pad.width;
  std::vector<SampleTargets> samples;
  samples.reserve(indices.size());
  for (int64_t j = 0; j < n; ++j) {
    samples.push_back(dataset.load(indices[static_cast<size_t>(j)], key, base + j * slot, pad.height,
                                   pad.width));
    if (!(samples.back().resized == sizes[static_cast<size_t>(j)]))
      throw std::logic_error("load_batch: sample " + std::to_string(indices[static_cast<size_t>(j)]) +
                             " came back at a size other than its resized_size()");
  }
  assemble_targets(batch, samples, options.pin_memory);
  return batch;
}

model::Batch collate(const std::vector<at::Tensor>& images, const std::vector<SampleTargets>& samples,
                     const BatchOptions& options) {
  if (images.empty() || images.size() != samples.size())
    throw std::invalid_argument("collate: need one image per sample and at least one, got " +
                                std::to_string(images.size()) + " images and " +
                                std::to_string(samples.size()) + " samples");
  std::vector<ImageSize> sizes;
  for (size_t j = 0; j < images.size(); ++j) {
    const at::Tensor& im = images[j];
    if (im.dim() != 3 || im.size(0) != 3 || im.scalar_type() != at::kFloat)
      throw std::invalid_argument("collate: image " + std::to_string(j) + " must be float32 [3, h, w]");
    const ImageSize s{im.size(1), im.size(2)};
    if (!(s == samples[j].resized))
      throw std::invalid_argument("collate: image " + std::to_string(j) + " is " +
                                  std::to_string(s.height) + "x" + std::to_string(s.width) +
                                  " but its targets say " + std::to_string(samples[j].resized.height) +
                                  "x" + std::to_string(samples[j].resized.width));
    sizes.push_back(s);
  }
  const ImageSize pad = batch_shape(sizes, options);
  const auto n = static_cast<int64_t>(images.size());
  model::Batch batch;
  batch.images = zeros_host({n, 3, pad.height, pad.width}, at::kFloat, options.pin_memory);
  for (int64_t j = 0; j < n; ++j) {
    const ImageSize& s = sizes[static_cast<size_t>(j)];
    batch.images[j].narrow(1, 0, s.height).narrow(2, 0, s.width).copy_(images[static_cast<size_t>(j)]);
  }
  assemble_targets(batch, samples, options.pin_memory);
  return batch;
}

model::Batch batch_to(const model::Batch& batch, const c10::Device& device, bool non_blocking) {
  if (device.is_cpu()) return batch;
  const auto opts = at::TensorOptions().device(device);
  model::Batch out = batch;
  out.images = batch.images.to(opts, non_blocking);
  out.gt_boxes = batch.gt_boxes.to(opts, non_blocking);
  out.gt_labels = batch.gt_labels.to(opts, non_blocking);
  // image_sizes, gt_counts and original_sizes stay on the host: the model reads them there
  // (checks, slicing, padding masks), and a device copy would cost a blocking read each.
  return out;
}

}  // namespace mrcnn::data
