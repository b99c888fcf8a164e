// Faults that GPU kernels find in their inputs, reported on the host.
//
// A CUDA kernel cannot throw, and a device-side assert (at::_assert_async) poisons the CUDA
// context: its message is lost and the run dies later at an unrelated line. The project's CUDA
// kernels instead guard the element they cannot compute (it is written as 0 or marked invalid,
// and nothing is read or written out of bounds) and set a bit in the device's fault word, an int32
// on that device. The host reads the word where it reads the device anyway (the trainer, with the
// step's losses; inference, with the detections), so checking costs no extra synchronization, and
// throws one error that names the op and the condition.
//
// CPU kernels check their inputs directly (TORCH_CHECK, the same conditions): the CPU word stays 0
// unless a test sets it.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace mrcnn::ops {

// Bits of the fault word.
enum DeviceFault : int32_t {
  kFaultRoiBatchIndex = 1 << 0,   // roi_align / multilevel_roi_align: rois[:, 0] not an image index
  kFaultObjectnessNaN = 1 << 1,   // generate_proposals: objectness contains NaN
  kFaultDecodeNaN = 1 << 2,       // generate_proposals: box_deltas decode to NaN for a kept anchor
  kFaultImageSize = 1 << 3,       // generate_proposals: an image size < 0
  kFaultPasteBox = 1 << 4,        // paste_masks_in_image: a box is not finite
  kFaultRoiLevel = 1 << 5,        // multilevel_roi_align: a level index outside the pyramid
  kFaultRoiBox = 1 << 6,          // roi_align: a box not finite, or too large to sample (> 2^20)
  kFaultMaskTarget = 1 << 7,      // mask_targets: a proposal, its instance index or a vertex invalid
  kFaultBatchTargets = 1 << 8,    // model::check_batch: a ground-truth box or label invalid on a GPU
};

// What each set bit means, one clause per fault, "; "-separated ("" for 0).
std::string describe_device_faults(int32_t bits);

// The fault word of `device`: an int32 tensor of one element on it, created (zero) on first use
// and kept for the life of the process. Kernels take word.data_ptr<int>().
at::Tensor device_fault_word(c10::Device device);

// Reads the faults recorded on `device` since the last call and clears them (one device-to-host
// copy). 0 for a device whose word was never created.
int32_t take_device_faults(c10::Device device);

// Throws c10::Error "<context>: <describe_device_faults(bits)>" unless bits is 0.
void throw_device_faults(int32_t bits, std::string_view context);

// take_device_faults + throw_device_faults.
void check_device_faults(c10::Device device, std::string_view context);

}  // namespace mrcnn::ops
