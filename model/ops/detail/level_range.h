// Internal helper of the multi-level RoIAlign kernels (CPU and CUDA): the FPN level range that a
// list of spatial scales stands for, validated once.
#pragma once

#include <c10/util/ArrayRef.h>
#include <c10/util/Exception.h>

#include <cmath>
#include <cstdint>

namespace mrcnn::ops::detail {

struct LevelRange {
  int64_t k_min = 0;  // level of spatial_scales[0] (2 for P2 = 1/4)
  int64_t k_max = 0;  // level of spatial_scales.back()
};

// Scales must be 2^-k_min, 2^-(k_min+1), ..., one per feature level.
inline LevelRange fpn_level_range(c10::ArrayRef<double> spatial_scales, size_t num_levels,
                                  const char* op) {
  TORCH_CHECK(num_levels >= 1, op, ": expected at least one feature level");
  TORCH_CHECK(spatial_scales.size() == num_levels, op, ": expected one spatial scale per level (",
              num_levels, "), got ", spatial_scales.size());
  LevelRange r;
  for (size_t l = 0; l < num_levels; ++l) {
    const double s = spatial_scales[l];
    TORCH_CHECK(std::isfinite(s) && s > 0, op, ": spatial_scales[", l, "] = ", s,
                "; expected a power of two > 0");
    const double k = -std::log2(s);
    const double kr = std::nearbyint(k);
    TORCH_CHECK(std::abs(k - kr) < 1e-6, op, ": spatial_scales[", l, "] = ", s,
                " is not a power of two (FPN levels are 1/4, 1/8, ...)");
    if (l == 0) {
      r.k_min = static_cast<int64_t>(kr);
    } else {
      TORCH_CHECK(static_cast<int64_t>(kr) == r.k_min + static_cast<int64_t>(l), op,
                  ": spatial_scales must halve from one level to the next; spatial_scales[", l,
                  "] = ", s, " after ", spatial_scales[l - 1]);
    }
  }
  r.k_max = r.k_min + static_cast<int64_t>(num_levels) - 1;
  return r;
}

}  // namespace mrcnn::ops::detail
