#pragma once
// Runs a command (no shell) and captures its output, for scontrol calls.
#include <string>
#include <vector>

namespace mambamt::slurm::detail {

struct ProcessResult {
  int exit_code = -1;  // 127 when the program could not be started, 128+N when killed by signal N
  std::string output;  // stdout and stderr together
};

// argv[0] is looked up on PATH.
ProcessResult run_process(const std::vector<std::string>& argv);

}  // namespace mambamt::slurm::detail
