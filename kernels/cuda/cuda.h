#pragma once
// CUDA implementations of the ops (host glue in cuda/*.cpp, compiled only when
// LibTorch has CUDA: MAMBAMT_WITH_CUDA). Each launches on the current stream of
// the current device; the params' pointers are device pointers.
#include "kernels/detail/params.h"

namespace mambamt::kernels::cuda {

void ssd_forward(const detail::SsdParams& p);
void ssd_backward(const detail::SsdBwdParams& p);
void ssd_step(const detail::SsdStepParams& p);

void selective_scan_forward(const detail::ScanParams& p);
void selective_scan_backward(const detail::ScanBwdParams& p);
void selective_scan_step(const detail::ScanStepParams& p);

void conv1d_forward(const detail::ConvParams& p);
void conv1d_backward(const detail::ConvBwdParams& p);
void conv1d_step(const detail::ConvStepParams& p);

void rms_norm(const detail::RmsNormParams& p);

}  // namespace mambamt::kernels::cuda
