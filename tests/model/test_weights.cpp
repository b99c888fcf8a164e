// Weight I/O of the whole network (safetensors) and the MLPerf initialization names.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>

#include "model/mask_rcnn.h"
#include "model/safetensors.h"
#include "model/weights.h"
#include "tests/model/tiny.h"

namespace mrcnn::model {
namespace {

class WeightsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           (std::string("mrcnn-weights-") +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& n) const { return (dir_ / n).string(); }

  static MaskRCNN model(uint64_t seed, ModelOptions o = testing::tiny_options()) {
    return MaskRCNN(o, at::make_generator<at::CPUGeneratorImpl>(seed));
  }

  std::filesystem::path dir_;
};

bool same_weights(const MaskRCNN& a, const MaskRCNN& b) {
  const auto ta = named_tensors(*a), tb = named_tensors(*b);
  if (ta.size() != tb.size()) return false;
  for (const auto& [name, t] : ta)
    if (!tb.count(name) || !at::equal(t, tb.at(name))) return false;
  return true;
}

TEST_F(WeightsTest, SeededInitializationIsReproducible) {
  EXPECT_TRUE(same_weights(model(1), model(1)));
  EXPECT_FALSE(same_weights(model(1), model(2)));
}

TEST_F(WeightsTest, SaveLoadRoundTrip) {
  MaskRCNN a = model(1), b = model(2);
  save_weights(*a, path("a.safetensors"), {{"step", "7"}});
  const LoadReport r = load_weights(*b, path("a.safetensors"));
  EXPECT_TRUE(same_weights(a, b));
  EXPECT_TRUE(r.missing.empty());
  EXPECT_TRUE(r.unexpected.empty());
  EXPECT_EQ(r.loaded.size(), named_tensors(*a).size());
  EXPECT_EQ(r.metadata.at("step"), "7");
}

TEST_F(WeightsTest, ChannelsLastModelsSaveNchwAndKeepTheirLayoutOnLoad) {
  ModelOptions o = testing::tiny_options();
  o.channels_last = true;
  MaskRCNN a = model(1, o), b = model(2, o);
  EXPECT_TRUE(a->fpn->layer[0]->weight.is_contiguous(at::MemoryFormat::ChannelsLast));
  save_weights(*a, path("a.safetensors"));
  const TensorFile f = read_safetensors(path("a.safetensors"));
  for (const auto& [name, t] : f.tensors) EXPECT_TRUE(t.is_contiguous()) << name;
  load_weights(*b, path("a.safetensors"));
  EXPECT_TRUE(same_weights(a, b));
  EXPECT_TRUE(b->fpn->layer[0]->weight.is_contiguous(at::MemoryFormat::ChannelsLast));
  // A channels-last checkpoint loads into an NCHW model and back: the file is layout-free.
  MaskRCNN c = model(3);
  load_weights(*c, path("a.safetensors"));
  EXPECT_TRUE(same_weights(a, c));
}

TEST_F(WeightsTest, MismatchesAreErrorsThatLeaveTheModelUntouched) {
  ModelOptions other = testing::tiny_options();
  other.num_classes = 6;
  MaskRCNN a = model(1, other), b = model(2);
  save_weights(*a, path("a.safetensors"));
  const MaskRCNN before = model(2);
  try {
    load_weights(*b, path("a.safetensors"));
    FAIL() << "loaded a checkpoint of another class count";
  } catch (const SafetensorsError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("roi_heads.box_predictor"), std::string::npos) << what;
    EXPECT_NE(what.find("the model expects"), std::string::npos) << what;
  }
  EXPECT_TRUE(same_weights(b, before));
}

TEST_F(WeightsTest, PartialFilesNeedPermission) {
  MaskRCNN a = model(1), b = model(2);
  std::map<std::string, at::Tensor> backbone_only, extra = named_tensors(*a);
  for (const auto& [name, t] : named_tensors(*a))
    if (name.rfind("backbone.", 0) == 0) backbone_only[name] = t;
  extra["something.else"] = at::zeros({1});
  write_safetensors(path("backbone.safetensors"), backbone_only);
  write_safetensors(path("extra.safetensors"), extra);

  EXPECT_THROW(load_weights(*b, path("backbone.safetensors")), SafetensorsError);
  EXPECT_THROW(load_weights(*b, path("extra.safetensors")), SafetensorsError);

  LoadOptions allow;
  allow.allow_missing = true;
  const LoadReport r = load_weights(*b, path("backbone.safetensors"), allow);
  EXPECT_EQ(r.loaded.size(), backbone_only.size());
  for (const std::string& m : r.missing) EXPECT_NE(m.rfind("backbone.", 0), 0u) << m;
  EXPECT_TRUE(at::equal(b->backbone->named_parameters()["stem.conv1.weight"],
                        a->backbone->named_parameters()["stem.conv1.weight"]));
  EXPECT_FALSE(at::equal(b->fpn->inner[0]->weight, a->fpn->inner[0]->weight));

  LoadOptions unexpected;
  unexpected.allow_unexpected = true;
  const LoadReport r2 = load_weights(*b, path("extra.safetensors"), unexpected);
  EXPECT_EQ(r2.unexpected, std::vector<std::string>{"something.else"});
  EXPECT_TRUE(same_weights(a, b));
}

TEST_F(WeightsTest, MlperfInitializationNames) {
  ModelOptions o = testing::tiny_options();
  o.mask_head.num_convs = 4;
  const auto tensors = mlperf_initialized_tensors(o);
  ASSERT_EQ(tensors.size(), 21u);
  EXPECT_EQ(tensors.front().mlperf_name, "FPN_inner_block1");
  EXPECT_EQ(tensors.back().mlperf_name, "ROI_MASK_PREDICTOR_fcn_logits");
  const auto params = model(1, o)->named_parameters();
  std::set<std::string> seen;
  for (const auto& t : tensors) {
    EXPECT_TRUE(seen.insert(t.mlperf_name).second) << t.mlperf_name;
    for (const std::string& p : t.parameters) EXPECT_TRUE(params.contains(p)) << p;
  }
  // Everything outside the backbone is initialized, nothing else.
  size_t initialized = 0;
  for (const auto& t : tensors) initialized += t.parameters.size();
  size_t outside_backbone = 0;
  for (const auto& p : params)
    if (p.key().rfind("backbone.", 0) != 0) ++outside_backbone;
  EXPECT_EQ(initialized, outside_backbone);
}

}  // namespace
}  // namespace mrcnn::model
