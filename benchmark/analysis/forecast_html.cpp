// forecast's page: the table, minutes against nodes (log-log, the band shaded, ideal scaling from
// the measured node, published scores of the same node) and where the time goes per target.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "benchmark/analysis/forecast.h"
#include "benchmark/analysis/svg_plot.h"

namespace mrcnn::analysis {

namespace {

namespace fs = std::filesystem;

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream out(p);
  out << text;
  if (!out) throw ForecastError("cannot write " + p.string());
}

std::string cell(const std::string& target, const std::string& field, double v, const char* format) {
  return "<td class=\"num\" data-system=\"" + svg::escape(target) + "\" data-field=\"" + field + "\">" + format_number(v, format) + "</td>";
}

}  // namespace

std::string write_forecast_html(const std::vector<Measurement>& measured, const std::vector<Forecast>& forecasts,
                                const std::vector<PublishedPoint>& published, const std::string& dir_name) {
  const fs::path dir(dir_name);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw ForecastError(dir_name + ": cannot create the folder (" + ec.message() + ")");
  std::vector<const Forecast*> scored;
  for (const Forecast& f : forecasts)
    if (f.refused.empty()) scored.push_back(&f);
  std::sort(scored.begin(), scored.end(), [](const Forecast* a, const Forecast* b) { return a->target.nodes < b->target.nodes; });

  svg::BandSeries band{.name = "forecast band", .color = "#1f77b4"};
  svg::Series line{.name = "forecast", .color = "#1f77b4"};
  svg::Series ideal{.name = "ideal scaling from the measured node", .color = "#888", .dash = "5,4"};
  for (const Forecast* f : scored) {
    const auto n = static_cast<double>(f->target.nodes);
    band.points.emplace_back(n, f->low, f->high);
    line.points.emplace_back(n, f->minutes);
  }
  if (!measured.empty() && !scored.empty()) {
    const Measurement& m = measured.front();
    for (const Forecast* f : scored)
      ideal.points.emplace_back(static_cast<double>(f->target.nodes), m.minutes * static_cast<double>(m.nodes) / static_cast<double>(f->target.nodes));
  }
  std::vector<svg::Series> marks;
  if (!published.empty()) {
    svg::Series pub{.name = "published scores of this node", .color = "#d62728"};
    for (const PublishedPoint& p : published) pub.points.emplace_back(static_cast<double>(p.nodes), p.minutes);
    marks.push_back(pub);
  }
  const std::string scaling = svg::loglog_chart("Time to train against nodes", "nodes", "minutes", {band}, {line, ideal}, marks);
  std::vector<svg::Stack> stacks;
  for (const Forecast* f : scored) {
    const ForecastParts& p = f->parts;
    stacks.push_back({.label = f->target.name, .parts = {p.compute / 60, p.straggler / 60, p.allreduce / 60, p.pauses / 60, (p.first + p.tail) / 60}});
  }
  const std::string time = svg::stacked_bar_chart("Where the time goes", "minutes",
                                                  {"compute", "slowest rank", "exposed all-reduce", "evaluation pauses", "start and tail"},
                                                  {"#1f77b4", "#ff7f0e", "#d62728", "#2ca02c", "#999999"}, stacks);
  write_file(dir / "scaling.svg", scaling);
  write_file(dir / "time.svg", time);

  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>mlperf-maskrcnn forecast</title>\n"
    << "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin:1em 0;font-size:13px}"
    << "td,th{border:1px solid #ccc;padding:3px 6px}td{white-space:nowrap}td.num{text-align:right;font-variant-numeric:tabular-nums}"
    << "th{background:#f3f3f3}.flag{color:#b00}figure{margin:1em 0}figcaption{color:#555;font-size:90%}svg{border:1px solid #eee}</style>\n"
    << "</head><body>\n<h1>Mask R-CNN: forecast time to train</h1>\n<p>Measured: ";
  for (size_t i = 0; i < measured.size(); ++i)
    o << (i ? "; " : "") << svg::escape(measured[i].label) << " (" << measured[i].nodes << "x" << measured[i].accelerators_per_node << " "
      << svg::escape(measured[i].accelerator_model) << ", batch " << format_number(measured[i].batch, "%g") << " an accelerator, "
      << format_number(measured[i].minutes, "%.2f") << " min)";
  o << ". The band comes from what was not measured; its widest term is named beside each target.</p>\n"
    << "<table><tr><th>target</th><th>nodes</th><th>global batch</th><th>batch an accelerator</th><th>minutes</th><th>low</th>"
    << "<th>high</th><th>accelerator-hours</th><th>widest term of the band</th><th>flags</th></tr>\n";
  for (const Forecast& f : forecasts) {
    const std::string& t = f.target.name;
    o << "<tr><td>" << svg::escape(t) << "</td>" << cell(t, "nodes", static_cast<double>(f.target.nodes), "%.0f")
      << cell(t, "global_batch_size", static_cast<double>(f.target.global_batch), "%.0f")
      << cell(t, "batch_per_accelerator", f.target.batch, "%g");
    if (!f.refused.empty()) {
      o << "<td colspan=\"6\" class=\"flag\">refused: " << svg::escape(f.refused) << "</td></tr>\n";
      continue;
    }
    std::string flags;
    for (const std::string& fl : f.flags) flags += (flags.empty() ? "" : "; ") + fl;
    o << cell(t, "minutes", f.minutes, "%.2f") << cell(t, "low", f.low, "%.2f") << cell(t, "high", f.high, "%.2f")
      << cell(t, "accelerator_hours", f.accelerator_hours, "%.1f") << "<td>" << svg::escape(f.dominant.empty() ? "-" : f.dominant)
      << "</td><td class=\"flag\">" << svg::escape(flags) << "</td></tr>\n";
  }
  o << "</table>\n<figure id=\"scaling\">" << scaling
    << "<figcaption>forecast minutes against nodes, the band shaded; dashed: the measured node's time divided by the node "
       "count; diamonds: published scores of the same node</figcaption></figure>\n<figure id=\"time\">"
    << time << "<figcaption>where each target's time goes, minutes</figcaption></figure>\n</body></html>\n";
  const fs::path page = dir / "index.html";
  write_file(page, o.str());
  return page.string();
}

}  // namespace mrcnn::analysis
