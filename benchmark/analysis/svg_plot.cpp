#include "benchmark/analysis/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace mrcnn::analysis::svg {

namespace {

constexpr double kWidth = 720, kHeight = 380;
constexpr double kLeft = 70, kRight = 170, kTop = 40, kBottom = 60;  // margins; legend on the right

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
};

struct Frame {
  Axis x, y;
  double px(double v) const { return kLeft + (v - x.lo) / (x.hi - x.lo) * (kWidth - kLeft - kRight); }
  double py(double v) const { return kHeight - kBottom - (v - y.lo) / (y.hi - y.lo) * (kHeight - kTop - kBottom); }
};

void open_svg(std::ostringstream& o, const std::string& title) {
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << kHeight
    << "\" viewBox=\"0 0 " << kWidth << " " << kHeight << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"" << kWidth / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">" << escape(title)
    << "</text>\n";
}

void y_axis(std::ostringstream& o, const Frame& f, const std::string& label) {
  for (double v = f.y.lo; v <= f.y.hi + f.y.step / 2; v += f.y.step) {
    o << "<line x1=\"" << kLeft << "\" x2=\"" << kWidth - kRight << "\" y1=\"" << fmt(f.py(v)) << "\" y2=\""
      << fmt(f.py(v)) << "\" stroke=\"#e5e5e5\"/>\n"
      << "<text x=\"" << kLeft - 6 << "\" y=\"" << fmt(f.py(v) + 4) << "\" text-anchor=\"end\">"
      << tick_label(v, f.y.step) << "</text>\n";
  }
  o << "<text transform=\"translate(16," << (kTop + kHeight - kBottom) / 2 << ") rotate(-90)\" text-anchor=\"middle\">"
    << escape(label) << "</text>\n"
    << "<line x1=\"" << kLeft << "\" x2=\"" << kLeft << "\" y1=\"" << kTop << "\" y2=\"" << kHeight - kBottom
    << "\" stroke=\"#333\"/>\n<line x1=\"" << kLeft << "\" x2=\"" << kWidth - kRight << "\" y1=\"" << kHeight - kBottom
    << "\" y2=\"" << kHeight - kBottom << "\" stroke=\"#333\"/>\n";
}

void legend(std::ostringstream& o, size_t i, const std::string& name, const std::string& color, bool dashed) {
  const double y = kTop + 8 + 18 * static_cast<double>(i);
  const double x = kWidth - kRight + 12;
  o << "<line x1=\"" << x << "\" x2=\"" << x + 22 << "\" y1=\"" << y << "\" y2=\"" << y << "\" stroke=\"" << color
    << "\" stroke-width=\"2.5\"" << (dashed ? " stroke-dasharray=\"5,3\"" : "") << "/>\n"
    << "<text x=\"" << x + 28 << "\" y=\"" << y + 4 << "\">" << escape(name) << "</text>\n";
}

}  // namespace

std::string palette(size_t i) {
  static const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                  "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
  return kColors[i % (sizeof kColors / sizeof *kColors)];
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
  const Frame f{Axis(xmin, xmax), Axis(ymin, ymax * 1.05)};
  std::ostringstream o;
  open_svg(o, title);
  y_axis(o, f, y_label);
  for (double v = f.x.lo; v <= f.x.hi + f.x.step / 2; v += f.x.step)
    o << "<text x=\"" << fmt(f.px(v)) << "\" y=\"" << kHeight - kBottom + 16 << "\" text-anchor=\"middle\">"
      << tick_label(v, f.x.step) << "</text>\n";
  o << "<text x=\"" << (kLeft + kWidth - kRight) / 2 << "\" y=\"" << kHeight - 18 << "\" text-anchor=\"middle\">"
    << escape(x_label) << "</text>\n";
  for (size_t k = 0; k < thresholds.size(); ++k) {  // labels alternate right and left: equal targets stay legible
    const Threshold& t = thresholds[k];
    o << "<line x1=\"" << kLeft << "\" x2=\"" << kWidth - kRight << "\" y1=\"" << fmt(f.py(t.y)) << "\" y2=\""
      << fmt(f.py(t.y)) << "\" stroke=\"" << t.color << "\" stroke-dasharray=\"2,4\"/>\n<text x=\""
      << (k % 2 ? kLeft + 4 : kWidth - kRight - 4) << "\" y=\"" << fmt(f.py(t.y) - 4) << "\" text-anchor=\""
      << (k % 2 ? "start" : "end") << "\" fill=\"" << t.color << "\">" << escape(t.label) << "</text>\n";
  }
  size_t i = 0;
  for (const Series& s : series) {
    o << "<polyline fill=\"none\" stroke=\"" << s.color << "\" stroke-width=\"2\""
      << (s.dashed ? " stroke-dasharray=\"5,3\"" : "") << " points=\"";
    for (const auto& [x, y] : s.points) o << fmt(f.px(x)) << "," << fmt(f.py(y)) << " ";
    o << "\"/>\n";
    for (const auto& [x, y] : s.points)
      o << "<circle cx=\"" << fmt(f.px(x)) << "\" cy=\"" << fmt(f.py(y)) << "\" r=\"3\" fill=\"" << s.color << "\"/>\n";
    legend(o, i++, s.name, s.color, s.dashed);
  }
  o << "</svg>\n";
  return o.str();
}

std::string bar_chart(const std::string& title, const std::string& y_label, const std::vector<Bar>& bars) {
  double ymax = 0;
  for (const Bar& b : bars) {
    ymax = std::max(ymax, b.value);
    for (double d : b.dots) ymax = std::max(ymax, d);
  }
  const Frame f{Axis(0, std::max<double>(1, static_cast<double>(bars.size()))), Axis(0, ymax * 1.1)};
  std::ostringstream o;
  open_svg(o, title);
  y_axis(o, f, y_label);
  const double slot = (kWidth - kLeft - kRight) / std::max<double>(1, static_cast<double>(bars.size()));
  for (size_t i = 0; i < bars.size(); ++i) {
    const Bar& b = bars[i];
    const double x = kLeft + slot * (static_cast<double>(i) + 0.2), w = slot * 0.6;
    o << "<rect x=\"" << fmt(x) << "\" y=\"" << fmt(f.py(b.value)) << "\" width=\"" << fmt(w) << "\" height=\""
      << fmt(f.py(0) - f.py(b.value)) << "\" fill=\"" << b.color << "\" fill-opacity=\"0.75\"/>\n"
      << "<text x=\"" << fmt(x + w / 2) << "\" y=\"" << fmt(f.py(b.value) - 5) << "\" text-anchor=\"middle\">"
      << tick_label(b.value, 0.001) << "</text>\n"
      << "<text x=\"" << fmt(x + w / 2) << "\" y=\"" << kHeight - kBottom + 16 << "\" text-anchor=\"middle\">"
      << escape(b.label) << "</text>\n";
    for (size_t k = 0; k < b.dots.size(); ++k)
      o << "<circle cx=\"" << fmt(x + w * (0.2 + 0.6 * static_cast<double>(k) / std::max<double>(1, static_cast<double>(b.dots.size()) - 1)))
        << "\" cy=\"" << fmt(f.py(b.dots[k])) << "\" r=\"4\" fill=\"#222\"/>\n";
  }
  if (std::any_of(bars.begin(), bars.end(), [](const Bar& b) { return !b.dots.empty(); }))
    o << "<circle cx=\"" << kWidth - kRight + 22 << "\" cy=\"" << kTop + 8 << "\" r=\"4\" fill=\"#222\"/><text x=\""
      << kWidth - kRight + 40 << "\" y=\"" << kTop + 12 << "\">one run</text>\n";
  o << "</svg>\n";
  return o.str();
}

std::string stacked_bar_chart(const std::string& title, const std::string& y_label,
                              const std::vector<std::string>& names, const std::vector<std::string>& colors,
                              const std::vector<Stack>& stacks) {
  double ymax = 0;
  for (const Stack& s : stacks) {
    double total = 0;
    for (double p : s.parts) total += std::max(0.0, p);
    ymax = std::max(ymax, total);
  }
  const Frame f{Axis(0, 1), Axis(0, ymax * 1.05)};
  std::ostringstream o;
  open_svg(o, title);
  y_axis(o, f, y_label);
  const double slot = (kWidth - kLeft - kRight) / std::max<double>(1, static_cast<double>(stacks.size()));
  for (size_t i = 0; i < stacks.size(); ++i) {
    const double x = kLeft + slot * (static_cast<double>(i) + 0.2), w = slot * 0.6;
    double base = 0;
    for (size_t k = 0; k < stacks[i].parts.size() && k < colors.size(); ++k) {
      const double v = std::max(0.0, stacks[i].parts[k]);
      o << "<rect x=\"" << fmt(x) << "\" y=\"" << fmt(f.py(base + v)) << "\" width=\"" << fmt(w) << "\" height=\""
        << fmt(f.py(base) - f.py(base + v)) << "\" fill=\"" << colors[k] << "\"/>\n";
      base += v;
    }
    o << "<text x=\"" << fmt(x + w / 2) << "\" y=\"" << kHeight - kBottom + 16 << "\" text-anchor=\"middle\">"
      << escape(stacks[i].label) << "</text>\n";
  }
  for (size_t k = 0; k < names.size() && k < colors.size(); ++k) {
    const double y = kTop + 8 + 18 * static_cast<double>(k);
    o << "<rect x=\"" << kWidth - kRight + 12 << "\" y=\"" << y - 6 << "\" width=\"14\" height=\"12\" fill=\"" << colors[k]
      << "\"/><text x=\"" << kWidth - kRight + 32 << "\" y=\"" << y + 4 << "\">" << escape(names[k]) << "</text>\n";
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace mrcnn::analysis::svg
