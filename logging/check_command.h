// `mlperf-maskrcnn check LOG...`: the compliance check as a command.
// Exit status: 0 every log passes, 1 a log fails, 2 a log cannot be read (or bad arguments).
#pragma once

namespace mrcnn::logging {

int check_main(int argc, char** argv);

}  // namespace mrcnn::logging
