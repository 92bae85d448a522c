#pragma once
// Float micro-kernels of the CPU ops, one implementation per instruction set
// (AVX-512, AVX2+FMA, portable C++), chosen once at run time from what the CPU
// supports, so one binary runs everywhere. The ops' algorithms (cpu/*.cpp) are
// written against this table; the double instantiations used by the float64
// tests take the portable templates in cpu/simd_generic.h.
#include <cstdint>

namespace mambamt::kernels::cpu {

// Widths W passed to gemm must be multiples of kPadFloats; the algorithms pad
// their work buffers to it (it is the widest vector, 16 floats).
constexpr int64_t kPadFloats = 16;

inline int64_t pad_to_vector(int64_t n) { return (n + kPadFloats - 1) / kPadFloats * kPadFloats; }

struct FloatKernels {
  const char* name;  // "avx512", "avx2" or "generic"

  // Small dense product with a broadcast operand:
  //   C[m*ldc + w] = beta * C[m*ldc + w] + sum_{k<K} A[m*a_rs + k*a_cs] * Bm[k*ldb + w]
  // for m < M, w < W. W % kPadFloats == 0; Bm and C rows need not be aligned.
  // A is read one element at a time, so any strides (and so A or its
  // transpose) work. beta == 0 overwrites C without reading it.
  void (*gemm)(int64_t M, int64_t K, int64_t W, const float* A, int64_t a_rs, int64_t a_cs,
               const float* Bm, int64_t ldb, float* C, int64_t ldc, float beta);

  // out[i] = exp(in[i]) for i < n (in == out allowed). Relative error ~2e-7;
  // inputs below -87.3 give 0, above 88.3 give ~1.7e38.
  void (*exp)(const float* in, float* out, int64_t n);

  // out[i] = softplus(in[i]) = log(1 + e^in[i]), in[i] itself above 20 (the
  // reference Mamba threshold); sig[i] = its derivative, the sigmoid (1 above
  // 20), when sig is not null. in == out allowed. Relative error ~1e-7.
  void (*softplus)(const float* in, float* out, float* sig, int64_t n);

  // dst[c*ldd + r] = src[r*lds + c] for r < rows, c < cols (rows and cols
  // multiples of kPadFloats; src and dst must not overlap).
  void (*transpose)(int64_t rows, int64_t cols, const float* src, int64_t lds, float* dst, int64_t ldd);

  // The selective-scan recurrence of one channel with np states (np a
  // multiple of kPadFloats; B, C: rows of np floats; A: np floats) over len
  // positions:
  //   h = exp(dl[t] A) * h + (dl[t] u[t]) B[t];   y[t] = C[t].h + D u[t]
  // h (np) is updated in place. exp as exp() above.
  void (*scan)(int64_t len, int64_t np, const float* dl, const float* u, const float* A, const float* B,
               const float* C, float D, float* h, float* y);

  // The same recurrence keeping what its backward needs: the decays
  // a[t] = exp(dl[t] A) as rows of a, and the states: H row 0 holds h on entry
  // (read), rows 1..len receive h after each position (rows of np).
  void (*scan_states)(int64_t len, int64_t np, const float* dl, const float* u, const float* A, const float* B,
                      float* a, float* H);

  // The backward of that recurrence, positions len-1 down to 0, given the
  // decays a[t] and the states H[t] = h_{t-1}, H[t+1] = h_t from scan_states.
  // With dh = dL/dh_t coming in:
  //   dhn = dh + dy[t] C[t];   dC[t] += dy[t] H[t+1];   dB[t] += (dl[t] u[t]) dhn
  //   q = dhn * H[t] * a[t];   dA += dl[t] q;   sB[t] = B[t].dhn;
  //   g[t] = A.q + u[t] sB[t];   dh = dhn * a[t]
  // dh and dA (np each) are updated in place; g[t] is the gradient of dl[t].
  void (*scan_bwd)(int64_t len, int64_t np, const float* dl, const float* u, const float* dy, const float* A,
                   const float* a, const float* B, const float* C, const float* H, float* dB, float* dC,
                   float* dh, float* dA, float* sB, float* g);

  // One position of the SSD (Mamba-2) recurrence for the P channels of a
  // head, which share its step dt, its decay exp(dt A), its skip D and the
  // vectors B and C of np states (any np):
  //   h[p] = decay * h[p] + (dt x[p]) B;   y[p] = C.h[p] + D x[p]   for p < P
  // h (P rows of np floats) is updated in place. The decode steps of the SSD
  // kernel and of the models' fused Mamba-2 step both run it.
  void (*ssd_update)(int64_t P, int64_t np, float decay, float dt, float D, const float* x, const float* B,
                     const float* C, float* h, float* y);
};

// The best kernels for this CPU. MAMBAMT_CPU_KERNELS=generic|avx2|avx512 in the
// environment forces a set (where the CPU lacks it, the best set it has).
const FloatKernels& float_kernels();

// Each set, or null when this CPU (or compiler) can't run it.
const FloatKernels* avx512_kernels();
const FloatKernels* avx2_kernels();
const FloatKernels& generic_kernels();

}  // namespace mambamt::kernels::cpu
