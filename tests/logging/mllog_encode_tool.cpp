// Reads one JSON object per line from stdin -- {"namespace", "time_ms", "event_type", "key",
// "value", "metadata"} -- and prints mrcnn::logging::encode() of it, one line each. The Python
// parity check feeds the same records to mllog's _encode_log and compares the lines.
#include <iostream>
#include <string>

#include "logging/mllog.h"

int main() {
  using namespace mrcnn::logging;
  std::string line;
  while (std::getline(std::cin, line)) {
    const Json rec = py_json_loads(line);
    const std::string et = rec.at("event_type").get<std::string>();
    const EventType type = et == "INTERVAL_START" ? EventType::kIntervalStart
                           : et == "INTERVAL_END" ? EventType::kIntervalEnd
                                                  : EventType::kPointInTime;
    std::cout << encode(rec.at("namespace").get<std::string>(), rec.at("time_ms").get<int64_t>(),
                        type, rec.at("key").get<std::string>(), rec.at("value"), rec.at("metadata"))
              << "\n";
  }
  return 0;
}
