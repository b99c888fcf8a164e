// The report's HTML page: one table per comparison, the plots as SVG files beside it, no script
// and nothing fetched from elsewhere (it is read offline, attached to reviews). Every number in a
// table cell carries data-system and data-field naming its report JSON field.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "benchmark/analysis/report.h"
#include "benchmark/analysis/svg_plot.h"

namespace mrcnn::analysis {

namespace fs = std::filesystem;

namespace {

std::string cell(const SystemReport& s, const char* field, const std::optional<double>& v, const char* format) {
  char b[64] = "-";
  if (v) std::snprintf(b, sizeof b, format, *v);
  return "<td class=\"num\" data-system=\"" + svg::escape(s.name) + "\" data-field=\"" + field + "\">" + b + "</td>";
}

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream out(p);
  out << text;
  if (!out) throw ReportError("cannot write " + p.string());
}

std::string safe_name(const std::string& s) {
  std::string out;
  for (char c : s) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') ? c : '_';
  return out;
}

}  // namespace

std::string write_report_html(const std::vector<SystemReport>& systems, const std::string& dir_name) {
  const fs::path dir(dir_name);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw ReportError("cannot create " + dir_name + ": " + ec.message());

  // ---- plots ----
  std::vector<std::string> images;  // file, alt
  std::vector<svg::Bar> score_bars, speed_bars;
  std::vector<svg::Stack> stacks;
  for (size_t i = 0; i < systems.size(); ++i) {
    const SystemReport& s = systems[i];
    std::vector<svg::Series> series;
    for (size_t k = 0; k < s.runs.size(); ++k) {
      const RunSummary& r = s.runs[k];
      svg::Series box{.name = fs::path(r.file).stem().string() + " box", .color = svg::palette(k)};
      svg::Series mask{.name = fs::path(r.file).stem().string() + " mask", .color = svg::palette(k), .dashed = true};
      for (const EpochRecord& e : r.run.epochs) {
        if (!e.accuracy_ms || !r.run.run_start_ms) continue;
        const double minutes = (*e.accuracy_ms - *r.run.run_start_ms) / 60000;
        if (e.bbox) box.points.emplace_back(minutes, *e.bbox);
        if (e.segm) mask.points.emplace_back(minutes, *e.segm);
      }
      series.push_back(box);
      series.push_back(mask);
    }
    const std::string file = "accuracy_" + safe_name(s.name) + ".svg";
    write_file(dir / file, svg::line_chart(s.name + ": accuracy over time", "minutes since run_start", "COCO AP",
                                           series, {{s.target_bbox, "box target", "#555"}, {s.target_segm, "mask target", "#999"}}));
    images.push_back(file);
    std::vector<double> dots;
    for (const RunSummary& r : s.runs)
      if (r.minutes) dots.push_back(*r.minutes);
    score_bars.push_back({.label = s.name, .value = s.score_minutes.value_or(0), .dots = dots, .color = svg::palette(i)});
    speed_bars.push_back({.label = s.name, .value = s.images_per_s_per_accelerator.value_or(0), .color = svg::palette(i)});
    const TimeBreakdown& t = s.mean_time;
    stacks.push_back({.label = s.name, .parts = {t.init, t.training, t.eval_inference, t.final_scoring_wait, t.idle}});
  }
  write_file(dir / "score.svg", svg::bar_chart("score: olympic mean time to train", "minutes", score_bars));
  write_file(dir / "throughput.svg", svg::bar_chart("training throughput per accelerator", "images/s", speed_bars));
  write_file(dir / "time.svg",
             svg::stacked_bar_chart("where a run's time goes (mean)", "seconds",
                                    {"init", "training", "eval inference", "wait for last score", "idle"},
                                    {"#bbbbbb", "#1f77b4", "#ff7f0e", "#d62728", "#eeeeee"}, stacks));

  // ---- page ----
  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>mlperf-maskrcnn report</title>\n"
    << "<style>body{font-family:sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse;margin:1em 0}"
    << "td,th{border:1px solid #ccc;padding:4px 8px}td.num{text-align:right;font-variant-numeric:tabular-nums}"
    << "th{background:#f3f3f3}.fail{color:#b00}.pass{color:#070}img{margin:0.5em 0;border:1px solid #eee}</style>\n"
    << "</head><body>\n<h1>Mask R-CNN results: systems compared</h1>\n"
    << "<p>MLPerf Training ruleset 3.1.0. Score: the official result_summarizer's olympic mean of the runs' time to "
    << "train (a run failing the compliance check dropped, at most one). RCP: the official rcp_checker's verdict with "
    << "the pruned reference points (it decides closed-division results only).</p>\n";
  o << "<h2>Summary</h2>\n<table id=\"summary\"><tr><th>system</th><th>division</th><th>accelerators</th><th>runs</th>"
    << "<th>dropped</th><th>score (min)</th><th>RCP check</th><th>epochs to converge</th><th>RCP mean epochs</th>"
    << "<th>images/s per accelerator</th><th>cost per result</th></tr>\n";
  for (const SystemReport& s : systems) {
    o << "<tr><td>" << svg::escape(s.name) << "</td><td>" << svg::escape(s.division) << "</td>"
      << cell(s, "accelerators", static_cast<double>(s.accelerators), "%.0f")
      << cell(s, "runs_count", static_cast<double>(s.runs.size()), "%.0f")
      << cell(s, "dropped", static_cast<double>(s.dropped), "%.0f") << cell(s, "score_minutes", s.score_minutes, "%.4f")
      << "<td class=\"" << (s.rcp.passed ? "pass" : "fail") << "\">" << (s.rcp.passed ? "pass" : "fail") << ": "
      << svg::escape(s.rcp.message) << "</td>" << cell(s, "mean_epochs_to_converge", s.mean_epochs_to_converge, "%.2f")
      << cell(s, "rcp.rcp_mean_epochs", s.rcp.has_rcp ? std::optional<double>(s.rcp.rcp.mean) : std::nullopt, "%.3f")
      << cell(s, "images_per_s_per_accelerator", s.images_per_s_per_accelerator, "%.3f")
      << cell(s, "cost_per_result", s.cost_per_result, "%.2f") << "</tr>\n";
  }
  o << "</table>\n<img src=\"score.svg\" alt=\"score per system\"> <img src=\"throughput.svg\" alt=\"throughput per accelerator\">\n";
  o << "<h2>Where the time goes (mean per run, seconds)</h2>\n<table id=\"time\"><tr><th>system</th><th>init</th>"
    << "<th>training</th><th>eval inference</th><th>wait for last score</th><th>idle</th><th>COCO scoring (overlapped)</th></tr>\n";
  for (const SystemReport& s : systems) {
    const TimeBreakdown& t = s.mean_time;
    o << "<tr><td>" << svg::escape(s.name) << "</td>" << cell(s, "mean_time.init_s", t.init, "%.3f")
      << cell(s, "mean_time.training_s", t.training, "%.3f") << cell(s, "mean_time.eval_inference_s", t.eval_inference, "%.3f")
      << cell(s, "mean_time.final_scoring_wait_s", t.final_scoring_wait, "%.3f") << cell(s, "mean_time.idle_s", t.idle, "%.3f")
      << cell(s, "mean_time.scoring_total_s", t.scoring_total, "%.3f") << "</tr>\n";
  }
  o << "</table>\n<img src=\"time.svg\" alt=\"where the time goes\">\n";
  if (std::any_of(systems.begin(), systems.end(), [](const SystemReport& s) { return s.profiled_runs > 0; })) {
    o << "<h2>Per-stage time of a training step (train --profile)</h2>\n<table id=\"stages\"><tr><th>system</th>"
      << "<th>stage</th><th>ms per step</th><th>share of the step</th></tr>\n";
    for (const SystemReport& s : systems)
      for (size_t k = 0; k < s.stages.size(); ++k) {
        const Json& st = s.stages[k];
        const std::string field = "stages." + std::to_string(k);
        o << "<tr><td>" << svg::escape(s.name) << "</td><td style=\"padding-left:" << 8 + 16 * st["depth"].get<int>()
          << "px\">" << svg::escape(st["stage"].get<std::string>()) << "</td>"
          << cell(s, (field + ".per_step_ms").c_str(), st["per_step_ms"].get<double>(), "%.2f")
          << cell(s, (field + ".share").c_str(), st["share"].get<double>(), "%.4f") << "</tr>\n";
      }
    o << "</table>\n";
  }
  for (size_t i = 0; i < systems.size(); ++i) {
    const SystemReport& s = systems[i];
    o << "<h2>" << svg::escape(s.name) << "</h2>\n<p>" << svg::escape(s.folder) << "; " << s.accelerators << " "
      << (s.has_accelerators ? "accelerator(s) " : "host processor(s), no accelerator ") << svg::escape(s.accelerator_model)
      << (s.score_note.empty() ? "" : "; " + svg::escape(s.score_note)) << "</p>\n"
      << "<table><tr><th>result</th><th>status</th><th>seed</th><th>minutes</th><th>epochs</th><th>images/s</th>"
      << "<th>compliance</th></tr>\n";
    for (const RunSummary& r : s.runs) {
      char minutes[32] = "-", epochs[32] = "-", speed[32] = "-";
      if (r.minutes) std::snprintf(minutes, sizeof minutes, "%.4f", *r.minutes);
      if (r.epochs_to_converge) std::snprintf(epochs, sizeof epochs, "%.0f", *r.epochs_to_converge);
      if (r.images_per_s) std::snprintf(speed, sizeof speed, "%.2f", *r.images_per_s);
      o << "<tr><td>" << svg::escape(fs::path(r.file).filename().string()) << "</td><td>" << svg::escape(r.run.status)
        << "</td><td>" << (r.run.seed ? std::to_string(*r.run.seed) : "-") << "</td><td class=\"num\">" << minutes
        << "</td><td class=\"num\">" << epochs << "</td><td class=\"num\">" << speed << "</td><td class=\""
        << (r.compliant ? "pass\">compliant" : "fail\">" + svg::escape(r.check_error)) << "</td></tr>\n";
    }
    o << "</table>\n<img src=\"" << images[i] << "\" alt=\"accuracy over time, " << svg::escape(s.name) << "\">\n";
  }
  o << "</body></html>\n";
  const fs::path page = dir / "index.html";
  write_file(page, o.str());
  return page.string();
}

}  // namespace mrcnn::analysis
