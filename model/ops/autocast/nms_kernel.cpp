// Autocast of mrcnn::nms and mrcnn::batched_nms: IoUs of float16 boxes would round thresholds
// differently, so NMS always runs in float32 under autocast (the kept indices are the result).
#include <ATen/autocast_mode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/library.h>

#include "model/ops/nms.h"

namespace mrcnn::ops {
namespace {

template <c10::DispatchKey kAutocastKey, c10::DeviceType kDevice>
at::Tensor nms_autocast(const at::Tensor& boxes, const at::Tensor& scores, double iou_threshold) {
  c10::impl::ExcludeDispatchKeyGuard no_autocast(kAutocastKey);
  return nms(at::autocast::cached_cast(at::kFloat, boxes, kDevice),
             at::autocast::cached_cast(at::kFloat, scores, kDevice), iou_threshold);
}

template <c10::DispatchKey kAutocastKey, c10::DeviceType kDevice>
at::Tensor batched_nms_autocast(const at::Tensor& boxes, const at::Tensor& scores,
                                const at::Tensor& idxs, double iou_threshold) {
  c10::impl::ExcludeDispatchKeyGuard no_autocast(kAutocastKey);
  return batched_nms(at::autocast::cached_cast(at::kFloat, boxes, kDevice),
                     at::autocast::cached_cast(at::kFloat, scores, kDevice), idxs, iou_threshold);
}

}  // namespace

TORCH_LIBRARY_IMPL(mrcnn, AutocastCUDA, m) {
  m.impl("nms", TORCH_FN((nms_autocast<c10::DispatchKey::AutocastCUDA, c10::DeviceType::CUDA>)));
  m.impl("batched_nms",
         TORCH_FN((batched_nms_autocast<c10::DispatchKey::AutocastCUDA, c10::DeviceType::CUDA>)));
}

TORCH_LIBRARY_IMPL(mrcnn, AutocastCPU, m) {
  m.impl("nms", TORCH_FN((nms_autocast<c10::DispatchKey::AutocastCPU, c10::DeviceType::CPU>)));
  m.impl("batched_nms",
         TORCH_FN((batched_nms_autocast<c10::DispatchKey::AutocastCPU, c10::DeviceType::CPU>)));
}

}  // namespace mrcnn::ops
