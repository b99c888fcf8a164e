#include "model/ops/device_faults.h"

#include <ATen/ops/zeros.h>
#include <c10/util/Exception.h>

#include <map>
#include <mutex>
#include <utility>

namespace mrcnn::ops {
namespace {

struct Registry {
  std::mutex mutex;
  std::map<std::pair<int, int>, at::Tensor> words;  // (device type, index) -> word
};

Registry& registry() {
  static auto* r = new Registry;  // never destroyed: kernels may run during static destruction
  return *r;
}

std::pair<int, int> key_of(c10::Device device) {
  return {static_cast<int>(device.type()), device.has_index() ? device.index() : -1};
}

}  // namespace

std::string describe_device_faults(int32_t bits) {
  static constexpr std::pair<int32_t, const char*> kMeaning[] = {
      {kFaultRoiBatchIndex, "rois[:, 0] of roi_align must be batch indices of the features"},
      {kFaultObjectnessNaN, "generate_proposals: objectness contains NaN"},
      {kFaultDecodeNaN, "generate_proposals: box_deltas decode to NaN for a selected anchor"},
      {kFaultImageSize, "generate_proposals: image_sizes must be >= 0"},
      {kFaultPasteBox, "paste_masks_in_image: boxes must be finite"},
      {kFaultRoiLevel, "multilevel_roi_align: a RoI was mapped outside the feature pyramid"},
      {kFaultRoiBox, "roi_align: a RoI's box is not finite or needs a sampling grid over 2^20 per bin"},
      {kFaultMaskTarget,
       "mask_targets: a proposal is not finite, its matched_gt_index is not an instance of the image, "
       "or a polygon vertex in its frame is not finite or beyond +-1e8"},
      {kFaultBatchTargets,
       "the batch's ground truth: a box is not finite with x2 > x1 and y2 > y1, or a label is not a class "
       "1..num_classes-1"},
  };
  std::string out;
  int32_t known = 0;
  for (const auto& [bit, meaning] : kMeaning) {
    known |= bit;
    if (bits & bit) out += (out.empty() ? "" : "; ") + std::string(meaning);
  }
  if (bits & ~known) out += (out.empty() ? "" : "; ") + ("unknown fault bits " + std::to_string(bits & ~known));
  return out;
}

at::Tensor device_fault_word(c10::Device device) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  at::Tensor& w = r.words[key_of(device)];
  if (!w.defined()) w = at::zeros({1}, at::TensorOptions().dtype(at::kInt).device(device));
  return w;
}

int32_t take_device_faults(c10::Device device) {
  at::Tensor word;
  {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    auto it = r.words.find(key_of(device));
    if (it == r.words.end()) return 0;
    word = it->second;
  }
  const int32_t bits = word.item<int32_t>();
  if (bits != 0) word.zero_();
  return bits;
}

void throw_device_faults(int32_t bits, std::string_view context) {
  if (bits == 0) return;
  TORCH_CHECK(false, context, context.empty() ? "" : ": ", describe_device_faults(bits));
}

void check_device_faults(c10::Device device, std::string_view context) {
  throw_device_faults(take_device_faults(device), context);
}

}  // namespace mrcnn::ops
