#pragma once
// Plain-LibTorch references of every kernel op: the definitions the kernels are
// tested against (DESIGN.md invariant 3). They take the same arguments as the
// ops, are written step by step for readability, and get their gradients from
// LibTorch's autograd. Slow: tests and benchmarks only.
#include <torch/torch.h>

#include "kernels/conv1d.h"
#include "kernels/norm.h"
#include "kernels/selective_scan.h"
#include "kernels/ssd.h"

namespace mambamt::kernels::reference {

// The SSD recurrence, one position at a time (see kernels/ssd.h).
SsdScanResult ssd_scan(const torch::Tensor& x, const torch::Tensor& dt, const torch::Tensor& A_log,
                       const torch::Tensor& B, const torch::Tensor& C,
                       const SsdScanOptions& options = {});

// The same op in the chunked matrix form of the Mamba-2 paper's "minimal SSD"
// (intra-chunk quadratic attention-like products, chunk states, state passing
// between chunks), in batched LibTorch matmuls: the fastest pure-LibTorch
// formulation we have, used as the benchmark's baseline. chunk_size comes
// from options.chunk_size.
SsdScanResult ssd_scan_chunked(const torch::Tensor& x, const torch::Tensor& dt,
                               const torch::Tensor& A_log, const torch::Tensor& B,
                               const torch::Tensor& C, const SsdScanOptions& options = {});

// One SSD decode step; returns y and advances state in place (no autograd).
torch::Tensor ssd_step(const torch::Tensor& state, const torch::Tensor& x, const torch::Tensor& dt,
                       const torch::Tensor& A_log, const torch::Tensor& B, const torch::Tensor& C,
                       const SsdStepOptions& options = {});

// The Mamba-1 selective scan, one position at a time (selective_scan_ref).
SelectiveScanResult selective_scan(const torch::Tensor& u, const torch::Tensor& delta,
                                   const torch::Tensor& A, const torch::Tensor& B,
                                   const torch::Tensor& C, const SelectiveScanOptions& options = {});

torch::Tensor selective_scan_step(const torch::Tensor& state, const torch::Tensor& u,
                                  const torch::Tensor& delta, const torch::Tensor& A,
                                  const torch::Tensor& B, const torch::Tensor& C,
                                  const SelectiveScanStepOptions& options = {});

// Causal depthwise conv1d as a sum of W shifted products.
CausalConv1dResult causal_conv1d(const torch::Tensor& x, const torch::Tensor& weight,
                                 const CausalConv1dOptions& options = {});

torch::Tensor causal_conv1d_step(const torch::Tensor& state, const torch::Tensor& x,
                                 const torch::Tensor& weight, const torch::Tensor& bias = {},
                                 bool silu = false);

// RMSNorm of rows as LibTorch computes it: the mean square in float32 (float64
// for float64), the normalised rows rounded to x's dtype, the product with the
// weight in the promoted dtype (see kernels/norm.h). Also what rms_norm runs
// on the CPU.
torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps);

}  // namespace mambamt::kernels::reference
