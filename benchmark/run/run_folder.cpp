#include "benchmark/run/run_folder.h"

#include <ctime>
#include <fstream>
#include <stdexcept>

namespace mrcnn::run {

namespace fs = std::filesystem;

namespace {

std::string utc_stamp() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char b[32];
  std::strftime(b, sizeof b, "%Y%m%dT%H%M%SZ", &tm);
  return b;
}

}  // namespace

RunFolder open_run_folder(const config::SystemConfig& c, bool resumed, bool create) {
  const fs::path root(c.run.output_dir);
  RunFolder f{root / (utc_stamp() + "-seed" + std::to_string(c.run.seed) + (resumed ? "-resumed" : ""))};
  if (!create) return f;
  fs::create_directories(f.dir);
  std::ofstream out(f.config());
  out << c.resolved.dump(2) << "\n";
  if (!out) throw std::runtime_error("cannot write " + f.config().string());
  std::error_code ec;
  fs::remove(root / "latest", ec);
  fs::create_directory_symlink(f.dir.filename(), root / "latest", ec);
  return f;
}

}  // namespace mrcnn::run
