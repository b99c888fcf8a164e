// Small, dependency-free SVG charts for the report page: a line chart (accuracy over time),
// horizontal bar charts with the individual runs as dots (score per system, throughput grouped by
// accelerator model) and a horizontal stacked bar chart (where the time went). Self-contained SVG
// documents that any browser shows offline. Every chart sizes itself to its labels and its number
// of bars and legend entries, so that no two texts overlap at any count (the report's browser test
// checks the page's text boxes).
#pragma once

#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace mrcnn::analysis::svg {

struct Series {
  std::string name;
  std::vector<std::pair<double, double>> points;
  std::string color;
  std::string dash;  // an SVG stroke-dasharray ("5,3"); "" for a solid line
};

struct Threshold {
  double y;
  std::string label;
  std::string color;
};

struct Bar {
  std::string label;
  double value = 0;
  std::vector<double> dots;  // individual values drawn over the bar
  std::string color;
  std::string value_text;    // drawn after the bar; "" for none
};

struct BarGroup {
  std::string title;  // a heading row above the group's bars; "" for none
  std::vector<Bar> bars;
};

struct LegendEntry {
  std::string name, color;
  bool dot = false;  // a dot (one run) instead of a colour swatch
};

struct Stack {
  std::string label;
  std::vector<double> parts;  // one per part name
};

std::string line_chart(const std::string& title, const std::string& x_label, const std::string& y_label,
                       const std::vector<Series>& series, const std::vector<Threshold>& thresholds);
// One bar a row, labels on the left, groups under their headings, the legend under the title.
std::string bar_chart(const std::string& title, const std::string& x_label, const std::vector<BarGroup>& groups,
                      const std::vector<LegendEntry>& legend);
// Log-log axes (both > 0): `bands` shaded between their low and high values (x, low, high),
// `lines` drawn through their points, `marks` as unconnected diamonds (say, published scores);
// decade ticks labelled 1, 2, 5; the legend on the right, one row an entry.
struct BandSeries {
  std::string name;
  std::vector<std::tuple<double, double, double>> points;  // x, low, high
  std::string color;
};
std::string loglog_chart(const std::string& title, const std::string& x_label, const std::string& y_label,
                         const std::vector<BandSeries>& bands, const std::vector<Series>& lines, const std::vector<Series>& marks);
std::string stacked_bar_chart(const std::string& title, const std::string& x_label,
                              const std::vector<std::string>& part_names, const std::vector<std::string>& part_colors,
                              const std::vector<Stack>& stacks);

// A dash pattern of a fixed list ("" solid first): series of one colour told apart.
inline constexpr size_t kDashPatterns = 6;
std::string dash_pattern(size_t i);
// A "#rrggbb" colour mixed with white: step 0 is the colour, each step 25 % lighter (at most 75 %).
std::string shade(const std::string& color, size_t step);
// A color of a fixed, distinguishable palette (20 colors, then again).
std::string palette(size_t i);
// The width a text takes at the charts' font size, estimated on the safe side.
double text_width(const std::string& text);
// Text made safe inside XML/HTML.
std::string escape(const std::string& text);

}  // namespace mrcnn::analysis::svg
