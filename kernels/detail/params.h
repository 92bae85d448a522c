#pragma once
// Kernel arguments: plain structs of sizes, strides (in elements) and raw
// pointers, filled by the ops' host code (kernels/*.cpp) after validation. The
// CPU and CUDA kernels assume valid input. No LibTorch here: nvcc compiles it.
//
// "act" below is the activation dtype (DType); "acc" is the accumulation type,
// float, or double when the activations are float64. Pointers documented as
// optional may be null.
#include <cstdint>

namespace mambamt::kernels::detail {

enum class DType : int { kFloat32 = 0, kFloat64 = 1, kBFloat16 = 2, kFloat16 = 3 };

// The CPU SSD kernel saves the state every kSsdCheckpointLen positions for its
// backward pass (a multiple of every CPU block length).
constexpr int64_t kSsdCheckpointLen = 256;
// The same for the selective scan.
constexpr int64_t kScanCheckpointLen = 256;

// ---------------------------------------------------------------- SSD (Mamba-2)
struct SsdParams {
  DType dtype = DType::kFloat32;
  int64_t batch = 0, seqlen = 0, nheads = 0, headdim = 0, ngroups = 0, dstate = 0;
  int64_t chunk_size = 64;  // CUDA chunk length; the CPU kernel uses its own
  bool dt_softplus = true;

  // act (B,L,H,P): element (b,l,h,p) at b*bs + l*ls + h*hs + p.
  const void* x = nullptr;
  int64_t x_bs = 0, x_ls = 0, x_hs = 0;
  const void* z = nullptr;  // optional, like x
  int64_t z_bs = 0, z_ls = 0, z_hs = 0;
  // act (B,L,G,N): element (b,l,g,n) at b*bs + l*ls + g*gs + n.
  const void* B = nullptr;
  int64_t B_bs = 0, B_ls = 0, B_gs = 0;
  const void* C = nullptr;
  int64_t C_bs = 0, C_ls = 0, C_gs = 0;
  // acc, contiguous.
  const void* dt = nullptr;             // (B,L,H)
  const void* A_log = nullptr;          // (H)
  const void* dt_bias = nullptr;        // (H), optional
  const void* D = nullptr;              // (H), optional
  const uint8_t* mask = nullptr;        // (B,L) 0 = padding, optional
  const void* initial_state = nullptr;  // (B,H,P,N), optional

  // Outputs.
  void* y = nullptr;            // act (B,L,H,P) contiguous
  void* final_state = nullptr;  // acc (B,H,P,N) contiguous, optional
  // Saved for the backward pass when not null: y before the z gate (act,
  // (B,L,H,P) contiguous; only with z), and (CPU) the state before every
  // kSsdCheckpointLen-th position, acc (B,H,ceil(L/len),P,N).
  void* y_pregate = nullptr;
  void* checkpoints = nullptr;
};

struct SsdBwdParams : SsdParams {
  // Incoming gradients: dout act (B,L,H,P) contiguous; dfinal_state acc
  // (B,H,P,N) contiguous, optional.
  const void* dout = nullptr;
  const void* dfinal_state = nullptr;
  // Gradients. dx, dz: act (B,L,H,P) contiguous. The rest acc, contiguous:
  // dB, dC (B,L,G,N); ddt (B,L,H) (gradient of the raw dt input);
  // dA_log_part, dD_part (B,H): per-batch partial sums that the host adds up;
  // dinitial_state (B,H,P,N). dz, dD_part, dinitial_state optional.
  void* dx = nullptr;
  void* dz = nullptr;
  void* dB = nullptr;
  void* dC = nullptr;
  void* ddt = nullptr;
  void* dA_log_part = nullptr;
  void* dD_part = nullptr;
  void* dinitial_state = nullptr;
};

struct SsdStepParams {
  DType dtype = DType::kFloat32;
  int64_t batch = 0, nheads = 0, headdim = 0, ngroups = 0, dstate = 0;
  bool dt_softplus = true;
  // act: x, z (B,H,P), B, C (B,G,N), y (B,H,P). acc: dt (B,H), A_log,
  // dt_bias, D (H), state (B,H,P,N). mask (B). x, z, B, C and dt: each batch
  // row contiguous, rows *_bs elements apart (a decode step's inputs are
  // column ranges of one projection); the rest contiguous.
  int64_t x_bs = 0, z_bs = 0, B_bs = 0, C_bs = 0, dt_bs = 0;
  const void* x = nullptr;
  const void* z = nullptr;
  const void* B = nullptr;
  const void* C = nullptr;
  const void* dt = nullptr;
  const void* A_log = nullptr;
  const void* dt_bias = nullptr;
  const void* D = nullptr;
  const uint8_t* mask = nullptr;
  void* state = nullptr;
  void* y = nullptr;
};

// ------------------------------------------------------ selective scan (Mamba-1)
struct ScanParams {
  DType dtype = DType::kFloat32;
  int64_t batch = 0, dim = 0, seqlen = 0, dstate = 0;
  int64_t ngroups = 1;  // B and C (B,G,N,L); (B,N,L) is one group
  bool delta_softplus = false;

  // act (B,D,L): element (b,d,l) at b*bs + d*ds + l.
  const void* u = nullptr;
  int64_t u_bs = 0, u_ds = 0;
  const void* delta = nullptr;
  int64_t delta_bs = 0, delta_ds = 0;
  const void* z = nullptr;  // optional
  int64_t z_bs = 0, z_ds = 0;
  // act (B,G,N,L): element (b,g,n,l) at b*bs + g*gs + n*ns + l.
  const void* B = nullptr;
  int64_t B_bs = 0, B_gs = 0, B_ns = 0;
  const void* C = nullptr;
  int64_t C_bs = 0, C_gs = 0, C_ns = 0;
  // acc, contiguous.
  const void* A = nullptr;              // (D,N)
  const void* D = nullptr;              // (D), optional
  const void* delta_bias = nullptr;     // (D), optional
  const uint8_t* mask = nullptr;        // (B,L), optional
  const void* initial_state = nullptr;  // (B,D,N), optional

  void* y = nullptr;            // act (B,D,L) contiguous
  void* final_state = nullptr;  // acc (B,D,N), optional
  // Saved for backward when not null: y before the gate (act (B,D,L), only
  // with z) and (CPU) the state before every kScanCheckpointLen-th position,
  // acc (B,D,ceil(L/len),N).
  void* y_pregate = nullptr;
  void* checkpoints = nullptr;
};

struct ScanBwdParams : ScanParams {
  const void* dout = nullptr;          // act (B,D,L) contiguous
  const void* dfinal_state = nullptr;  // acc (B,D,N), optional
  // du, ddelta, dz: act (B,D,L) contiguous. acc: dA_part (B,D,N), dD_part,
  // ddelta_bias_part (B,D) per-batch partials; dB, dC (B,G,N,L) (accumulated
  // over the channels of a group: the host zeroes them); dinitial_state (B,D,N).
  void* du = nullptr;
  void* ddelta = nullptr;
  void* dz = nullptr;
  void* dA_part = nullptr;
  void* dD_part = nullptr;
  void* ddelta_bias_part = nullptr;
  void* dB = nullptr;
  void* dC = nullptr;
  void* dinitial_state = nullptr;
};

struct ScanStepParams {
  DType dtype = DType::kFloat32;
  int64_t batch = 0, dim = 0, dstate = 0, ngroups = 1;
  bool delta_softplus = false;
  // act: u, delta, z, y (B,D); B, C (B,G,N). acc: A (D,N), D, delta_bias
  // (D), state (B,D,N). mask (B). u, delta, z, B and C: each batch row
  // contiguous, rows *_bs elements apart (a decode step's column ranges of
  // a projection); the rest contiguous.
  int64_t u_bs = 0, delta_bs = 0, z_bs = 0, B_bs = 0, C_bs = 0;
  const void* u = nullptr;
  const void* delta = nullptr;
  const void* z = nullptr;
  const void* B = nullptr;
  const void* C = nullptr;
  const void* A = nullptr;
  const void* D = nullptr;
  const void* delta_bias = nullptr;
  const uint8_t* mask = nullptr;
  void* state = nullptr;
  void* y = nullptr;
};

// ------------------------------------------------------------- causal conv1d
struct ConvParams {
  DType dtype = DType::kFloat32;
  int64_t batch = 0, dim = 0, seqlen = 0, width = 0;
  bool silu = false;
  // act (B,D,L): element (b,d,l) at b*bs + d*ds + l*ls (any strides).
  const void* x = nullptr;
  int64_t x_bs = 0, x_ds = 0, x_ls = 0;
  const void* weight = nullptr;         // acc (D,W) contiguous
  const void* bias = nullptr;           // acc (D), optional
  const void* initial_state = nullptr;  // act (B,D,W-1) contiguous, optional
  void* y = nullptr;                    // act (B,D,L) contiguous
  void* final_state = nullptr;          // act (B,D,W-1) contiguous, optional
};

struct ConvBwdParams : ConvParams {
  const void* dout = nullptr;          // act (B,D,L) contiguous
  const void* dfinal_state = nullptr;  // act (B,D,W-1) contiguous, optional
  void* dx = nullptr;                  // act (B,D,L) contiguous
  void* dweight_part = nullptr;        // acc (B,D,W) per-batch partials
  void* dbias_part = nullptr;          // acc (B,D), optional
  void* dinitial_state = nullptr;      // act (B,D,W-1), optional
};

struct ConvStepParams {
  DType dtype = DType::kFloat32;
  int64_t batch = 0, dim = 0, width = 0;
  bool silu = false;
  const void* x = nullptr;       // act (B,D), rows x_bs elements apart
  int64_t x_bs = 0;
  const void* weight = nullptr;  // acc (D,W)
  const void* bias = nullptr;    // acc (D), optional
  void* state = nullptr;         // act (B,D,W-1), updated in place
  void* y = nullptr;             // act (B,D)
};

// RMSNorm of rows (kernels/norm.h).
struct RmsNormParams {
  DType dtype = DType::kFloat32;         // x
  DType weight_dtype = DType::kFloat32;  // float32 or x's dtype
  int64_t rows = 0, dim = 0;
  double eps = 1e-6;
  const void* x = nullptr;       // (rows, dim), contiguous
  const void* weight = nullptr;  // (dim)
  void* y = nullptr;             // (rows, dim) in the promoted type of x and weight
};

}  // namespace mambamt::kernels::detail
