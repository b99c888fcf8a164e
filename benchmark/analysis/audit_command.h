// mlperf-maskrcnn audit RUN_A RUN_B | --replay RUN: see audit.h; main-like (argv[0] is "audit").
#pragma once

namespace mrcnn::analysis {

int audit_main(int argc, char** argv);

}  // namespace mrcnn::analysis
