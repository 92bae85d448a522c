// selective_scan / selective_scan_step: boundary validation, then the implementation.
#include "kernels/selective_scan.h"

#include "kernels/detail/validate.h"
#include "kernels/reference.h"

namespace mambamt::kernels {

SelectiveScanResult selective_scan(const torch::Tensor& u, const torch::Tensor& delta,
                                   const torch::Tensor& A, const torch::Tensor& B,
                                   const torch::Tensor& C, const SelectiveScanOptions& o) {
  detail::validate_selective_scan(u, delta, A, B, C, o);
  // Interim: the LibTorch reference (autograd) until the CPU kernel lands.
  return reference::selective_scan(u, delta, A, B, C, o);
}

torch::Tensor selective_scan_step(const torch::Tensor& state, const torch::Tensor& u,
                                  const torch::Tensor& delta, const torch::Tensor& A,
                                  const torch::Tensor& B, const torch::Tensor& C,
                                  const SelectiveScanStepOptions& o) {
  detail::validate_selective_scan_step(state, u, delta, A, B, C, o);
  return reference::selective_scan_step(state, u, delta, A, B, C, o);
}

}  // namespace mambamt::kernels
