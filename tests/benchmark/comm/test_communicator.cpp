#include <gtest/gtest.h>

#include "benchmark/comm/communicator.h"

namespace mrcnn::comm {
namespace {

// A stand-in for the ranks' sum: every element doubled, the bucket's size recorded.
struct Doubling {
  std::vector<int64_t> bucket_sizes;
  std::vector<at::ScalarType> bucket_types;
  at::Tensor operator()(at::Tensor buffer) {
    bucket_sizes.push_back(buffer.numel());
    bucket_types.push_back(buffer.scalar_type());
    return buffer * 2;
  }
};

TEST(ReduceInBuckets, EveryTensorGetsItsOwnReducedValuesBack) {
  at::manual_seed(3);
  std::vector<at::Tensor> ts{at::randn({3, 4}), at::randn({5}), at::randn({2, 2}, at::kDouble), at::randn({7}),
                             at::randn({1, 1, 2})};
  std::vector<at::Tensor> before;
  for (const auto& t : ts) before.push_back(t.clone());
  Doubling d;
  reduce_in_buckets(ts, /*bucket_bytes=*/1 << 20, std::ref(d));
  for (size_t i = 0; i < ts.size(); ++i) {
    EXPECT_TRUE(at::equal(ts[i], before[i] * 2)) << i;
    EXPECT_EQ(ts[i].sizes(), before[i].sizes()) << i;
  }
  // A dtype change starts a new bucket: float (3x4 + 5), double (2x2), float (7 + 2).
  EXPECT_EQ(d.bucket_sizes, (std::vector<int64_t>{17, 4, 9}));
  EXPECT_EQ(d.bucket_types, (std::vector<at::ScalarType>{at::kFloat, at::kDouble, at::kFloat}));
}

TEST(ReduceInBuckets, BucketsStayWithinTheByteLimitExceptForOneLargeTensor) {
  std::vector<at::Tensor> ts{at::ones({10}), at::ones({10}), at::ones({100}), at::ones({5}), at::ones({5}),
                             at::ones({5})};
  Doubling d;
  reduce_in_buckets(ts, /*bucket_bytes=*/80, std::ref(d));  // 20 floats
  EXPECT_EQ(d.bucket_sizes, (std::vector<int64_t>{20, 100, 15}));
  for (const auto& t : ts) EXPECT_TRUE(at::equal(t, at::full_like(t, 2)));
}

TEST(LocalCommunicator, IsOneRankWhoseCollectivesChangeNothing) {
  auto c = make_communicator("local");
  EXPECT_EQ(c->world_size(), 1);
  EXPECT_TRUE(c->is_main());
  std::vector<at::Tensor> ts{at::arange(4, at::kFloat)};
  c->allreduce_mean(ts);
  EXPECT_TRUE(at::equal(ts[0], at::arange(4, at::kFloat)));
  EXPECT_EQ(c->gather_bytes("abc", 0), std::vector<std::string>{"abc"});
  EXPECT_THROW(c->gather_bytes("abc", 1), std::invalid_argument);
  EXPECT_THROW(make_communicator("gloo"), std::runtime_error);
}

}  // namespace
}  // namespace mrcnn::comm
