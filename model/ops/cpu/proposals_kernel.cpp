// CPU kernel of mrcnn::generate_proposals (semantics: proposals.h).
//
// Every (image, level) pair is one independent task: select the top-k logits, decode, clip,
// filter and run NMS, all on at most pre_nms_top_n boxes. Only k boxes are ever decoded (not
// every anchor, as a decode-then-filter pipeline does). The tasks run in parallel; the per-image
// merge and the post-NMS selection are serial and ordered, so the result is the same for any
// thread count.
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <numeric>
#include <type_traits>

#include "model/ops/detail/nms_impl.h"
#include "model/ops/detail/proposals_check.h"

namespace mrcnn::ops {
namespace {

constexpr const char* kOp = "mrcnn::generate_proposals";

// What one (image, level) task keeps after NMS, best first.
template <typename T>
struct LevelResult {
  std::vector<T> boxes;   // 4 per kept box
  std::vector<T> scores;  // probabilities
};

// A key whose ascending order is (score descending, index ascending), for float scores.
inline uint64_t descending_key(float s, uint32_t index) {
  if (s == 0.0f) s = 0.0f;  // -0 and +0 tie, as they compare equal
  uint32_t u = std::bit_cast<uint32_t>(s);
  u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);  // ascending float order as unsigned
  return (static_cast<uint64_t>(~u) << 32) | index;
}

// Indices (in H*W*A order) of the k highest logits, best first, ties by lower index.
template <typename T>
std::vector<int64_t> top_k_anchors(const at::Tensor& obj, int64_t n,
                                   const detail::ProposalLevel& lv, int64_t k, size_t level) {
  const int64_t num = lv.num_anchors();
  const int64_t a_count = lv.anchors_per_location;
  const int64_t hw = lv.height * lv.width;
  const T* base = obj.const_data_ptr<T>() + n * obj.stride(0);
  const int64_t sa = obj.stride(1), sh = obj.stride(2), sw = obj.stride(3);
  std::vector<int64_t> out(static_cast<size_t>(k));
  bool has_nan = false;
  if constexpr (std::is_same_v<T, float>) {
    std::vector<uint64_t> keys(static_cast<size_t>(num));
    for (int64_t a = 0; a < a_count; ++a) {
      for (int64_t y = 0; y < lv.height; ++y) {
        const T* row = base + a * sa + y * sh;
        for (int64_t x = 0; x < lv.width; ++x) {
          const float s = row[x * sw];
          has_nan |= std::isnan(s);
          const int64_t i = (y * lv.width + x) * a_count + a;
          keys[static_cast<size_t>(i)] = descending_key(s, static_cast<uint32_t>(i));
        }
      }
    }
    TORCH_CHECK(!has_nan, kOp, ": objectness[", level, "] of image ", n, " contains NaN");
    std::nth_element(keys.begin(), keys.begin() + k, keys.end());
    std::sort(keys.begin(), keys.begin() + k);
    for (int64_t j = 0; j < k; ++j) out[static_cast<size_t>(j)] = keys[static_cast<size_t>(j)] & 0xffffffffu;
  } else {
    std::vector<T> scores(static_cast<size_t>(num));
    for (int64_t a = 0; a < a_count; ++a) {
      for (int64_t p = 0; p < hw; ++p) {
        const T s = base[a * sa + (p / lv.width) * sh + (p % lv.width) * sw];
        has_nan |= std::isnan(s);
        scores[static_cast<size_t>(p * a_count + a)] = s;
      }
    }
    TORCH_CHECK(!has_nan, kOp, ": objectness[", level, "] of image ", n, " contains NaN");
    std::vector<int64_t> idx(static_cast<size_t>(num));
    std::iota(idx.begin(), idx.end(), 0);
    auto cmp = [&](int64_t i, int64_t j) {
      const T si = scores[static_cast<size_t>(i)], sj = scores[static_cast<size_t>(j)];
      return si > sj || (si == sj && i < j);
    };
    std::nth_element(idx.begin(), idx.begin() + k, idx.end(), cmp);
    std::sort(idx.begin(), idx.begin() + k, cmp);
    std::copy(idx.begin(), idx.begin() + k, out.begin());
  }
  return out;
}

struct Params {
  int64_t pre_nms_top_n;
  int64_t post_nms_top_n;
  double nms_threshold;
  double min_size;
  bool per_batch;
  double score_threshold;
};

template <typename T>
LevelResult<T> process_level(const at::Tensor& obj, const at::Tensor& deltas,
                             const at::Tensor& anchors, const detail::ProposalLevel& lv,
                             int64_t n, size_t level, int64_t img_h, int64_t img_w,
                             const Params& prm) {
  LevelResult<T> res;
  const int64_t k = std::min(prm.pre_nms_top_n, lv.num_anchors());
  if (k == 0) return res;
  const std::vector<int64_t> top = top_k_anchors<T>(obj, n, lv, k, level);

  const int64_t a_count = lv.anchors_per_location;
  const T* obj_base = obj.const_data_ptr<T>() + n * obj.stride(0);
  const T* d_base = deltas.const_data_ptr<T>() + n * deltas.stride(0);
  const int64_t dc = deltas.stride(1), dh = deltas.stride(2), dw = deltas.stride(3);
  const T* anc = anchors.const_data_ptr<T>();
  const T clip = static_cast<T>(std::log(1000.0 / 16));
  const T w_max = static_cast<T>(img_w);
  const T h_max = static_cast<T>(img_h);
  const T min_size = static_cast<T>(prm.min_size);
  const T score_thr = static_cast<T>(prm.score_threshold);

  cpu::BoxesSoA<T> soa;
  soa.resize(static_cast<size_t>(k));
  std::vector<T> probs(static_cast<size_t>(k));
  std::vector<uint8_t> valid(static_cast<size_t>(k));
  for (int64_t j = 0; j < k; ++j) {
    const int64_t i = top[static_cast<size_t>(j)];
    const int64_t a = i % a_count;
    const int64_t p = i / a_count;
    const int64_t y = p / lv.width;
    const int64_t x = p % lv.width;
    const T* d = d_base + (4 * a) * dc + y * dh + x * dw;
    const T* an = anc + 4 * i;
    // BoxCoder(1, 1, 1, 1).decode, expression for expression.
    const T widths = an[2] - an[0];
    const T heights = an[3] - an[1];
    const T ctr_x = an[0] + static_cast<T>(0.5) * widths;
    const T ctr_y = an[1] + static_cast<T>(0.5) * heights;
    const T ddx = d[0];
    const T ddy = d[dc];
    const T ddw = std::min(d[2 * dc], clip);
    const T ddh = std::min(d[3 * dc], clip);
    const T pred_ctr_x = ddx * widths + ctr_x;
    const T pred_ctr_y = ddy * heights + ctr_y;
    const T pred_w = std::exp(ddw) * widths;
    const T pred_h = std::exp(ddh) * heights;
    const T half_w = static_cast<T>(0.5) * pred_w;
    const T half_h = static_cast<T>(0.5) * pred_h;
    T x1 = pred_ctr_x - half_w, y1 = pred_ctr_y - half_h;
    T x2 = pred_ctr_x + half_w, y2 = pred_ctr_y + half_h;
    TORCH_CHECK(!(std::isnan(x1) || std::isnan(y1) || std::isnan(x2) || std::isnan(y2)), kOp,
                ": box_deltas[", level, "] of image ", n, " decode to NaN at anchor ", i);
    // Clip to the true image size.
    x1 = std::min(std::max(x1, T(0)), w_max);
    x2 = std::min(std::max(x2, T(0)), w_max);
    y1 = std::min(std::max(y1, T(0)), h_max);
    y2 = std::min(std::max(y2, T(0)), h_max);
    soa.set(static_cast<size_t>(j), x1, y1, x2, y2);
    const T logit = obj_base[a * obj.stride(1) + y * obj.stride(2) + x * obj.stride(3)];
    const T prob = static_cast<T>(1) / (static_cast<T>(1) + std::exp(-logit));
    probs[static_cast<size_t>(j)] = prob;
    valid[static_cast<size_t>(j)] =
        (x2 - x1) >= min_size && (y2 - y1) >= min_size && prob >= score_thr;
  }
  std::vector<uint8_t> scratch;
  std::vector<int64_t> kept;
  cpu::nms_greedy(soa, k, prm.nms_threshold, valid.data(), scratch, kept);
  res.boxes.reserve(kept.size() * 4);
  res.scores.reserve(kept.size());
  for (int64_t j : kept) {
    const size_t u = static_cast<size_t>(j);
    res.boxes.insert(res.boxes.end(), {soa.x1[u], soa.y1[u], soa.x2[u], soa.y2[u]});
    res.scores.push_back(probs[u]);
  }
  return res;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> generate_proposals_kernel(
    at::TensorList objectness, at::TensorList box_deltas, at::TensorList anchors,
    const at::Tensor& image_sizes, int64_t pre_nms_top_n, int64_t post_nms_top_n,
    double nms_threshold, double min_size, bool per_batch_post_nms, double score_threshold) {
  const auto levels = detail::check_proposal_inputs(objectness, box_deltas, anchors, image_sizes,
                                                    pre_nms_top_n, post_nms_top_n, min_size);
  TORCH_CHECK(objectness[0].device().is_cpu(), kOp, ": expected CPU tensors, got ",
              objectness[0].device());
  const at::ScalarType dtype = objectness[0].scalar_type();
  const int64_t batch = objectness[0].size(0);
  const int64_t num_levels = static_cast<int64_t>(levels.size());
  const at::Tensor sizes = image_sizes.to(at::kCPU, at::kLong).contiguous();
  const int64_t* sz = sizes.const_data_ptr<int64_t>();
  for (int64_t n = 0; n < batch; ++n) {
    TORCH_CHECK(sz[2 * n] >= 0 && sz[2 * n + 1] >= 0, kOp, ": image_sizes[", n, "] = (",
                sz[2 * n], ", ", sz[2 * n + 1], "); expected sizes >= 0");
  }
  const Params prm{pre_nms_top_n, post_nms_top_n, nms_threshold, min_size, per_batch_post_nms,
                   score_threshold};
  const int64_t P = post_nms_top_n;
  at::Tensor out_boxes = at::zeros({batch, P, 4}, objectness[0].options());
  at::Tensor out_scores = at::zeros({batch, P}, objectness[0].options());
  at::Tensor out_counts = at::zeros({batch}, objectness[0].options().dtype(at::kLong));

  AT_DISPATCH_FLOATING_TYPES(dtype, "mrcnn_generate_proposals", [&] {
    using T = scalar_t;
    std::vector<at::Tensor> anc;
    for (const at::Tensor& a : anchors) anc.push_back(a.to(dtype).contiguous());
    // Tasks ordered (image, level): with static chunking, 2 threads and 2 images each thread
    // takes one image.
    std::vector<LevelResult<T>> results(static_cast<size_t>(batch * num_levels));
    at::parallel_for(0, batch * num_levels, 1, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t n = t / num_levels;
        const size_t l = static_cast<size_t>(t % num_levels);
        results[static_cast<size_t>(t)] =
            process_level<T>(objectness[l], box_deltas[l], anc[l], levels[l], n, l, sz[2 * n],
                             sz[2 * n + 1], prm);
      }
    });

    // Per image: all levels' survivors by decreasing probability; ties keep the lower level,
    // then the level's own order (a stable sort over the level-major concatenation).
    struct Ref {
      int32_t level;
      int32_t pos;
    };
    std::vector<std::vector<Ref>> merged(static_cast<size_t>(batch));
    for (int64_t n = 0; n < batch; ++n) {
      auto& m = merged[static_cast<size_t>(n)];
      for (int64_t l = 0; l < num_levels; ++l) {
        const auto& r = results[static_cast<size_t>(n * num_levels + l)];
        for (size_t j = 0; j < r.scores.size(); ++j) {
          m.push_back({static_cast<int32_t>(l), static_cast<int32_t>(j)});
        }
      }
      auto score = [&](const Ref& r) {
        return results[static_cast<size_t>(n * num_levels + r.level)].scores[static_cast<size_t>(r.pos)];
      };
      std::stable_sort(m.begin(), m.end(),
                       [&](const Ref& x, const Ref& y) { return score(x) > score(y); });
    }

    // How many of each image's ordered survivors are kept.
    std::vector<int64_t> take(static_cast<size_t>(batch));
    if (!per_batch_post_nms) {
      for (int64_t n = 0; n < batch; ++n) {
        take[static_cast<size_t>(n)] =
            std::min<int64_t>(P, static_cast<int64_t>(merged[static_cast<size_t>(n)].size()));
      }
    } else {
      // The P best over the batch; every image's list is sorted, so the selection is a prefix
      // of each list: merge the lists by (probability desc, image asc) and count.
      std::vector<size_t> head(static_cast<size_t>(batch), 0);
      for (int64_t picked = 0; picked < P; ++picked) {
        int64_t best = -1;
        T best_score = 0;
        for (int64_t n = 0; n < batch; ++n) {
          const auto& m = merged[static_cast<size_t>(n)];
          const size_t h = head[static_cast<size_t>(n)];
          if (h >= m.size()) continue;
          const T s = results[static_cast<size_t>(n * num_levels + m[h].level)]
                          .scores[static_cast<size_t>(m[h].pos)];
          if (best < 0 || s > best_score) {
            best = n;
            best_score = s;
          }
        }
        if (best < 0) break;
        ++head[static_cast<size_t>(best)];
      }
      for (int64_t n = 0; n < batch; ++n) {
        take[static_cast<size_t>(n)] = static_cast<int64_t>(head[static_cast<size_t>(n)]);
      }
    }

    T* ob = out_boxes.mutable_data_ptr<T>();
    T* os = out_scores.mutable_data_ptr<T>();
    int64_t* oc = out_counts.mutable_data_ptr<int64_t>();
    for (int64_t n = 0; n < batch; ++n) {
      const auto& m = merged[static_cast<size_t>(n)];
      const int64_t cnt = take[static_cast<size_t>(n)];
      oc[n] = cnt;
      for (int64_t j = 0; j < cnt; ++j) {
        const Ref& r = m[static_cast<size_t>(j)];
        const auto& lr = results[static_cast<size_t>(n * num_levels + r.level)];
        std::memcpy(ob + (n * P + j) * 4, lr.boxes.data() + 4 * static_cast<size_t>(r.pos),
                    4 * sizeof(T));
        os[n * P + j] = lr.scores[static_cast<size_t>(r.pos)];
      }
    }
  });
  return {out_boxes, out_scores, out_counts};
}

}  // namespace

TORCH_LIBRARY_IMPL(mrcnn, CPU, m) {
  m.impl("generate_proposals", TORCH_FN(generate_proposals_kernel));
}

}  // namespace mrcnn::ops
