#pragma once
// `mambamt sweep`: the MPI runtime of a sweep. Every rank calls run_sweep();
// rank 0 runs the coordinator in a thread beside its own worker, so no GPU
// idles for coordination. Ranks form groups of sweep.ranks_per_experiment
// consecutive ranks (a sub-communicator each); the first rank of a group is
// its leader and talks to the coordinator, the group trains one experiment
// data-parallel. Workers pull experiments (most expensive first), send
// heartbeats while they train and report results; the coordinator retries
// failures up to sweep.retries, claims experiments against other jobs working
// on the same run directory, and on the checkpoint signal stops dispatching,
// lets every worker checkpoint, and records the sweep as interrupted.
#include <mpi.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "orchestrator/grid.h"
#include "orchestrator/rundir.h"
#include "train/experiment.h"

namespace mambamt::orchestrator {

struct SweepOptions {
  std::string grid_file;
  bool retry_failed = false;       // failed experiments start again with attempts reset
  // Completed experiments whose store an older evaluation wrote
  // (results/evaluation/version below core::kEvaluationVersion) are
  // evaluated again, on the ranks like the training, by `evaluator`.
  bool reevaluate = false;
  bool allow_grid_change = false;  // see prepare_run_directory()
  // Ranks the launcher promised (SLURM_NTASKS, ...); 0 = unknown. A world of
  // another size is refused: an MPI started without the launcher's process
  // management otherwise runs N separate one-rank sweeps.
  int64_t expected_world_size = 0;
  std::string job_id;         // this scheduler job, for claims and stores
  int64_t restart_count = 0;  // SLURM_RESTART_COUNT
  int local_rank = 0;         // node-local rank: picks the GPU
  int ranks_on_node = 1;      // node-local ranks: shares the CPU cores
  // Runs one experiment on every rank of its group (train::run_experiment;
  // the CLI passes it in, tests may pass another).
  std::function<train::RunResult(const core::ExperimentConfig&, const train::RunOptions&)> runner;
  // Evaluates one completed experiment again (train::evaluate_experiment);
  // false when the checkpoint signal stopped it.
  std::function<bool(const train::EvalRequest&)> evaluator;
  // >= 0: every experiment is replaced by a sleep of this many milliseconds
  // and no store is written (`mambamt bench orchestrator` measures the
  // sweep machinery with it).
  double simulate_ms = -1;
  // Progress lines of the coordinator (rank 0); default: spdlog.
  std::function<void(const std::string&)> log;
};

struct SweepSummary {
  std::string run_dir;
  int total = 0;             // points of the grid
  int completed = 0;         // completed (now or before)
  int failed = 0;            // failed with no attempts left, or invalid
  int elsewhere = 0;         // claimed by another live job
  int remaining = 0;         // not finished (interrupted, lost, elsewhere)
  int ran = 0;               // experiments this job started
  bool interrupted = false;  // the checkpoint signal stopped the sweep
  int lost_ranks = 0;        // leaders that stopped sending heartbeats
  // Coordinator measurements: result received (or leader ready) -> next
  // experiment sent to that leader, in ms; and per-leader busy/alive seconds.
  std::vector<double> dispatch_ms;
  double busy_seconds = 0;
  double rank_seconds = 0;
};

// Collective over MPI_COMM_WORLD (MPI initialised with MPI_THREAD_MULTIPLE).
// The summary is complete on rank 0. Throws InputError on rank 0 for a bad
// grid (after telling the other ranks, which throw Error too).
SweepSummary run_sweep(const SweepOptions& options);

// The points of a grid with their state in its run directory (if it exists):
// what `--dry-run` prints.
// With reevaluate, completed points of an older evaluation are listed as
// evaluated again.
std::string dry_run_listing(const ExpandedGrid& grid, int64_t ranks_per_experiment, bool retry_failed,
                            bool reevaluate = false);

}  // namespace mambamt::orchestrator
