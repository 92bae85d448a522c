#include "kernels/detail/validate.h"

#include "kernels/detail/checks.h"

namespace mambamt::kernels::detail {

void validate_ssd_scan(const torch::Tensor& x, const torch::Tensor& dt, const torch::Tensor& A_log,
                       const torch::Tensor& B, const torch::Tensor& C, const SsdScanOptions& o) {
  const char* op = "ssd_scan";
  TORCH_CHECK(x.defined() && x.dim() == 4, op, ": x must be (B,L,H,P), got ", shape_str(x));
  TORCH_CHECK(B.defined() && B.dim() == 4, op, ": B must be (B,L,G,N), got ", shape_str(B));
  const int64_t b = x.size(0), l = x.size(1), h = x.size(2), p = x.size(3);
  const int64_t g = B.size(2), n = B.size(3);
  TORCH_CHECK(b >= 1 && l >= 1 && h >= 1 && p >= 1 && n >= 1, op, ": empty input, x ",
              shape_str(x), ", B ", shape_str(B));
  TORCH_CHECK(g >= 1 && h % g == 0, op, ": the ", h, " heads of x ", shape_str(x),
              " are not a multiple of the ", g, " groups of B ", shape_str(B));
  check_shape(op, "dt", dt, {b, l, h});
  check_shape(op, "A_log", A_log, {h});
  check_shape(op, "B", B, {b, l, g, n});
  check_shape(op, "C", C, {b, l, g, n});
  check_optional_shape(op, "D", o.D, {h});
  check_optional_shape(op, "z", o.z, {b, l, h, p});
  check_optional_shape(op, "dt_bias", o.dt_bias, {h});
  check_optional_shape(op, "initial_state", o.initial_state, {b, h, p, n});
  check_optional_shape(op, "mask", o.mask, {b, l});
  for (auto [name, t] : {std::pair{"x", &x}, {"dt", &dt}, {"A_log", &A_log}, {"B", &B}, {"C", &C},
                         {"D", &o.D}, {"z", &o.z}, {"dt_bias", &o.dt_bias},
                         {"initial_state", &o.initial_state}}) {
    check_float(op, name, *t);
    check_device(op, name, *t, x);
  }
  check_device(op, "mask", o.mask, x);
  check_same_dtype(op, "B", B, x);
  check_same_dtype(op, "C", C, x);
  check_same_dtype(op, "z", o.z, x);
  const int64_t cs = o.chunk_size;
  TORCH_CHECK(cs >= 16 && cs <= 256 && (cs & (cs - 1)) == 0, op,
              ": chunk_size must be a power of two in 16..256, got ", cs);
}

void validate_ssd_step(const torch::Tensor& state, const torch::Tensor& x, const torch::Tensor& dt,
                       const torch::Tensor& A_log, const torch::Tensor& B, const torch::Tensor& C,
                       const SsdStepOptions& o) {
  const char* op = "ssd_step";
  TORCH_CHECK(x.defined() && x.dim() == 3, op, ": x must be (B,H,P), got ", shape_str(x));
  TORCH_CHECK(B.defined() && B.dim() == 3, op, ": B must be (B,G,N), got ", shape_str(B));
  const int64_t b = x.size(0), h = x.size(1), p = x.size(2), g = B.size(1), n = B.size(2);
  TORCH_CHECK(g >= 1 && h % g == 0, op, ": the ", h, " heads of x ", shape_str(x),
              " are not a multiple of the ", g, " groups of B ", shape_str(B));
  check_shape(op, "state", state, {b, h, p, n});
  check_shape(op, "dt", dt, {b, h});
  check_shape(op, "A_log", A_log, {h});
  check_shape(op, "C", C, {b, g, n});
  check_optional_shape(op, "D", o.D, {h});
  check_optional_shape(op, "z", o.z, {b, h, p});
  check_optional_shape(op, "dt_bias", o.dt_bias, {h});
  check_optional_shape(op, "mask", o.mask, {b});
  for (auto [name, t] : {std::pair{"x", &x}, {"dt", &dt}, {"A_log", &A_log}, {"B", &B}, {"C", &C},
                         {"D", &o.D}, {"z", &o.z}, {"dt_bias", &o.dt_bias}, {"state", &state}}) {
    check_float(op, name, *t);
    check_device(op, name, *t, x);
  }
  check_device(op, "mask", o.mask, x);
  check_same_dtype(op, "B", B, x);
  check_same_dtype(op, "C", C, x);
  check_same_dtype(op, "z", o.z, x);
  TORCH_CHECK(state.scalar_type() == accum_dtype(x.scalar_type()), op, ": state must be ",
              accum_dtype(x.scalar_type()), " for ", x.scalar_type(), " x, got ", state.scalar_type());
  TORCH_CHECK(state.is_contiguous(), op, ": state must be contiguous (it is updated in place)");
}

namespace {

// B or C of the selective scan: (B,N,L) or (B,G,N,L) with D % G == 0.
void check_bc(const char* op, const char* name, const torch::Tensor& t, int64_t b, int64_t d,
              int64_t n, int64_t l, const torch::Tensor& like) {
  TORCH_CHECK(t.defined() && (t.dim() == 3 || t.dim() == 4), op, ": ", name,
              " must be (B,N,L) or (B,G,N,L), got ", shape_str(t));
  if (t.dim() == 3) {
    check_shape(op, name, t, {b, n, l});
  } else {
    const int64_t g = t.size(1);
    TORCH_CHECK(g >= 1 && d % g == 0, op, ": the ", d, " channels are not a multiple of the ", g,
                " groups of ", name, " ", shape_str(t));
    check_shape(op, name, t, {b, g, n, l});
  }
  check_float(op, name, t);
  check_same_dtype(op, name, t, like);
  check_device(op, name, t, like);
}

// The step's B or C: (B,N) or (B,G,N).
void check_bc_step(const char* op, const char* name, const torch::Tensor& t, int64_t b, int64_t d,
                   int64_t n, const torch::Tensor& like) {
  TORCH_CHECK(t.defined() && (t.dim() == 2 || t.dim() == 3), op, ": ", name,
              " must be (B,N) or (B,G,N), got ", shape_str(t));
  if (t.dim() == 2) {
    check_shape(op, name, t, {b, n});
  } else {
    const int64_t g = t.size(1);
    TORCH_CHECK(g >= 1 && d % g == 0, op, ": the ", d, " channels are not a multiple of the ", g,
                " groups of ", name, " ", shape_str(t));
    check_shape(op, name, t, {b, g, n});
  }
  check_float(op, name, t);
  check_same_dtype(op, name, t, like);
  check_device(op, name, t, like);
}

}  // namespace

void validate_selective_scan(const torch::Tensor& u, const torch::Tensor& delta,
                             const torch::Tensor& A, const torch::Tensor& B, const torch::Tensor& C,
                             const SelectiveScanOptions& o) {
  const char* op = "selective_scan";
  TORCH_CHECK(u.defined() && u.dim() == 3, op, ": u must be (B,D,L), got ", shape_str(u));
  TORCH_CHECK(A.defined() && A.dim() == 2, op, ": A must be (D,N), got ", shape_str(A));
  const int64_t b = u.size(0), d = u.size(1), l = u.size(2), n = A.size(1);
  TORCH_CHECK(b >= 1 && d >= 1 && l >= 1 && n >= 1, op, ": empty input, u ", shape_str(u), ", A ",
              shape_str(A));
  check_shape(op, "delta", delta, {b, d, l});
  check_shape(op, "A", A, {d, n});
  check_bc(op, "B", B, b, d, n, l, u);
  check_bc(op, "C", C, b, d, n, l, u);
  check_optional_shape(op, "D", o.D, {d});
  check_optional_shape(op, "z", o.z, {b, d, l});
  check_optional_shape(op, "delta_bias", o.delta_bias, {d});
  check_optional_shape(op, "initial_state", o.initial_state, {b, d, n});
  check_optional_shape(op, "mask", o.mask, {b, l});
  for (auto [name, t] : {std::pair{"u", &u}, {"delta", &delta}, {"A", &A}, {"D", &o.D},
                         {"z", &o.z}, {"delta_bias", &o.delta_bias},
                         {"initial_state", &o.initial_state}}) {
    check_float(op, name, *t);
    check_device(op, name, *t, u);
  }
  check_device(op, "mask", o.mask, u);
  check_same_dtype(op, "delta", delta, u);
  check_same_dtype(op, "z", o.z, u);
}

void validate_selective_scan_step(const torch::Tensor& state, const torch::Tensor& u,
                                  const torch::Tensor& delta, const torch::Tensor& A,
                                  const torch::Tensor& B, const torch::Tensor& C,
                                  const SelectiveScanStepOptions& o) {
  const char* op = "selective_scan_step";
  TORCH_CHECK(u.defined() && u.dim() == 2, op, ": u must be (B,D), got ", shape_str(u));
  TORCH_CHECK(A.defined() && A.dim() == 2, op, ": A must be (D,N), got ", shape_str(A));
  const int64_t b = u.size(0), d = u.size(1), n = A.size(1);
  check_shape(op, "state", state, {b, d, n});
  check_shape(op, "delta", delta, {b, d});
  check_shape(op, "A", A, {d, n});
  check_bc_step(op, "B", B, b, d, n, u);
  check_bc_step(op, "C", C, b, d, n, u);
  check_optional_shape(op, "D", o.D, {d});
  check_optional_shape(op, "z", o.z, {b, d});
  check_optional_shape(op, "delta_bias", o.delta_bias, {d});
  check_optional_shape(op, "mask", o.mask, {b});
  for (auto [name, t] : {std::pair{"u", &u}, {"delta", &delta}, {"A", &A}, {"D", &o.D},
                         {"z", &o.z}, {"delta_bias", &o.delta_bias}, {"state", &state}}) {
    check_float(op, name, *t);
    check_device(op, name, *t, u);
  }
  check_device(op, "mask", o.mask, u);
  check_same_dtype(op, "delta", delta, u);
  check_same_dtype(op, "z", o.z, u);
  TORCH_CHECK(state.scalar_type() == accum_dtype(u.scalar_type()), op, ": state must be ",
              accum_dtype(u.scalar_type()), " for ", u.scalar_type(), " u, got ", state.scalar_type());
  TORCH_CHECK(state.is_contiguous(), op, ": state must be contiguous (it is updated in place)");
}

void validate_causal_conv1d(const torch::Tensor& x, const torch::Tensor& weight,
                            const CausalConv1dOptions& o) {
  const char* op = "causal_conv1d";
  TORCH_CHECK(x.defined() && x.dim() == 3, op, ": x must be (B,D,L), got ", shape_str(x));
  TORCH_CHECK(weight.defined() && weight.dim() == 2, op, ": weight must be (D,W), got ",
              shape_str(weight));
  const int64_t b = x.size(0), d = x.size(1), l = x.size(2), w = weight.size(1);
  TORCH_CHECK(b >= 1 && d >= 1 && l >= 1, op, ": empty input x ", shape_str(x));
  TORCH_CHECK(w >= 2 && w <= 4, op, ": kernel width W must be 2..4, weight is ", shape_str(weight));
  check_shape(op, "weight", weight, {d, w});
  check_optional_shape(op, "bias", o.bias, {d});
  check_optional_shape(op, "initial_state", o.initial_state, {b, d, w - 1});
  for (auto [name, t] : {std::pair{"x", &x}, {"weight", &weight}, {"bias", &o.bias},
                         {"initial_state", &o.initial_state}}) {
    check_float(op, name, *t);
    check_device(op, name, *t, x);
  }
}

void validate_causal_conv1d_step(const torch::Tensor& state, const torch::Tensor& x,
                                 const torch::Tensor& weight, const torch::Tensor& bias) {
  const char* op = "causal_conv1d_step";
  TORCH_CHECK(x.defined() && x.dim() == 2, op, ": x must be (B,D), got ", shape_str(x));
  TORCH_CHECK(weight.defined() && weight.dim() == 2, op, ": weight must be (D,W), got ",
              shape_str(weight));
  const int64_t b = x.size(0), d = x.size(1), w = weight.size(1);
  TORCH_CHECK(w >= 2 && w <= 4, op, ": kernel width W must be 2..4, weight is ", shape_str(weight));
  check_shape(op, "weight", weight, {d, w});
  check_shape(op, "state", state, {b, d, w - 1});
  check_optional_shape(op, "bias", bias, {d});
  for (auto [name, t] : {std::pair{"x", &x}, {"weight", &weight}, {"bias", &bias},
                         {"state", &state}}) {
    check_float(op, name, *t);
    check_device(op, name, *t, x);
  }
  check_same_dtype(op, "state", state, x);
  TORCH_CHECK(state.is_contiguous(), op, ": state must be contiguous (it is updated in place)");
}

}  // namespace mambamt::kernels::detail
