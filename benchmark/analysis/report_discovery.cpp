// report's discovery: the systems under the folders given (report_discovery.h).
#include <algorithm>
#include <regex>
#include <set>
#include <system_error>

#include "benchmark/analysis/report_discovery.h"

namespace mrcnn::analysis::report_detail {

namespace fs = std::filesystem;

namespace {

// The result files of a benchmark folder; an entry named like one that is not a file (a folder,
// a broken link) goes to `unreadable` when given.
std::vector<fs::path> result_files(const fs::path& folder, std::vector<std::string>* unreadable = nullptr) {
  static const std::regex kResult(R"(result_\d+\.txt)");
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(folder, ec)) {
    if (!std::regex_match(e.path().filename().string(), kResult)) continue;
    if (e.is_regular_file(ec)) out.push_back(e.path());
    else if (unreadable) unreadable->push_back(e.path().string() + ": not a result file (" + (e.is_directory(ec) ? "a folder" : "not a regular file") + "); not read");
  }
  std::sort(out.begin(), out.end());
  if (unreadable) std::sort(unreadable->begin(), unreadable->end());
  return out;
}

// The Mask R-CNN folders under `p`: `p` itself when it holds result files, else every folder
// named maskrcnn that holds them, reached through results/ wherever a folder has one (a submission
// or a public training_results checkout: <org>/results/<system>/maskrcnn). Other benchmarks'
// folders, run folders and hidden folders are not entered.
void find_benchmark_folders(const fs::path& p, int depth, std::vector<fs::path>& out) {
  std::error_code ec;
  if (!fs::is_directory(p, ec) || depth > 6) return;
  if (depth == 0 && !result_files(p).empty()) {
    out.push_back(p);
    return;
  }
  if (p.filename() == "maskrcnn" && depth > 0) {
    if (!result_files(p).empty()) out.push_back(p);
    return;
  }
  if (fs::is_directory(p / "results", ec)) return find_benchmark_folders(p / "results", depth + 1, out);
  std::vector<fs::path> subs;
  for (const auto& e : fs::directory_iterator(p, ec)) {
    const std::string name = e.path().filename().string();
    if (e.is_directory(ec) && name != "runs" && name.front() != '.') subs.push_back(e.path());
  }
  std::sort(subs.begin(), subs.end());
  for (const fs::path& s : subs) find_benchmark_folders(s, depth + 1, out);
}

// The run folders `train --out DIR` leaves: DIR itself when it is one, else each folder in it that
// is one (not the `latest` link to one of them).
std::vector<fs::path> run_folders(const fs::path& p) {
  std::error_code ec;
  if (fs::is_regular_file(p / "mlperf_log.txt", ec)) return {p};
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(p, ec))
    if (e.is_directory(ec) && !e.is_symlink(ec) && fs::is_regular_file(e.path() / "mlperf_log.txt", ec)) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::vector<Found> discover(const std::vector<std::string>& paths) {
  std::vector<Found> out;
  std::set<std::string> seen;
  for (const std::string& p : paths) {
    std::error_code ec;
    if (!fs::exists(p, ec)) throw ReportError(p + ": does not exist");
    if (!fs::is_directory(p, ec)) throw ReportError(p + ": not a folder (give a results tree or a submission folder)");
    fs::path root = fs::path(p).lexically_normal();  // "results/sysA/maskrcnn/" names maskrcnn, not ""
    if (!root.has_filename() && root.has_parent_path()) root = root.parent_path();
    std::vector<fs::path> folders;
    find_benchmark_folders(root, 0, folders);
    if (folders.empty()) {
      if (std::vector<fs::path> runs = run_folders(root); !runs.empty()) {
        if (seen.insert(fs::weakly_canonical(root, ec).string()).second)
          out.push_back({.folder = root, .source = root.string(), .runs = std::move(runs), .run_folders = true});
        continue;
      }
      throw ReportError(p + ": no results found (expected <system>/maskrcnn/result_N.txt, as run_and_time.sh files them, "
                        "a submission folder with results/, or run folders as `train --out` leaves them)");
    }
    for (const fs::path& f : folders) {
      if (!seen.insert(fs::weakly_canonical(f, ec).string()).second) continue;
      Found found{.folder = f, .source = root.string()};
      found.runs = result_files(f, &found.problems);
      out.push_back(std::move(found));
    }
  }
  return out;
}

}  // namespace mrcnn::analysis::report_detail
