// The numbers every output of `report` and `forecast` writes alike.
#pragma once

#include <string>
#include <vector>

namespace mrcnn::analysis {

// A number as printf's `format` writes it (the report's table, notes and page share it).
std::string format_number(double v, const char* format);

// The median of a non-empty `v` (the mean of the middle two for an even count).
double median(std::vector<double> v);

}  // namespace mrcnn::analysis
