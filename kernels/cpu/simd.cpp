// Picks the micro-kernel set for this CPU (see cpu/simd.h).
#include "kernels/cpu/simd.h"

#include <cstdlib>
#include <cstring>

#include "kernels/cpu/simd_generic.h"

namespace mambamt::kernels::cpu {

namespace {
void generic_gemm(int64_t M, int64_t K, int64_t W, const float* A, int64_t a_rs, int64_t a_cs,
                  const float* Bm, int64_t ldb, float* C, int64_t ldc, float beta) {
  generic::gemm<float>(M, K, W, A, a_rs, a_cs, Bm, ldb, C, ldc, beta);
}
void generic_exp(const float* in, float* out, int64_t n) { generic::exp<float>(in, out, n); }
void generic_softplus(const float* in, float* out, float* sig, int64_t n) {
  generic::softplus<float>(in, out, sig, n);
}

const FloatKernels& choose() {
  const char* force = std::getenv("MAMBAMT_CPU_KERNELS");
  const FloatKernels* k = nullptr;
  if (force && std::strcmp(force, "generic") == 0) return generic_kernels();
  if (force && std::strcmp(force, "avx2") == 0) k = avx2_kernels();
  if (!k && !(force && std::strcmp(force, "avx2") == 0)) k = avx512_kernels();
  if (!k) k = avx2_kernels();
  return k ? *k : generic_kernels();
}
}  // namespace

void generic_transpose(int64_t rows, int64_t cols, const float* src, int64_t lds, float* dst, int64_t ldd) {
  generic::transpose<float>(rows, cols, src, lds, dst, ldd);
}

void generic_scan(int64_t len, int64_t np, const float* dl, const float* u, const float* A, const float* B,
                  const float* C, float D, float* h, float* y) {
  float a[kPadFloats];
  for (int64_t t = 0; t < len; ++t) {
    const float du = dl[t] * u[t];
    float acc = 0;
    for (int64_t n0 = 0; n0 < np; n0 += kPadFloats) {
      for (int64_t n = 0; n < kPadFloats; ++n) a[n] = dl[t] * A[n0 + n];
      generic::exp<float>(a, a, kPadFloats);
      for (int64_t n = n0; n < n0 + kPadFloats; ++n) {
        h[n] = a[n - n0] * h[n] + du * B[t * np + n];
        acc += h[n] * C[t * np + n];
      }
    }
    y[t] = acc + D * u[t];
  }
}

void generic_scan_states(int64_t len, int64_t np, const float* dl, const float* u, const float* A, const float* B,
                         float* a, float* H) {
  for (int64_t t = 0; t < len; ++t) {
    float* at = a + t * np;
    for (int64_t n = 0; n < np; ++n) at[n] = dl[t] * A[n];
    generic::exp<float>(at, at, np);
    const float du = dl[t] * u[t];
    for (int64_t n = 0; n < np; ++n) H[(t + 1) * np + n] = at[n] * H[t * np + n] + du * B[t * np + n];
  }
}

void generic_scan_bwd(int64_t len, int64_t np, const float* dl, const float* u, const float* dy, const float* A,
                      const float* a, const float* B, const float* C, const float* H, float* dB, float* dC,
                      float* dh, float* dA, float* sB, float* g) {
  for (int64_t t = len - 1; t >= 0; --t) {
    const float* at = a + t * np;
    const float* hp = H + t * np;
    const float dlu = dl[t] * u[t];
    float sa = 0, sb = 0;
    for (int64_t n = 0; n < np; ++n) {
      const float dhn = dh[n] + dy[t] * C[t * np + n];
      dC[t * np + n] += dy[t] * hp[np + n];
      dB[t * np + n] += dlu * dhn;
      const float q = dhn * hp[n] * at[n];
      dA[n] += dl[t] * q;
      sa += A[n] * q;
      sb += B[t * np + n] * dhn;
      dh[n] = dhn * at[n];
    }
    sB[t] = sb;
    g[t] = sa + u[t] * sb;
  }
}

const FloatKernels& generic_kernels() {
  static const FloatKernels k{"generic", &generic_gemm, &generic_exp, &generic_softplus, &generic_transpose,
                              &generic_scan, &generic_scan_states, &generic_scan_bwd};
  return k;
}

const FloatKernels& float_kernels() {
  static const FloatKernels& k = choose();
  return k;
}

}  // namespace mambamt::kernels::cpu
