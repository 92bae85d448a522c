// AVX-512 micro-kernels (see cpu/simd.h). Every function here is compiled for
// AVX-512F/VL/DQ/BW + FMA through the target pragma and called only after a CPU
// check, so the rest of the binary keeps the baseline instruction set. Nothing
// here instantiates templates from other headers (their copies could otherwise
// be emitted with AVX-512 instructions and picked by the linker elsewhere).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "kernels/cpu/simd.h"
#include "kernels/cpu/ssd_update_avx512.h"

#if defined(__GNUC__) && defined(__x86_64__)
#define MAMBAMT_HAVE_AVX512_KERNELS 1
#endif

namespace mambamt::kernels::cpu {

#ifdef MAMBAMT_HAVE_AVX512_KERNELS
#pragma GCC push_options
// GCC 12 warns about the deliberately undefined upper lanes inside its own intrinsics.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC target("avx512f,avx512vl,avx512dq,avx512bw,avx2,fma")

namespace {

// Register block: MR rows of C by NV vectors of 16 floats, all K products
// accumulated in registers, then merged into C once.
template <int MR, int NV>
void micro(int64_t K, const float* A, int64_t a_rs, int64_t a_cs, const float* Bm, int64_t ldb,
           float* C, int64_t ldc, float beta) {
  __m512 acc[MR][NV];
#pragma GCC unroll 32
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int64_t k = 0; k < K; ++k) {
    const float* b = Bm + k * ldb;
    const float* a = A + k * a_cs;
    __m512 bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bv[v] = _mm512_loadu_ps(b + 16 * v);
#pragma GCC unroll 32
    for (int r = 0; r < MR; ++r) {
      const __m512 ar = _mm512_set1_ps(a[r * a_rs]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(ar, bv[v], acc[r][v]);
    }
  }
  const __m512 vb = _mm512_set1_ps(beta);
#pragma GCC unroll 32
  for (int r = 0; r < MR; ++r) {
    float* c = C + r * ldc;
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      __m512 out = acc[r][v];
      if (beta == 1.0f) {
        out = _mm512_add_ps(out, _mm512_loadu_ps(c + 16 * v));
      } else if (beta != 0.0f) {
        out = _mm512_fmadd_ps(vb, _mm512_loadu_ps(c + 16 * v), out);
      }
      _mm512_storeu_ps(c + 16 * v, out);
    }
  }
}

using MicroFn = void (*)(int64_t, const float*, int64_t, int64_t, const float*, int64_t, float*,
                         int64_t, float);

// Rows per block for NV vectors: keeps MR*NV accumulators + NV + 1 within the
// 32 registers.
constexpr int rows_for(int nv) { return nv == 4 ? 6 : nv == 3 ? 8 : nv == 2 ? 12 : 24; }

template <int NV, int... R>
constexpr auto make_row_table(std::integer_sequence<int, R...>) {
  struct T {
    MicroFn f[sizeof...(R)];
  };
  return T{{&micro<R + 1, NV>...}};
}

template <int NV>
MicroFn micro_for(int rows) {
  static constexpr auto table = make_row_table<NV>(std::make_integer_sequence<int, rows_for(NV)>{});
  return table.f[rows - 1];
}

template <int NV>
void gemm_cols(int64_t M, int64_t K, const float* A, int64_t a_rs, int64_t a_cs, const float* Bm,
               int64_t ldb, float* C, int64_t ldc, float beta) {
  constexpr int MR = rows_for(NV);
  int64_t m = 0;
  for (; m + MR <= M; m += MR) micro<MR, NV>(K, A + m * a_rs, a_rs, a_cs, Bm, ldb, C + m * ldc, ldc, beta);
  if (m < M) micro_for<NV>(static_cast<int>(M - m))(K, A + m * a_rs, a_rs, a_cs, Bm, ldb, C + m * ldc, ldc, beta);
}

void gemm(int64_t M, int64_t K, int64_t W, const float* A, int64_t a_rs, int64_t a_cs,
          const float* Bm, int64_t ldb, float* C, int64_t ldc, float beta) {
  int64_t nv = W / 16, w = 0;
  // Column blocks of 4 vectors; a remainder of 1..3 vectors gets a taller block.
  for (; nv >= 4; nv -= 4, w += 64) gemm_cols<4>(M, K, A, a_rs, a_cs, Bm + w, ldb, C + w, ldc, beta);
  if (nv == 3) gemm_cols<3>(M, K, A, a_rs, a_cs, Bm + w, ldb, C + w, ldc, beta);
  if (nv == 2) gemm_cols<2>(M, K, A, a_rs, a_cs, Bm + w, ldb, C + w, ldc, beta);
  if (nv == 1) gemm_cols<1>(M, K, A, a_rs, a_cs, Bm + w, ldb, C + w, ldc, beta);
}

// exp: 2^n * p(r), n = round(x / ln 2), r = x - n ln 2 (Cephes expf polynomial).
inline __m512 exp16(__m512 x) {
  const __m512 hi = _mm512_set1_ps(88.3762626647949f), lo = _mm512_set1_ps(-87.3365478515625f);
  const __mmask16 tiny = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
  x = _mm512_min_ps(_mm512_max_ps(x, lo), hi);
  __m512 fx = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(fx, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(fx, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500E-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507E-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073E-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894E-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459E-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201E-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  // fx + 127 is in [1, 254] after the clamp: a normal float's exponent.
  __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(fx), _mm512_set1_epi32(127)), 23);
  __m512 out = _mm512_mul_ps(p, _mm512_castsi512_ps(e));
  return _mm512_mask_blend_ps(tiny, out, _mm512_setzero_ps());
}

void vexp(const float* in, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, exp16(_mm512_loadu_ps(in + i)));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(out + i, m, exp16(_mm512_maskz_loadu_ps(m, in + i)));
  }
}

// Natural log of x > 0 (Cephes logf): x = m 2^e with m in [sqrt(.5), sqrt(2)).
inline __m512 log16(__m512 x) {
  const __m512 one = _mm512_set1_ps(1.0f);
  __m512i i = _mm512_castps_si512(x);
  __m512 e = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_srli_epi32(i, 23), _mm512_set1_epi32(127)));
  __m512 m = _mm512_castsi512_ps(
      _mm512_or_si512(_mm512_and_si512(i, _mm512_set1_epi32(0x007fffff)), _mm512_set1_epi32(0x3f800000)));
  // m in [1, 2): fold to [sqrt(.5), sqrt(2)).
  const __mmask16 big = _mm512_cmp_ps_mask(m, _mm512_set1_ps(1.41421356237f), _CMP_GT_OQ);
  m = _mm512_mask_mul_ps(m, big, m, _mm512_set1_ps(0.5f));
  e = _mm512_mask_add_ps(e, big, e, one);
  const __m512 f = _mm512_sub_ps(m, one);
  const __m512 z = _mm512_mul_ps(f, f);
  __m512 y = _mm512_set1_ps(7.0376836292E-2f);
  y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(-1.1514610310E-1f));
  y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(1.1676998740E-1f));
  y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(-1.2420140846E-1f));
  y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(1.4249322787E-1f));
  y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(-1.6668057665E-1f));
  y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(2.0000714765E-1f));
  y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(-2.4999993993E-1f));
  y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(3.3333331174E-1f));
  y = _mm512_mul_ps(_mm512_mul_ps(y, f), z);
  y = _mm512_fmadd_ps(e, _mm512_set1_ps(-2.12194440e-4f), y);
  y = _mm512_fnmadd_ps(z, _mm512_set1_ps(0.5f), y);
  __m512 r = _mm512_add_ps(f, y);
  return _mm512_fmadd_ps(e, _mm512_set1_ps(0.693359375f), r);
}

// softplus(v) = log1p(e^v) as log(u) * e^v / (u - 1), u = 1 + e^v (exact where
// u rounds to 1); sigmoid = e^v / u; both pass v through above 20.
inline void softplus16(__m512 v, __m512* out, __m512* sig) {
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 ev = exp16(v);
  const __m512 u = _mm512_add_ps(one, ev);
  const __m512 um1 = _mm512_sub_ps(u, one);
  const __mmask16 exact = _mm512_cmp_ps_mask(um1, _mm512_setzero_ps(), _CMP_EQ_OQ);
  __m512 sp = _mm512_div_ps(_mm512_mul_ps(log16(u), ev), _mm512_mask_blend_ps(exact, um1, one));
  sp = _mm512_mask_blend_ps(exact, sp, ev);
  const __mmask16 above = _mm512_cmp_ps_mask(v, _mm512_set1_ps(20.0f), _CMP_GT_OQ);
  *out = _mm512_mask_blend_ps(above, sp, v);
  *sig = _mm512_mask_blend_ps(above, _mm512_div_ps(ev, u), one);
}

void vsoftplus(const float* in, float* out, float* sig, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << (n - i)) - 1);
    __m512 o, s;
    softplus16(_mm512_maskz_loadu_ps(m, in + i), &o, &s);
    _mm512_mask_storeu_ps(out + i, m, o);
    if (sig) _mm512_mask_storeu_ps(sig + i, m, s);
  }
}

// One 16x16 tile: rows of 4x4 blocks interleaved (unpack), then 128-bit
// lanes regrouped (shuffle_f32x4) twice.
inline void transpose16x16(const float* src, int64_t lds, float* dst, int64_t ldd) {
  __m512 r[16], t[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + i * lds);
#pragma GCC unroll 8
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  // u[4g + j]: column j (mod 4) of rows 4g..4g+3, one 128-bit lane per column group.
#pragma GCC unroll 4
  for (int g = 0; g < 4; ++g) {
    const __m512d a = _mm512_castps_pd(t[4 * g]), b = _mm512_castps_pd(t[4 * g + 1]);
    const __m512d c = _mm512_castps_pd(t[4 * g + 2]), e = _mm512_castps_pd(t[4 * g + 3]);
    r[4 * g] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    r[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    r[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, e));
    r[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, e));
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0x88);
    t[i + 4] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0xdd);
    t[i + 8] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0x88);
    t[i + 12] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0xdd);
  }
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) {
    _mm512_storeu_ps(dst + j * ldd, _mm512_shuffle_f32x4(t[j], t[j + 8], 0x88));
    _mm512_storeu_ps(dst + (j + 8) * ldd, _mm512_shuffle_f32x4(t[j], t[j + 8], 0xdd));
  }
}

void transpose(int64_t rows, int64_t cols, const float* src, int64_t lds, float* dst, int64_t ldd) {
  for (int64_t r = 0; r < rows; r += 16)
    for (int64_t c = 0; c < cols; c += 16) transpose16x16(src + r * lds + c, lds, dst + c * ldd + r, ldd);
}

// The selective scan's state in V registers (V x 16 states) across positions,
// the decays' exp computed in place. Wider states are run V x 16 at a time
// (the recurrence of each state is independent; only the sums over states,
// y, sB and g, gather the passes: the first pass writes them, later ones add).
constexpr int64_t kScanVectors = 4;

template <int V>
void scan_pass(int64_t len, int64_t np, const float* dl, const float* u, const float* A, const float* B,
               const float* C, float D, float* h, float* y, bool first) {
  __m512 av[V], hv[V];
  for (int v = 0; v < V; ++v) av[v] = _mm512_loadu_ps(A + 16 * v), hv[v] = _mm512_loadu_ps(h + 16 * v);
  for (int64_t t = 0; t < len; ++t) {
    const __m512 dlv = _mm512_set1_ps(dl[t]), duv = _mm512_set1_ps(dl[t] * u[t]);
    __m512 acc = _mm512_setzero_ps();
    for (int v = 0; v < V; ++v) {
      const __m512 da = exp16(_mm512_mul_ps(dlv, av[v]));
      hv[v] = _mm512_fmadd_ps(da, hv[v], _mm512_mul_ps(duv, _mm512_loadu_ps(B + t * np + 16 * v)));
      acc = _mm512_fmadd_ps(hv[v], _mm512_loadu_ps(C + t * np + 16 * v), acc);
    }
    const float s = _mm512_reduce_add_ps(acc);
    y[t] = first ? s + D * u[t] : y[t] + s;
  }
  for (int v = 0; v < V; ++v) _mm512_storeu_ps(h + 16 * v, hv[v]);
}

template <int V>
void states_pass(int64_t len, int64_t np, const float* dl, const float* u, const float* A, const float* B, float* a,
                 float* H) {
  __m512 av[V], hv[V];
  for (int v = 0; v < V; ++v) av[v] = _mm512_loadu_ps(A + 16 * v), hv[v] = _mm512_loadu_ps(H + 16 * v);
  for (int64_t t = 0; t < len; ++t) {
    const __m512 dlv = _mm512_set1_ps(dl[t]), duv = _mm512_set1_ps(dl[t] * u[t]);
    for (int v = 0; v < V; ++v) {
      const __m512 da = exp16(_mm512_mul_ps(dlv, av[v]));
      _mm512_storeu_ps(a + t * np + 16 * v, da);
      hv[v] = _mm512_fmadd_ps(da, hv[v], _mm512_mul_ps(duv, _mm512_loadu_ps(B + t * np + 16 * v)));
      _mm512_storeu_ps(H + (t + 1) * np + 16 * v, hv[v]);
    }
  }
}

// The chain from one position to the next is dh alone (an FMA and a multiply);
// the two sums per position are off it, so they overlap with the next position.
template <int V>
void bwd_pass(int64_t len, int64_t np, const float* dl, const float* u, const float* dy, const float* A,
              const float* a, const float* B, const float* C, const float* H, float* dB, float* dC, float* dh,
              float* dA, float* sB, float* g, bool first) {
  __m512 av[V], dhv[V], dav[V];
  for (int v = 0; v < V; ++v) {
    av[v] = _mm512_loadu_ps(A + 16 * v);
    dhv[v] = _mm512_loadu_ps(dh + 16 * v);
    dav[v] = _mm512_loadu_ps(dA + 16 * v);
  }
  for (int64_t t = len - 1; t >= 0; --t) {
    const __m512 dyv = _mm512_set1_ps(dy[t]), dlv = _mm512_set1_ps(dl[t]), uv = _mm512_set1_ps(u[t]);
    const __m512 dluv = _mm512_set1_ps(dl[t] * u[t]);
    __m512 bsum = _mm512_setzero_ps(), gsum = _mm512_setzero_ps();
    for (int v = 0; v < V; ++v) {
      const int64_t o = t * np + 16 * v;
      const __m512 at = _mm512_loadu_ps(a + o);
      const __m512 dhn = _mm512_fmadd_ps(dyv, _mm512_loadu_ps(C + o), dhv[v]);
      _mm512_storeu_ps(dC + o, _mm512_fmadd_ps(dyv, _mm512_loadu_ps(H + np + o), _mm512_loadu_ps(dC + o)));
      _mm512_storeu_ps(dB + o, _mm512_fmadd_ps(dluv, dhn, _mm512_loadu_ps(dB + o)));
      const __m512 q = _mm512_mul_ps(_mm512_mul_ps(dhn, _mm512_loadu_ps(H + o)), at);
      dav[v] = _mm512_fmadd_ps(dlv, q, dav[v]);
      const __m512 bd = _mm512_mul_ps(_mm512_loadu_ps(B + o), dhn);
      bsum = _mm512_add_ps(bsum, bd);
      gsum = _mm512_fmadd_ps(av[v], q, _mm512_fmadd_ps(uv, bd, gsum));
      dhv[v] = _mm512_mul_ps(dhn, at);
    }
    const float sb = _mm512_reduce_add_ps(bsum), gg = _mm512_reduce_add_ps(gsum);
    sB[t] = first ? sb : sB[t] + sb;
    g[t] = first ? gg : g[t] + gg;
  }
  for (int v = 0; v < V; ++v) {
    _mm512_storeu_ps(dh + 16 * v, dhv[v]);
    _mm512_storeu_ps(dA + 16 * v, dav[v]);
  }
}

// Runs pass<V>(offset, first) over the states in passes of up to kScanVectors
// vectors.
template <typename Pass>
inline void by_passes(int64_t np, Pass&& pass) {
  for (int64_t n0 = 0; n0 < np; n0 += kScanVectors * 16) {
    const int64_t vectors = std::min<int64_t>(kScanVectors, (np - n0) / 16);
    const bool first = n0 == 0;
    switch (vectors) {
      case 1: pass(std::integral_constant<int, 1>{}, n0, first); break;
      case 2: pass(std::integral_constant<int, 2>{}, n0, first); break;
      case 3: pass(std::integral_constant<int, 3>{}, n0, first); break;
      default: pass(std::integral_constant<int, 4>{}, n0, first); break;
    }
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

// cpu/simd.h: ssd_update (cpu/ssd_update_avx512.h, which the models' fused
// Mamba-2 decode step inlines).
void ssd_update(int64_t P, int64_t np, float decay, float dt, float D, const float* x, const float* B, const float* C,
                float* h, float* y) {
  ssd_update_avx512(P, np, decay, dt, D, x, B, C, h, y);
}

}  // namespace

#pragma GCC diagnostic pop
#pragma GCC pop_options

const FloatKernels* avx512_kernels() {
  static const FloatKernels k{"avx512", &gemm,        &vexp,     &vsoftplus, &transpose,
                              &scan,    &scan_states, &scan_bwd, &ssd_update};
  __builtin_cpu_init();
  const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                  __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw") &&
                  __builtin_cpu_supports("fma");
  return ok ? &k : nullptr;
}
#else
const FloatKernels* avx512_kernels() { return nullptr; }
#endif

}  // namespace mambamt::kernels::cpu
