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

void generic_scan16(int64_t len, const float* dl, const float* u, const float* A, const float* B, const float* C,
                    float D, float* h, float* y) {
  float dA[16];
  for (int64_t t = 0; t < len; ++t) {
    for (int n = 0; n < 16; ++n) dA[n] = dl[t] * A[n];
    generic::exp<float>(dA, dA, 16);
    const float du = dl[t] * u[t];
    float acc = 0;
    for (int n = 0; n < 16; ++n) {
      h[n] = dA[n] * h[n] + du * B[t * 16 + n];
      acc += h[n] * C[t * 16 + n];
    }
    y[t] = acc + D * u[t];
  }
}

void generic_states16(int64_t len, const float* dl, const float* u, const float* A, const float* B, float* a,
                      float* H) {
  for (int64_t t = 0; t < len; ++t) {
    float* at = a + t * 16;
    for (int n = 0; n < 16; ++n) at[n] = dl[t] * A[n];
    generic::exp<float>(at, at, 16);
    const float du = dl[t] * u[t];
    for (int n = 0; n < 16; ++n) H[(t + 1) * 16 + n] = at[n] * H[t * 16 + n] + du * B[t * 16 + n];
  }
}

void generic_scan16_bwd(int64_t len, const float* dl, const float* u, const float* dy, const float* A,
                        const float* a, const float* B, const float* C, const float* H, float* dB, float* dC,
                        float* dh, float* dA, float* sB, float* g) {
  for (int64_t t = len - 1; t >= 0; --t) {
    const float* at = a + t * 16;
    const float* hp = H + t * 16;
    const float dlu = dl[t] * u[t];
    float sa = 0, sb = 0;
    for (int n = 0; n < 16; ++n) {
      const float dhn = dh[n] + dy[t] * C[t * 16 + n];
      dC[t * 16 + n] += dy[t] * hp[16 + n];
      dB[t * 16 + n] += dlu * dhn;
      const float q = dhn * hp[n] * at[n];
      dA[n] += dl[t] * q;
      sa += A[n] * q;
      sb += B[t * 16 + n] * dhn;
      dh[n] = dhn * at[n];
    }
    sB[t] = sb;
    g[t] = sa + u[t] * sb;
  }
}

const FloatKernels& generic_kernels() {
  static const FloatKernels k{"generic", &generic_gemm, &generic_exp, &generic_softplus, &generic_transpose,
                              &generic_scan16, &generic_states16, &generic_scan16_bwd};
  return k;
}

const FloatKernels& float_kernels() {
  static const FloatKernels& k = choose();
  return k;
}

}  // namespace mambamt::kernels::cpu
