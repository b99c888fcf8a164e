// safetensors reading and writing: round trips of every dtype, and a clear error for each way a
// file can be malformed.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "model/safetensors.h"

namespace mrcnn::model {
namespace {

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("mrcnn-safetensors-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // A file with the given header text and data bytes.
  std::string raw_file(const std::string& header, const std::string& data,
                       int64_t claimed_length = -1) const {
    const std::string p = path("raw.safetensors");
    std::ofstream out(p, std::ios::binary);
    uint64_t n = claimed_length >= 0 ? static_cast<uint64_t>(claimed_length) : header.size();
    for (int i = 0; i < 8; ++i, n >>= 8) out.put(static_cast<char>(n & 0xff));
    out << header << data;
    return p;
  }

  void expect_error(const std::string& file, const std::string& fragment) const {
    try {
      read_safetensors(file);
      FAIL() << "no error for a file that should mention: " << fragment;
    } catch (const SafetensorsError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(file), std::string::npos) << what;
      EXPECT_NE(what.find(fragment), std::string::npos) << what;
    }
  }

  std::filesystem::path dir_;
};

TEST_F(SafetensorsTest, RoundTripsEveryDtypeAndMetadata) {
  std::map<std::string, at::Tensor> tensors;
  tensors["f32"] = at::randn({3, 4});
  tensors["f64"] = at::randn({2}, at::kDouble);
  tensors["f16"] = at::randn({5}).to(at::kHalf);
  tensors["bf16"] = at::randn({2, 2}).to(at::kBFloat16);
  tensors["i64"] = at::arange(7, at::kLong);
  tensors["i32"] = at::arange(3, at::kInt);
  tensors["i16"] = at::arange(3, at::kShort);
  tensors["i8"] = at::arange(-3, 3, at::kChar);
  tensors["u8"] = at::arange(9, at::kByte).view({3, 3});
  tensors["bool"] = at::tensor({1, 0, 1}).to(at::kBool);
  tensors["scalar"] = at::scalar_tensor(2.5);
  tensors["empty"] = at::empty({0, 4});
  tensors["strided"] = at::randn({4, 6}).t();  // non-contiguous input
  write_safetensors(path("a.safetensors"), tensors, {{"source", "test"}, {"n", "1"}});

  const TensorFile f = read_safetensors(path("a.safetensors"));
  ASSERT_EQ(f.tensors.size(), tensors.size());
  for (const auto& [name, t] : tensors) {
    SCOPED_TRACE(name);
    const at::Tensor& r = f.tensors.at(name);
    EXPECT_EQ(r.scalar_type(), t.scalar_type());
    EXPECT_EQ(r.sizes(), t.sizes());
    EXPECT_TRUE(at::equal(r, t));
  }
  EXPECT_EQ(f.metadata.at("source"), "test");
  EXPECT_EQ(f.metadata.at("n"), "1");

  // Data starts 8-byte aligned, as the reference writer does.
  std::ifstream in(path("a.safetensors"), std::ios::binary);
  unsigned char len[8];
  in.read(reinterpret_cast<char*>(len), 8);
  EXPECT_EQ(len[0] % 8, 0);
}

TEST_F(SafetensorsTest, OverwritesAtomically) {
  write_safetensors(path("b.safetensors"), {{"x", at::ones({2})}});
  write_safetensors(path("b.safetensors"), {{"y", at::zeros({3})}});
  const TensorFile f = read_safetensors(path("b.safetensors"));
  EXPECT_EQ(f.tensors.count("x"), 0u);
  EXPECT_EQ(f.tensors.at("y").numel(), 3);
  for (const auto& e : std::filesystem::directory_iterator(dir_))
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << e.path();
}

TEST_F(SafetensorsTest, RefusesUnwritableInput) {
  EXPECT_THROW(write_safetensors(path("c.safetensors"), {{"__metadata__", at::ones({1})}}),
               SafetensorsError);
  EXPECT_THROW(write_safetensors(path("c.safetensors"), {{"c", at::ones({1}, at::kComplexFloat)}}),
               SafetensorsError);
  EXPECT_THROW(write_safetensors((dir_ / "missing" / "c.safetensors").string(), {{"c", at::ones({1})}}),
               SafetensorsError);
}

TEST_F(SafetensorsTest, ErrorsNameTheProblem) {
  expect_error(path("absent.safetensors"), "cannot open");
  {
    std::ofstream(path("short.safetensors"), std::ios::binary) << "abc";
    expect_error(path("short.safetensors"), "too short");
  }
  expect_error(raw_file("{}", "", 1000), "header length 1000");
  expect_error(raw_file("{not json", ""), "not valid JSON");
  expect_error(raw_file("[1, 2]", ""), "must be a JSON object");
  expect_error(raw_file(R"({"w": {"dtype": "F7", "shape": [1], "data_offsets": [0, 4]}})",
                        std::string(4, '\0')),
               "unsupported dtype \"F7\"");
  expect_error(raw_file(R"({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})",
                        std::string(4, '\0')),
               "shape entries");
  expect_error(raw_file(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}})",
                        std::string(4, '\0')),
               "the dtype and shape need 8");
  expect_error(raw_file(R"({"w": {"dtype": "F32", "shape": [1]}})", std::string(4, '\0')),
               "data_offsets");
  expect_error(raw_file(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},)"
                        R"( "v": {"dtype": "F32", "shape": [1], "data_offsets": [2, 6]}})",
                        std::string(8, '\0')),
               "must not overlap or leave holes");
  expect_error(raw_file(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})",
                        std::string(2, '\0')),
               "truncated or trailing");
  expect_error(raw_file(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})",
                        std::string(12, '\0')),
               "truncated or trailing");
  expect_error(raw_file(R"({"__metadata__": {"k": 1}})", ""), "must be a string");
}

}  // namespace
}  // namespace mrcnn::model
