// forecast's table, validation rows and JSON (forecast.h).
#include <algorithm>
#include <cmath>
#include <sstream>

#include "benchmark/analysis/forecast.h"

namespace mrcnn::analysis {

namespace {

std::string fmt(double v, const char* f) { return format_number(v, f); }

std::string joined(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

std::string band(const Forecast& f) { return fmt(f.minutes, "%.2f") + " (" + fmt(f.low, "%.2f") + "-" + fmt(f.high, "%.2f") + ")"; }

std::string size(const Target& t) { return std::to_string(t.nodes) + "x" + std::to_string(t.accelerators_per_node); }

}  // namespace

std::string format_forecasts(const std::vector<Measurement>& measured, const std::vector<Forecast>& forecasts) {
  std::ostringstream o;
  o << "measured:\n";
  for (const Measurement& m : measured)
    o << "  " << m.label << ": " << m.nodes << "x" << m.accelerators_per_node << " " << m.accelerator_model << ", batch "
      << fmt(m.batch, "%g") << " an accelerator (global " << m.global_batch << "), " << m.runs << " run(s): step "
      << fmt(m.step * 1000, "%.1f") << " ms, first " << fmt(m.first, "%.2f") << " s, eval pause " << fmt(m.pause, "%.2f")
      << " s, tail " << fmt(m.tail, "%.2f") << " s, " << (m.epochs > 0 ? fmt(m.epochs, "%.2f") + " epochs to converge" : "not converged")
      << ", " << fmt(m.minutes, "%.3f") << " min; "
      << (m.timed_ranks > 0 ? "ranks' own steps spread " + fmt(100 * m.step_cv, "%.1f") + " % (" + std::to_string(m.timed_ranks) + " timed); "
                            : std::string("ranks' own steps not logged; "))
      << "network " << (m.network_gbps ? fmt(*m.network_gbps, "%g") + " Gb/s (" + m.network_basis + ")" : std::string("not described"))
      << "\n";
  std::vector<std::vector<std::string>> rows{{"target", "nodes", "global", "batch", "minutes (band)", "compute", "stragglers", "all-reduce",
                                              "pauses", "start+tail", "epochs", "accel-h", "cost", "flags"}};
  for (const Forecast& f : forecasts) {
    if (!f.refused.empty()) {
      rows.push_back({f.target.name, size(f.target), std::to_string(f.target.global_batch), fmt(f.target.batch, "%g"),
                      "REFUSED", "", "", "", "", "", "", "", "", f.refused});
      continue;
    }
    const ForecastParts& p = f.parts;
    rows.push_back({f.target.name, size(f.target), std::to_string(f.target.global_batch),
                    fmt(f.target.batch, "%g") + " (" + f.batch_source + ")", band(f), fmt(p.compute / 60, "%.2f"),
                    fmt(p.straggler / 60, "%.2f"), fmt(p.allreduce / 60, "%.2f"), fmt(p.pauses / 60, "%.2f"), fmt((p.first + p.tail) / 60, "%.2f"),
                    fmt(p.epochs, "%.0f"), fmt(f.accelerator_hours, "%.1f"), f.cost ? fmt(*f.cost, "%.2f") : "-",
                    joined(f.flags, "; ")});
  }
  o << "\n" << aligned(rows, {false, true, true, false, true, true, true, true, true, true, true, true, true, false});
  o << "\nminutes: the forecast time to train, its band from what was not measured; compute, stragglers (the wait "
       "for the slowest rank beyond the measured node's), all-reduce (exposed), evaluation pauses and start+tail in minutes.\n";
  for (const Forecast& f : forecasts)
    if (f.refused.empty() && !f.dominant.empty())
      o << f.target.name << ": the band is widest in " << f.dominant << "; to narrow it: " << f.remedy << "\n";
  return o.str();
}

std::string format_validation(const Validation& v) {
  std::vector<std::vector<std::string>> rows{{"series", "measured", "target", "nodes", "global", "batch", "forecast (band)",
                                              "published", "error", "flags"}};
  for (const ValidationRow& r : v.rows) {
    const Forecast& f = r.forecast;
    std::vector<std::string> flags = f.flags;
    if (r.self) flags.insert(flags.begin(), "its own configuration");
    if (r.republished) flags.insert(flags.begin(), "republished: counted once");
    if (!f.refused.empty()) flags = {"REFUSED: " + f.refused};
    const bool known = f.target.global_batch > 0;
    rows.push_back({r.series, r.base, r.target, known ? size(f.target) : "?", known ? std::to_string(f.target.global_batch) : "?",
                    known ? fmt(f.target.batch, "%g") : "?",
                    f.refused.empty() ? band(f) : "-", r.published ? fmt(*r.published, "%.2f") : "-",
                    r.error ? fmt(100 * *r.error, "%+.1f %%") : "-", joined(flags, "; ")});
  }
  std::ostringstream o;
  o << aligned(rows, {false, false, false, true, true, true, true, true, true, false});
  o << "\n" << v.pairs << " distinct pairs (the smallest system of a series measured, a bigger one forecast): " << v.within_15
    << " within 15 %, " << v.within_25 << " within 25 %; the band held the published score for " << v.in_band << ".\n";
  return o.str();
}

logging::Json forecast_json(const Forecast& f, const std::optional<double>& published) {
  const ForecastParts& p = f.parts;
  logging::Json j{{"target", f.target.name}, {"nodes", f.target.nodes}, {"accelerators_per_node", f.target.accelerators_per_node},
                  {"accelerator_model", f.target.accelerator_model}, {"global_batch_size", f.target.global_batch},
                  {"batch_per_accelerator", f.target.batch}, {"dedicated_eval_ranks", f.target.eval_ranks},
                  {"network_gbps", f.target.network_gbps ? logging::Json(*f.target.network_gbps) : logging::Json(nullptr)},
                  {"network_assumed", f.target.network_assumed}, {"refused", f.refused.empty() ? logging::Json(nullptr) : logging::Json(f.refused)},
                  {"flags", f.flags}, {"published_minutes", published ? logging::Json(*published) : logging::Json(nullptr)}};
  if (!f.refused.empty()) return j;
  j["minutes"] = f.minutes;
  j["low"] = f.low;
  j["high"] = f.high;
  j["error"] = published ? logging::Json(f.minutes / *published - 1) : logging::Json(nullptr);
  j["batch_source"] = f.batch_source;
  j["dominant"] = f.dominant;
  j["remedy"] = f.remedy;
  j["parts_s"] = {{"first_step", p.first}, {"compute", p.compute}, {"stragglers", p.straggler}, {"allreduce_exposed", p.allreduce}, {"eval_pauses", p.pauses},
                  {"tail", p.tail}, {"epochs", p.epochs}, {"steps_per_epoch", p.steps_per_epoch},
                  {"step_compute", p.step_compute}, {"step_straggler", p.step_straggler}, {"step_allreduce", p.step_allreduce}, {"epoch", p.epoch}};
  j["accelerator_hours"] = f.accelerator_hours;
  j["cost"] = f.cost ? logging::Json(*f.cost) : logging::Json(nullptr);
  return j;
}

logging::Json validation_json(const Validation& v) {
  logging::Json rows = logging::Json::array();
  for (const ValidationRow& r : v.rows) {
    logging::Json j = forecast_json(r.forecast, r.published);
    j["series"] = r.series;
    j["target"] = r.target;
    j["measured"] = r.base;
    j["self"] = r.self;
    j["republished"] = r.republished;
    rows.push_back(j);
  }
  return {{"pairs", v.pairs}, {"within_15", v.within_15}, {"within_25", v.within_25}, {"in_band", v.in_band}, {"rows", rows}};
}

}  // namespace mrcnn::analysis
