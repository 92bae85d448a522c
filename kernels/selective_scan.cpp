// selective_scan / selective_scan_step: boundary validation, the autograd
// Function, and the dispatch to the CPU or CUDA kernels (detail::ScanParams).
#include "kernels/selective_scan.h"

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

struct ScanInputs {
  torch::Tensor u, delta, A, B, C, D, z, bias, init, mask;
  torch::ScalarType acc;
};

// B or C as (B,G,N,L) (a (B,N,L) input is one group), last dim contiguous.
torch::Tensor grouped(const torch::Tensor& t, torch::ScalarType acc) {
  torch::Tensor r = act(t, acc);
  return r.dim() == 3 ? r.unsqueeze(1) : r;
}

ScanInputs prepare(const torch::Tensor& u, const torch::Tensor& delta, const torch::Tensor& A,
                   const torch::Tensor& B, const torch::Tensor& C, const torch::Tensor& D,
                   const torch::Tensor& z, const torch::Tensor& bias, const torch::Tensor& init,
                   const torch::Tensor& mask) {
  ScanInputs in;
  in.acc = detail::accum_dtype(u.scalar_type());
  in.u = act(u, in.acc);
  in.delta = act(delta, in.acc);
  in.z = act(z, in.acc);
  in.B = grouped(B, in.acc);
  in.C = grouped(C, in.acc);
  in.A = accum(A, in.acc);
  in.D = accum(D, in.acc);
  in.bias = accum(bias, in.acc);
  in.init = accum(init, in.acc);
  in.mask = detail::mask_u8(mask);
  return in;
}

void fill(detail::ScanParams& p, const ScanInputs& in, bool softplus) {
  p.dtype = detail::to_dtype(in.u.scalar_type());
  p.batch = in.u.size(0);
  p.dim = in.u.size(1);
  p.seqlen = in.u.size(2);
  p.dstate = in.A.size(1);
  p.ngroups = in.B.size(1);
  p.delta_softplus = softplus;
  p.u = ptr(in.u), p.u_bs = in.u.stride(0), p.u_ds = in.u.stride(1);
  p.delta = ptr(in.delta), p.delta_bs = in.delta.stride(0), p.delta_ds = in.delta.stride(1);
  if (in.z.defined()) p.z = ptr(in.z), p.z_bs = in.z.stride(0), p.z_ds = in.z.stride(1);
  p.B = ptr(in.B), p.B_bs = in.B.stride(0), p.B_gs = in.B.stride(1), p.B_ns = in.B.stride(2);
  p.C = ptr(in.C), p.C_bs = in.C.stride(0), p.C_gs = in.C.stride(1), p.C_ns = in.C.stride(2);
  p.A = ptr(in.A);
  p.D = ptr(in.D);
  p.delta_bias = ptr(in.bias);
  p.mask = ptr<uint8_t>(in.mask);
  p.initial_state = ptr(in.init);
}

struct ScanFunction : public torch::autograd::Function<ScanFunction> {
  static variable_list forward(AutogradContext* ctx, torch::Tensor u, torch::Tensor delta,
                               torch::Tensor A, torch::Tensor B, torch::Tensor C, torch::Tensor D,
                               torch::Tensor z, torch::Tensor bias, torch::Tensor init,
                               torch::Tensor mask, bool softplus, bool return_final, bool need_grad) {
    for (torch::Tensor* t : {&D, &z, &bias, &init, &mask})
      if (t->numel() == 0) *t = torch::Tensor();
    ScanInputs in = prepare(u, delta, A, B, C, D, z, bias, init, mask);
    detail::ScanParams p;
    fill(p, in, softplus);
    auto act_opts = in.u.options().memory_format(torch::MemoryFormat::Contiguous);
    auto acc_opts = in.u.options().dtype(in.acc);
    torch::Tensor y = torch::empty({p.batch, p.dim, p.seqlen}, act_opts);
    torch::Tensor fs, ypre, ckpt;
    if (return_final) fs = torch::empty({p.batch, p.dim, p.dstate}, acc_opts);
    if (need_grad && in.z.defined()) ypre = torch::empty({p.batch, p.dim, p.seqlen}, act_opts);
    if (need_grad && in.u.is_cpu()) {
      const int64_t nck = (p.seqlen + detail::kScanCheckpointLen - 1) / detail::kScanCheckpointLen;
      ckpt = torch::empty({p.batch, p.dim, nck, p.dstate}, acc_opts);
    }
    p.y = ptr(y), p.final_state = ptr(fs), p.y_pregate = ptr(ypre), p.checkpoints = ptr(ckpt);
    detail::dispatch("selective_scan", in.u, [&] { cpu::selective_scan_forward(p); }, [&] {
#ifdef MAMBAMT_WITH_CUDA
      cuda::selective_scan_forward(p);
#endif
    });
    if (need_grad) {
      ctx->save_for_backward({in.u, in.delta, in.A, in.B, in.C, in.D, in.z, in.bias, in.init, in.mask,
                              ypre, ckpt});
    }
    ctx->saved_data["softplus"] = softplus;
    ctx->saved_data["return_final"] = return_final;
    ctx->saved_data["u_dtype"] = static_cast<int64_t>(u.scalar_type());
    ctx->saved_data["b_dim"] = B.dim();
    y = y.to(u.scalar_type());
    if (return_final) return {y, fs};
    return {y};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    TORCH_CHECK(!saved.empty(), "selective_scan: backward without saved state");
    ScanInputs in;
    in.u = saved[0], in.delta = saved[1], in.A = saved[2], in.B = saved[3], in.C = saved[4];
    in.D = saved[5], in.z = saved[6], in.bias = saved[7], in.init = saved[8], in.mask = saved[9];
    in.acc = in.A.scalar_type();
    detail::ScanBwdParams p;
    fill(p, in, ctx->saved_data["softplus"].toBool());
    const bool return_final = ctx->saved_data["return_final"].toBool();
    torch::Tensor dout = grads[0].defined() ? grads[0] : torch::zeros_like(in.u);
    dout = dout.to(in.u.scalar_type()).contiguous();
    torch::Tensor dfinal;
    if (return_final && grads.size() > 1 && grads[1].defined()) dfinal = accum(grads[1], in.acc);
    auto act_opts = in.u.options().memory_format(torch::MemoryFormat::Contiguous);
    auto acc_opts = in.u.options().dtype(in.acc);
    const int64_t b = p.batch, dm = p.dim, l = p.seqlen, n = p.dstate, g = p.ngroups;
    torch::Tensor du = torch::empty({b, dm, l}, act_opts), ddelta = torch::empty({b, dm, l}, act_opts);
    torch::Tensor dz = in.z.defined() ? torch::empty({b, dm, l}, act_opts) : torch::Tensor();
    torch::Tensor dB = torch::zeros({b, g, n, l}, acc_opts), dC = torch::zeros({b, g, n, l}, acc_opts);
    torch::Tensor dA_part = torch::empty({b, dm, n}, acc_opts);
    torch::Tensor dD_part = in.D.defined() ? torch::empty({b, dm}, acc_opts) : torch::Tensor();
    torch::Tensor dbias_part = in.bias.defined() ? torch::empty({b, dm}, acc_opts) : torch::Tensor();
    torch::Tensor dinit = in.init.defined() ? torch::empty({b, dm, n}, acc_opts) : torch::Tensor();
    p.dout = ptr(dout), p.dfinal_state = ptr(dfinal);
    p.y_pregate = ptr(saved[10]), p.checkpoints = ptr(saved[11]);
    p.du = ptr(du), p.ddelta = ptr(ddelta), p.dz = ptr(dz), p.dB = ptr(dB), p.dC = ptr(dC);
    p.dA_part = ptr(dA_part), p.dD_part = ptr(dD_part), p.ddelta_bias_part = ptr(dbias_part);
    p.dinitial_state = ptr(dinit);
    detail::dispatch("selective_scan backward", in.u, [&] { cpu::selective_scan_backward(p); }, [&] {
#ifdef MAMBAMT_WITH_CUDA
      cuda::selective_scan_backward(p);
#endif
    });
    const auto udt = static_cast<torch::ScalarType>(ctx->saved_data["u_dtype"].toInt());
    const bool ungrouped = ctx->saved_data["b_dim"].toInt() == 3;
    auto shape_bc = [&](const torch::Tensor& t) { return (ungrouped ? t.squeeze(1) : t).to(udt); };
    return {du.to(udt),
            ddelta.to(udt),
            dA_part.sum(0),
            shape_bc(dB),
            shape_bc(dC),
            in.D.defined() ? dD_part.sum(0) : torch::Tensor(),
            dz.defined() ? dz.to(udt) : torch::Tensor(),
            in.bias.defined() ? dbias_part.sum(0) : torch::Tensor(),
            dinit,
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor()};
  }
};

bool any_requires_grad(std::initializer_list<const torch::Tensor*> ts) {
  if (!torch::GradMode::is_enabled()) return false;
  for (const torch::Tensor* t : ts)
    if (t->defined() && t->requires_grad()) return true;
  return false;
}

}  // namespace

SelectiveScanResult selective_scan(const torch::Tensor& u, const torch::Tensor& delta,
                                   const torch::Tensor& A, const torch::Tensor& B,
                                   const torch::Tensor& C, const SelectiveScanOptions& o) {
  detail::validate_selective_scan(u, delta, A, B, C, o);
  const bool need_grad =
      any_requires_grad({&u, &delta, &A, &B, &C, &o.D, &o.z, &o.delta_bias, &o.initial_state});
  // LibTorch 1.13's Function::apply needs every tensor defined: absent ones
  // travel as empty tensors.
  auto e = [&](const torch::Tensor& t) { return t.defined() ? t : torch::empty({0}, u.options()); };
  variable_list out = ScanFunction::apply(u, delta, A, B, C, e(o.D), e(o.z), e(o.delta_bias),
                                          e(o.initial_state), e(o.mask), o.delta_softplus,
                                          o.return_final_state, need_grad);
  SelectiveScanResult r;
  r.y = out[0];
  if (o.return_final_state) r.final_state = out[1];
  return r;
}

torch::Tensor selective_scan_step(const torch::Tensor& state, const torch::Tensor& u,
                                  const torch::Tensor& delta, const torch::Tensor& A,
                                  const torch::Tensor& B, const torch::Tensor& C,
                                  const SelectiveScanStepOptions& o) {
  detail::validate_selective_scan_step(state, u, delta, A, B, C, o);
  torch::NoGradGuard no_grad;
  const auto acc = state.scalar_type();
  // Activations in the accumulation type on CPU, as given on CUDA; rows in
  // place (B and C are column ranges of x_proj's output in a decode step).
  const auto at = u.is_cpu() ? acc : u.scalar_type();
  auto c = [&](const torch::Tensor& t) { return detail::row_input(t, at); };
  torch::Tensor us = c(u), ds = c(delta), zs = c(o.z);
  torch::Tensor Bs = c(B.dim() == 2 ? B.unsqueeze(1) : B), Cs = c(C.dim() == 2 ? C.unsqueeze(1) : C);
  torch::Tensor As = accum(A, acc), Dv = accum(o.D, acc), bias = accum(o.delta_bias, acc);
  torch::Tensor mask = detail::mask_u8(o.mask);
  torch::Tensor y = torch::empty(us.sizes(), us.options());
  detail::ScanStepParams p;
  p.dtype = detail::to_dtype(us.scalar_type());
  p.batch = u.size(0), p.dim = u.size(1), p.dstate = A.size(1), p.ngroups = Bs.size(1);
  p.delta_softplus = o.delta_softplus;
  p.u = ptr(us), p.delta = ptr(ds), p.z = ptr(zs), p.B = ptr(Bs), p.C = ptr(Cs);
  p.u_bs = detail::row_stride(us), p.delta_bs = detail::row_stride(ds), p.z_bs = detail::row_stride(zs);
  p.B_bs = detail::row_stride(Bs), p.C_bs = detail::row_stride(Cs);
  p.A = ptr(As), p.D = ptr(Dv), p.delta_bias = ptr(bias), p.mask = ptr<uint8_t>(mask);
  p.state = ptr(state), p.y = ptr(y);
  detail::dispatch("selective_scan_step", us, [&] { cpu::selective_scan_step(p); }, [&] {
#ifdef MAMBAMT_WITH_CUDA
    cuda::selective_scan_step(p);
#endif
  });
  return detail::as_type(y, u.scalar_type());
}

}  // namespace mambamt::kernels
