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

// ================================================================================================
// Every ruleset with Mask R-CNN: what each round's rule files require that the others do not.
// ================================================================================================

CheckReport check_as(const std::vector<std::string>& lines, const std::string& ruleset) {
  CheckOptions opt;
  opt.ruleset = ruleset;
  return check(lines, opt);
}

// The 21 weights_initialization records of 1.1.0 to 2.1.0, inserted before init_stop.
std::vector<std::string> with_tensors(std::vector<std::string> lines, std::vector<std::string> names = {}) {
  if (names.empty())
    names = {"FPN_inner_block1", "FPN_layer_block1", "FPN_inner_block2", "FPN_layer_block2", "FPN_inner_block3",
             "FPN_layer_block3", "FPN_inner_block4", "FPN_layer_block4", "RPNHead_conv", "RPNHead_cls", "RPNHead_bbox",
             "ROI_BOX_FEATURE_EXTRACTOR_fc6", "ROI_BOX_FEATURE_EXTRACTOR_fc7", "ROI_BOX_PREDICTOR_cls",
             "ROI_BOX_PREDICTOR_bbox", "ROI_MASK_FEATURE_EXTRACTOR_fcn1", "ROI_MASK_FEATURE_EXTRACTOR_fcn2",
             "ROI_MASK_FEATURE_EXTRACTOR_fcn3", "ROI_MASK_FEATURE_EXTRACTOR_fcn4", "ROI_MASK_PREDICTOR_fcn5",
             "ROI_MASK_PREDICTOR_fcn_logits"};
  auto at = lines.begin() + static_cast<long>(index_of(lines, "init_stop"));
  for (const auto& n : names)
    at = lines.insert(at, ":::MLLOG {\"namespace\": \"\", \"time_ms\": 1700000000010, \"event_type\": \"POINT_IN_TIME\", "
                          "\"key\": \"weights_initialization\", \"value\": null, \"metadata\": {\"file\": \"x.cpp\", "
                          "\"lineno\": 1, \"tensor\": \"" + n + "\"}}") + 1;
  return lines;
}

std::string verdicts(const std::vector<std::string>& lines) {  // one letter a ruleset: P pass, F fail
  std::string out;
  for (const std::string& r : rulesets()) out += check_as(lines, r).passed ? 'P' : 'F';
  return out;
}

TEST(Rulesets, SixRulesetsOldestFirst) {
  EXPECT_EQ(rulesets(), (std::vector<std::string>{"1.0.0", "1.1.0", "2.0.0", "2.1.0", "3.0.0", "3.1.0"}));
  EXPECT_TRUE(is_ruleset("2.1.0"));
  EXPECT_FALSE(is_ruleset("0.7.0"));
  EXPECT_FALSE(is_ruleset("4.0.0"));
  const auto r = check_as(valid_log(), "4.0.0");
  EXPECT_FALSE(r.readable);
}

// 1.1.0 to 2.1.0 require the 21 tensors, each once; 1.0.0 and 3.x do not read them.
TEST(Rulesets, WeightsInitializationFrom110To210) {
  EXPECT_EQ(verdicts(valid_log()), "PFFFPP");
  EXPECT_EQ(verdicts(with_tensors(valid_log())), "PPPPPP");
  const auto r = check_as(valid_log(), "2.1.0");
  bool end = false, req = false;
  for (const auto& m : r.errors) {
    end |= m.text.find("END CHECK failed") != std::string::npos && m.text.find("missing: FPN_inner_block1") != std::string::npos;
    req |= m.key == "weights_initialization" && m.text == "required at least once, found 0";
  }
  EXPECT_TRUE(end && req) << format_report(r);
  auto twice = with_tensors(valid_log());
  twice = with_tensors(twice, {"RPNHead_cls"});
  const auto t = check_as(twice, "2.0.0");
  EXPECT_FALSE(t.passed);
  EXPECT_NE(format_report(t).find("repeated: RPNHead_cls x2"), std::string::npos) << format_report(t);
  EXPECT_EQ(verdicts(twice), "PFFFPP");
  // A tensor without its name: the POST raises KeyError, the END check misses one.
  auto nameless = with_tensors(valid_log());
  const size_t w = index_of(nameless, "weights_initialization");
  nameless[w] = std::regex_replace(nameless[w], std::regex(", \"tensor\": \"[A-Za-z0-9_]+\""), "");
  EXPECT_EQ(verdicts(nameless), "PFFFPP");
}

// The init limit: 30 minutes fixed before 2.0.0; from 2.0.0 the division sets it, so a division
// logged after init_stop leaves a limit of 0 minutes (as Google's v1.0 logs, which log it last).
TEST(Rulesets, InitLimitFromTheDivisionFrom200) {
  auto lines = with_tensors(valid_log());
  const size_t div = index_of(lines, "submission_division");
  const std::string division = lines[div];
  lines.erase(lines.begin() + static_cast<long>(div));
  lines.push_back(division);
  EXPECT_EQ(verdicts(lines), "PPFFFF");
  const auto r = check_as(lines, "2.0.0");
  EXPECT_TRUE(mentions(r, static_cast<int64_t>(index_of(lines, "init_stop")) + 1, "init_stop")) << format_report(r);
}

// 0.02/K below a global batch of 16 from 2.0.0; 0.02*K only before.
TEST(Rulesets, SmallBatchLearningRateFrom200) {
  auto lines = with_tensors(valid_log());
  const size_t gbs = index_of(lines, "global_batch_size");
  lines[gbs] = std::regex_replace(lines[gbs], std::regex("\"value\": 64"), "\"value\": 8");
  const size_t lr = index_of(lines, "opt_base_learning_rate");
  lines[lr] = std::regex_replace(lines[lr], std::regex("0\\.08"), "0.01");
  EXPECT_EQ(verdicts(lines), "FFPPPP");
  EXPECT_EQ(check_as(lines, "1.0.0").errors.front().text.find("is_integer(v['value'] / 0.02)  ["), 14u)
      << format_report(check_as(lines, "1.0.0"));
  // Logged before the batch: 2.x's BEGIN sets it to None (TypeError), 3.x has none (KeyError).
  std::swap(lines[gbs], lines[lr]);
  EXPECT_EQ(verdicts(lines), "FFFFFF");
  EXPECT_NE(format_report(check_as(lines, "2.1.0")).find("TypeError"), std::string::npos);
  EXPECT_NE(format_report(check_as(lines, "3.1.0")).find("KeyError"), std::string::npos);
}

// step_num instead of the epochs on block and eval events: 3.1.0 only.
TEST(Rulesets, StepNumOnlyIn310) {
  auto lines = with_tensors(valid_log());
  for (auto& l : lines)
    if (l.find("\"eval_start\"") != std::string::npos || l.find("\"eval_stop\"") != std::string::npos)
      l = std::regex_replace(l, std::regex("\"epoch_num\""), "\"step_num\"");
  EXPECT_EQ(verdicts(lines), "FFFFFP");
  lines = with_tensors(valid_log());
  for (auto& l : lines)
    if (l.find("\"block_start\"") != std::string::npos)
      l = std::regex_replace(l, std::regex("\"first_epoch_num\": (\\d), \"epoch_count\": 1"), "\"step_num\": $1");
  EXPECT_EQ(verdicts(lines), "FFFFFP");
}

// Each round's benchmarks: stable_diffusion is a benchmark of 3.1.0 only, minigo of 1.0.0 to 2.1.0.
TEST(Rulesets, BenchmarksOfEachRound) {
  for (const std::string b : {"stable_diffusion", "minigo", "gpt3"}) {
    auto lines = with_tensors(valid_log());
    lines[0] = std::regex_replace(lines[0], std::regex("maskrcnn"), b);
    for (const std::string& r : rulesets()) {
      const auto rep = check_as(lines, r);
      EXPECT_FALSE(rep.passed);
      bool listed = true;  // the CHECK passes where the round has the benchmark: only its rules are missing
      for (const auto& m : rep.errors) listed &= m.text.find("CHECK failed: v['value'] in [") == std::string::npos;
      const bool in_round = (b == "stable_diffusion" && r == "3.1.0") || (b == "minigo" && r < "3.0.0") ||
                            (b == "gpt3" && r >= "3.0.0");
      EXPECT_EQ(listed, in_round) << b << " " << r << "\n" << format_report(rep);
    }
  }
  // 1.1.0's open_common.yaml queues 1.0.0's open_maskrcnn.yaml: the same rules.
  auto open = valid_log();
  for (auto& l : open) l = std::regex_replace(l, std::regex("\"closed\""), "\"open\"");
  EXPECT_EQ(verdicts(open), "PPPPPP");
}

TEST(Rulesets, FromThePathElseTheDefault) {
  EXPECT_EQ(ruleset_from_path("/src/training_results_v2.1/NVIDIA/results/x/maskrcnn/result_0.txt"), "2.1.0");
  EXPECT_EQ(ruleset_from_path("training_results_v1.0/Google/results/tpu-v4-128-TF/maskrcnn"), "1.0.0");
  EXPECT_EQ(ruleset_from_path("v3.0/result_0.txt"), "3.0.0");
  EXPECT_EQ(ruleset_from_path("/a/training_results_v1.1/copy-v2.0/result_0.txt"), "2.0.0");  // the deepest
  EXPECT_EQ(ruleset_from_path("/runs/training_results_v4.0/result_0.txt"), "");  // no Mask R-CNN rules
  EXPECT_EQ(ruleset_from_path("/runs/mlperf-training-v2.0x/result_0.txt"), "");
  EXPECT_EQ(ruleset_from_path("/runs/rev1.0/result_0.txt"), "");
  EXPECT_EQ(ruleset_from_path("out/cpu-dev/latest/mlperf_log.txt"), "");
  // What the report line says.
  auto lines = valid_log();
  const auto by_path = check_log_text(join(lines), "training_results_v1.1/x/maskrcnn/result_0.txt");
  EXPECT_EQ(by_path.ruleset, "1.1.0");
  EXPECT_EQ(by_path.ruleset_source, "path");
  EXPECT_FALSE(by_path.passed);  // no weights_initialization
  EXPECT_NE(format_report(by_path).find("(ruleset 1.1.0 from the path, closed maskrcnn;"), std::string::npos)
      << format_report(by_path);
  const auto by_default = check(lines);
  EXPECT_EQ(by_default.ruleset, "3.1.0");
  EXPECT_NE(format_report(by_default).find("(ruleset 3.1.0 by default, closed maskrcnn;"), std::string::npos);
  const auto given = check_as(lines, "1.0.0");
  EXPECT_EQ(given.ruleset_source, "given");
  EXPECT_NE(format_report(given).find("(ruleset 1.0.0, closed maskrcnn;"), std::string::npos);
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
  EXPECT_EQ(run_check({"--ruleset", "3.0.0", good.path.string()}), 0);
  EXPECT_EQ(run_check({"--ruleset", "2.1.0", good.path.string()}), 1);  // no weights_initialization
  EXPECT_EQ(run_check({}), 2);
}

}  // namespace
}  // namespace mrcnn::logging
