#include "train/optim.h"

#include <cmath>

#include "core/error.h"

namespace mambamt::train {

namespace {

constexpr double kPi = 3.14159265358979323846;

// The last component of a dotted parameter name ("decoder.layers.0.mixer.A_log" -> "A_log").
std::string leaf(const std::string& name) {
  const size_t dot = name.rfind('.');
  return dot == std::string::npos ? name : name.substr(dot + 1);
}

bool contains_norm(const std::string& name) {
  // Module names like "mix_norm", "final_norm", "norm" (RMSNorm weights).
  size_t start = 0;
  while (start <= name.size()) {
    size_t dot = name.find('.', start);
    std::string part = name.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (part == "norm" || (part.size() > 5 && part.compare(part.size() - 5, 5, "_norm") == 0) ||
        part.rfind("norm_", 0) == 0)
      return true;
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return false;
}

}  // namespace

bool uses_weight_decay(const std::string& name, const torch::Tensor& parameter) {
  const std::string l = leaf(name);
  if (l == "A_log" || l == "D" || l == "dt_bias" || l == "bias" ||
      (l.size() > 5 && l.compare(l.size() - 5, 5, "_bias") == 0))
    return false;
  if (parameter.dim() <= 1) return false;
  return !contains_norm(name);
}

AdamW::AdamW(NamedParameters parameters, AdamWOptions options) : params_(std::move(parameters)), options_(options) {
  slots_.reserve(params_.size());
  for (auto& [name, p] : params_) {
    Slot s;
    s.name = name;
    s.param = p;
    s.exp_avg = torch::zeros_like(p, torch::MemoryFormat::Contiguous);
    s.exp_avg_sq = torch::zeros_like(p, torch::MemoryFormat::Contiguous);
    s.decay = uses_weight_decay(name, p);
    slots_.push_back(std::move(s));
  }
}

void AdamW::step(double lr) {
  torch::NoGradGuard no_grad;
  ++steps_;
  const double b1 = options_.beta1, b2 = options_.beta2;
  const double bc1 = 1.0 - std::pow(b1, static_cast<double>(steps_));
  const double bc2 = 1.0 - std::pow(b2, static_cast<double>(steps_));
  const double step_size = lr / bc1;
  const double bc2_sqrt = std::sqrt(bc2);
  for (auto& s : slots_) {
    const torch::Tensor& g = s.param.grad();
    if (!g.defined()) continue;
    s.exp_avg.mul_(b1).add_(g, 1.0 - b1);
    s.exp_avg_sq.mul_(b2).addcmul_(g, g, 1.0 - b2);
    if (s.decay && options_.weight_decay != 0.0) s.param.mul_(1.0 - lr * options_.weight_decay);
    torch::Tensor denom = (s.exp_avg_sq.sqrt() / bc2_sqrt).add_(options_.eps);
    s.param.addcdiv_(s.exp_avg, denom, -step_size);
  }
}

void AdamW::zero_grad() {
  for (auto& s : slots_) {
    torch::Tensor g = s.param.mutable_grad();
    if (g.defined()) {
      g.detach_();
      g.zero_();
    }
  }
}

std::vector<std::string> AdamW::decay_names() const {
  std::vector<std::string> out;
  for (auto& s : slots_)
    if (s.decay) out.push_back(s.name);
  return out;
}

std::vector<std::string> AdamW::no_decay_names() const {
  std::vector<std::string> out;
  for (auto& s : slots_)
    if (!s.decay) out.push_back(s.name);
  return out;
}

void AdamW::save(core::Checkpoint& ckpt, const std::string& prefix) const {
  for (auto& s : slots_) {
    ckpt.tensors[prefix + "exp_avg/" + s.name] = s.exp_avg.detach();
    ckpt.tensors[prefix + "exp_avg_sq/" + s.name] = s.exp_avg_sq.detach();
  }
  ckpt.ints[prefix + "steps"] = steps_;
}

void AdamW::load(const core::Checkpoint& ckpt, const std::string& prefix) {
  auto get = [&](const std::string& key, const torch::Tensor& like) {
    auto it = ckpt.tensors.find(key);
    if (it == ckpt.tensors.end()) throw InputError("checkpoint: optimiser state lacks " + key);
    if (it->second.sizes() != like.sizes())
      throw InputError("checkpoint: optimiser state " + key + " has the wrong shape");
    return it->second;
  };
  auto steps = ckpt.ints.find(prefix + "steps");
  if (steps == ckpt.ints.end()) throw InputError("checkpoint: optimiser state lacks " + prefix + "steps");
  torch::NoGradGuard no_grad;
  for (auto& s : slots_) {
    s.exp_avg.copy_(get(prefix + "exp_avg/" + s.name, s.exp_avg));
    s.exp_avg_sq.copy_(get(prefix + "exp_avg_sq/" + s.name, s.exp_avg_sq));
  }
  steps_ = steps->second;
}

double gate_penalty_at(const core::TrainConfig& t, int64_t step) {
  if (t.gate_penalty_warmup <= 0 || step >= t.gate_penalty_warmup) return t.gate_penalty;
  return t.gate_penalty * static_cast<double>(std::max<int64_t>(step, 0)) / static_cast<double>(t.gate_penalty_warmup);
}

double learning_rate(const core::TrainConfig& t, int64_t step) {
  const double s = static_cast<double>(std::max<int64_t>(step, 1));
  const double warm = static_cast<double>(t.warmup_steps);
  if (t.warmup_steps > 0 && step <= t.warmup_steps) return t.lr * s / warm;
  if (t.schedule == "constant") return t.lr;
  if (t.schedule == "inverse_sqrt") return t.lr * std::sqrt(std::max(warm, 1.0) / s);
  if (t.schedule == "cosine") {
    const double span = static_cast<double>(t.max_steps - t.warmup_steps);
    double p = span > 0 ? (s - warm) / span : 1.0;
    p = std::min(1.0, std::max(0.0, p));
    return t.min_lr + (t.lr - t.min_lr) * 0.5 * (1.0 + std::cos(kPi * p));
  }
  throw InputError("train.schedule = \"" + t.schedule + "\": unknown schedule");
}

double gradient_norm(const std::vector<torch::Tensor>& parameters) {
  std::vector<torch::Tensor> norms;
  for (auto& p : parameters) {
    const torch::Tensor& g = p.grad();
    if (g.defined()) norms.push_back(g.detach().norm(2).to(torch::kFloat64));
  }
  if (norms.empty()) return 0.0;
  return torch::stack(norms).pow(2).sum().sqrt().item<double>();
}

double clip_gradients(const std::vector<torch::Tensor>& parameters, double norm, double max_norm) {
  if (max_norm <= 0) return 1.0;
  const double factor = max_norm / (norm + 1e-6);
  if (factor >= 1.0) return 1.0;
  torch::NoGradGuard no_grad;
  for (auto& p : parameters) {
    torch::Tensor g = p.mutable_grad();
    if (g.defined()) g.mul_(factor);
  }
  return factor;
}

}  // namespace mambamt::train
