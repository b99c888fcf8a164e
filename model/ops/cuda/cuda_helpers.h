// Launch helpers shared by the project's CUDA kernels (torchvision's cuda_helpers.h idiom):
// grid-stride loops over 64-bit index spaces and grids capped at 4096 blocks, so one launch
// shape serves any problem size.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#define MRCNN_CUDA_1D_KERNEL_LOOP(i, n)                                                  \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

namespace mrcnn::ops::cuda {

inline constexpr int kThreadsPerBlock = 512;
inline constexpr int64_t kMaxBlocks = 4096;

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Blocks for a grid-stride loop over n items.
inline dim3 grid_for(int64_t n, int threads = kThreadsPerBlock) {
  return dim3(static_cast<unsigned>(std::max<int64_t>(1, std::min(ceil_div(n, threads), kMaxBlocks))));
}

}  // namespace mrcnn::ops::cuda
