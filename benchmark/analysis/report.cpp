#include "benchmark/analysis/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "logging/compliance.h"

namespace mrcnn::analysis {

namespace fs = std::filesystem;

namespace {

std::vector<fs::path> result_files(const fs::path& folder) {
  static const std::regex kResult(R"(result_\d+\.txt)");
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(folder, ec))
    if (e.is_regular_file(ec) && std::regex_match(e.path().filename().string(), kResult)) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// The maskrcnn folders under `p` (see report.h for the layouts).
void find_benchmark_folders(const fs::path& p, int depth, std::vector<fs::path>& out) {
  std::error_code ec;
  if (!fs::is_directory(p, ec) || depth > 3) return;
  if (!result_files(p).empty()) {
    out.push_back(p);
    return;
  }
  if (fs::is_directory(p / "maskrcnn", ec) && !result_files(p / "maskrcnn").empty()) {
    out.push_back(p / "maskrcnn");
    return;
  }
  if (fs::is_directory(p / "results", ec)) return find_benchmark_folders(p / "results", depth + 1, out);
  std::vector<fs::path> subs;
  for (const auto& e : fs::directory_iterator(p, ec))
    if (e.is_directory(ec) && e.path().filename() != "runs") subs.push_back(e.path());
  std::sort(subs.begin(), subs.end());
  for (const fs::path& s : subs) find_benchmark_folders(s, depth + 1, out);
}

Json read_json_file(const fs::path& p) {
  std::ifstream in(p);
  if (!in) return nullptr;
  std::stringstream s;
  s << in.rdbuf();
  Json j = Json::parse(s.str(), nullptr, false);
  return j.is_discarded() ? Json(nullptr) : j;
}

int64_t as_count(const Json& desc, const char* key, int64_t fallback) {
  if (!desc.is_object() || !desc.contains(key)) return fallback;
  const Json& v = desc[key];
  try {
    if (v.is_number()) return v.get<int64_t>();
    if (v.is_string()) return std::stoll(v.get<std::string>());
  } catch (const std::exception&) {
  }
  return fallback;
}

// The system description: a kept run's config.json, the submission's systems/<name>.json, or the
// project's systems/<name>.json.
Json system_description(const SystemReport& s, const ReportOptions& options) {
  for (const RunSummary& r : s.runs)
    if (r.run.config.is_object() && r.run.config.contains("system")) return r.run.config["system"];
  const fs::path org = fs::path(s.folder).parent_path().parent_path().parent_path();
  Json j = read_json_file(org / "systems" / (s.name + ".json"));
  if (j.is_object()) return j;
  j = read_json_file(fs::path(options.systems_dir) / (s.name + ".json"));
  if (j.is_object() && j.contains("system")) return j["system"];
  return nullptr;
}

constexpr double TimeBreakdown::*kTimeParts[] = {&TimeBreakdown::init, &TimeBreakdown::training,
                                                  &TimeBreakdown::eval_inference, &TimeBreakdown::final_scoring_wait,
                                                  &TimeBreakdown::idle, &TimeBreakdown::scoring_total};

TimeBreakdown time_of(const RunRecord& r) {
  TimeBreakdown t;
  if (r.init_start_ms && r.run_start_ms) t.init = (*r.run_start_ms - *r.init_start_ms) / 1000;
  // The validation inference of an epoch runs from eval_start until training resumes (the next
  // epoch_start); eval_stop comes when the asynchronous scorer is done, which may be later.
  double last_end = r.run_start_ms.value_or(0);
  for (size_t i = 0; i < r.epochs.size(); ++i) {
    const EpochRecord& e = r.epochs[i];
    if (e.start_ms && e.stop_ms) t.training += (*e.stop_ms - *e.start_ms) / 1000, last_end = std::max(last_end, *e.stop_ms);
    if (e.eval_start_ms && e.eval_stop_ms) {
      double end = *e.eval_stop_ms;
      if (i + 1 < r.epochs.size() && r.epochs[i + 1].start_ms) end = std::min(end, *r.epochs[i + 1].start_ms);
      t.eval_inference += std::max(0.0, end - *e.eval_start_ms) / 1000;
      last_end = std::max(last_end, end);
    }
    if (e.scoring_seconds) t.scoring_total += *e.scoring_seconds;
  }
  if (const auto run = r.run_seconds()) {
    if (r.run_stop_ms) t.final_scoring_wait = std::max(0.0, (*r.run_stop_ms - last_end) / 1000);
    t.idle = std::max(0.0, *run - t.training - t.eval_inference - t.final_scoring_wait);
  }
  return t;
}

RunSummary summarize_run(const fs::path& file) {
  RunSummary s{.file = file.string(), .run = read_run(file.string())};
  const logging::CheckReport check = logging::check_log_file(file.string());
  s.compliant = check.readable && check.passed;
  if (!s.compliant)
    s.check_error = check.errors.empty() ? "not readable" : "line " + std::to_string(check.errors.front().line) + ": " + check.errors.front().text;
  if (const auto sec = s.run.run_seconds()) s.minutes = *sec / 60;
  s.epochs_to_converge = s.run.converged_epoch();
  s.time = time_of(s.run);
  int64_t trained = 0;
  for (const EpochRecord& e : s.run.epochs) trained += (e.start_ms && e.stop_ms) ? 1 : 0;
  if (s.run.train_samples && s.time.training > 0)
    s.images_per_s = static_cast<double>(*s.run.train_samples * trained) / s.time.training;
  return s;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

SystemReport report_system(const fs::path& folder, const ReportOptions& options) {
  SystemReport s{.name = folder.parent_path().filename().string(), .folder = folder.string()};
  for (const fs::path& f : result_files(folder)) s.runs.push_back(summarize_run(f));
  if (!s.runs.empty()) s.division = s.runs.front().run.division, s.org = s.runs.front().run.org;
  const Json desc = system_description(s, options);
  s.nodes = std::max<int64_t>(1, as_count(desc, "number_of_nodes", 1));
  const int64_t per_node = as_count(desc, "accelerators_per_node", 0);
  s.has_accelerators = per_node > 0;
  s.accelerators = s.nodes * std::max<int64_t>(per_node, 1);
  if (desc.is_object())
    s.accelerator_model = s.has_accelerators ? desc.value("accelerator_model_name", "") : desc.value("host_processor_model_name", "");
  for (const RunSummary& r : s.runs)
    if (r.run.config.is_object() && r.run.config.contains("run")) {
      s.target_bbox = r.run.config["run"].value("target_bbox", s.target_bbox);
      s.target_segm = r.run.config["run"].value("target_segm", s.target_segm);
      break;
    }

  // The score, as result_summarizer computes it.
  std::vector<double> scores;
  for (const RunSummary& r : s.runs) {
    if (r.compliant && r.minutes) scores.push_back(*r.minutes);
    else ++s.dropped;
  }
  const Json scaling = read_json_file(folder / "scaling.json");
  if (scaling.is_object() && scaling.contains("scaling_factor") && scaling["scaling_factor"].is_number())
    s.scaling_factor = scaling["scaling_factor"].get<double>();
  std::optional<double> olympic;
  if (s.dropped > 1) {
    s.score_note = "no score: " + std::to_string(s.dropped) + " runs fail the compliance check (at most 1 may be dropped)";
  } else {
    std::sort(scores.begin(), scores.end());
    const size_t hi = scores.size() - std::min<size_t>(scores.size(), static_cast<size_t>(1 - s.dropped));
    if (hi > 1) {
      double sum = 0;
      for (size_t i = 1; i < hi; ++i) sum += scores[i];
      olympic = sum / static_cast<double>(hi - 1);
      s.score_minutes = *olympic * s.scaling_factor;
      if (s.dropped == 1) s.score_note = "one run dropped (counted as the slowest)";
    } else {
      s.score_note = "no score: too few runs";
    }
    if (s.runs.size() != 5) s.score_note += std::string(s.score_note.empty() ? "" : "; ") + std::to_string(s.runs.size()) + " runs (a submission has 5)";
  }

  std::vector<RcpRun> rcp_runs;
  std::vector<double> epochs, speeds;
  for (const RunSummary& r : s.runs) {
    rcp_runs.push_back({.converged = r.epochs_to_converge.has_value(), .epochs = r.epochs_to_converge.value_or(0),
                        .global_batch_size = r.run.global_batch_size.value_or(-1)});
    if (r.epochs_to_converge) epochs.push_back(*r.epochs_to_converge);
    if (r.images_per_s) speeds.push_back(*r.images_per_s / static_cast<double>(s.accelerators));
    for (auto part : kTimeParts) s.mean_time.*part += r.time.*part / static_cast<double>(s.runs.size());
  }
  s.rcp = rcp_check(rcp_runs);
  // Per-stage profile: the mean of every profiled run's per-step milliseconds, stage by stage.
  std::vector<std::string> order;
  std::map<std::string, std::pair<int, double>> ms;  // stage -> depth, sum of per-step ms
  double step_ms = 0;
  for (const RunSummary& r : s.runs) {
    const Json& p = r.run.profile;
    if (!p.is_object() || !p.contains("stages") || !p["stages"].is_array()) continue;
    ++s.profiled_runs;
    step_ms += p.value("step_ms", 0.0);
    for (const Json& st : p["stages"]) {
      const std::string name = st.value("stage", "");
      if (!ms.contains(name)) order.push_back(name), ms[name].first = st.value("depth", 0);
      ms[name].second += st.value("per_step_ms", 0.0);
    }
  }
  for (const std::string& name : order) {
    const double per_step = ms[name].second / s.profiled_runs;
    s.stages.push_back({{"stage", name}, {"depth", ms[name].first}, {"per_step_ms", per_step},
                        {"share", step_ms > 0 ? per_step / (step_ms / s.profiled_runs) : 0.0}});
  }
  if (s.division == "closed" && s.rcp.passed && olympic) s.rcp_normalized_minutes = *olympic * s.rcp.norm_factor;
  if (!epochs.empty()) {
    double sum = 0;
    for (double e : epochs) sum += e;
    s.mean_epochs_to_converge = sum / static_cast<double>(epochs.size());
  }
  if (!speeds.empty()) s.images_per_s_per_accelerator = median(speeds);
  auto price = options.price_per_node_hour.find(s.name);
  if (price == options.price_per_node_hour.end()) price = options.price_per_node_hour.find("");
  if (price != options.price_per_node_hour.end()) {
    s.price_per_node_hour = price->second;
    if (s.score_minutes) s.cost_per_result = *s.score_minutes / 60 * price->second * static_cast<double>(s.nodes);
  }
  return s;
}

std::string opt(const std::optional<double>& v, const char* format) {
  if (!v) return "-";
  char b[64];
  std::snprintf(b, sizeof b, format, *v);
  return b;
}

Json opt_json(const std::optional<double>& v) { return v ? Json(*v) : Json(nullptr); }

Json time_json(const TimeBreakdown& t) {
  return Json{{"init_s", t.init}, {"training_s", t.training}, {"eval_inference_s", t.eval_inference},
              {"final_scoring_wait_s", t.final_scoring_wait}, {"idle_s", t.idle}, {"scoring_total_s", t.scoring_total}};
}

}  // namespace

std::vector<SystemReport> build_report(const std::vector<std::string>& paths, const ReportOptions& options) {
  std::vector<SystemReport> out;
  std::set<std::string> seen;
  for (const std::string& p : paths) {
    std::error_code ec;
    if (!fs::exists(p, ec)) throw ReportError(p + ": does not exist");
    if (!fs::is_directory(p, ec)) throw ReportError(p + ": not a folder (give a results tree or a submission folder)");
    std::vector<fs::path> folders;
    find_benchmark_folders(p, 0, folders);
    if (folders.empty())
      throw ReportError(p + ": no results found (expected <system>/maskrcnn/result_N.txt, as run_and_time.sh files them, "
                        "or a submission folder with results/)");
    for (const fs::path& f : folders) {
      const std::string key = fs::weakly_canonical(f, ec).string();
      if (seen.insert(key).second) out.push_back(report_system(f, options));
    }
  }
  return out;
}

std::string format_report_table(const std::vector<SystemReport>& systems) {
  std::ostringstream o;
  char line[512];
  std::snprintf(line, sizeof line, "%-22s %-8s %4s %7s %11s %-28s %13s %12s %9s\n", "system", "division", "runs",
                "dropped", "score (min)", "RCP check (3.1.0)", "epochs (RCP)", "img/s/accel", "cost");
  o << line;
  for (const SystemReport& s : systems) {
    const std::string rcp = std::string(s.rcp.passed ? "pass" : "FAIL") + ": " + s.rcp.message;
    const std::string epochs = opt(s.mean_epochs_to_converge, "%.2f") + " (" + (s.rcp.has_rcp ? opt(s.rcp.rcp.mean, "%.2f") : "-") + ")";
    std::snprintf(line, sizeof line, "%-22s %-8s %4zu %7d %11s %-28.28s %13s %12s %9s\n", s.name.c_str(),
                  s.division.c_str(), s.runs.size(), s.dropped, opt(s.score_minutes, "%.4f").c_str(), rcp.c_str(),
                  epochs.c_str(), opt(s.images_per_s_per_accelerator, "%.2f").c_str(),
                  opt(s.cost_per_result, "%.2f").c_str());
    o << line;
  }
  for (const SystemReport& s : systems) {
    o << "\n" << s.name << " (" << s.folder << "): " << s.accelerators << " "
      << (s.has_accelerators ? "accelerator(s)" : "host processor(s), no accelerator")
      << (s.accelerator_model.empty() ? "" : " [" + s.accelerator_model + "]") << "\n";
    if (!s.score_note.empty()) o << "  score: " << s.score_note << "\n";
    if (s.scaling_factor != 1) o << "  score includes scaling.json's factor " << s.scaling_factor << "\n";
    o << "  RCP: " << s.rcp.message << (s.rcp.passed ? " (pass)" : " (FAIL)");
    if (s.rcp.has_rcp)
      o << "; submission mean " << opt(s.rcp.submission_mean, "%.3f") << " epochs, RCP mean " << opt(s.rcp.rcp.mean, "%.3f")
        << ", minimum acceptable " << opt(s.rcp.rcp.mean / s.rcp.rcp.max_speedup, "%.3f") << " (global batch "
        << s.rcp.rcp.global_batch_size << (s.rcp.rcp.interpolated ? ", interpolated" : "") << ")";
    o << (s.division == "closed" ? "" : "; informative only: the RCP check applies to the closed division") << "\n";
    if (s.rcp_normalized_minutes) o << "  RCP-normalized score: " << opt(s.rcp_normalized_minutes, "%.4f") << " min\n";
    const TimeBreakdown& t = s.mean_time;
    std::snprintf(line, sizeof line,
                  "  time per run (mean s): init %.2f | training %.2f | eval inference %.2f | wait for last score %.2f "
                  "| idle %.2f   (COCO scoring %.2f, overlapped)\n",
                  t.init, t.training, t.eval_inference, t.final_scoring_wait, t.idle, t.scoring_total);
    o << line;
    if (s.profiled_runs > 0) {
      o << "  per-stage time of a training step (train --profile, mean of " << s.profiled_runs << " run(s)):\n";
      for (const Json& st : s.stages) {
        std::snprintf(line, sizeof line, "    %*s%-16s %9.2f ms %6.1f %%\n", 2 * st["depth"].get<int>(), "",
                      st["stage"].get<std::string>().c_str(), st["per_step_ms"].get<double>(), 100 * st["share"].get<double>());
        o << line;
      }
    }
    for (const RunSummary& r : s.runs) {
      std::snprintf(line, sizeof line, "  %-14s %-8s %10s min  epochs %-6s  %10s img/s  %s\n",
                    fs::path(r.file).filename().c_str(), r.run.status.empty() ? "-" : r.run.status.c_str(),
                    opt(r.minutes, "%.4f").c_str(), opt(r.epochs_to_converge, "%.0f").c_str(),
                    opt(r.images_per_s, "%.2f").c_str(), r.compliant ? "compliant" : ("NOT compliant: " + r.check_error).c_str());
      o << line;
    }
  }
  return o.str();
}

Json report_json(const std::vector<SystemReport>& systems) {
  Json out{{"ruleset", "3.1.0"}, {"systems", Json::array()}};
  for (const SystemReport& s : systems) {
    Json runs = Json::array();
    for (const RunSummary& r : s.runs) {
      Json acc = Json::array();
      for (const EpochRecord& e : r.run.epochs)
        if (e.bbox && e.accuracy_ms && r.run.run_start_ms)
          acc.push_back({{"epoch", e.epoch}, {"minutes", (*e.accuracy_ms - *r.run.run_start_ms) / 60000},
                         {"bbox", *e.bbox}, {"segm", e.segm ? Json(*e.segm) : Json(nullptr)}});
      runs.push_back({{"file", r.file}, {"status", r.run.status}, {"seed", r.run.seed ? Json(*r.run.seed) : Json(nullptr)},
                      {"compliant", r.compliant}, {"check_error", r.check_error}, {"minutes", opt_json(r.minutes)},
                      {"epochs_to_converge", opt_json(r.epochs_to_converge)}, {"images_per_s", opt_json(r.images_per_s)},
                      {"time", time_json(r.time)}, {"accuracy", acc}});
    }
    out["systems"].push_back(
        {{"system", s.name}, {"folder", s.folder}, {"division", s.division}, {"org", s.org},
         {"nodes", s.nodes}, {"accelerators", s.accelerators}, {"has_accelerators", s.has_accelerators},
         {"accelerator_model", s.accelerator_model}, {"target_bbox", s.target_bbox}, {"target_segm", s.target_segm},
         {"runs_count", s.runs.size()}, {"dropped", s.dropped}, {"score_minutes", opt_json(s.score_minutes)},
         {"scaling_factor", s.scaling_factor}, {"score_note", s.score_note},
         {"rcp", {{"passed", s.rcp.passed}, {"message", s.rcp.message}, {"norm_factor", s.rcp.norm_factor},
                  {"submission_mean_epochs", s.rcp.has_rcp ? Json(s.rcp.submission_mean) : Json(nullptr)},
                  {"rcp_mean_epochs", s.rcp.has_rcp ? Json(s.rcp.rcp.mean) : Json(nullptr)},
                  {"min_acceptable_mean_epochs", s.rcp.has_rcp ? Json(s.rcp.rcp.mean / s.rcp.rcp.max_speedup) : Json(nullptr)},
                  {"rcp_global_batch_size", s.rcp.has_rcp ? Json(s.rcp.rcp.global_batch_size) : Json(nullptr)},
                  {"applies", s.division == "closed"}}},
         {"rcp_normalized_minutes", opt_json(s.rcp_normalized_minutes)},
         {"mean_epochs_to_converge", opt_json(s.mean_epochs_to_converge)},
         {"images_per_s_per_accelerator", opt_json(s.images_per_s_per_accelerator)},
         {"mean_time", time_json(s.mean_time)}, {"price_per_node_hour", opt_json(s.price_per_node_hour)},
         {"cost_per_result", opt_json(s.cost_per_result)}, {"profiled_runs", s.profiled_runs},
         {"stages", s.stages}, {"runs", runs}});
  }
  return out;
}

}  // namespace mrcnn::analysis
