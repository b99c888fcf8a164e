// Small, dependency-free SVG charts for the report page: a line chart (accuracy over time), a
// bar chart with the individual runs as dots (score per system), a stacked bar chart (where the
// time went). Self-contained SVG documents that any browser shows offline.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace mrcnn::analysis::svg {

struct Series {
  std::string name;
  std::vector<std::pair<double, double>> points;
  std::string color;
  bool dashed = false;
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
};

struct Stack {
  std::string label;
  std::vector<double> parts;  // one per part name
};

std::string line_chart(const std::string& title, const std::string& x_label, const std::string& y_label,
                       const std::vector<Series>& series, const std::vector<Threshold>& thresholds);
std::string bar_chart(const std::string& title, const std::string& y_label, const std::vector<Bar>& bars);
std::string stacked_bar_chart(const std::string& title, const std::string& y_label,
                              const std::vector<std::string>& part_names, const std::vector<std::string>& part_colors,
                              const std::vector<Stack>& stacks);

// A color of a fixed, distinguishable palette.
std::string palette(size_t i);
// Text made safe inside XML/HTML.
std::string escape(const std::string& text);

}  // namespace mrcnn::analysis::svg
