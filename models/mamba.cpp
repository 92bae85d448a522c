#include "models/mamba.h"

#include <cmath>

#include "kernels/conv1d.h"
#include "kernels/selective_scan.h"
#include "kernels/ssd.h"
#include "models/detail/decode_cpu.h"
#include "models/detail/linear.h"

namespace mambamt::models {
namespace {

// Conv weights as torch.nn.Conv1d initialises them (fan-in = width).
void init_conv(torch::Tensor& w, torch::Tensor& b) {
  torch::NoGradGuard no_grad;
  const double bound = 1.0 / std::sqrt(static_cast<double>(w.size(1)));
  w.uniform_(-bound, bound);
  b.uniform_(-bound, bound);
}

// dt log-uniform in [dt_min, dt_max], returned as its softplus inverse (the bias).
torch::Tensor dt_bias_init(int64_t n, const MambaOptions& o) {
  torch::Tensor u = torch::rand({n}, torch::kDouble);
  torch::Tensor dt = torch::exp(u * (std::log(o.dt_max()) - std::log(o.dt_min())) + std::log(o.dt_min()));
  dt = dt.clamp_min(1e-4);
  return (dt + torch::log(-torch::expm1(-dt))).to(torch::kFloat);
}

// Zeroes the padded positions of x (B,L,F): the conv then sees exactly what it
// would see without the padding on the left, and nothing leaks from the right.
torch::Tensor zero_padding(const torch::Tensor& x, const torch::Tensor& mask) {
  return mask.defined() ? x * mask.unsqueeze(-1).to(x.scalar_type()) : x;
}

// (B,L,C) through the causal conv with SiLU; state gets the conv state if asked.
torch::Tensor conv_seq(const torch::Tensor& x, const torch::Tensor& mask, const torch::Tensor& w,
                       const torch::Tensor& b, MambaState* state) {
  kernels::CausalConv1dOptions co;
  co.bias = b;
  co.silu = true;
  co.return_final_state = state != nullptr;
  auto r = kernels::causal_conv1d(zero_padding(x, mask).transpose(1, 2), w, co);
  if (state) state->conv = r.final_state.detach().contiguous();
  return r.y.transpose(1, 2).contiguous();  // (B,L,C)
}

// A row that is all padding keeps the initial (zero) state: its inputs are zeroed.
void check_prefill(const torch::Tensor& mask) {
  if (!mask.defined()) return;
  TORCH_CHECK(mask.select(1, mask.size(1) - 1).logical_or(mask.any(1).logical_not()).all().item<bool>(),
              "Mamba prefill: padding must be on the left so the state ends at a real token");
}

}  // namespace

torch::Tensor reverse_index(const torch::Tensor& lengths, int64_t length) {
  torch::Tensor t = torch::arange(length, lengths.options().dtype(torch::kLong)).unsqueeze(0);  // (1,L)
  torch::Tensor n = lengths.to(torch::kLong).unsqueeze(1);                                      // (B,1)
  return torch::where(t < n, n - 1 - t, t);
}

torch::Tensor gather_time(const torch::Tensor& x, const torch::Tensor& index) {
  return torch::gather(x, 1, index.unsqueeze(-1).expand({x.size(0), x.size(1), x.size(2)}));
}

// ------------------------------------------------------------------ SSD core

SsdCoreImpl::SsdCoreImpl(const MambaOptions& o) : options(o) {
  TORCH_CHECK(o.d_inner() % o.headdim() == 0, "Mamba-2: inner width ", o.d_inner(), " not divisible by headdim ",
              o.headdim());
  TORCH_CHECK(o.nheads() % o.ngroups() == 0, "Mamba-2: ngroups ", o.ngroups(), " does not divide ", o.nheads(),
              " heads");
  const int64_t c = o.conv_dim_v2(), h = o.nheads();
  conv_weight = register_parameter("conv_weight", torch::empty({c, o.d_conv()}));
  conv_bias = register_parameter("conv_bias", torch::empty({c}));
  init_conv(conv_weight, conv_bias);
  A_log = register_parameter("A_log", torch::log(torch::empty({h}).uniform_(1.0, 16.0)));
  D = register_parameter("D", torch::ones({h}));
  dt_bias = register_parameter("dt_bias", dt_bias_init(h, o));
  norm = register_module("norm", RMSNorm(RMSNormOptions(o.d_inner()).eps(o.norm_eps())));
}

torch::Tensor SsdCoreImpl::forward(const torch::Tensor& xBC, const torch::Tensor& dt, const torch::Tensor& z,
                                   const torch::Tensor& mask, MambaState* state) {
  const int64_t b = xBC.size(0), l = xBC.size(1), di = options.d_inner(), h = options.nheads(),
                p = options.headdim(), g = options.ngroups(), n = options.d_state();
  if (state) check_prefill(mask);
  torch::Tensor u = conv_seq(xBC, mask, conv_weight, conv_bias, state);  // (B,L,C)
  kernels::SsdScanOptions so;
  so.D = D;
  so.z = z.view({b, l, h, p});
  so.dt_bias = dt_bias;
  so.mask = mask;
  so.return_final_state = state != nullptr;
  so.chunk_size = options.chunk_size();
  auto r = kernels::ssd_scan(u.narrow(2, 0, di).view({b, l, h, p}), dt, A_log, u.narrow(2, di, g * n).view({b, l, g, n}),
                             u.narrow(2, di + g * n, g * n).view({b, l, g, n}), so);
  if (state) state->ssm = r.final_state.detach();
  return norm(r.y.view({b, l, di}));
}

torch::Tensor SsdCoreImpl::step(const torch::Tensor& xBC, const torch::Tensor& dt, const torch::Tensor& z,
                                MambaState& state) {
  const int64_t b = xBC.size(0), di = options.d_inner(), h = options.nheads(), p = options.headdim(),
                g = options.ngroups(), n = options.d_state();
  torch::Tensor u = kernels::causal_conv1d_step(state.conv, xBC, conv_weight, conv_bias, /*silu=*/true);  // (B,C)
  kernels::SsdStepOptions so;
  so.D = D;
  so.z = z.view({b, h, p});
  so.dt_bias = dt_bias;
  torch::Tensor y = kernels::ssd_step(state.ssm, u.narrow(1, 0, di).view({b, h, p}), dt, A_log,
                                      u.narrow(1, di, g * n).view({b, g, n}), u.narrow(1, di + g * n, g * n).view({b, g, n}),
                                      so);
  return norm(y.view({b, di}));
}

torch::Tensor SsdCoreImpl::step_fused(const torch::Tensor& zxbcdt, MambaState& state) {
  detail::Mamba2StepWeights w;
  w.conv_weight = conv_weight, w.conv_bias = conv_bias, w.A_log = A_log, w.D = D, w.dt_bias = dt_bias;
  w.norm_weight = norm->weight;
  w.eps = norm->options.eps();
  w.ngroups = options.ngroups();
  return detail::mamba2_step(zxbcdt, w, state.conv, state.ssm);
}

void SsdCoreImpl::init_state(MambaState& s, int64_t batch, const torch::TensorOptions& o) const {
  auto acc = o.dtype() == torch::kDouble ? torch::kDouble : torch::kFloat;
  s.conv = torch::zeros({batch, options.conv_dim_v2(), options.d_conv() - 1}, o);
  s.ssm = torch::zeros({batch, options.nheads(), options.headdim(), options.d_state()}, o.dtype(acc));
}

// ------------------------------------------------------------------ selective-scan core

SelectiveCoreImpl::SelectiveCoreImpl(const MambaOptions& o) : options(o) {
  const int64_t di = o.d_inner(), n = o.d_state(), r = o.rank();
  conv_weight = register_parameter("conv_weight", torch::empty({di, o.d_conv()}));
  conv_bias = register_parameter("conv_bias", torch::empty({di}));
  init_conv(conv_weight, conv_bias);
  x_proj = register_module("x_proj", torch::nn::Linear(torch::nn::LinearOptions(di, r + 2 * n).bias(false)));
  init_mamba_linear(x_proj, o.init());
  dt_proj = register_module("dt_proj", torch::nn::Linear(torch::nn::LinearOptions(r, di)));
  {
    torch::NoGradGuard no_grad;
    const double bound = 1.0 / std::sqrt(static_cast<double>(r));
    dt_proj->weight.uniform_(-bound, bound);
    dt_proj->bias.copy_(dt_bias_init(di, o));
  }
  A_log = register_parameter(
      "A_log", torch::log(torch::arange(1, n + 1, torch::kFloat)).unsqueeze(0).repeat({di, 1}).contiguous());
  D = register_parameter("D", torch::ones({di}));
}

torch::Tensor SelectiveCoreImpl::forward(const torch::Tensor& x, const torch::Tensor& z, const torch::Tensor& mask,
                                         MambaState* state) {
  const int64_t r = options.rank(), n = options.d_state();
  if (state) check_prefill(mask);
  torch::Tensor u = conv_seq(x, mask, conv_weight, conv_bias, state);  // (B,L,Di)
  torch::Tensor xd = x_proj(u);                                         // (B,L,R+2N)
  torch::Tensor delta = torch::nn::functional::linear(xd.narrow(2, 0, r), dt_proj->weight);  // (B,L,Di)
  kernels::SelectiveScanOptions so;
  so.D = D;
  so.z = z.transpose(1, 2);
  so.delta_bias = dt_proj->bias;
  so.delta_softplus = true;
  so.mask = mask;
  so.return_final_state = state != nullptr;
  auto res = kernels::selective_scan(u.transpose(1, 2), delta.transpose(1, 2), -torch::exp(A_log),
                                     xd.narrow(2, r, n).transpose(1, 2), xd.narrow(2, r + n, n).transpose(1, 2), so);
  if (state) state->ssm = res.final_state.detach();
  return res.y.transpose(1, 2);
}

torch::Tensor SelectiveCoreImpl::step(const torch::Tensor& x, const torch::Tensor& z, MambaState& state) {
  const int64_t r = options.rank(), n = options.d_state();
  torch::Tensor u = kernels::causal_conv1d_step(state.conv, x, conv_weight, conv_bias, /*silu=*/true);  // (B,Di)
  // Under autocast the projections come out in bf16 (on a GPU, and on a CPU
  // without the AVX-512 fused step): the step runs in the state's type.
  torch::Tensor xd = detail::linear(u, x_proj).to(u.scalar_type());
  torch::Tensor delta = detail::linear(xd.narrow(1, 0, r), dt_proj->weight).to(u.scalar_type());
  kernels::SelectiveScanStepOptions so;
  so.D = D;
  so.z = z;
  so.delta_bias = dt_proj->bias;
  so.delta_softplus = true;
  return kernels::selective_scan_step(state.ssm, u, delta, -torch::exp(A_log), xd.narrow(1, r, n),
                                      xd.narrow(1, r + n, n), so);
}

torch::Tensor SelectiveCoreImpl::step_fused(const torch::Tensor& xz, MambaState& state) {
  detail::Mamba1StepWeights w;
  w.conv_weight = conv_weight, w.conv_bias = conv_bias, w.x_proj = x_proj->weight, w.dt_proj = dt_proj->weight;
  w.dt_bias = dt_proj->bias, w.A_log = A_log, w.D = D;
  return detail::mamba1_step(xz, w, state.conv, state.ssm);
}

void SelectiveCoreImpl::init_state(MambaState& s, int64_t batch, const torch::TensorOptions& o) const {
  auto acc = o.dtype() == torch::kDouble ? torch::kDouble : torch::kFloat;
  s.conv = torch::zeros({batch, options.d_inner(), options.d_conv() - 1}, o);
  s.ssm = torch::zeros({batch, options.d_inner(), options.d_state()}, o.dtype(acc));
}

// ------------------------------------------------------------------ causal Mamba mixer

MambaImpl::MambaImpl(const MambaOptions& o) : options(o) {
  TORCH_CHECK(o.version() == 1 || o.version() == 2, "Mamba: version must be 1 or 2, got ", o.version());
  const int64_t di = o.d_inner();
  // Mamba-2: [z, x, B, C, dt]; Mamba-1: [z, x].
  const int64_t width = o.version() == 2 ? di + o.conv_dim_v2() + o.nheads() : 2 * di;
  in_proj = register_module("in_proj", torch::nn::Linear(torch::nn::LinearOptions(o.d_model(), width).bias(false)));
  out_proj = register_module("out_proj", torch::nn::Linear(torch::nn::LinearOptions(di, o.d_model()).bias(false)));
  init_mamba_linear(in_proj, o.init());
  init_mamba_linear(out_proj, o.init(), o.out_scale());
  if (o.version() == 2)
    ssd = register_module("ssd", SsdCore(o));
  else
    selective = register_module("selective", SelectiveCore(o));
}

torch::Tensor MambaImpl::forward(const torch::Tensor& x, const SeqInfo& info, LayerState* state) {
  const int64_t di = options.d_inner();
  torch::Tensor p = in_proj(x);
  torch::Tensor y;
  MambaState* st = state ? &state->mamba : nullptr;
  if (ssd) {
    const int64_t c = options.conv_dim_v2();
    y = ssd(p.narrow(2, di, c), p.narrow(2, di + c, options.nheads()), p.narrow(2, 0, di), info.mask, st);
  } else {
    y = selective(p.narrow(2, di, di), p.narrow(2, 0, di), info.mask, st);
  }
  return out_proj(y);
}

torch::Tensor MambaImpl::step(const torch::Tensor& x, const StepInfo&, LayerState& state) {
  const int64_t di = options.d_inner();
  torch::Tensor p = detail::linear(x, in_proj);  // (B,width)
  // Under autocast (evaluation on a GPU) the projection comes out in bf16 while
  // a state made by start() holds the parameters' float32, and a state left by
  // a forward pass the reverse: the step runs in the state's type.
  if (p.scalar_type() != state.mamba.conv.scalar_type()) p = p.to(state.mamba.conv.scalar_type());
  // The fused CPU pass where it applies, else the kernels' steps.
  torch::Tensor y = ssd ? ssd->step_fused(p, state.mamba) : selective->step_fused(p, state.mamba);
  if (!y.defined()) {
    const int64_t c = options.conv_dim_v2();
    y = ssd ? ssd->step(p.narrow(1, di, c), p.narrow(1, di + c, options.nheads()), p.narrow(1, 0, di), state.mamba)
            : selective->step(p.narrow(1, di, di), p.narrow(1, 0, di), state.mamba);
  }
  return detail::linear(y, out_proj);
}

void MambaImpl::init_state(LayerState& state, int64_t batch, int64_t, const torch::TensorOptions& o) {
  if (ssd)
    ssd->init_state(state.mamba, batch, o);
  else
    selective->init_state(state.mamba, batch, o);
}

// ------------------------------------------------------------------ Bi-Mamba mixer

BiMambaImpl::BiMambaImpl(const MambaOptions& o) : options(o) {
  TORCH_CHECK(o.version() == 1 || o.version() == 2, "BiMamba: version must be 1 or 2, got ", o.version());
  const int64_t di = o.d_inner();
  // Mamba-2: [z, x, (B, C, dt) forward, (B, C, dt) backward]; Mamba-1: [z, x].
  const int64_t per_dir = 2 * o.ngroups() * o.d_state() + o.nheads();
  const int64_t width = o.version() == 2 ? 2 * di + 2 * per_dir : 2 * di;
  in_proj = register_module("in_proj", torch::nn::Linear(torch::nn::LinearOptions(o.d_model(), width).bias(false)));
  out_proj = register_module("out_proj", torch::nn::Linear(torch::nn::LinearOptions(2 * di, o.d_model()).bias(false)));
  init_mamba_linear(in_proj, o.init());
  init_mamba_linear(out_proj, o.init(), o.out_scale());
  if (o.version() == 2) {
    ssd_fwd = register_module("ssd_fwd", SsdCore(o));
    ssd_bwd = register_module("ssd_bwd", SsdCore(o));
  } else {
    sel_fwd = register_module("sel_fwd", SelectiveCore(o));
    sel_bwd = register_module("sel_bwd", SelectiveCore(o));
  }
}

torch::Tensor BiMambaImpl::forward(const torch::Tensor& x, const SeqInfo& info, LayerState*) {
  TORCH_CHECK(info.right_padded, "BiMamba: padding must be at the end of each row");
  const int64_t b = x.size(0), l = x.size(1), di = options.d_inner();
  torch::Tensor p = in_proj(x);
  torch::Tensor z = p.narrow(2, 0, di), xs = p.narrow(2, di, di);
  // Reverse each row within its length (padding stays at the end, the mask is unchanged).
  torch::Tensor lengths = info.lengths.defined() ? info.lengths : torch::full({b}, l, torch::kLong);
  torch::Tensor rev = reverse_index(lengths.to(x.device()), l);
  torch::Tensor fwd, bwd;
  if (ssd_fwd) {
    const int64_t gn2 = 2 * options.ngroups() * options.d_state(), h = options.nheads(), per_dir = gn2 + h;
    torch::Tensor part_f = p.narrow(2, 2 * di, per_dir), part_b = p.narrow(2, 2 * di + per_dir, per_dir);
    fwd = ssd_fwd(torch::cat({xs, part_f.narrow(2, 0, gn2)}, 2), part_f.narrow(2, gn2, h), z, info.mask, nullptr);
    torch::Tensor xbc_b = gather_time(torch::cat({xs, part_b.narrow(2, 0, gn2)}, 2), rev);
    bwd = ssd_bwd(xbc_b, gather_time(part_b.narrow(2, gn2, h), rev), gather_time(z, rev), info.mask, nullptr);
  } else {
    fwd = sel_fwd(xs, z, info.mask, nullptr);
    bwd = sel_bwd(gather_time(xs, rev), gather_time(z, rev), info.mask, nullptr);
  }
  bwd = gather_time(bwd, rev);
  return out_proj(torch::cat({fwd, bwd}, 2));
}

torch::Tensor BiMambaImpl::step(const torch::Tensor&, const StepInfo&, LayerState&) {
  TORCH_CHECK(false, "BiMamba is bidirectional: it has no incremental step");
}

void BiMambaImpl::init_state(LayerState&, int64_t, int64_t, const torch::TensorOptions&) {
  TORCH_CHECK(false, "BiMamba is bidirectional: it has no decoding state");
}

}  // namespace mambamt::models
