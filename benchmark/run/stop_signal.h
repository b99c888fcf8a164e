// A clean stop on SIGTERM and SIGINT (a scheduler's time limit, Ctrl-C): the first signal asks the
// timed run to stop at its next safe point (after the current training step or validation batch),
// where it logs run_stop "aborted" and the command exits with 128 + the signal number; a second
// signal ends the process at once with that status. Checkpoints already written stay.
//
//   StopSignals guard;            // installs the handlers; restores the previous ones on destruction
//   ...
//   throw_if_stop_requested();    // at each safe point: throws StopRequested
#pragma once

#include <stdexcept>
#include <string>

namespace mrcnn::run {

struct StopRequested : std::runtime_error {
  explicit StopRequested(int signal);
  int signal;
  int exit_status() const { return 128 + signal; }
};

class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // The run is over on every rank (after the last collective): SIGTERM is ignored from here to the
  // process's exit, through every destructor (the communicator's MPI_Finalize among them), and is
  // not restored. srun --kill-on-bad-exit sends it to the other ranks as soon as the first one
  // exits 3 (targets not reached), which would otherwise turn their own 3 into a kill (143).
  void run_over();

 private:
  bool over_ = false;
};

// The signal received since the handlers were installed (0: none).
int stop_signal_received();
// Throws StopRequested when a stop signal has been received.
void throw_if_stop_requested();

// Removes the temporary files ("<name>.tmp.<pid>") that a killed process left beside its
// checkpoints and weights under `output_dir`'s run folders (their writer is no longer running).
// Returns how many were removed.
int remove_stale_temporaries(const std::string& output_dir);

}  // namespace mrcnn::run
