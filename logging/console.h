// Human-facing console logging (spdlog), kept apart from the MLPerf log: levels, a rank prefix,
// stderr output so stdout stays clean for :::MLLOG lines.
#pragma once

#include <memory>
#include <string_view>

#include <spdlog/spdlog.h>

namespace mrcnn::logging {

struct ConsoleOptions {
  int rank = 0;
  int world_size = 1;
  spdlog::level::level_enum level = spdlog::level::info;
  bool all_ranks = false;  // by default ranks other than 0 log warnings and errors only
};

// Installs the process-wide console logger ("[12:00:01.123] [rank 0] [info] ...") as spdlog's
// default, so that spdlog::info(...) anywhere uses it. Safe to call again to change settings.
void setup_console(const ConsoleOptions& options = {});

// Parses "trace|debug|info|warn|error|off"; throws std::invalid_argument naming the bad value.
spdlog::level::level_enum parse_level(std::string_view name);

}  // namespace mrcnn::logging
