// The system-file reader and --set. The input is a system file; its first line, when it starts
// with "--set ", is also applied as an override. Invariants: a file that loads gives a resolved
// config that loads again to the same resolved config (what a run's config.json promises).
#include <string>
#include <string_view>
#include <vector>

#include "benchmark/config/system_config.h"
#include "tests/fuzz/fuzz_common.h"

using namespace mrcnn;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> overrides;
  if (input.starts_with("--set ")) {
    const size_t eol = input.find('\n');
    overrides.emplace_back(input.substr(6, eol == std::string_view::npos ? std::string_view::npos : eol - 6));
  }
  const std::string path = fuzz::write_input(data, size, "-system.json");
  config::SystemConfig cfg;
  if (!fuzz::accepts([&] { cfg = config::load_system_config(path, overrides); })) return 0;
  fuzz::accepts([&] { (void)config::closed_division_violations(cfg); });
  const std::string text = cfg.resolved.dump(2);
  const std::string again_path = fuzz::write_input(reinterpret_cast<const uint8_t*>(text.data()), text.size(), "-resolved.json");
  config::SystemConfig again;
  fuzz::check(fuzz::accepts([&] { again = config::load_system_config(again_path); }), "a resolved config loads again");
  fuzz::check(again.resolved == cfg.resolved, "a resolved config loads to itself");
  return 0;
}
