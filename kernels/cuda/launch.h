#pragma once
// The CUDA launchers (defined in cuda/*.cu, compiled by nvcc), called by the
// host glue (cuda/*.cpp) with the current stream. Plain C++: no CUDA or
// LibTorch types, so both sides include it. Launchers that need scratch memory
// say how much (*_workspace_bytes) and take it from the caller, who allocates
// it with LibTorch's caching allocator.
#include <cstddef>

#include "kernels/detail/params.h"

namespace mambamt::kernels::cuda {

size_t ssd_forward_workspace_bytes(const detail::SsdParams& p);
void ssd_forward_launch(const detail::SsdParams& p, void* workspace, void* stream);
size_t ssd_backward_workspace_bytes(const detail::SsdBwdParams& p);
void ssd_backward_launch(const detail::SsdBwdParams& p, void* workspace, void* stream);
void ssd_step_launch(const detail::SsdStepParams& p, void* stream);

size_t scan_backward_workspace_bytes(const detail::ScanBwdParams& p);
void scan_forward_launch(const detail::ScanParams& p, void* stream);
void scan_backward_launch(const detail::ScanBwdParams& p, void* workspace, void* stream);
void scan_step_launch(const detail::ScanStepParams& p, void* stream);

void conv_forward_launch(const detail::ConvParams& p, void* stream);
void conv_backward_launch(const detail::ConvBwdParams& p, void* stream);
void conv_step_launch(const detail::ConvStepParams& p, void* stream);

void rms_norm_launch(const detail::RmsNormParams& p, void* stream);

}  // namespace mambamt::kernels::cuda
