// AVX2 + FMA micro-kernels (see cpu/simd.h and the notes in simd_avx512.cpp):
// all but the transpose, which takes the portable one.
#include <immintrin.h>

#include <cstdint>
#include <type_traits>
#include <utility>

#include "kernels/cpu/simd.h"

#if defined(__GNUC__) && defined(__x86_64__)
#define MAMBAMT_HAVE_AVX2_KERNELS 1
#endif

namespace mambamt::kernels::cpu {

void generic_transpose(int64_t rows, int64_t cols, const float* src, int64_t lds, float* dst, int64_t ldd);

#ifdef MAMBAMT_HAVE_AVX2_KERNELS
#pragma GCC push_options
// GCC 12 warns about the deliberately undefined upper lanes inside its own intrinsics.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC target("avx2,fma")

namespace {

// MR rows by 2 vectors of 8 floats (every W is a multiple of 16): 12
// accumulators + 2 + 1 of the 16 registers.
template <int MR>
void micro(int64_t K, const float* A, int64_t a_rs, int64_t a_cs, const float* Bm, int64_t ldb,
           float* C, int64_t ldc, float beta) {
  __m256 acc[MR][2];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  for (int64_t k = 0; k < K; ++k) {
    const float* b = Bm + k * ldb;
    const float* a = A + k * a_cs;
    const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m256 ar = _mm256_broadcast_ss(a + r * a_rs);
      acc[r][0] = _mm256_fmadd_ps(ar, b0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(ar, b1, acc[r][1]);
    }
  }
  const __m256 vb = _mm256_set1_ps(beta);
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
    float* c = C + r * ldc;
#pragma GCC unroll 2
    for (int v = 0; v < 2; ++v) {
      __m256 out = acc[r][v];
      if (beta == 1.0f) {
        out = _mm256_add_ps(out, _mm256_loadu_ps(c + 8 * v));
      } else if (beta != 0.0f) {
        out = _mm256_fmadd_ps(vb, _mm256_loadu_ps(c + 8 * v), out);
      }
      _mm256_storeu_ps(c + 8 * v, out);
    }
  }
}

using MicroFn = void (*)(int64_t, const float*, int64_t, int64_t, const float*, int64_t, float*,
                         int64_t, float);
constexpr int kRows = 6;
constexpr MicroFn kTail[kRows] = {&micro<1>, &micro<2>, &micro<3>, &micro<4>, &micro<5>, &micro<6>};

void gemm(int64_t M, int64_t K, int64_t W, const float* A, int64_t a_rs, int64_t a_cs,
          const float* Bm, int64_t ldb, float* C, int64_t ldc, float beta) {
  for (int64_t w = 0; w < W; w += 16) {
    int64_t m = 0;
    for (; m + kRows <= M; m += kRows)
      micro<kRows>(K, A + m * a_rs, a_rs, a_cs, Bm + w, ldb, C + m * ldc + w, ldc, beta);
    if (m < M) kTail[M - m - 1](K, A + m * a_rs, a_rs, a_cs, Bm + w, ldb, C + m * ldc + w, ldc, beta);
  }
}

inline __m256 exp8(__m256 x) {
  const __m256 hi = _mm256_set1_ps(88.3762626647949f), lo = _mm256_set1_ps(-87.3365478515625f);
  const __m256 tiny = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
  x = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
  __m256 fx = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                              _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500E-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507E-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073E-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894E-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459E-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201E-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(fx), _mm256_set1_epi32(127)), 23);
  __m256 out = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
  return _mm256_andnot_ps(tiny, out);
}

void vexp(const float* in, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, exp8(_mm256_loadu_ps(in + i)));
  if (i < n) {
    float buf[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t j = i; j < n; ++j) buf[j - i] = in[j];
    _mm256_storeu_ps(buf, exp8(_mm256_loadu_ps(buf)));
    for (int64_t j = i; j < n; ++j) out[j] = buf[j - i];
  }
}

inline __m256 log8(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.0f);
  __m256i i = _mm256_castps_si256(x);
  __m256 e = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(i, 23), _mm256_set1_epi32(127)));
  __m256 m = _mm256_castsi256_ps(
      _mm256_or_si256(_mm256_and_si256(i, _mm256_set1_epi32(0x007fffff)), _mm256_set1_epi32(0x3f800000)));
  const __m256 big = _mm256_cmp_ps(m, _mm256_set1_ps(1.41421356237f), _CMP_GT_OQ);
  m = _mm256_blendv_ps(m, _mm256_mul_ps(m, _mm256_set1_ps(0.5f)), big);
  e = _mm256_add_ps(e, _mm256_and_ps(big, one));
  const __m256 f = _mm256_sub_ps(m, one);
  const __m256 z = _mm256_mul_ps(f, f);
  __m256 y = _mm256_set1_ps(7.0376836292E-2f);
  y = _mm256_fmadd_ps(y, f, _mm256_set1_ps(-1.1514610310E-1f));
  y = _mm256_fmadd_ps(y, f, _mm256_set1_ps(1.1676998740E-1f));
  y = _mm256_fmadd_ps(y, f, _mm256_set1_ps(-1.2420140846E-1f));
  y = _mm256_fmadd_ps(y, f, _mm256_set1_ps(1.4249322787E-1f));
  y = _mm256_fmadd_ps(y, f, _mm256_set1_ps(-1.6668057665E-1f));
  y = _mm256_fmadd_ps(y, f, _mm256_set1_ps(2.0000714765E-1f));
  y = _mm256_fmadd_ps(y, f, _mm256_set1_ps(-2.4999993993E-1f));
  y = _mm256_fmadd_ps(y, f, _mm256_set1_ps(3.3333331174E-1f));
  y = _mm256_mul_ps(_mm256_mul_ps(y, f), z);
  y = _mm256_fmadd_ps(e, _mm256_set1_ps(-2.12194440e-4f), y);
  y = _mm256_fnmadd_ps(z, _mm256_set1_ps(0.5f), y);
  __m256 r = _mm256_add_ps(f, y);
  return _mm256_fmadd_ps(e, _mm256_set1_ps(0.693359375f), r);
}

inline void softplus8(__m256 v, __m256* out, __m256* sig) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 ev = exp8(v);
  const __m256 u = _mm256_add_ps(one, ev);
  const __m256 um1 = _mm256_sub_ps(u, one);
  const __m256 exact = _mm256_cmp_ps(um1, _mm256_setzero_ps(), _CMP_EQ_OQ);
  __m256 sp = _mm256_div_ps(_mm256_mul_ps(log8(u), ev), _mm256_blendv_ps(um1, one, exact));
  sp = _mm256_blendv_ps(sp, ev, exact);
  const __m256 above = _mm256_cmp_ps(v, _mm256_set1_ps(20.0f), _CMP_GT_OQ);
  *out = _mm256_blendv_ps(sp, v, above);
  *sig = _mm256_blendv_ps(_mm256_div_ps(ev, u), one, above);
}

void vsoftplus(const float* in, float* out, float* sig, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 o, s;
    softplus8(_mm256_loadu_ps(in + i), &o, &s);
    _mm256_storeu_ps(out + i, o);
    if (sig) _mm256_storeu_ps(sig + i, s);
  }
  if (i < n) {
    float buf[8] = {0, 0, 0, 0, 0, 0, 0, 0}, so[8], ss[8];
    for (int64_t j = i; j < n; ++j) buf[j - i] = in[j];
    __m256 o, s;
    softplus8(_mm256_loadu_ps(buf), &o, &s);
    _mm256_storeu_ps(so, o);
    _mm256_storeu_ps(ss, s);
    for (int64_t j = i; j < n; ++j) {
      out[j] = so[j - i];
      if (sig) sig[j] = ss[j - i];
    }
  }
}

inline float hsum8(__m256 s) {
  __m128 q = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
  q = _mm_add_ps(q, _mm_movehl_ps(q, q));
  q = _mm_add_ss(q, _mm_movehdup_ps(q));
  return _mm_cvtss_f32(q);
}

// cpu/simd.h: ssd_update. Each channel's states in vectors of 8 (two at a
// time, two partial sums of C.h), the rest scalar.
void ssd_update(int64_t P, int64_t np, float decay, float dt, float D, const float* x, const float* B, const float* C,
                float* h, float* y) {
  const __m256 dv = _mm256_set1_ps(decay);
  const int64_t full = np / 8 * 8;
  for (int64_t p = 0; p < P; ++p) {
    float* row = h + p * np;
    const float u = dt * x[p];
    const __m256 uv = _mm256_set1_ps(u);
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t k = 0;
    for (; k + 16 <= full; k += 16) {
      const __m256 s0 = _mm256_fmadd_ps(dv, _mm256_loadu_ps(row + k), _mm256_mul_ps(uv, _mm256_loadu_ps(B + k)));
      const __m256 s1 =
          _mm256_fmadd_ps(dv, _mm256_loadu_ps(row + k + 8), _mm256_mul_ps(uv, _mm256_loadu_ps(B + k + 8)));
      _mm256_storeu_ps(row + k, s0);
      _mm256_storeu_ps(row + k + 8, s1);
      acc0 = _mm256_fmadd_ps(s0, _mm256_loadu_ps(C + k), acc0);
      acc1 = _mm256_fmadd_ps(s1, _mm256_loadu_ps(C + k + 8), acc1);
    }
    for (; k < full; k += 8) {
      const __m256 s0 = _mm256_fmadd_ps(dv, _mm256_loadu_ps(row + k), _mm256_mul_ps(uv, _mm256_loadu_ps(B + k)));
      _mm256_storeu_ps(row + k, s0);
      acc0 = _mm256_fmadd_ps(s0, _mm256_loadu_ps(C + k), acc0);
    }
    float acc = hsum8(_mm256_add_ps(acc0, acc1));
    for (; k < np; ++k) {
      row[k] = decay * row[k] + u * B[k];
      acc += row[k] * C[k];
    }
    y[p] = acc + D * x[p];
  }
}

// The selective scan as in simd_avx512.cpp, in vectors of 8: the states of a
// pass in V registers across positions (V = 4: 32 states; np, a multiple of
// 16, runs in passes of 4 vectors and a last one of 2), the decays' exp
// computed in place. The first pass writes the sums over states (y, sB, g),
// later ones add to them. Passes of 2 vectors ran slower (one AMD EPYC core,
// D=1024, L=1024, N=64 forward: 518 against 376 ms).
constexpr int64_t kScanVectors = 4;

template <int V>
void scan_pass(int64_t len, int64_t np, const float* dl, const float* u, const float* A, const float* B,
               const float* C, float D, float* h, float* y, bool first) {
  __m256 av[V], hv[V];
  for (int v = 0; v < V; ++v) av[v] = _mm256_loadu_ps(A + 8 * v), hv[v] = _mm256_loadu_ps(h + 8 * v);
  for (int64_t t = 0; t < len; ++t) {
    const __m256 dlv = _mm256_set1_ps(dl[t]), duv = _mm256_set1_ps(dl[t] * u[t]);
    __m256 acc = _mm256_setzero_ps();
    for (int v = 0; v < V; ++v) {
      const __m256 da = exp8(_mm256_mul_ps(dlv, av[v]));
      hv[v] = _mm256_fmadd_ps(da, hv[v], _mm256_mul_ps(duv, _mm256_loadu_ps(B + t * np + 8 * v)));
      acc = _mm256_fmadd_ps(hv[v], _mm256_loadu_ps(C + t * np + 8 * v), acc);
    }
    const float s = hsum8(acc);
    y[t] = first ? s + D * u[t] : y[t] + s;
  }
  for (int v = 0; v < V; ++v) _mm256_storeu_ps(h + 8 * v, hv[v]);
}

template <int V>
void states_pass(int64_t len, int64_t np, const float* dl, const float* u, const float* A, const float* B, float* a,
                 float* H) {
  __m256 av[V], hv[V];
  for (int v = 0; v < V; ++v) av[v] = _mm256_loadu_ps(A + 8 * v), hv[v] = _mm256_loadu_ps(H + 8 * v);
  for (int64_t t = 0; t < len; ++t) {
    const __m256 dlv = _mm256_set1_ps(dl[t]), duv = _mm256_set1_ps(dl[t] * u[t]);
    for (int v = 0; v < V; ++v) {
      const __m256 da = exp8(_mm256_mul_ps(dlv, av[v]));
      _mm256_storeu_ps(a + t * np + 8 * v, da);
      hv[v] = _mm256_fmadd_ps(da, hv[v], _mm256_mul_ps(duv, _mm256_loadu_ps(B + t * np + 8 * v)));
      _mm256_storeu_ps(H + (t + 1) * np + 8 * v, hv[v]);
    }
  }
}

template <int V>
void bwd_pass(int64_t len, int64_t np, const float* dl, const float* u, const float* dy, const float* A,
              const float* a, const float* B, const float* C, const float* H, float* dB, float* dC, float* dh,
              float* dA, float* sB, float* g, bool first) {
  __m256 dhv[V], dav[V];
  for (int v = 0; v < V; ++v) dhv[v] = _mm256_loadu_ps(dh + 8 * v), dav[v] = _mm256_loadu_ps(dA + 8 * v);
  for (int64_t t = len - 1; t >= 0; --t) {
    const __m256 dyv = _mm256_set1_ps(dy[t]), dlv = _mm256_set1_ps(dl[t]), uv = _mm256_set1_ps(u[t]);
    const __m256 dluv = _mm256_set1_ps(dl[t] * u[t]);
    __m256 bsum = _mm256_setzero_ps(), gsum = _mm256_setzero_ps();
    for (int v = 0; v < V; ++v) {
      const int64_t o = t * np + 8 * v;
      const __m256 at = _mm256_loadu_ps(a + o);
      const __m256 dhn = _mm256_fmadd_ps(dyv, _mm256_loadu_ps(C + o), dhv[v]);
      _mm256_storeu_ps(dC + o, _mm256_fmadd_ps(dyv, _mm256_loadu_ps(H + np + o), _mm256_loadu_ps(dC + o)));
      _mm256_storeu_ps(dB + o, _mm256_fmadd_ps(dluv, dhn, _mm256_loadu_ps(dB + o)));
      const __m256 q = _mm256_mul_ps(_mm256_mul_ps(dhn, _mm256_loadu_ps(H + o)), at);
      dav[v] = _mm256_fmadd_ps(dlv, q, dav[v]);
      const __m256 bd = _mm256_mul_ps(_mm256_loadu_ps(B + o), dhn);
      bsum = _mm256_add_ps(bsum, bd);
      gsum = _mm256_fmadd_ps(_mm256_loadu_ps(A + 8 * v), q, _mm256_fmadd_ps(uv, bd, gsum));
      dhv[v] = _mm256_mul_ps(dhn, at);
    }
    const float sb = hsum8(bsum), gg = hsum8(gsum);
    sB[t] = first ? sb : sB[t] + sb;
    g[t] = first ? gg : g[t] + gg;
  }
  for (int v = 0; v < V; ++v) {
    _mm256_storeu_ps(dh + 8 * v, dhv[v]);
    _mm256_storeu_ps(dA + 8 * v, dav[v]);
  }
}

// Runs pass<V>(offset, first) over the states: passes of kScanVectors vectors,
// then one of 2 (np is a multiple of 16).
template <typename Pass>
inline void by_passes(int64_t np, Pass&& pass) {
  for (int64_t n0 = 0; n0 < np; n0 += kScanVectors * 8) {
    if (np - n0 >= kScanVectors * 8) pass(std::integral_constant<int, kScanVectors>{}, n0, n0 == 0);
    else pass(std::integral_constant<int, 2>{}, n0, n0 == 0);
  }
}

void scan(int64_t len, int64_t np, const float* dl, const float* u, const float* A, const float* B, const float* C,
          float D, float* h, float* y) {
  by_passes(np, [&](auto V, int64_t n0, bool first) {
    scan_pass<decltype(V)::value>(len, np, dl, u, A + n0, B + n0, C + n0, D, h + n0, y, first);
  });
}

void scan_states(int64_t len, int64_t np, const float* dl, const float* u, const float* A, const float* B, float* a,
                 float* H) {
  by_passes(np, [&](auto V, int64_t n0, bool) {
    states_pass<decltype(V)::value>(len, np, dl, u, A + n0, B + n0, a + n0, H + n0);
  });
}

void scan_bwd(int64_t len, int64_t np, const float* dl, const float* u, const float* dy, const float* A,
              const float* a, const float* B, const float* C, const float* H, float* dB, float* dC, float* dh,
              float* dA, float* sB, float* g) {
  by_passes(np, [&](auto V, int64_t n0, bool first) {
    bwd_pass<decltype(V)::value>(len, np, dl, u, dy, A + n0, a + n0, B + n0, C + n0, H + n0, dB + n0, dC + n0,
                                 dh + n0, dA + n0, sB, g, first);
  });
}

}  // namespace

#pragma GCC diagnostic pop
#pragma GCC pop_options

const FloatKernels* avx2_kernels() {
  // The transpose is not hot enough to need its own AVX2 version.
  static const FloatKernels k{"avx2", &gemm,        &vexp,     &vsoftplus, &generic_transpose,
                              &scan,  &scan_states, &scan_bwd, &ssd_update};
  __builtin_cpu_init();
  const bool ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return ok ? &k : nullptr;
}
#else
const FloatKernels* avx2_kernels() { return nullptr; }
#endif

}  // namespace mambamt::kernels::cpu
