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

// The selective-scan recurrence and its backward (cpu/simd.h: scan,
// scan_states, scan_bwd); np is a multiple of 16.
template <typename S>
void scan(int64_t len, int64_t np, const S* dl, const S* u, const S* A, const S* B, const S* C, S D, S* h, S* y) {
  constexpr int64_t kw = 16;
  S a[kw];
  for (int64_t t = 0; t < len; ++t) {
    const S du = dl[t] * u[t];
    S acc = 0;
    for (int64_t n0 = 0; n0 < np; n0 += kw) {
      for (int64_t n = 0; n < kw; ++n) a[n] = dl[t] * A[n0 + n];
      exp<S>(a, a, kw);
      for (int64_t n = n0; n < n0 + kw; ++n) {
        h[n] = a[n - n0] * h[n] + du * B[t * np + n];
        acc += h[n] * C[t * np + n];
      }
    }
    y[t] = acc + D * u[t];
  }
}

template <typename S>
void scan_states(int64_t len, int64_t np, const S* dl, const S* u, const S* A, const S* B, S* a, S* H) {
  for (int64_t t = 0; t < len; ++t) {
    S* at = a + t * np;
    for (int64_t n = 0; n < np; ++n) at[n] = dl[t] * A[n];
    exp<S>(at, at, np);
    const S du = dl[t] * u[t];
    for (int64_t n = 0; n < np; ++n) H[(t + 1) * np + n] = at[n] * H[t * np + n] + du * B[t * np + n];
  }
}

template <typename S>
void scan_bwd(int64_t len, int64_t np, const S* dl, const S* u, const S* dy, const S* A, const S* a, const S* B,
              const S* C, const S* H, S* dB, S* dC, S* dh, S* dA, S* sB, S* g) {
  for (int64_t t = len - 1; t >= 0; --t) {
    const S* at = a + t * np;
    const S* hp = H + t * np;
    const S dlu = dl[t] * u[t];
    S sa = 0, sb = 0;
    for (int64_t n = 0; n < np; ++n) {
      const S dhn = dh[n] + dy[t] * C[t * np + n];
      dC[t * np + n] += dy[t] * hp[np + n];
      dB[t * np + n] += dlu * dhn;
      const S q = dhn * hp[n] * at[n];
      dA[n] += dl[t] * q;
      sa += A[n] * q;
      sb += B[t * np + n] * dhn;
      dh[n] = dhn * at[n];
    }
    sB[t] = sb;
    g[t] = sa + u[t] * sb;
  }
}

template <typename S>
void ssd_update(int64_t P, int64_t np, S decay, S dt, S D, const S* x, const S* B, const S* C, S* h, S* y) {
  for (int64_t p = 0; p < P; ++p) {
    S* row = h + p * np;
    const S u = dt * x[p];
    S acc = 0;
    for (int64_t k = 0; k < np; ++k) {
      row[k] = decay * row[k] + u * B[k];
      acc += row[k] * C[k];
    }
    y[p] = acc + D * x[p];
  }
}

}  // namespace mambamt::kernels::cpu::generic
