#include "models/retnet.h"

#include <c10/core/impl/LocalDispatchKeySet.h>

#include <cmath>
#include <optional>

#include "models/detail/linear.h"
#include "models/layers.h"

namespace mambamt::models {
namespace {

// Retention sums in float32 at least (bf16/fp16 activations under autocast).
torch::ScalarType compute_type(const torch::Tensor& x) {
  return x.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
}

// Without gradients (evaluation, decoding, forced scores) autocast is off for
// the retention itself: its products run in the compute type, the projections
// around it stay under autocast. In bf16 the two forms round differently (q.S
// against (qk^T * D)v) and the group norm rescales each head's small output:
// under bf16 autocast the tiny test model's logits were 8% (of the largest)
// off their float32 values in either form, against under 1% for the other
// kinds; 3.5% with this. Training keeps bf16 products, as attention does,
// for speed.
class FullPrecision {
 public:
  FullPrecision() {
    if (!torch::GradMode::is_enabled()) no_autocast_.emplace(c10::autocast_dispatch_keyset);
  }

 private:
  std::optional<c10::impl::ExcludeDispatchKeyGuard> no_autocast_;
};

torch::nn::Linear projection(int64_t in, int64_t out, const WeightInit& init) {
  torch::nn::Linear l(torch::nn::LinearOptions(in, out).bias(false));
  init_linear(l, init);
  return l;
}

}  // namespace

torch::Tensor retention_log_decays(int64_t n_heads) {
  auto opts = torch::TensorOptions().dtype(torch::kDouble);
  return torch::log(1.0 - torch::pow(2.0, -5.0 - torch::arange(n_heads, opts)));
}

RetentionImpl::RetentionImpl(const RetentionOptions& o) : options(o) {
  TORCH_CHECK(o.d_model() % o.n_heads() == 0, "Retention: d_model ", o.d_model(), " not divisible by n_heads ",
              o.n_heads());
  TORCH_CHECK(key_dim() % 2 == 0, "Retention: the rotation needs an even key width per head, got ", key_dim());
  const int64_t d = o.d_model(), dv = o.value_factor() * d;
  q_proj = register_module("q_proj", projection(d, d, o.init()));
  k_proj = register_module("k_proj", projection(d, d, o.init()));
  v_proj = register_module("v_proj", projection(d, dv, o.init()));
  g_proj = register_module("g_proj", projection(d, dv, o.init()));
  out_proj = register_module("out_proj", projection(dv, d, o.init()));
  gn_weight = register_parameter("gn_weight", torch::ones({dv}));
  gn_bias = register_parameter("gn_bias", torch::zeros({dv}));
  log_decays_ = retention_log_decays(o.n_heads());
}

torch::Tensor RetentionImpl::finish(const torch::Tensor& x, const torch::Tensor& o) {
  // Group norm: each head's dv values to zero mean and unit variance.
  torch::Tensor mean = o.mean(-1, /*keepdim=*/true);
  torch::Tensor centred = o - mean;
  torch::Tensor y = centred * torch::rsqrt(centred.pow(2).mean(-1, true) + options.norm_eps());
  y = y.flatten(-2).to(x.scalar_type()) * gn_weight + gn_bias;  // (..., H*dv)
  return detail::linear(torch::silu(detail::linear(x, g_proj)) * y, out_proj);
}

torch::Tensor RetentionImpl::forward(const torch::Tensor& x, const SeqInfo& info, LayerState* state) {
  const int64_t b = x.size(0), l = x.size(1), h = options.n_heads(), dk = key_dim(), dv = value_dim();
  const auto ct = compute_type(x);
  auto heads = [&](const torch::nn::Linear& p, int64_t w) {
    return detail::linear(x, p).view({b, l, h, w}).transpose(1, 2).to(ct);  // (B,H,L,w)
  };
  torch::Tensor q = heads(q_proj, dk), k = heads(k_proj, dk), v = heads(v_proj, dv);
  torch::Tensor o;
  {
    const FullPrecision full;
    auto [cos, sin] = rope_tables(info.positions, dk, options.rope_base(), ct);  // (B,L,dk/2)
    cos = cos.unsqueeze(1);
    sin = sin.unsqueeze(1);
    q = apply_rope(q, cos, sin);
    k = apply_rope(k, cos, sin) * (1.0 / std::sqrt(static_cast<double>(dk)));

    torch::Tensor log_gamma = log_decays_.to(x.device(), ct).view({1, h, 1, 1});
    // D[n,m] = gamma^(p_n - p_m) for key columns m <= n holding a real token.
    // Real tokens of a row are contiguous, so column order is position order.
    torch::Tensor allowed = torch::ones({l, l}, x.options().dtype(torch::kBool)).tril().unsqueeze(0);  // (1,L,L)
    if (info.mask.defined()) allowed = allowed.logical_and(info.mask.unsqueeze(1));                  // (B,L,L)
    torch::Tensor dist = (info.positions.unsqueeze(2) - info.positions.unsqueeze(1)).clamp_min(0).to(ct);
    torch::Tensor decay = torch::exp(dist.unsqueeze(1) * log_gamma) * allowed.unsqueeze(1).to(ct);  // (B,H,L,L)
    o = torch::matmul(torch::matmul(q, k.transpose(-2, -1)) * decay, v);  // (B,H,L,dv)

    if (state) {
      // S after each row's last real token p = length - 1: sum_m gamma^(p - p_m) K_m^T V_m.
      torch::Tensor last = (info.lengths - 1).view({b, 1});
      torch::Tensor w = torch::exp((last - info.positions).clamp_min(0).to(ct).unsqueeze(1) * log_gamma.view({1, h, 1}));
      if (info.mask.defined()) w = w * info.mask.unsqueeze(1).to(ct);                         // (B,H,L)
      state->recurrent = torch::matmul((k * w.unsqueeze(-1)).transpose(-2, -1), v);           // (B,H,dk,dv)
    }
  }
  return finish(x, o.transpose(1, 2));  // (B,L,H,dv)
}

torch::Tensor RetentionImpl::step(const torch::Tensor& x, const StepInfo& info, LayerState& state) {
  const int64_t b = x.size(0), h = options.n_heads(), dk = key_dim(), dv = value_dim();
  const auto ct = compute_type(x);
  TORCH_CHECK(state.recurrent.defined(), "Retention::step: no state (call init_state or prefill first)");
  torch::Tensor q = detail::linear(x, q_proj).view({b, h, dk}).to(ct);
  torch::Tensor k = detail::linear(x, k_proj).view({b, h, dk}).to(ct);
  torch::Tensor v = detail::linear(x, v_proj).view({b, h, dv}).to(ct);
  torch::Tensor o;
  {
    const FullPrecision full;
    auto [cos, sin] = rope_tables(info.position, dk, options.rope_base(), ct);  // (B,dk/2)
    cos = cos.unsqueeze(1);
    sin = sin.unsqueeze(1);
    q = apply_rope(q, cos, sin);
    k = apply_rope(k, cos, sin) * (1.0 / std::sqrt(static_cast<double>(dk)));
    if (!step_gamma_.defined() || step_gamma_.device() != x.device() || step_gamma_.scalar_type() != ct)
      step_gamma_ = log_decays_.exp().to(x.device(), ct).view({1, h, 1, 1});
    // In place (a static state's tensors keep their memory; models/state.h),
    // in the compute type (a state made in another dtype is converted once).
    if (state.recurrent.scalar_type() != ct) state.recurrent = state.recurrent.to(ct);
    state.recurrent.mul_(step_gamma_).add_(k.unsqueeze(-1) * v.unsqueeze(-2));  // (B,H,dk,dv)
    o = torch::matmul(q.unsqueeze(-2), state.recurrent).squeeze(-2);           // (B,H,dv)
  }
  return finish(x, o);
}

void RetentionImpl::init_state(LayerState& state, int64_t batch, int64_t /*reserve*/,
                               const torch::TensorOptions& options_) {
  const auto ct = options_.dtype().toScalarType() == torch::kDouble ? torch::kDouble : torch::kFloat;
  state.recurrent = torch::zeros({batch, options.n_heads(), key_dim(), value_dim()}, options_.dtype(ct));
}

}  // namespace mambamt::models
