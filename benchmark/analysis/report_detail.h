// Internal to `report` (report.h): what its files share. Discovery finds the systems' folders
// (report_discovery.cpp), each run is read and measured on its own (report_runs.cpp), systems are
// scored, labelled and scaled (report.cpp) and written as a table and JSON (report_format.cpp;
// report_html.cpp draws the page).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "benchmark/analysis/report.h"

namespace mrcnn::analysis::report_detail {

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

// A result file or a run folder read, checked by the compliance check and measured.
RunSummary summarize_run(const std::filesystem::path& path);

}  // namespace mrcnn::analysis::report_detail
