// mlperf-maskrcnn report RESULTS_DIR...: see report.h; main-like (argv[0] is "report").
#pragma once

namespace mrcnn::analysis {

int report_main(int argc, char** argv);

}  // namespace mrcnn::analysis
