#pragma once
// Host-side helpers shared by the ops' LibTorch glue: dtype mapping, tensor
// preparation, device dispatch.
#include <torch/torch.h>

#include "kernels/detail/params.h"
#ifdef MAMBAMT_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>
#endif

namespace mambamt::kernels::detail {

inline DType to_dtype(torch::ScalarType s) {
  switch (s) {
    case torch::kFloat: return DType::kFloat32;
    case torch::kDouble: return DType::kFloat64;
    case torch::kBFloat16: return DType::kBFloat16;
    case torch::kHalf: return DType::kFloat16;
    default: TORCH_CHECK(false, "mambamt kernels: unsupported dtype ", s);
  }
}

// t in type `type`. Tensor::to returns t itself when the type matches, but
// through the dispatcher: a decode step makes a dozen such calls per Mamba
// layer, so the check comes first.
inline torch::Tensor as_type(const torch::Tensor& t, torch::ScalarType type) {
  return t.scalar_type() == type ? t : t.to(type);
}

// An activation as the kernel reads it: on CPU converted to the accumulation
// type (the CPU kernels compute in float or double), the last dimension
// contiguous. Undefined stays undefined.
inline torch::Tensor act(const torch::Tensor& t, torch::ScalarType acc) {
  if (!t.defined()) return t;
  torch::Tensor r = t.is_cpu() ? as_type(t, acc) : t;
  return r.stride(-1) == 1 ? r : r.contiguous();
}

// Whether every dimension after the first is laid out as in a contiguous
// tensor: each batch row is contiguous, wherever the rows start.
inline bool rows_contiguous(const torch::Tensor& t) {
  int64_t expected = 1;
  for (int64_t d = t.dim() - 1; d >= 1; --d) {
    if (t.size(d) != 1 && t.stride(d) != expected) return false;
    expected *= t.size(d);
  }
  return true;
}

// An input of a decode step as the kernel reads it: in type `type` (on CPU
// the accumulation type for activations), each batch row contiguous; the
// rows may lie apart (a column range of a wider projection), so no copy is
// made for them. Undefined stays undefined.
inline torch::Tensor row_input(const torch::Tensor& t, torch::ScalarType type) {
  if (!t.defined()) return t;
  torch::Tensor r = as_type(t, type);
  return rows_contiguous(r) ? r : r.contiguous();
}

// Elements between batch rows of a row_input() tensor (0 when undefined).
inline int64_t row_stride(const torch::Tensor& t) { return t.defined() && t.dim() > 0 ? t.stride(0) : 0; }

// A parameter or state in the accumulation type, contiguous.
inline torch::Tensor accum(const torch::Tensor& t, torch::ScalarType acc) {
  return t.defined() ? as_type(t, acc).contiguous() : t;
}

// A mask as contiguous uint8 (nonzero = real position).
inline torch::Tensor mask_u8(const torch::Tensor& m) {
  return m.defined() ? (m != 0).to(torch::kByte).contiguous() : m;
}

template <typename T = void>
inline T* ptr(const torch::Tensor& t) {
  return t.defined() ? static_cast<T*>(t.data_ptr()) : nullptr;
}

// Runs the CPU or the CUDA implementation by the tensors' device.
template <typename Cpu, typename Cuda>
void dispatch(const char* op, const torch::Tensor& like, Cpu&& on_cpu, Cuda&& on_cuda) {
  if (like.is_cpu()) {
    on_cpu();
  } else if (like.is_cuda()) {
#ifdef MAMBAMT_WITH_CUDA
    c10::cuda::CUDAGuard guard(like.device());
    on_cuda();
#else
    (void)on_cuda;
    TORCH_CHECK(false, op, ": the inputs are on ", like.device(),
                " but this build of mambamt has no CUDA (LibTorch without CUDA)");
#endif
  } else {
    TORCH_CHECK(false, op, ": unsupported device ", like.device());
  }
}

}  // namespace mambamt::kernels::detail
