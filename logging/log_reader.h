// Reading an MLPerf log the way the official checker's parser (mlperf_logging.compliance_checker)
// does: Latin-1 text with universal newlines; a line containing ":::MLLOG " keeps what follows the
// token's last occurrence, stripped of Python whitespace, parsed as JSON with json.loads
// semantics. Unlike the official parser, a bad record never crashes: it becomes an error of its
// line. Used by the compliance check and by benchmark/analysis (the run reader of report and audit).
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "logging/check_message.h"
#include "logging/py_json.h"

namespace mrcnn::logging::detail {

// One line holding the token, as read.
struct RawRecord {
  int64_t file_line;  // 1-based
  std::string text;   // after the last token, not yet stripped
  bool too_long;      // longer than the limit after the token: `text` is empty
};

struct ReadStats {
  int64_t nul_bytes = 0;
  int64_t lines = 0;
};

// The records of a log and what reading it saw.
struct RawLog {
  std::vector<RawRecord> records;
  ReadStats stats;
};

// A file that cannot be read as text (missing, a folder, an I/O error); what() is the reason.
struct LogReadError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Records longer than `max_record_bytes` after the token are kept as too_long, without their text.
RawLog read_log_text(std::string_view text, size_t max_record_bytes);
RawLog read_log_file(const std::string& path, size_t max_record_bytes);  // throws LogReadError

// A record parsed: what the rules see of it.
struct LogLine {
  int64_t file_line;
  std::string text;  // the stripped JSON text
  double timestamp;  // float(time_ms)
  Json key;
  Json value;
  Json metadata;
  std::string key_str() const { return key.is_string() ? key.get<std::string>() : std::string(); }
};

// The records that parse into log lines, and an error for each that does not (too long, empty,
// invalid JSON, not an object, lacking a field the official checker reads, time_ms not a number).
struct ParsedLog {
  std::vector<LogLine> lines;
  std::vector<CheckMessage> errors;
};
ParsedLog parse_records(const std::vector<RawRecord>& records, size_t max_record_bytes);

}  // namespace mrcnn::logging::detail
