// The portable mask ops (model/ops/portable/mask_targets.cpp, paste_masks.cpp) against the native
// CPU ops on MLPerf-shaped inputs, bit for bit:
//   * mask targets for 256 positive proposals at 28 x 28 (and 14, 1, 56), random instances of 1 to
//     4 polygons of 3 to 200 vertices; proposals jittered around their instance (polygons partly
//     outside), tiny (width and height clamped to 1), huge (beyond the image), far from their
//     polygon; and near-vertical slivers reaching 2e4 px beyond a 1-px proposal (the y-major
//     window search of the portable rasterizer): the targets are equal (torch.equal);
//   * pasting 100 masks of 28 x 28 into 800 x 1333 (float32 masks with padding 0, 1, 2; float64
//     masks with padding 1), boxes partly or entirely outside the image, degenerate and inverted
//     ones: the float result is bit-identical (compared as integers, so signed zeros count) and
//     the binary one equal.
// Measured parity: bit-identical everywhere (tolerance 0). The CPU value errors carry the native
// messages, and the public entry points follow the switch (implementation.h).
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <numbers>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "model/ops/implementation.h"
#include "model/ops/mask_targets.h"
#include "model/ops/paste_masks.h"
#include "model/ops/portable/portable.h"

namespace mrcnn::ops {
namespace {

double uniform(at::Generator& gen, double lo, double hi) {
  return lo + (hi - lo) * at::rand({1}, gen, at::kDouble).item<double>();
}

int64_t integer(at::Generator& gen, int64_t lo, int64_t hi) {  // [lo, hi)
  return at::randint(lo, hi, {1}, gen).item<int64_t>();
}

struct Scene {
  PolygonList polygons;
  std::vector<std::array<double, 4>> extents;  // per instance: x1, y1, x2, y2 of its vertices
};

// Star-shaped polygons around each instance's centre in an 800 x 1333 image (some cross its
// border); an instance's polygons are apart like an occluded object's parts.
Scene make_scene(at::Generator& gen, int64_t num_instances) {
  std::vector<double> coords;
  std::vector<int64_t> poly{0}, inst{0};
  Scene s;
  for (int64_t i = 0; i < num_instances; ++i) {
    const double cx = uniform(gen, -50, 1380), cy = uniform(gen, -50, 850);
    const double r = std::exp(uniform(gen, std::log(3.0), std::log(400.0)));
    std::array<double, 4> ext{1e30, 1e30, -1e30, -1e30};
    for (int64_t p = integer(gen, 1, 5); p > 0; --p) {
      const int64_t k = integer(gen, 0, 8) == 0 ? integer(gen, 100, 201) : integer(gen, 3, 40);
      const double ox = uniform(gen, -r, r), oy = uniform(gen, -r, r);
      const at::Tensor turns = at::rand({k}, gen, at::kDouble) * 2 * std::numbers::pi;
      const at::Tensor angle = std::get<0>(at::sort(turns));
      for (int64_t j = 0; j < k; ++j) {
        const double a = angle[j].item<double>(), rad = r * uniform(gen, 0.3, 1.0);
        const double x = cx + ox + rad * std::cos(a), y = cy + oy + rad * std::sin(a);
        coords.push_back(x);
        coords.push_back(y);
        ext = {std::min(ext[0], x), std::min(ext[1], y), std::max(ext[2], x), std::max(ext[3], y)};
      }
      poly.push_back(static_cast<int64_t>(coords.size()));
    }
    inst.push_back(static_cast<int64_t>(poly.size()) - 1);
    s.extents.push_back(ext);
  }
  s.polygons = {at::tensor(coords, at::kDouble), at::tensor(poly, at::kLong),
                at::tensor(inst, at::kLong)};
  return s;
}

// Positive proposals: mostly the instance's extent jittered by up to 30% of its size, and a few
// of every edge case.
at::Tensor make_proposals(at::Generator& gen, const Scene& s, const at::Tensor& matched) {
  const int64_t num = matched.size(0);
  std::vector<float> boxes;
  for (int64_t k = 0; k < num; ++k) {
    const auto& e = s.extents[static_cast<size_t>(matched[k].item<int64_t>())];
    const double w = e[2] - e[0], h = e[3] - e[1];
    std::array<double, 4> b{e[0] + uniform(gen, -0.3, 0.3) * w, e[1] + uniform(gen, -0.3, 0.3) * h,
                            e[2] + uniform(gen, -0.3, 0.3) * w, e[3] + uniform(gen, -0.3, 0.3) * h};
    switch (k % 16) {  // 1: tiny (w, h clamp to 1)
      case 1: b = {e[0] + w / 2, e[1] + h / 2, e[0] + w / 2 + 0.4, e[1] + h / 2 + 0.7}; break;
      case 2: b = {-500, -400, 2000, 1500}; break;                      // huge
      case 3: b = {e[2] + 5, e[3] + 5, e[2] + 40, e[3] + 30}; break;    // apart
      case 4: b = {e[0] + w / 2, e[1], e[2] + w, e[3] - h / 3}; break;  // half outside
      case 5: b = {e[0], e[1], e[0], e[1]}; break;                      // a point
      default: break;
    }
    for (double v : b) boxes.push_back(static_cast<float>(v));
  }
  return at::tensor(boxes).view({num, 4});
}

at::Tensor native_targets(const PolygonList& p, const at::Tensor& matched, const at::Tensor& boxes,
                          int64_t m) {
  ImplementationGuard g(Implementation::kNative);
  return mask_targets(p, matched, boxes, m);
}

TEST(PortableMaskTargets, EqualNativeBitForBitAtMLPerfShapes) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(2024);
  for (int scene = 0; scene < 4; ++scene) {
    const Scene s = make_scene(gen, 24);
    const at::Tensor matched = at::randint(0, 24, {256}, gen);
    const at::Tensor boxes = make_proposals(gen, s, matched);
    for (int64_t m : {28, 14, 1, 56}) {
      const at::Tensor native = native_targets(s.polygons, matched, boxes, m);
      const at::Tensor portable = portable::mask_targets(s.polygons, matched, boxes, m);
      ASSERT_EQ(portable.sizes(), native.sizes());
      ASSERT_EQ(portable.scalar_type(), at::kFloat);
      const int64_t differ = (portable != native).flatten(1).any(1).sum().item<int64_t>();
      EXPECT_EQ(differ, 0) << "scene " << scene << ", M = " << m << ": proposals differ";
      if (m == 28) {
        EXPECT_GT(native.sum().item<double>(), 256.0 * 50);  // not trivially empty
      }
    }
  }
}

// A batch's polygons as one list (concatenate), each proposal's instance offset by the instances
// of the images before its own: one call gives, bit for bit, what one call per image gives, on
// the native and the portable kernels.
TEST(MaskTargets, OneCallOverTheBatchsPolygonsIsTheCallPerImage) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(11);
  std::vector<Scene> scenes;
  std::vector<at::Tensor> matched, boxes;
  const std::array<int64_t, 3> instances{5, 1, 9}, positives{40, 0, 70};
  for (size_t i = 0; i < 3; ++i) {
    scenes.push_back(make_scene(gen, instances[i]));
    matched.push_back(at::randint(0, instances[i], {positives[i]}, gen));
    boxes.push_back(make_proposals(gen, scenes.back(), matched.back()));
  }
  std::vector<const PolygonList*> lists;
  for (const Scene& s : scenes) lists.push_back(&s.polygons);
  const ConcatenatedPolygons all = concatenate(lists);
  all.polygons.check();
  EXPECT_EQ(all.polygons.num_instances(), 15);
  EXPECT_EQ(all.first_instance, (std::vector<int64_t>{0, 5, 6}));
  std::vector<at::Tensor> shifted;
  for (size_t i = 0; i < 3; ++i) shifted.push_back(matched[i] + all.first_instance[i]);
  for (const Implementation impl : {Implementation::kNative, Implementation::kPortable}) {
    ImplementationGuard g(impl);
    std::vector<at::Tensor> per_image;
    for (size_t i = 0; i < 3; ++i) per_image.push_back(mask_targets(scenes[i].polygons, matched[i], boxes[i], 28));
    const at::Tensor once = mask_targets(all.polygons, at::cat(shifted), at::cat(boxes), 28);
    EXPECT_TRUE(at::equal(once, at::cat(per_image))) << static_cast<int>(impl);
    EXPECT_GT(once.sum().item<double>(), 110.0 * 50);  // not trivially empty
  }
}

// Slivers from far above to far below a 1-px proposal, nearly vertical: millions of dense points
// per edge, found by the portable op's windows around each column crossing.
TEST(PortableMaskTargets, FarVerticesEqualNative) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(7);
  std::vector<double> coords;
  std::vector<int64_t> poly{0};
  for (int p = 0; p < 6; ++p) {
    const double x = uniform(gen, -0.2, 1.2), ext = uniform(gen, 2e3, 2e4);
    const double dx = uniform(gen, 0, 0.6);
    for (double v : {x, -ext, x + dx, 0.7 * ext, x + dx + 0.3, 0.9 * ext, x + 0.05, -0.3 * ext}) {
      coords.push_back(v);
    }
    poly.push_back(static_cast<int64_t>(coords.size()));
  }
  const PolygonList p{at::tensor(coords, at::kDouble), at::tensor(poly, at::kLong),
                      at::tensor(std::vector<int64_t>{0, 3, 6}, at::kLong)};
  const at::Tensor matched = at::tensor(std::vector<int64_t>{0, 1, 0, 1}, at::kLong);
  const at::Tensor boxes = at::tensor({0.f, 0.f, 1.f, 1.f, 0.1f, -0.2f, 0.9f, 0.5f, -0.5f, 0.2f,
                                       1.5f, 0.3f, 0.25f, 0.f, 0.5f, 1.f})
                               .view({4, 4});
  const at::Tensor native = native_targets(p, matched, boxes, 28);
  EXPECT_TRUE(at::equal(portable::mask_targets(p, matched, boxes, 28), native));
  EXPECT_GT(native.sum().item<double>(), 0);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(PortableMaskTargets, ValueErrorsAndSwitch) {
  const PolygonList p{at::tensor({0.0, 0.0, 8.0, 0.0, 8.0, 8.0, 2e9, 3.0}, at::kDouble),
                      at::tensor(std::vector<int64_t>{0, 8}, at::kLong),
                      at::tensor(std::vector<int64_t>{0, 1}, at::kLong)};
  const at::Tensor box = at::tensor({0.f, 0.f, 8.f, 8.f, 0.f, 0.f, 1.f, 1.f}).view({2, 4});
  const at::Tensor nan_box = at::tensor({0.f, 0.f, 8.f, 8.f, 0.f, NAN, 1.f, 1.f}).view({2, 4});
  const at::Tensor ok = at::zeros({2}, at::kLong);
  const at::Tensor out_of_range = at::tensor(std::vector<int64_t>{0, 1}, at::kLong);
  for (const auto& [matched, boxes, fragment] :
       {std::tuple{out_of_range, box, "matched_gt_index[1] = 1 is not an instance"},
        std::tuple{ok, nan_box, "proposals[1] is not finite"},
        std::tuple{ok, box, "polygon vertex 3 is not finite or beyond +-1e8"}}) {
    const std::string want = error_of([&] { native_targets(p, matched, boxes, 28); });
    const std::string got = error_of([&] { portable::mask_targets(p, matched, boxes, 28); });
    EXPECT_NE(want.find(fragment), std::string::npos) << want;
    EXPECT_EQ(got.substr(0, got.find('\n')), want.substr(0, want.find('\n')));
  }
  // The vertex error is eval's std::invalid_argument on both.
  EXPECT_THROW(portable::mask_targets(p, ok, box, 28), std::invalid_argument);
  EXPECT_EQ(portable::mask_targets(p, at::zeros({0}, at::kLong), at::zeros({0, 4}), 28).sizes(),
            (std::vector<int64_t>{0, 28, 28}));
  // The public entry point runs the portable op under kPortable (same masks either way).
  const PolygonList square{at::tensor({1.0, 1.0, 7.0, 1.5, 6.0, 7.0}, at::kDouble),
                           at::tensor(std::vector<int64_t>{0, 6}, at::kLong),
                           at::tensor(std::vector<int64_t>{0, 1}, at::kLong)};
  ImplementationGuard g(Implementation::kPortable);
  EXPECT_TRUE(at::equal(mask_targets(square, ok, box, 8), native_targets(square, ok, box, 8)));
  EXPECT_THROW(mask_targets(p, ok, box, 28), std::invalid_argument);  // portable's own check
}

// 100 detections in an 800 x 1333 image: sides log-uniform from 1 to 1000 px, anywhere around the
// image, plus the edge cases.
at::Tensor paste_boxes(at::Generator& gen) {
  const at::Tensor xy = at::rand({100, 2}, gen) * at::tensor({1500.f, 950.f}) - 100.f;
  const at::Tensor wh = at::exp(at::rand({100, 2}, gen) * std::log(1000.f));
  at::Tensor b = at::cat({xy, xy + wh}, 1);
  const std::vector<std::array<float, 4>> cases{
      {10, 10, 10, 10},   {50, 60, 40, 55},         {-100, -80, -20, -5}, {1300, 790, 1400, 900},
      {0, 0, 1333, 800},  {-2000, -2000, 3000, 3000}, {1332.6f, 5, 1340, 9}, {3, 799.5f, 9, 805}};
  for (size_t i = 0; i < cases.size(); ++i) {
    for (int j = 0; j < 4; ++j) b[static_cast<int64_t>(i)][j] = cases[i][static_cast<size_t>(j)];
  }
  return b;
}

// Bit-identical: equal as integers of the same width (so -0 != +0).
bool same_bits(const at::Tensor& a, const at::Tensor& b) {
  if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type()) return false;
  const auto as = a.scalar_type() == at::kDouble ? at::kLong : at::kInt;
  return at::equal(a.contiguous().view(as), b.contiguous().view(as));
}

TEST(PortablePasteMasks, EqualNativeBitForBitAtMLPerfShapes) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(11);
  const at::Tensor masks = at::rand({100, 28, 28}, gen);
  const at::Tensor boxes = paste_boxes(gen);
  for (const auto& [dtype, padding] :
       {std::pair{at::kFloat, int64_t{1}}, std::pair{at::kFloat, int64_t{0}},
        std::pair{at::kFloat, int64_t{2}}, std::pair{at::kDouble, int64_t{1}}}) {
    const at::Tensor m = masks.to(dtype), b = boxes.to(dtype);
    at::Tensor native, native_binary;
    {
      ImplementationGuard g(Implementation::kNative);
      native = paste_masks_in_image(m, b, 800, 1333, padding);
      native_binary = paste_masks_in_image_binary(m, b, 800, 1333, padding, 0.5);
    }
    const at::Tensor portable = portable::paste_masks_in_image(m, b, 800, 1333, padding);
    EXPECT_TRUE(same_bits(portable, native)) << dtype << " padding " << padding;
    const at::Tensor binary = portable::paste_masks_in_image_binary(m, b, 800, 1333, padding, 0.5);
    EXPECT_EQ(binary.scalar_type(), at::kByte);
    EXPECT_TRUE(at::equal(binary, native_binary)) << dtype << " padding " << padding;
    EXPECT_GT(native.sum().item<double>(), 1e5);
  }
}

TEST(PortablePasteMasks, EdgeCasesErrorsAndSwitch) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(12);
  const at::Tensor masks = at::rand({4, 14, 7}, gen);  // not square: M is the last dimension
  at::Tensor boxes = paste_boxes(gen).narrow(0, 96, 4).contiguous();
  for (const auto& [h, w] : {std::pair<int64_t, int64_t>{0, 5}, std::pair<int64_t, int64_t>{7, 0},
                            std::pair<int64_t, int64_t>{1, 1}, std::pair<int64_t, int64_t>{3, 2000},
                            std::pair<int64_t, int64_t>{100, 120}}) {
    at::Tensor native;
    {
      ImplementationGuard g(Implementation::kNative);
      native = paste_masks_in_image(masks, boxes, h, w, 1);
    }
    EXPECT_TRUE(same_bits(portable::paste_masks_in_image(masks, boxes, h, w, 1), native))
        << h << "x" << w;
  }
  boxes[2][3] = INFINITY;
  for (bool binary : {false, true}) {
    const std::string got = error_of([&] {
      binary ? portable::paste_masks_in_image_binary(masks, boxes, 20, 20, 1, 0.5)
             : portable::paste_masks_in_image(masks, boxes, 20, 20, 1);
    });
    EXPECT_NE(got.find("mrcnn::paste_masks_in_image: boxes[2] is not finite"), std::string::npos)
        << got;
  }
  const std::string shape = error_of([&] {
    portable::paste_masks_in_image(masks, at::zeros({3, 4}), 8, 8, 1);
  });
  EXPECT_NE(shape.find("boxes must be [D, 4]"), std::string::npos) << shape;
  // The public entry points follow the switch: the portable op accepts float16 (computed in
  // float32), which the native CPU kernel does not.
  const at::Tensor half = masks.to(at::kHalf);
  const at::Tensor finite = paste_boxes(gen).narrow(0, 10, 4).contiguous();
  ImplementationGuard g(Implementation::kPortable);
  EXPECT_EQ(paste_masks_in_image(half, finite, 30, 40, 1).scalar_type(), at::kHalf);
  EXPECT_EQ(paste_masks_in_image_binary(half, finite, 30, 40, 1, 0.5).scalar_type(), at::kByte);
}

}  // namespace
}  // namespace mrcnn::ops
