#pragma once
// The training loop of one experiment: AdamW updates over token-budget
// batches (accumulated and all-reduced over the data-parallel group),
// periodic metrics, validation, checkpoints, and exact resume.
//
// One update (step s, 1-based):
//   1. every rank takes accum_steps batches from the sharded sampler;
//      T = target tokens of all of them on all ranks (one all-reduce);
//   2. for each batch: forward (bf16 autocast on CUDA), label-smoothed loss
//      summed over its tokens, backward of sum / T (so the gradient is the
//      mean over the global batch whatever the rank count);
//   3. gradients summed over the group; NaN/Inf loss or gradient norm stops
//      with "diverged at step s (loss=...)" before anything is updated;
//   4. clip to train.clip_norm, AdamW with learning_rate(s);
//   5. metrics every log_every, validation every validate_every, a
//      checkpoint every checkpoint_every and when the checkpoint signal
//      (core/signals.h) has arrived: a signal during a step lets the step
//      finish, then checkpoints at the step boundary.
//
// A checkpoint holds everything the next steps depend on, so resuming gives
// bitwise the same parameters on CPU: model, AdamW moments and step, the
// sampler position (data order and CAT-N draws are functions of it), every
// rank's RNG state (dropout), the metric accumulators of the unfinished log
// interval, and the validation bookkeeping (best score, patience).
#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "core/checkpoint.h"
#include "core/config.h"
#include "core/store.h"
#include "models/model.h"
#include "train/distributed.h"
#include "train/experiment.h"
#include "train/prepare.h"

namespace mambamt::train {

enum class StopReason { max_steps, max_epochs, patience, signal, diverged };
const char* to_string(StopReason r);

struct TrainOutcome {
  StopReason reason = StopReason::max_steps;
  int64_t step = 0;
  std::string error;            // diverged: the message
  double tokens_per_s = 0;      // mean training tokens/s of this rank over all attempts
  double peak_memory_mb = 0;    // peak training memory of this attempt
  double best_score = 0;        // best validation score (valid_metric), NaN without validation
  double best_loss = 0;         // validation loss at the best point, NaN without validation
  int64_t best_step = -1;
};

struct TrainHooks {
  std::function<void(const Progress&)> on_progress;
  // Tests: called inside every step at "batches" (batches drawn), "backward"
  // (gradients computed, before the all-reduce) and "update" (after AdamW).
  std::function<void(int64_t step, const std::string& point)> on_step_point;
  // Report progress at every step instead of every log_every (a terminal).
  bool every_step = false;
  // Written into every checkpoint (e.g. shared_dir, tokenizer_dir).
  std::map<std::string, std::string> checkpoint_strings;
};

class Trainer {
 public:
  // `store` is the experiment store on the group's rank 0 (nullptr elsewhere);
  // checkpoints live in ckpt_dir (rank 0 writes them, every rank reads them).
  Trainer(const core::ExperimentConfig& config, const PreparedData& data, models::ModelPtr model, Group& group,
          torch::Device device, core::ExperimentStore* store, std::string ckpt_dir, TrainHooks hooks = {});
  ~Trainer();

  // Loads the newest checkpoint of ckpt_dir, if any (all ranks); returns its
  // step (0 = starting fresh: parameters are then broadcast from rank 0).
  int64_t resume();
  // Trains until a stop condition. Throws for errors other than divergence.
  TrainOutcome train();

  int64_t step() const;
  // Validation loss (no smoothing) of the current parameters.
  double validation_loss();

  // The learning-rate schedule's total (train.max_steps, or fewer when
  // max_epochs ends training first).
  int64_t planned_steps() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Model parameters of a checkpoint ("model/<name>" entries) by name.
std::map<std::string, torch::Tensor> model_tensors(const core::Checkpoint& ckpt);

// Enables bf16 autocast on CUDA for its lifetime (no-op on CPU and without
// CUDA). Parameters stay fp32 (master weights); matmuls run in bf16.
class AutocastGuard {
 public:
  AutocastGuard(const torch::Device& device, bool enabled);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  bool active_ = false;
  bool previous_ = false;
};

// Whether the experiment trains in bf16 autocast on this device (precision auto/bf16 on CUDA).
bool use_bf16(const core::TrainConfig& train, const torch::Device& device);

}  // namespace mambamt::train
