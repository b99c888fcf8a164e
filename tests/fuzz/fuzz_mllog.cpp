// The MLPerf log reader and compliance checker on arbitrary text. Invariants: the checker gives
// a report for any text (it never throws: a broken log is a failed report), and the report
// formats.
#include <string_view>

#include "logging/compliance.h"
#include "tests/fuzz/fuzz_common.h"

using namespace mrcnn;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const bool ok = fuzz::accepts([&] {
    const logging::CheckReport report = logging::check_log_text(text, "fuzz.log");
    (void)logging::format_report(report, true);
  });
  fuzz::check(ok, "check_log_text reports on any text instead of throwing");
  return 0;
}
