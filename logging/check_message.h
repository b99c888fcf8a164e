// One message of the compliance check: the line it is about, the key, the words. Its own header
// so that the log reader (log_reader.h), which reports unreadable lines with it, sits below the
// check (compliance.h) that reads through it.
#pragma once

#include <cstdint>
#include <string>

namespace mrcnn::logging {

struct CheckMessage {
  int64_t line = 0;   // 1-based line in the file; 0 when the message is about the whole log
  std::string key;    // the log key concerned ("" when none)
  std::string text;
};

}  // namespace mrcnn::logging
