// Transforms: the reference resize size, box and polygon conversion, clipping, resizing and
// flipping, the seeded flip decision, the pixel table and the fused resize/normalize/pad writer.
// (The pixels themselves are compared with PIL and torchvision in test_data_reference.py.)
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "benchmark/data/resample.h"
#include "benchmark/data/rng.h"
#include "benchmark/data/transforms.h"

namespace mrcnn::data {
namespace {

TEST(ReferenceResizeSize, CocoShapes) {
  // 640 x 480 landscape: short side 800, long side int(800 * 640 / 480) = 1066.
  EXPECT_EQ(reference_resize_size({480, 640}, 800, 1333), (ImageSize{800, 1066}));
  EXPECT_EQ(reference_resize_size({640, 480}, 800, 1333), (ImageSize{1066, 800}));
  EXPECT_EQ(reference_resize_size({500, 500}, 800, 1333), (ImageSize{800, 800}));
  EXPECT_EQ(reference_resize_size({427, 640}, 800, 1333), (ImageSize{800, 1199}));
}

TEST(ReferenceResizeSize, LongSideLimited) {
  // 1000 x 100: 800 would make the long side 8000 > 1333, so size = round(1333 * 100 / 1000).
  EXPECT_EQ(reference_resize_size({100, 1000}, 800, 1333), (ImageSize{133, 1330}));
  EXPECT_EQ(reference_resize_size({1000, 100}, 800, 1333), (ImageSize{1330, 133}));
  // No limit when max_size <= 0.
  EXPECT_EQ(reference_resize_size({100, 1000}, 800, 0), (ImageSize{800, 8000}));
}

TEST(ReferenceResizeSize, RoundsHalfToEvenLikePython) {
  // 1333 * 5 / 2666 = 2.5 exactly: Python's round() gives 2, std::round would give 3.
  EXPECT_EQ(reference_resize_size({5, 2666}, 800, 1333), (ImageSize{2, 1066}));
  // 1333 * 3 / 2666 = 1.5 -> 2.
  EXPECT_EQ(reference_resize_size({3, 2666}, 800, 1333), (ImageSize{2, 1777}));
}

TEST(ReferenceResizeSize, ShortSideAlreadyThere) {
  EXPECT_EQ(reference_resize_size({800, 1000}, 800, 1333), (ImageSize{800, 1000}));
  EXPECT_EQ(reference_resize_size({1200, 800}, 800, 1333), (ImageSize{1200, 800}));
}

TEST(ReferenceResizeSize, RejectsEmptySizes) {
  EXPECT_THROW(reference_resize_size({0, 10}, 800, 1333), std::invalid_argument);
  EXPECT_THROW(reference_resize_size({10, 10}, 0, 1333), std::invalid_argument);
}

TEST(TransformOptions, ValidateNamesTheField) {
  TransformOptions o;
  o.flip_probability = 1.5;
  try {
    o.validate();
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("flip_probability"), std::string::npos) << e.what();
  }
  o = TransformOptions::torchvision();
  o.pixel_std[1] = 0.0f;
  EXPECT_THROW(o.validate(), std::invalid_argument);
  EXPECT_NO_THROW(TransformOptions::mlperf_train().validate());
  EXPECT_EQ(TransformOptions::mlperf_eval().flip_probability, 0.0);
}

TEST(Boxes, CocoToXyxyBothConventions) {
  const std::array<float, 4> b{10.0f, 20.0f, 5.0f, 0.5f};
  EXPECT_EQ(coco_box_to_xyxy(b, true), (std::array<float, 4>{10.0f, 20.0f, 14.0f, 20.0f}));
  EXPECT_EQ(coco_box_to_xyxy(b, false), (std::array<float, 4>{10.0f, 20.0f, 15.0f, 20.5f}));
}

TEST(Boxes, ClipAndRemoveEmpty) {
  std::array<float, 4> b{-5.0f, 3.0f, 120.0f, 50.0f};
  EXPECT_TRUE(clip_box(b, {60, 100}, true));
  EXPECT_EQ(b, (std::array<float, 4>{0.0f, 3.0f, 99.0f, 50.0f}));
  std::array<float, 4> c{-5.0f, 3.0f, 120.0f, 70.0f};
  EXPECT_TRUE(clip_box(c, {60, 100}, false));
  EXPECT_EQ(c, (std::array<float, 4>{0.0f, 3.0f, 100.0f, 60.0f}));
  std::array<float, 4> empty{10.0f, 20.0f, 10.0f, 30.0f};
  EXPECT_FALSE(clip_box(empty, {60, 100}, true));
  std::array<float, 4> outside{150.0f, 20.0f, 160.0f, 30.0f};  // right of the image: x1 == x2
  EXPECT_FALSE(clip_box(outside, {60, 100}, true));
}

InstanceTargets one_instance() {
  InstanceTargets t;
  t.boxes = {10.0f, 20.0f, 30.0f, 40.0f};
  t.labels = {3};
  t.coords = {10.0, 20.0, 30.0, 20.0, 30.0, 40.0, 10.0, 40.0};
  t.poly_offsets = {0, 8};
  t.instance_offsets = {0, 1};
  return t;
}

TEST(Targets, FlipBoxesAndPolygonsWithReferenceConvention) {
  InstanceTargets t = one_instance();
  flip_targets(t, 100, true);
  // x' = W - x - 1 for polygon points; box (x1, x2) -> (W - x2 - 1, W - x1 - 1).
  EXPECT_EQ(t.boxes, (std::vector<float>{69.0f, 20.0f, 89.0f, 40.0f}));
  EXPECT_EQ(t.coords, (std::vector<double>{89.0, 20.0, 69.0, 20.0, 69.0, 40.0, 89.0, 40.0}));
  EXPECT_EQ(t.labels, (std::vector<int64_t>{3}));
  flip_targets(t, 100, true);  // an involution
  EXPECT_EQ(t.boxes, one_instance().boxes);
  EXPECT_EQ(t.coords, one_instance().coords);
}

TEST(Targets, FlipContinuousConvention) {
  InstanceTargets t = one_instance();
  flip_targets(t, 100, false);
  EXPECT_EQ(t.boxes, (std::vector<float>{70.0f, 20.0f, 90.0f, 40.0f}));
  EXPECT_EQ(t.coords[0], 90.0);
  EXPECT_EQ(t.coords[2], 70.0);
}

TEST(Targets, ResizeScalesEachAxis) {
  InstanceTargets t = one_instance();
  resize_targets(t, {60, 100}, {120, 150});  // x * 1.5, y * 2
  EXPECT_EQ(t.boxes, (std::vector<float>{15.0f, 40.0f, 45.0f, 80.0f}));
  EXPECT_EQ(t.coords, (std::vector<double>{15.0, 40.0, 45.0, 40.0, 45.0, 80.0, 15.0, 80.0}));
}

TEST(FlipDecision, SeededAndBalanced) {
  int flips = 0;
  for (int64_t i = 0; i < 20000; ++i) flips += flip_decision(7, 3, i, 0.5);
  EXPECT_GT(flips, 9600);
  EXPECT_LT(flips, 10400);
  int same_epoch = 0, other_epoch = 0, other_seed = 0;
  for (int64_t i = 0; i < 1000; ++i) {
    same_epoch += flip_decision(7, 3, i, 0.5) == flip_decision(7, 3, i, 0.5);
    other_epoch += flip_decision(7, 3, i, 0.5) == flip_decision(7, 4, i, 0.5);
    other_seed += flip_decision(7, 3, i, 0.5) == flip_decision(8, 3, i, 0.5);
  }
  EXPECT_EQ(same_epoch, 1000);
  EXPECT_LT(other_epoch, 600);  // unrelated streams agree about half the time
  EXPECT_LT(other_seed, 600);
  EXPECT_FALSE(flip_decision(7, 3, 0, 0.0));
  EXPECT_TRUE(flip_decision(7, 3, 0, 1.0));
}

TEST(Rng, BelowIsInRangeAndShuffleIsAPermutation) {
  Rng r(derive_seed({1, 2, 3}));
  std::vector<int> hist(7, 0);
  for (int i = 0; i < 7000; ++i) ++hist[r.below(7)];
  for (int h : hist) EXPECT_GT(h, 800);
  std::vector<int> v(100);
  for (int i = 0; i < 100; ++i) v[i] = i;
  Rng a(5), b(5);
  std::vector<int> va = v, vb = v;
  a.shuffle(va.begin(), va.end());
  b.shuffle(vb.begin(), vb.end());
  EXPECT_EQ(va, vb);
  EXPECT_NE(va, v);
  std::sort(va.begin(), va.end());
  EXPECT_EQ(va, v);
}

Image gradient_image(int64_t h, int64_t w) {
  Image im(h, w);
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x)
      for (int c = 0; c < 3; ++c)
        im.row(y)[3 * x + c] = static_cast<uint8_t>((x * 7 + y * 13 + c * 50) % 256);
  return im;
}

TEST(Resample, IdentityAndConstantImages) {
  const Image g = gradient_image(9, 13);
  EXPECT_EQ(resize_bilinear(g, 9, 13).rgb, g.rgb);
  Image flat(10, 12);
  std::fill(flat.rgb.begin(), flat.rgb.end(), uint8_t{77});
  for (auto [h, w] : {std::pair{5, 6}, {23, 31}, {10, 3}, {1, 1}}) {
    const Image r = resize_bilinear(flat, h, w);
    ASSERT_EQ(r.height, h);
    ASSERT_EQ(r.width, w);
    for (uint8_t v : r.rgb) ASSERT_EQ(v, 77);
  }
}

TEST(Resample, HalvingAveragesBlocks) {
  // A 2x downscale widens the triangle filter to support 2: output row 1 (centre 3.0 in input
  // coordinates) reads input rows 1..4 with weights 1/8, 3/8, 3/8, 1/8.
  Image im(8, 8);
  for (int64_t y = 0; y < 8; ++y)
    for (int64_t x = 0; x < 8; ++x)
      for (int c = 0; c < 3; ++c) im.row(y)[3 * x + c] = static_cast<uint8_t>(40 * (y / 2));
  const Image r = resize_bilinear(im, 4, 4);
  EXPECT_EQ(r.row(1)[0], static_cast<uint8_t>(std::lround((1 * 0 + 3 * 40 + 3 * 40 + 1 * 80) / 8.0)));
  for (int64_t x = 0; x < 4; ++x) EXPECT_EQ(r.row(1)[3 * x], r.row(1)[0]);
}

TEST(PixelTable, ReferenceArithmetic) {
  const TransformOptions m = TransformOptions::mlperf_train();
  const PixelTable t(m.to_bgr255, m.pixel_mean, m.pixel_std);
  EXPECT_EQ(t.source_channel(0), 2);  // BGR
  EXPECT_FLOAT_EQ(t.value[0][0], -102.9801f);
  EXPECT_FLOAT_EQ(t.value[2][255], 255.0f - 122.7717f);
  const TransformOptions v = TransformOptions::torchvision();
  const PixelTable u(v.to_bgr255, v.pixel_mean, v.pixel_std);
  EXPECT_EQ(u.source_channel(0), 0);
  EXPECT_FLOAT_EQ(u.value[1][255], (1.0f - 0.456f) / 0.224f);
}

TEST(ResizeNormalizeInto, MatchesResizeThenTableAndPadsWithZero) {
  // Upscale, 2x+ downscale, one axis only, and widths that leave SIMD tails; both presets (the
  // MLPerf one takes the vector subtraction, the torchvision one the table).
  const struct {
    int64_t h, w, oh, ow;
  } cases[] = {{17, 23, 30, 41}, {40, 64, 17, 29}, {9, 100, 9, 37}, {50, 33, 101, 33}, {31, 47, 31, 47}};
  for (const TransformOptions& m : {TransformOptions::mlperf_train(), TransformOptions::torchvision()}) {
    const PixelTable table(m.to_bgr255, m.pixel_mean, m.pixel_std);
    for (const auto& k : cases) {
      const Image src = gradient_image(k.h, k.w);
      const int64_t ph = (k.oh + 31) / 32 * 32, pw = (k.ow + 31) / 32 * 32 + 32;
      const Image resized = resize_bilinear(src, k.oh, k.ow);
      for (bool flip : {false, true}) {
        std::vector<float> slot(3 * ph * pw, std::numeric_limits<float>::quiet_NaN());
        resize_normalize_into(src, k.oh, k.ow, flip, table, slot.data(), ph, pw);
        for (int c = 0; c < 3; ++c)
          for (int64_t y = 0; y < ph; ++y)
            for (int64_t x = 0; x < pw; ++x) {
              const float got = slot[static_cast<size_t>((c * ph + y) * pw + x)];
              if (y >= k.oh || x >= k.ow) {
                ASSERT_EQ(got, 0.0f) << "padding at c=" << c << " y=" << y << " x=" << x;
                continue;
              }
              const int64_t sx = flip ? k.ow - 1 - x : x;
              const uint8_t v = resized.row(y)[3 * sx + table.source_channel(c)];
              ASSERT_EQ(got, table.value[c][v]) << k.h << "x" << k.w << "->" << k.oh << "x" << k.ow
                                                << " c=" << c << " y=" << y << " x=" << x << " flip=" << flip;
            }
      }
    }
  }
  const Image src = gradient_image(17, 23);
  const PixelTable table(true, {1, 2, 3}, {1, 1, 1});
  std::vector<float> small(3 * 8 * 8);
  EXPECT_THROW(resize_normalize_into(src, 30, 41, false, table, small.data(), 8, 8), std::invalid_argument);
}

TEST(PixelTable, SubtractionShortcutOnlyWhenExact) {
  const TransformOptions m = TransformOptions::mlperf_train();
  EXPECT_TRUE(PixelTable(m.to_bgr255, m.pixel_mean, m.pixel_std).subtract_only);
  const TransformOptions v = TransformOptions::torchvision();
  EXPECT_FALSE(PixelTable(v.to_bgr255, v.pixel_mean, v.pixel_std).subtract_only);
  EXPECT_THROW(PixelTable(true, {0, 0, 0}, {1, 0, 1}), std::invalid_argument);
}

TEST(ResampleAxis, WindowsHoldEveryNonZeroTap) {
  for (auto [in, out] : {std::pair<int64_t, int64_t>{640, 1066}, {480, 800}, {640, 213}, {7, 3}, {1, 5}, {5, 1}}) {
    const ResampleAxis ax(in, out);
    if (in < out && in >= 2) {
      EXPECT_EQ(ax.window, 2) << in << "->" << out;  // upscaling reads two inputs
    }
    for (int64_t i = 0; i < out; ++i) {
      int64_t sum_pil = 0, sum_win = 0;
      for (int64_t t = 0; t < ax.count[i]; ++t) sum_pil += ax.coeffs[i * ax.ksize + t];
      for (int64_t t = 0; t < ax.window; ++t) sum_win += ax.window_coeffs[i * ax.window + t];
      ASSERT_EQ(sum_pil, sum_win) << in << "->" << out << " output " << i;
      ASSERT_GE(ax.window_first[i], 0);
      ASSERT_LE(ax.window_first[i] + ax.window, in);
    }
    const ResampleAxis m = ax.mirrored();
    EXPECT_EQ(m.window_first.front(), ax.window_first.back());
  }
}

}  // namespace
}  // namespace mrcnn::data
