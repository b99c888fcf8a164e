// Options: reference defaults, validation messages, JSON mapping.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>

#include "model/options.h"
#include "model/options_json.h"

namespace mrcnn::model {
namespace {

void expect_invalid(const ModelOptions& o, const std::string& fragment) {
  try {
    o.validate();
    FAIL() << "accepted options that should mention " << fragment;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(ModelOptions, DefaultsAreTheMlperfReference) {
  const ModelOptions o;
  EXPECT_NO_THROW(o.validate());
  EXPECT_EQ(o.num_classes, 81);
  EXPECT_EQ(o.backbone.depth, 50);
  EXPECT_EQ(o.backbone.freeze_at, 2);
  EXPECT_EQ(o.backbone.norm, NormKind::kFrozenBatchNorm);
  EXPECT_EQ(o.fpn.out_channels, 256);
  EXPECT_EQ(o.rpn.fg_iou_threshold, 0.7);
  EXPECT_EQ(o.rpn.bg_iou_threshold, 0.3);
  EXPECT_EQ(o.rpn.batch_size_per_image, 256);
  EXPECT_EQ(o.rpn.positive_fraction, 0.5);
  EXPECT_DOUBLE_EQ(o.rpn.box_loss_beta, 1.0 / 9);
  EXPECT_EQ(o.rpn.pre_nms_top_n_train, 2000);
  EXPECT_EQ(o.rpn.pre_nms_top_n_test, 1000);
  EXPECT_EQ(o.rpn.post_nms_top_n_test, 1000);
  EXPECT_EQ(o.box_head.pooler_resolution, 7);
  EXPECT_EQ(o.box_head.representation_size, 1024);
  EXPECT_EQ(o.box_head.batch_size_per_image, 512);
  EXPECT_EQ(o.box_head.positive_fraction, 0.25);
  EXPECT_EQ(o.box_head.box_coder_weights, (std::array<double, 4>{10, 10, 5, 5}));
  EXPECT_EQ(o.box_head.score_threshold, 0.05);
  EXPECT_EQ(o.box_head.nms_threshold, 0.5);
  EXPECT_EQ(o.box_head.detections_per_image, 100);
  EXPECT_EQ(o.mask_head.pooler_resolution, 14);
  EXPECT_EQ(o.mask_head.num_convs, 4);
  EXPECT_EQ(o.mask_head.conv_channels, 256);
  EXPECT_EQ(o.mask_head.mask_threshold, 0.5);
}

TEST(ModelOptions, ValidationNamesTheField) {
  ModelOptions o;
  o.backbone.depth = 42;
  expect_invalid(o, "backbone.depth");
  o = {};
  o.rpn.positive_fraction = 1.5;
  expect_invalid(o, "rpn.positive_fraction");
  o = {};
  o.box_head.bg_iou_threshold = 0.6;
  expect_invalid(o, "box_head.bg_iou_threshold");
  o = {};
  o.rpn.anchor_sizes = {32, 64};
  expect_invalid(o, "rpn.anchor_sizes");
  o = {};
  o.backbone.norm = NormKind::kGroupNorm;
  o.backbone.base_channels = 48;
  expect_invalid(o, "backbone.group_norm_groups");
  o = {};
  o.num_classes = 1;
  expect_invalid(o, "num_classes");
  o = {};
  o.mask_head.num_convs = 0;
  expect_invalid(o, "mask_head.num_convs");
  o = {};
  o.mask_head.roi_bucket = -1;
  expect_invalid(o, "mask_head.roi_bucket");
}

TEST(ModelOptionsJson, RoundTripsEveryField) {
  ModelOptions o = torchvision_options(7);
  o.backbone.norm = NormKind::kGroupNorm;
  o.backbone.group_norm_groups = 16;
  o.channels_last = true;
  o.mask_head.num_convs = 2;
  o.mask_head.roi_bucket = 64;
  const nlohmann::json j = to_json(o);
  EXPECT_EQ(j["mask_head"]["roi_bucket"], 64);
  EXPECT_EQ(j["backbone"]["norm"], "group_norm");
  EXPECT_EQ(j["sampling_streams"], "shared");
  const ModelOptions back = model_options_from_json(j);
  EXPECT_EQ(to_json(back), j);
}

TEST(ModelOptionsJson, PartialSectionsKeepTheBase) {
  const auto j = nlohmann::json::parse(R"({"num_classes": 3, "rpn": {"batch_size_per_image": 64}})");
  const ModelOptions o = model_options_from_json(j);
  EXPECT_EQ(o.num_classes, 3);
  EXPECT_EQ(o.rpn.batch_size_per_image, 64);
  EXPECT_EQ(o.rpn.fg_iou_threshold, 0.7);
  EXPECT_EQ(o.backbone.depth, 50);
}

TEST(ModelOptionsJson, ErrorsNameThePath) {
  auto error_of = [](const char* text) -> std::string {
    try {
      model_options_from_json(nlohmann::json::parse(text));
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_NE(error_of(R"({"rpn": {"batch_size_per_imag": 64}})").find("model.rpn.batch_size_per_imag: unknown key"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"rpn": {"batch_size_per_image": "64"}})").find("model.rpn.batch_size_per_image: expected an integer"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"backbone": {"norm": "batch_norm"}})").find("model.backbone.norm"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"box_head": {"box_coder_weights": [1, 2]}})").find("array of 4 numbers"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"backbone": {"depth": 20}})").find("backbone.depth"), std::string::npos);
  EXPECT_NE(error_of(R"([1])").find("expected an object"), std::string::npos);
}

}  // namespace
}  // namespace mrcnn::model
