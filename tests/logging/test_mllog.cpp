#include "logging/mllog.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace mrcnn::logging {
namespace {

std::vector<std::string> read_lines(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    path = std::filesystem::temp_directory_path() /
           ("mrcnn-mllog-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

TEST(MLLogEncode, FieldOrderAndSeparatorsMatchTheReferenceEmitter) {
  const std::string line = encode("", 1700000000000, EventType::kPointInTime, "global_batch_size", Json(64),
                                  Json{{"file", "src/main.cpp"}, {"lineno", 40}});
  EXPECT_EQ(line,
            ":::MLLOG {\"namespace\": \"\", \"time_ms\": 1700000000000, \"event_type\": \"POINT_IN_TIME\", "
            "\"key\": \"global_batch_size\", \"value\": 64, \"metadata\": {\"file\": \"src/main.cpp\", "
            "\"lineno\": 40}}");
}

TEST(MLLogEncode, ValuesKeepTheirJsonTypes) {
  const Json meta = Json::object();
  EXPECT_NE(encode("", 1, EventType::kPointInTime, "k", Json(0.08), meta).find("\"value\": 0.08,"),
            std::string::npos);
  EXPECT_NE(encode("", 1, EventType::kPointInTime, "k", Json::array({18000, 24000}), meta)
                .find("\"value\": [18000, 24000],"),
            std::string::npos);
  EXPECT_NE(encode("", 1, EventType::kPointInTime, "k", Json{{"BBOX", 0.3781}, {"SEGM", 0.342}}, meta)
                .find("\"value\": {\"BBOX\": 0.3781, \"SEGM\": 0.342},"),
            std::string::npos);
  EXPECT_NE(encode("", 1, EventType::kIntervalStart, "run_start", nullptr, meta).find("\"value\": null,"),
            std::string::npos);
  EXPECT_NE(encode("", 1, EventType::kPointInTime, "cache_clear", true, meta).find("\"value\": true,"),
            std::string::npos);
  EXPECT_NE(encode("", 1, EventType::kPointInTime, "k", Json(1e-4), meta).find("\"value\": 0.0001,"),
            std::string::npos);
  EXPECT_NE(encode("", 1, EventType::kPointInTime, "k", Json(2e-5), meta).find("\"value\": 2e-05,"),
            std::string::npos);
}

TEST(MLLogEncode, EventTypeFollowsTheKey) {
  EXPECT_EQ(event_type_for("init_start"), EventType::kIntervalStart);
  EXPECT_EQ(event_type_for("epoch_stop"), EventType::kIntervalEnd);
  EXPECT_EQ(event_type_for("eval_accuracy"), EventType::kPointInTime);
  EXPECT_EQ(event_type_for("stop"), EventType::kPointInTime);
  EXPECT_EQ(event_type_name(EventType::kIntervalEnd), "INTERVAL_END");
}

MLLoggerOptions file_only(const std::filesystem::path& p) {
  MLLoggerOptions o;
  o.to_stdout = false;
  o.file_path = p.string();
  o.clock = [] { return int64_t{1234}; };
  return o;
}

TEST(MLLogger, RecordsTheCallersFileAndLineThenExtraMetadata) {
  TempDir dir;
  const auto log = dir.path / "log.txt";
  int line = 0;
  {
    MLLogger logger(file_only(log));
    logger.log(key::kEpochStart, nullptr, Json{{"epoch_num", 3}}); line = __LINE__;
  }
  const auto lines = read_lines(log);
  ASSERT_EQ(lines.size(), 1u);
  const Json rec = py_json_loads(lines[0].substr(9));
  EXPECT_EQ(rec["event_type"], "INTERVAL_START");
  EXPECT_EQ(rec["time_ms"], 1234);
  // Relative to the repository root, as the build maps source paths.
  EXPECT_EQ(rec["metadata"]["file"], "tests/logging/test_mllog.cpp");
  EXPECT_EQ(rec["metadata"]["lineno"], line);
  const auto it = rec["metadata"].items().begin();
  EXPECT_EQ(it.key(), "file");
  EXPECT_EQ(rec["metadata"].size(), 3u);
  EXPECT_EQ(rec["metadata"]["epoch_num"], 3);
}

TEST(MLLogger, CallerMetadataOverridesFileAndLineInPlace) {
  TempDir dir;
  const auto log = dir.path / "log.txt";
  {
    MLLogger logger(file_only(log));
    logger.event(key::kSeed, 7, Json{{"lineno", 5}});
  }
  const auto lines = read_lines(log);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("\"metadata\": {\"file\": \"tests/logging/test_mllog.cpp\", \"lineno\": 5}"),
            std::string::npos);
}

TEST(MLLogger, OnlyRankZeroWrites) {
  TempDir dir;
  const auto log = dir.path / "rank1.txt";
  auto opt = file_only(log);
  opt.rank = 1;
  {
    MLLogger logger(opt);
    EXPECT_FALSE(logger.enabled());
    logger.log(key::kRunStart);
  }
  EXPECT_FALSE(std::filesystem::exists(log));
}

TEST(MLLogger, AppendsToAnExistingFileUnlessTruncating) {
  TempDir dir;
  const auto log = dir.path / "log.txt";
  { MLLogger(file_only(log)).log(key::kInitStart); }
  { MLLogger(file_only(log)).log(key::kInitStop); }
  EXPECT_EQ(read_lines(log).size(), 2u);
  auto opt = file_only(log);
  opt.truncate_file = true;
  { MLLogger(opt).log(key::kRunStart); }
  EXPECT_EQ(read_lines(log).size(), 1u);
}

TEST(MLLogger, UnwritableFileIsAClearError) {
  MLLoggerOptions o;
  o.file_path = "/nonexistent-dir/x/log.txt";
  try {
    MLLogger logger(o);
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-dir/x/log.txt"), std::string::npos);
  }
}

TEST(MLLogger, ConcurrentLinesNeverInterleave) {
  TempDir dir;
  const auto log = dir.path / "log.txt";
  constexpr int kThreads = 8, kPerThread = 400;
  {
    MLLogger logger(file_only(log));
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&logger, t] {
        // Long values make torn writes likely if lines were not written whole.
        const std::string payload(300 + 17 * t, static_cast<char>('a' + t));
        for (int i = 0; i < kPerThread; ++i)
          logger.event("tracked_stats", Json{{"thread", t}, {"i", i}, {"pad", payload}});
      });
    for (auto& th : threads) th.join();
  }
  const auto lines = read_lines(log);
  ASSERT_EQ(lines.size(), static_cast<size_t>(kThreads * kPerThread));
  std::set<std::pair<int, int>> seen;
  for (const auto& l : lines) {
    ASSERT_TRUE(l.starts_with(":::MLLOG {"));
    const Json rec = py_json_loads(l.substr(9));  // throws if a line was torn
    const int t = rec["value"]["thread"];
    EXPECT_EQ(rec["value"]["pad"].get<std::string>(), std::string(300 + 17 * t, static_cast<char>('a' + t)));
    seen.emplace(t, rec["value"]["i"].get<int>());
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(kThreads * kPerThread));
}

}  // namespace
}  // namespace mrcnn::logging
