// Launch helpers shared by the project's CUDA kernels (torchvision's cuda_helpers.h idiom):
// grid-stride loops over 64-bit index spaces and grids capped at 4096 blocks, so one launch
// shape serves any problem size. And the arithmetic that must round as the CPU kernels do.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#define MRCNN_CUDA_1D_KERNEL_LOOP(i, n)                                                  \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

namespace mrcnn::ops::cuda {

// Explicitly rounded operations: nvcc may fuse a * b + c into one fused multiply-add, which rounds
// once where the CPU rounds twice; an expression that must equal the CPU's bit for bit (or that
// feeds a ceil or a comparison) is written with these.
__device__ inline float rn_mul(float a, float b) { return __fmul_rn(a, b); }
__device__ inline float rn_add(float a, float b) { return __fadd_rn(a, b); }
__device__ inline float rn_sub(float a, float b) { return __fsub_rn(a, b); }
__device__ inline float rn_div(float a, float b) { return __fdiv_rn(a, b); }
__device__ inline double rn_mul(double a, double b) { return __dmul_rn(a, b); }
__device__ inline double rn_add(double a, double b) { return __dadd_rn(a, b); }
__device__ inline double rn_sub(double a, double b) { return __dsub_rn(a, b); }
__device__ inline double rn_div(double a, double b) { return __ddiv_rn(a, b); }

// exp and log2 as the CPU's libm gives them: CUDA's expf and log2f are off by up to 2 ulp and 1
// ulp, the host's by about half an ulp (nearly always correctly rounded). In float, the double
// function rounded to float is correctly rounded but for values within about 1e-16 of a
// rounding boundary, so the two sides agree but for those.
__device__ inline float exp_like_host(float x) { return static_cast<float>(exp(static_cast<double>(x))); }
__device__ inline double exp_like_host(double x) { return exp(x); }
__device__ inline float log2_like_host(float x) { return static_cast<float>(log2(static_cast<double>(x))); }
__device__ inline double log2_like_host(double x) { return log2(x); }

inline constexpr int kThreadsPerBlock = 512;
inline constexpr int64_t kMaxBlocks = 4096;

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Blocks for a grid-stride loop over n items.
inline dim3 grid_for(int64_t n, int threads = kThreadsPerBlock) {
  return dim3(static_cast<unsigned>(std::max<int64_t>(1, std::min(ceil_div(n, threads), kMaxBlocks))));
}

}  // namespace mrcnn::ops::cuda
