#pragma once
// Logging: spdlog's default logger, so library code just calls
// spdlog::info("...", args). Every line carries the time, level, MPI rank and
// the experiment being run:
//   [2026-11-21 10:02:03.123] [info] [rank 3] [exp 4f0c2a9b1d7e] step 100 loss 3.21
// Lines go to stderr and, while an ExperimentLog is alive, also to that
// experiment's log.txt.
#include <memory>
#include <string>

namespace mambamt::core::log {

// Installs the default logger (idempotent). Level names: trace, debug, info,
// warn, error, critical, off.
void init();
// Throws UsageError for an unknown level name.
void set_level(const std::string& level);
void set_rank(int rank);
int rank();
// Sends console lines to stdout instead of stderr (for subcommands whose
// stdout is a data stream, keep the default).
void set_console_to_stdout(bool on);

// While alive: lines logged by the thread that created it carry this experiment
// id and are appended to `log_file` as well; other threads' lines (rank 0's
// coordinator) keep their own id and stay out of the file. One per thread at a
// time (a worker runs one experiment at a time).
class ExperimentLog {
 public:
  ExperimentLog(const std::string& experiment_id, const std::string& log_file);
  ~ExperimentLog();
  ExperimentLog(const ExperimentLog&) = delete;
  ExperimentLog& operator=(const ExperimentLog&) = delete;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mambamt::core::log
