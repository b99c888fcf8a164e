// The report's HTML page: the comparison table grouped by accelerator model, the plots inline as
// SVG (each also written beside the page as a file), no script and nothing fetched from elsewhere
// (it is read offline, attached to reviews). Every number in a table cell carries data-system (the
// system's label) and data-field naming its report JSON field; a cell without a value says "not logged" where the logs
// lack the data and "-" where the figure does not apply.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "benchmark/analysis/report.h"
#include "benchmark/analysis/svg_plot.h"

namespace mrcnn::analysis {

namespace fs = std::filesystem;

namespace {

constexpr const char* kNotLogged = "not logged";
constexpr const char* kNotApplicable = "-";

std::string cell(const SystemReport& s, const std::string& field, const std::optional<double>& v, const char* format,
                 const char* missing = kNotApplicable) {
  const std::string text = v ? format_number(*v, format) : missing;
  return "<td class=\"num\" data-system=\"" + svg::escape(s.label) + "\" data-field=\"" + field + "\">" + text + "</td>";
}

std::string text_cell(const std::string& text) { return "<td>" + svg::escape(text.empty() ? "-" : text) + "</td>"; }

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

// The plots: written as files into the report's folder and returned for inlining in the page.
struct Plots {
  fs::path dir;
  std::map<std::string, std::string> svg;  // file name -> document
  std::string add(const std::string& file, std::string document) {
    write_file(dir / file, document);
    return svg[file] = std::move(document);
  }
  std::string figure(const std::string& file, const std::string& caption) const {
    return "<figure id=\"" + safe_name(file) + "\">" + svg.at(file) + "<figcaption>" + svg::escape(caption) +
           "</figcaption></figure>\n";
  }
};

// One colour per accelerator model (model_key), in the order the comparison reads them.
struct ModelColors {
  std::map<std::string, std::string> by_key;
  std::vector<svg::LegendEntry> legend;  // in that order, each model as its first system spells it
  explicit ModelColors(const std::vector<const SystemReport*>& order) {
    for (const SystemReport* s : order)
      if (const std::string key = model_key(s->accelerator_model); !by_key.contains(key)) {
        by_key[key] = svg::palette(by_key.size());
        legend.push_back({s->accelerator_model.empty() ? "accelerator not described" : s->accelerator_model, by_key[key]});
      }
  }
  const std::string& of(const SystemReport& s) const { return by_key.at(model_key(s.accelerator_model)); }
};

std::string model_name(const std::string& model) { return model.empty() ? "accelerator not described" : model; }

// How a system is named in the plots: submitter, system, nodes x accelerators per node.
std::string plot_label(const SystemReport& s) {
  const std::string size = s.described ? std::to_string(s.nodes) + "x" + std::to_string(s.accelerators / std::max<int64_t>(1, s.nodes)) : "?";
  return (s.submitter.empty() ? "" : s.submitter + " ") + s.label + " (" + size + ")";
}

// The run shown for a system where one run stands for it: the median time to train among the
// successful runs (the first run when none succeeded).
const RunSummary* representative(const SystemReport& s) {
  std::vector<const RunSummary*> ok;
  for (const RunSummary& r : s.runs)
    if (r.run.success() && r.minutes) ok.push_back(&r);
  if (ok.empty()) return s.runs.empty() ? nullptr : &s.runs.front();
  std::stable_sort(ok.begin(), ok.end(), [](const RunSummary* a, const RunSummary* b) { return *a->minutes < *b->minutes; });
  return ok[(ok.size() - 1) / 2];
}

void accuracy_series(const RunSummary& r, const std::string& name, const std::string& color, const std::string& dash,
                     std::vector<svg::Series>* box, std::vector<svg::Series>* mask) {
  svg::Series b{.name = name, .color = color, .dash = dash}, m{.name = name, .color = color, .dash = dash};
  for (const EpochRecord& e : r.run.epochs) {
    if (!e.accuracy_ms || !r.run.run_start_ms) continue;
    const double minutes = (*e.accuracy_ms - *r.run.run_start_ms) / 60000;
    if (e.bbox) b.points.emplace_back(minutes, *e.bbox);
    if (e.segm) m.points.emplace_back(minutes, *e.segm);
  }
  if (box) box->push_back(std::move(b));
  if (mask) mask->push_back(std::move(m));
}

void comparison_plots(Plots& plots, const std::vector<const SystemReport*>& order) {
  const ModelColors colors(order);
  std::vector<const SystemReport*> by_score = order;
  std::stable_sort(by_score.begin(), by_score.end(), [](const SystemReport* a, const SystemReport* b) {
    return a->score_minutes.value_or(1e300) < b->score_minutes.value_or(1e300);
  });
  svg::BarGroup scores;
  for (const SystemReport* s : by_score) {
    std::vector<double> dots;
    for (const RunSummary& r : s->runs)
      if (r.minutes) dots.push_back(*r.minutes);
    scores.bars.push_back({.label = plot_label(*s), .value = s->score_minutes.value_or(0), .dots = dots,
                           .color = colors.of(*s),
                           .value_text = s->score_minutes ? format_number(*s->score_minutes, "%.2f") : "no score"});
  }
  std::vector<svg::LegendEntry> score_legend = colors.legend;
  score_legend.push_back({"one run", "#222", true});
  plots.add("score.svg", svg::bar_chart("score: olympic mean time to train (shorter is better)", "minutes", {scores}, score_legend));

  std::vector<svg::BarGroup> speed;  // grouped by accelerator model, fastest first within a group
  std::string group = "\x01";
  for (const SystemReport* s : order) {
    if (model_key(s->accelerator_model) != group)
      group = model_key(s->accelerator_model), speed.push_back({model_name(s->accelerator_model), {}});
    const auto& v = s->images_per_s_per_accelerator;
    speed.back().bars.push_back({.label = plot_label(*s), .value = v.value_or(0), .color = colors.of(*s),
                                 .value_text = v ? format_number(*v, "%.1f") : kNotLogged});
  }
  for (svg::BarGroup& g : speed)
    std::stable_sort(g.bars.begin(), g.bars.end(), [](const svg::Bar& a, const svg::Bar& b) { return a.value > b.value; });
  plots.add("throughput.svg", svg::bar_chart("training throughput per accelerator", "images/s per accelerator", speed, {}));

  // Systems of one accelerator model: one hue, each its own dashes, then a lighter shade.
  std::vector<svg::Series> box, mask;
  std::map<std::string, size_t> seen;
  for (const SystemReport* s : order)
    if (const RunSummary* r = representative(*s)) {
      const size_t k = seen[model_key(s->accelerator_model)]++;
      accuracy_series(*r, plot_label(*s), svg::shade(colors.of(*s), k / svg::kDashPatterns), svg::dash_pattern(k), &box, &mask);
    }
  const SystemReport& any = *order.front();
  plots.add("accuracy_box.svg", svg::line_chart("box AP over time, one run per system", "minutes since run_start", "COCO box AP",
                                                box, {{any.target_bbox, "box target", "#555"}}));
  plots.add("accuracy_mask.svg", svg::line_chart("mask AP over time, one run per system", "minutes since run_start",
                                                 "COCO mask AP", mask, {{any.target_segm, "mask target", "#555"}}));
  std::vector<svg::Stack> stacks;
  for (const SystemReport* s : by_score) {
    const TimeBreakdown& t = s->mean_time;
    stacks.push_back({.label = plot_label(*s), .parts = {t.init, t.training, t.eval_inference, t.final_scoring_wait, t.idle}});
  }
  plots.add("time.svg", svg::stacked_bar_chart("where a run's time goes (mean)", "seconds",
                                               {"init", "training", "eval inference", "wait for last score", "idle"},
                                               {"#bbbbbb", "#1f77b4", "#ff7f0e", "#d62728", "#dddddd"}, stacks));
}

void summary_table(std::ostringstream& o, const std::vector<const SystemReport*>& order) {
  const ModelColors colors(order);
  o << "<h2>Summary</h2>\n<table id=\"summary\"><tr><th>submitter</th><th>system</th><th>accelerators</th><th>nodes</th>"
    << "<th>framework</th><th>division</th><th>rules</th><th>runs</th><th>dropped</th><th>score (min)</th><th>accelerator-hours</th>"
    << "<th>RCP check</th><th>epochs to converge</th><th>RCP mean epochs</th><th>images/s per accelerator</th>"
    << "<th>throughput from</th><th>scaling efficiency</th><th>cost per result</th></tr>\n";
  std::string model = "\x01";
  for (const SystemReport* p : order) {
    const SystemReport& s = *p;
    if (model_key(s.accelerator_model) != model) {
      model = model_key(s.accelerator_model);
      o << "<tr class=\"group\"><th colspan=\"18\"><span class=\"swatch\" style=\"background:" << colors.of(s)
        << "\"></span>" << svg::escape(model_name(s.accelerator_model)) << "</th></tr>\n";
    }
    const char* rcp_class = !s.rcp_applies() ? "na" : s.rcp.passed ? "pass" : "fail";
    const std::string rcp = !s.rcp_applies() ? "n/a (open division)" : (s.rcp.passed ? "pass: " : "fail: ") + s.rcp.message;
    o << "<tr>" << text_cell(s.submitter) << "<td>" << svg::escape(s.label) << "</td>"
      << cell(s, "accelerators", s.described ? std::optional<double>(static_cast<double>(s.accelerators)) : std::nullopt, "%.0f", "?")
      << cell(s, "nodes", s.described ? std::optional<double>(static_cast<double>(s.nodes)) : std::nullopt, "%.0f", "?")
      << "<td class=\"fw\" title=\"" << svg::escape(s.framework) << "\">" << svg::escape(s.framework.empty() ? "-" : s.framework)
      << "</td>" << text_cell(s.division) << text_cell(s.ruleset) << cell(s, "runs_count", static_cast<double>(s.runs.size()), "%.0f")
      << cell(s, "dropped", static_cast<double>(s.dropped), "%.0f") << cell(s, "score_minutes", s.score_minutes, "%.4f")
      << cell(s, "accelerator_hours", s.accelerator_hours, "%.2f") << "<td class=\"" << rcp_class << "\">"
      << svg::escape(rcp) << "</td>" << cell(s, "mean_epochs_to_converge", s.mean_epochs_to_converge, "%.2f")
      << cell(s, "rcp.rcp_mean_epochs", s.rcp.has_rcp ? std::optional<double>(s.rcp.rcp.mean) : std::nullopt, "%.3f")
      << cell(s, "images_per_s_per_accelerator", s.images_per_s_per_accelerator, "%.3f", kNotLogged)
      << "<td>" << svg::escape(s.throughput_source.empty() ? kNotLogged : s.throughput_source)
      << (s.throughput_note.empty() ? "" : "<br><span class=\"note\">" + svg::escape(s.throughput_note) + "</span>") << "</td>"
      << cell(s, "scaling.efficiency", s.scaling_efficiency, "%.3f") << cell(s, "cost_per_result", s.cost_per_result, "%.2f")
      << "</tr>\n";
  }
  o << "</table>\n";
  bool notes = false;
  for (const SystemReport* s : order)
    if (s->scaling_efficiency) {
      o << (notes ? "" : "<ul id=\"scaling\">\n") << "<li><b>" << svg::escape(s->label) << "</b>: "
        << format_number(*s->scaling_speedup, "%.2f") << "x faster than " << svg::escape(s->scaling_base) << " with "
        << format_number(static_cast<double>(s->nodes), "%.0f") << " nodes (efficiency " << format_number(*s->scaling_efficiency, "%.3f")
        << ")</li>\n";
      notes = true;
    }
  if (notes) o << "</ul>\n";
}

void time_tables(std::ostringstream& o, const std::vector<const SystemReport*>& order) {
  o << "<h2>Where the time goes (mean per run, seconds)</h2>\n<table id=\"time\"><tr><th>system</th><th>init</th>"
    << "<th>training</th><th>eval inference</th><th>wait for last score</th><th>idle</th><th>COCO scoring (overlapped)</th></tr>\n";
  for (const SystemReport* p : order) {
    const SystemReport& s = *p;
    const TimeBreakdown& t = s.mean_time;
    o << "<tr><td>" << svg::escape(s.label) << "</td>" << cell(s, "mean_time.init_s", t.init, "%.3f")
      << cell(s, "mean_time.training_s", t.training, "%.3f") << cell(s, "mean_time.eval_inference_s", t.eval_inference, "%.3f")
      << cell(s, "mean_time.final_scoring_wait_s", t.final_scoring_wait, "%.3f") << cell(s, "mean_time.idle_s", t.idle, "%.3f")
      << cell(s, "mean_time.scoring_total_s", t.scoring_total, "%.3f", kNotLogged) << "</tr>\n";
  }
  o << "</table>\n";
  if (std::none_of(order.begin(), order.end(), [](const SystemReport* s) { return s->profiled_runs > 0; })) return;
  o << "<h2>Per-stage time of a training step (train --profile)</h2>\n<table id=\"stages\"><tr><th>system</th>"
    << "<th>stage</th><th>ms per step</th><th>share of the step</th></tr>\n";
  for (const SystemReport* p : order)
    for (size_t k = 0; k < p->stages.size(); ++k) {
      const Json& st = p->stages[k];
      const std::string field = "stages." + std::to_string(k);
      o << "<tr><td>" << svg::escape(p->label) << "</td><td style=\"padding-left:" << 8 + 16 * st["depth"].get<int>()
        << "px\">" << svg::escape(st["stage"].get<std::string>()) << "</td>"
        << cell(*p, field + ".per_step_ms", st["per_step_ms"].get<double>(), "%.2f")
        << cell(*p, field + ".share", st["share"].get<double>(), "%.4f") << "</tr>\n";
    }
  o << "</table>\n";
}

void system_section(std::ostringstream& o, Plots& plots, size_t index, const SystemReport& s) {
  std::vector<svg::Series> series;
  for (size_t k = 0; k < s.runs.size(); ++k) {
    const std::string run = fs::path(s.runs[k].file).stem().string();
    std::vector<svg::Series> box, mask;
    accuracy_series(s.runs[k], run + " box", svg::palette(k), "", &box, nullptr);
    accuracy_series(s.runs[k], run + " mask", svg::palette(k), "5,3", nullptr, &mask);
    series.push_back(box.front()), series.push_back(mask.front());
  }
  const std::string file = "accuracy_" + std::to_string(index + 1) + "_" + safe_name(s.label) + ".svg";
  plots.add(file, svg::line_chart(s.label + ": accuracy over time", "minutes since run_start", "COCO AP", series,
                                  {{s.target_bbox, "box target", "#555"}, {s.target_segm, "mask target", "#999"}}));
  o << "<h2>" << svg::escape(s.label) << "</h2>\n<p>" << svg::escape(s.submitter) << "; " << svg::escape(s.folder) << "; "
    << (s.described ? std::to_string(s.nodes) + " node(s), " + std::to_string(s.accelerators) + " " +
                          (s.has_accelerators ? "accelerator(s) " : "host processor(s), no accelerator ")
                    : "nodes and accelerators unknown: " + svg::escape(s.description.problem) + " ")
    << svg::escape(s.accelerator_model)
    << (s.framework.empty() ? "" : "; " + svg::escape(s.framework)) << "; ruleset " << svg::escape(s.ruleset)
    << (s.ruleset_source == "path" ? " (the round its path names)" : s.ruleset_source == "default" ? " (by default)" : "")
    << (s.score_note.empty() ? "" : "; " + svg::escape(s.score_note)) << "</p>\n"
    << "<table><tr><th>result</th><th>status</th><th>seed</th><th>minutes</th><th>epochs</th><th>images/s</th>"
    << "<th>throughput from</th><th>compliance</th></tr>\n";
  for (const RunSummary& r : s.runs) {
    const auto shown = [](const std::optional<double>& v, const char* format, const char* missing) {
      return v ? format_number(*v, format) : std::string(missing);
    };
    o << "<tr><td>" << svg::escape(fs::path(r.file).filename().string()) << "</td>" << text_cell(r.run.status)
      << "<td>" << (r.run.seed ? std::to_string(*r.run.seed) : "-") << "</td><td class=\"num\">"
      << shown(r.minutes, "%.4f", kNotLogged) << "</td><td class=\"num\">" << shown(r.epochs_to_converge, "%.0f", "-")
      << "</td><td class=\"num\">" << shown(r.throughput.images_per_s, "%.2f", kNotLogged) << "</td>"
      << text_cell(r.throughput.source + (r.throughput.note.empty() ? "" : " (" + r.throughput.note + ")")) << "<td class=\""
      << (r.compliant ? "pass\">compliant" : "fail\">" + svg::escape(r.check_error)) << "</td></tr>\n";
  }
  o << "</table>\n" << plots.figure(file, s.label + ": every run's box (solid) and mask (dashed) AP over time");
}

}  // namespace

std::string write_report_html(const std::vector<SystemReport>& systems, const std::string& dir_name) {
  const fs::path dir(dir_name);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw ReportError("cannot create " + dir_name + ": " + ec.message());
  if (systems.empty()) throw ReportError("no systems to report");
  const std::vector<const SystemReport*> order = comparison_order(systems);
  Plots plots{.dir = dir};
  comparison_plots(plots, order);

  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>mlperf-maskrcnn report</title>\n"
    << "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin:1em 0;font-size:13px}"
    << "td,th{border:1px solid #ccc;padding:3px 6px}td{white-space:nowrap}"
    << "td.fw{max-width:12em;overflow:hidden;text-overflow:ellipsis;font-size:90%}td.num{text-align:right;font-variant-numeric:tabular-nums}"
    << "th{background:#f3f3f3}tr.group th{text-align:left;background:#fafafa}.fail{color:#b00}.pass{color:#070}"
    << ".na{color:#777}.note{color:#777;font-size:85%}.swatch{display:inline-block;width:12px;height:12px;margin-right:6px;vertical-align:middle}"
    << "figure{margin:1em 0}figcaption{color:#555;font-size:90%}svg{border:1px solid #eee}</style>\n"
    << "</head><body>\n<h1>Mask R-CNN results: systems compared</h1>\n"
    << "<p>MLPerf Training, each system by the ruleset of its round (the rules column: its compliance check, scoring "
    << "and RCPs; the round its folder's path names, training_results_vX.Y, else 3.1.0). "
    << "Score: the official result_summarizer's olympic mean of the runs' time to "
    << "train (a run failing the compliance check dropped, at most one). RCP: the official rcp_checker's verdict with "
    << "the pruned reference points; it decides closed-division results only (n/a in the open division). "
    << "Images/s per accelerator: the median over the runs, from the log's own throughput events where it has them, "
    << "else the images the kept steps cover (this project's runs), else the epochs trained times the real epoch size "
    << "over the training time: COCO train2017's 117,266 images in the closed division, train_samples elsewhere; a "
    << "train_samples that disagrees with the evidence is noted. Scaling efficiency: the speedup over the smallest node "
    << "count of the same node (submitter, accelerator model and count a node, division, round), against linear. "
    << "Systems are grouped and coloured by accelerator model.</p>\n";
  summary_table(o, order);
  o << plots.figure("score.svg", "score per system, sorted; dots: the individual runs")
    << plots.figure("throughput.svg", "training images/s per accelerator, grouped by accelerator model")
    << plots.figure("accuracy_box.svg", "box AP of each system's median run against the target")
    << plots.figure("accuracy_mask.svg", "mask AP of each system's median run against the target");
  time_tables(o, order);
  o << plots.figure("time.svg", "where a run's time goes, mean per run");
  for (size_t i = 0; i < order.size(); ++i) system_section(o, plots, i, *order[i]);
  o << "</body></html>\n";
  const fs::path page = dir / "index.html";
  write_file(page, o.str());
  return page.string();
}

}  // namespace mrcnn::analysis