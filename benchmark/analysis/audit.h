// `audit`: two runs compared the way a reproducibility reviewer would.
//
// First the setup (fingerprints, then the resolved configurations, then what the MLPerf logs say):
// every difference is named with whether it can change results and what to expect from it
// ("intra-op threads 2 vs 1: ..."). Then the values, in run order: per-step losses, named losses,
// learning rate and gradient norm (metrics.jsonl), then the per-epoch accuracies and the outcome.
//
//   verdict          exit  meaning
//   kIdentical       0     every value equal (bit for bit, or within --tolerance)
//   kDiverges        1     same setup as far as the fingerprints tell, values differ: not reproducible
//   kSetupDiffers    3     values differ, and a setup difference that changes results explains it
// (2 is left to bad input, as for every command.)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "benchmark/analysis/run_record.h"

namespace mrcnn::analysis {

struct AuditOptions {
  double tolerance = 0;  // relative: |a - b| <= tolerance * max(|a|, |b|) counts as equal
};

struct SetupDifference {
  std::string what;  // "seed", "threads.intra_op", "config hyperparameters.by_global_batch_size.8.base_lr", ...
  std::string a, b;
  bool changes_results = false;
  std::string consequence;  // what to expect from it
};

struct ValueDifference {
  std::string where;  // "step 12" or "epoch 3"
  std::string field;  // "loss", "losses.loss_mask", "bbox", ...
  std::string a, b;   // as the files hold them (shortest round-trip text)
  std::string source; // "metrics.jsonl lines 12 / 12" or "mlperf_log.txt"
};

struct AuditResult {
  enum class Verdict { kIdentical = 0, kDiverges = 1, kSetupDiffers = 3 };
  Verdict verdict = Verdict::kIdentical;
  std::string headline;                   // one line: "bit-identical ...", "identical up to step K, ..."
  std::vector<SetupDifference> setup;     // seed first, then results-changing, then the rest
  int64_t steps_compared = 0, epochs_compared = 0;
  int64_t identical_steps = 0;            // equal steps before the first difference
  std::optional<ValueDifference> first;   // the first differing value
  double max_relative_difference = 0;     // over compared values (what --tolerance has to cover)
  std::vector<std::string> notes;         // what could not be compared, length differences, ...
  int exit_status() const { return static_cast<int>(verdict); }
};

AuditResult audit_runs(const RunRecord& a, const RunRecord& b, const AuditOptions& options = {});

std::string format_audit(const RunRecord& a, const RunRecord& b, const AuditResult& result);
Json audit_json(const RunRecord& a, const RunRecord& b, const AuditResult& result);

}  // namespace mrcnn::analysis
