#include "models/layers.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include <ATen/Parallel.h>

#include "core/error.h"
#include "kernels/norm.h"
#include "models/detail/decode_cpu.h"
#include "models/detail/linear.h"

namespace mambamt::models {

// ------------------------------------------------------------------ RMSNorm

RMSNormImpl::RMSNormImpl(const RMSNormOptions& o) : options(o) {
  weight = register_parameter("weight", torch::ones({o.dim()}));
}

namespace {

// Inference fast path for float32 on CPU: one pass per row, one allocation
// (decode steps would otherwise spend a handful of tiny ops per norm).
torch::Tensor rms_norm_fused(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
  torch::Tensor xc = x.contiguous();
  torch::Tensor out = torch::empty_like(xc);
  const int64_t dim = weight.size(0), rows = xc.numel() / dim;
  const float* in = xc.data_ptr<float>();
  const float* w = weight.data_ptr<float>();
  float* o = out.data_ptr<float>();
  at::parallel_for(0, rows, 16, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      detail::rms_norm_row(in + r * dim, w, o + r * dim, dim, static_cast<float>(eps));
    }
  });
  return out;
}

}  // namespace

torch::Tensor RMSNormImpl::forward(const torch::Tensor& x) {
  if (!torch::GradMode::is_enabled() && x.is_cpu() && x.scalar_type() == torch::kFloat &&
      weight.scalar_type() == torch::kFloat && weight.is_contiguous())
    return rms_norm_fused(x, weight, options.eps());
  // On a GPU one kernel instead of the seven of the expression below (the
  // same result; a decode step launches every one of them).
  if (!torch::GradMode::is_enabled() && x.is_cuda() &&
      (weight.scalar_type() == torch::kFloat || weight.scalar_type() == x.scalar_type()))
    return kernels::rms_norm(x, weight, options.eps());
  // Computed in float32 at least, so bf16 activations keep their scale.
  torch::Tensor xf = x.scalar_type() == torch::kDouble ? x : x.to(torch::kFloat);
  torch::Tensor r = torch::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + options.eps());
  return (xf * r).to(x.scalar_type()) * weight;
}

// ------------------------------------------------------------------ RoPE

std::pair<torch::Tensor, torch::Tensor> rope_tables(const torch::Tensor& positions, int64_t dim, double base,
                                                    torch::ScalarType dtype) {
  TORCH_CHECK(dim % 2 == 0, "RoPE needs an even head dimension, got ", dim);
  // inv_freq[i] = base^(-2i/dim), angles in float64 so long positions keep them.
  if (positions.is_cpu() && positions.scalar_type() == torch::kLong && dtype == torch::kFloat) {
    // One loop where LibTorch's expression below was eleven ops (a decode
    // step builds these tables for its B positions every step).
    const int64_t half = dim / 2;
    std::vector<double> inv(static_cast<size_t>(half));
    for (int64_t i = 0; i < half; ++i) inv[i] = std::pow(base, -static_cast<double>(2 * i) / static_cast<double>(dim));
    const torch::Tensor pc = positions.contiguous();
    std::vector<int64_t> shape = positions.sizes().vec();
    shape.push_back(half);
    torch::Tensor cos = torch::empty(shape, torch::kFloat), sin = torch::empty(shape, torch::kFloat);
    const int64_t* p = pc.data_ptr<int64_t>();
    float *c = cos.data_ptr<float>(), *sn = sin.data_ptr<float>();
    at::parallel_for(0, pc.numel(), 1024, [&](int64_t begin, int64_t end) {
      for (int64_t j = begin; j < end; ++j)
        for (int64_t i = 0; i < half; ++i) {
          const double ang = static_cast<double>(p[j]) * inv[i];
          c[j * half + i] = static_cast<float>(std::cos(ang));
          sn[j * half + i] = static_cast<float>(std::sin(ang));
        }
    });
    return {cos, sin};
  }
  auto fopts = torch::TensorOptions().dtype(torch::kDouble).device(positions.device());
  torch::Tensor inv = torch::pow(base, -torch::arange(0, dim, 2, fopts) / static_cast<double>(dim));
  torch::Tensor ang = positions.to(torch::kDouble).unsqueeze(-1) * inv;
  return {torch::cos(ang).to(dtype), torch::sin(ang).to(dtype)};
}

namespace {

// The rotary tables of `positions` (any shape) for head dim dh, viewed as
// `shape`: computed by the first attention layer of a pass or step and kept in
// its info for the other layers.
template <typename Info>
void shared_rope(const Info& info, const torch::Tensor& positions, int64_t dh, double base, torch::ScalarType dtype,
                 at::IntArrayRef shape) {
  if (info.rope_dim == dh && info.rope_base == base && info.rope_cos.defined() &&
      info.rope_cos.scalar_type() == dtype)
    return;
  auto t = rope_tables(positions, dh, base, dtype);
  info.rope_cos = t.first.view(shape);
  info.rope_sin = t.second.view(shape);
  info.rope_dim = dh;
  info.rope_base = base;
}

}  // namespace

torch::Tensor apply_rope(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  const int64_t half = x.size(-1) / 2;
  torch::Tensor x1 = x.narrow(-1, 0, half), x2 = x.narrow(-1, half, half);
  return torch::cat({x1 * cos - x2 * sin, x1 * sin + x2 * cos}, -1);
}

// ------------------------------------------------------------------ MLP

MlpKind mlp_kind(const std::string& name) {
  if (name == "swiglu") return MlpKind::kSwiGLU;
  if (name == "relu") return MlpKind::kReLU;
  throw InputError("model.mlp = \"" + name + "\": expected swiglu or relu");
}

MlpImpl::MlpImpl(const MlpOptions& o) : options(o) {
  up = register_module("up", torch::nn::Linear(torch::nn::LinearOptions(o.d_model(), o.d_ff()).bias(false)));
  if (o.kind() == MlpKind::kSwiGLU)
    gate = register_module("gate", torch::nn::Linear(torch::nn::LinearOptions(o.d_model(), o.d_ff()).bias(false)));
  down = register_module("down", torch::nn::Linear(torch::nn::LinearOptions(o.d_ff(), o.d_model()).bias(false)));
  init_linear(up, o.init());
  if (gate) init_linear(gate, o.init());
  init_linear(down, o.init());
}

torch::Tensor MlpImpl::forward(const torch::Tensor& x) {
  using detail::linear;
  if (gate) {
    torch::Tensor u = linear(x, up), g = linear(x, gate);
    if (detail::mul_silu_inplace(u, g)) return linear(u, down);  // without gradients, on the CPU
    return linear(torch::silu(g) * u, down);
  }
  return linear(torch::relu(linear(x, up)), down);
}

// ------------------------------------------------------------------ attention

namespace {

// The softmax weights of q's rows over k's: float32 at least (bf16/fp16
// activations under autocast), and the lowest finite value, not -inf, where
// a key is not allowed, so that a query without any allowed key (a padding
// position) gets uniform weights instead of NaN. The scale goes on q
// (B,H,Lq,Dh) rather than on the scores (B,H,Lq,Lk), and the mask is written
// into the scores in place (the product's backward does not read its
// output): one pass over the largest tensor fewer each.
torch::Tensor attention_weights(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& allowed,
                                double scale) {
  torch::Tensor scores = torch::matmul(q * scale, k.transpose(-2, -1));
  if (scores.scalar_type() != torch::kDouble) scores = scores.to(torch::kFloat);
  if (allowed.defined()) scores.masked_fill_(allowed.logical_not(), std::numeric_limits<float>::lowest());
  return torch::softmax(scores, -1);
}

// Rows [start, start + n) of the queries' dimension of a mask broadcastable
// to (B,H,Lq,Lk); one that is the same for every query stays as it is.
torch::Tensor query_rows(const torch::Tensor& allowed, int64_t start, int64_t n) {
  if (!allowed.defined() || allowed.dim() < 2 || allowed.size(-2) == 1) return allowed;
  return allowed.narrow(-2, start, n);
}

// Attention over blocks of `block` queries. Each query's softmax is over all
// keys, so a block's output is exact; the weights of a block live only while
// it is computed, in the forward pass and again in the backward pass, which
// recomputes them instead of keeping the (B,H,Lq,Lk) weights of the whole
// layer for it. Inputs: q (B,H,Lq,Dh), k (B,H,Lk,Dh), v (B,H,Lk,Dv),
// allowed (broadcastable to (B,H,Lq,Lk), bool, or undefined).
struct BlockedAttention : public torch::autograd::Function<BlockedAttention> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, torch::Tensor q,
                                                torch::Tensor k, torch::Tensor v, torch::Tensor allowed,
                                                int64_t block) {
    if (allowed.numel() == 0) allowed = torch::Tensor();  // absent (see attend_blocks)
    const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
    const int64_t lq = q.size(2);
    std::vector<int64_t> shape = q.sizes().vec();
    shape.back() = v.size(-1);
    torch::Tensor out = torch::empty(shape, v.options());
    for (int64_t s = 0; s < lq; s += block) {
      const int64_t n = std::min(block, lq - s);
      torch::Tensor p = attention_weights(q.narrow(2, s, n), k, query_rows(allowed, s, n), scale);
      out.narrow(2, s, n).copy_(torch::matmul(p.to(v.scalar_type()), v));
    }
    ctx->save_for_backward({q, k, v, allowed});
    ctx->saved_data["block"] = block;
    return {out};
  }

  // With P a block's weights and dO its output gradient: dV += P^T dO;
  // dS = P * (dP - rowsum(P * dP)) with dP = dO V^T (the softmax's
  // gradient); dQ = scale dS K; dK += scale dS^T Q. Where a key is not
  // allowed P is 0 and so is dS, as the masked scores' gradient, except in a
  // row without any allowed key (uniform weights): there the scores' gradient
  // is 0 too, so such rows are zeroed where there are any.
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &allowed = saved[3];
    const int64_t block = ctx->saved_data["block"].toInt();
    const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
    const int64_t lq = q.size(2);
    if (!grads[0].defined()) return torch::autograd::variable_list(5);
    torch::Tensor no_key;  // (..., Lq, 1): the queries without any allowed key, if any
    if (allowed.defined()) {
      no_key = allowed.logical_not().all(-1, true);
      if (!no_key.any().item<bool>()) no_key = torch::Tensor();
    }
    torch::Tensor dout = grads[0].to(v.scalar_type());
    torch::Tensor dq = torch::empty_like(q), dk = torch::zeros_like(k), dv = torch::zeros_like(v);
    for (int64_t s = 0; s < lq; s += block) {
      const int64_t n = std::min(block, lq - s);
      torch::Tensor qc = q.narrow(2, s, n), doc = dout.narrow(2, s, n), ac = query_rows(allowed, s, n);
      torch::Tensor p = attention_weights(qc, k, ac, scale);
      dv += torch::matmul(p.to(v.scalar_type()).transpose(-2, -1), doc);
      torch::Tensor dp = torch::matmul(doc, v.transpose(-2, -1)).to(p.scalar_type());
      torch::Tensor ds = torch::_softmax_backward_data(dp, p, -1, p.scalar_type());
      if (no_key.defined()) ds.masked_fill_(query_rows(no_key, s, n), 0);
      ds = ds.to(q.scalar_type());
      dq.narrow(2, s, n).copy_(torch::matmul(ds, k) * scale);
      dk += torch::matmul(ds.transpose(-2, -1), qc) * scale;
    }
    return {dq, dk, dv, torch::Tensor(), torch::Tensor()};
  }
};

// attend works in blocks of queries where one call's (B,H,Lq,Lk) weights
// would pass 64M (256 MiB in float32), in blocks of 16M weights at most.
// Below that it keeps the whole call's weights, which the blocks' backward
// pass computes twice (at 8192 tokens the steps cost about the same either
// way, and the peak fell 2.8-3.5 times, measured with `mambamt bench train`).
constexpr int64_t kAttendWholeElements = int64_t{1} << 26;
constexpr int64_t kAttendBlockElements = int64_t{1} << 24;

}  // namespace

int64_t attend_query_block(const torch::Tensor& q, const torch::Tensor& k) {
  if (!q.is_cpu() || q.dim() != 4 || k.dim() != 4 || q.size(2) <= 1) return 0;
  if (q.scalar_type() != torch::kFloat && q.scalar_type() != torch::kDouble) return 0;
  const int64_t per_query = q.size(0) * q.size(1) * k.size(2);
  if (per_query * q.size(2) <= kAttendWholeElements) return 0;
  return std::max<int64_t>(1, kAttendBlockElements / std::max<int64_t>(per_query, 1));
}

torch::Tensor attend_blocks(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                            const torch::Tensor& allowed, int64_t block) {
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4 && block >= 1,
              "attend_blocks: q, k and v must be (B,H,L,D) and the block at least 1 query");
  // LibTorch 1.13's Function::apply needs every tensor argument defined.
  torch::Tensor mask = allowed.defined() ? allowed : torch::empty({0}, q.options().dtype(torch::kBool));
  return BlockedAttention::apply(q, k, v, mask, block)[0];
}

torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                     const torch::Tensor& allowed, double dropout, bool training, torch::Tensor* weights) {
  // Long inputs without weights asked for or dropped out: in blocks of
  // queries, so that the layer's (B,H,Lq,Lk) weights are never all in memory.
  if (!weights && !(dropout > 0 && training)) {
    const int64_t block = attend_query_block(q, k);
    if (block > 0) return attend_blocks(q, k, v, allowed, block);
  }
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  torch::Tensor p = attention_weights(q, k, allowed, scale);
  if (weights) *weights = p.detach();
  if (dropout > 0 && training) p = torch::dropout(p, dropout, true);
  return torch::matmul(p.to(v.scalar_type()), v);
}

AttentionImpl::AttentionImpl(const AttentionOptions& o) : options(o) {
  TORCH_CHECK(o.d_model() % o.n_heads() == 0, "Attention: d_model ", o.d_model(), " not divisible by n_heads ",
              o.n_heads());
  qkv = register_module("qkv", torch::nn::Linear(torch::nn::LinearOptions(o.d_model(), 3 * o.d_model()).bias(false)));
  out = register_module("out", torch::nn::Linear(torch::nn::LinearOptions(o.d_model(), o.d_model()).bias(false)));
  init_linear(qkv, o.init());
  init_linear(out, o.init());
}

torch::Tensor AttentionImpl::forward(const torch::Tensor& x, const SeqInfo& info, LayerState* state) {
  const int64_t b = x.size(0), l = x.size(1), h = options.n_heads(), dh = head_dim();
  torch::Tensor qkv_ = qkv(x).view({b, l, 3, h, dh}).permute({2, 0, 3, 1, 4});  // (3,B,H,L,Dh)
  torch::Tensor q = qkv_[0], k = qkv_[1], v = qkv_[2];
  shared_rope(info, info.positions, dh, options.rope_base(), x.scalar_type(), {b, 1, l, dh / 2});
  q = apply_rope(q, info.rope_cos, info.rope_sin);
  k = apply_rope(k, info.rope_cos, info.rope_sin);

  auto dev = x.device();
  torch::Tensor allowed;
  if (info.mask.defined()) allowed = info.mask.view({b, 1, 1, l});
  auto both = [&](const torch::Tensor& m) { allowed = allowed.defined() ? allowed.logical_and(m) : m; };
  if (options.causal()) both(torch::ones({l, l}, torch::TensorOptions().dtype(torch::kBool).device(dev)).tril());
  if (options.window() > 0) {
    torch::Tensor d = info.positions.unsqueeze(2) - info.positions.unsqueeze(1);  // (B,Lq,Lk)
    torch::Tensor w = options.causal() ? d.lt(options.window()) : d.abs().lt(options.window());
    both(w.unsqueeze(1));
  }
  torch::Tensor y = attend(q, k, v, allowed, options.attn_dropout(), is_training(), record ? &last_weights : nullptr);
  if (state) {
    torch::Tensor valid = info.mask.defined()
                              ? info.mask
                              : torch::ones({b, l}, torch::TensorOptions().dtype(torch::kBool).device(dev));
    append(state->self, k, v, valid);
  }
  return out(y.transpose(1, 2).reshape({b, l, options.d_model()}));
}

void AttentionImpl::init_state(LayerState& state, int64_t batch, int64_t reserve, const torch::TensorOptions& o) {
  KvCache& c = state.self;
  c.window = options.window();
  const int64_t cap = c.window > 0 ? c.window : std::max<int64_t>(reserve, 16);
  c.k = torch::zeros({batch, options.n_heads(), cap, head_dim()}, o);
  c.v = torch::zeros({batch, options.n_heads(), cap, head_dim()}, o);
  c.valid = torch::zeros({batch, cap}, o.dtype(torch::kBool));
  c.length = 0;
}

void AttentionImpl::reserve(KvCache& c, int64_t l) {
  if (c.window > 0 || c.length + l <= c.capacity()) return;
  torch::NoGradGuard no_grad;
  // Grow by doubling: amortised O(1) copies per token.
  const int64_t cap = std::max(2 * c.capacity(), c.length + l);
  auto grow = [&](const torch::Tensor& t, int64_t dim) {
    std::vector<int64_t> shape = t.sizes().vec();
    shape[dim] = cap;
    torch::Tensor n = torch::zeros(shape, t.options());
    n.narrow(dim, 0, c.length).copy_(t.narrow(dim, 0, c.length));
    return n;
  };
  c.k = grow(c.k, 2);
  c.v = grow(c.v, 2);
  c.valid = grow(c.valid, 1);
}

void AttentionImpl::append(KvCache& c, const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& valid) {
  torch::NoGradGuard no_grad;
  const int64_t l = k.size(2);
  if (c.window == 0) {
    reserve(c, l);
    c.k.narrow(2, c.length, l).copy_(k);
    c.v.narrow(2, c.length, l).copy_(v);
    c.valid.narrow(1, c.length, l).copy_(valid);
  } else {
    // Ring: column c lives in slot c % window; only the last `window` columns matter.
    const int64_t w = c.window, keep = std::min(l, w), first = c.length + l - keep;
    if (keep == 1) {
      const int64_t slot = first % w;
      c.k.narrow(2, slot, 1).copy_(k.narrow(2, l - 1, 1));
      c.v.narrow(2, slot, 1).copy_(v.narrow(2, l - 1, 1));
      c.valid.narrow(1, slot, 1).copy_(valid.narrow(1, l - 1, 1));
    } else {
      torch::Tensor slots =
          torch::remainder(torch::arange(first, first + keep, torch::TensorOptions().dtype(torch::kLong)), w)
              .to(k.device());
      c.k.index_copy_(2, slots, k.narrow(2, l - keep, keep));
      c.v.index_copy_(2, slots, v.narrow(2, l - keep, keep));
      c.valid.index_copy_(1, slots, valid.narrow(1, l - keep, keep));
    }
  }
  c.length += l;
}

torch::Tensor AttentionImpl::step(const torch::Tensor& x, const StepInfo& info, LayerState& state) {
  const int64_t b = x.size(0), h = options.n_heads(), dh = head_dim();
  torch::Tensor qkv_ = detail::linear(x, qkv);
  shared_rope(info, info.position, dh, options.rope_base(), x.scalar_type(), {b, 1, 1, 1, dh / 2});
  KvCache& c = state.self;
  if (info.column.defined()) return static_step(qkv_, info, c);
  reserve(c, 1);
  // q rotated (B,H,Dh), k rotated and v written to the cache in one pass...
  torch::Tensor q = detail::rotate_append(qkv_, info.rope_cos, info.rope_sin, c.k, c.v, c.valid,
                                          c.window > 0 ? c.length % c.window : c.length);
  if (q.defined()) {
    c.length += 1;
  } else {
    // ... or with LibTorch's ops: q and k rotated together, (B,2,H,1,Dh).
    torch::Tensor qkv5 = qkv_.view({b, 3, h, 1, dh});
    torch::Tensor qk = apply_rope(qkv5.narrow(1, 0, 2), info.rope_cos, info.rope_sin);
    q = qk.select(1, 0);  // (B,H,1,Dh)
    append(c, qk.select(1, 1), qkv5.select(1, 2),
           torch::ones({b, 1}, torch::TensorOptions().dtype(torch::kBool).device(x.device())));
  }
  const int64_t n = c.filled();
  torch::Tensor y;
  if (x.is_cpu() && x.scalar_type() == torch::kFloat && !torch::GradMode::is_enabled() && c.k.is_contiguous() &&
      c.v.is_contiguous() && c.valid.is_contiguous() && detail::attend_cached_available())
    y = detail::attend_cached(q, c.k, c.v, c.valid, n);  // reads the cache in place, once
  else
    y = attend(q.reshape({b, h, 1, dh}), c.k.narrow(2, 0, n), c.v.narrow(2, 0, n),
               c.valid.narrow(1, 0, n).view({b, 1, 1, n}), 0.0, false);
  return detail::linear(y.view({b, options.d_model()}), out);
}

torch::Tensor AttentionImpl::static_step(const torch::Tensor& qkv_, const StepInfo& info, KvCache& c) {
  const int64_t b = qkv_.size(0), h = options.n_heads(), dh = head_dim();
  // The columns read: a ring's every slot, else the span, which must reach
  // past this step's column and stay inside the cache (host-side lengths;
  // a CUDA graph checks them once, at capture, and its runner before replays).
  const int64_t n = c.window > 0 ? c.window : info.span;
  TORCH_CHECK(c.window > 0 || (c.length < info.span && info.span <= c.capacity()),
              "Attention static step: column ", c.length, " needs a span in (", c.length, ", ", c.capacity(),
              "] (the cache's capacity), got ", info.span);
  torch::Tensor qkv5 = qkv_.view({b, 3, h, 1, dh});
  torch::Tensor qk = apply_rope(qkv5.narrow(1, 0, 2), info.rope_cos, info.rope_sin);  // (B,2,H,1,Dh)
  torch::Tensor slot = c.window > 0 ? info.column.remainder(c.window) : info.column;
  c.k.index_copy_(2, slot, qk.select(1, 1).to(c.k.scalar_type()));
  c.v.index_copy_(2, slot, qkv5.select(1, 2).to(c.v.scalar_type()));
  c.valid.index_fill_(1, slot, true);
  c.length += 1;
  // Columns past this step's are stale (a reorder copies only the filled
  // ones): slot j is read when j <= column (for the span: computed by the
  // first full-attention layer of the step).
  auto written = [&] { return torch::arange(n, info.column.options()).le(info.column); };
  if (c.window == 0 && !info.span_written.defined()) info.span_written = written();
  torch::Tensor allowed = c.valid.narrow(1, 0, n).logical_and(c.window > 0 ? written() : info.span_written);
  torch::Tensor y = attend(qk.select(1, 0).reshape({b, h, 1, dh}), c.k.narrow(2, 0, n), c.v.narrow(2, 0, n),
                           allowed.view({b, 1, 1, n}), 0.0, false);
  return detail::linear(y.view({b, options.d_model()}), out);
}

// ------------------------------------------------------------------ cross-attention

CrossAttentionKind cross_attention_kind(const std::string& name) {
  if (name == "full") return CrossAttentionKind::kFull;
  if (name == "gated") return CrossAttentionKind::kGated;
  if (name == "local") return CrossAttentionKind::kLocal;
  throw InputError("model.cross_attn = \"" + name + "\": expected full, gated or local");
}

CrossAttentionImpl::CrossAttentionImpl(const CrossAttentionOptions& o) : options(o) {
  TORCH_CHECK(o.d_model() % o.n_heads() == 0, "CrossAttention: d_model not divisible by n_heads");
  q = register_module("q", torch::nn::Linear(torch::nn::LinearOptions(o.d_model(), o.d_model()).bias(false)));
  kv = register_module("kv", torch::nn::Linear(torch::nn::LinearOptions(o.d_model(), 2 * o.d_model()).bias(false)));
  out = register_module("out", torch::nn::Linear(torch::nn::LinearOptions(o.d_model(), o.d_model()).bias(false)));
  init_linear(q, o.init());
  init_linear(kv, o.init());
  init_linear(out, o.init());
  if (o.kind() == CrossAttentionKind::kGated) {
    gate = register_module("gate", torch::nn::Linear(torch::nn::LinearOptions(o.d_model(), 1)));
    // The gate starts half open for every token: sigmoid(0) (the normal scheme:
    // small weights, about half open).
    init_linear(gate, o.init());
    if (o.init().is_standard()) {
      torch::NoGradGuard no_grad;
      gate->weight.zero_();
    }
  }
}

CrossKv CrossAttentionImpl::memory(const torch::Tensor& enc, const torch::Tensor& src_mask) {
  const int64_t b = enc.size(0), s = enc.size(1), h = options.n_heads(), dh = options.d_model() / h;
  torch::Tensor kv_ = kv(enc).view({b, s, 2, h, dh}).permute({2, 0, 3, 1, 4});  // (2,B,H,S,Dh)
  CrossKv m;
  m.k = kv_[0].contiguous();
  m.v = kv_[1].contiguous();
  m.mask = src_mask;
  m.src_len = src_mask.sum(1);
  return m;
}

torch::Tensor CrossAttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& positions, const CrossKv& m) {
  const int64_t b = x.size(0), t = x.size(1), h = options.n_heads(), dh = options.d_model() / h;
  const int64_t s = m.k.size(2);
  // Projections on (B*T, D) rows: a decode step (T = 1) takes the fast CPU paths.
  torch::Tensor x2 = x.reshape({b * t, options.d_model()});
  const bool step = t == 1 && options.kind() != CrossAttentionKind::kLocal && !record && !is_training() && !torch::GradMode::is_enabled();
  // The gate first: a skipped token needs nothing else.
  torch::Tensor g, open;  // (B*T, 1): gate values; where they are not skipped (undefined: everywhere)
  if (gate) {
    g = torch::sigmoid(detail::linear(x2, gate));
    if (record_gate) last_gate = g.detach().view({b, t}).to(torch::kFloat, false, /*copy=*/true);
    if (keep_gates) kept_gates.push_back(g.view({b, t}));
    if (skip_below > 0 && !is_training()) {
      if (step && g.is_cpu() && g.scalar_type() == torch::kFloat && g.is_contiguous()) {
        // A CPU decode step: the rows to compute, read on the host (no
        // LibTorch ops); the skipped rows' gates zeroed in place.
        float* gp = g.data_ptr<float>();
        open = torch::empty({b * t}, torch::TensorOptions().dtype(torch::kBool));
        bool* op = open.data_ptr<bool>();
        int64_t n_open = 0;
        for (int64_t i = 0; i < b * t; ++i) {
          op[i] = gp[i] >= skip_below;
          n_open += op[i];
          if (!op[i]) gp[i] = 0;
        }
        if (n_open == 0) return torch::zeros({b, t, options.d_model()}, g.options());
        if (n_open == b * t) open = torch::Tensor();
      } else {
        g = g.masked_fill(g.lt(skip_below), 0);
      }
    }
  }
  torch::Tensor qh = detail::linear(x2, q).view({b, t, h, dh}).transpose(1, 2);  // (B,H,T,Dh)
  torch::Tensor allowed = m.mask.view({b, 1, 1, s});
  if (options.kind() == CrossAttentionKind::kLocal) {
    // Centre: the target position clamped to the source (a diagonal alignment).
    torch::Tensor centre = torch::minimum(positions, (m.src_len - 1).clamp_min(0).unsqueeze(1));  // (B,T)
    torch::Tensor j = torch::arange(s, positions.options());
    torch::Tensor near = (j.view({1, 1, s}) - centre.unsqueeze(2)).abs().le(options.window() / 2);  // (B,T,S)
    allowed = allowed.logical_and(near.unsqueeze(1));
  }
  torch::Tensor y;
  if (step && x.is_cpu() && x.scalar_type() == torch::kFloat && m.k.scalar_type() == torch::kFloat &&
      m.k.is_contiguous() && m.v.is_contiguous() && m.mask.scalar_type() == torch::kBool && m.mask.is_contiguous() &&
      detail::attend_cached_available())
    // A decode step: K/V read once, in place, and not at all for skipped rows.
    y = detail::attend_cached(qh, m.k, m.v, m.mask, s, open).unsqueeze(2);
  else
    y = attend(qh, m.k, m.v, allowed, options.attn_dropout(), is_training(), record ? &last_weights : nullptr);
  y = detail::linear(y.transpose(1, 2).reshape({b * t, options.d_model()}), out);
  if (gate) y = y * g;  // zero where skipped
  return y.view({b, t, options.d_model()});
}

std::vector<CrossAttentionImpl*> gated_cross_attention(torch::nn::Module& root, std::vector<std::string>* names) {
  std::vector<CrossAttentionImpl*> out;
  for (const auto& item : root.named_modules("", false))
    if (auto* cross = dynamic_cast<CrossAttentionImpl*>(item.value().get()); cross && cross->gate) {
      out.push_back(cross);
      if (names) names->push_back(item.key());
    }
  return out;
}

int64_t set_gate_skip(torch::nn::Module& root, double skip_below) {
  const auto gated = gated_cross_attention(root);
  for (auto* cross : gated) cross->skip_below = skip_below;
  return static_cast<int64_t>(gated.size());
}

GateSkipGuard::GateSkipGuard(torch::nn::Module& root, double skip_below) {
  for (auto* cross : gated_cross_attention(root)) {
    before_.emplace_back(cross, cross->skip_below);
    cross->skip_below = skip_below;
  }
}

GateSkipGuard::~GateSkipGuard() {
  for (auto& [cross, value] : before_) cross->skip_below = value;
}

}  // namespace mambamt::models
