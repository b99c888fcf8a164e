// The MLPerf `:::MLLOG` emitter, line-for-line compatible with the reference Python emitter
// (mlperf_logging.mllog): same field order (namespace, time_ms, event_type, key, value, metadata),
// the same JSON text (see py_json.h), and metadata that always starts with the caller's
// {"file", "lineno"} taken from std::source_location, followed by the caller's own fields.
//
// Thread-safety: an MLLogger may be used from any number of threads at once (the asynchronous
// evaluator logs eval_accuracy from its own thread). Each line is encoded outside the lock and
// written whole with one write and a flush, so lines never interleave.
// Ranks: only the logger whose `rank` is 0 writes; the others encode nothing and cost nothing.
// Failures: logging never throws on the hot path; a line that cannot be written is reported once
// on stderr and the run goes on (the reference emitter behaves the same way).
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <mutex>
#include <source_location>
#include <string>
#include <string_view>

#include "logging/keys.h"
#include "logging/py_json.h"

namespace mrcnn::logging {

enum class EventType { kIntervalStart, kIntervalEnd, kPointInTime };

std::string_view event_type_name(EventType t);

// The event type MLPerf uses for a key: *_start -> INTERVAL_START, *_stop -> INTERVAL_END,
// anything else -> POINT_IN_TIME.
EventType event_type_for(std::string_view key);

// Pure formatter: ":::MLLOG {...}" without a trailing newline. `metadata` must be an object.
std::string encode(std::string_view ns, int64_t time_ms, EventType type, std::string_view key,
                   const Json& value, const Json& metadata);

// Milliseconds since the Unix epoch, from the system clock.
int64_t now_ms();

struct MLLoggerOptions {
  bool to_stdout = true;          // print lines on stdout
  std::string file_path;          // and/or append them to this file ("" = no file)
  bool truncate_file = false;     // start the file afresh instead of appending
  int rank = 0;                   // only rank 0 writes
  std::string default_namespace;  // mllog's default is ""
  std::function<int64_t()> clock = now_ms;  // injectable for tests
};

class MLLogger {
 public:
  explicit MLLogger(MLLoggerOptions options = {});
  ~MLLogger();
  MLLogger(const MLLogger&) = delete;
  MLLogger& operator=(const MLLogger&) = delete;

  // Logs `key` with the event type event_type_for(key). Extra metadata fields follow file/lineno;
  // a caller field named "file" or "lineno" replaces the automatic one (as in mllog).
  // Every call returns the time_ms it logged (0 on ranks that do not write).
  int64_t log(std::string_view key, const Json& value = nullptr, const Json& metadata = Json::object(),
           std::source_location where = std::source_location::current());
  // Explicit event types, as mllog's start/end/event.
  int64_t start(std::string_view key, const Json& value = nullptr, const Json& metadata = Json::object(),
             std::source_location where = std::source_location::current());
  int64_t end(std::string_view key, const Json& value = nullptr, const Json& metadata = Json::object(),
           std::source_location where = std::source_location::current());
  int64_t event(std::string_view key, const Json& value = nullptr, const Json& metadata = Json::object(),
             std::source_location where = std::source_location::current());

  bool enabled() const { return options_.rank == 0; }
  const std::string& file_path() const { return options_.file_path; }

 private:
  int64_t emit(EventType type, std::string_view key, const Json& value, const Json& metadata,
            const std::source_location& where);
  void write_line(const std::string& line);

  const MLLoggerOptions options_;  // constant after construction
  std::mutex mutex_;
  std::FILE* file_ = nullptr;      // guarded by mutex_
  bool reported_failure_ = false;  // guarded by mutex_
};

}  // namespace mrcnn::logging
