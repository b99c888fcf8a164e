#include "benchmark/analysis/report.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <tuple>

#include "logging/compliance.h"
#include "logging/json_file.h"

namespace mrcnn::analysis {

namespace fs = std::filesystem;

namespace {

// A file that may be absent (scaling.json): null when it cannot be read as JSON.
Json optional_json_file(const fs::path& p) {
  try {
    return logging::read_json_file(p.string());
  } catch (const logging::JsonFileError&) {
    return nullptr;
  }
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
  const Json scaling = optional_json_file(fs::path(s.folder) / "scaling.json");
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

// The round whose rules check and score the system: --ruleset, else the round its folder's path
// names (training_results_vX.Y), else 3.1.0.
void choose_ruleset(SystemReport& s, const ReportOptions& options) {
  if (!options.ruleset.empty()) {
    s.ruleset = options.ruleset, s.ruleset_source = "given";
    return;
  }
  std::error_code ec;
  fs::path where = fs::absolute(s.folder, ec);
  if (ec) where = s.folder;
  s.ruleset = logging::ruleset_from_path(where.lexically_normal().generic_string()), s.ruleset_source = "path";
  if (s.ruleset.empty()) s.ruleset = logging::kDefaultRuleset, s.ruleset_source = "default";
}

// A system's runs: the result files of its maskrcnn folder (named for <system>/maskrcnn), or run
// folders (named for the folder given).
SystemReport report_system(const report_detail::Found& f, const ReportOptions& options) {
  SystemReport s{.name = (f.run_folders ? f.folder : f.folder.parent_path()).filename().string(),
                 .folder = f.folder.string(), .source = f.source};
  s.label = s.name;
  s.problems = f.problems;
  choose_ruleset(s, options);
  for (const fs::path& run : f.runs) s.runs.push_back(summarize_run(run, s.ruleset));
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
    s.block_counted_runs += r.counted_in_blocks ? 1 : 0;
    for (auto part : kTimeParts) s.mean_time.*part += r.time.*part / static_cast<double>(s.runs.size());
  }
  std::vector<double> scoring;  // the mean over the runs that logged it
  for (const RunSummary& r : s.runs)
    if (r.time.scoring_total) scoring.push_back(*r.time.scoring_total);
  if (!scoring.empty()) {
    s.mean_time.scoring_total = 0;
    for (double v : scoring) *s.mean_time.scoring_total += v / static_cast<double>(scoring.size());
  }
  s.rcp = rcp_check(rcp_runs, s.ruleset);
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
// the location, then with the round where that is still shared by systems of several rounds (the
// NVIDIA folders of two rounds given side by side: "name [NVIDIA, 2.0.0]"), and numbered where even
// that is shared.
void label_systems(std::vector<SystemReport>& systems) {
  std::map<std::string, int> names;
  for (const SystemReport& s : systems) ++names[s.name];
  std::map<std::string, std::set<std::string>> rounds;  // qualified label -> the rulesets of its systems
  std::vector<std::string> qualified;
  for (const SystemReport& s : systems) {
    std::string q = s.name;
    if (names[s.name] > 1) {
      const std::string where = location(s);
      const std::string source = fs::path(s.source).lexically_normal().filename().string();
      q += " [" + source + (where.empty() ? "" : "/" + where);
    }
    qualified.push_back(q);
    rounds[q].insert(s.ruleset);
  }
  std::map<std::string, int> labels;
  for (size_t i = 0; i < systems.size(); ++i) {
    SystemReport& s = systems[i];
    if (names[s.name] > 1) s.label = qualified[i] + (rounds[qualified[i]].size() > 1 ? ", " + s.ruleset : "") + "]";
    if (const int n = ++labels[s.label]; n > 1) s.label += " #" + std::to_string(n);
  }
}

// The scaling efficiency within each source, location, division, submitter, accelerator model and
// accelerators per node: the same node at other node counts, against the smallest count's fastest.
void scaling(std::vector<SystemReport>& systems) {
  using Key = std::tuple<std::string, std::string, std::string, std::string, std::string, std::string, int64_t>;
  std::map<Key, std::vector<SystemReport*>> groups;
  for (SystemReport& s : systems)
    if (s.has_accelerators && s.score_minutes && !s.accelerator_model.empty())
      groups[{s.source, location(s), s.ruleset, s.division, s.submitter, model_key(s.accelerator_model),
              s.accelerators / s.nodes}]
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

}  // namespace

std::vector<SystemReport> build_report(const std::vector<std::string>& paths, const ReportOptions& options) {
  if (!options.ruleset.empty() && !logging::is_ruleset(options.ruleset)) {
    std::string list;
    for (const std::string& r : logging::rulesets()) list += (list.empty() ? "" : ", ") + r;
    throw ReportError("--ruleset " + options.ruleset + ": not a ruleset with Mask R-CNN (" + list + ")");
  }
  std::vector<SystemReport> out;
  for (const report_detail::Found& f : report_detail::discover(paths)) out.push_back(report_system(f, options));
  label_systems(out);
  scaling(out);
  return out;
}

}  // namespace mrcnn::analysis
