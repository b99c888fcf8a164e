#include "benchmark/analysis/report.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <tuple>

#include "logging/compliance.h"

namespace mrcnn::analysis {

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

Json read_json_file(const fs::path& p) {
  std::ifstream in(p);
  if (!in) return nullptr;
  std::stringstream s;
  s << in.rdbuf();
  Json j = Json::parse(s.str(), nullptr, false);
  return j.is_discarded() ? Json(nullptr) : j;
}

// The system description: a kept run's config.json, the submission's systems/<name>.json, or the
// project's systems/<name>.json (system_description.h).
SystemDescription system_description(const SystemReport& s, const ReportOptions& options) {
  for (const RunSummary& r : s.runs)
    if (r.run.config.is_object() && r.run.config.contains("system"))
      return describe(r.run.config["system"], r.run.config_path + " (\"system\")");
  const fs::path org = fs::path(s.folder).parent_path().parent_path().parent_path();
  return read_description({{(org / "systems" / (s.name + ".json")).string(), false},
                           {(fs::path(options.systems_dir) / (s.name + ".json")).string(), true}});
}

constexpr double TimeBreakdown::*kTimeParts[] = {&TimeBreakdown::init, &TimeBreakdown::training,
                                                  &TimeBreakdown::eval_inference, &TimeBreakdown::final_scoring_wait,
                                                  &TimeBreakdown::idle};

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
    if (e.scoring_seconds) t.scoring_total = t.scoring_total.value_or(0) + *e.scoring_seconds;
  }
  if (const auto run = r.run_seconds()) {
    if (r.run_stop_ms) t.final_scoring_wait = std::max(0.0, (*r.run_stop_ms - last_end) / 1000);
    t.idle = std::max(0.0, *run - t.training - t.eval_inference - t.final_scoring_wait);
  }
  return t;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// metrics.jsonl's steps x the global batch in each epoch the log trained (epoch_start and
// epoch_stop), in epoch order, each step counted once (a resumed run's file repeats steps); empty
// without kept steps.
std::vector<int64_t> images_stepped(const RunRecord& r) {
  if (r.steps.empty() || !r.global_batch_size || *r.global_batch_size <= 0) return {};
  std::map<int64_t, std::set<int64_t>> steps;
  for (const StepRecord& s : r.steps) steps[s.epoch].insert(s.step);
  std::vector<int64_t> out;
  for (const auto& [epoch, ids] : steps)
    if (const EpochRecord* e = r.epoch(epoch); e && e->start_ms && e->stop_ms)
      out.push_back(static_cast<int64_t>(ids.size()) * *r.global_batch_size);
  return out;
}

// train_samples against the evidence used (see Throughput in report.h).
void check_train_samples(const RunRecord& r, const std::vector<int64_t>& stepped, double per_epoch_scale, Throughput& t) {
  if (!r.train_samples || *r.train_samples <= 0 || !t.images_per_s || t.source == kSourceTrainSamples) return;
  const auto samples = static_cast<double>(*r.train_samples);
  if (stepped.size() > 1) {  // every epoch but the last is whole: the run may stop inside the last one
    double whole = 0;
    bool off = false;
    for (size_t i = 0; i + 1 < stepped.size(); ++i) {
      whole += static_cast<double>(stepped[i]) / static_cast<double>(stepped.size() - 1);
      off = off || std::abs(stepped[i] - *r.train_samples) >= *r.global_batch_size;
    }
    if (!off) return;
    t.train_samples_ratio = samples / whole;
    t.note = "train_samples " + std::to_string(*r.train_samples) + " is not the " + format_number(whole, "%.0f") +
             " images an epoch that metrics.jsonl's steps x global_batch_size cover: not used";
  } else if (stepped.empty() && std::abs(samples * per_epoch_scale / *t.images_per_s - 1) > 0.1) {
    t.train_samples_ratio = samples * per_epoch_scale / *t.images_per_s;
    t.note = "train_samples " + std::to_string(*r.train_samples) + " gives " +
             format_number(samples * per_epoch_scale, "%.1f") + " images/s, " +
             format_number(*t.train_samples_ratio, "%.2f") + "x the " + format_number(*t.images_per_s, "%.1f") +
             " from the " + t.source + ": not used";
  }
}

// See Throughput in report.h.
Throughput throughput_of(const RunRecord& r, double training_s, int64_t epochs) {
  Throughput t;
  if (!r.throughput.empty()) t.images_per_s = median(r.throughput), t.source = kSourceThroughputEvents;
  if (!(training_s > 0) || epochs <= 0) return t;
  const double scale = static_cast<double>(epochs) / training_s;  // images an epoch -> images/s
  const std::vector<int64_t> stepped = images_stepped(r);
  const bool coco = r.division == "closed" || r.eval_samples == kCocoValImages;
  if (!t.images_per_s && !stepped.empty()) {
    double images = 0;
    for (int64_t n : stepped) images += static_cast<double>(n);
    t.images_per_s = images / training_s, t.source = kSourceSteps;
  } else if (!t.images_per_s && coco) {
    t.images_per_s = static_cast<double>(kCocoTrainImages) * scale, t.source = kSourceCocoEpochs;
  } else if (!t.images_per_s && r.train_samples && *r.train_samples > 0) {
    t.images_per_s = static_cast<double>(*r.train_samples) * scale, t.source = kSourceTrainSamples;
  }
  check_train_samples(r, stepped, scale, t);
  if (t.source == kSourceThroughputEvents && coco && stepped.empty()) {
    // Events that are not the system's images/s (per device, say) disagree with the epochs' count.
    const double from_epochs = static_cast<double>(kCocoTrainImages) * scale;
    if (std::abs(from_epochs / *t.images_per_s - 1) > 0.1) {
      t.events_ratio = from_epochs / *t.images_per_s;
      t.note += std::string(t.note.empty() ? "" : "; ") + "the throughput events' " + format_number(*t.images_per_s, "%.1f") +
                " images/s disagree with the epochs x 117266's " + format_number(from_epochs, "%.1f");
    }
  }
  return t;
}

// A result file, or a run folder (its mlperf_log.txt the file checked and named).
RunSummary summarize_run(const fs::path& path) {
  std::error_code ec;
  const fs::path file = fs::is_directory(path, ec) ? path / "mlperf_log.txt" : path;
  RunSummary s{.file = file.string(), .run = read_run(path.string())};
  const logging::CheckReport check = logging::check_log_file(file.string());
  s.compliant = check.readable && check.passed;
  if (!s.compliant)
    s.check_error = check.errors.empty() ? "not readable" : "line " + std::to_string(check.errors.front().line) + ": " + check.errors.front().text;
  if (const auto sec = s.run.run_seconds()) s.minutes = *sec / 60;
  s.epochs_to_converge = s.run.converged_epoch();
  s.time = time_of(s.run);
  int64_t trained = 0;
  for (const EpochRecord& e : s.run.epochs) trained += (e.start_ms && e.stop_ms) ? 1 : 0;
  s.throughput = throughput_of(s.run, s.time.training, trained);
  return s;
}

// Who and what: the description's counts and names, the logs' division and submitter, and the
// targets a kept run's configuration set.
void describe_system(SystemReport& s, const ReportOptions& options) {
  if (!s.runs.empty()) s.division = s.runs.front().run.division, s.org = s.runs.front().run.org;
  s.description = system_description(s, options);
  const SystemDescription& d = s.description;
  s.described = d.ok();
  if (s.described) {
    s.nodes = d.nodes;
    s.has_accelerators = d.accelerators_per_node > 0;
    s.accelerators = s.nodes * std::max<int64_t>(d.accelerators_per_node, 1);  // one host a node without accelerators
    s.accelerator_model = s.has_accelerators ? d.accelerator_model : d.host_processor_model;
  } else {
    s.problems.insert(s.problems.begin(), d.problem + ": nodes, accelerators and every figure that needs them unknown");
  }
  s.framework = d.framework;
  s.submitter = d.submitter;
  if (s.submitter.empty()) s.submitter = s.org;
  for (const RunSummary& r : s.runs)
    if (r.run.config.is_object() && r.run.config.contains("run")) {
      s.target_bbox = r.run.config["run"].value("target_bbox", s.target_bbox);
      s.target_segm = r.run.config["run"].value("target_segm", s.target_segm);
      break;
    }
}

// The score, as result_summarizer computes it; returns the olympic mean before scaling.json.
std::optional<double> score_system(SystemReport& s) {
  std::vector<double> scores;
  for (const RunSummary& r : s.runs) {
    if (r.compliant && r.minutes) scores.push_back(*r.minutes);
    else ++s.dropped;
  }
  const Json scaling = read_json_file(fs::path(s.folder) / "scaling.json");
  if (scaling.is_object() && scaling.contains("scaling_factor") && scaling["scaling_factor"].is_number())
    s.scaling_factor = scaling["scaling_factor"].get<double>();
  std::optional<double> olympic;
  if (s.dropped > 1) {
    s.score_note = "no score: " + std::to_string(s.dropped) + " runs fail the compliance check (at most 1 may be dropped)";
    return olympic;
  }
  std::sort(scores.begin(), scores.end());
  const size_t hi = scores.size() - std::min<size_t>(scores.size(), static_cast<size_t>(1 - s.dropped));
  if (hi > 1) {
    double sum = 0;
    for (size_t i = 1; i < hi; ++i) sum += scores[i];
    olympic = sum / static_cast<double>(hi - 1);
    s.score_minutes = *olympic * s.scaling_factor;
    if (s.described) s.accelerator_hours = *s.score_minutes / 60 * static_cast<double>(s.accelerators);
    if (s.dropped == 1) s.score_note = "one run dropped (counted as the slowest)";
  } else {
    s.score_note = "no score: too few runs";
  }
  if (s.runs.size() != 5) s.score_note += std::string(s.score_note.empty() ? "" : "; ") + std::to_string(s.runs.size()) + " runs (a submission has 5)";
  return olympic;
}

// Per-stage profile: the mean of every profiled run's per-step milliseconds, stage by stage.
void profile_stages(SystemReport& s) {
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
}

// images/s per accelerator (the runs' median), the sources it came from and train_samples' note.
void summarize_speed(SystemReport& s) {
  std::vector<double> speeds, ratios, events;
  std::vector<std::string> sources;
  int disagreeing = 0;
  std::string first;
  for (const RunSummary& r : s.runs) {
    const Throughput& t = r.throughput;
    if (t.images_per_s && s.described) speeds.push_back(*t.images_per_s / static_cast<double>(s.accelerators));
    if (!t.source.empty() && std::find(sources.begin(), sources.end(), t.source) == sources.end()) sources.push_back(t.source);
    if (t.note.empty()) continue;
    ++disagreeing;
    if (first.empty()) first = t.note;
    if (t.train_samples_ratio) ratios.push_back(*t.train_samples_ratio);
    if (t.events_ratio) events.push_back(*t.events_ratio);
  }
  if (!speeds.empty()) s.images_per_s_per_accelerator = median(speeds);
  for (const std::string& src : sources) s.throughput_source += (s.throughput_source.empty() ? "" : "; ") + src;
  if (disagreeing == 0) return;
  const std::string runs = " (" + std::to_string(disagreeing) + " of " + std::to_string(s.runs.size()) + " runs)";
  const auto range = [](const std::vector<double>& v) {
    const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    return format_number(*lo, "%.2f") + (*hi - *lo >= 0.005 ? "-" + format_number(*hi, "%.2f") : "");
  };
  std::vector<std::string> parts;
  if (!ratios.empty())
    parts.push_back("train_samples " + std::to_string(s.runs.front().run.train_samples.value_or(0)) + " not used: it gives " +
                    range(ratios) + "x the figure of the evidence");
  if (!events.empty()) parts.push_back("epochs x 117266 give " + range(events) + "x the throughput events' figure");
  if (parts.empty()) parts.push_back(first);
  for (const std::string& p : parts) s.throughput_note += (s.throughput_note.empty() ? "" : "; ") + p;
  s.throughput_note += runs;
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

// A system's runs: the result files of its maskrcnn folder (named for <system>/maskrcnn), or run
// folders (named for the folder given).
SystemReport report_system(const fs::path& folder, const std::string& source, const ReportOptions& options,
                           const std::vector<fs::path>& runs = {}) {
  SystemReport s{.name = (runs.empty() ? folder.parent_path() : folder).filename().string(), .folder = folder.string(),
                 .source = source};
  s.label = s.name;
  for (const fs::path& f : runs.empty() ? result_files(folder, &s.problems) : runs) s.runs.push_back(summarize_run(f));
  for (const RunSummary& r : s.runs)
    if (!r.run.benchmark.empty() && r.run.benchmark != "maskrcnn")
      throw ReportError(r.file + ": a result of benchmark '" + r.run.benchmark + "', not Mask R-CNN (maskrcnn)");
  describe_system(s, options);
  const std::optional<double> olympic = score_system(s);
  std::vector<RcpRun> rcp_runs;
  std::vector<double> epochs;
  for (const RunSummary& r : s.runs) {
    rcp_runs.push_back({.converged = r.epochs_to_converge.has_value(), .epochs = r.epochs_to_converge.value_or(0),
                        .global_batch_size = r.run.global_batch_size.value_or(-1)});
    if (r.epochs_to_converge) epochs.push_back(*r.epochs_to_converge);
    for (auto part : kTimeParts) s.mean_time.*part += r.time.*part / static_cast<double>(s.runs.size());
  }
  std::vector<double> scoring;  // the mean over the runs that logged it
  for (const RunSummary& r : s.runs)
    if (r.time.scoring_total) scoring.push_back(*r.time.scoring_total);
  if (!scoring.empty()) {
    s.mean_time.scoring_total = 0;
    for (double v : scoring) *s.mean_time.scoring_total += v / static_cast<double>(scoring.size());
  }
  s.rcp = rcp_check(rcp_runs);
  profile_stages(s);
  summarize_speed(s);
  if (s.division == "closed" && s.rcp.passed && olympic) s.rcp_normalized_minutes = *olympic * s.rcp.norm_factor;
  if (!epochs.empty()) {
    double sum = 0;
    for (double e : epochs) sum += e;
    s.mean_epochs_to_converge = sum / static_cast<double>(epochs.size());
  }
  auto price = options.price_per_node_hour.find(s.name);
  if (price == options.price_per_node_hour.end()) price = options.price_per_node_hour.find("");
  if (price != options.price_per_node_hour.end()) {
    s.price_per_node_hour = price->second;
    if (s.score_minutes && s.described) s.cost_per_result = *s.score_minutes / 60 * price->second * static_cast<double>(s.nodes);
  }
  return s;
}

// The folders between a system's source and its results/ folder: the round and the submitter in a
// tree of several ("training_results_v3.0/NVIDIA"), "" where the source is the results tree itself.
std::string location(const SystemReport& s) {
  const fs::path source = fs::path(s.source).lexically_normal();
  const fs::path inside = fs::path(s.folder).lexically_normal().lexically_relative(source);
  const std::vector<fs::path> parts(inside.begin(), inside.end());
  fs::path where;
  for (size_t i = 0; i + 3 <= parts.size() && parts[i] != "results"; ++i) where /= parts[i];
  return where.generic_string();
}

// Labels unique over all sources: a name two systems share is qualified with the source's name and
// the location, and numbered where even that is shared.
void label_systems(std::vector<SystemReport>& systems) {
  std::map<std::string, int> names;
  for (const SystemReport& s : systems) ++names[s.name];
  std::map<std::string, int> labels;
  for (SystemReport& s : systems) {
    if (names[s.name] > 1) {
      const std::string where = location(s);
      const std::string source = fs::path(s.source).lexically_normal().filename().string();
      s.label = s.name + " [" + source + (where.empty() ? "" : "/" + where) + "]";
    }
    if (const int n = ++labels[s.label]; n > 1) s.label += " #" + std::to_string(n);
  }
}

// The scaling efficiency within each source, location, division, submitter, accelerator model and
// accelerators per node: the same node at other node counts, against the smallest count's fastest.
void scaling(std::vector<SystemReport>& systems) {
  using Key = std::tuple<std::string, std::string, std::string, std::string, std::string, int64_t>;
  std::map<Key, std::vector<SystemReport*>> groups;
  for (SystemReport& s : systems)
    if (s.has_accelerators && s.score_minutes && !s.accelerator_model.empty())
      groups[{s.source, location(s), s.division, s.submitter, model_key(s.accelerator_model), s.accelerators / s.nodes}]
          .push_back(&s);
  for (auto& [key, members] : groups) {
    const SystemReport* base = nullptr;
    for (const SystemReport* m : members)
      if (!base || m->nodes < base->nodes || (m->nodes == base->nodes && *m->score_minutes < *base->score_minutes)) base = m;
    if (std::all_of(members.begin(), members.end(), [&](const SystemReport* m) { return m->nodes == base->nodes; })) continue;
    for (SystemReport* m : members) {
      if (m != base && m->nodes == base->nodes) continue;  // another system of the same size: not scaling
      m->scaling_speedup = *base->score_minutes / *m->score_minutes;
      m->scaling_efficiency = *m->scaling_speedup / (static_cast<double>(m->nodes) / static_cast<double>(base->nodes));
      m->scaling_base = base->label;
    }
  }
}

std::string opt(const std::optional<double>& v, const char* format) { return v ? format_number(*v, format) : "-"; }

Json opt_json(const std::optional<double>& v) { return v ? Json(*v) : Json(nullptr); }

Json time_json(const TimeBreakdown& t) {
  return Json{{"init_s", t.init}, {"training_s", t.training}, {"eval_inference_s", t.eval_inference},
              {"final_scoring_wait_s", t.final_scoring_wait}, {"idle_s", t.idle}, {"scoring_total_s", opt_json(t.scoring_total)}};
}

}  // namespace

std::vector<SystemReport> build_report(const std::vector<std::string>& paths, const ReportOptions& options) {
  std::vector<SystemReport> out;
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
      if (const std::vector<fs::path> runs = run_folders(root); !runs.empty()) {
        if (seen.insert(fs::weakly_canonical(root, ec).string()).second) out.push_back(report_system(root, root.string(), options, runs));
        continue;
      }
      throw ReportError(p + ": no results found (expected <system>/maskrcnn/result_N.txt, as run_and_time.sh files them, "
                        "a submission folder with results/, or run folders as `train --out` leaves them)");
    }
    for (const fs::path& f : folders) {
      const std::string key = fs::weakly_canonical(f, ec).string();
      if (seen.insert(key).second) out.push_back(report_system(f, root.string(), options));
    }
  }
  label_systems(out);
  scaling(out);
  return out;
}

std::string format_number(double v, const char* format) {
  char b[64];
  std::snprintf(b, sizeof b, format, v);
  return b;
}

std::string model_key(const std::string& model) {
  std::string key;
  for (unsigned char c : model)
    if (std::isalnum(c)) key += static_cast<char>(std::tolower(c));
  return key;
}

std::vector<const SystemReport*> comparison_order(const std::vector<SystemReport>& systems) {
  constexpr double kNone = std::numeric_limits<double>::infinity();
  std::map<std::string, double> best;  // accelerator model key -> its best score
  for (const SystemReport& s : systems) {
    auto [it, added] = best.emplace(model_key(s.accelerator_model), kNone);
    it->second = std::min(it->second, s.score_minutes.value_or(kNone));
  }
  std::vector<const SystemReport*> out;
  for (const SystemReport& s : systems) out.push_back(&s);
  std::stable_sort(out.begin(), out.end(), [&](const SystemReport* a, const SystemReport* b) {
    const auto key = [&](const SystemReport* s) {
      const std::string model = model_key(s->accelerator_model);
      return std::tuple(best[model], model, s->score_minutes.value_or(kNone), s->label);
    };
    return key(a) < key(b);
  });
  return out;
}

// Columns padded to their widest cell: text left, numbers right.
std::string aligned(const std::vector<std::vector<std::string>>& rows, const std::vector<bool>& right) {
  std::vector<size_t> width(right.size(), 0);
  for (const auto& row : rows)
    if (row.size() == right.size())
      for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  std::string out;
  for (const auto& row : rows) {
    if (row.size() != right.size()) {  // a group's heading, on a line of its own
      out += row.front() + "\n";
      continue;
    }
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      const std::string pad(width[c] - row[c].size(), ' ');
      line += (c ? "  " : "") + (right[c] ? pad + row[c] : row[c] + pad);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

namespace {

std::string short_source(const std::string& source) {
  if (source == kSourceThroughputEvents) return "log events";
  if (source == kSourceCocoEpochs) return "117266/epoch";
  if (source == kSourceTrainSamples) return "train_samples";
  if (source == kSourceSteps) return "steps x batch";
  return source.empty() ? "-" : "mixed";
}

std::string rcp_cell(const SystemReport& s) {
  if (!s.rcp_applies()) return "n/a (open)";
  return s.rcp.passed ? "pass" : "FAIL";
}

void system_details(std::ostringstream& o, const SystemReport& s) {
  char line[512];
  o << "\n" << s.label << " (" << s.folder << "): " << s.submitter << ", ";
  if (s.described) {
    o << s.nodes << " node(s), " << s.accelerators << " " << (s.has_accelerators ? "accelerator(s)" : "host processor(s), no accelerator")
      << (s.accelerator_model.empty() ? "" : " [" + s.accelerator_model + "]");
  } else {
    o << "nodes and accelerators unknown";
  }
  o << (s.framework.empty() ? "" : ", " + s.framework) << "\n";
  for (const std::string& p : s.problems) o << "  PROBLEM: " << p << "\n";
  if (!s.score_note.empty()) o << "  score: " << s.score_note << "\n";
  if (s.scaling_factor != 1) o << "  score includes scaling.json's factor " << s.scaling_factor << "\n";
  o << "  RCP: " << s.rcp.message << (s.rcp.passed ? " (pass)" : " (FAIL)");
  if (s.rcp.has_rcp)
    o << "; submission mean " << opt(s.rcp.submission_mean, "%.3f") << " epochs, RCP mean " << opt(s.rcp.rcp.mean, "%.3f")
      << ", minimum acceptable " << opt(s.rcp.rcp.mean / s.rcp.rcp.max_speedup, "%.3f") << " (global batch "
      << s.rcp.rcp.global_batch_size << (s.rcp.rcp.interpolated ? ", interpolated" : "") << ")";
  o << (s.rcp_applies() ? "" : "; not applied: the RCP check decides closed-division results only") << "\n";
  if (s.rcp_normalized_minutes) o << "  RCP-normalized score: " << opt(s.rcp_normalized_minutes, "%.4f") << " min\n";
  o << "  throughput: " << (s.throughput_source.empty() ? "no evidence in the logs" : "from " + s.throughput_source) << "\n";
  if (!s.throughput_note.empty()) o << "  note: " << s.throughput_note << "\n";
  if (s.scaling_efficiency)
    o << "  scaling: " << opt(s.scaling_speedup, "%.2f") << "x faster than " << s.scaling_base << " with " << s.nodes
      << " nodes: efficiency " << opt(s.scaling_efficiency, "%.3f") << "\n";
  const TimeBreakdown& t = s.mean_time;
  std::snprintf(line, sizeof line,
                "  time per run (mean s): init %.2f | training %.2f | eval inference %.2f | wait for last score %.2f "
                "| idle %.2f   (COCO scoring %s)\n",
                t.init, t.training, t.eval_inference, t.final_scoring_wait, t.idle,
                t.scoring_total ? (opt(t.scoring_total, "%.2f") + ", overlapped").c_str() : "not logged");
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
                  opt(r.throughput.images_per_s, "%.2f").c_str(), r.compliant ? "compliant" : ("NOT compliant: " + r.check_error).c_str());
    o << line;
  }
}

}  // namespace

std::string format_report_table(const std::vector<SystemReport>& systems) {
  std::vector<std::vector<std::string>> rows{{"submitter", "system", "accel", "nodes", "division", "runs", "dropped",
                                              "score (min)", "accel-h", "RCP (3.1.0)", "epochs (RCP)", "img/s/accel",
                                              "source", "scaling", "cost"}};
  const std::vector<bool> right{false, false, true, true, false, true, true, true, true, false, true, true, false, true, true};
  const std::vector<const SystemReport*> order = comparison_order(systems);
  std::string model = "\x01";
  for (const SystemReport* p : order) {
    const SystemReport& s = *p;
    if (model_key(s.accelerator_model) != model) {
      model = model_key(s.accelerator_model);
      rows.push_back({"-- " + (s.accelerator_model.empty() ? std::string("accelerator not described") : s.accelerator_model)});
    }
    const std::string epochs = opt(s.mean_epochs_to_converge, "%.2f") + " (" + (s.rcp.has_rcp ? opt(s.rcp.rcp.mean, "%.2f") : "-") + ")";
    const std::string unknown = "?";
    rows.push_back({s.submitter.empty() ? "-" : s.submitter, s.label, s.described ? std::to_string(s.accelerators) : unknown,
                    s.described ? std::to_string(s.nodes) : unknown,
                    s.division.empty() ? "-" : s.division, std::to_string(s.runs.size()), std::to_string(s.dropped),
                    opt(s.score_minutes, "%.4f"), opt(s.accelerator_hours, "%.2f"), rcp_cell(s), epochs,
                    opt(s.images_per_s_per_accelerator, "%.2f"), short_source(s.throughput_source),
                    opt(s.scaling_efficiency, "%.3f"), opt(s.cost_per_result, "%.2f")});
  }
  std::ostringstream o;
  o << aligned(rows, right)
    << "\nsource of img/s: log events = the log's throughput events (median); 117266/epoch = epochs x COCO train2017's "
       "117,266 images over the training time; train_samples = epochs x train_samples over the training time; steps x batch = "
       "metrics.jsonl's steps x the global batch over the training time.\n"
       "scaling: the speedup over the smallest node count of the same node (submitter, accelerator model and count "
       "a node, division, round), against linear.\n";
  for (const SystemReport* s : order) system_details(o, *s);
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
                      {"epochs_to_converge", opt_json(r.epochs_to_converge)}, {"images_per_s", opt_json(r.throughput.images_per_s)},
                      {"throughput_source", r.throughput.source}, {"throughput_note", r.throughput.note},
                      {"throughput_events", r.run.throughput.size()},
                      {"time", time_json(r.time)}, {"accuracy", acc}});
    }
    out["systems"].push_back(
        {{"system", s.name}, {"label", s.label}, {"folder", s.folder}, {"source", s.source}, {"division", s.division},
         {"org", s.org}, {"submitter", s.submitter}, {"framework", s.framework},
         {"nodes", s.described ? Json(s.nodes) : Json(nullptr)}, {"accelerators", s.described ? Json(s.accelerators) : Json(nullptr)},
         {"has_accelerators", s.has_accelerators}, {"described", s.described}, {"description", s.description.path},
         {"problems", s.problems},
         {"accelerator_model", s.accelerator_model}, {"target_bbox", s.target_bbox}, {"target_segm", s.target_segm},
         {"runs_count", s.runs.size()}, {"dropped", s.dropped}, {"score_minutes", opt_json(s.score_minutes)},
         {"scaling_factor", s.scaling_factor}, {"score_note", s.score_note},
         {"accelerator_hours", opt_json(s.accelerator_hours)},
         {"rcp", {{"passed", s.rcp.passed}, {"message", s.rcp.message}, {"norm_factor", s.rcp.norm_factor},
                  {"submission_mean_epochs", s.rcp.has_rcp ? Json(s.rcp.submission_mean) : Json(nullptr)},
                  {"rcp_mean_epochs", s.rcp.has_rcp ? Json(s.rcp.rcp.mean) : Json(nullptr)},
                  {"min_acceptable_mean_epochs", s.rcp.has_rcp ? Json(s.rcp.rcp.mean / s.rcp.rcp.max_speedup) : Json(nullptr)},
                  {"rcp_global_batch_size", s.rcp.has_rcp ? Json(s.rcp.rcp.global_batch_size) : Json(nullptr)},
                  {"applies", s.rcp_applies()}}},
         {"rcp_normalized_minutes", opt_json(s.rcp_normalized_minutes)},
         {"mean_epochs_to_converge", opt_json(s.mean_epochs_to_converge)},
         {"images_per_s_per_accelerator", opt_json(s.images_per_s_per_accelerator)},
         {"throughput_source", s.throughput_source}, {"throughput_note", s.throughput_note},
         {"scaling", {{"speedup", opt_json(s.scaling_speedup)}, {"efficiency", opt_json(s.scaling_efficiency)},
                      {"base", s.scaling_base.empty() ? Json(nullptr) : Json(s.scaling_base)}}},
         {"mean_time", time_json(s.mean_time)}, {"price_per_node_hour", opt_json(s.price_per_node_hour)},
         {"cost_per_result", opt_json(s.cost_per_result)}, {"profiled_runs", s.profiled_runs},
         {"stages", s.stages}, {"runs", runs}});
  }
  return out;
}

}  // namespace mrcnn::analysis
