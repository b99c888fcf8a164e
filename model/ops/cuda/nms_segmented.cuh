// Segmented greedy NMS on CUDA, shared by nms, batched_nms and proposal generation: many
// independent problems (segments) solved by two launches, with no host round trip.
//
//   1. mask kernel (torchvision's bitmask NMS, one more grid dimension for the segment): for
//      every box i and every later box j of its segment, bit j of row i says IoU(i, j) > t;
//   2. reduce kernel: one block per segment walks its boxes in order, keeping a box when no
//      kept box has marked it, and ORs the kept box's row into the shared "removed" bits.
//
// Boxes are given sorted (visiting order) per segment; an optional validity flag marks boxes
// that may neither be kept nor suppress others (proposal generation's filtered boxes).
// Arithmetic: IoU in the boxes' dtype with explicitly rounded operations (no fused
// multiply-add), so a CUDA result equals the CPU kernel's, compared with the same threshold
// (the largest value of the dtype that is <= the double threshold).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "model/ops/cuda/cuda_helpers.h"

namespace mrcnn::ops::cuda {

inline constexpr int kNmsBlock = 64;  // bits per mask word
inline constexpr int kNmsReduceThreads = 128;

template <typename T>
__device__ inline bool iou_above(const T* a, const T* b, T threshold) {
  const T left = max(a[0], b[0]);
  const T right = min(a[2], b[2]);
  const T top = max(a[1], b[1]);
  const T bottom = min(a[3], b[3]);
  const T w = max(rn_sub(right, left), static_cast<T>(0));
  const T h = max(rn_sub(bottom, top), static_cast<T>(0));
  const T inter = rn_mul(w, h);
  const T area_a = rn_mul(rn_sub(a[2], a[0]), rn_sub(a[3], a[1]));
  const T area_b = rn_mul(rn_sub(b[2], b[0]), rn_sub(b[3], b[1]));
  return rn_div(inter, rn_sub(rn_add(area_a, area_b), inter)) > threshold;
}

// Grid (col blocks, row blocks, segments), kNmsBlock threads. mask: [total boxes, words].
template <typename T>
__global__ void nms_mask_kernel(const T* boxes, const int64_t* seg_begin, const int64_t* seg_len,
                                int64_t words, T threshold, unsigned long long* mask) {
  const int64_t s = blockIdx.z;
  const int64_t len = seg_len[s];
  const int64_t begin = seg_begin[s];
  const int64_t row_block = blockIdx.y;
  const int64_t col_block = blockIdx.x;
  if (row_block > col_block) return;  // rows only need later columns
  if (row_block * kNmsBlock >= len || col_block * kNmsBlock >= len) return;
  const int row_size = static_cast<int>(min(len - row_block * kNmsBlock, static_cast<int64_t>(kNmsBlock)));
  const int col_size = static_cast<int>(min(len - col_block * kNmsBlock, static_cast<int64_t>(kNmsBlock)));

  __shared__ T block_boxes[kNmsBlock * 4];
  if (threadIdx.x < col_size) {
    const T* src = boxes + (begin + col_block * kNmsBlock + threadIdx.x) * 4;
#pragma unroll
    for (int q = 0; q < 4; ++q) block_boxes[threadIdx.x * 4 + q] = src[q];
  }
  __syncthreads();
  if (threadIdx.x < row_size) {
    const int64_t cur = begin + row_block * kNmsBlock + threadIdx.x;
    const T* cur_box = boxes + cur * 4;
    unsigned long long t = 0;
    const int start = row_block == col_block ? static_cast<int>(threadIdx.x) + 1 : 0;
    for (int i = start; i < col_size; ++i) {
      if (iou_above(cur_box, block_boxes + i * 4, threshold)) t |= 1ULL << i;
    }
    mask[cur * words + col_block] = t;
  }
}

// One block per segment; dynamic shared memory: `words` 64-bit "removed" words. (A template so
// that every translation unit including this header may instantiate it.)
template <typename Word = unsigned long long>
__global__ void nms_reduce_kernel(const Word* mask, const int64_t* seg_begin,
                                  const int64_t* seg_len, int64_t words, const uint8_t* valid,
                                  uint8_t* keep) {
  extern __shared__ unsigned long long removed[];
  const int64_t s = blockIdx.x;
  const int64_t len = seg_len[s];
  const int64_t begin = seg_begin[s];
  const int64_t used_words = (len + kNmsBlock - 1) / kNmsBlock;
  for (int64_t j = threadIdx.x; j < used_words; j += blockDim.x) removed[j] = 0;
  __syncthreads();
  for (int64_t i = 0; i < len; ++i) {
    // Uniform across the block: `removed` was last written before the previous barrier.
    const bool suppressed = ((removed[i / kNmsBlock] >> (i % kNmsBlock)) & 1ULL) != 0 ||
                            (valid != nullptr && valid[begin + i] == 0);
    if (threadIdx.x == 0) keep[begin + i] = suppressed ? 0 : 1;
    if (suppressed) continue;
    const Word* row = mask + (begin + i) * words;
    for (int64_t j = i / kNmsBlock + threadIdx.x; j < used_words; j += blockDim.x) {
      removed[j] |= row[j];
    }
    __syncthreads();
  }
}

// The threshold in T that makes `iou > t` equal to `double(iou) > threshold`.
template <typename T>
T nms_threshold_as(double threshold) {
  T t = static_cast<T>(threshold);
  if (static_cast<double>(t) > threshold) t = std::nextafter(t, -std::numeric_limits<T>::infinity());
  return t;
}

// keep[i] = 1 for the kept boxes of every segment. boxes: [total, 4] contiguous, sorted within
// each segment; seg_begin / seg_len: int64 [S] on the device; max_len: the longest segment
// (host value, sizes the launch); valid: uint8 [total] or undefined.
template <typename T>
at::Tensor segmented_nms(const at::Tensor& boxes, const at::Tensor& seg_begin,
                         const at::Tensor& seg_len, int64_t max_len, const at::Tensor& valid,
                         double iou_threshold) {
  const int64_t total = boxes.size(0);
  at::Tensor keep = at::zeros({total}, boxes.options().dtype(at::kByte));
  const int64_t num_segments = seg_begin.numel();
  if (total == 0 || num_segments == 0 || max_len == 0) return keep;
  const int64_t words = ceil_div(max_len, kNmsBlock);
  TORCH_CHECK(words <= 65535 && num_segments <= 65535,
              "NMS: ", max_len, " boxes in one group or ", num_segments,
              " groups exceed the CUDA grid");
  TORCH_CHECK(words * 8 <= 48 * 1024, "NMS: ", max_len,
              " boxes in one group need more shared memory than a block has");
  at::Tensor mask = at::empty({total * words}, boxes.options().dtype(at::kLong));
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const dim3 grid(static_cast<unsigned>(words), static_cast<unsigned>(words),
                  static_cast<unsigned>(num_segments));
  nms_mask_kernel<T><<<grid, kNmsBlock, 0, stream>>>(
      boxes.const_data_ptr<T>(), seg_begin.const_data_ptr<int64_t>(),
      seg_len.const_data_ptr<int64_t>(), words, nms_threshold_as<T>(iou_threshold),
      reinterpret_cast<unsigned long long*>(mask.mutable_data_ptr<int64_t>()));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  nms_reduce_kernel<unsigned long long><<<static_cast<unsigned>(num_segments), kNmsReduceThreads,
                      static_cast<size_t>(words) * sizeof(unsigned long long), stream>>>(
      reinterpret_cast<const unsigned long long*>(mask.const_data_ptr<int64_t>()),
      seg_begin.const_data_ptr<int64_t>(), seg_len.const_data_ptr<int64_t>(), words,
      valid.defined() ? valid.const_data_ptr<uint8_t>() : nullptr,
      keep.mutable_data_ptr<uint8_t>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return keep;
}

}  // namespace mrcnn::ops::cuda
