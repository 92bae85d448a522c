#pragma once
// Portable versions of the micro-kernels in cpu/simd.h, templated on the
// scalar type: the double path of every CPU op, and the float fallback.
#include <cmath>
#include <cstdint>

namespace mambamt::kernels::cpu::generic {

template <typename S>
void gemm(int64_t M, int64_t K, int64_t W, const S* A, int64_t a_rs, int64_t a_cs, const S* Bm,
          int64_t ldb, S* C, int64_t ldc, S beta) {
  for (int64_t m = 0; m < M; ++m) {
    S* c = C + m * ldc;
    if (beta == S(0)) {
      for (int64_t w = 0; w < W; ++w) c[w] = S(0);
    } else if (beta != S(1)) {
      for (int64_t w = 0; w < W; ++w) c[w] *= beta;
    }
    for (int64_t k = 0; k < K; ++k) {
      const S a = A[m * a_rs + k * a_cs];
      const S* b = Bm + k * ldb;
      for (int64_t w = 0; w < W; ++w) c[w] += a * b[w];
    }
  }
}

template <typename S>
void exp(const S* in, S* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = std::exp(in[i]);
}

template <typename S>
void softplus(const S* in, S* out, S* sig, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const S v = in[i];
    if (v > S(20)) {
      out[i] = v;
      if (sig) sig[i] = 1;
    } else {
      const S e = std::exp(v);
      out[i] = std::log1p(e);
      if (sig) sig[i] = e / (S(1) + e);
    }
  }
}

template <typename S>
void transpose(int64_t rows, int64_t cols, const S* src, int64_t lds, S* dst, int64_t ldd) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) dst[c * ldd + r] = src[r * lds + c];
}

}  // namespace mambamt::kernels::cpu::generic
