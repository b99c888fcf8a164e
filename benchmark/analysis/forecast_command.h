// mlperf-maskrcnn forecast: see forecast.h; main-like (argv[0] is "forecast").
#pragma once

namespace mrcnn::analysis {

int forecast_main(int argc, char** argv);

}  // namespace mrcnn::analysis
