// report's table and JSON, and the helpers every output of `report` and `forecast` shares (report.h).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <filesystem>
#include <sstream>

#include "benchmark/analysis/report.h"

namespace mrcnn::analysis {

namespace fs = std::filesystem;

namespace {

std::string opt(const std::optional<double>& v, const char* format) { return v ? format_number(*v, format) : "-"; }

Json opt_json(const std::optional<double>& v) { return v ? Json(*v) : Json(nullptr); }

Json time_json(const TimeBreakdown& t) {
  return Json{{"init_s", t.init}, {"training_s", t.training}, {"eval_inference_s", t.eval_inference},
              {"final_scoring_wait_s", t.final_scoring_wait}, {"idle_s", t.idle}, {"scoring_total_s", opt_json(t.scoring_total)}};
}

}  // namespace

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
  if (source == kSourceCocoBlocks) return "117266/epoch, blocks";
  if (source == kSourceTrainSamplesBlocks) return "train_samples, blocks";
  if (source == kSourceSteps) return "steps x batch";
  return source.empty() ? "-" : "mixed";
}

// "1.0.0: 12 systems (path); 3.1.0: 2 systems (default)"
std::string rules_summary(const std::vector<SystemReport>& systems) {
  std::map<std::string, std::map<std::string, int>> n;
  for (const SystemReport& s : systems) ++n[s.ruleset][s.ruleset_source];
  std::string out;
  for (const auto& [ruleset, sources] : n) {
    int total = 0;
    std::string how;
    for (const auto& [source, k] : sources) total += k, how += (how.empty() ? "" : ", ") + (source == "given" ? "--ruleset" : source);
    out += (out.empty() ? "" : "; ") + ruleset + ": " + std::to_string(total) + " system" + (total == 1 ? "" : "s") + " (" + how + ")";
  }
  return out;
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
  o << "  rules: ruleset " << s.ruleset << " ("
    << (s.ruleset_source == "given" ? "--ruleset" : s.ruleset_source == "path" ? "the round its path names" : "by default: no round in its path")
    << "): its compliance check and its RCPs\n";
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
  if (s.block_counted_runs > 0)
    o << "  blocks: " << s.block_counted_runs << " of " << s.runs.size()
      << " runs log blocks, not epochs: their training time is the blocks' (block_start to block_stop) and the epochs "
         "trained their epoch_count\n";
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
  std::vector<std::vector<std::string>> rows{{"submitter", "system", "accel", "nodes", "division", "rules", "runs",
                                              "dropped", "score (min)", "accel-h", "RCP", "epochs (RCP)", "img/s/accel",
                                              "source", "scaling", "cost"}};
  const std::vector<bool> right{false, false, true, true, false, false, true, true, true, true, false, true, true, false, true, true};
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
                    s.division.empty() ? "-" : s.division, s.ruleset, std::to_string(s.runs.size()), std::to_string(s.dropped),
                    opt(s.score_minutes, "%.4f"), opt(s.accelerator_hours, "%.2f"), rcp_cell(s), epochs,
                    opt(s.images_per_s_per_accelerator, "%.2f"), short_source(s.throughput_source),
                    opt(s.scaling_efficiency, "%.3f"), opt(s.cost_per_result, "%.2f")});
  }
  std::ostringstream o;
  o << aligned(rows, right)
    << "\nsource of img/s: log events = the log's throughput events (median); 117266/epoch = epochs x COCO train2017's "
       "117,266 images over the training time; train_samples = epochs x train_samples over the training time; steps x batch = "
       "metrics.jsonl's steps x the global batch over the training time; \", blocks\": the log counts blocks, not epochs "
       "(block_start/block_stop, first_epoch_num, epoch_count): training time and epochs from its blocks.\n"
       "scaling: the speedup over the smallest node count of the same node (submitter, accelerator model and count "
       "a node, division, round), against linear.\n"
       "rules: the ruleset whose compliance check, scoring and RCPs each system is read by (its round: "
       + rules_summary(systems) + ").\n";
  for (const SystemReport* s : order) system_details(o, *s);
  return o.str();
}

Json report_json(const std::vector<SystemReport>& systems) {
  std::vector<std::string> rulesets;
  for (const SystemReport& s : systems)
    if (std::find(rulesets.begin(), rulesets.end(), s.ruleset) == rulesets.end()) rulesets.push_back(s.ruleset);
  std::sort(rulesets.begin(), rulesets.end());
  // "ruleset": the one every system was read by, null when they span several rounds ("rulesets").
  Json out{{"ruleset", rulesets.size() == 1 ? Json(rulesets.front()) : Json(nullptr)}, {"rulesets", rulesets},
           {"systems", Json::array()}};
  for (const SystemReport& s : systems) {
    Json runs = Json::array();
    for (const RunSummary& r : s.runs) {
      Json acc = Json::array();
      for (const EpochRecord& e : r.run.epochs)
        if (e.bbox && e.accuracy_ms && r.run.run_start_ms)
          acc.push_back({{"epoch", e.epoch}, {"minutes", (*e.accuracy_ms - *r.run.run_start_ms) / 60000},
                         {"bbox", *e.bbox}, {"segm", e.segm ? Json(*e.segm) : Json(nullptr)}});
      runs.push_back({{"file", r.file}, {"ruleset", r.ruleset}, {"status", r.run.status},
                      {"seed", r.run.seed ? Json(*r.run.seed) : Json(nullptr)},
                      {"compliant", r.compliant}, {"check_error", r.check_error}, {"minutes", opt_json(r.minutes)},
                      {"epochs_to_converge", opt_json(r.epochs_to_converge)}, {"images_per_s", opt_json(r.throughput.images_per_s)},
                      {"throughput_source", r.throughput.source}, {"throughput_note", r.throughput.note},
                      {"throughput_events", r.run.throughput.size()}, {"counted_in_blocks", r.counted_in_blocks},
                      {"epochs_trained", r.epochs_trained},
                      {"time", time_json(r.time)}, {"accuracy", acc}});
    }
    out["systems"].push_back(
        {{"system", s.name}, {"label", s.label}, {"folder", s.folder}, {"source", s.source}, {"ruleset", s.ruleset},
         {"ruleset_source", s.ruleset_source}, {"division", s.division},
         {"org", s.org}, {"submitter", s.submitter}, {"framework", s.framework},
         {"nodes", s.described ? Json(s.nodes) : Json(nullptr)}, {"accelerators", s.described ? Json(s.accelerators) : Json(nullptr)},
         {"has_accelerators", s.has_accelerators}, {"described", s.described}, {"description", s.description.path},
         {"problems", s.problems},
         {"accelerator_model", s.accelerator_model}, {"target_bbox", s.target_bbox}, {"target_segm", s.target_segm},
         {"runs_count", s.runs.size()}, {"dropped", s.dropped}, {"score_minutes", opt_json(s.score_minutes)},
         {"scaling_factor", s.scaling_factor}, {"score_note", s.score_note},
         {"accelerator_hours", opt_json(s.accelerator_hours)},
         {"rcp", {{"passed", s.rcp.passed}, {"ruleset", s.rcp.ruleset}, {"message", s.rcp.message}, {"norm_factor", s.rcp.norm_factor},
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
         {"mean_time", time_json(s.mean_time)}, {"block_counted_runs", s.block_counted_runs}, {"price_per_node_hour", opt_json(s.price_per_node_hour)},
         {"cost_per_result", opt_json(s.cost_per_result)}, {"profiled_runs", s.profiled_runs},
         {"stages", s.stages}, {"runs", runs}});
  }
  return out;
}

}  // namespace mrcnn::analysis
