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
  generic::scan<float>(len, np, dl, u, A, B, C, D, h, y);
}

void generic_scan_states(int64_t len, int64_t np, const float* dl, const float* u, const float* A, const float* B,
                         float* a, float* H) {
  generic::scan_states<float>(len, np, dl, u, A, B, a, H);
}

void generic_scan_bwd(int64_t len, int64_t np, const float* dl, const float* u, const float* dy, const float* A,
                      const float* a, const float* B, const float* C, const float* H, float* dB, float* dC,
                      float* dh, float* dA, float* sB, float* g) {
  generic::scan_bwd<float>(len, np, dl, u, dy, A, a, B, C, H, dB, dC, dh, dA, sB, g);
}

void generic_ssd_update(int64_t P, int64_t np, float decay, float dt, float D, const float* x, const float* B,
                        const float* C, float* h, float* y) {
  generic::ssd_update<float>(P, np, decay, dt, D, x, B, C, h, y);
}

const FloatKernels& generic_kernels() {
  static const FloatKernels k{"generic", &generic_gemm, &generic_exp, &generic_softplus, &generic_transpose,
                              &generic_scan, &generic_scan_states, &generic_scan_bwd, &generic_ssd_update};
  return k;
}

const FloatKernels& float_kernels() {
  static const FloatKernels& k = choose();
  return k;
}

}  // namespace mambamt::kernels::cpu
