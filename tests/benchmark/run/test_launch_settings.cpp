// apply_launch_settings: what run.deterministic sets in the process, and the cuBLAS workspace a
// deterministic CUDA run takes from (or refuses in) the environment.
#include <ATen/Context.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "benchmark/config/system_config.h"
#include "benchmark/run/assemble.h"
#include "benchmark/run/process_settings.h"

namespace mrcnn::run {
namespace {

using ::testing::HasSubstr;

const std::string kSystems = std::string(MRCNN_SOURCE_DIR) + "/systems/";

TEST(CublasWorkspace, SetWhenUnsetKeptWhenDeterministicRefusedOtherwise) {
  EXPECT_EQ(cublas_workspace_for_determinism(nullptr), ":4096:8");
  EXPECT_EQ(cublas_workspace_for_determinism(""), ":4096:8");
  EXPECT_EQ(cublas_workspace_for_determinism(":4096:8"), "");
  EXPECT_EQ(cublas_workspace_for_determinism(":16:8"), "");
  for (const char* bad : {":4096:2", ":16:8:", "4096:8", ":0:0"}) {
    try {
      cublas_workspace_for_determinism(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const config::ConfigError& e) {
      EXPECT_THAT(e.what(), HasSubstr(std::string("CUBLAS_WORKSPACE_CONFIG=") + bad + ":"));
      EXPECT_THAT(e.what(), HasSubstr(":4096:8 or :16:8"));
    }
  }
}

// ctest runs each test in its own process: the global settings start at LibTorch's defaults.
TEST(LaunchSettings, DeterministicRunTurnsOnDeterministicKernelsAndOffTheAutotuner) {
  at::globalContext().setBenchmarkCuDNN(true);
  apply_launch_settings(config::load_system_config(kSystems + "cpu-dev.json", {"run.deterministic=false"}));
  EXPECT_FALSE(at::globalContext().deterministicAlgorithms());
  EXPECT_FALSE(at::globalContext().deterministicCuDNN());
  EXPECT_TRUE(at::globalContext().benchmarkCuDNN()) << "left alone without run.deterministic";

  apply_launch_settings(config::load_system_config(kSystems + "cpu-dev.json", {"run.deterministic=true"}));
  EXPECT_TRUE(at::globalContext().deterministicAlgorithms());
  EXPECT_FALSE(at::globalContext().deterministicAlgorithmsWarnOnly());
  EXPECT_TRUE(at::globalContext().deterministicCuDNN());
  EXPECT_FALSE(at::globalContext().benchmarkCuDNN());
}

// On a CUDA device the workspace is checked before anything is applied, and set when unset.
TEST(LaunchSettings, DeterministicCudaRunSetsTheCublasWorkspaceOrRefusesAnotherFirst) {
  const auto cuda = config::load_system_config(kSystems + "cpu-dev.json",
                                               {"run.deterministic=true", "run.device=\"cuda\""});
  ASSERT_EQ(::setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:2", 1), 0);
  try {
    apply_launch_settings(cuda);
    ADD_FAILURE() << "a nondeterministic workspace was accepted";
  } catch (const config::ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("CUBLAS_WORKSPACE_CONFIG=:4096:2"));
  }
  EXPECT_FALSE(at::globalContext().deterministicAlgorithms()) << "refused before anything was applied";

  ASSERT_EQ(::unsetenv("CUBLAS_WORKSPACE_CONFIG"), 0);
  try {
    apply_launch_settings(cuda);
  } catch (const std::exception& e) {
    // Without a GPU, making cuda:0 the current device fails: after the settings above it.
    EXPECT_FALSE(at::hasCUDA()) << e.what();
  }
  const char* set = std::getenv("CUBLAS_WORKSPACE_CONFIG");
  ASSERT_NE(set, nullptr);
  EXPECT_STREQ(set, ":4096:8");
  EXPECT_TRUE(at::globalContext().deterministicAlgorithms());
}

// data.pad_to_shapes reaches the training loader; evaluation batches keep their own size, and a
// system without the key resumes the checkpoints written before it existed.
TEST(Assemble, TrainingBatchesArePaddedToTheSystemsShapesEvaluationBatchesAreNot) {
  const auto p5 = config::load_system_config(kSystems + "aws-p5.48xlarge.json");
  const std::vector<data::ImageSize> nvidia = {{800, 1344}, {1344, 800}};
  EXPECT_EQ(train_data_options(p5, c10::Device(c10::kCPU)).loader.pad_to_shapes, nvidia);
  EXPECT_TRUE(eval_data_options(p5, c10::Device(c10::kCPU)).loader.pad_to_shapes.empty());
  const auto dev = config::load_system_config(kSystems + "cpu-dev.json");
  EXPECT_TRUE(train_data_options(dev, c10::Device(c10::kCPU)).loader.pad_to_shapes.empty());

  config::SystemConfig before = dev;  // a configuration as written before the key existed
  before.resolved["data"].erase("pad_to_shapes");
  EXPECT_EQ(resume_fingerprint(dev), resume_fingerprint(before));
  const auto shaped = config::load_system_config(kSystems + "cpu-dev.json", {"data.pad_to_shapes=[[800, 1344]]"});
  EXPECT_NE(resume_fingerprint(shaped), resume_fingerprint(dev));
}

}  // namespace
}  // namespace mrcnn::run
