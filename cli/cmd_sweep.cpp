// `mambamt sweep`: the MPI runtime of a sweep.
#include <mpi.h>
#include <spdlog/spdlog.h>

#include <iostream>
#include <map>
#include <set>

#include "cli/commands.h"
#include "core/config.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/log.h"
#include "core/signals.h"
#include "orchestrator/grid.h"
#include "orchestrator/prepare.h"
#include "orchestrator/sweep.h"
#include "slurm/env.h"
#include "train/experiment.h"
#include "slurm/requeue.h"

namespace mambamt::cli {

namespace {

// MPI for the lifetime of a command; threads: the coordinator runs beside a worker.
class MpiSession {
 public:
  MpiSession() {
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    if (provided < MPI_THREAD_MULTIPLE) {
      MPI_Finalize();
      throw Error("this MPI library does not support MPI_THREAD_MULTIPLE, which the sweep runtime needs");
    }
  }
  ~MpiSession() {
    if (abort_code_ >= 0)
      MPI_Abort(MPI_COMM_WORLD, abort_code_);
    else
      MPI_Finalize();
  }
  // Ends every rank at exit (a rank stopped answering and would hang MPI_Finalize).
  void abort_at_exit(int code) { abort_code_ = code; }

 private:
  int abort_code_ = -1;
};

}  // namespace

Command sweep_command() {
  CommandSpec spec;
  spec.name = "sweep";
  spec.summary = "run (or resume) every experiment of a grid over the MPI ranks of this job";
  spec.positionals = {"GRID"};
  spec.options = {
      {"--dry-run", "", "list the points (id, varied keys, state, estimated cost, attention layers as built) and exit"},
      {"--retry-failed", "", "run failed experiments again with their attempt count reset"},
      {"--reevaluate", "", "evaluate completed experiments again whose results an older mambamt wrote"},
      {"--allow-grid-change", "", "accept a grid that differs from the run directory's frozen copy"},
      {"--simulate", "MS", "replace every experiment by a sleep of MS milliseconds (benchmarks the orchestrator)"},
  };
  spec.description =
      "Start with `mpirun -np N mambamt sweep GRID`, `srun --mpi=pmix mambamt sweep GRID`, or plainly\n"
      "for one rank. The run directory is sweep.output_dir/sweep.name; running the same grid again\n"
      "resumes it: completed experiments are never touched, interrupted and failed ones (with\n"
      "attempts left) resume from their newest checkpoint. On the checkpoint signal (sweep.\n"
      "checkpoint_signal, USR2 by default; TERM too) every worker checkpoints and the sweep stops;\n"
      "under Slurm the job is requeued (up to sweep.max_requeues).\n\n"
      "--reevaluate: a mambamt whose evaluation writes more (or computes a result otherwise) than the\n"
      "one that evaluated a completed experiment raises its evaluation version (results/evaluation/\n"
      "version). With --reevaluate those experiments are evaluated again from their checkpoints,\n"
      "spread over the ranks like training: the parts of the suite that changed since their version\n"
      "(all of it for stores older than version 2; the rest, such as the decoded test sets and the\n"
      "speed measured when they ran, stays as it was); their training and status are untouched. A\n"
      "stopped re-evaluation starts that experiment's again on the next run with --reevaluate.\n"
      "`mambamt eval --store DIR` evaluates one experiment with the whole suite.\n\n"
      "exit codes: 0 every point completed; 1 error or points failed or left; 2 usage;\n"
      "            3 interrupted by the checkpoint signal (resumable).";
  return {spec, [](const ParsedArgs& a) {
            const std::string& file = a.positional[0];
            if (a.has("--dry-run")) {
              core::GridConfig grid = core::load_grid(file);
              orchestrator::ExpandedGrid g = orchestrator::expand_grid(grid);
              std::cout << orchestrator::dry_run_listing(g, grid.sweep.ranks_per_experiment, a.has("--retry-failed"),
                                                         a.has("--reevaluate"));
              return 0;
            }
            slurm::JobEnv env = slurm::read_job_env();
            // Every rank reads the grid for the signal to listen to; rank 0 validates it fully.
            core::GridConfig grid = core::load_grid(file);
            core::install_stop_handlers(grid.sweep.checkpoint_signal);

            MpiSession mpi;
            int rank = 0;
            MPI_Comm_rank(MPI_COMM_WORLD, &rank);
            core::log::set_rank(rank);
            orchestrator::SweepOptions opt;
            opt.grid_file = file;
            opt.retry_failed = a.has("--retry-failed");
            opt.allow_grid_change = a.has("--allow-grid-change");
            opt.expected_world_size = slurm::launcher_promised_ranks();
            opt.job_id = env.job_id;
            opt.restart_count = env.restart_count;
            opt.local_rank = env.local_rank;
            opt.ranks_on_node = std::max(1, env.local_size);
            opt.runner = train::run_experiment;
            opt.reevaluate = a.has("--reevaluate");
            opt.evaluator = train::evaluate_experiment;
            if (a.has("--simulate")) opt.simulate_ms = static_cast<double>(a.get_int("--simulate", 0));
            orchestrator::SweepSummary s = orchestrator::run_sweep(opt);
            if (rank != 0) return 0;
            if (s.lost_ranks > 0) mpi.abort_at_exit(1);
            spdlog::info("sweep {}: {} of {} completed, {} failed, {} left{}", s.run_dir, s.completed, s.total, s.failed,
                         s.remaining, s.interrupted ? " (interrupted)" : "");
            if (s.interrupted) {
              if (env.scheduler == slurm::Scheduler::slurm) {
                slurm::StopOutcome out =
                    slurm::decide_on_stop(env, core::stop_signal(), core::installed_checkpoint_signal(),
                                          static_cast<int>(grid.sweep.max_requeues), s.remaining > 0,
                                          slurm::process_getenv(), static_cast<int64_t>(core::unix_time()));
                spdlog::info("stop: {}; {}", slurm::to_string(out.reason), out.decision.why);
                if (out.decision.requeue) slurm::request_requeue(env.job_id);
              }
              // A signal during the last experiments that still completed them
              // leaves nothing to resume: the sweep ended.
              if (s.remaining > 0) return 3;
            }
            return s.remaining == 0 && s.failed == 0 ? 0 : 1;
          }};
}

Command prepare_command() {
  CommandSpec spec;
  spec.name = "prepare";
  spec.summary = "prepare a grid's corpora and tokenizers ahead of its sweep, and check its data files";
  spec.positionals = {"GRID"};
  spec.description =
      "Prepares every distinct data setup of the grid's points (their [data] section but CAT-N and\n"
      "max_tokens, and eval.doc_decode and eval.max_examples: points differing in the model, the training,\n"
      "CAT-N or the decoding share one) in the run directory, as each experiment would at its start:\n"
      "generates the synthetic corpus, trains the tokenizer, and reads and tokenizes the training,\n"
      "validation, test and contrastive sets. The sweep's workers then find the corpus and tokenizer\n"
      "instead of building them, and a missing file or a malformed line is reported here (file and line)\n"
      "rather than on the cluster. Run it where the sweep will run from (relative paths) or on a machine\n"
      "sharing its filesystem, e.g. a login node before `sbatch`. The grid is not frozen and no store is\n"
      "written; a second run finds everything and only checks the files again.\n\n"
      "exit codes: 0 every data setup prepared; 1 a setup failed (its points would fail at their start); 2 usage.";
  return {spec, [](const ParsedArgs& a) {
            const std::string& file = a.positional[0];
            if (!core::is_grid_text(core::read_text(file)))
              throw UsageError(file + " is an experiment, not a grid: `mambamt train` prepares an experiment's data");
            orchestrator::ExpandedGrid g = orchestrator::expand_grid(core::load_grid(file));
            std::cout << "prepare " << g.grid.sweep.name << " (" << file << "): " << g.points.size()
                      << " points, run directory " << orchestrator::run_directory_for(g.grid).root() << "\n"
                      << std::flush;
            orchestrator::PrepareSummary s =
                orchestrator::prepare_grid(g, [](const orchestrator::DataSetup& d, size_t i, size_t n) {
                  std::cout << orchestrator::describe_setup(d, i, n) << std::flush;
                });
            for (const std::string& p : s.invalid_points) std::cout << "invalid point (not prepared): " << p << "\n";
            const size_t failed = s.failed();
            std::cout << s.setups.size() - failed << " of " << s.setups.size() << " data setups prepared";
            if (failed) std::cout << "; " << failed << " failed: their points would fail at their start";
            std::cout << "\n";
            return failed == 0 ? 0 : 1;
          }};
}

}  // namespace mambamt::cli
