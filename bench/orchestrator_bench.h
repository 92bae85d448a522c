#pragma once
// `mambamt bench orchestrator`: dispatch latency and worker utilisation of the
// sweep runtime (orchestrator/sweep.h) over many tiny simulated experiments,
// against an MPI round trip between two ranks measured in the same run.
#include <ostream>
#include <string>
#include <vector>

namespace mambamt::bench {

// args: [--ranks R] [--experiments N] [--ms MS] [--quick].
// Started outside MPI, it re-launches itself under `mpirun -np R` and relays
// the output; under an MPI launcher it uses the ranks it was started with.
// Returns the exit code; throws UsageError on a bad argument.
int run_orchestrator_bench(const std::vector<std::string>& args, std::ostream& out);

// The help paragraph of the benchmark (for the registry).
extern const char* const kOrchestratorBenchHelp;

}  // namespace mambamt::bench
