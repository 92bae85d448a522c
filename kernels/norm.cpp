// rms_norm: validation and the dispatch to the reference's LibTorch expression
// (CPU) or the CUDA kernel (detail::RmsNormParams).
#include "kernels/norm.h"

#include "kernels/detail/host.h"
#include "kernels/reference.h"
#ifdef MAMBAMT_WITH_CUDA
#include "kernels/cuda/cuda.h"
#endif

namespace mambamt::kernels {

torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
  TORCH_CHECK(x.defined() && weight.defined() && x.dim() >= 1 && weight.dim() == 1 && x.size(-1) == weight.size(0),
              "rms_norm: x (..., D) and weight (D) expected, got x ", x.defined() ? x.sizes() : torch::IntArrayRef{},
              " and weight ", weight.defined() ? weight.sizes() : torch::IntArrayRef{});
  TORCH_CHECK(x.device() == weight.device(), "rms_norm: x is on ", x.device(), ", weight on ", weight.device());
  const torch::ScalarType xt = x.scalar_type(), wt = weight.scalar_type();
  TORCH_CHECK(xt == torch::kFloat || xt == torch::kDouble || xt == torch::kBFloat16 || xt == torch::kHalf,
              "rms_norm: unsupported dtype ", xt);
  TORCH_CHECK(wt == xt || wt == torch::kFloat, "rms_norm: the weight must be float32 or x's dtype (", xt,
              "), got ", wt);
  torch::NoGradGuard no_grad;
  torch::Tensor y;
  detail::dispatch(
      "rms_norm", x,
      [&] { y = reference::rms_norm(x, weight, eps); },
      [&] {
#ifdef MAMBAMT_WITH_CUDA
        const torch::Tensor xc = x.contiguous(), wc = weight.contiguous();
        y = torch::empty(x.sizes(), x.options().dtype(c10::promoteTypes(xt, wt)));
        detail::RmsNormParams p;
        p.dtype = detail::to_dtype(xt);
        p.weight_dtype = detail::to_dtype(wt);
        p.dim = x.size(-1);
        p.rows = p.dim > 0 ? x.numel() / p.dim : 0;
        p.eps = eps;
        p.x = xc.data_ptr();
        p.weight = wc.data_ptr();
        p.y = y.data_ptr();
        cuda::rms_norm(p);
#endif
      });
  return y;
}

}  // namespace mambamt::kernels
