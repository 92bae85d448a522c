// Plain-LibTorch references (see kernels/reference.h). Written for reading:
// one position at a time, in the accumulation dtype (float32, float64 for
// float64 inputs), with LibTorch's autograd for the gradients.
#include "kernels/reference.h"

#include <vector>

namespace mambamt::kernels::reference {
namespace {

using torch::indexing::None;
using torch::indexing::Slice;

torch::ScalarType accum_type(const torch::Tensor& t) {
  return t.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
}

// softplus with the reference code's threshold: identity above 20.
torch::Tensor softplus20(const torch::Tensor& v) { return torch::softplus(v, 1, 20); }

// dt (B,L,H) or (B,H) + bias (H), softplus if asked, zero where mask is false.
// mask has dt's leading dims.
torch::Tensor effective_dt(const torch::Tensor& dt, const torch::Tensor& bias, bool softplus,
                           const torch::Tensor& mask, torch::ScalarType acc) {
  torch::Tensor v = dt.to(acc);
  if (bias.defined()) v = v + bias.to(acc);
  if (softplus) v = softplus20(v);
  if (mask.defined()) v = v * mask.to(acc).unsqueeze(-1);
  return v;
}

// Groups of B/C to heads: (..., G, N) -> (..., H, N); head h uses group h / (H/G).
torch::Tensor groups_to_heads(const torch::Tensor& t, int64_t heads, int64_t group_dim) {
  const int64_t groups = t.size(group_dim);
  return groups == heads ? t : t.repeat_interleave(heads / groups, group_dim);
}

torch::Tensor silu_ref(const torch::Tensor& v) { return v * torch::sigmoid(v); }

}  // namespace

SsdScanResult ssd_scan(const torch::Tensor& x, const torch::Tensor& dt, const torch::Tensor& A_log,
                       const torch::Tensor& B, const torch::Tensor& C, const SsdScanOptions& o) {
  const auto acc = accum_type(x);
  const int64_t batch = x.size(0), len = x.size(1), heads = x.size(2), hdim = x.size(3);
  const int64_t dstate = B.size(3);
  torch::Tensor xf = x.to(acc);                                                  // (B,L,H,P)
  torch::Tensor dtv = effective_dt(dt, o.dt_bias, o.dt_softplus, o.mask, acc);   // (B,L,H)
  torch::Tensor A = -torch::exp(A_log.to(acc));                                  // (H)
  torch::Tensor Bh = groups_to_heads(B.to(acc), heads, 2);                       // (B,L,H,N)
  torch::Tensor Ch = groups_to_heads(C.to(acc), heads, 2);
  torch::Tensor state = o.initial_state.defined()
                            ? o.initial_state.to(acc)
                            : torch::zeros({batch, heads, hdim, dstate}, x.options().dtype(acc));
  std::vector<torch::Tensor> ys;
  ys.reserve(len);
  for (int64_t t = 0; t < len; ++t) {
    torch::Tensor dt_t = dtv.select(1, t);                              // (B,H)
    torch::Tensor decay = torch::exp(dt_t * A).view({batch, heads, 1, 1});
    torch::Tensor u = (dt_t.unsqueeze(-1) * xf.select(1, t)).unsqueeze(-1);  // (B,H,P,1)
    state = decay * state + u * Bh.select(1, t).unsqueeze(2);            // (B,H,P,N)
    torch::Tensor y = (state * Ch.select(1, t).unsqueeze(2)).sum(-1);    // (B,H,P)
    if (o.D.defined()) y = y + o.D.to(acc).unsqueeze(-1) * xf.select(1, t);
    ys.push_back(y);
  }
  torch::Tensor y = torch::stack(ys, 1);  // (B,L,H,P)
  if (o.mask.defined()) y = y * o.mask.to(acc).view({batch, len, 1, 1});
  if (o.z.defined()) y = y * silu_ref(o.z.to(acc));
  SsdScanResult r;
  r.y = y.to(x.scalar_type());
  if (o.return_final_state) r.final_state = state;
  return r;
}

namespace {

// segsum(a)[..., i, j] = a[..., j+1] + ... + a[..., i] for j <= i, -inf above the
// diagonal, so that exp(segsum) is the lower-triangular decay matrix.
torch::Tensor segsum(const torch::Tensor& a) {
  const int64_t T = a.size(-1);
  auto opts = torch::TensorOptions().dtype(torch::kBool).device(a.device());
  torch::Tensor strict = torch::tril(torch::ones({T, T}, opts), -1);
  std::vector<int64_t> sizes = a.sizes().vec();
  sizes.push_back(T);
  torch::Tensor rep = a.unsqueeze(-1).expand(sizes).masked_fill(~strict, 0);
  // rep[..., i, j] = a[i] for i > j: cumsum over i gives the sums from j+1 to i.
  torch::Tensor s = rep.cumsum(-2);
  torch::Tensor incl = torch::tril(torch::ones({T, T}, opts), 0);
  return s.masked_fill(~incl, -std::numeric_limits<double>::infinity());
}

}  // namespace

SsdScanResult ssd_scan_chunked(const torch::Tensor& x, const torch::Tensor& dt,
                               const torch::Tensor& A_log, const torch::Tensor& B,
                               const torch::Tensor& C, const SsdScanOptions& o) {
  const auto acc = accum_type(x);
  const int64_t batch = x.size(0), len = x.size(1), heads = x.size(2), hdim = x.size(3);
  const int64_t groups = B.size(2), dstate = B.size(3), hpg = heads / groups;
  const int64_t T = o.chunk_size;
  const int64_t nchunks = (len + T - 1) / T, padded = nchunks * T;
  torch::Tensor dtv = effective_dt(dt, o.dt_bias, o.dt_softplus, o.mask, acc);  // (B,L,H)
  torch::Tensor A = -torch::exp(A_log.to(acc));
  torch::Tensor xf = x.to(acc), Bf = B.to(acc), Cf = C.to(acc);
  if (padded != len) {
    // Trailing positions with dt = 0 change nothing; their outputs are dropped.
    const int64_t pad = padded - len;
    xf = torch::constant_pad_nd(xf, {0, 0, 0, 0, 0, pad});
    Bf = torch::constant_pad_nd(Bf, {0, 0, 0, 0, 0, pad});
    Cf = torch::constant_pad_nd(Cf, {0, 0, 0, 0, 0, pad});
    dtv = torch::constant_pad_nd(dtv, {0, 0, 0, pad});
  }
  // Layouts: per head (B,H,c,T,P); per group (B,G,c,T,N); heads h = g*hpg + k.
  torch::Tensor X = (xf * dtv.unsqueeze(-1)).view({batch, nchunks, T, heads, hdim})
                        .permute({0, 3, 1, 2, 4});                          // (B,H,c,T,P)
  torch::Tensor Bg = Bf.view({batch, nchunks, T, groups, dstate}).permute({0, 3, 1, 2, 4});
  torch::Tensor Cg = Cf.view({batch, nchunks, T, groups, dstate}).permute({0, 3, 1, 2, 4});
  torch::Tensor a = (dtv * A).view({batch, nchunks, T, heads}).permute({0, 3, 1, 2});  // (B,H,c,T)
  torch::Tensor a_cs = a.cumsum(-1);

  // 1. Intra-chunk outputs: (exp(segsum) ∘ C Bᵀ) X.
  torch::Tensor CB = torch::matmul(Cg, Bg.transpose(-1, -2));                // (B,G,c,T,T)
  torch::Tensor Lm = torch::exp(segsum(a));                                  // (B,H,c,T,T)
  torch::Tensor scores = (Lm.view({batch, groups, hpg, nchunks, T, T}) * CB.unsqueeze(2))
                             .view({batch, heads, nchunks, T, T});
  torch::Tensor Y = torch::matmul(scores, X);                                // (B,H,c,T,P)

  // 2. Each chunk's own contribution to the state at its end: (N,P) per chunk.
  torch::Tensor decay_states = torch::exp(a_cs.narrow(-1, T - 1, 1) - a_cs);  // (B,H,c,T)
  torch::Tensor Bd = (Bg.unsqueeze(2) * decay_states.view({batch, groups, hpg, nchunks, T, 1}))
                         .view({batch, heads, nchunks, T, dstate});
  torch::Tensor states = torch::matmul(Bd.transpose(-1, -2), X);             // (B,H,c,N,P)

  // 3. State passing between chunks: states at every chunk start, and the final one.
  torch::Tensor init = o.initial_state.defined()
                           ? o.initial_state.to(acc).transpose(-1, -2).unsqueeze(2)
                           : torch::zeros({batch, heads, 1, dstate, hdim}, xf.options());
  states = torch::cat({init, states}, 2);                                    // (B,H,c+1,N,P)
  torch::Tensor chunk_a = torch::constant_pad_nd(a_cs.select(-1, T - 1), {1, 0});  // (B,H,c+1)
  torch::Tensor decay_chunk = torch::exp(segsum(chunk_a.unsqueeze(2))).squeeze(2);  // (B,H,c+1,c+1)
  torch::Tensor passed = torch::matmul(decay_chunk, states.flatten(3))
                             .view({batch, heads, nchunks + 1, dstate, hdim});
  torch::Tensor starts = passed.narrow(2, 0, nchunks);                       // (B,H,c,N,P)

  // 4. Outputs from the state entering each chunk.
  torch::Tensor Cd = (Cg.unsqueeze(2) * torch::exp(a_cs).view({batch, groups, hpg, nchunks, T, 1}))
                         .view({batch, heads, nchunks, T, dstate});
  Y = Y + torch::matmul(Cd, starts);

  torch::Tensor y = Y.permute({0, 2, 3, 1, 4}).reshape({batch, padded, heads, hdim});
  if (padded != len) y = y.narrow(1, 0, len);
  if (o.D.defined()) y = y + o.D.to(acc).unsqueeze(-1) * xf.narrow(1, 0, len);
  if (o.mask.defined()) y = y * o.mask.to(acc).view({batch, len, 1, 1});
  if (o.z.defined()) y = y * silu_ref(o.z.to(acc));
  SsdScanResult r;
  r.y = y.to(x.scalar_type());
  if (o.return_final_state) r.final_state = passed.select(2, nchunks).transpose(-1, -2);
  return r;
}

torch::Tensor ssd_step(const torch::Tensor& state, const torch::Tensor& x, const torch::Tensor& dt,
                       const torch::Tensor& A_log, const torch::Tensor& B, const torch::Tensor& C,
                       const SsdStepOptions& o) {
  torch::NoGradGuard no_grad;
  const auto acc = state.scalar_type();
  const int64_t heads = x.size(1);
  torch::Tensor dtv = effective_dt(dt, o.dt_bias, o.dt_softplus, o.mask, acc);  // (B,H)
  torch::Tensor A = -torch::exp(A_log.to(acc));
  torch::Tensor xf = x.to(acc);
  torch::Tensor Bh = groups_to_heads(B.to(acc), heads, 1), Ch = groups_to_heads(C.to(acc), heads, 1);
  torch::Tensor decay = torch::exp(dtv * A).unsqueeze(-1).unsqueeze(-1);
  state.mul_(decay).add_((dtv.unsqueeze(-1) * xf).unsqueeze(-1) * Bh.unsqueeze(2));
  torch::Tensor y = (state * Ch.unsqueeze(2)).sum(-1);
  if (o.D.defined()) y = y + o.D.to(acc).unsqueeze(-1) * xf;
  if (o.mask.defined()) y = y * o.mask.to(acc).view({-1, 1, 1});
  if (o.z.defined()) y = y * silu_ref(o.z.to(acc));
  return y.to(x.scalar_type());
}

SelectiveScanResult selective_scan(const torch::Tensor& u, const torch::Tensor& delta,
                                   const torch::Tensor& A, const torch::Tensor& B,
                                   const torch::Tensor& C, const SelectiveScanOptions& o) {
  const auto acc = accum_type(u);
  const int64_t batch = u.size(0), dim = u.size(1), len = u.size(2), dstate = A.size(1);
  torch::Tensor uf = u.to(acc);
  torch::Tensor dl = delta.to(acc);                                   // (B,D,L)
  if (o.delta_bias.defined()) dl = dl + o.delta_bias.to(acc).unsqueeze(-1);
  if (o.delta_softplus) dl = softplus20(dl);
  if (o.mask.defined()) dl = dl * o.mask.to(acc).unsqueeze(1);
  torch::Tensor Af = A.to(acc);                                        // (D,N)
  // B, C: (B,N,L) shared by all channels, or (B,G,N,L) -> (B,D,N,L).
  auto expand = [&](const torch::Tensor& t) {
    torch::Tensor f = t.to(acc);
    return f.dim() == 3 ? f.unsqueeze(1) : groups_to_heads(f, dim, 1);
  };
  torch::Tensor Bf = expand(B), Cf = expand(C);                        // (B,1|D,N,L)
  torch::Tensor h = o.initial_state.defined()
                        ? o.initial_state.to(acc)
                        : torch::zeros({batch, dim, dstate}, uf.options());
  std::vector<torch::Tensor> ys;
  ys.reserve(len);
  for (int64_t t = 0; t < len; ++t) {
    torch::Tensor d_t = dl.select(2, t).unsqueeze(-1);                 // (B,D,1)
    torch::Tensor dA = torch::exp(d_t * Af);                            // (B,D,N)
    torch::Tensor dBu = d_t * Bf.select(3, t) * uf.select(2, t).unsqueeze(-1);
    h = dA * h + dBu;
    ys.push_back((h * Cf.select(3, t)).sum(-1));                        // (B,D)
  }
  torch::Tensor y = torch::stack(ys, 2);                                // (B,D,L)
  if (o.D.defined()) y = y + o.D.to(acc).unsqueeze(-1) * uf;
  if (o.mask.defined()) y = y * o.mask.to(acc).unsqueeze(1);
  if (o.z.defined()) y = y * silu_ref(o.z.to(acc));
  SelectiveScanResult r;
  r.y = y.to(u.scalar_type());
  if (o.return_final_state) r.final_state = h;
  return r;
}

torch::Tensor selective_scan_step(const torch::Tensor& state, const torch::Tensor& u,
                                  const torch::Tensor& delta, const torch::Tensor& A,
                                  const torch::Tensor& B, const torch::Tensor& C,
                                  const SelectiveScanStepOptions& o) {
  torch::NoGradGuard no_grad;
  const auto acc = state.scalar_type();
  const int64_t dim = u.size(1);
  torch::Tensor uf = u.to(acc);
  torch::Tensor dl = delta.to(acc);                                   // (B,D)
  if (o.delta_bias.defined()) dl = dl + o.delta_bias.to(acc);
  if (o.delta_softplus) dl = softplus20(dl);
  if (o.mask.defined()) dl = dl * o.mask.to(acc).unsqueeze(-1);
  auto expand = [&](const torch::Tensor& t) {
    torch::Tensor f = t.to(acc);
    return f.dim() == 2 ? f.unsqueeze(1) : groups_to_heads(f, dim, 1);  // (B,1|D,N)
  };
  torch::Tensor Bf = expand(B), Cf = expand(C);
  torch::Tensor d = dl.unsqueeze(-1);
  state.mul_(torch::exp(d * A.to(acc))).add_(d * Bf * uf.unsqueeze(-1));
  torch::Tensor y = (state * Cf).sum(-1);
  if (o.D.defined()) y = y + o.D.to(acc) * uf;
  if (o.mask.defined()) y = y * o.mask.to(acc).unsqueeze(-1);
  if (o.z.defined()) y = y * silu_ref(o.z.to(acc));
  return y.to(u.scalar_type());
}

CausalConv1dResult causal_conv1d(const torch::Tensor& x, const torch::Tensor& weight,
                                 const CausalConv1dOptions& o) {
  const auto acc = accum_type(x);
  const int64_t batch = x.size(0), dim = x.size(1), len = x.size(2), width = weight.size(1);
  torch::Tensor init = o.initial_state.defined()
                           ? o.initial_state.to(acc)
                           : torch::zeros({batch, dim, width - 1}, x.options().dtype(acc));
  torch::Tensor xp = torch::cat({init, x.to(acc)}, 2);   // (B,D,W-1+L): x at -(W-1)..L-1
  torch::Tensor w = weight.to(acc);
  torch::Tensor y = torch::zeros({batch, dim, len}, xp.options());
  for (int64_t k = 0; k < width; ++k) y = y + w.select(1, k).unsqueeze(-1) * xp.narrow(2, k, len);
  if (o.bias.defined()) y = y + o.bias.to(acc).unsqueeze(-1);
  if (o.silu) y = silu_ref(y);
  CausalConv1dResult r;
  r.y = y.to(x.scalar_type());
  if (o.return_final_state) r.final_state = xp.narrow(2, len, width - 1).to(x.scalar_type());
  return r;
}

torch::Tensor causal_conv1d_step(const torch::Tensor& state, const torch::Tensor& x,
                                 const torch::Tensor& weight, const torch::Tensor& bias, bool silu_act) {
  torch::NoGradGuard no_grad;
  const auto acc = accum_type(x);
  torch::Tensor window = torch::cat({state.to(acc), x.to(acc).unsqueeze(-1)}, -1);  // (B,D,W)
  torch::Tensor y = (window * weight.to(acc)).sum(-1);
  if (bias.defined()) y = y + bias.to(acc);
  if (silu_act) y = silu_ref(y);
  state.copy_(window.narrow(-1, 1, window.size(-1) - 1));
  return y.to(x.scalar_type());
}

torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
  torch::Tensor xf = x.scalar_type() == torch::kDouble ? x : x.to(torch::kFloat);
  torch::Tensor r = torch::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return (xf * r).to(x.scalar_type()) * weight;
}

}  // namespace mambamt::kernels::reference
