#include "logging/compliance.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "logging/arguments.h"
#include "logging/check_command.h"

namespace mrcnn::logging {
namespace {

// The minimal valid closed-division log of MLPERF_RULES.md section 4, one record per entry.
std::vector<std::string> valid_log() {
  std::vector<std::string> v;
  int64_t t = 1700000000000;
  auto add = [&](const std::string& key, const std::string& value, const std::string& meta = "") {
    const std::string et = key.ends_with("_start") ? "INTERVAL_START"
                           : key.ends_with("_stop") ? "INTERVAL_END"
                                                    : "POINT_IN_TIME";
    v.push_back(":::MLLOG {\"namespace\": \"\", \"time_ms\": " + std::to_string(t++) + ", \"event_type\": \"" + et +
                "\", \"key\": \"" + key + "\", \"value\": " + value +
                ", \"metadata\": {\"file\": \"x.cpp\", \"lineno\": 1" + (meta.empty() ? "" : ", " + meta) + "}}");
  };
  add("submission_benchmark", "\"maskrcnn\"");
  add("submission_org", "\"ExampleOrg\"");
  add("submission_division", "\"closed\"");
  add("submission_status", "\"onprem\"");
  add("submission_platform", "\"1xCPU\"");
  add("cache_clear", "true");
  add("init_start", "null");
  add("seed", "1234");
  add("global_batch_size", "64");
  add("gradient_accumulation_steps", "1");
  add("num_image_candidates", "6000");
  add("opt_base_learning_rate", "0.08");
  add("opt_learning_rate_warmup_steps", "800");
  add("opt_learning_rate_warmup_factor", "0.0001");
  add("opt_learning_rate_decay_factor", "0.1");
  add("opt_learning_rate_decay_steps", "[18000, 24000]");
  add("min_image_size", "800");
  add("max_image_size", "1333");
  add("train_samples", "117266");
  add("eval_samples", "5000");
  add("init_stop", "null");
  add("run_start", "null");
  for (int e = 1; e <= 2; ++e) {
    const std::string n = std::to_string(e);
    add("block_start", "null", "\"first_epoch_num\": " + n + ", \"epoch_count\": 1");
    add("epoch_start", "null", "\"epoch_num\": " + n);
    add("epoch_stop", "null", "\"epoch_num\": " + n);
    add("block_stop", "null", "\"first_epoch_num\": " + n);
    add("eval_start", "null", "\"epoch_num\": " + n);
    add("eval_accuracy", e == 1 ? "{\"BBOX\": 0.21, \"SEGM\": 0.19}" : "{\"BBOX\": 0.3781, \"SEGM\": 0.342}",
        "\"epoch_num\": " + n);
    add("eval_stop", "null", "\"epoch_num\": " + n);
  }
  add("run_stop", "null", "\"status\": \"success\"");
  return v;
}

std::string join(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += l + "\n";
  return s;
}

size_t index_of(const std::vector<std::string>& lines, const std::string& key) {
  for (size_t i = 0; i < lines.size(); ++i)
    if (lines[i].find("\"key\": \"" + key + "\"") != std::string::npos) return i;
  return lines.size();
}

CheckReport check(const std::vector<std::string>& lines, CheckOptions opt = {}) {
  return check_log_text(join(lines), "test.log", opt);
}

bool mentions(const CheckReport& r, int64_t line, const std::string& key) {
  for (const auto& m : r.errors)
    if (m.line == line && m.key == key) return true;
  return false;
}

TEST(Compliance, MinimalValidLogPasses) {
  const auto r = check(valid_log());
  EXPECT_TRUE(r.passed) << format_report(r);
  EXPECT_TRUE(r.errors.empty());
  EXPECT_EQ(r.division, "closed");
  EXPECT_EQ(r.benchmark, "maskrcnn");
  EXPECT_EQ(r.mllog_lines, static_cast<int64_t>(valid_log().size()));
}

TEST(Compliance, EveryFailingLineIsReportedWithItsLineNumber) {
  auto lines = valid_log();
  const size_t lr = index_of(lines, "opt_base_learning_rate");
  lines[lr] = std::regex_replace(lines[lr], std::regex("0\\.08"), "0.03");
  const size_t cand = index_of(lines, "num_image_candidates");
  lines[cand] = std::regex_replace(lines[cand], std::regex("6000"), "6500");
  const auto r = check(lines);
  EXPECT_FALSE(r.passed);
  EXPECT_TRUE(mentions(r, static_cast<int64_t>(lr) + 1, "opt_base_learning_rate")) << format_report(r);
  EXPECT_TRUE(mentions(r, static_cast<int64_t>(cand) + 1, "num_image_candidates")) << format_report(r);
}

TEST(Compliance, MissingRequiredKeyFails) {
  auto lines = valid_log();
  lines.erase(lines.begin() + static_cast<long>(index_of(lines, "num_image_candidates")));
  const auto r = check(lines);
  EXPECT_FALSE(r.passed);
  bool found = false;
  for (const auto& m : r.errors) found |= m.key == "num_image_candidates" && m.line == 0;
  EXPECT_TRUE(found) << format_report(r);
}

TEST(Compliance, TargetMustBeReachedOnOneLineInTheClosedDivision) {
  auto lines = valid_log();
  for (auto& l : lines) l = std::regex_replace(l, std::regex("\"SEGM\": 0\\.342"), "\"SEGM\": 0.338");
  EXPECT_FALSE(check(lines).passed);
  // The open division only requires BBOX < 1 and SEGM < 1.
  for (auto& l : lines) l = std::regex_replace(l, std::regex("\"closed\""), "\"open\"");
  const auto r = check(lines);
  EXPECT_TRUE(r.passed) << format_report(r);
  EXPECT_EQ(r.division, "open");
}

TEST(Compliance, InitLongerThanThirtyMinutesFailsInClosed) {
  auto lines = valid_log();
  const size_t stop = index_of(lines, "init_stop");
  // 31 minutes after the first init_start.
  lines[stop] = std::regex_replace(lines[stop], std::regex("\"time_ms\": \\d+"), "\"time_ms\": 1700001860006");
  const size_t run = index_of(lines, "run_start");
  lines[run] = std::regex_replace(lines[run], std::regex("\"time_ms\": \\d+"), "\"time_ms\": 1700001860007");
  const auto r = check(lines);
  EXPECT_FALSE(r.passed);
  EXPECT_TRUE(mentions(r, static_cast<int64_t>(stop) + 1, "init_stop")) << format_report(r);
}

TEST(Compliance, RepeatedKeySameValueWarnsAndDifferentValueFails) {
  auto lines = valid_log();
  const size_t gbs = index_of(lines, "global_batch_size");
  lines.insert(lines.begin() + static_cast<long>(gbs), lines[gbs]);
  auto r = check(lines);
  EXPECT_TRUE(r.passed) << format_report(r);
  ASSERT_FALSE(r.warnings.empty());
  CheckOptions werror;
  werror.werror = true;
  EXPECT_FALSE(check(lines, werror).passed);
  lines[gbs] = std::regex_replace(lines[gbs], std::regex("\"value\": 64"), "\"value\": 32");
  r = check(lines);
  EXPECT_FALSE(r.passed);
}

TEST(Compliance, StringNumbersAndMissingMetadataFail) {
  auto lines = valid_log();
  const size_t gbs = index_of(lines, "global_batch_size");
  lines[gbs] = std::regex_replace(lines[gbs], std::regex("\"value\": 64"), "\"value\": \"64\"");
  EXPECT_FALSE(check(lines).passed);
  lines = valid_log();
  const size_t seed = index_of(lines, "seed");
  lines[seed] = std::regex_replace(lines[seed], std::regex(", \"metadata\": \\{[^}]*\\}"), "");
  const auto r = check(lines);
  EXPECT_FALSE(r.passed);
  EXPECT_TRUE(mentions(r, static_cast<int64_t>(seed) + 1, "seed")) << format_report(r);
}

TEST(Compliance, PrefixesAndNoiseAreIgnoredButBadJsonFails) {
  auto lines = valid_log();
  for (auto& l : lines) l = "[rank0] 12:00:00 " + l;
  lines.insert(lines.begin() + 3, "some unrelated output");
  EXPECT_TRUE(check(lines).passed);
  lines[10] = ":::MLLOG {\"namespace\": \"\", \"time_ms\": 1, ";
  const auto r = check(lines);
  EXPECT_FALSE(r.passed);
  EXPECT_TRUE(mentions(r, 11, "")) << format_report(r);
}

TEST(Compliance, CarriageReturnsSplitLinesAsPythonDoes) {
  std::string text;
  for (const auto& l : valid_log()) text += l + "\r\n";
  EXPECT_TRUE(check_log_text(text, "crlf.log").passed);
  text.clear();
  for (const auto& l : valid_log()) text += l + "\r";
  EXPECT_TRUE(check_log_text(text, "cr.log").passed);
}

TEST(Compliance, OverlongRecordIsAnErrorOfItsLineNotACrash) {
  auto lines = valid_log();
  lines.insert(lines.begin() + 5, ":::MLLOG {\"pad\": \"" + std::string(4096, 'x') + "\"}");
  CheckOptions opt;
  opt.max_record_bytes = 1024;
  const auto r = check(lines, opt);
  EXPECT_FALSE(r.passed);
  EXPECT_TRUE(mentions(r, 6, "")) << format_report(r);
  // A long line without the token is only noise.
  lines[5] = std::string(8192, 'y');
  EXPECT_TRUE(check(lines, opt).passed);
  // A later token on the same line starts a fresh record.
  lines[5] = ":::MLLOG " + std::string(4096, 'z') + " " + valid_log()[5];
  EXPECT_TRUE(check(lines, opt).passed) << format_report(check(lines, opt));
}

TEST(Compliance, AdvisoriesFlagWhatTheOfficialRulesLetThrough) {
  auto lines = valid_log();
  // eval_accuracy for an epoch that never ran is legal for the official checker.
  const size_t acc = index_of(lines, "eval_accuracy");
  lines[acc] = std::regex_replace(lines[acc], std::regex("\"epoch_num\": 1"), "\"epoch_num\": 7");
  auto r = check(lines);
  EXPECT_TRUE(r.passed);
  bool advised = false;
  for (const auto& m : r.warnings) advised |= m.key == "eval_accuracy" && m.line == static_cast<int64_t>(acc) + 1;
  EXPECT_TRUE(advised) << format_report(r);
  CheckOptions strict;
  strict.strict = true;
  EXPECT_FALSE(check(lines, strict).passed);
}

struct TempFile {
  std::filesystem::path path;
  explicit TempFile(const std::string& name) : path(std::filesystem::temp_directory_path() / name) {}
  ~TempFile() { std::filesystem::remove(path); }
};

int run_check(std::vector<std::string> args) {
  std::vector<char*> argv;
  args.insert(args.begin(), "check");
  for (auto& a : args) argv.push_back(a.data());
  testing::internal::CaptureStdout();
  int rc = 0;
  try {
    rc = check_main(static_cast<int>(argv.size()), argv.data());
  } catch (const cli::UsageError&) {  // a bad command line: exit 2, as main.cpp turns it
    rc = 2;
  }
  testing::internal::GetCapturedStdout();
  return rc;
}

TEST(CheckCommand, ExitStatusSaysPassFailOrUnreadable) {
  TempFile good("mrcnn-check-good.log"), bad("mrcnn-check-bad.log"), bin("mrcnn-check-bin.log");
  std::ofstream(good.path) << join(valid_log());
  auto lines = valid_log();
  lines.pop_back();  // no run_stop
  std::ofstream(bad.path) << join(lines);
  {
    std::ofstream b(bin.path, std::ios::binary);
    for (int i = 0; i < 4096; ++i) b.put(static_cast<char>(i * 7 % 256));
  }
  EXPECT_EQ(run_check({good.path.string()}), 0);
  EXPECT_EQ(run_check({bad.path.string()}), 1);
  EXPECT_EQ(run_check({good.path.string(), bad.path.string()}), 1);
  EXPECT_EQ(run_check({bin.path.string()}), 2);
  EXPECT_EQ(run_check({"/nonexistent/file.log"}), 2);
  EXPECT_EQ(run_check({std::filesystem::temp_directory_path().string()}), 2);
  EXPECT_EQ(run_check({"--ruleset", "4.0.0", good.path.string()}), 2);
  EXPECT_EQ(run_check({}), 2);
}

}  // namespace
}  // namespace mrcnn::logging
