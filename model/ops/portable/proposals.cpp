// Portable proposal generation: mrcnn::generate_proposals (proposals.h) composed of standard ATen
// operators, with the CPU kernel's semantics (cpu/proposals_kernel.cpp): on the CPU, float32
// proposals equal the kernel's bit for bit.
//
// All images of a level at once, levels in turn:
//   1. a stable descending sort of each image's logits (H*W*A order), its first k =
//      min(pre_nms_top_n, H*W*A): equal logits keep the lower anchor index, as the kernel's
//      (logit, index) keys;
//   2. only those k are decoded, BoxCoder(1, 1, 1, 1) expression for expression as in the kernel
//      (each product and sum a separately rounded tensor operation, in the kernel's order; std::min
//      and std::max as where(b < a, ...) so that NaN and -0 come out as they do there), clipped to
//      the true image size and filtered (min_size and score_threshold rounded to the dtype first);
//   3. NMS of the valid boxes per image: portable::batched_nms with the image as the category and
//      equal scores, so each image's boxes are visited in the step-1 order, as in the kernel.
// Then the survivors of all levels are ordered per image by (probability desc, level, step-1
// order) with two stable sorts, and the post-NMS selection (per image: a prefix of each image; per
// batch: the first P by (probability desc, image)) is scattered into the zero-padded outputs.
//
// exp: ATen's CPU exp (SLEEF/MKL vector code) differs from the C library's in the last bit for
// about 1% of float inputs, and the kernel calls std::exp. On the CPU, float32 exp is therefore
// glibc's expf restated in float64 tensor operations (expf_like_libm). It equals glibc 2.36's
// x86-64 expf, the FMA variant glibc picks on any x86-64 with FMA, on every float input (checked:
// the same operations in C on all 2^32 floats, these tensor operations on 2^30 of them). glibc's
// unfused variant (a CPU without FMA) or another libm can differ in the last bit for rare inputs.
// float64 uses at::exp, which differs from glibc's exp in the last bit for about 0.5% of inputs:
// float64 proposals match the kernel to an ulp, not always bitwise. Other devices use at::exp.
//
// Value checks: on the CPU a negative image size, a NaN logit or a NaN decode throws the kernel's
// message (for the first (image, level) task at fault, the kernel's single-thread order);
// elsewhere they set the fault word and the box is invalid, as the CUDA kernel does.
// float16/bfloat16 inputs are computed in float32 and the boxes and scores cast back. No autograd
// graph is recorded: proposals are constants, as the native kernels return them.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "model/ops/portable/portable.h"
#include "model/ops/portable/value_checks.h"
#include "model/ops/detail/proposals_check.h"

namespace mrcnn::ops::portable {
namespace {

constexpr const char* kOp = "mrcnn::generate_proposals";

// glibc's __exp2f_data.tab (e_exp2f_data.c): the bits of 2^(i/32) rounded to the nearest double,
// minus i << 47.
constexpr int64_t kExp2Table[32] = {
    0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51,
    0x3fef72b83c7d517b, 0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1,
    0x3fef06fe0a31b715, 0x3feef1a7373aa9cb, 0x3feedea64c123422, 0x3feece086061892d,
    0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429, 0x3feea47eb03a5585,
    0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
    0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d,
    0x3feee89f995ad3ad, 0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069,
    0x3fef5818dcfba487, 0x3fef7c97337b9b5f, 0x3fefa4afa2a490da, 0x3fefd0765b6e4540};

// glibc's expf (sysdeps/ieee754/flt-32/e_expf.c) for a float CPU tensor: x * 32/ln2 = k + r,
// exp(x) = 2^(k/32) * (C0 r^3 + C1 r^2 + C2 r + 1), in double, rounded to float once. The FMA
// variant computes k and r from the exact product x * 32/ln2; here 32/ln2 is split in two parts
// whose products with a float are exact, so r is the same. The polynomial's fused operations are
// evaluated unfused: that changes the double by far less than a float rounding can see (the
// exhaustive check finds no input where the float differs).
at::Tensor expf_like_libm(const at::Tensor& x) {
  constexpr double kInvLn2NHi = 0x1.7154765p+5, kInvLn2NLo = 0x1.5c17fp-26;  // sum: 32/ln2
  constexpr double kShift = 0x1.8p+52;
  constexpr double kC0 = 0x1.c6af84b912394p-20, kC1 = 0x1.ebfce50fac4f3p-13;
  constexpr double kC2 = 0x1.62e42ff0c52d6p-6;
  constexpr float kOverflow = 0x1.62e42ep6f, kUnderflow = -0x1.9fe368p6f;
  constexpr float kMayUnderflow = -0x1.9d1d9ep6f;  // below: glibc returns 2^-149
  const at::Tensor general = (x >= kMayUnderflow).logical_and_(x <= kOverflow);
  const at::Tensor xd = x.masked_fill(general.logical_not(), 0.0).to(at::kDouble);
  const at::Tensor a = xd * kInvLn2NHi;
  const at::Tensor b = xd * kInvLn2NLo;
  const at::Tensor kd = ((a + b) + kShift) - kShift;  // round to nearest integer
  const at::Tensor r = (a - kd) + b;                  // a - kd is exact
  const at::Tensor k = kd.to(at::kLong);
  const at::Tensor table = at::tensor(c10::ArrayRef<int64_t>(kExp2Table), k.options());
  const at::Tensor bits =
      table.index_select(0, k.bitwise_and(31).reshape({-1})).view(k.sizes()) +
      k * (int64_t{1} << 47);
  const at::Tensor r2 = r * r;
  const at::Tensor y = ((((r * kC0) + kC1) * r2) + ((r * kC2) + 1.0)) * bits.view(at::kDouble);
  const at::Tensor special = at::where(
      x > kOverflow, std::numeric_limits<double>::infinity(),
      at::where(x < kUnderflow, 0.0, at::where(x < kMayUnderflow, 0x1p-149, x)));  // NaN: x
  return at::where(general, y.to(at::kFloat), special);
}

// std::exp as the CPU kernel sees it (see the header).
at::Tensor kernel_exp(const at::Tensor& x) {
  if (x.is_cpu() && x.scalar_type() == at::kFloat) return expf_like_libm(x);
  return at::exp(x);
}

// std::max(a, b) = (a < b) ? b : a and std::min(a, b) = (b < a) ? b : a, elementwise.
at::Tensor std_max(const at::Tensor& a, const at::Scalar& b) { return at::where(a < b, b, a); }
at::Tensor std_min(const at::Tensor& a, const at::Tensor& b) { return at::where(b < a, b, a); }
at::Tensor std_min(const at::Tensor& a, const at::Scalar& b) { return at::where(a > b, b, a); }

// A double rounded to `dtype` (float or double), as the kernel's static_cast<T>.
double rounded_to(at::ScalarType dtype, double v) {
  return dtype == at::kFloat ? static_cast<double>(static_cast<float>(v)) : v;
}

struct Filters {
  double clip;             // log(1000 / 16) in the dtype
  double min_size;         // in the dtype
  double score_threshold;  // in the dtype
};

// One level's k best anchors of every image, in step-1 order.
struct Level {
  int64_t k = 0;
  at::Tensor top;         // int64 [N, k] anchor index (H*W*A order)
  at::Tensor boxes;       // [N, k, 4] decoded and clipped
  at::Tensor probs;       // [N, k] sigmoid(logit)
  at::Tensor valid;       // bool [N, k]
  at::Tensor logit_nan;   // bool [N]: a NaN logit in the image's level
  at::Tensor decode_nan;  // bool [N, k]: a box of a non-NaN logit decodes to NaN
};

// Steps 1 and 2 for level `obj` [N, A, H, W], `deltas` [N, 4A, H, W], anchors [H*W*A, 4];
// `img_h`, `img_w` [N, 1] in the compute dtype.
Level decode_level(const at::Tensor& obj, const at::Tensor& deltas, const at::Tensor& anchors,
                   const detail::ProposalLevel& shape, int64_t k, const at::Tensor& img_h,
                   const at::Tensor& img_w, at::ScalarType dtype, const Filters& f) {
  const int64_t n = obj.size(0);
  Level lv;
  lv.k = k;
  const int64_t num = shape.num_anchors();  // explicit: -1 is ambiguous for an empty level
  const at::Tensor logits = obj.permute({0, 2, 3, 1}).reshape({n, num}).to(dtype);
  lv.logit_nan = logits.isnan().any(1);
  auto [sorted, index] = at::sort(logits, /*stable=*/true, 1, /*descending=*/true);
  lv.top = index.narrow(1, 0, k);
  const at::Tensor logit = sorted.narrow(1, 0, k);
  const at::Tensor an = anchors.index_select(0, lv.top.reshape({-1})).to(dtype).view({n, k, 4});
  const at::Tensor d = deltas
                           .reshape({n, shape.anchors_per_location, 4, shape.height, shape.width})
                           .permute({0, 3, 4, 1, 2})
                           .reshape({n, num, 4})
                           .gather(1, lv.top.unsqueeze(2).expand({n, k, 4}))
                           .to(dtype);
  // BoxCoder(1, 1, 1, 1).decode, expression for expression.
  const at::Tensor widths = an.select(2, 2) - an.select(2, 0);
  const at::Tensor heights = an.select(2, 3) - an.select(2, 1);
  const at::Tensor ctr_x = an.select(2, 0) + (widths * 0.5);
  const at::Tensor ctr_y = an.select(2, 1) + (heights * 0.5);
  const at::Tensor ddw = std_min(d.select(2, 2), f.clip);
  const at::Tensor ddh = std_min(d.select(2, 3), f.clip);
  const at::Tensor pred_ctr_x = (d.select(2, 0) * widths) + ctr_x;
  const at::Tensor pred_ctr_y = (d.select(2, 1) * heights) + ctr_y;
  const at::Tensor half_w = (kernel_exp(ddw) * widths) * 0.5;
  const at::Tensor half_h = (kernel_exp(ddh) * heights) * 0.5;
  at::Tensor x1 = pred_ctr_x - half_w, y1 = pred_ctr_y - half_h;
  at::Tensor x2 = pred_ctr_x + half_w, y2 = pred_ctr_y + half_h;
  const at::Tensor nan = x1.isnan().logical_or_(y1.isnan()).logical_or_(x2.isnan()).logical_or_(
      y2.isnan());
  lv.decode_nan = nan.logical_and(logit.isnan().logical_not());
  // Clip to the true image size.
  x1 = std_min(std_max(x1, 0), img_w);
  x2 = std_min(std_max(x2, 0), img_w);
  y1 = std_min(std_max(y1, 0), img_h);
  y2 = std_min(std_max(y2, 0), img_h);
  lv.boxes = at::stack({x1, y1, x2, y2}, 2);
  lv.probs = (kernel_exp(logit.neg()) + 1).reciprocal();
  lv.valid = ((x2 - x1) >= f.min_size)
                 .logical_and_((y2 - y1) >= f.min_size)
                 .logical_and_(lv.probs >= f.score_threshold)
                 .logical_and_(nan.logical_not());
  return lv;
}

// The negative image sizes and the NaN logits and decodes: on the CPU the kernel's error for the
// first (image, level) task at fault; elsewhere bits of the fault word.
void check_sizes(const at::Tensor& sizes) {
  check_values((sizes < 0).any(1), kFaultImageSize, [&](int64_t n) {
    return std::string(kOp) + ": image_sizes[" + std::to_string(n) + "] = (" +
           std::to_string(sizes[n][0].item<int64_t>()) + ", " +
           std::to_string(sizes[n][1].item<int64_t>()) + "); expected sizes >= 0";
  });
}

void check_levels(const std::vector<Level>& levels) {
  const int64_t num_levels = static_cast<int64_t>(levels.size());
  std::vector<at::Tensor> logit_nan, decode_nan;
  for (const Level& lv : levels) {
    logit_nan.push_back(lv.logit_nan);
    decode_nan.push_back(lv.decode_nan.any(1));
  }
  const at::Tensor obj = at::stack(logit_nan, 1);  // [N, L], task order (image, level)
  const at::Tensor dec = at::stack(decode_nan, 1);
  if (!obj.is_cpu()) {
    check_values(obj, kFaultObjectnessNaN, [](int64_t) { return std::string(); });
    check_values(dec, kFaultDecodeNaN, [](int64_t) { return std::string(); });
    return;
  }
  check_values(obj.logical_or(dec), kFaultObjectnessNaN, [&](int64_t task) {
    const int64_t n = task / num_levels;
    const int64_t l = task % num_levels;
    const Level& lv = levels[static_cast<size_t>(l)];
    if (obj[n][l].item<bool>()) {
      return std::string(kOp) + ": objectness[" + std::to_string(l) + "] of image " +
             std::to_string(n) + " contains NaN";
    }
    const int64_t j = lv.decode_nan[n].nonzero()[0][0].item<int64_t>();
    return std::string(kOp) + ": box_deltas[" + std::to_string(l) + "] of image " +
           std::to_string(n) + " decode to NaN at anchor " +
           std::to_string(lv.top[n][j].item<int64_t>());
  });
}

// What NMS keeps of one level, in (image, step-1 order) order.
struct Survivors {
  at::Tensor image;  // int64 [S]
  at::Tensor probs;  // [S]
  at::Tensor boxes;  // [S, 4]
};

Survivors level_nms(const Level& lv, double threshold) {
  const at::Tensor pos = lv.valid.reshape({-1}).nonzero().squeeze(1);  // (image, rank) order
  const at::Tensor boxes = lv.boxes.reshape({-1, 4}).index_select(0, pos);
  const at::Tensor image = at::floor_divide(pos, lv.k);
  // Equal scores: the stable visiting order is the step-1 order within each image.
  const at::Tensor kept =
      portable::batched_nms(boxes, at::zeros({pos.size(0)}, boxes.options()), image, threshold);
  return {image.index_select(0, kept),
          lv.probs.reshape({-1}).index_select(0, pos.index_select(0, kept)),
          boxes.index_select(0, kept)};
}

// Steps 6a/6b and the padded outputs (boxes [N, P, 4], scores [N, P], counts [N]).
std::tuple<at::Tensor, at::Tensor, at::Tensor> select_outputs(
    const std::vector<Survivors>& levels, int64_t batch, int64_t post_nms_top_n, bool per_batch,
    const at::TensorOptions& opts) {
  std::vector<at::Tensor> images, probs, boxes;
  for (const Survivors& s : levels) {
    images.push_back(s.image);
    probs.push_back(s.probs);
    boxes.push_back(s.boxes);
  }
  // (level, image, rank) -> (probability desc, level, image, rank) -> (image, probability desc,
  // level, rank): each image's merged list.
  const at::Tensor image_all = at::cat(images), prob_all = at::cat(probs);
  const at::Tensor by_prob = std::get<1>(at::sort(prob_all, true, 0, true));
  const at::Tensor by_image =
      std::get<1>(at::sort(image_all.index_select(0, by_prob), true, 0, false));
  const at::Tensor order = by_prob.index_select(0, by_image);
  const at::Tensor image = image_all.index_select(0, order);
  const at::Tensor prob = prob_all.index_select(0, order);
  const at::Tensor box = at::cat(boxes).index_select(0, order);
  const auto lopts = image.options();
  const at::Tensor ones = at::ones_like(image);
  const at::Tensor totals = at::zeros({batch}, lopts).scatter_add_(0, image, ones);
  const at::Tensor rank = at::arange(image.size(0), lopts) -
                          (totals.cumsum(0) - totals).index_select(0, image);
  at::Tensor take;
  if (!per_batch) {
    take = totals.clamp_max(post_nms_top_n);
  } else {  // the first P by (probability desc, image): a prefix of every image's list
    const at::Tensor best = std::get<1>(at::sort(prob, true, 0, true))
                                .narrow(0, 0, std::min(post_nms_top_n, prob.size(0)));
    take = at::zeros({batch}, lopts).scatter_add_(0, image.index_select(0, best),
                                                  ones.narrow(0, 0, best.size(0)));
  }
  const at::Tensor sel = (rank < take.index_select(0, image)).nonzero().squeeze(1);
  const at::Tensor row = image.index_select(0, sel), col = rank.index_select(0, sel);
  at::Tensor out_boxes = at::zeros({batch, post_nms_top_n, 4}, opts);
  at::Tensor out_scores = at::zeros({batch, post_nms_top_n}, opts);
  out_boxes.index_put_({row, col}, box.index_select(0, sel));
  out_scores.index_put_({row, col}, prob.index_select(0, sel));
  return {out_boxes, out_scores, take};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> generate_proposals_op(
    at::TensorList objectness, at::TensorList box_deltas, at::TensorList anchors,
    const at::Tensor& image_sizes, int64_t pre_nms_top_n, int64_t post_nms_top_n,
    double nms_threshold, double min_size, bool per_batch_post_nms, double score_threshold) {
  ProposalOptions o;
  o.pre_nms_top_n = pre_nms_top_n;
  o.post_nms_top_n = post_nms_top_n;
  o.nms_threshold = nms_threshold;
  o.min_size = min_size;
  o.per_batch_post_nms = per_batch_post_nms;
  o.score_threshold = score_threshold;
  Proposals p = portable::generate_proposals(objectness.vec(), box_deltas.vec(), anchors.vec(),
                                             image_sizes, o);
  return {p.boxes, p.scores, p.counts};
}

}  // namespace

Proposals generate_proposals(const std::vector<at::Tensor>& objectness,
                             const std::vector<at::Tensor>& box_deltas,
                             const std::vector<at::Tensor>& anchors,
                             const at::Tensor& image_sizes, const ProposalOptions& options) {
  const auto shapes = detail::check_proposal_inputs(objectness, box_deltas, anchors, image_sizes,
                                                    options.pre_nms_top_n,
                                                    options.post_nms_top_n, options.min_size);
  const at::NoGradGuard no_grad;  // proposals are constants (proposals.h), as from the kernels
  const at::Tensor& o0 = objectness[0];
  const int64_t batch = o0.size(0);
  const at::ScalarType dtype = compute_dtype(o0.scalar_type());
  const at::Tensor sizes = image_sizes.to(o0.device(), at::kLong);
  check_sizes(sizes);
  const at::Tensor img_h = sizes.select(1, 0).to(dtype).unsqueeze(1);
  const at::Tensor img_w = sizes.select(1, 1).to(dtype).unsqueeze(1);
  const Filters f{rounded_to(dtype, std::log(1000.0 / 16)), rounded_to(dtype, options.min_size),
                  rounded_to(dtype, options.score_threshold)};
  std::vector<Level> levels;
  for (size_t l = 0; l < shapes.size(); ++l) {
    const int64_t k = std::min(options.pre_nms_top_n, shapes[l].num_anchors());
    levels.push_back(decode_level(objectness[l], box_deltas[l], anchors[l], shapes[l], k, img_h,
                                  img_w, dtype, f));
  }
  check_levels(levels);
  std::vector<Survivors> survivors;
  for (const Level& lv : levels) {
    if (lv.k > 0) survivors.push_back(level_nms(lv, options.nms_threshold));
  }
  if (survivors.empty()) {  // every level without anchors
    const auto opts = o0.options().dtype(dtype);
    survivors.push_back({at::empty({0}, opts.dtype(at::kLong)), at::empty({0}, opts),
                         at::empty({0, 4}, opts)});
  }
  auto [boxes, scores, counts] =
      select_outputs(survivors, batch, options.post_nms_top_n, options.per_batch_post_nms,
                     o0.options().dtype(dtype));
  return {boxes.to(o0.scalar_type()), scores.to(o0.scalar_type()), counts};
}

TORCH_LIBRARY_FRAGMENT(mrcnn_portable, m) {
  m.def(
      "generate_proposals(Tensor[] objectness, Tensor[] box_deltas, Tensor[] anchors, "
      "Tensor image_sizes, int pre_nms_top_n, int post_nms_top_n, float nms_threshold=0.7, "
      "float min_size=0.0, bool per_batch_post_nms=False, float score_threshold=0.0) "
      "-> (Tensor boxes, Tensor scores, Tensor counts)",
      TORCH_FN(generate_proposals_op));
}

}  // namespace mrcnn::ops::portable
