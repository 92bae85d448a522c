// Host glue of the CUDA kernels (compiled only when LibTorch has CUDA): the
// current stream, workspaces from LibTorch's caching allocator, then the
// launchers of cuda/*.cu. The op files (kernels/*.cpp) set the device guard.
#include <ATen/cuda/CUDAContext.h>
#include <torch/torch.h>

#include "kernels/cuda/cuda.h"
#include "kernels/cuda/launch.h"

namespace mambamt::kernels::cuda {
namespace {

void* stream() { return at::cuda::getCurrentCUDAStream().stream(); }

torch::Tensor workspace(size_t bytes) {
  return torch::empty({static_cast<int64_t>(bytes)},
                      torch::TensorOptions().dtype(torch::kByte).device(torch::kCUDA, at::cuda::current_device()));
}

}  // namespace

void ssd_forward(const detail::SsdParams& p) {
  torch::Tensor ws = workspace(ssd_forward_workspace_bytes(p));
  ssd_forward_launch(p, ws.data_ptr(), stream());
}

void ssd_backward(const detail::SsdBwdParams& p) {
  torch::Tensor ws = workspace(ssd_backward_workspace_bytes(p));
  ssd_backward_launch(p, ws.data_ptr(), stream());
}

void ssd_step(const detail::SsdStepParams& p) { ssd_step_launch(p, stream()); }

void selective_scan_forward(const detail::ScanParams& p) { scan_forward_launch(p, stream()); }

void selective_scan_backward(const detail::ScanBwdParams& p) {
  torch::Tensor ws = workspace(scan_backward_workspace_bytes(p));
  scan_backward_launch(p, ws.data_ptr(), stream());
}

void selective_scan_step(const detail::ScanStepParams& p) { scan_step_launch(p, stream()); }

void conv1d_forward(const detail::ConvParams& p) { conv_forward_launch(p, stream()); }
void conv1d_backward(const detail::ConvBwdParams& p) { conv_backward_launch(p, stream()); }
void conv1d_step(const detail::ConvStepParams& p) { conv_step_launch(p, stream()); }

void rms_norm(const detail::RmsNormParams& p) { rms_norm_launch(p, stream()); }

}  // namespace mambamt::kernels::cuda
