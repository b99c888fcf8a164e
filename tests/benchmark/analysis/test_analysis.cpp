// The LibTorch-free analysis pieces: SHA-256 against the FIPS 180-4 test vectors and sha256sum
// (files across read blocks, empty, unreadable), Student's t distribution and the RCP reference
// points against scipy / the official rcp_checker, the audit's verdicts on constructed runs, the
// run reader on a damaged metrics file, `report`'s choice of throughput evidence and its reading
// of whole results trees, and the charts' sizes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "benchmark/analysis/audit.h"
#include "benchmark/analysis/fingerprint.h"
#include "benchmark/analysis/rcp.h"
#include "benchmark/analysis/report.h"
#include "benchmark/analysis/run_record.h"
#include "benchmark/analysis/svg_plot.h"
#include "benchmark/analysis/tensorboard.h"
#include "logging/sha256.h"

namespace mrcnn::analysis {
namespace {

namespace fs = std::filesystem;

TEST(Sha256, FipsVectors) {
  EXPECT_EQ(logging::sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(logging::sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(logging::sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(logging::sha256_hex(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// A file in the temporary folder, named for the test and the process (ctest runs tests in
// parallel), removed at the end of the test.
class TempFile {
 public:
  TempFile(const std::string& name, const std::string& bytes)
      : path_(fs::temp_directory_path() / ("mrcnn_sha256_" + name + "_" + std::to_string(::getpid()))) {
    std::ofstream(path_, std::ios::binary) << bytes;
  }
  ~TempFile() { fs::remove_all(path_); }
  std::string path() const { return path_.string(); }

 private:
  fs::path path_;
};

// What coreutils' sha256sum prints for the file, the tool an auditor checks a digest with.
std::string sha256sum_of(const std::string& path) {
  std::FILE* p = ::popen(("sha256sum '" + path + "'").c_str(), "r");
  if (p == nullptr) return "popen failed";
  char buf[65] = {};
  const size_t n = std::fread(buf, 1, 64, p);
  ::pclose(p);
  return std::string(buf, n);
}

TEST(Sha256, FileSpanningSeveralReadBlocksMatchesSha256sum) {
  // 9 MiB + 17 bytes: several 1-4 MiB read blocks and a partial last one.
  std::string bytes;
  for (int i = 0; i < 9 * 1048576 + 17; ++i) bytes += static_cast<char>(i * 31);
  const TempFile f("blocks", bytes);
  const std::string digest = logging::sha256_file(f.path());
  // Python's hashlib.sha256 and sha256sum of the same bytes, recorded.
  EXPECT_EQ(digest, "882aff06ee5e881f311b621a0c2993be96f03986311d234d8dc91c25b54bb887");
  EXPECT_EQ(digest, sha256sum_of(f.path()));
  EXPECT_EQ(digest, logging::sha256_hex(bytes));
}

TEST(Sha256, FileOfAMillionAIsTheFipsVector) {
  const TempFile f("million_a", std::string(1000000, 'a'));
  EXPECT_EQ(logging::sha256_file(f.path()), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, EmptyFile) {
  const TempFile f("empty", "");
  ASSERT_EQ(fs::file_size(f.path()), 0u);
  EXPECT_EQ(logging::sha256_file(f.path()), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

// The error an unreadable file gives, or "" when it did not throw std::runtime_error.
std::string sha256_file_error(const std::string& path) {
  try {
    logging::sha256_file(path);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

TEST(Sha256, MissingFileThrowsNamingIt) {
  const std::string path = (fs::temp_directory_path() / "mrcnn_sha256_no_such_file").string();
  ASSERT_FALSE(fs::exists(path));
  const std::string error = sha256_file_error(path);
  EXPECT_NE(error.find(path), std::string::npos) << error;
  EXPECT_NE(error.find("cannot be read"), std::string::npos) << error;
}

TEST(Sha256, DirectoryThrowsNamingIt) {
  // fopen opens a directory; the read is what fails.
  const TempFile d("dir", "");
  fs::remove(d.path());
  fs::create_directory(d.path());
  const std::string error = sha256_file_error(d.path());
  EXPECT_NE(error.find(d.path()), std::string::npos) << error;
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
  // Runs of different batch sizes (the official checker crashes): what was logged, most runs first.
  auto mixed = runs({17, 17, 17, 17, 17}, 256);
  mixed[1].global_batch_size = 128;
  v = rcp_check(mixed);
  EXPECT_FALSE(v.passed);
  EXPECT_EQ(v.message, "global batch size differs between runs (256 x4, 128 x1)");
  mixed[3].global_batch_size = -1;
  EXPECT_EQ(rcp_check(mixed).message, "global batch size differs between runs (256 x3, 128 x1, not logged x1)");
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

// A configuration key added after a run was kept is absent from its config.json: against the value
// the older run ran under (0: whole epochs) it is no difference; against another, it changes results.
TEST(Audit, AKeyAbsentFromAnOlderRunEqualsItsDefault) {
  RunRecord a = run_with(1, {3.0, 2.5}, {0.1});
  a.config = Json{{"run", {{"max_epochs", 2}}}};
  RunRecord b = a;
  b.config["run"]["max_steps_per_epoch"] = 0;
  b.config["launch"] = {{"network_gbps", 0.0}};
  b.config["model"] = {{"head_streams", false}};
  EXPECT_EQ(audit_runs(a, b).verdict, AuditResult::Verdict::kIdentical) << audit_runs(a, b).headline;
  b.config["model"]["head_streams"] = true;  // on a GPU: possibly another rounding, so named
  {
    const AuditResult streams = audit_runs(a, b);
    ASSERT_EQ(streams.setup.size(), 1u) << streams.headline;
    EXPECT_EQ(streams.setup[0].what, "config model.head_streams");
    EXPECT_TRUE(streams.setup[0].changes_results);
  }
  b.config["model"]["head_streams"] = false;
  b.config["run"]["max_steps_per_epoch"] = 50;
  const AuditResult r = audit_runs(a, b);
  ASSERT_EQ(r.setup.size(), 1u) << r.headline;
  EXPECT_EQ(r.setup[0].what, "config run.max_steps_per_epoch");
  EXPECT_EQ(r.setup[0].a, "(absent)");
  EXPECT_TRUE(r.setup[0].changes_results);
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

TEST(Audit, PortableOpsAreNamedAsChangingResults) {
  RunRecord a = run_with(1, {3.0, 2.5}, {0.1});
  a.fingerprint["settings"] = {{"ops", "auto"}, {"ops_resolved", "native"}};
  RunRecord b = run_with(1, {3.0, 2.5000001}, {0.1});
  b.fingerprint["settings"] = {{"ops", "portable"}, {"ops_resolved", "portable"}};
  const AuditResult r = audit_runs(a, b);
  EXPECT_EQ(r.verdict, AuditResult::Verdict::kSetupDiffers) << r.headline;
  std::vector<std::string> named;
  for (const SetupDifference& d : r.setup) {
    named.push_back(d.what);
    if (d.what == "settings.ops_resolved") {  // what ran decides
      EXPECT_TRUE(d.changes_results);
      EXPECT_NE(d.consequence.find("portable ops"), std::string::npos) << d.consequence;
    }
    if (d.what == "settings.ops") {
      EXPECT_FALSE(d.changes_results);  // what was asked for
    }
  }
  EXPECT_NE(std::find(named.begin(), named.end(), "settings.ops"), named.end());
  EXPECT_NE(std::find(named.begin(), named.end(), "settings.ops_resolved"), named.end());
  // "auto" and "native" on the CPU run the same kernels: bit-identical runs stay so.
  RunRecord c = a;
  c.fingerprint["settings"]["ops"] = "native";
  const AuditResult same = audit_runs(a, c);
  EXPECT_EQ(same.verdict, AuditResult::Verdict::kIdentical) << same.headline;
}

// A rebuilt ops library changes results as a rebuilt executable does, and is named; where the
// libraries lie does not.
TEST(Audit, ARebuiltProjectLibraryIsNamed) {
  RunRecord a = run_with(1, {3.0, 2.5}, {0.1});
  a.fingerprint["binary"] = {{"sha256", "exe"},
                             {"libraries", {{"libmrcnn_ops.so", "aaaa"}, {"libmrcnn_model.so", "bbbb"}}},
                             {"library_paths", {{"libmrcnn_ops.so", "/one/build/model/libmrcnn_ops.so"}}}};
  RunRecord b = run_with(1, {3.0, 2.5}, {0.1});
  b.fingerprint["binary"] = a.fingerprint["binary"];
  b.fingerprint["binary"]["library_paths"]["libmrcnn_ops.so"] = "/another/build/model/libmrcnn_ops.so";
  EXPECT_EQ(audit_runs(a, b).verdict, AuditResult::Verdict::kIdentical) << audit_runs(a, b).headline;
  b.fingerprint["binary"]["libraries"]["libmrcnn_ops.so"] = "cccc";
  const AuditResult r = audit_runs(a, b);
  bool named = false;
  for (const SetupDifference& d : r.setup) {
    if (d.what == "binary.libraries.libmrcnn_ops.so") {
      named = true;
      EXPECT_TRUE(d.changes_results);
      EXPECT_NE(d.consequence.find("libmrcnn_ops.so"), std::string::npos) << d.consequence;
    }
    EXPECT_NE(d.what, "binary.libraries.libmrcnn_model.so");
    if (d.what.starts_with("binary.library_paths")) {
      EXPECT_FALSE(d.changes_results) << d.what;
    }
  }
  EXPECT_TRUE(named) << r.headline;
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


// ---- report --------------------------------------------------------------------------------------

// One MLPerf log record at t ms, as the harness writes it.
std::string mllog_line(double t, const std::string& key, const std::string& value, const std::string& meta) {
  return ":::MLLOG {\"namespace\": \"\", \"time_ms\": " + std::to_string(static_cast<int64_t>(t)) +
         ", \"event_type\": \"POINT_IN_TIME\", \"key\": \"" + key + "\", \"value\": " + value +
         ", \"metadata\": " + meta + "}\n";
}

// An MLPerf log of `epochs` epochs of 100 s each, with `events` throughput records (images/s).
std::string log_text(const std::string& division, int64_t train_samples, int64_t eval_samples, int epochs,
                     const std::vector<double>& events, const std::string& benchmark = "maskrcnn") {
  std::string out;
  double t = 1e12;
  const auto rec = [&](const std::string& key, const std::string& value, const std::string& meta = "{}") {
    out += mllog_line(t, key, value, meta);
  };
  rec("submission_benchmark", "\"" + benchmark + "\"");
  rec("submission_division", "\"" + division + "\"");
  rec("global_batch_size", "8");
  rec("run_start", "null");
  rec("train_samples", std::to_string(train_samples));
  rec("eval_samples", std::to_string(eval_samples));
  for (int e = 1; e <= epochs; ++e) {
    const std::string meta = "{\"epoch_num\": " + std::to_string(e) + "}";
    rec("epoch_start", "null", meta);
    for (double v : events) rec("throughput", std::to_string(v));
    t += 100000;
    rec("epoch_stop", "null", meta);
    rec("eval_accuracy", "{\"BBOX\": 0.4, \"SEGM\": 0.35}", meta);
  }
  rec("run_stop", "null", "{\"status\": \"success\"}");
  return out;
}

fs::path results_tree(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / name;
  fs::remove_all(dir);
  return dir;
}

void write_result(const fs::path& folder, const std::string& text) {
  fs::create_directories(folder);
  std::ofstream(folder / "result_0.txt") << text;
}

std::map<std::string, const SystemReport*> by_name(const std::vector<SystemReport>& systems) {
  std::map<std::string, const SystemReport*> out;
  for (const SystemReport& s : systems) out[s.name] = &s;
  return out;
}

TEST(Report, ThroughputComesFromTheBestEvidenceAndNamesTrainSamplesWhereItDisagrees) {
  const fs::path tree = results_tree("mrcnn_report_throughput");
  // The log's events (median 150), though train_samples says 4000 images an epoch (40 images/s)
  // and 2 epochs of COCO's 117,266 images in 200 s say 1172.66.
  write_result(tree / "events" / "maskrcnn", log_text("closed", 4000, 1, 2, {140, 150, 900}));
  // Closed division without events or steps: 2 epochs of COCO's 117,266 images in 200 s; so too
  // an open-division log validated on val2017's 5000 images.
  write_result(tree / "coco" / "maskrcnn", log_text("closed", 40000, 1, 2, {}));
  write_result(tree / "val2017" / "maskrcnn", log_text("open", 117266, 5000, 2, {}));
  // Another dataset with nothing but train_samples.
  write_result(tree / "samples" / "maskrcnn", log_text("open", 36, 64, 2, {}));
  // Kept steps (global batch 8): a whole first epoch of 5 steps (40 images, train_samples 36 within
  // a batch) and a last one the run stopped after 2 steps; and a run whose train_samples the steps
  // contradict (10 steps an epoch, 80 images).
  for (const auto& [name, steps] : {std::pair("stopped", std::pair(5, 2)), std::pair("contradicted", std::pair(10, 10))}) {
    const fs::path folder = tree / name / "maskrcnn";
    write_result(folder, log_text("open", 36, 64, 2, {}));
    fs::create_directories(folder / "runs" / "result_0");
    std::ofstream metrics(folder / "runs" / "result_0" / "metrics.jsonl");
    for (int e = 1; e <= 2; ++e)
      for (int k = 0; k < (e == 1 ? steps.first : steps.second); ++k)
        metrics << "{\"event\": \"step\", \"step\": " << 100 * e + k << ", \"epoch\": " << e << ", \"loss\": 1, \"lr\": 0.1}\n";
  }
  // One node of one accelerator each, described as the project's systems/ files describe one.
  const fs::path described = tree / "systems";
  fs::create_directories(described);
  for (const char* name : {"events", "coco", "val2017", "samples", "stopped", "contradicted"})
    std::ofstream(described / (std::string(name) + ".json"))
        << R"({"system": {"number_of_nodes": "1", "accelerators_per_node": "1", "accelerator_model_name": "Test"}})";
  const std::vector<SystemReport> systems = build_report({tree.string()}, {.systems_dir = described.string()});
  const auto s = by_name(systems);
  ASSERT_EQ(s.size(), 6u);
  for (const auto& [name, system] : s) EXPECT_TRUE(system->described) << name << ": " << system->description.problem;
  EXPECT_EQ(s.at("events")->throughput_source, kSourceThroughputEvents);
  EXPECT_DOUBLE_EQ(*s.at("events")->images_per_s_per_accelerator, 150);
  EXPECT_EQ(s.at("events")->throughput_note,
            "train_samples 4000 not used: it gives 0.27x the figure of the evidence; epochs x 117266 give 7.82x the "
            "throughput events' figure (1 of 1 runs)");
  EXPECT_EQ(s.at("coco")->throughput_source, kSourceCocoEpochs);
  EXPECT_DOUBLE_EQ(*s.at("coco")->images_per_s_per_accelerator, 117266.0 / 100);
  EXPECT_NE(s.at("coco")->throughput_note.find("train_samples 40000 not used: it gives 0.34x"), std::string::npos)
      << s.at("coco")->throughput_note;
  EXPECT_EQ(s.at("val2017")->throughput_source, kSourceCocoEpochs);
  EXPECT_EQ(s.at("val2017")->throughput_note, "");
  EXPECT_EQ(s.at("samples")->throughput_source, kSourceTrainSamples);
  EXPECT_DOUBLE_EQ(*s.at("samples")->images_per_s_per_accelerator, 0.36);
  // The stopped run: 7 steps x 8 images over 200 s; its partial last epoch is no contradiction.
  EXPECT_EQ(s.at("stopped")->throughput_source, kSourceSteps);
  EXPECT_DOUBLE_EQ(*s.at("stopped")->images_per_s_per_accelerator, 0.28);
  EXPECT_EQ(s.at("stopped")->throughput_note, "");
  EXPECT_EQ(s.at("contradicted")->throughput_source, kSourceSteps);
  EXPECT_DOUBLE_EQ(*s.at("contradicted")->images_per_s_per_accelerator, 0.8);
  EXPECT_EQ(s.at("contradicted")->throughput_note, "train_samples 36 not used: it gives 0.45x the figure of the evidence (1 of 1 runs)");
  EXPECT_NE(s.at("contradicted")->runs[0].throughput.note.find("train_samples 36 is not the 80 images an epoch"), std::string::npos)
      << s.at("contradicted")->runs[0].throughput.note;
  // The open division's RCP does not apply, and the table says so; no log of this tree logs scoring.
  EXPECT_FALSE(s.at("samples")->rcp_applies());
  EXPECT_TRUE(s.at("coco")->rcp_applies());
  const std::string table = format_report_table(systems);
  EXPECT_NE(table.find("n/a (open)"), std::string::npos) << table;
  EXPECT_NE(table.find("COCO scoring not logged"), std::string::npos) << table;
  EXPECT_FALSE(s.at("coco")->mean_time.scoring_total.has_value());
  fs::remove_all(tree);
}

TEST(Report, AWholeTreeIsReadForMaskRcnnOnlyAndSameNamesAreTold) {
  const fs::path tree = results_tree("mrcnn_report_tree");
  for (const char* round : {"training_results_v2.1", "training_results_v3.0"}) {
    const fs::path org = tree / round / "Org";
    write_result(org / "results" / "sys" / "maskrcnn", log_text("closed", 40000, 1, 1, {10}));
    write_result(org / "results" / "sys" / "bert", "not read\n");
    write_result(org / "benchmarks" / "maskrcnn" / "implementations", "code, not results\n");
    std::ofstream(org / "systems" / "sys.json") << "{\"submitter\": \"Org\"}";
  }
  const std::vector<SystemReport> systems = build_report({tree.string()}, {});
  ASSERT_EQ(systems.size(), 2u);
  EXPECT_EQ(systems[0].label, "sys [mrcnn_report_tree/training_results_v2.1/Org]");
  EXPECT_EQ(systems[1].label, "sys [mrcnn_report_tree/training_results_v3.0/Org]");
  // Two results trees holding one name: labels stay unique; a trailing slash names the system.
  const fs::path a = tree / "training_results_v2.1" / "Org" / "results", b = tree / "training_results_v3.0" / "Org" / "results";
  const std::vector<SystemReport> two = build_report({a.string(), b.string() + "/", (a / "sys" / "maskrcnn").string() + "/"}, {});
  ASSERT_EQ(two.size(), 2u);  // the third path is the first system again
  EXPECT_EQ(two[0].name, "sys");
  EXPECT_EQ(two[0].label, "sys [results, 2.1.0]");  // two rounds' results/ folders: the round tells them apart
  EXPECT_EQ(two[1].label, "sys [results, 3.0.0]");
  // A folder of another benchmark given by name is one clear error.
  const fs::path bert = tree / "training_results_v3.0" / "Org" / "results" / "sys" / "bert";
  write_result(bert, log_text("closed", 1, 1, 1, {}, "bert"));
  try {
    build_report({bert.string()}, {});
    FAIL() << "a BERT result must not be reported as Mask R-CNN";
  } catch (const ReportError& e) {
    EXPECT_NE(std::string(e.what()).find("a result of benchmark 'bert'"), std::string::npos) << e.what();
  }
  fs::remove_all(tree);
}

// A log that counts blocks, not epochs (as Google's TPU logs of v1.0 and v2.0): blocks numbered from
// 0, each of one epoch of 100 s, an evaluation of 20 s after each (numbered from 1), 5 s between.
std::string block_log(int blocks) {
  std::string out;
  double t = 1e12;
  const auto rec = [&](const std::string& key, const std::string& value, const std::string& meta = "{}") {
    out += mllog_line(t, key, value, meta);
  };
  rec("submission_benchmark", "\"maskrcnn\"");
  rec("submission_division", "\"closed\"");
  rec("global_batch_size", "256");
  rec("train_samples", "118287");
  rec("init_start", "null");
  t += 60000;
  rec("run_start", "null");
  for (int b = 0; b < blocks; ++b) {
    const std::string block = "{\"first_epoch_num\": " + std::to_string(b) + ", \"epoch_count\": 1}";
    const std::string epoch = "{\"epoch_num\": " + std::to_string(b + 1) + "}";
    rec("block_start", "null", block);
    t += 100000;
    rec("block_stop", "null", block);
    t += 5000;
    rec("eval_start", "null", epoch);
    t += 20000;
    rec("eval_accuracy", "{\"BBOX\": 0.4, \"SEGM\": 0.35}", epoch);
    rec("eval_stop", "null", epoch);
  }
  rec("run_stop", "null", "{\"status\": \"success\"}");
  return out;
}

// Training time, the time breakdown and images/s from the blocks, said so; a log of epochs keeps
// its epochs.
TEST(Report, ABlockCountedLogTrainsInItsBlocks) {
  const fs::path tree = results_tree("mrcnn_report_blocks");
  write_result(tree / "tpu" / "maskrcnn", block_log(3));
  write_result(tree / "gpu" / "maskrcnn", log_text("closed", 117266, 5000, 3, {}));
  fs::create_directories(tree / "systems");
  for (const char* name : {"tpu", "gpu"})
    std::ofstream(tree / "systems" / (std::string(name) + ".json"))
        << R"({"system": {"number_of_nodes": "1", "accelerators_per_node": "4", "accelerator_model_name": "Test"}})";
  const std::vector<SystemReport> systems = build_report({tree.string()}, {.systems_dir = (tree / "systems").string()});
  const auto s = by_name(systems);
  const RunSummary& tpu = s.at("tpu")->runs.at(0);
  EXPECT_TRUE(tpu.counted_in_blocks);
  EXPECT_EQ(tpu.epochs_trained, 3);
  EXPECT_DOUBLE_EQ(tpu.time.training, 300);
  EXPECT_DOUBLE_EQ(tpu.time.eval_inference, 60);  // each eval until the next block (or its eval_stop)
  EXPECT_DOUBLE_EQ(tpu.time.idle, 15);             // the gaps between block_stop and eval_start
  EXPECT_DOUBLE_EQ(tpu.time.init, 60);
  EXPECT_EQ(tpu.throughput.source, kSourceCocoBlocks);
  EXPECT_DOUBLE_EQ(*s.at("tpu")->images_per_s_per_accelerator, 3 * 117266.0 / 300 / 4);
  EXPECT_EQ(s.at("tpu")->block_counted_runs, 1);
  EXPECT_EQ(*tpu.epochs_to_converge, 3);
  const RunSummary& gpu = s.at("gpu")->runs.at(0);
  EXPECT_FALSE(gpu.counted_in_blocks);
  EXPECT_EQ(gpu.throughput.source, kSourceCocoEpochs);
  EXPECT_DOUBLE_EQ(gpu.time.training, 300);
  const std::string table = format_report_table(systems);
  EXPECT_NE(table.find("117266/epoch, blocks"), std::string::npos) << table;
  EXPECT_NE(table.find("blocks: 1 of 1 runs log blocks, not epochs"), std::string::npos) << table;
  fs::remove_all(tree);
}

// A damaged log's block counts (here the largest int64, three times) are cut at 2^20 epochs a block:
// their sum neither overflows nor turns negative.
TEST(Report, ABlockCountBeyondAnyRunIsCut) {
  const fs::path tree = results_tree("mrcnn_report_huge_blocks");
  std::string text = block_log(3);
  for (size_t at = 0; (at = text.find("\"epoch_count\": 1}", at)) != std::string::npos;)
    text.replace(at, 17, "\"epoch_count\": 9223372036854775807}");
  write_result(tree / "tpu" / "maskrcnn", text);
  const std::vector<SystemReport> systems = build_report({tree.string()}, {});
  const RunSummary& run = by_name(systems).at("tpu")->runs.at(0);
  EXPECT_TRUE(run.counted_in_blocks);
  EXPECT_EQ(run.epochs_trained, 3 * (int64_t{1} << 20));
  fs::remove_all(tree);
}

// Each system by its round's rules: the round its path names, else 3.1.0, or --ruleset for all.
TEST(Report, EachSystemIsReadByItsRoundsRules) {
  const fs::path tree = results_tree("mrcnn_report_rounds");
  for (const char* round : {"training_results_v1.0", "training_results_v2.1"})
    write_result(tree / round / "Org" / "results" / "sys" / "maskrcnn", log_text("closed", 40000, 1, 1, {10}));
  write_result(tree / "local" / "sys" / "maskrcnn", log_text("closed", 40000, 1, 1, {10}));
  const std::vector<SystemReport> systems = build_report({tree.string()}, {});
  ASSERT_EQ(systems.size(), 3u);
  std::map<std::string, std::string> got;  // label -> "ruleset source"
  for (const SystemReport& x : systems) {
    got[x.label] = x.ruleset + " " + x.ruleset_source;
    EXPECT_EQ(x.rcp.ruleset, x.ruleset);
    for (const RunSummary& r : x.runs) EXPECT_EQ(r.ruleset, x.ruleset);
  }
  EXPECT_EQ(got.at("sys [mrcnn_report_rounds/training_results_v1.0/Org]"), "1.0.0 path");
  EXPECT_EQ(got.at("sys [mrcnn_report_rounds/training_results_v2.1/Org]"), "2.1.0 path");
  EXPECT_EQ(got.at("sys [mrcnn_report_rounds/local]"), "3.1.0 default");
  const Json js = report_json(systems);
  EXPECT_TRUE(js["ruleset"].is_null());
  EXPECT_EQ(js["rulesets"], Json({"1.0.0", "2.1.0", "3.1.0"}));
  const std::string table = format_report_table(systems);
  EXPECT_NE(table.find("1.0.0: 1 system (path); 2.1.0: 1 system (path); 3.1.0: 1 system (default)"), std::string::npos) << table;
  for (const SystemReport& x : build_report({tree.string()}, {.ruleset = "2.0.0"}))
    EXPECT_EQ(x.ruleset + " " + x.ruleset_source, "2.0.0 given");
  EXPECT_THROW(build_report({tree.string()}, {.ruleset = "4.0.0"}), ReportError);
  // The same folder name in two rounds given side by side: the round tells them apart.
  const std::vector<SystemReport> orgs = build_report(
      {(tree / "training_results_v1.0" / "Org").string(), (tree / "training_results_v2.1" / "Org").string()}, {});
  ASSERT_EQ(orgs.size(), 2u);
  EXPECT_EQ(orgs[0].label, "sys [Org, 1.0.0]");
  EXPECT_EQ(orgs[1].label, "sys [Org, 2.1.0]");
  // The RCPs of 1.0.0 and 1.1.0 have no batch 8: their smallest pruned point is 48.
  const auto runs = [](std::vector<double> epochs, int64_t bs) {
    std::vector<RcpRun> r;
    for (double e : epochs) r.push_back({.converged = true, .epochs = e, .global_batch_size = bs});
    return r;
  };
  EXPECT_EQ(pruned_rcps("1.1.0").front().global_batch_size, 48);
  EXPECT_EQ(pruned_rcps("2.0.0").front().global_batch_size, 8);
  EXPECT_EQ(rcp_check(runs({14, 14, 14, 14, 14}, 8), "1.0.0").message, "RCP not found but slower convergence on smaller batch size");
  EXPECT_EQ(rcp_check(runs({14, 14, 14, 14, 14}, 8), "2.0.0").message, "RCP found");
  fs::remove_all(tree);
}

TEST(Svg, EscapesTextAndDrawsEverySeries) {
  EXPECT_EQ(svg::escape("a<b>&\"c\""), "a&lt;b&gt;&amp;&quot;c&quot;");
  const std::string chart = svg::line_chart("t <x>", "x", "y", {{"s1", {{0, 0.1}, {1, 0.2}}, "#000"}}, {{0.3, "target", "#555"}});
  EXPECT_EQ(chart.rfind("<svg", 0), 0u);
  EXPECT_NE(chart.find("t &lt;x&gt;"), std::string::npos);
  EXPECT_NE(chart.find("<polyline"), std::string::npos);
  EXPECT_NE(chart.find("target"), std::string::npos);
}

// The charts grow with their rows and legends instead of squeezing labels into each other.
TEST(Svg, ChartsGrowWithTheirRowsAndLabels) {
  const auto size = [](const std::string& chart) {
    const size_t w = chart.find("width=\""), h = chart.find("height=\"");
    return std::pair(std::stod(chart.substr(w + 7)), std::stod(chart.substr(h + 8)));
  };
  std::vector<svg::Bar> bars;
  for (int i = 0; i < 40; ++i) bars.push_back({.label = "a system named " + std::to_string(i), .value = 1.0 + i, .color = "#000"});
  const auto [w40, h40] = size(svg::bar_chart("t", "x", {{"", bars}}, {}));
  bars.resize(4);
  const auto [w4, h4] = size(svg::bar_chart("t", "x", {{"", bars}}, {}));
  EXPECT_NEAR(h40 - h4, 36 * 20, 1e-9);  // one 20 px row a bar
  bars[0].label = std::string(60, 'x');
  const auto [wide, h] = size(svg::bar_chart("t", "x", {{"", bars}}, {}));
  EXPECT_NEAR(wide - w4, svg::text_width(bars[0].label) - svg::text_width("a system named 0"), 1e-9);
  std::vector<svg::Series> series(30, svg::Series{.name = "a run", .points = {{0, 0.1}}, .color = "#000"});
  EXPECT_GT(size(svg::line_chart("t", "x", "y", series, {})).second, 30 * 18);
  EXPECT_EQ(svg::text_width("\xc3\xa9t\xc3\xa9"), svg::text_width("ete"));  // characters, not bytes
}

// TFRecord frames check with CRC-32C: the standard check value, and a frame laid out as
// length | masked CRC of the length | data | masked CRC of the data. (TensorBoard's own reader
// reads a whole exported run back in tests/e2e/test_export.py.)
TEST(TensorBoard, Crc32cAndTheRecordFrame) {
  EXPECT_EQ(tensorboard::crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(tensorboard::crc32c(""), 0u);
  const std::string data = tensorboard::scalar_event(1.5, 7, "train/loss", 0.25f);
  const std::string frame = tensorboard::record(data);
  ASSERT_EQ(frame.size(), 8 + 4 + data.size() + 4);
  uint64_t length = 0;
  std::memcpy(&length, frame.data(), 8);
  EXPECT_EQ(length, data.size());
  uint32_t crc = 0;
  std::memcpy(&crc, frame.data() + 8, 4);
  EXPECT_EQ(crc, tensorboard::masked_crc32c(frame.substr(0, 8)));
  EXPECT_EQ(frame.substr(12, data.size()), data);
  std::memcpy(&crc, frame.data() + 12 + data.size(), 4);
  EXPECT_EQ(crc, tensorboard::masked_crc32c(data));
  // The event: wall_time (field 1, fixed64), step (field 2, varint 7), summary (field 5) holding
  // one value whose tag is the name and whose simple_value (field 2, fixed32) is 0.25.
  EXPECT_EQ(static_cast<unsigned char>(data[0]), 0x09);
  EXPECT_EQ(static_cast<unsigned char>(data[9]), 0x10);
  EXPECT_EQ(static_cast<unsigned char>(data[10]), 7);
  EXPECT_NE(data.find("train/loss"), std::string::npos);
  float value = 0;
  std::memcpy(&value, data.data() + data.size() - 4, 4);
  EXPECT_EQ(value, 0.25f);
  EXPECT_NE(tensorboard::file_version_event(0).find("brain.Event:2"), std::string::npos);
}

TEST(Fingerprint, MappedLibrariesAreReadFromAMapsText) {
  std::istringstream maps(
      "55d0c0000000-55d0c0001000 r--p 00000000 08:01 123 /opt/run/build/benchmark/mlperf-maskrcnn\n"
      "7f0000000000-7f0000100000 r--p 00000000 08:01 456 /opt/run/build/model/libmrcnn_ops.so\n"
      "7f0000100000-7f0000200000 r-xp 00100000 08:01 456 /opt/run/build/model/libmrcnn_ops.so\n"
      "7f0000300000-7f0000400000 r--p 00000000 08:01 457 /a dir with spaces/libmrcnn_model.so\n"
      "7f0000500000-7f0000600000 r--p 00000000 08:01 458 /usr/lib/libtorch_cpu.so\n"
      "7f0000700000-7f0000800000 r--p 00000000 08:01 459 /old/libmrcnn_extra.so (deleted)\n"
      "7f0000900000-7f0000a00000 rw-p 00000000 00:00 0 \n"
      "7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]\n");
  const std::map<std::string, std::string> want{{"libmrcnn_model.so", "/a dir with spaces/libmrcnn_model.so"},
                                                {"libmrcnn_ops.so", "/opt/run/build/model/libmrcnn_ops.so"}};
  EXPECT_EQ(mapped_libraries(maps, "libmrcnn"), want);
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
