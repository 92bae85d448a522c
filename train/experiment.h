#pragma once
// One experiment end to end: prepare data and tokenizer, build the model,
// train with periodic validation and checkpoints, evaluate, and record it all
// in the experiment's store. The unit every sweep worker runs, and what
// `mambamt train` runs on a laptop.
//
// The experiment directory (docs/STORE.md):
//   <exp_dir>/store.h5   config, status, metrics, results, system info
//   <exp_dir>/ckpt/      step_<8 digits>.h5 (last K) and best.h5
//   <exp_dir>/log.txt    this experiment's log lines
//   <exp_dir>/hyp/       hypotheses of the test sets
// run_experiment() always resumes from the newest checkpoint in ckpt/.
#include <mpi.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/store.h"
#include "train/translate.h"

namespace mambamt::train {

// Progress of a running experiment, reported every train.log_every updates.
struct Progress {
  int64_t step = 0;
  int64_t total_steps = 0;
  double loss = 0;
  double lr = 0;
  double tokens_per_s = 0;
  double eta_seconds = 0;
  std::string phase;  // "train", "validate", "evaluate"
};

struct RunOptions {
  std::string exp_dir;  // created if missing
  // Identity written into a new store (ignored when the store exists).
  std::string name;   // label: variant name or the varied keys
  std::string sweep;  // sweep name ("" for a single experiment)
  // Where corpora and tokenizers are prepared and shared between experiments
  // of a sweep (runs/<sweep>); each is kept in a subdirectory keyed by a hash
  // of the config fields it depends on, and built once (safe when several
  // processes race). Empty: <exp_dir>/prepared.
  std::string shared_dir;
  // Data-parallel group: every rank of the group calls run_experiment with
  // the same config; rank 0 of the group owns the store and checkpoints.
  // MPI_COMM_NULL = a single rank. Gradients are all-reduced over it (MPI on
  // CPU tensors, NCCL on CUDA tensors when built with CUDA).
  MPI_Comm group = MPI_COMM_NULL;
  // Overrides train.device for this run only ("auto", "cpu", "cuda"; empty:
  // the config's). Not part of the experiment's identity: a run on another
  // device resumes the same store and checkpoints.
  std::string device;
  int local_rank = 0;     // picks the GPU: local_rank % visible GPUs
  int ranks_on_node = 1;  // CPU threads = cores / ranks_on_node (train.threads = 0)
  // Scheduler job that runs this attempt (written into the status).
  std::string job_id;
  // --retry-failed: the attempt counter starts again from zero.
  bool reset_attempts = false;
  // Live progress line on a terminal (mambamt train) instead of log lines.
  bool interactive = false;
  // Called on the training thread at every progress report.
  std::function<void(const Progress&)> on_progress;
  // Tests: called inside every training step at "batches", "backward" and
  // "update" (see train/trainer.h), e.g. to raise the checkpoint signal mid-step.
  std::function<void(int64_t step, const std::string& point)> on_step_point;
  // Skip the evaluation after training (tests of the training loop).
  bool skip_evaluation = false;
  // The directory of a completed experiment of the same training
  // (ExperimentConfig::training_id; the sweep passes it with
  // sweep.share_training): when this experiment has no checkpoint yet, its
  // checkpoints are hard-linked (copied where links fail) into ckpt/, its
  // training metrics and validation results copied into the store, and only
  // the evaluation runs. Anything that does not match (another training id,
  // other training or validation text, no checkpoints) trains as usual.
  std::string train_from;
};

struct RunResult {
  core::RunState state = core::RunState::failed;  // completed, failed or interrupted
  std::string error;                              // failed: the message stored as last_error
  int64_t step = 0;                               // training step reached
  double seconds = 0;                             // wall time of this attempt
};

// Runs (or resumes) one experiment. Errors of the experiment itself (an
// invalid config, divergence "diverged at step N (loss=...)", out of memory,
// unreadable data) mark the store failed and come back as a failed result;
// the checkpoint signal (core/signals.h) checkpoints and returns interrupted.
// A completed store is never rewritten: running it again returns completed
// at once. Throws only when the experiment directory itself is unusable
// (not writable, or it holds a store of another experiment).
RunResult run_experiment(const core::ExperimentConfig& config, const RunOptions& options);

// `mambamt eval`: evaluates a trained experiment again, or on more test sets.
struct EvalRequest {
  std::string exp_dir;
  // Test sets in the experiment's corpus format (TSV for .tsv files and for
  // every file of a synthetic experiment); empty = the experiment's own sets
  // and the whole suite (contrastive, entities, extrapolation, efficiency,
  // gates).
  std::vector<std::string> test_files;
  // ContraPro-format contrastive sets scored as well.
  std::vector<std::string> contrastive_files;
  // Without test files: only the parts of the suite that changed since the
  // evaluation version the store records (core::evaluation_parts_changed_since;
  // nothing when it is current), after which the store records this version
  // (`mambamt sweep --reevaluate`).
  bool changed_parts_only = false;
  std::string device = "auto";
  int threads = 0;  // 0 = every core
  Weights weights = Weights::kDefault;  // which checkpoint(s) to evaluate
  // Under a sweep: the node-local rank picks the GPU, and the node's ranks
  // share its cores (RunOptions' fields of the same names).
  int local_rank = 0;
  int ranks_on_node = 1;
  // Asked between the parts of the suite (the checkpoint signal).
  std::function<bool()> should_stop;
};

// Writes the results into the experiment's store (replacing those of the same
// names) and the hypotheses into <exp_dir>/hyp/. Returns false when
// should_stop stopped it between parts. Throws InputError when the directory
// has no store or no checkpoint, or its store is being written by a running
// process.
bool evaluate_experiment(const EvalRequest& request);

}  // namespace mambamt::train
