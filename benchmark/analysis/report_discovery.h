// `report`'s discovery (report_discovery.cpp): the systems under the folders given, each once, and
// the error when a folder holds none.
#pragma once

#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace mrcnn::analysis {

// A folder given to `report` (or `forecast --measured`) that does not exist, is not a folder or
// holds no result; what() names it.
struct ReportError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

namespace report_detail {

// One system found under the folders given: a benchmark folder's result files (its name the
// <system> of <system>/maskrcnn), or the run folders `train --out DIR` leaves (named for DIR).
struct Found {
  std::filesystem::path folder;
  std::string source;  // the folder given that holds it
  std::vector<std::filesystem::path> runs;
  std::vector<std::string> problems;  // entries named like a result that are not one
  bool run_folders = false;
};

// Every system under `paths`, each once; throws ReportError naming a path that does not exist,
// is not a folder, or holds no result.
std::vector<Found> discover(const std::vector<std::string>& paths);

}  // namespace report_detail
}  // namespace mrcnn::analysis
