// The RPN's anchors, kept per batch shape: a shape seen recently gets the very tensors it got
// before, whose values equal freshly built ones; other shapes, dtypes and an evicted shape get
// their own.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <vector>

#include "model/rpn.h"

namespace mrcnn::model {
namespace {

std::vector<at::Tensor> pyramid(int64_t h, int64_t w, at::ScalarType dtype = at::kFloat) {
  std::vector<at::Tensor> f;
  for (int64_t s : {4, 8, 16, 32, 64}) f.push_back(at::zeros({1, 2, (h + s - 1) / s, (w + s - 1) / s}, dtype));
  return f;
}

void expect_equal_lists(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t l = 0; l < a.size(); ++l) EXPECT_TRUE(at::equal(a[l], b[l])) << "level " << l;
}

TEST(RpnAnchors, ReusedPerShapeEqualToFreshOnesAndBounded) {
  RPN rpn(RPNOptions{}, 2);
  const auto first = rpn->anchors(pyramid(256, 320));
  const auto again = rpn->anchors(pyramid(256, 320));
  ASSERT_EQ(first.size(), 5u);
  for (size_t l = 0; l < first.size(); ++l)
    EXPECT_TRUE(first[l].is_same(again[l])) << "level " << l << ": a seen shape reuses its anchors";
  expect_equal_lists(first, RPN(RPNOptions{}, 2)->anchors(pyramid(256, 320)));

  const auto other = rpn->anchors(pyramid(320, 256));
  EXPECT_NE(other[0].size(0), 0);
  EXPECT_FALSE(other[0].is_same(first[0]));
  expect_equal_lists(other, RPN(RPNOptions{}, 2)->anchors(pyramid(320, 256)));
  const auto f64 = rpn->anchors(pyramid(256, 320, at::kDouble));
  EXPECT_EQ(f64[0].scalar_type(), at::kDouble);
  EXPECT_TRUE(at::equal(f64[0].to(at::kFloat), first[0]));

  // Sixteen other shapes push the first one out: it is built again, with the same values.
  for (int64_t i = 1; i <= 16; ++i) rpn->anchors(pyramid(256 + 32 * i, 320));
  const auto rebuilt = rpn->anchors(pyramid(256, 320));
  EXPECT_FALSE(rebuilt[0].is_same(first[0]));
  expect_equal_lists(rebuilt, first);
}

}  // namespace
}  // namespace mrcnn::model
