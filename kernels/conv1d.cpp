// causal_conv1d / causal_conv1d_step: boundary validation, the autograd
// Function, and the dispatch to the CPU or CUDA kernels (detail::ConvParams).
#include "kernels/conv1d.h"

#include "kernels/cpu/cpu.h"
#include "kernels/detail/checks.h"
#include "kernels/detail/host.h"
#include "kernels/detail/validate.h"
#ifdef MAMBAMT_WITH_CUDA
#include "kernels/cuda/cuda.h"
#endif

namespace mambamt::kernels {
namespace {

using detail::accum;
using detail::ptr;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct ConvInputs {
  torch::Tensor x, weight, bias, init;
  torch::ScalarType acc;
};

// On CPU everything runs in the accumulation type; on CUDA x and the states
// keep their dtype and the weights are float.
ConvInputs prepare(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                   const torch::Tensor& init) {
  ConvInputs in;
  in.acc = detail::accum_dtype(x.scalar_type());
  in.x = x.is_cpu() ? x.to(in.acc) : x;
  in.weight = accum(weight, in.acc);
  in.bias = accum(bias, in.acc);
  in.init = init.defined() ? init.to(in.x.scalar_type()).contiguous() : init;
  return in;
}

void fill(detail::ConvParams& p, const ConvInputs& in, bool silu) {
  p.dtype = detail::to_dtype(in.x.scalar_type());
  p.batch = in.x.size(0), p.dim = in.x.size(1), p.seqlen = in.x.size(2), p.width = in.weight.size(1);
  p.silu = silu;
  p.x = ptr(in.x), p.x_bs = in.x.stride(0), p.x_ds = in.x.stride(1), p.x_ls = in.x.stride(2);
  p.weight = ptr(in.weight), p.bias = ptr(in.bias), p.initial_state = ptr(in.init);
}

struct ConvFunction : public torch::autograd::Function<ConvFunction> {
  static variable_list forward(AutogradContext* ctx, torch::Tensor x, torch::Tensor weight,
                               torch::Tensor bias, torch::Tensor init, bool silu, bool return_final) {
    for (torch::Tensor* t : {&bias, &init})
      if (t->numel() == 0) *t = torch::Tensor();
    ConvInputs in = prepare(x, weight, bias, init);
    detail::ConvParams p;
    fill(p, in, silu);
    auto opts = in.x.options().memory_format(torch::MemoryFormat::Contiguous);
    torch::Tensor y = torch::empty({p.batch, p.dim, p.seqlen}, opts);
    torch::Tensor fs = return_final ? torch::empty({p.batch, p.dim, p.width - 1}, opts) : torch::Tensor();
    p.y = ptr(y), p.final_state = ptr(fs);
    detail::dispatch("causal_conv1d", in.x, [&] { cpu::conv1d_forward(p); }, [&] {
#ifdef MAMBAMT_WITH_CUDA
      cuda::conv1d_forward(p);
#endif
    });
    ctx->save_for_backward({in.x, in.weight, in.bias, in.init});
    ctx->saved_data["silu"] = silu;
    ctx->saved_data["return_final"] = return_final;
    ctx->saved_data["x_dtype"] = static_cast<int64_t>(x.scalar_type());
    ctx->saved_data["w_dtype"] = static_cast<int64_t>(weight.scalar_type());
    y = y.to(x.scalar_type());
    if (return_final) return {y, fs.to(x.scalar_type())};
    return {y};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    ConvInputs in;
    in.x = saved[0], in.weight = saved[1], in.bias = saved[2], in.init = saved[3];
    in.acc = in.weight.scalar_type();
    detail::ConvBwdParams p;
    fill(p, in, ctx->saved_data["silu"].toBool());
    const auto xdt = static_cast<torch::ScalarType>(ctx->saved_data["x_dtype"].toInt());
    const auto wdt = static_cast<torch::ScalarType>(ctx->saved_data["w_dtype"].toInt());
    auto opts = in.x.options().memory_format(torch::MemoryFormat::Contiguous);
    auto acc_opts = opts.dtype(in.acc);
    const int64_t b = p.batch, d = p.dim, l = p.seqlen, w = p.width;
    torch::Tensor dout = grads[0].defined() ? grads[0] : torch::zeros({b, d, l}, opts);
    dout = dout.to(in.x.scalar_type()).contiguous();
    torch::Tensor dfinal;
    if (ctx->saved_data["return_final"].toBool() && grads.size() > 1 && grads[1].defined())
      dfinal = grads[1].to(in.x.scalar_type()).contiguous();
    torch::Tensor dx = torch::empty({b, d, l}, opts);
    torch::Tensor dw = torch::empty({b, d, w}, acc_opts);
    torch::Tensor db = in.bias.defined() ? torch::empty({b, d}, acc_opts) : torch::Tensor();
    torch::Tensor dinit = in.init.defined() ? torch::empty({b, d, w - 1}, opts) : torch::Tensor();
    p.dout = ptr(dout), p.dfinal_state = ptr(dfinal), p.dx = ptr(dx), p.dweight_part = ptr(dw);
    p.dbias_part = ptr(db), p.dinitial_state = ptr(dinit);
    detail::dispatch("causal_conv1d backward", in.x, [&] { cpu::conv1d_backward(p); }, [&] {
#ifdef MAMBAMT_WITH_CUDA
      cuda::conv1d_backward(p);
#endif
    });
    return {dx.to(xdt),
            dw.sum(0).to(wdt),
            db.defined() ? db.sum(0) : torch::Tensor(),
            dinit.defined() ? dinit.to(xdt) : torch::Tensor(),
            torch::Tensor(),
            torch::Tensor()};
  }
};

}  // namespace

CausalConv1dResult causal_conv1d(const torch::Tensor& x, const torch::Tensor& weight,
                                 const CausalConv1dOptions& o) {
  detail::validate_causal_conv1d(x, weight, o);
  // LibTorch 1.13's Function::apply needs every tensor defined: absent ones
  // travel as empty tensors.
  auto e = [&](const torch::Tensor& t) { return t.defined() ? t : torch::empty({0}, x.options()); };
  variable_list out = ConvFunction::apply(x, weight, e(o.bias), e(o.initial_state), o.silu,
                                          o.return_final_state);
  CausalConv1dResult r;
  r.y = out[0];
  if (o.return_final_state) r.final_state = out[1];
  return r;
}

torch::Tensor causal_conv1d_step(const torch::Tensor& state, const torch::Tensor& x,
                                 const torch::Tensor& weight, const torch::Tensor& bias, bool silu) {
  detail::validate_causal_conv1d_step(state, x, weight, bias);
  torch::NoGradGuard no_grad;
  const auto acc = detail::accum_dtype(x.scalar_type());
  // On CPU the kernel runs in the accumulation type: a bfloat16 state is
  // updated through a float copy.
  const bool convert = x.is_cpu() && state.scalar_type() != acc;
  torch::Tensor st = convert ? state.to(acc) : state;
  // Rows in place: in a decode step x is a column range of the in-projection.
  torch::Tensor xs = detail::row_input(x, x.is_cpu() ? acc : x.scalar_type());
  torch::Tensor w = accum(weight, acc), bs = accum(bias, acc);
  torch::Tensor y = torch::empty(xs.sizes(), xs.options());
  detail::ConvStepParams p;
  p.dtype = detail::to_dtype(xs.scalar_type());
  p.batch = x.size(0), p.dim = x.size(1), p.width = weight.size(1), p.silu = silu;
  p.x = ptr(xs), p.x_bs = detail::row_stride(xs), p.weight = ptr(w), p.bias = ptr(bs), p.state = ptr(st), p.y = ptr(y);
  detail::dispatch("causal_conv1d_step", xs, [&] { cpu::conv1d_step(p); }, [&] {
#ifdef MAMBAMT_WITH_CUDA
    cuda::conv1d_step(p);
#endif
  });
  if (convert) state.copy_(st);
  return detail::as_type(y, x.scalar_type());
}

}  // namespace mambamt::kernels
