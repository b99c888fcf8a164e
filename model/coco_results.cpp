#include "model/coco_results.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <stdexcept>
#include <string>

#include "eval/rle.h"

namespace mrcnn::model {

at::Tensor to_category_ids(const at::Tensor& labels,
                           const std::vector<uint64_t>& label_to_category) {
  const at::Tensor l = labels.to(at::kCPU, at::kLong).contiguous();
  const int64_t n = static_cast<int64_t>(label_to_category.size());
  at::Tensor out = at::empty({l.numel()}, at::kLong);
  const int64_t* src = l.const_data_ptr<int64_t>();
  int64_t* dst = out.data_ptr<int64_t>();
  for (int64_t i = 0; i < l.numel(); ++i) {
    if (src[i] < 1 || src[i] >= n)
      throw std::invalid_argument("label map: detection " + std::to_string(i) + " has label " +
                                  std::to_string(src[i]) + ", expected 1.." +
                                  std::to_string(n - 1) + " (the map holds " +
                                  std::to_string(n) + " entries, background first)");
    dst[i] = static_cast<int64_t>(label_to_category[static_cast<size_t>(src[i])]);
  }
  return out;
}

std::vector<eval::Detection> to_coco_detections(const Detections& detections,
                                                const std::vector<uint64_t>& label_to_category) {
  const int64_t d = detections.size();
  if (d == 0) return {};
  if (detections.scores.numel() != d || detections.labels.numel() != d ||
      (detections.masks.defined() && (detections.masks.dim() != 3 || detections.masks.size(0) != d)))
    throw std::invalid_argument("Detections: boxes, scores, labels and masks must describe " +
                                std::to_string(d) + " detections");
  if (detections.image_id < 0)
    throw std::invalid_argument("Detections: image_id is not set");
  const at::Tensor categories = to_category_ids(detections.labels, label_to_category);
  const at::Tensor boxes = detections.boxes.to(at::kCPU, at::kDouble).contiguous();
  const at::Tensor scores = detections.scores.to(at::kCPU, at::kDouble).contiguous();
  at::Tensor masks;
  if (detections.masks.defined()) masks = detections.masks.to(at::kCPU, at::kByte).contiguous();

  std::vector<eval::Detection> out(static_cast<size_t>(d));
  const double* b = boxes.const_data_ptr<double>();
  const double* s = scores.const_data_ptr<double>();
  const int64_t* c = categories.const_data_ptr<int64_t>();
  at::parallel_for(0, d, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      eval::Detection& e = out[static_cast<size_t>(i)];
      e.image_id = static_cast<uint64_t>(detections.image_id);
      e.category_id = static_cast<uint64_t>(c[i]);
      e.score = s[i];
      e.has_bbox = true;
      const double* r = b + 4 * i;
      e.bbox = {r[0], r[1], r[2] - r[0], r[3] - r[1]};
      if (masks.defined()) {
        const uint32_t h = static_cast<uint32_t>(masks.size(1)), w = static_cast<uint32_t>(masks.size(2));
        e.segmentation = eval::Segmentation::from_rle(
            eval::encode_row_major(masks.const_data_ptr<uint8_t>() + i * h * w, h, w));
      }
    }
  });
  return out;
}

}  // namespace mrcnn::model
