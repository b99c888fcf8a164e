#include "model/inverse_transform.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>

#include "model/ops/host_copy.h"
#include "model/ops/paste_masks.h"

namespace mrcnn::model {

std::vector<Detections> to_original_image(const std::vector<RawDetections>& raw, const Batch& batch,
                                          double mask_threshold) {
  RECORD_FUNCTION("mrcnn::postprocess", std::vector<c10::IValue>());
  const at::Tensor sizes = batch.image_sizes.cpu();
  const at::Tensor originals = batch.original_sizes.defined() ? batch.original_sizes.cpu() : sizes;
  std::vector<Detections> out(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    const int64_t h = sizes[i][0].item<int64_t>(), w = sizes[i][1].item<int64_t>();
    const int64_t oh = originals[i][0].item<int64_t>(), ow = originals[i][1].item<int64_t>();
    // Ratios in float32, as torchvision's resize_boxes computes them.
    const float rh = static_cast<float>(oh) / static_cast<float>(h);
    const float rw = static_cast<float>(ow) / static_cast<float>(w);
    const at::Tensor scale = ops::copy_to_device_async(
        at::tensor({rw, rh, rw, rh}, at::TensorOptions().dtype(at::kFloat)).to(raw[i].boxes.scalar_type()),
        raw[i].boxes.device());
    const at::Tensor boxes = raw[i].boxes * scale;
    Detections& d = out[i];
    d.masks = ops::paste_masks_in_image_binary(raw[i].mask_probs, boxes, oh, ow, /*padding=*/1, mask_threshold);
    d.boxes = boxes.to(at::kFloat);
    d.scores = raw[i].scores.to(at::kFloat);
    d.labels = raw[i].labels;
    if (!batch.image_ids.empty()) d.image_id = batch.image_ids[i];
  }
  return out;
}

}  // namespace mrcnn::model
