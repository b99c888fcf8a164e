#include "benchmark/analysis/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace mrcnn::analysis::svg {

namespace {

constexpr double kFont = 12;        // px, every text but the title
constexpr double kCharWidth = 7.6;  // px per character at kFont: wider than DejaVu Sans' widest digits
constexpr double kTitleY = 22;

std::string fmt(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f", v);
  return b;
}

std::string tick_label(double v, double step) {
  char b[32];
  const int decimals = step >= 1 ? 0 : static_cast<int>(std::ceil(-std::log10(step) - 1e-9));
  std::snprintf(b, sizeof b, "%.*f", std::min(decimals, 6), v);
  return b;
}

// Ticks at 1, 2 or 5 times a power of ten covering [lo, hi].
struct Axis {
  double lo, hi, step;
  Axis(double min, double max, int target = 6) {
    if (!(max > min)) max = min + 1;
    const double raw = (max - min) / target;
    const double mag = std::pow(10, std::floor(std::log10(raw)));
    const double norm = raw / mag;
    step = (norm < 1.5 ? 1 : norm < 3.5 ? 2 : norm < 7.5 ? 5 : 10) * mag;
    lo = std::floor(min / step) * step;
    hi = std::ceil(max / step) * step;
  }
  double at(double v, double from, double to) const { return from + (v - lo) / (hi - lo) * (to - from); }
};

void open_svg(std::ostringstream& o, double width, double height, const std::string& title) {
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << fmt(width) << "\" height=\"" << fmt(height)
    << "\" viewBox=\"0 0 " << fmt(width) << " " << fmt(height) << "\" font-family=\"sans-serif\" font-size=\"" << kFont
    << "\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"" << fmt(width / 2) << "\" y=\"" << kTitleY
    << "\" text-anchor=\"middle\" font-size=\"15\">" << escape(title) << "</text>\n";
}

// Legend entries flowing in rows under the title, within `width`; returns the rows' height.
double legend_rows(std::ostringstream& o, const std::vector<LegendEntry>& entries, double left, double width, double top) {
  double x = left, y = top;
  for (const LegendEntry& e : entries) {
    const double w = 20 + text_width(e.name) + 18;
    if (x > left && x + w > left + width) x = left, y += 18;
    if (e.dot) o << "<circle cx=\"" << fmt(x + 6) << "\" cy=\"" << fmt(y) << "\" r=\"4\" fill=\"" << e.color << "\"/>\n";
    else o << "<rect x=\"" << fmt(x) << "\" y=\"" << fmt(y - 6) << "\" width=\"12\" height=\"12\" fill=\"" << e.color << "\"/>\n";
    o << "<text x=\"" << fmt(x + 18) << "\" y=\"" << fmt(y + 4) << "\">" << escape(e.name) << "</text>\n";
    x += w;
  }
  return entries.empty() ? 0 : y - top + 18;
}

// The frame of the horizontal charts: a label column, the plot, a value column; one row per bar.
struct Rows {
  double label_w, plot_left, plot_w = 460, value_w, top, row_h = 20, height = 0;
  Axis x;
  Rows(double label_width, double value_width, double top_, Axis axis)
      : label_w(std::max(80.0, label_width + 16)), plot_left(label_w + 10), value_w(std::max(40.0, value_width + 16)),
        top(top_), x(axis) {}
  double width() const { return plot_left + plot_w + value_w; }
  double px(double v) const { return x.at(v, plot_left, plot_left + plot_w); }
  double bottom() const { return top + height; }
  // The x axis under the rows: grid, ticks and the axis' name; returns the chart's height.
  double axis(std::ostringstream& o, const std::string& name) const {
    for (double v = x.lo; v <= x.hi + x.step / 2; v += x.step)
      o << "<line x1=\"" << fmt(px(v)) << "\" x2=\"" << fmt(px(v)) << "\" y1=\"" << fmt(top) << "\" y2=\""
        << fmt(bottom()) << "\" stroke=\"#e5e5e5\"/>\n<text x=\"" << fmt(px(v)) << "\" y=\"" << fmt(bottom() + 16)
        << "\" text-anchor=\"middle\">" << tick_label(v, x.step) << "</text>\n";
    o << "<line x1=\"" << fmt(plot_left) << "\" x2=\"" << fmt(plot_left) << "\" y1=\"" << fmt(top) << "\" y2=\""
      << fmt(bottom()) << "\" stroke=\"#333\"/>\n<text x=\"" << fmt(plot_left + plot_w / 2) << "\" y=\""
      << fmt(bottom() + 36) << "\" text-anchor=\"middle\">" << escape(name) << "</text>\n";
    return bottom() + 48;
  }
  void label(std::ostringstream& o, double y, const std::string& text) const {
    o << "<text x=\"" << fmt(label_w + 4) << "\" y=\"" << fmt(y + 4) << "\" text-anchor=\"end\">" << escape(text) << "</text>\n";
  }
};

// The width a chart needs for its title (15 px, centred) with a margin each side.
double title_width(const std::string& title) { return text_width(title) * 15 / kFont + 20; }

double widest(const std::vector<std::string>& texts) {
  double w = 0;
  for (const std::string& t : texts) w = std::max(w, text_width(t));
  return w;
}

// Renders the body after the header (title and legend) is known, then prepends the header: the
// chart's height is only known once the rows are laid out.
std::string assemble(double width, double height, const std::string& title, const std::string& legend_svg,
                     const std::string& body) {
  std::ostringstream o;
  open_svg(o, std::max(width, title_width(title)), height, title);
  o << legend_svg << body << "</svg>\n";
  return o.str();
}

}  // namespace

std::string palette(size_t i) {
  static const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
                                  "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#ad494a", "#637939", "#e7ba52",
                                  "#7b4173", "#3182bd", "#31a354", "#756bb1", "#636363", "#e6550d"};
  return kColors[i % (sizeof kColors / sizeof *kColors)];
}

std::string dash_pattern(size_t i) {
  static const char* kDashes[kDashPatterns] = {"", "6,3", "2,3", "9,3,2,3", "12,4", "4,2,1,2"};
  return kDashes[i % kDashPatterns];
}

std::string shade(const std::string& color, size_t step) {
  if (color.size() != 7 || color[0] != '#' || step == 0) return color;
  const double mix = 0.25 * static_cast<double>(std::min<size_t>(step, 3));
  char out[8];
  int rgb[3];
  for (int k = 0; k < 3; ++k) {
    const int v = std::stoi(color.substr(1 + 2 * k, 2), nullptr, 16);
    rgb[k] = static_cast<int>(std::lround(v + (255 - v) * mix));
  }
  std::snprintf(out, sizeof out, "#%02x%02x%02x", rgb[0], rgb[1], rgb[2]);
  return out;
}

double text_width(const std::string& text) {
  size_t chars = 0;
  for (unsigned char c : text) chars += (c & 0xC0) != 0x80;  // UTF-8: count the first byte of each character
  return kCharWidth * static_cast<double>(chars);
}

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string line_chart(const std::string& title, const std::string& x_label, const std::string& y_label,
                       const std::vector<Series>& series, const std::vector<Threshold>& thresholds) {
  double xmin = 0, xmax = 0, ymin = 0, ymax = 0;
  bool any = false;
  for (const Series& s : series)
    for (const auto& [x, y] : s.points) {
      xmin = any ? std::min(xmin, x) : x, xmax = any ? std::max(xmax, x) : x;
      ymax = any ? std::max(ymax, y) : y;
      any = true;
    }
  for (const Threshold& t : thresholds) ymax = std::max(ymax, t.y);
  xmin = std::min(xmin, 0.0);
  std::vector<std::string> names;
  for (const Series& s : series) names.push_back(s.name);
  // The legend holds one row per series on the right: it sets the chart's height and right margin.
  constexpr double kLeft = 70, kTop = 40, kBottom = 60, kPlotW = 480;
  const double right = 40 + widest(names), width = std::max(kLeft + kPlotW + right, title_width(title));
  const double height = std::max(380.0, kTop + 18 * static_cast<double>(series.size()) + kBottom);
  const Axis ax(xmin, xmax), ay(ymin, ymax * 1.05);
  const auto px = [&](double v) { return ax.at(v, kLeft, kLeft + kPlotW); };
  const auto py = [&](double v) { return ay.at(v, height - kBottom, kTop); };
  std::ostringstream o;
  open_svg(o, width, height, title);
  for (double v = ay.lo; v <= ay.hi + ay.step / 2; v += ay.step)
    o << "<line x1=\"" << kLeft << "\" x2=\"" << kLeft + kPlotW << "\" y1=\"" << fmt(py(v)) << "\" y2=\"" << fmt(py(v))
      << "\" stroke=\"#e5e5e5\"/>\n<text x=\"" << kLeft - 6 << "\" y=\"" << fmt(py(v) + 4) << "\" text-anchor=\"end\">"
      << tick_label(v, ay.step) << "</text>\n";
  o << "<text transform=\"translate(16," << fmt((kTop + height - kBottom) / 2) << ") rotate(-90)\" text-anchor=\"middle\">"
    << escape(y_label) << "</text>\n<line x1=\"" << kLeft << "\" x2=\"" << kLeft << "\" y1=\"" << kTop << "\" y2=\""
    << fmt(height - kBottom) << "\" stroke=\"#333\"/>\n<line x1=\"" << kLeft << "\" x2=\"" << kLeft + kPlotW << "\" y1=\""
    << fmt(height - kBottom) << "\" y2=\"" << fmt(height - kBottom) << "\" stroke=\"#333\"/>\n";
  for (double v = ax.lo; v <= ax.hi + ax.step / 2; v += ax.step)
    o << "<text x=\"" << fmt(px(v)) << "\" y=\"" << fmt(height - kBottom + 20) << "\" text-anchor=\"middle\">"
      << tick_label(v, ax.step) << "</text>\n";
  o << "<text x=\"" << kLeft + kPlotW / 2 << "\" y=\"" << fmt(height - 18) << "\" text-anchor=\"middle\">"
    << escape(x_label) << "</text>\n";
  for (size_t k = 0; k < thresholds.size(); ++k) {  // labels alternate right and left: equal targets stay legible
    const Threshold& t = thresholds[k];
    o << "<line x1=\"" << kLeft << "\" x2=\"" << kLeft + kPlotW << "\" y1=\"" << fmt(py(t.y)) << "\" y2=\""
      << fmt(py(t.y)) << "\" stroke=\"" << t.color << "\" stroke-dasharray=\"2,4\"/>\n<text x=\""
      << (k % 2 ? kLeft + 4 : kLeft + kPlotW - 4) << "\" y=\"" << fmt(py(t.y) - 4) << "\" text-anchor=\""
      << (k % 2 ? "start" : "end") << "\" fill=\"" << t.color
      << "\" stroke=\"white\" stroke-width=\"3\" paint-order=\"stroke\">" << escape(t.label) << "</text>\n";
  }
  for (size_t i = 0; i < series.size(); ++i) {
    const Series& s = series[i];
    o << "<polyline fill=\"none\" stroke=\"" << s.color << "\" stroke-width=\"2\""
      << (s.dash.empty() ? "" : " stroke-dasharray=\"" + s.dash + "\"") << " points=\"";
    for (const auto& [x, y] : s.points) o << fmt(px(x)) << "," << fmt(py(y)) << " ";
    o << "\"/>\n";
    for (const auto& [x, y] : s.points)
      o << "<circle cx=\"" << fmt(px(x)) << "\" cy=\"" << fmt(py(y)) << "\" r=\"3\" fill=\"" << s.color << "\"/>\n";
    const double y = kTop + 8 + 18 * static_cast<double>(i), x = kLeft + kPlotW + 12;
    o << "<line x1=\"" << fmt(x) << "\" x2=\"" << fmt(x + 22) << "\" y1=\"" << fmt(y) << "\" y2=\"" << fmt(y)
      << "\" stroke=\"" << s.color << "\" stroke-width=\"2.5\"" << (s.dash.empty() ? "" : " stroke-dasharray=\"" + s.dash + "\"")
      << "/>\n<text x=\"" << fmt(x + 28) << "\" y=\"" << fmt(y + 4) << "\">" << escape(s.name) << "</text>\n";
  }
  o << "</svg>\n";
  return o.str();
}

namespace {

// A log10 axis over [lo, hi] padded to the 1-2-5 ticks around it.
struct LogAxis {
  double lo, hi;
  LogAxis(double a, double b) {
    const auto below = [](double v) {
      const double d = std::pow(10.0, std::floor(std::log10(v)));
      return v >= 5 * d ? 5 * d : v >= 2 * d ? 2 * d : d;
    };
    const auto above = [](double v) {
      const double d = std::pow(10.0, std::floor(std::log10(v)));
      return v <= d ? d : v <= 2 * d ? 2 * d : v <= 5 * d ? 5 * d : 10 * d;
    };
    lo = below(a);
    hi = above(std::max(b, a * 1.0001));
  }
  double at(double v, double from, double to) const {
    return from + (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo)) * (to - from);
  }
  std::vector<double> ticks() const {
    std::vector<double> t;
    for (double d = std::pow(10.0, std::floor(std::log10(lo))); d <= hi * 1.0001; d *= 10)
      for (double m : {1.0, 2.0, 5.0})
        if (m * d >= lo * 0.9999 && m * d <= hi * 1.0001) t.push_back(m * d);
    return t;
  }
};

std::string log_tick(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", v);
  return b;
}

}  // namespace

std::string loglog_chart(const std::string& title, const std::string& x_label, const std::string& y_label,
                         const std::vector<BandSeries>& bands, const std::vector<Series>& lines, const std::vector<Series>& marks) {
  double xmin = INFINITY, xmax = 0, ymin = INFINITY, ymax = 0;
  const auto take = [&](double x, double y) {
    if (!(x > 0) || !(y > 0)) return;
    xmin = std::min(xmin, x), xmax = std::max(xmax, x), ymin = std::min(ymin, y), ymax = std::max(ymax, y);
  };
  for (const BandSeries& b : bands)
    for (const auto& [x, lo, hi] : b.points) take(x, lo), take(x, hi);
  for (const auto* group : {&lines, &marks})
    for (const Series& s : *group)
      for (const auto& [x, y] : s.points) take(x, y);
  if (!(xmax > 0)) xmin = 1, xmax = 10, ymin = 1, ymax = 10;
  std::vector<std::string> names;
  for (const BandSeries& b : bands) names.push_back(b.name);
  for (const auto* group : {&lines, &marks})
    for (const Series& s : *group) names.push_back(s.name);
  constexpr double kLeft = 70, kTop = 40, kBottom = 60, kPlotW = 480;
  const double right = 40 + widest(names), width = std::max(kLeft + kPlotW + right, title_width(title));
  const double height = std::max(380.0, kTop + 18 * static_cast<double>(names.size()) + kBottom);
  const LogAxis ax(xmin, xmax), ay(ymin, ymax);
  const auto px = [&](double v) { return ax.at(v, kLeft, kLeft + kPlotW); };
  const auto py = [&](double v) { return ay.at(v, height - kBottom, kTop); };
  std::ostringstream o;
  open_svg(o, width, height, title);
  for (double v : ay.ticks())
    o << "<line x1=\"" << kLeft << "\" x2=\"" << kLeft + kPlotW << "\" y1=\"" << fmt(py(v)) << "\" y2=\"" << fmt(py(v))
      << "\" stroke=\"#e5e5e5\"/>\n<text x=\"" << kLeft - 6 << "\" y=\"" << fmt(py(v) + 4) << "\" text-anchor=\"end\">"
      << log_tick(v) << "</text>\n";
  for (double v : ax.ticks())
    o << "<line x1=\"" << fmt(px(v)) << "\" x2=\"" << fmt(px(v)) << "\" y1=\"" << kTop << "\" y2=\"" << fmt(height - kBottom)
      << "\" stroke=\"#f0f0f0\"/>\n<text x=\"" << fmt(px(v)) << "\" y=\"" << fmt(height - kBottom + 20)
      << "\" text-anchor=\"middle\">" << log_tick(v) << "</text>\n";
  o << "<text transform=\"translate(16," << fmt((kTop + height - kBottom) / 2) << ") rotate(-90)\" text-anchor=\"middle\">"
    << escape(y_label) << "</text>\n<line x1=\"" << kLeft << "\" x2=\"" << kLeft << "\" y1=\"" << kTop << "\" y2=\""
    << fmt(height - kBottom) << "\" stroke=\"#333\"/>\n<line x1=\"" << kLeft << "\" x2=\"" << kLeft + kPlotW << "\" y1=\""
    << fmt(height - kBottom) << "\" y2=\"" << fmt(height - kBottom) << "\" stroke=\"#333\"/>\n<text x=\""
    << kLeft + kPlotW / 2 << "\" y=\"" << fmt(height - 18) << "\" text-anchor=\"middle\">" << escape(x_label) << "</text>\n";
  size_t row = 0;
  const auto legend = [&](const std::string& name, const std::string& mark) {
    const double y = kTop + 8 + 18 * static_cast<double>(row++), x = kLeft + kPlotW + 12;
    o << "<g transform=\"translate(" << fmt(x) << "," << fmt(y) << ")\">" << mark << "</g><text x=\"" << fmt(x + 28) << "\" y=\""
      << fmt(y + 4) << "\">" << escape(name) << "</text>\n";
  };
  for (const BandSeries& b : bands) {
    o << "<polygon fill=\"" << b.color << "\" fill-opacity=\"0.18\" stroke=\"none\" points=\"";
    for (const auto& [x, lo, hi] : b.points) o << fmt(px(x)) << "," << fmt(py(hi)) << " ";
    for (auto it = b.points.rbegin(); it != b.points.rend(); ++it)
      o << fmt(px(std::get<0>(*it))) << "," << fmt(py(std::get<1>(*it))) << " ";
    o << "\"/>\n";
    legend(b.name, "<rect x=\"0\" y=\"-6\" width=\"22\" height=\"12\" fill=\"" + b.color + "\" fill-opacity=\"0.18\"/>");
  }
  for (const Series& s : lines) {
    const std::string dash = s.dash.empty() ? "" : " stroke-dasharray=\"" + s.dash + "\"";
    o << "<polyline fill=\"none\" stroke=\"" << s.color << "\" stroke-width=\"2\"" << dash << " points=\"";
    for (const auto& [x, y] : s.points) o << fmt(px(x)) << "," << fmt(py(y)) << " ";
    o << "\"/>\n";
    for (const auto& [x, y] : s.points)
      o << "<circle cx=\"" << fmt(px(x)) << "\" cy=\"" << fmt(py(y)) << "\" r=\"3\" fill=\"" << s.color << "\"/>\n";
    legend(s.name, "<line x1=\"0\" x2=\"22\" y1=\"0\" y2=\"0\" stroke=\"" + s.color + "\" stroke-width=\"2.5\"" + dash + "/>");
  }
  const auto diamond = [](double x, double y, const std::string& color) {
    return "<path d=\"M" + fmt(x) + "," + fmt(y - 6) + " l6,6 l-6,6 l-6,-6 z\" fill=\"" + color + "\" stroke=\"#222\"/>";
  };
  for (const Series& s : marks) {
    for (const auto& [x, y] : s.points) o << diamond(px(x), py(y), s.color) << "\n";
    legend(s.name, diamond(11, 0, s.color));
  }
  o << "</svg>\n";
  return o.str();
}

std::string bar_chart(const std::string& title, const std::string& x_label, const std::vector<BarGroup>& groups,
                      const std::vector<LegendEntry>& legend) {
  double xmax = 0;
  std::vector<std::string> labels, values;
  for (const BarGroup& g : groups)
    for (const Bar& b : g.bars) {
      xmax = std::max(xmax, b.value);
      for (double d : b.dots) xmax = std::max(xmax, d);
      labels.push_back(b.label), values.push_back(b.value_text);
    }
  Rows rows(widest(labels), widest(values), 0, Axis(0, xmax * 1.05));
  std::ostringstream head;
  rows.top = 40 + legend_rows(head, legend, 10, rows.width() - 20, 40) + 6;
  std::ostringstream o;
  double y = rows.top;
  for (const BarGroup& g : groups) {
    if (!g.title.empty()) {
      o << "<text x=\"10\" y=\"" << fmt(y + 15) << "\" font-weight=\"bold\">" << escape(g.title) << "</text>\n";
      y += 22;
    }
    for (const Bar& b : g.bars) {
      const double mid = y + rows.row_h / 2;
      rows.label(o, mid, b.label);
      o << "<rect x=\"" << fmt(rows.px(0)) << "\" y=\"" << fmt(mid - 7) << "\" width=\"" << fmt(rows.px(b.value) - rows.px(0))
        << "\" height=\"14\" fill=\"" << b.color << "\" fill-opacity=\"0.8\"/>\n";
      double end = b.value;
      for (double d : b.dots) {
        o << "<circle cx=\"" << fmt(rows.px(d)) << "\" cy=\"" << fmt(mid) << "\" r=\"3.5\" fill=\"#222\"/>\n";
        end = std::max(end, d);
      }
      if (!b.value_text.empty())
        o << "<text x=\"" << fmt(rows.px(end) + 8) << "\" y=\"" << fmt(mid + 4) << "\">" << escape(b.value_text) << "</text>\n";
      y += rows.row_h;
    }
  }
  rows.height = y - rows.top;
  const double height = rows.axis(o, x_label);
  return assemble(rows.width(), height, title, head.str(), o.str());
}

std::string stacked_bar_chart(const std::string& title, const std::string& x_label,
                              const std::vector<std::string>& names, const std::vector<std::string>& colors,
                              const std::vector<Stack>& stacks) {
  double xmax = 0;
  std::vector<std::string> labels;
  for (const Stack& s : stacks) {
    double total = 0;
    for (double p : s.parts) total += std::max(0.0, p);
    xmax = std::max(xmax, total);
    labels.push_back(s.label);
  }
  Rows rows(widest(labels), 0, 0, Axis(0, xmax * 1.02));
  std::vector<LegendEntry> legend;
  for (size_t k = 0; k < names.size() && k < colors.size(); ++k) legend.push_back({names[k], colors[k]});
  std::ostringstream head;
  rows.top = 40 + legend_rows(head, legend, 10, rows.width() - 20, 40) + 6;
  std::ostringstream o;
  double y = rows.top;
  for (const Stack& s : stacks) {
    const double mid = y + rows.row_h / 2;
    rows.label(o, mid, s.label);
    double base = 0;
    for (size_t k = 0; k < s.parts.size() && k < colors.size(); ++k) {
      const double v = std::max(0.0, s.parts[k]);
      o << "<rect x=\"" << fmt(rows.px(base)) << "\" y=\"" << fmt(mid - 7) << "\" width=\"" << fmt(rows.px(base + v) - rows.px(base))
        << "\" height=\"14\" fill=\"" << colors[k] << "\"/>\n";
      base += v;
    }
    y += rows.row_h;
  }
  rows.height = y - rows.top;
  const double height = rows.axis(o, x_label);
  return assemble(rows.width(), height, title, head.str(), o.str());
}

}  // namespace mrcnn::analysis::svg