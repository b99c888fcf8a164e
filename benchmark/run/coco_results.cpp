#include "benchmark/run/coco_results.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

#include "eval/rle.h"

namespace mrcnn::run {

std::vector<uint64_t> label_map(std::vector<uint64_t> category_ids) {
  std::sort(category_ids.begin(), category_ids.end());
  category_ids.insert(category_ids.begin(), 0);  // label 0 is the background
  return category_ids;
}

std::vector<uint64_t> identity_label_map(int64_t num_classes) {
  std::vector<uint64_t> map(static_cast<size_t>(std::max<int64_t>(num_classes, 1)));
  std::iota(map.begin(), map.end(), uint64_t{0});
  return map;
}

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

std::vector<eval::Detection> to_coco_detections(const model::Detections& detections,
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

void to_coco_results(const model::Detections& detections, const std::vector<uint64_t>& label_to_category,
                     bool legacy_plus_one, std::vector<eval::Detection>& out) {
  std::vector<eval::Detection> dets = to_coco_detections(detections, label_to_category);
  if (legacy_plus_one)  // the reference's inclusive pixel boxes: width = x2 - x1 + 1
    for (auto& det : dets) {
      det.bbox[2] += 1;
      det.bbox[3] += 1;
    }
  out.insert(out.end(), std::make_move_iterator(dets.begin()), std::make_move_iterator(dets.end()));
}

nlohmann::ordered_json to_json(const eval::Detection& det) {
  nlohmann::ordered_json j{{"image_id", det.image_id},
                           {"category_id", det.category_id},
                           {"bbox", {det.bbox[0], det.bbox[1], det.bbox[2], det.bbox[3]}},
                           {"score", det.score}};
  const auto& seg = det.segmentation;
  if (seg.kind == eval::Segmentation::Kind::kCompressedRle)
    j["segmentation"] = {{"size", {seg.height, seg.width}}, {"counts", seg.compressed.str()}};
  else if (seg.kind == eval::Segmentation::Kind::kRle)
    j["segmentation"] = {{"size", {seg.height, seg.width}},
                         {"counts", eval::to_string(eval::from_counts(seg.counts, seg.height, seg.width))}};
  return j;
}

}  // namespace mrcnn::run
