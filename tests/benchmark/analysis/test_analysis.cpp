// The LibTorch-free analysis pieces: SHA-256 against the FIPS 180-4 test vectors, Student's t
// distribution and the RCP reference points against scipy / the official rcp_checker, the audit's
// verdicts on constructed runs, and the run reader on a damaged metrics file.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "benchmark/analysis/audit.h"
#include "benchmark/analysis/fingerprint.h"
#include "benchmark/analysis/rcp.h"
#include "benchmark/analysis/run_record.h"
#include "benchmark/analysis/sha256.h"
#include "benchmark/analysis/svg_plot.h"

namespace mrcnn::analysis {
namespace {

namespace fs = std::filesystem;

TEST(Sha256, FipsVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, FileEqualsBytesAndMissingFileIsNamed) {
  const fs::path p = fs::temp_directory_path() / "mrcnn_sha256_test.bin";
  std::string bytes;
  for (int i = 0; i < 3 * 1048576 + 17; ++i) bytes += static_cast<char>(i * 31);  // spans several read blocks
  std::ofstream(p, std::ios::binary) << bytes;
  EXPECT_EQ(sha256_file(p.string()), sha256_hex(bytes));
  fs::remove(p);
  try {
    sha256_file(p.string());
    FAIL() << "a missing file must throw";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(p.string()), std::string::npos) << e.what();
  }
}

TEST(Rcp, StudentTMatchesScipy) {
  // scipy.stats.t.cdf
  EXPECT_NEAR(student_t_cdf(2.0, 5), 0.9490302605850708, 1e-13);
  EXPECT_NEAR(student_t_cdf(-1.5, 10), 0.08225366322272007, 1e-13);
  EXPECT_NEAR(student_t_cdf(0.3, 1), 0.5927735790777423, 1e-13);
  EXPECT_NEAR(student_t_cdf(-4.0, 19), 0.0003830961686143225, 1e-15);
  EXPECT_NEAR(student_t_cdf(1.0, 2.5), 0.7979694863608632, 1e-13);
}

TEST(Rcp, PrunedReferencePointsMatchTheOfficialChecker) {
  // RCP_Checker('training', '3.1.0', 'maskrcnn').pruned_rcp_data
  const auto rcps = pruned_rcps();
  ASSERT_EQ(rcps.size(), 3u);
  EXPECT_EQ(rcps[0].global_batch_size, 8);
  EXPECT_EQ(rcps[1].global_batch_size, 128);
  EXPECT_EQ(rcps[2].global_batch_size, 272);
  EXPECT_DOUBLE_EQ(rcps[0].mean, 12.75);
  EXPECT_NEAR(rcps[0].stdev, 0.45825756949558394, 1e-15);
  EXPECT_NEAR(rcps[0].min_epochs, 12.181282997131348, 1e-12);
  EXPECT_DOUBLE_EQ(rcps[1].min_epochs, 14.0);
  EXPECT_NEAR(rcps[2].min_epochs, 16.4566752910614, 1e-12);
}

TEST(Rcp, VerdictsOfTheOfficialCases) {
  auto runs = [](std::vector<double> epochs, int64_t bs, int not_converged = 0) {
    std::vector<RcpRun> r;
    for (size_t i = 0; i < epochs.size(); ++i)
      r.push_back({.converged = static_cast<int>(i) >= not_converged, .epochs = epochs[i], .global_batch_size = bs});
    return r;
  };
  RcpVerdict v = rcp_check(runs({13, 13, 13, 13, 13}, 8));
  EXPECT_TRUE(v.passed);
  EXPECT_EQ(v.message, "RCP found");
  v = rcp_check(runs({12, 12, 12, 12, 12}, 8));  // faster than the minimum acceptable 12.18
  EXPECT_FALSE(v.passed);
  v = rcp_check(runs({12, 12, 13, 13, 13}, 8));  // 12.67: passes, normalized by 12.75 / 12.67
  EXPECT_TRUE(v.passed);
  EXPECT_NEAR(v.norm_factor, 12.75 / (38.0 / 3), 1e-12);
  v = rcp_check(runs({14, 14, 14, 14, 14}, 64));
  EXPECT_EQ(v.message, "RCP Interpolation");
  v = rcp_check(runs({20, 20, 20, 20, 20}, 512));
  EXPECT_FALSE(v.passed);
  EXPECT_EQ(v.message, "Missing RCP, please submit RCP with BS = 512");
  v = rcp_check(runs({14, 14, 14, 14, 14}, 4));
  EXPECT_EQ(v.message, "RCP not found but slower convergence on smaller batch size");
  v = rcp_check(runs({14, 14, 14, 14, 14}, 8, /*not_converged=*/2));
  EXPECT_EQ(v.message, "Insufficient convergence");
  v = rcp_check(runs({14, 14, 14, 14, 14}, -1));
  EXPECT_EQ(v.message, "Could not detect global_batch_size");
}

// ---- audit ---------------------------------------------------------------------------------------

RunRecord run_with(int64_t seed, std::vector<double> losses, std::vector<double> bbox) {
  RunRecord r;
  r.name = "run" + std::to_string(seed);
  r.seed = seed;
  r.status = "success";
  for (size_t i = 0; i < losses.size(); ++i)
    r.steps.push_back({.line = static_cast<int64_t>(i + 1), .step = static_cast<int64_t>(i), .epoch = 1,
                       .loss = losses[i], .lr = 0.01, .losses = {{"loss_mask", losses[i] / 2}}});
  for (size_t e = 0; e < bbox.size(); ++e) r.epochs.push_back({.epoch = static_cast<int64_t>(e + 1), .bbox = bbox[e], .segm = bbox[e]});
  r.fingerprint = Json{{"seed", seed}, {"threads", {{"intra_op", 2}, {"loader", 2}}}, {"host", {{"hostname", "a"}}}};
  return r;
}

TEST(Audit, IdenticalRunsAreBitIdentical) {
  const RunRecord a = run_with(1, {3.0, 2.5, 2.0}, {0.1, 0.2});
  RunRecord b = a;
  b.fingerprint["host"]["hostname"] = "b";
  b.fingerprint["threads"]["loader"] = 1;
  const AuditResult r = audit_runs(a, b);
  EXPECT_EQ(r.verdict, AuditResult::Verdict::kIdentical) << r.headline;
  EXPECT_EQ(r.exit_status(), 0);
  EXPECT_EQ(r.headline.rfind("bit-identical", 0), 0u) << r.headline;
  ASSERT_EQ(r.setup.size(), 2u);  // named, without effect
  for (const SetupDifference& d : r.setup) EXPECT_FALSE(d.changes_results) << d.what;
}

TEST(Audit, NamesTheFirstDivergingStep) {
  const RunRecord a = run_with(1, {3.0, 2.5, 2.0, 1.5}, {0.1});
  RunRecord b = a;
  b.steps[2].losses[0].second = 1.0000001;
  const AuditResult r = audit_runs(a, b);
  EXPECT_EQ(r.verdict, AuditResult::Verdict::kDiverges);
  EXPECT_EQ(r.exit_status(), 1);
  ASSERT_TRUE(r.first.has_value());
  EXPECT_EQ(r.first->where, "step 2");
  EXPECT_EQ(r.first->field, "losses.loss_mask");
  EXPECT_EQ(r.identical_steps, 2);
  EXPECT_NE(r.headline.find("identical up to step 1, then diverges"), std::string::npos) << r.headline;
  // Within a tolerance the pair is equal, and the largest difference is reported.
  const AuditResult t = audit_runs(a, b, {.tolerance = 1e-3});
  EXPECT_EQ(t.verdict, AuditResult::Verdict::kIdentical) << t.headline;
  EXPECT_GT(t.max_relative_difference, 0);
}

TEST(Audit, SeedsAreNamedFirstAndExplainTheDifference) {
  RunRecord a = run_with(1, {3.0, 2.5}, {0.1});
  RunRecord b = run_with(2, {3.1, 2.4}, {0.1});
  b.fingerprint["threads"]["intra_op"] = 1;
  const AuditResult r = audit_runs(a, b);
  EXPECT_EQ(r.verdict, AuditResult::Verdict::kSetupDiffers);
  EXPECT_EQ(r.exit_status(), 3);
  ASSERT_GE(r.setup.size(), 2u);
  EXPECT_EQ(r.setup[0].what, "seed");
  EXPECT_EQ(r.setup[1].what, "threads.intra_op");
  EXPECT_TRUE(r.setup[1].changes_results);
  EXPECT_EQ(r.headline.rfind("differ in setup: seed 1 vs 2", 0), 0u) << r.headline;
}

TEST(Audit, AccuracyAndOutcomeDifferencesCount) {
  const RunRecord a = run_with(1, {3.0}, {0.1, 0.2});
  RunRecord b = a;
  b.epochs[1].segm = 0.25;
  AuditResult r = audit_runs(a, b);
  ASSERT_TRUE(r.first.has_value());
  EXPECT_EQ(r.first->where, "epoch 2");
  EXPECT_EQ(r.first->field, "eval_accuracy SEGM");
  b = a;
  b.status = "aborted";
  r = audit_runs(a, b);
  ASSERT_TRUE(r.first.has_value());
  EXPECT_EQ(r.first->field, "run_stop status");
}

TEST(RunRecord, DamagedMetricsLineIsNamed) {
  const fs::path dir = fs::temp_directory_path() / "mrcnn_run_record_test";
  fs::create_directories(dir);
  std::ofstream(dir / "mlperf_log.txt") << ":::MLLOG {\"key\": \"run_start\", \"time_ms\": 5, \"value\": null, \"metadata\": {}}\n"
                                        << "garbage\n:::MLLOG {broken\n";
  std::ofstream(dir / "metrics.jsonl") << "{\"event\": \"step\", \"step\": 0, \"epoch\": 1, \"loss\": 1, \"lr\": 0.1}\n{oops\n";
  try {
    read_run(dir.string());
    FAIL() << "a damaged metrics line must throw";
  } catch (const RunReadError& e) {
    EXPECT_NE(std::string(e.what()).find("metrics.jsonl line 2"), std::string::npos) << e.what();
  }
  fs::remove(dir / "metrics.jsonl");
  const RunRecord r = read_run(dir.string());
  EXPECT_EQ(r.unreadable_log_lines, 1);  // the broken record; the line without the token is not a record
  EXPECT_EQ(r.run_start_ms, 5.0);
  fs::remove_all(dir);
  EXPECT_THROW(read_run(dir.string()), RunReadError);
}

TEST(Svg, EscapesTextAndDrawsEverySeries) {
  EXPECT_EQ(svg::escape("a<b>&\"c\""), "a&lt;b&gt;&amp;&quot;c&quot;");
  const std::string chart = svg::line_chart("t <x>", "x", "y", {{"s1", {{0, 0.1}, {1, 0.2}}, "#000"}}, {{0.3, "target", "#555"}});
  EXPECT_EQ(chart.rfind("<svg", 0), 0u);
  EXPECT_NE(chart.find("t &lt;x&gt;"), std::string::npos);
  EXPECT_NE(chart.find("<polyline"), std::string::npos);
  EXPECT_NE(chart.find("target"), std::string::npos);
}

TEST(Fingerprint, SummaryHoldsNoKeyTheOfficialToolsReadBySubstring) {
  const Json fp{{"config_sha256", "x"}, {"binary", {{"sha256", "y"}}}, {"threads", {{"intra_op", 2}}}};
  const std::string text = fingerprint_summary(fp).dump();
  EXPECT_EQ(text.find("global_batch_size"), std::string::npos);
  EXPECT_EQ(text.find("eval_accuracy"), std::string::npos);
  EXPECT_NE(text.find("\"intra_op_threads\":2"), std::string::npos);
}

}  // namespace
}  // namespace mrcnn::analysis
