// forecast's pieces on their own: the ring all-reduce against the project's measured table
// (benchmark/README.md, "The ring model, measured" and "on paper"), the network read from the free
// text of published system descriptions, the checks that keep a broken description from being read
// as one accelerator of no model, the RCP point a global batch is forecast at, and the slowest of
// many ranks grown from the ranks measured.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "benchmark/analysis/forecast.h"
#include "benchmark/analysis/rcp.h"
#include "benchmark/analysis/system_description.h"

namespace mrcnn::analysis {
namespace {

constexpr double kFloat32Gradient = 176.5e6;  // 44.13 M trainable parameters

TEST(Forecast, RingAtLineRateIsTheReadmesPaperTable) {
  // p3dn.24xlarge, 100 Gb/s EFA: 26.5, 27.4, 27.8, 28.0 ms at 2, 4, 8, 16 nodes. The paper table
  // charges a flat ring over all 8N GPUs; the forecast charges the ring between nodes (NCCL reduces
  // inside a node over NVLink first), the same formula over N members, the smaller figure.
  const double want_ms[] = {26.5, 27.4, 27.8, 28.0};
  int i = 0;
  for (const int64_t nodes : {2, 4, 8, 16}) {
    EXPECT_NEAR(ring_seconds(8 * nodes, kFloat32Gradient, 100, 1, 0) * 1e3, want_ms[i++], 0.05) << nodes << " nodes";
    EXPECT_LT(ring_seconds(nodes, kFloat32Gradient, 100, 1, 0), ring_seconds(8 * nodes, kFloat32Gradient, 100, 1, 0));
  }
  EXPECT_EQ(ring_seconds(1, kFloat32Gradient, 100, 1, 5e-6), 0) << "one node: inside the measured step";
}

TEST(Forecast, RingAtTheAssumedEfficiencyMeetsTheMeasuredRing) {
  // Measured on 2 and 4 hosts at 1 Gbit/s: 1.55-1.59 s and 2.34-2.38 s (line rate 1.41 and 2.12).
  const double two = ring_seconds(2, kFloat32Gradient, 1, 1 / 1.1, 5e-6);
  const double four = ring_seconds(4, kFloat32Gradient, 1, 1 / 1.1, 5e-6);
  EXPECT_NEAR(ring_seconds(2, kFloat32Gradient, 1, 1, 0), 1.41, 0.005);
  EXPECT_NEAR(ring_seconds(4, kFloat32Gradient, 1, 1, 0), 2.12, 0.005);
  EXPECT_GE(two, 1.55 * 0.99);
  EXPECT_LE(two, 1.59 * 1.01);
  EXPECT_GE(four, 2.34 * 0.99);
  EXPECT_LE(four, 2.38 * 1.01);
}

TEST(Forecast, NetworkFromPublishedDescriptions) {
  struct Case {
    const char* text;
    double gbps;
  };
  const Case cases[] = {
      // NVIDIA DGX: the compute links only, not storage or management.
      {"Storage: 2x ConnectX-6 IB HDR 200Gb/sec, Management: 1x ConnectX-6 Ethernet 100Gb/Sec, Compute: 8x ConnectX-6 IB HDR "
       "200Gb/Sec",
       1600},
      {"Compute: 8x ConnectX-7 IB NDR 400Gb/s, Storage: 2x ConnectX-7 400Gb/s", 3200},
      {"2x ConnectX-6 IB HDR 200Gb/Sec", 400},  // Dell XE8545
      {"1x Ethernet 40Gb/Sec, 8x ConnectX-6 IB HDR 200Gb/Sec", 1640},  // Azure: no labels, all summed
      {"25 Gb/s ENA", 25},
      {"100 Gigabit Ethernet", 100},
      {"3200 Gb/s EFA (Elastic Fabric Adapter): 32x 100 Gb/s, 4 per GPU, GPUDirect RDMA", 3200},
      {"1.6 Tb/s InfiniBand", 1600},
  };
  for (const Case& c : cases) {
    const NodeNetwork n = parse_host_networking(c.text);
    ASSERT_TRUE(n.gbps.has_value()) << c.text;
    EXPECT_DOUBLE_EQ(*n.gbps, c.gbps) << c.text << " read as " << n.basis;
  }
  for (const char* none : {"N/A", "", "Ethernet", "InfiniBand HDR"}) EXPECT_FALSE(parse_host_networking(none).gbps) << none;
}

TEST(Forecast, BrokenDescriptionsAreNamedNotGuessed) {
  const auto problem = [](const char* text) { return describe(logging::Json::parse(text), "sys.json").problem; };
  EXPECT_EQ(problem(R"({"number_of_nodes": "2", "accelerators_per_node": "8", "accelerator_model_name": "H100"})"), "");
  EXPECT_EQ(problem(R"({"number_of_nodes": 1, "accelerators_per_node": 0, "host_processor_model_name": "EPYC"})"), "");
  EXPECT_NE(problem(R"({"accelerators_per_node": "8", "accelerator_model_name": "H100"})").find("sys.json: number_of_nodes is missing"),
            std::string::npos);
  EXPECT_NE(problem(R"({"number_of_nodes": "two", "accelerators_per_node": "8", "accelerator_model_name": "H100"})")
                .find(R"(number_of_nodes is "two", not a node count >= 1)"),
            std::string::npos);
  EXPECT_NE(problem(R"({"number_of_nodes": "0", "accelerators_per_node": "8", "accelerator_model_name": "H100"})").find("number_of_nodes"),
            std::string::npos);
  EXPECT_NE(problem(R"({"number_of_nodes": "1", "accelerators_per_node": "-8", "accelerator_model_name": "H100"})")
                .find("accelerators_per_node is \"-8\""),
            std::string::npos);
  EXPECT_NE(problem(R"({"number_of_nodes": "1", "accelerators_per_node": "8"})").find("8 accelerators per node of no accelerator_model_name"),
            std::string::npos);
  EXPECT_NE(problem(R"(["not", "an", "object"])").find("not a JSON object"), std::string::npos);
  const SystemDescription missing = read_description({{"/nonexistent/a.json", false}, {"/nonexistent/b.json", true}});
  EXPECT_EQ(missing.problem, "no system description (looked for /nonexistent/a.json, /nonexistent/b.json)");
}

TEST(Forecast, EpochsComeFromTheRcpTheCheckerWouldUse) {
  ASSERT_TRUE(rcp_at(128).has_value());
  EXPECT_FALSE(rcp_at(128)->interpolated);
  ASSERT_TRUE(rcp_at(256).has_value());
  EXPECT_TRUE(rcp_at(256)->interpolated);  // pruned: between 128 and 272
  EXPECT_GT(rcp_at(256)->mean, rcp_at(128)->mean);
  EXPECT_FALSE(rcp_at(273).has_value()) << "beyond the table: the checker has no RCP";
  ASSERT_TRUE(rcp_at(4).has_value());  // below the smallest: compared with the smallest
  EXPECT_EQ(rcp_at(4)->global_batch_size, rcp_at(8)->global_batch_size);
}

// A run's time splits exactly: first step + the epochs + the pauses between them + the tail is
// run_stop - run_start, whatever the epochs' lengths; a run stopped by an error measures nothing.
TEST(Forecast, ARunDecomposesExactly) {
  RunRecord r;
  r.name = "run";
  r.status = "success";
  r.division = "closed";
  r.global_batch_size = 96;
  r.run_start_ms = 1000;
  double t = 1000 + 1234;
  for (int64_t e = 1; e <= 4; ++e) {
    EpochRecord ep;
    ep.epoch = e;
    ep.start_ms = t;
    t += 60000 + 1000 * static_cast<double>(e);
    ep.stop_ms = t;
    ep.bbox = 0.4, ep.segm = 0.35, ep.accuracy_ms = t + 10;
    r.epochs.push_back(ep);
    if (e < 4) t += 2500 + 100 * static_cast<double>(e);
  }
  r.run_stop_ms = t + 7777;
  const std::optional<RunParts> p = decompose_run(r);
  ASSERT_TRUE(p.has_value());
  EXPECT_DOUBLE_EQ(p->first + p->epochs_sum + p->pauses_sum + p->tail, p->total);
  EXPECT_DOUBLE_EQ(p->first, 1.234);
  EXPECT_DOUBLE_EQ(p->tail, 7.777);
  EXPECT_DOUBLE_EQ(p->epoch, 63);  // the median of epochs 2..4: 62, 63, 64 s
  EXPECT_DOUBLE_EQ(p->pause, 2.7);
  EXPECT_TRUE(p->converged);
  EXPECT_EQ(p->epochs, 4);
  EXPECT_EQ(p->steps_per_epoch, 1222);  // closed division: COCO's 117,266 images / 96
  r.status = "aborted";
  r.epochs.back().stop_ms.reset();  // stopped inside its last epoch by an error
  std::string why;
  EXPECT_FALSE(decompose_run(r, &why).has_value());
  EXPECT_NE(why.find("stopped before its epochs ended"), std::string::npos) << why;
}

// The model's own arithmetic on a measurement with known parts: the node onto itself gives back
// its parts; a global batch beyond the RCP table and another accelerator are refused.
// One node of 8 H100s measured at 12 images each: a 64 ms step, 1 s first step, 3 s pauses, 9 s
// tail, 14 epochs to converge.
Measurement h100_node() {
  Measurement m;
  m.label = "node";
  m.accelerators_per_node = 8;
  m.accelerator_model = "H100";
  m.global_batch = 96;
  m.batch = 12;
  m.first = 1, m.step = 0.064, m.pause = 3, m.tail = 9, m.epochs = 14, m.runs = 3;
  return m;
}

TEST(Forecast, ANodeOntoItselfGivesBackItsParts) {
  const Measurement m = h100_node();
  Target t;
  t.name = "same";
  t.accelerators_per_node = 8;
  t.accelerator_model = "H100";
  t.global_batch = 96;
  t.batch = 12;
  Forecast f = predict({m}, t);
  ASSERT_EQ(f.refused, "");
  EXPECT_NEAR(f.minutes, (1 + 14 * 1222 * 0.064 + 13 * 3 + 9) / 60.0, 1e-12);
  EXPECT_EQ(f.low, f.minutes);
  EXPECT_EQ(f.high, f.minutes);
  EXPECT_EQ(f.batch_source, "measured");
  t.accelerator_model = "H100";
  t.global_batch = 512;
  t.batch = 64;
  EXPECT_NE(predict({m}, t).refused.find("has no RCP"), std::string::npos);
  t.accelerator_model = "A100";
  t.global_batch = 96;
  t.batch = 12;
  EXPECT_NE(predict({m}, t).refused.find("another accelerator"), std::string::npos);
}

// E[max of R standard normals] = integral of x R phi(x) Phi(x)^(R-1), summed here on a fine grid.
double integrated_max_normal(int64_t ranks) {
  const double h = 1e-3;
  double sum = 0;
  for (double x = -10; x < 10; x += h) {
    const double phi = std::exp(-x * x / 2) / std::sqrt(2 * M_PI), cdf = std::erfc(-x / std::sqrt(2.0)) / 2;
    sum += x * static_cast<double>(ranks) * phi * std::pow(cdf, static_cast<double>(ranks - 1)) * h;
  }
  return sum;
}

TEST(Forecast, TheSlowestOfManyRanksIsTheNormalsExpectedMaximum) {
  EXPECT_EQ(expected_max_normal(1), 0);
  EXPECT_NEAR(integrated_max_normal(2), 1 / std::sqrt(M_PI), 1e-6);  // the closed form at 2
  for (const int64_t r : {2, 4, 8, 16, 64, 256, 1024, 10000}) {
    const double exact = integrated_max_normal(r);
    EXPECT_NEAR(expected_max_normal(r), exact, (r < 8 ? 0.05 : 0.01) * exact) << r << " ranks";
  }
}

// The ranks' own step times grow the step from the ranks measured to the target's: a measured
// spread cv adds cv * t_compute * (z(R) - z(R0)) a step, the band runs from none to twice that, and
// a node onto itself adds nothing. Published logs (no rank_step_seconds) add nothing either.
TEST(Forecast, StragglersGrowWithTheRanksFromTheMeasuredSpread) {
  Measurement m = h100_node();
  m.network_gbps = 3200;
  m.step_cv = 0.05, m.timed_ranks = 8;
  Target t{.name = "same", .nodes = 1, .accelerators_per_node = 8, .accelerator_model = "H100", .global_batch = 96, .batch = 12};
  const Forecast self = predict({m}, t);
  ASSERT_EQ(self.refused, "");
  EXPECT_EQ(self.parts.step_straggler, 0);
  EXPECT_EQ(self.low, self.high);
  t.name = "four", t.nodes = 4, t.global_batch = 128, t.batch = 4, t.network_gbps = 3200;
  const Forecast four = predict({m}, t);
  ASSERT_EQ(four.refused, "");
  const double z32 = expected_max_normal(32), z8 = expected_max_normal(8);
  EXPECT_NEAR(four.parts.step_compute, 0.064 * (4 + 2) / (12 + 2), 1e-12);
  EXPECT_NEAR(four.parts.step_straggler, 0.05 * four.parts.step_compute * (z32 - z8), 1e-12);
  EXPECT_NEAR(four.parts.straggler, four.parts.epochs * static_cast<double>(four.parts.steps_per_epoch) * four.parts.step_straggler, 1e-9);
  Measurement unlogged = m;
  unlogged.step_cv = 0, unlogged.timed_ranks = 0;
  const Forecast plain = predict({unlogged}, t);
  EXPECT_NEAR(four.minutes - plain.minutes, four.parts.straggler / 60, 1e-9);
  // The band's straggler excursion, none to twice the term, on top of the others (which the
  // longer step widens as well: the RCP's epoch spread multiplies it).
  EXPECT_GE((four.high - four.low) - (plain.high - plain.low), 2 * four.parts.straggler / 60 - 1e-9);
  EXPECT_LE(four.low, plain.minutes + 1e-9);
}

}  // namespace
}  // namespace mrcnn::analysis
