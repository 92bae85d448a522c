#pragma once
// Boundary validation of every op (device-neutral): shapes, dtypes, devices.
// Each function throws c10::Error (TORCH_CHECK) naming the op, the argument and
// the shapes; the kernels behind them assume valid input.
#include <torch/torch.h>

#include "kernels/conv1d.h"
#include "kernels/selective_scan.h"
#include "kernels/ssd.h"

namespace mambamt::kernels::detail {

void validate_ssd_scan(const torch::Tensor& x, const torch::Tensor& dt, const torch::Tensor& A_log,
                       const torch::Tensor& B, const torch::Tensor& C, const SsdScanOptions& o);
void validate_ssd_step(const torch::Tensor& state, const torch::Tensor& x, const torch::Tensor& dt,
                       const torch::Tensor& A_log, const torch::Tensor& B, const torch::Tensor& C,
                       const SsdStepOptions& o);
void validate_selective_scan(const torch::Tensor& u, const torch::Tensor& delta,
                             const torch::Tensor& A, const torch::Tensor& B, const torch::Tensor& C,
                             const SelectiveScanOptions& o);
void validate_selective_scan_step(const torch::Tensor& state, const torch::Tensor& u,
                                  const torch::Tensor& delta, const torch::Tensor& A,
                                  const torch::Tensor& B, const torch::Tensor& C,
                                  const SelectiveScanStepOptions& o);
void validate_causal_conv1d(const torch::Tensor& x, const torch::Tensor& weight,
                            const CausalConv1dOptions& o);
void validate_causal_conv1d_step(const torch::Tensor& state, const torch::Tensor& x,
                                 const torch::Tensor& weight, const torch::Tensor& bias);

}  // namespace mambamt::kernels::detail
