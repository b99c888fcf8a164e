#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "benchmark/train/checkpoint.h"

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
  Checkpoint c{.epoch = 3, .step = 1234, .seed = 77, .loss_scale = 1024.0, .scaler_good_steps = 17,
               .config_fingerprint = "abc123"};
  c.model["backbone.stem.conv1.weight"] = at::randn({4, 3, 3, 3});
  c.model["rpn.head.cls.bias"] = at::randn({3}, at::kDouble);
  c.optimizer["backbone.stem.conv1.weight.momentum"] = at::randn({4, 3, 3, 3});
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
  EXPECT_EQ(back.step, 1234);
  EXPECT_EQ(back.seed, 77u);
  EXPECT_EQ(back.loss_scale, 1024.0);
  EXPECT_EQ(back.scaler_good_steps, 17);
  EXPECT_EQ(back.config_fingerprint, "abc123");
  ASSERT_EQ(back.model.size(), 2u);
  ASSERT_EQ(back.optimizer.size(), 1u);
  for (const auto& [name, t] : c.model) EXPECT_TRUE(at::equal(back.model.at(name), t)) << name;
  EXPECT_EQ(back.model.at("rpn.head.cls.bias").scalar_type(), at::kDouble);
  for (const auto& [name, t] : c.optimizer) EXPECT_TRUE(at::equal(back.optimizer.at(name), t)) << name;
  // Written atomically: nothing but the checkpoint is left in the folder.
  EXPECT_EQ(std::distance(fs::directory_iterator(s.dir), fs::directory_iterator()), 1);
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
