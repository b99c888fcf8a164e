// mlperf-maskrcnn export RUN [--tensorboard DIR] [--csv DIR]: a run's metrics as a TensorBoard
// event file and CSV tables (export_command.cpp's usage); main-like (argv[0] is "export").
#pragma once

namespace mrcnn::analysis {

int export_main(int argc, char** argv);

}  // namespace mrcnn::analysis
