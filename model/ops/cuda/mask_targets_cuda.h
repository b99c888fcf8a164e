// The CUDA implementation of mask_targets (mask_targets_kernel.cu), called by mask_targets()
// when the proposals are on a GPU. Internal to mrcnn_ops; built only with MRCNN_HAVE_CUDA.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "model/ops/polygon_list.h"

namespace mrcnn::ops {

// Arguments as mask_targets() takes them, already checked on the host (shapes, resolution,
// the polygons' offsets); proposals on a CUDA device, matched_gt_index on it or on the host.
// Values are checked on the device: see kFaultMaskTarget (device_faults.h).
at::Tensor mask_targets_cuda(const PolygonList& gt_polygons, const at::Tensor& matched_gt_index,
                             const at::Tensor& proposals, int64_t resolution);

}  // namespace mrcnn::ops
