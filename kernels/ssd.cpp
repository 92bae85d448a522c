// ssd_scan / ssd_step: boundary validation, the autograd Function, and the
// dispatch to the CPU or CUDA kernels through detail::SsdParams.
#include "kernels/ssd.h"

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
using detail::act;
using detail::ptr;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The inputs of one call in the kernels' dtypes and layouts.
struct SsdInputs {
  torch::Tensor x, dt, A_log, B, C, D, z, dt_bias, init, mask;
  torch::ScalarType acc;
};

SsdInputs prepare(const torch::Tensor& x, const torch::Tensor& dt, const torch::Tensor& A_log,
                  const torch::Tensor& B, const torch::Tensor& C, const torch::Tensor& D,
                  const torch::Tensor& z, const torch::Tensor& dt_bias, const torch::Tensor& init,
                  const torch::Tensor& mask) {
  SsdInputs in;
  in.acc = detail::accum_dtype(x.scalar_type());
  in.x = act(x, in.acc);
  in.B = act(B, in.acc);
  in.C = act(C, in.acc);
  in.z = act(z, in.acc);
  in.dt = accum(dt, in.acc);
  in.A_log = accum(A_log, in.acc);
  in.D = accum(D, in.acc);
  in.dt_bias = accum(dt_bias, in.acc);
  in.init = accum(init, in.acc);
  in.mask = detail::mask_u8(mask);
  return in;
}

void fill(detail::SsdParams& p, const SsdInputs& in, bool softplus, int64_t chunk) {
  p.dtype = detail::to_dtype(in.x.scalar_type());
  p.batch = in.x.size(0);
  p.seqlen = in.x.size(1);
  p.nheads = in.x.size(2);
  p.headdim = in.x.size(3);
  p.ngroups = in.B.size(2);
  p.dstate = in.B.size(3);
  p.chunk_size = chunk;
  p.dt_softplus = softplus;
  p.x = ptr(in.x);
  p.x_bs = in.x.stride(0), p.x_ls = in.x.stride(1), p.x_hs = in.x.stride(2);
  if (in.z.defined()) {
    p.z = ptr(in.z);
    p.z_bs = in.z.stride(0), p.z_ls = in.z.stride(1), p.z_hs = in.z.stride(2);
  }
  p.B = ptr(in.B);
  p.B_bs = in.B.stride(0), p.B_ls = in.B.stride(1), p.B_gs = in.B.stride(2);
  p.C = ptr(in.C);
  p.C_bs = in.C.stride(0), p.C_ls = in.C.stride(1), p.C_gs = in.C.stride(2);
  p.dt = ptr(in.dt);
  p.A_log = ptr(in.A_log);
  p.dt_bias = ptr(in.dt_bias);
  p.D = ptr(in.D);
  p.mask = ptr<uint8_t>(in.mask);
  p.initial_state = ptr(in.init);
}

struct SsdFunction : public torch::autograd::Function<SsdFunction> {
  static variable_list forward(AutogradContext* ctx, torch::Tensor x, torch::Tensor dt,
                               torch::Tensor A_log, torch::Tensor B, torch::Tensor C,
                               torch::Tensor D, torch::Tensor z, torch::Tensor dt_bias,
                               torch::Tensor init, torch::Tensor mask, bool softplus,
                               bool return_final, int64_t chunk, bool need_grad) {
    for (torch::Tensor* t : {&D, &z, &dt_bias, &init, &mask})
      if (t->numel() == 0) *t = torch::Tensor();
    SsdInputs in = prepare(x, dt, A_log, B, C, D, z, dt_bias, init, mask);
    detail::SsdParams p;
    fill(p, in, softplus, chunk);
    auto act_opts = in.x.options().memory_format(torch::MemoryFormat::Contiguous);
    auto acc_opts = in.x.options().dtype(in.acc);
    torch::Tensor y = torch::empty(in.x.sizes(), act_opts);
    torch::Tensor fs, ypre, ckpt;
    if (return_final) fs = torch::empty({p.batch, p.nheads, p.headdim, p.dstate}, acc_opts);
    if (need_grad && in.z.defined()) ypre = torch::empty(in.x.sizes(), act_opts);
    if (need_grad && in.x.is_cpu()) {
      const int64_t nck = (p.seqlen + detail::kSsdCheckpointLen - 1) / detail::kSsdCheckpointLen;
      ckpt = torch::empty({p.batch, p.nheads, nck, p.headdim, p.dstate}, acc_opts);
    }
    p.y = ptr(y);
    p.final_state = ptr(fs);
    p.y_pregate = ptr(ypre);
    p.checkpoints = ptr(ckpt);
    detail::dispatch("ssd_scan", in.x, [&] { cpu::ssd_forward(p); }, [&] {
#ifdef MAMBAMT_WITH_CUDA
      cuda::ssd_forward(p);
#endif
    });
    if (need_grad) {
      ctx->save_for_backward({in.x, in.dt, in.A_log, in.B, in.C, in.D, in.z, in.dt_bias, in.init,
                              in.mask, ypre, ckpt});
    }
    ctx->saved_data["softplus"] = softplus;
    ctx->saved_data["chunk"] = chunk;
    ctx->saved_data["return_final"] = return_final;
    ctx->saved_data["x_dtype"] = static_cast<int64_t>(x.scalar_type());
    y = y.to(x.scalar_type());
    if (return_final) return {y, fs};
    return {y};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    TORCH_CHECK(!saved.empty(), "ssd_scan: backward without saved state");
    SsdInputs in;
    in.x = saved[0], in.dt = saved[1], in.A_log = saved[2], in.B = saved[3], in.C = saved[4];
    in.D = saved[5], in.z = saved[6], in.dt_bias = saved[7], in.init = saved[8], in.mask = saved[9];
    in.acc = in.dt.scalar_type();
    torch::Tensor ypre = saved[10], ckpt = saved[11];
    const bool softplus = ctx->saved_data["softplus"].toBool();
    const bool return_final = ctx->saved_data["return_final"].toBool();
    detail::SsdBwdParams p;
    fill(p, in, softplus, ctx->saved_data["chunk"].toInt());

    torch::Tensor dout = grads[0].defined() ? grads[0] : torch::zeros_like(in.x);
    dout = dout.to(in.x.scalar_type()).contiguous();
    torch::Tensor dfinal;
    if (return_final && grads.size() > 1 && grads[1].defined()) dfinal = accum(grads[1], in.acc);

    auto act_opts = in.x.options().memory_format(torch::MemoryFormat::Contiguous);
    auto acc_opts = in.x.options().dtype(in.acc);
    const int64_t b = p.batch, l = p.seqlen, h = p.nheads, hd = p.headdim, g = p.ngroups, n = p.dstate;
    torch::Tensor dx = torch::empty({b, l, h, hd}, act_opts);
    torch::Tensor dz = in.z.defined() ? torch::empty({b, l, h, hd}, act_opts) : torch::Tensor();
    // dB, dC are accumulated over heads (atomically on CUDA): start from zero.
    torch::Tensor dB = torch::zeros({b, l, g, n}, acc_opts), dC = torch::zeros({b, l, g, n}, acc_opts);
    torch::Tensor ddt = torch::empty({b, l, h}, acc_opts);
    torch::Tensor dA_part = torch::zeros({b, h}, acc_opts);
    torch::Tensor dD_part = in.D.defined() ? torch::zeros({b, h}, acc_opts) : torch::Tensor();
    torch::Tensor dinit = in.init.defined() ? torch::empty({b, h, hd, n}, acc_opts) : torch::Tensor();
    p.dout = ptr(dout);
    p.dfinal_state = ptr(dfinal);
    p.y_pregate = ptr(ypre);
    p.checkpoints = ptr(ckpt);
    p.dx = ptr(dx);
    p.dz = ptr(dz);
    p.dB = ptr(dB);
    p.dC = ptr(dC);
    p.ddt = ptr(ddt);
    p.dA_log_part = ptr(dA_part);
    p.dD_part = ptr(dD_part);
    p.dinitial_state = ptr(dinit);
    detail::dispatch("ssd_scan backward", in.x, [&] { cpu::ssd_backward(p); }, [&] {
#ifdef MAMBAMT_WITH_CUDA
      cuda::ssd_backward(p);
#endif
    });
    const auto xdt = static_cast<torch::ScalarType>(ctx->saved_data["x_dtype"].toInt());
    torch::Tensor ddt_bias = in.dt_bias.defined() ? ddt.sum(torch::IntArrayRef{0, 1}) : torch::Tensor();
    return {dx.to(xdt),
            ddt,
            dA_part.sum(0),
            dB.to(xdt),
            dC.to(xdt),
            in.D.defined() ? dD_part.sum(0) : torch::Tensor(),
            dz.defined() ? dz.to(xdt) : torch::Tensor(),
            ddt_bias,
            dinit,
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor()};
  }
};

// LibTorch 1.13's Function::apply needs every tensor argument defined: absent
// optional inputs travel as empty tensors and turn back into undefined ones.
torch::Tensor absent_to_empty(const torch::Tensor& t, const torch::Tensor& like) {
  return t.defined() ? t : torch::empty({0}, like.options());
}

bool any_requires_grad(std::initializer_list<const torch::Tensor*> ts) {
  if (!torch::GradMode::is_enabled()) return false;
  for (const torch::Tensor* t : ts)
    if (t->defined() && t->requires_grad()) return true;
  return false;
}

}  // namespace

SsdScanResult ssd_scan(const torch::Tensor& x, const torch::Tensor& dt, const torch::Tensor& A_log,
                       const torch::Tensor& B, const torch::Tensor& C, const SsdScanOptions& o) {
  detail::validate_ssd_scan(x, dt, A_log, B, C, o);
  const bool need_grad = any_requires_grad(
      {&x, &dt, &A_log, &B, &C, &o.D, &o.z, &o.dt_bias, &o.initial_state});
  auto e = [&](const torch::Tensor& t) { return absent_to_empty(t, x); };
  variable_list out = SsdFunction::apply(x, dt, A_log, B, C, e(o.D), e(o.z), e(o.dt_bias),
                                         e(o.initial_state), e(o.mask), o.dt_softplus, o.return_final_state, o.chunk_size,
                                         need_grad);
  SsdScanResult r;
  r.y = out[0];
  if (o.return_final_state) r.final_state = out[1];
  return r;
}

torch::Tensor ssd_step(const torch::Tensor& state, const torch::Tensor& x, const torch::Tensor& dt,
                       const torch::Tensor& A_log, const torch::Tensor& B, const torch::Tensor& C,
                       const SsdStepOptions& o) {
  detail::validate_ssd_step(state, x, dt, A_log, B, C, o);
  torch::NoGradGuard no_grad;
  const auto acc = state.scalar_type();
  // Activations in the accumulation type on CPU, as given on CUDA; rows in
  // place (they are column ranges of the in-projection in a decode step).
  const auto at = x.is_cpu() ? acc : x.scalar_type();
  torch::Tensor xs = detail::row_input(x, at), zs = detail::row_input(o.z, at), Bs = detail::row_input(B, at),
                Cs = detail::row_input(C, at), dts = detail::row_input(dt, acc);
  torch::Tensor Al = accum(A_log, acc), Dv = accum(o.D, acc);
  torch::Tensor bias = accum(o.dt_bias, acc), mask = detail::mask_u8(o.mask);
  torch::Tensor y = torch::empty(xs.sizes(), xs.options());
  detail::SsdStepParams p;
  p.dtype = detail::to_dtype(xs.scalar_type());
  p.batch = x.size(0), p.nheads = x.size(1), p.headdim = x.size(2);
  p.ngroups = B.size(1), p.dstate = B.size(2);
  p.dt_softplus = o.dt_softplus;
  p.x = ptr(xs), p.z = ptr(zs), p.B = ptr(Bs), p.C = ptr(Cs);
  p.x_bs = detail::row_stride(xs), p.z_bs = detail::row_stride(zs), p.B_bs = detail::row_stride(Bs);
  p.C_bs = detail::row_stride(Cs), p.dt_bs = detail::row_stride(dts);
  p.dt = ptr(dts), p.A_log = ptr(Al), p.dt_bias = ptr(bias), p.D = ptr(Dv);
  p.mask = ptr<uint8_t>(mask);
  p.state = ptr(state);
  p.y = ptr(y);
  detail::dispatch("ssd_step", xs, [&] { cpu::ssd_step(p); }, [&] {
#ifdef MAMBAMT_WITH_CUDA
    cuda::ssd_step(p);
#endif
  });
  return detail::as_type(y, x.scalar_type());
}

}  // namespace mambamt::kernels
