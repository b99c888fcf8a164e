#include <gtest/gtest.h>

#include <filesystem>

#include "benchmark/run/system_config.h"

namespace mrcnn::run {
namespace {

const std::string kSystems = std::string(MRCNN_SOURCE_DIR) + "/systems/";

TEST(SystemConfig, EveryShippedSystemLoadsAndClosedOnesFollowTheRules) {
  int closed = 0;
  for (const auto& e : std::filesystem::directory_iterator(kSystems)) {
    if (e.path().extension() != ".json") continue;
    SCOPED_TRACE(e.path().string());
    const SystemConfig c = load_system_config(e.path().string());
    EXPECT_EQ(c.name, e.path().stem().string());
    EXPECT_EQ(c.hp.global_batch_size % c.launch.world_size(), 0);
    if (c.submission.division == "closed") {
      ++closed;
      EXPECT_TRUE(closed_division_violations(c).empty());
      EXPECT_EQ(c.model.num_classes, 81);
      EXPECT_EQ(c.model.rpn.post_nms_top_n_train, c.hp.num_image_candidates);
    }
  }
  EXPECT_GE(closed, 4);
}

TEST(SystemConfig, OverridesReachTheStructs) {
  const SystemConfig c = load_system_config(kSystems + "cpu-dev.json", {"run.seed=42", "run.max_epochs=3",
                                                                         "run.precision=\"bf16\""});
  EXPECT_EQ(c.run.seed, 42);
  EXPECT_EQ(c.run.max_epochs, 3);
  EXPECT_TRUE(c.model.mixed_precision);
  EXPECT_EQ(c.resolved["run"]["seed"], 42);
}

std::string error_of(const std::vector<std::string>& overrides, const std::string& file = "cpu-dev.json") {
  try {
    load_system_config(kSystems + file, overrides);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(SystemConfig, BadValuesAreOneClearError) {
  EXPECT_NE(error_of({"run.max_epoch=3"}).find("unknown key 'run.max_epoch'"), std::string::npos);
  EXPECT_NE(error_of({"run.max_epochs=0"}).find("run.max_epochs: expected a value in [1, 100000], got 0"), std::string::npos);
  EXPECT_NE(error_of({"run.max_epochs=\"ten\""}).find("holds an integer, not a string"), std::string::npos);
  EXPECT_NE(error_of({"run.precision=\"fp16\""}).find("fp16 (with loss scaling) is for CUDA devices"),
            std::string::npos);
  EXPECT_NE(error_of({"hyperparameters.global_batch_size=7"}).find("no hyperparameter set for global_batch_size 7"),
            std::string::npos);
  EXPECT_NE(error_of({"model.backbone.depth=19"}).find("depth"), std::string::npos);
  EXPECT_NE(error_of({"launch.ranks_per_node=3"}).find("not divisible"), std::string::npos);
  EXPECT_NE(error_of({"launch.communicator=\"nccl\""}).find("needs run.device \"cuda\""), std::string::npos);
  EXPECT_NE(error_of({"launch.communicator=\"gloo\""}).find("launch.communicator"), std::string::npos);
}

TEST(SystemConfig, ClosedDivisionRefusesWhatTheRulesForbidAndSaysTheRule) {
  const std::string p3 = "aws-p3dn.24xlarge.json";
  EXPECT_EQ(error_of({}, p3), "");
  EXPECT_NE(error_of({"hyperparameters.by_global_batch_size.64.base_lr=0.07"}, p3).find("0.02*K"), std::string::npos);
  EXPECT_NE(error_of({"hyperparameters.decay_factor=0.2"}, p3).find("must be 0.1"), std::string::npos);
  EXPECT_NE(error_of({"hyperparameters.by_global_batch_size.64.num_image_candidates=6500"}, p3)
                .find("multiple of 1000"),
            std::string::npos);
  EXPECT_NE(error_of({"data.min_size=640"}, p3).find("800/1333"), std::string::npos);
  EXPECT_NE(error_of({"hyperparameters.by_global_batch_size.64.decay_steps=[18000, 20000]"}, p3)
                .find("(60000, 80000) * (1 + K/10)"),
            std::string::npos);
  // K = 4: (60000, 80000) * 1.4 * 16 / 64 is allowed (the RCP's [18000, 24000] is K = 2).
  EXPECT_EQ(error_of({"hyperparameters.by_global_batch_size.64.decay_steps=[21000, 28000]"}, p3), "");
  // The same values are fine in the open division.
  EXPECT_EQ(error_of({"hyperparameters.decay_factor=0.2", "submission.division=\"open\"", "system.division=\"open\""},
                     p3),
            "");
}

}  // namespace
}  // namespace mrcnn::run
