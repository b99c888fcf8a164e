// The RLE codec against values computed with pycocotools 2.0.11 (strings quoted below), plus
// round trips and errors. The randomized comparison with pycocotools is test_rle_parity.py.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "eval/rle.h"

namespace mrcnn::eval {
namespace {

using ::testing::HasSubstr;

// 5x6 mask, row-major: a 3x3 block at rows 1..3, columns 2..4, plus (0,0) and (4,5).
std::vector<uint8_t> sample_mask() {
  std::vector<uint8_t> m(5 * 6, 0);
  for (int y = 1; y < 4; ++y)
    for (int x = 2; x < 5; ++x) m[y * 6 + x] = 1;
  m[0] = 1;
  m[4 * 6 + 5] = 1;
  return m;
}

TEST(Rle, EncodeMatchesPycocotools) {
  const auto m = sample_mask();
  const Rle r = encode_row_major(m.data(), 5, 6);
  EXPECT_EQ(to_string(r), "01:2H0003N");  // mask.encode(np.asfortranarray(m))['counts']
  EXPECT_EQ(area(r), 11u);
  const auto bb = to_bbox(r);
  EXPECT_EQ(bb, (std::array<double, 4>{0, 0, 6, 5}));
  // The same mask given column-major gives the same RLE.
  std::vector<uint8_t> col(30);
  for (int y = 0; y < 5; ++y)
    for (int x = 0; x < 6; ++x) col[x * 5 + y] = m[y * 6 + x];
  EXPECT_EQ(encode_column_major(col.data(), 5, 6), r);
}

TEST(Rle, NonZeroBytesAreForeground) {
  const uint8_t a[4] = {0, 1, 255, 7};
  const uint8_t b[4] = {0, 1, 1, 1};
  EXPECT_EQ(encode_column_major(a, 2, 2), encode_column_major(b, 2, 2));
}

TEST(Rle, DecodeRoundTripsRandomMasks) {
  std::mt19937 gen(7);
  for (int trial = 0; trial < 50; ++trial) {
    const uint32_t h = 1 + gen() % 40, w = 1 + gen() % 40;
    std::vector<uint8_t> m(h * w);
    const unsigned density = gen() % 5;
    for (auto& v : m) v = (gen() % 5) < density ? 1 : 0;
    const Rle r = encode_row_major(m.data(), h, w);
    std::vector<uint8_t> back(h * w, 9);
    decode_row_major(r, back.data());
    ASSERT_EQ(back, m);
    const Rle s = from_string(to_string(r), h, w);
    ASSERT_EQ(s, r);
    std::vector<uint8_t> colm(h * w);
    decode_column_major(r, colm.data());
    for (uint32_t y = 0; y < h; ++y)
      for (uint32_t x = 0; x < w; ++x) ASSERT_EQ(colm[x * h + y], m[y * w + x]);
  }
}

TEST(Rle, RowMajorEqualsColumnMajorForEveryMaskOfFourByThree) {
  // Every 4x3 mask (4096): foreground touching any border, runs across columns, empty, full.
  const uint32_t h = 4, w = 3;
  for (uint32_t bits = 0; bits < (1u << (h * w)); ++bits) {
    std::vector<uint8_t> row(h * w), col(h * w);
    for (uint32_t y = 0; y < h; ++y)
      for (uint32_t x = 0; x < w; ++x) {
        const uint8_t v = (bits >> (y * w + x)) & 1;
        row[y * w + x] = v;
        col[x * h + y] = v;
      }
    ASSERT_EQ(encode_row_major(row.data(), h, w), encode_column_major(col.data(), h, w)) << bits;
  }
}

TEST(Rle, LargeCountsRoundTrip) {
  std::vector<uint8_t> big(300 * 200, 0);
  for (int y = 10; y < 250; ++y)
    for (int x = 30; x < 180; ++x) big[y * 200 + x] = (y >= 100 && y < 120) ? 0 : 1;
  const Rle r = encode_row_major(big.data(), 300, 200);
  EXPECT_EQ(to_string(r).substr(0, 12), "bi8j2d0X1X1h");  // pycocotools' first 12 characters
  EXPECT_EQ(area(r), 33000u);
}

TEST(Rle, FromStringRejectsMalformedInput) {
  EXPECT_THAT([] { from_string("01:2H0003", 5, 6); },
              ::testing::ThrowsMessage<std::invalid_argument>(HasSubstr("add up to")));
  EXPECT_THAT([] { from_string("01:2H0003N", 5, 7); },
              ::testing::ThrowsMessage<std::invalid_argument>(HasSubstr("size [5, 7] has 35")));
  EXPECT_THAT([] { from_string("01 2", 5, 6); },
              ::testing::ThrowsMessage<std::invalid_argument>(HasSubstr("invalid character")));
  EXPECT_THAT([] { from_string("0o", 5, 6); },
              ::testing::ThrowsMessage<std::invalid_argument>(HasSubstr("truncated")));
  EXPECT_THAT([] { from_counts({3, 4}, 2, 2); },
              ::testing::ThrowsMessage<std::invalid_argument>(HasSubstr("add up to 7")));
  // 13 groups of 5 bits: past 64 bits, refused before any shift beyond the word (found by fuzz_rle).
  EXPECT_THAT([] { from_string(std::string(12, '\\') + "L", 5, 60); },
              ::testing::ThrowsMessage<std::invalid_argument>(HasSubstr("longer than 64 bits")));
  EXPECT_THAT([] { from_string("", 70000, 70000); },
              ::testing::ThrowsMessage<std::invalid_argument>(HasSubstr("2^32")));
}

TEST(Rle, PolygonsAndBoxesMatchPycocotools) {
  const double tri[] = {1.2, 0.5, 4.7, 1.1, 3.3, 4.9};
  EXPECT_EQ(to_string(from_polygon(tri, 3, 5, 6)), ";232NM7");
  const std::vector<std::vector<double>> parts = {{1.2, 0.5, 4.7, 1.1, 3.3, 4.9},
                                                  {0, 3, 1, 3, 1, 5, 0, 5}};
  EXPECT_EQ(to_string(from_polygon(parts[1].data(), 4, 5, 6)), "32i0");
  EXPECT_EQ(to_string(from_polygons(parts, 5, 6)), "3260M2NM7");
  EXPECT_EQ(to_string(from_box({0.5, 0.5, 3, 4}, 5, 6)), "6410009");
  EXPECT_EQ(to_string(from_box({1, 1, 3, 2}, 5, 6)), "6230009");
  // No polygon: an empty mask of the requested size.
  EXPECT_EQ(area(from_polygons({}, 5, 6)), 0u);
  const double bad[] = {0, 0, 1e300, 0, 1, 1};
  EXPECT_THROW(from_polygon(bad, 3, 5, 6), std::invalid_argument);
}

TEST(Rle, RasterizeIntoGridEqualsMergedPolygons) {
  std::mt19937 gen(3);
  std::uniform_real_distribution<double> u(-3.0, 23.0);
  for (int trial = 0; trial < 30; ++trial) {
    std::vector<double> coords;
    std::vector<int64_t> offsets{0};
    std::vector<std::vector<double>> polys;
    const int np = 1 + trial % 3;
    for (int j = 0; j < np; ++j) {
      auto& p = polys.emplace_back();
      const int k = 3 + static_cast<int>(gen() % 6);
      for (int i = 0; i < 2 * k; ++i) p.push_back(u(gen));
      coords.insert(coords.end(), p.begin(), p.end());
      offsets.push_back(static_cast<int64_t>(coords.size()));
    }
    const uint32_t h = 17, w = 21;
    std::vector<uint8_t> grid(h * w, 7), expect(h * w);
    rasterize_polygons(coords.data(), offsets.data(), polys.size(), h, w, grid.data());
    decode_row_major(from_polygons(polys, h, w), expect.data());
    ASSERT_EQ(grid, expect) << "trial " << trial;
  }
  std::vector<uint8_t> grid(4);
  const int64_t odd[] = {0, 3};
  const double c[] = {0, 0, 1};
  EXPECT_THROW(rasterize_polygons(c, odd, 1, 2, 2, grid.data()), std::invalid_argument);
}

TEST(Rle, MergeAreaIou) {
  const auto m = sample_mask();
  const Rle e = encode_row_major(m.data(), 5, 6);
  const Rle b = from_box({1, 1, 3, 2}, 5, 6);
  EXPECT_EQ(to_string(merge(e, b, true)), ";2309");
  EXPECT_EQ(to_string(merge(e, b, false)), "0151N1O0003N");
  const Rle both[] = {e, b};
  EXPECT_EQ(merge(both, false), merge(e, b, false));
  EXPECT_EQ(area(b), 6u);
  EXPECT_DOUBLE_EQ(iou(e, b, false), 4.0 / 13.0);  // pycocotools: 0.30769231
  EXPECT_DOUBLE_EQ(iou(e, b, true), 4.0 / 11.0);   // crowd: over the detection's area
  EXPECT_THROW(merge(e, from_box({0, 0, 1, 1}, 6, 5), false), std::invalid_argument);
  EXPECT_EQ(iou(e, from_box({0, 0, 1, 1}, 6, 5), false), -1.0);  // sizes differ, boxes overlap
  double out[2];
  const Rle dts[] = {e, b};
  const Rle gts[] = {b};
  const uint8_t crowd[] = {1};
  iou_matrix(dts, gts, crowd, out);
  EXPECT_DOUBLE_EQ(out[0], 4.0 / 11.0);
  EXPECT_DOUBLE_EQ(out[1], 1.0);
}

TEST(Rle, BoxIouArithmetic) {
  const double d[] = {0, 0, 10, 10}, g[] = {5, 5, 10, 10}, far[] = {20, 20, 1, 1};
  EXPECT_DOUBLE_EQ(box_iou(d, g, false), 25.0 / 175.0);
  EXPECT_DOUBLE_EQ(box_iou(d, g, true), 25.0 / 100.0);
  EXPECT_EQ(box_iou(d, far, false), 0.0);
}

TEST(Rle, EmptyMaskBox) {
  const Rle r = from_counts({30}, 5, 6);
  EXPECT_EQ(to_bbox(r), (std::array<double, 4>{0, 0, 0, 0}));
  EXPECT_EQ(area(r), 0u);
}

}  // namespace
}  // namespace mrcnn::eval
