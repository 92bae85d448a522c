#pragma once
// Shape and dtype checks shared by the ops' boundary validation (TORCH_CHECK
// messages name the op, the argument and the shapes).
#include <torch/torch.h>

#include <string>
#include <vector>

namespace mambamt::kernels::detail {

inline std::string shape_str(const torch::Tensor& t) {
  if (!t.defined()) return "undefined";
  std::string s = "(";
  for (int64_t i = 0; i < t.dim(); ++i) s += (i ? "," : "") + std::to_string(t.size(i));
  return s + ")";
}

inline std::string shape_str(const std::vector<int64_t>& v) {
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + ")";
}

// t must have exactly the given shape.
inline void check_shape(const char* op, const char* name, const torch::Tensor& t,
                        const std::vector<int64_t>& shape) {
  TORCH_CHECK(t.defined(), op, ": ", name, " is required");
  TORCH_CHECK(t.sizes().vec() == shape, op, ": ", name, " has shape ", shape_str(t),
              ", expected ", shape_str(shape));
}

// Optional argument: checked only when defined.
inline void check_optional_shape(const char* op, const char* name, const torch::Tensor& t,
                                 const std::vector<int64_t>& shape) {
  if (t.defined()) check_shape(op, name, t, shape);
}

inline bool is_kernel_dtype(torch::ScalarType s) {
  return s == torch::kFloat || s == torch::kDouble || s == torch::kBFloat16 || s == torch::kHalf;
}

inline void check_float(const char* op, const char* name, const torch::Tensor& t) {
  if (!t.defined()) return;
  TORCH_CHECK(is_kernel_dtype(t.scalar_type()), op, ": ", name,
              " must be float32, float64, bfloat16 or float16, got ", t.scalar_type());
}

inline void check_same_dtype(const char* op, const char* name, const torch::Tensor& t,
                             const torch::Tensor& ref) {
  if (!t.defined()) return;
  TORCH_CHECK(t.scalar_type() == ref.scalar_type(), op, ": ", name, " has dtype ", t.scalar_type(),
              ", expected ", ref.scalar_type(), " (the dtype of the first input)");
}

inline void check_device(const char* op, const char* name, const torch::Tensor& t,
                         const torch::Tensor& ref) {
  if (!t.defined()) return;
  TORCH_CHECK(t.device() == ref.device(), op, ": ", name, " is on ", t.device(), ", expected ",
              ref.device());
}

// float32 for float32/bfloat16/float16 activations, float64 for float64.
inline torch::ScalarType accum_dtype(torch::ScalarType s) {
  return s == torch::kDouble ? torch::kDouble : torch::kFloat;
}

}  // namespace mambamt::kernels::detail
