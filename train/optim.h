#pragma once
// AdamW with two parameter groups, the learning-rate schedules, and gradient
// helpers (norm, clipping, finiteness).
//
// The optimiser is written out here (rather than torch::optim::AdamW) so that
// its whole state is a few named tensors that go into a checkpoint and come
// back bitwise equal, the same on LibTorch 1.13 and 2.x. The update is
// PyTorch's AdamW (decoupled weight decay, bias-corrected moments):
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
//   p = p (1 - lr wd);    p -= lr / (1-b1^t) * m / (sqrt(v) / sqrt(1-b2^t) + eps)
// Parameters are fp32 master weights (bf16 appears only inside autocast).
#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/checkpoint.h"
#include "core/config.h"

namespace mambamt::train {

using NamedParameters = std::vector<std::pair<std::string, torch::Tensor>>;

// Whether a parameter gets weight decay: never norms, biases, 1-D parameters,
// or the SSM parameters A_log, D and dt_bias (of either Mamba version).
bool uses_weight_decay(const std::string& name, const torch::Tensor& parameter);

struct AdamWOptions {
  double beta1 = 0.9;
  double beta2 = 0.98;
  double eps = 1e-8;
  double weight_decay = 0.01;  // of the decay group; the other group has none
};

class AdamW {
 public:
  AdamW(NamedParameters parameters, AdamWOptions options);

  // One update with learning rate `lr` from the parameters' .grad() (a
  // parameter without a gradient is left alone, its moments too).
  void step(double lr);
  void zero_grad();

  // Updates made so far (t of the bias correction).
  int64_t steps() const { return steps_; }
  const NamedParameters& parameters() const { return params_; }
  // Names of the decay group and of the no-decay group.
  std::vector<std::string> decay_names() const;
  std::vector<std::string> no_decay_names() const;

  // State as checkpoint entries: tensors <prefix>exp_avg/<name>,
  // <prefix>exp_avg_sq/<name> and the int <prefix>steps.
  void save(core::Checkpoint& ckpt, const std::string& prefix = "optim/") const;
  // Restores it; throws InputError naming a missing or mis-shaped entry.
  void load(const core::Checkpoint& ckpt, const std::string& prefix = "optim/");

 private:
  struct Slot {
    std::string name;
    torch::Tensor param, exp_avg, exp_avg_sq;
    bool decay = true;
  };
  std::vector<Slot> slots_;
  NamedParameters params_;
  AdamWOptions options_;
  int64_t steps_ = 0;
};

// Learning rate of update `step` (1-based): linear warmup over warmup_steps
// to train.lr, then
//   inverse_sqrt  lr * sqrt(warmup / step)          (warmup 0: lr / sqrt(step))
//   cosine        min_lr + (lr - min_lr) (1 + cos(pi p)) / 2, p = (step - warmup) / (max_steps - warmup) in [0, 1]
//   constant      lr
double learning_rate(const core::TrainConfig& train, int64_t step);

// The weight of train.gate_penalty at update `step` (1-based): gate_penalty *
// min(1, step / gate_penalty_warmup), or gate_penalty without a warmup.
double gate_penalty_at(const core::TrainConfig& train, int64_t step);

// The global L2 norm of the gradients (float64 accumulation); gradients that
// are undefined count as zero. NaN/Inf when any gradient is.
double gradient_norm(const std::vector<torch::Tensor>& parameters);
// Scales the gradients by min(1, max_norm / (norm + 1e-6)); returns the factor.
double clip_gradients(const std::vector<torch::Tensor>& parameters, double norm, double max_norm);

}  // namespace mambamt::train
