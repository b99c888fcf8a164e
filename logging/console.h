// Human-facing console logging, kept apart from the MLPerf log: levels, a rank prefix, stderr
// output so stdout stays clean for :::MLLOG lines. Backed by spdlog, which this header does not
// include: LibTorch ships its own (newer) fmt headers, which must not meet spdlog's in one
// translation unit. Messages are formatted by the caller (strprintf below).
//
// Thread-safe: any thread may log at any time after setup_console (before it, messages go to
// stderr with the default settings).
#pragma once

#include <exception>
#include <string>
#include <string_view>

namespace mrcnn::logging {

enum class Level { kTrace, kDebug, kInfo, kWarn, kError, kOff };

struct ConsoleOptions {
  int rank = 0;
  int world_size = 1;
  Level level = Level::kInfo;
  bool all_ranks = false;  // by default ranks other than 0 log warnings and errors only
};

// Installs the process-wide console logger ("[12:00:01.123] [rank 0] [info] ..."). Safe to call
// again to change settings.
void setup_console(const ConsoleOptions& options = {});

// Parses "trace|debug|info|warn|error|off"; throws std::invalid_argument naming the bad value.
Level parse_level(std::string_view name);

void log(Level level, std::string_view message);
inline void debug(std::string_view m) { log(Level::kDebug, m); }
inline void info(std::string_view m) { log(Level::kInfo, m); }
inline void warn(std::string_view m) { log(Level::kWarn, m); }
inline void error(std::string_view m) { log(Level::kError, m); }

// The message of an exception for a person: LibTorch's c10::Error carries a C++ backtrace in
// what(); this returns its first line (the message and its source location) only.
std::string error_text(const std::exception& e);

// printf-style formatting into a std::string (format checked by the compiler).
std::string strprintf(const char* format, ...) __attribute__((format(printf, 1, 2)));

}  // namespace mrcnn::logging
