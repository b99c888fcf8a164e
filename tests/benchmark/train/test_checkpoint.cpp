#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "benchmark/train/checkpoint.h"
#include "model/safetensors.h"

namespace mrcnn::train {
namespace {

namespace fs = std::filesystem;

struct Scratch {
  fs::path dir = fs::temp_directory_path() /
                 ("mrcnn-ckpt-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
  Scratch() {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~Scratch() { fs::remove_all(dir); }
};

Checkpoint sample() {
  at::manual_seed(5);
  Checkpoint c{.epoch = 3, .seed = 77, .config_fingerprint = "abc123",
               .trainer = {.step = 1234, .loss_scale = 1024.0, .scaler_good_steps = 17}};
  c.model["backbone.stem.conv1.weight"] = at::randn({4, 3, 3, 3});
  c.model["rpn.head.cls.bias"] = at::randn({3}, at::kDouble);
  c.trainer.optimizer["backbone.stem.conv1.weight.momentum"] = at::randn({4, 3, 3, 3});
  return c;
}

std::string read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

TEST(Checkpoint, RoundTripsEveryField) {
  Scratch s;
  const Checkpoint c = sample();
  const auto path = (s.dir / "epoch_3.safetensors").string();
  save_checkpoint(path, c);
  const Checkpoint back = load_checkpoint(path);
  EXPECT_EQ(back.epoch, 3);
  EXPECT_EQ(back.trainer.step, 1234);
  EXPECT_EQ(back.seed, 77u);
  EXPECT_EQ(back.trainer.loss_scale, 1024.0);
  EXPECT_EQ(back.trainer.scaler_good_steps, 17);
  EXPECT_EQ(back.config_fingerprint, "abc123");
  ASSERT_EQ(back.model.size(), 2u);
  ASSERT_EQ(back.trainer.optimizer.size(), 1u);
  for (const auto& [name, t] : c.model) EXPECT_TRUE(at::equal(back.model.at(name), t)) << name;
  EXPECT_EQ(back.model.at("rpn.head.cls.bias").scalar_type(), at::kDouble);
  for (const auto& [name, t] : c.trainer.optimizer) EXPECT_TRUE(at::equal(back.trainer.optimizer.at(name), t)) << name;
  // Written atomically: nothing but the checkpoint is left in the folder.
  EXPECT_EQ(std::distance(fs::directory_iterator(s.dir), fs::directory_iterator()), 1);
}

// The network's tensors come from a checkpoint (its "model/" ones, verified) or a weights file alike.
TEST(Checkpoint, NetworkTensorsReadACheckpointOrAWeightsFile) {
  Scratch s;
  const Checkpoint c = sample();
  const auto ck_path = (s.dir / "epoch_3.safetensors").string();
  save_checkpoint(ck_path, c);
  const auto weights_path = (s.dir / "weights.safetensors").string();
  model::write_safetensors(weights_path, c.model);
  for (const auto& path : {ck_path, weights_path}) {
    const auto tensors = network_tensors(path);
    ASSERT_EQ(tensors.size(), c.model.size()) << path;
    for (const auto& [name, t] : c.model) EXPECT_TRUE(at::equal(tensors.at(name), t)) << path << ": " << name;
  }
  // A damaged checkpoint is refused as load_checkpoint refuses it, not read as weights.
  std::string bytes = read(ck_path);
  bytes[bytes.size() - 3] ^= 0x40;
  std::ofstream(ck_path, std::ios::binary | std::ios::trunc) << bytes;
  try {
    network_tensors(ck_path);
    ADD_FAILURE() << "a corrupt checkpoint was read";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("is corrupt"), std::string::npos) << e.what();
  }
}

TEST(Checkpoint, AnyFlippedTensorByteIsCaughtByTheChecksum) {
  Scratch s;
  const auto path = (s.dir / "c.safetensors").string();
  save_checkpoint(path, sample());
  const std::string good = read(path);
  // The last bytes of the file are tensor data.
  for (size_t back : {size_t{1}, size_t{100}, size_t{300}}) {
    std::string bad = good;
    bad[bad.size() - back] ^= 0x10;
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bad;
    try {
      load_checkpoint(path);
      ADD_FAILURE() << "a flipped byte " << back << " from the end was not detected";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }
}

TEST(Checkpoint, TruncatedMissingOrForeignFilesAreRefusedByName) {
  Scratch s;
  const auto path = (s.dir / "c.safetensors").string();
  save_checkpoint(path, sample());
  const std::string good = read(path);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << good.substr(0, good.size() / 2);
  EXPECT_THROW(load_checkpoint(path), std::runtime_error);
  EXPECT_THROW(load_checkpoint((s.dir / "absent.safetensors").string()), std::runtime_error);
  const auto text = (s.dir / "notes.txt").string();
  std::ofstream(text) << "not a checkpoint";
  EXPECT_THROW(load_checkpoint(text), std::runtime_error);
}

TEST(Checkpoint, SavingOverAnExistingCheckpointReplacesItWhole) {
  Scratch s;
  const auto path = (s.dir / "c.safetensors").string();
  save_checkpoint(path, sample());
  Checkpoint later = sample();
  later.epoch = 4;
  later.model["backbone.stem.conv1.weight"].fill_(0.5);
  save_checkpoint(path, later);
  const Checkpoint back = load_checkpoint(path);
  EXPECT_EQ(back.epoch, 4);
  EXPECT_TRUE(at::equal(back.model.at("backbone.stem.conv1.weight"), later.model.at("backbone.stem.conv1.weight")));
}

}  // namespace
}  // namespace mrcnn::train
