// MLPerf Training compliance check for Mask R-CNN logs, ruleset 3.1.0 (closed and open divisions).
//
// The verdict is the official checker's (python -m mlperf_logging.compliance_checker --usage
// training --ruleset 3.1.0): the same rule files processed in the same order (common, then
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

struct CheckOptions {
  std::string ruleset = "3.1.0";  // the last round with Mask R-CNN; the only ruleset implemented
  bool werror = false;            // official --werror: repeated EXACTLY_ONE keys become errors
  bool strict = false;            // advisories become errors
  // Lines longer than this after the ":::MLLOG " token are refused (memory stays bounded).
  size_t max_record_bytes = size_t{64} << 20;
};

struct CheckReport {
  std::string file;
  bool readable = true;  // false: the file could not be read as a log (exit status 2)
  bool passed = false;
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
