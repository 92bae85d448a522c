// ssd_scan / ssd_step: boundary validation, then the implementation.
#include "kernels/ssd.h"

#include "kernels/detail/validate.h"
#include "kernels/reference.h"

namespace mambamt::kernels {

SsdScanResult ssd_scan(const torch::Tensor& x, const torch::Tensor& dt, const torch::Tensor& A_log,
                       const torch::Tensor& B, const torch::Tensor& C, const SsdScanOptions& o) {
  detail::validate_ssd_scan(x, dt, A_log, B, C, o);
  // Interim: the LibTorch reference (autograd) until the CPU kernel lands.
  return reference::ssd_scan(x, dt, A_log, B, C, o);
}

torch::Tensor ssd_step(const torch::Tensor& state, const torch::Tensor& x, const torch::Tensor& dt,
                       const torch::Tensor& A_log, const torch::Tensor& B, const torch::Tensor& C,
                       const SsdStepOptions& o) {
  detail::validate_ssd_step(state, x, dt, A_log, B, C, o);
  return reference::ssd_step(state, x, dt, A_log, B, C, o);
}

}  // namespace mambamt::kernels
