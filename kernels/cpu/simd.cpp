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

const FloatKernels& generic_kernels() {
  static const FloatKernels k{"generic", &generic_gemm, &generic_exp, &generic_softplus, &generic_transpose,
                              &generic_scan16};
  return k;
}

const FloatKernels& float_kernels() {
  static const FloatKernels& k = choose();
  return k;
}

}  // namespace mambamt::kernels::cpu
