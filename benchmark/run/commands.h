// The harness's commands, each a `main`-like function (argv[0] is the command's name) in its
// own file: train_command.cpp, eval_command.cpp, predict_command.cpp, config_command.cpp,
// launch_command.cpp. Exit status 2 means bad input (nothing was written).
//
//   train    one timed, seeded MLPerf run (writes the run folder: run/run_folder.h)
//   eval     COCO metrics of trained weights on a dataset
//   predict  detections of trained weights on images (COCO results JSON + PNG)
//   config   the resolved configuration of a system file, whole or key by key
//   launch   start a system's ranks: mpirun, a Slurm batch script or torchrun (printed, or run)
//   data     a COCO folder verified, its training index prepared, its training split read (data_command.cpp)
#pragma once

namespace mrcnn::run {

int train_main(int argc, char** argv);
int eval_main(int argc, char** argv);
int predict_main(int argc, char** argv);
int config_main(int argc, char** argv);
int launch_main(int argc, char** argv);
int data_main(int argc, char** argv);

}  // namespace mrcnn::run
