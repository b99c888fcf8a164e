// MLPerf Training compliance check for Mask R-CNN logs, every ruleset with Mask R-CNN (1.0.0,
// 1.1.0, 2.0.0, 2.1.0, 3.0.0, 3.1.0; closed and open divisions).
//
// The verdict is the official checker's (python -m mlperf_logging.compliance_checker --usage
// training --ruleset V): the same rule files processed in the same order (common, then
// <division>_common, then <division>_maskrcnn), the same per-pass state, the same Python semantics
// for every CHECK (a check that would raise in Python fails here too), and the same treatment of
// repeated keys. Unlike the official tool it reports every failing line, with its line number in
// the file, instead of only the last message per key, and it never crashes: input that makes the
// official checker raise (a line without "metadata", a non-object record, ...) is reported as an
// error of that line and fails the log, which is the official verdict too.
//
// On top of the official rules, `advisories` flags what the official checker lets through but an
// MLPerf reviewer or the package checker would not (epoch events out of order, eval_accuracy for an
// epoch that never ran, events after run_stop, no seed, run_stop success without a target line).
// They are warnings unless CheckOptions::strict is set.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "logging/check_message.h"

namespace mrcnn::logging {

// The last round with Mask R-CNN: the ruleset of a log whose path names no round.
inline constexpr const char* kDefaultRuleset = "3.1.0";

// The training rulesets with Mask R-CNN rules that the check implements, oldest first: 1.0.0,
// 1.1.0, 2.0.0, 2.1.0, 3.0.0, 3.1.0.
const std::vector<std::string>& rulesets();
bool is_ruleset(std::string_view ruleset);

// The round a path names, as a ruleset: the deepest folder (or file) named like the public results
// repositories, "training_results_vX.Y" (any name ending in "_vX.Y", "-vX.Y" or being "vX.Y"),
// gives "X.Y.0" when that is one of rulesets(); "" when none does. Published logs carry no line
// that names their round (no key does, and free text misleads: logs of v3.0 print the paths of
// "mlperf-training-v2.0" scripts), so the tree's name is the evidence.
std::string ruleset_from_path(std::string_view path);

struct CheckOptions {
  // "" : the round the file's path names (ruleset_from_path), else kDefaultRuleset.
  std::string ruleset;
  bool werror = false;            // official --werror: repeated EXACTLY_ONE keys become errors
  bool strict = false;            // advisories become errors
  // Lines longer than this after the ":::MLLOG " token are refused (memory stays bounded).
  size_t max_record_bytes = size_t{64} << 20;
};

struct CheckReport {
  std::string file;
  bool readable = true;  // false: the file could not be read as a log (exit status 2)
  bool passed = false;
  std::string ruleset;         // the ruleset the log was checked against
  std::string ruleset_source;  // how it was chosen: "given", "path" (the file's path) or "default"
  std::string division;   // as logged ("" if absent)
  std::string benchmark;  // as logged ("" if absent)
  int64_t mllog_lines = 0;
  std::vector<CheckMessage> errors;      // decide the verdict
  std::vector<CheckMessage> warnings;    // official warnings (repeated keys) and advisories
};

// Checks one log file. Never throws for bad input; an unreadable file gives readable == false.
CheckReport check_log_file(const std::string& path, const CheckOptions& options = {});

// Checks log text already in memory; `name` is used in messages.
CheckReport check_log_text(std::string_view text, const std::string& name,
                           const CheckOptions& options = {});

// Human-readable report: one summary line, then one line per message.
std::string format_report(const CheckReport& report, bool show_warnings = true);

}  // namespace mrcnn::logging
