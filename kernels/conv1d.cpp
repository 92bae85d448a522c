// causal_conv1d / causal_conv1d_step: boundary validation, then the implementation.
#include "kernels/conv1d.h"

#include "kernels/detail/validate.h"
#include "kernels/reference.h"

namespace mambamt::kernels {

CausalConv1dResult causal_conv1d(const torch::Tensor& x, const torch::Tensor& weight,
                                 const CausalConv1dOptions& o) {
  detail::validate_causal_conv1d(x, weight, o);
  // Interim: the LibTorch reference (autograd) until the CPU kernel lands.
  return reference::causal_conv1d(x, weight, o);
}

torch::Tensor causal_conv1d_step(const torch::Tensor& state, const torch::Tensor& x,
                                 const torch::Tensor& weight, const torch::Tensor& bias, bool silu) {
  detail::validate_causal_conv1d_step(state, x, weight, bias);
  return reference::causal_conv1d_step(state, x, weight, bias, silu);
}

}  // namespace mambamt::kernels
