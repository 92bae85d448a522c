#include "models/detail/decode_cpu.h"

#include <ATen/Parallel.h>
#if defined(__x86_64__) || defined(__i386__)
#define MAMBAMT_DECODE_X86 1
#include <immintrin.h>
#endif

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <limits>
#include <initializer_list>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kernels/cpu/common.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/ssd_update_avx512.h"

namespace mambamt::models::detail {
namespace {

// beam_topk with LibTorch's ops.
std::tuple<torch::Tensor, torch::Tensor> beam_topk_torch(const torch::Tensor& lp, const std::vector<double>& scores,
                                                         int64_t k, int64_t n) {
  const int64_t a = lp.size(0) / k, v = lp.size(1);
  torch::Tensor sc = torch::tensor(scores, torch::kDouble).to(lp.device()).view({a * k, 1});
  const torch::Tensor sums = (lp.to(torch::kDouble) + sc).reshape({a, k * v});
  if (lp.is_cpu()) {
    // Rows holding NaN, and layouts and dtypes beam_topk does not scan: a
    // full sort would take 20x topk's time here.
    auto top = sums.topk(n, 1);
    return {std::get<0>(top), std::get<1>(top)};
  }
  // On a GPU a stable sort, not topk (whose order among ties is the
  // device's): the lower flat index first among equal sums, as on the CPU
  // and as greedy search's max picks (the first maximal index).
  auto sorted = sums.sort(/*stable=*/true, /*dim=*/1, /*descending=*/true);
  return {std::get<0>(sorted).narrow(1, 0, n).to(torch::kCPU), std::get<1>(sorted).narrow(1, 0, n).to(torch::kCPU)};
}

// The m largest of x[0, n) (m <= n) with their indices, largest first (the
// lower index first among equal values), into val and idx; false if x holds
// a NaN (then val and idx are not usable).
using RowTop = bool (*)(const float* x, int64_t n, int64_t m, float* val, int64_t* idx);

// The sorted list of such a scan: (v, j) goes in if the list is not full or
// v beats its last value, which then drops out. Inlined into each scan.
struct TopList {
  float* val;
  int64_t* idx;
  int64_t m, filled = 0;
  bool full() const { return filled == m; }
  MAMBAMT_INLINE void insert(float v, int64_t j) {
    if (filled == m && !(v > val[m - 1])) return;
    int64_t pos = std::min(filled, m - 1);
    while (pos > 0 && v > val[pos - 1]) {
      val[pos] = val[pos - 1], idx[pos] = idx[pos - 1];
      --pos;
    }
    val[pos] = v, idx[pos] = j;
    filled = std::min(filled + 1, m);
  }
};

bool row_top_scalar(const float* x, int64_t n, int64_t m, float* val, int64_t* idx) {
  TopList top{val, idx, m};
  for (int64_t j = 0; j < n; ++j) {
    if (std::isnan(x[j])) return false;
    top.insert(x[j], j);
  }
  return true;
}

void rms_norm_row_scalar(const float* x, const float* w, float* out, int64_t dim, float eps) {
  float ss = 0.f;
  for (int64_t j = 0; j < dim; ++j) ss += x[j] * x[j];
  const float scale = 1.0f / std::sqrt(ss / static_cast<float>(dim) + eps);
  for (int64_t j = 0; j < dim; ++j) out[j] = x[j] * scale * w[j];
}

}  // namespace

torch::Tensor rotate_append(const torch::Tensor& qkv, const torch::Tensor& cos, const torch::Tensor& sin,
                            const torch::Tensor& k_cache, const torch::Tensor& v_cache, const torch::Tensor& valid,
                            int64_t col) {
  if (torch::GradMode::is_enabled() || k_cache.dim() != 4) return {};
  const int64_t b = k_cache.size(0), h = k_cache.size(1), cap = k_cache.size(2), dh = k_cache.size(3), half = dh / 2;
  auto cpu_float = [](const torch::Tensor& t) {
    return t.defined() && t.is_cpu() && t.scalar_type() == torch::kFloat && t.is_contiguous();
  };
  if (!cpu_float(qkv) || !cpu_float(cos) || !cpu_float(sin) || !cpu_float(k_cache) || !cpu_float(v_cache) ||
      !valid.is_cpu() || valid.scalar_type() != torch::kBool || !valid.is_contiguous() || dh % 2 != 0 ||
      qkv.dim() != 2 || qkv.size(0) != b || qkv.size(1) != 3 * h * dh || cos.numel() != b * half ||
      sin.numel() != b * half || v_cache.sizes() != k_cache.sizes() || valid.dim() != 2 || valid.size(0) != b ||
      valid.size(1) != cap || col < 0 || col >= cap)
    return {};
  torch::Tensor q = torch::empty({b, h, dh}, qkv.options());
  const float *in = qkv.data_ptr<float>(), *cs = cos.data_ptr<float>(), *sn = sin.data_ptr<float>();
  float *qp = q.data_ptr<float>(), *kp = k_cache.data_ptr<float>(), *vp = v_cache.data_ptr<float>();
  bool* vd = valid.data_ptr<bool>();
  // x1 * cos - x2 * sin, x1 * sin + x2 * cos on the two halves of a head.
  auto rotate = [half](const float* x, const float* c, const float* s, float* out) {
    for (int64_t i = 0; i < half; ++i) {
      out[i] = x[i] * c[i] - x[half + i] * s[i];
      out[half + i] = x[i] * s[i] + x[half + i] * c[i];
    }
  };
  for (int64_t r = 0; r < b; ++r) {
    const float *row = in + r * 3 * h * dh, *c = cs + r * half, *s = sn + r * half;
    for (int64_t j = 0; j < h; ++j) {
      const int64_t slot = ((r * h + j) * cap + col) * dh;
      rotate(row + j * dh, c, s, qp + (r * h + j) * dh);
      rotate(row + (h + j) * dh, c, s, kp + slot);
      std::copy_n(row + (2 * h + j) * dh, dh, vp + slot);
    }
    vd[r * cap + col] = true;
  }
  return q;
}

#ifdef MAMBAMT_DECODE_X86
namespace {

// The instruction set of the decode paths below: that of the kernels' float
// micro-kernel set (kernels::cpu::isa_level(); MAMBAMT_CPU_KERNELS forces
// it): the *_512 loops with the AVX-512 set, the *_256 ones with the AVX2
// set, LibTorch's ops with the portable one.
bool has_avx512f() { return kernels::cpu::isa_level() == 2; }
bool has_avx2() { return kernels::cpu::isa_level() >= 1; }

// ------------------------------------------------------------------ attention (AVX2 + FMA)

// The sum of v's 8 lanes.
__attribute__((target("avx2,fma"))) inline float hsum_256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_hadd_ps(s, s);
  s = _mm_hadd_ps(s, s);
  return _mm_cvtss_f32(s);
}

// The largest of v's 8 lanes.
__attribute__((target("avx2,fma"))) inline float hmax_256(__m256 v) {
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  h = _mm_max_ss(h, _mm_movehdup_ps(h));
  return _mm_cvtss_f32(h);
}

__attribute__((target("avx2,fma"))) float dot(const float* a, const float* b, int64_t d) {
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= d; i += 16) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
  }
  for (; i + 8 <= d; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
  float out = hsum_256(_mm256_add_ps(s0, s1));
  for (; i < d; ++i) out += a[i] * b[i];
  return out;
}

// Lanes [0, m) of a vector of 8 set (m in 1..8): the mask of
// _mm256_maskload_ps, which reads nothing of the lanes left out.
__attribute__((target("avx2,fma"))) inline __m256i lanes_256(int64_t m) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(m)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// Scores of heads [begin, end) of (B*H): s[j] = q . k[j] * scale, or the lowest
// float at an invalid column (what models::attend's masked_fill puts there).
// Four columns at a time: four dot products over the head dim's vectors of 8
// (the last one loaded under a mask, so no column needs a scalar tail), then
// one horizontal sum for the four. An invalid column's score is computed and
// replaced (its K lies inside the first n columns, so it is readable).
__attribute__((target("avx2,fma"))) void score_heads_256(const float* q, const float* k, const bool* valid, float* s,
                                                          int64_t begin, int64_t end, int64_t heads, int64_t cap,
                                                          int64_t n, int64_t dh, float scale) {
  const float lowest = std::numeric_limits<float>::lowest();
  const int64_t full = dh / 8, rest = dh - 8 * full;
  const __m256i tail = lanes_256(rest > 0 ? rest : 8);
  const __m128 sv = _mm_set1_ps(scale);
  for (int64_t bh = begin; bh < end; ++bh) {
    const float* qi = q + bh * dh;
    const float* ki = k + bh * cap * dh;
    const bool* vi = valid + (bh / heads) * cap;
    float* si = s + bh * n;
    const __m256 qt = rest ? _mm256_maskload_ps(qi + 8 * full, tail) : _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 4 <= n; j += 4) {
      const float* kj = ki + j * dh;
      __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
      for (int64_t c = 0; c < full; ++c) {
        const __m256 qc = _mm256_loadu_ps(qi + 8 * c);
        a0 = _mm256_fmadd_ps(qc, _mm256_loadu_ps(kj + 8 * c), a0);
        a1 = _mm256_fmadd_ps(qc, _mm256_loadu_ps(kj + dh + 8 * c), a1);
        a2 = _mm256_fmadd_ps(qc, _mm256_loadu_ps(kj + 2 * dh + 8 * c), a2);
        a3 = _mm256_fmadd_ps(qc, _mm256_loadu_ps(kj + 3 * dh + 8 * c), a3);
      }
      if (rest) {
        const float* kt = kj + 8 * full;
        a0 = _mm256_fmadd_ps(qt, _mm256_maskload_ps(kt, tail), a0);
        a1 = _mm256_fmadd_ps(qt, _mm256_maskload_ps(kt + dh, tail), a1);
        a2 = _mm256_fmadd_ps(qt, _mm256_maskload_ps(kt + 2 * dh, tail), a2);
        a3 = _mm256_fmadd_ps(qt, _mm256_maskload_ps(kt + 3 * dh, tail), a3);
      }
      // [a0 a1 a2 a3] of each 128-bit half, then the two halves added.
      const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
      const __m128 sums = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
      _mm_storeu_ps(si + j, _mm_mul_ps(sums, sv));
      for (int64_t c = j; c < j + 4; ++c)
        if (!vi[c]) si[c] = lowest;
    }
    for (; j < n; ++j) {
      if (!vi[j]) {
        si[j] = lowest;
        continue;
      }
      const float* kj = ki + j * dh;
      __m256 a = _mm256_setzero_ps();
      for (int64_t c = 0; c < full; ++c)
        a = _mm256_fmadd_ps(_mm256_loadu_ps(qi + 8 * c), _mm256_loadu_ps(kj + 8 * c), a);
      if (rest) a = _mm256_fmadd_ps(qt, _mm256_maskload_ps(kj + 8 * full, tail), a);
      si[j] = hsum_256(a) * scale;
    }
  }
}

// One head's output over C vectors of its head dim (from `off`, the last one
// masked to `last` lanes): y = sum_j p[j] v[j], the sums held in registers;
// columns of weight 0 (masked) are not read.
template <int C>
__attribute__((target("avx2,fma"))) void value_chunk_256(const float* p, const float* v, float* y, int64_t n,
                                                          int64_t dh, int64_t off, int64_t last) {
  const __m256i tail = lanes_256(last);
  __m256 acc[C];
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) acc[c] = _mm256_setzero_ps();
  for (int64_t j = 0; j < n; ++j) {
    if (p[j] == 0.0f) continue;
    const __m256 pj = _mm256_set1_ps(p[j]);
    const float* vj = v + j * dh + off;
#pragma GCC unroll 8
    for (int c = 0; c < C - 1; ++c) acc[c] = _mm256_fmadd_ps(pj, _mm256_loadu_ps(vj + 8 * c), acc[c]);
    acc[C - 1] = _mm256_fmadd_ps(pj, _mm256_maskload_ps(vj + 8 * (C - 1), tail), acc[C - 1]);
  }
#pragma GCC unroll 8
  for (int c = 0; c < C - 1; ++c) _mm256_storeu_ps(y + off + 8 * c, acc[c]);
  _mm256_maskstore_ps(y + off + 8 * (C - 1), tail, acc[C - 1]);
}

// y[bh] = sum_j p[bh][j] v[bh][j] for heads [begin, end): the head dim in
// chunks of up to 8 vectors (64 values), each a pass over the head's weights
// with its sums in registers.
__attribute__((target("avx2,fma"))) void value_heads_256(const float* p, const float* v, float* y, int64_t begin,
                                                          int64_t end, int64_t cap, int64_t n, int64_t dh) {
  using Chunk = void (*)(const float*, const float*, float*, int64_t, int64_t, int64_t, int64_t);
  static constexpr Chunk chunks[8] = {value_chunk_256<1>, value_chunk_256<2>, value_chunk_256<3>,
                                      value_chunk_256<4>, value_chunk_256<5>, value_chunk_256<6>,
                                      value_chunk_256<7>, value_chunk_256<8>};
  for (int64_t bh = begin; bh < end; ++bh)
    for (int64_t off = 0; off < dh; off += 64) {
      const int64_t len = std::min<int64_t>(64, dh - off), vectors = (len + 7) / 8;
      chunks[vectors - 1](p + bh * n, v + bh * cap * dh, y + bh * dh, n, dh, off, len - 8 * (vectors - 1));
    }
}

// Softmax of the score rows of heads [begin, end) (n columns each), in place,
// with the kernels' vectorised exp and AVX2 loops around it (the tails
// scalar). Masked columns hold the lowest float, so they get weight 0 beside
// a valid column, and a row without one gets uniform weights (as
// torch::softmax after models::attend's masked_fill).
__attribute__((target("avx2,fma"))) void softmax_rows_256(float* s, int64_t begin, int64_t end, int64_t n) {
  const auto exp = kernels::cpu::float_kernels().exp;
  const int64_t full = n / 8 * 8;
  for (int64_t bh = begin; bh < end; ++bh) {
    float* si = s + bh * n;
    __m256 mv = _mm256_set1_ps(std::numeric_limits<float>::lowest());
    for (int64_t j = 0; j < full; j += 8) mv = _mm256_max_ps(mv, _mm256_loadu_ps(si + j));
    float m = hmax_256(mv);
    for (int64_t j = full; j < n; ++j) m = std::max(m, si[j]);
    const __m256 mb = _mm256_set1_ps(m);
    for (int64_t j = 0; j < full; j += 8) _mm256_storeu_ps(si + j, _mm256_sub_ps(_mm256_loadu_ps(si + j), mb));
    for (int64_t j = full; j < n; ++j) si[j] -= m;
    exp(si, si, n);
    __m256 sv = _mm256_setzero_ps();
    for (int64_t j = 0; j < full; j += 8) sv = _mm256_add_ps(sv, _mm256_loadu_ps(si + j));
    float sum = hsum_256(sv);
    for (int64_t j = full; j < n; ++j) sum += si[j];
    const float inv = 1.0f / sum;
    const __m256 ib = _mm256_set1_ps(inv);
    for (int64_t j = 0; j < full; j += 8) _mm256_storeu_ps(si + j, _mm256_mul_ps(_mm256_loadu_ps(si + j), ib));
    for (int64_t j = full; j < n; ++j) si[j] *= inv;
  }
}

// ------------------------------------------------------------------ attention (AVX-512F, head dim <= 128)

// GCC 12 warns about the deliberately undefined lanes inside its own AVX-512
// intrinsics (as in kernels/cpu/simd_avx512.cpp).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

// The same two passes with a head's query, and its output, held in C vectors
// of 16 (the last one masked to the head dim), so no column needs a scalar
// tail or a round trip of the output through memory. Per-column AVX2 loops
// (a dot product and a horizontal sum per column, the output added to in
// memory) ran the hybrid's head dim 44 at 6.5-8.2 GB/s from the L2 cache on
// one core, head dim 64 at 10.6-14.2 GB/s.
template <int C>
__attribute__((target("avx512f"))) void score_heads_512(const float* q, const float* k, const bool* valid, float* s,
                                                        int64_t begin, int64_t end, int64_t heads, int64_t cap,
                                                        int64_t n, int64_t dh, float scale) {
  const float lowest = std::numeric_limits<float>::lowest();
  const __mmask16 tail = static_cast<__mmask16>((1u << (dh - 16 * (C - 1))) - 1);
  for (int64_t bh = begin; bh < end; ++bh) {
    __m512 qv[C];
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) qv[c] = _mm512_maskz_loadu_ps(c == C - 1 ? tail : 0xFFFF, q + bh * dh + 16 * c);
    const float* ki = k + bh * cap * dh;
    const bool* vi = valid + (bh / heads) * cap;
    float* si = s + bh * n;
    for (int64_t j = 0; j < n; ++j) {
      if (!vi[j]) {
        si[j] = lowest;
        continue;
      }
      const float* kj = ki + j * dh;
      __m512 acc = _mm512_mul_ps(qv[0], _mm512_maskz_loadu_ps(C == 1 ? tail : 0xFFFF, kj));
#pragma GCC unroll 8
      for (int c = 1; c < C; ++c)
        acc = _mm512_fmadd_ps(qv[c], _mm512_maskz_loadu_ps(c == C - 1 ? tail : 0xFFFF, kj + 16 * c), acc);
      si[j] = _mm512_reduce_add_ps(acc) * scale;
    }
  }
}

template <int C>
__attribute__((target("avx512f"))) void value_heads_512(const float* p, const float* v, float* y, int64_t begin,
                                                        int64_t end, int64_t cap, int64_t n, int64_t dh) {
  const __mmask16 tail = static_cast<__mmask16>((1u << (dh - 16 * (C - 1))) - 1);
  for (int64_t bh = begin; bh < end; ++bh) {
    const float* pi = p + bh * n;
    const float* vi = v + bh * cap * dh;
    __m512 acc[C];
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) acc[c] = _mm512_setzero_ps();
    for (int64_t j = 0; j < n; ++j) {
      if (pi[j] == 0.0f) continue;
      const __m512 pj = _mm512_set1_ps(pi[j]);
      const float* vj = vi + j * dh;
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c)
        acc[c] = _mm512_fmadd_ps(pj, _mm512_maskz_loadu_ps(c == C - 1 ? tail : 0xFFFF, vj + 16 * c), acc[c]);
    }
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) _mm512_mask_storeu_ps(y + bh * dh + 16 * c, c == C - 1 ? tail : 0xFFFF, acc[c]);
  }
}

// softmax_rows_256 with AVX-512 loops around the exp, masked tails.
__attribute__((target("avx512f"))) void softmax_rows_512(float* s, int64_t begin, int64_t end, int64_t n) {
  const auto exp = kernels::cpu::float_kernels().exp;
  const int64_t full = n / 16 * 16;
  const __mmask16 tail = static_cast<__mmask16>((1u << (n - full)) - 1);
  for (int64_t bh = begin; bh < end; ++bh) {
    float* si = s + bh * n;
    __m512 mv = _mm512_set1_ps(std::numeric_limits<float>::lowest());
    for (int64_t j = 0; j < full; j += 16) mv = _mm512_max_ps(mv, _mm512_loadu_ps(si + j));
    if (tail) mv = _mm512_mask_max_ps(mv, tail, mv, _mm512_maskz_loadu_ps(tail, si + full));
    const __m512 m = _mm512_set1_ps(_mm512_reduce_max_ps(mv));
    for (int64_t j = 0; j < full; j += 16) _mm512_storeu_ps(si + j, _mm512_sub_ps(_mm512_loadu_ps(si + j), m));
    if (tail) _mm512_mask_storeu_ps(si + full, tail, _mm512_sub_ps(_mm512_maskz_loadu_ps(tail, si + full), m));
    exp(si, si, n);
    __m512 sv = _mm512_setzero_ps();
    for (int64_t j = 0; j < full; j += 16) sv = _mm512_add_ps(sv, _mm512_loadu_ps(si + j));
    if (tail) sv = _mm512_add_ps(sv, _mm512_maskz_loadu_ps(tail, si + full));
    const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sv));
    for (int64_t j = 0; j < full; j += 16) _mm512_storeu_ps(si + j, _mm512_mul_ps(_mm512_loadu_ps(si + j), inv));
    if (tail) _mm512_mask_storeu_ps(si + full, tail, _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, si + full), inv));
  }
}

// The two AVX-512 passes for one head dim (C = ceil(dh / 16) vectors).
struct AttendPasses {
  void (*score)(const float*, const float*, const bool*, float*, int64_t, int64_t, int64_t, int64_t, int64_t,
                int64_t, float);
  void (*value)(const float*, const float*, float*, int64_t, int64_t, int64_t, int64_t, int64_t);
};

// The AVX-512 passes for this head dim, or null (no AVX-512F, or dh > 128).
const AttendPasses* attend_passes_512(int64_t dh) {
  static const AttendPasses table[8] = {
      {score_heads_512<1>, value_heads_512<1>}, {score_heads_512<2>, value_heads_512<2>},
      {score_heads_512<3>, value_heads_512<3>}, {score_heads_512<4>, value_heads_512<4>},
      {score_heads_512<5>, value_heads_512<5>}, {score_heads_512<6>, value_heads_512<6>},
      {score_heads_512<7>, value_heads_512<7>}, {score_heads_512<8>, value_heads_512<8>}};
  if (!has_avx512f() || dh < 1 || dh > 128) return nullptr;
  return &table[(dh + 15) / 16 - 1];
}

// ------------------------------------------------------------------ small-batch linear (AVX-512F, AVX2)

// W is read as panels of kPanel rows, packed once per weight (packed_weight
// below): panel p holds W[p * kPanel + c][j] at [p][j][c], rows past N zero.
// A panel streams in order, and each of its columns is one vector of
// outputs, so the kernel broadcasts the batch (one value per row and column)
// against W's vectors, 16 rows in one pass over the panel. Broadcasting W
// against the batch instead (one W value against the 16 rows of a vector)
// needs a load per multiply-add and ran at 4.4-4.8 GB/s from the L2 cache on
// one core. Panels of 48 rows with passes of 8 rows (3 x 8 accumulators, a
// second pass reading the panel from L2) did fewer loads per multiply-add,
// but the pass that streamed the panel from memory did not overlap the
// other: 21 GB/s on 2 threads over a pure-Mamba step's weights against 26
// GB/s for this (measured with `mambamt bench decode`).
constexpr int64_t kPanel = 16;

// Columns ahead of the one being read that the first pass over a panel asks
// the memory for (6 KB; 16 columns, 1 KB, left it 20% slower).
constexpr int64_t kPrefetchColumns = 96;

// Rows [0, R) of x (R, kd) times one panel -> y's columns [n0, n0 + cols):
// R accumulators. `prefetch`: the first pass over a panel requests the line
// kPrefetchColumns ahead (into the next panel near the end; a prefetch past
// the packed copy is a hint that is dropped, never a fault). Later passes
// read the panel (kd x 64 bytes) from L1 or L2.
template <int R>
__attribute__((target("avx512f"))) void panel_rows(const float* pw, const float* x, float* y, int64_t kd, int64_t n,
                                                   int64_t n0, int64_t cols, bool prefetch) {
  __m512 acc[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t j = 0; j < kd; ++j) {
    const float* col = pw + j * kPanel;
    if (prefetch) _mm_prefetch(reinterpret_cast<const char*>(col + kPrefetchColumns * kPanel), _MM_HINT_T0);
    const __m512 w = _mm512_loadu_ps(col);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) acc[r] = _mm512_fmadd_ps(w, _mm512_set1_ps(x[r * kd + j]), acc[r]);
  }
  const __mmask16 mask = static_cast<__mmask16>((1u << cols) - 1);
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(y + r * n + n0, mask, acc[r]);
}

using PanelRowsFn = void (*)(const float*, const float*, float*, int64_t, int64_t, int64_t, int64_t, bool);

template <size_t... I>
constexpr std::array<PanelRowsFn, sizeof...(I)> panel_rows_table(std::index_sequence<I...>) {
  return {panel_rows<static_cast<int>(I) + 1>...};
}

// Panels [p0, p1) for all b rows of x (b, kd), 16 rows per pass.
__attribute__((target("avx512f"))) void linear_panels(const float* pw, const float* x, float* y, int64_t b, int64_t n,
                                                      int64_t kd, int64_t p0, int64_t p1) {
  static constexpr auto rows = panel_rows_table(std::make_index_sequence<16>());
  for (int64_t p = p0; p < p1; ++p) {
    const float* panel = pw + p * kd * kPanel;
    const int64_t n0 = p * kPanel, cols = std::min(kPanel, n - n0);
    for (int64_t r0 = 0; r0 < b; r0 += 16)
      rows[std::min<int64_t>(16, b - r0) - 1](panel, x + r0 * kd, y + r0 * n, kd, n, n0, cols, r0 == 0);
  }
}

// The same with AVX2: a panel's column is two vectors of 8, so a pass takes
// up to 6 rows (12 accumulators, 2 for the column, 1 for the broadcast of the
// 16 registers), and a batch of 16 rows reads each panel three times, the
// later passes from L1 or L2. Each pass asks the memory for its share of the
// next panel (`ahead`: one line every `every` columns, `every` the number of
// passes), so the next panel streams in while all passes over this one
// compute (a task's first panel is left to the hardware prefetcher; a share
// that runs past the packed copy asks for lines that are never read, and a
// prefetch never faults). With only the first pass prefetching (its own
// panel, 96 columns ahead, as the AVX-512 pass), the memory sat idle during
// the passes that read the cache: the 32000 x 352 output projection at batch
// 16 on 2 threads took 4895-5394 us (median 5252) against 3739-5266 us
// (median 4239) now, the two in turns, five rounds.
// Tried and not kept: the roles turned around (x transposed, a vector of 8
// batch rows against a broadcast of W; panels of 6 rows, one pass of 16 rows
// with 2 x 6 accumulators, W streamed once with a prefetch 8 KB ahead). Alone
// it was faster (the output projection at batch 16: 3987-4272 against
// 4918-5851 us, in turns), but in decode steps at batch 16 the measurements
// disagreed, from 8% slower to 6% faster (measured with `mambamt bench decode`).
constexpr int kRows256 = 6;

template <int R>
__attribute__((target("avx2,fma"))) void panel_rows_256(const float* pw, const float* x, float* y, int64_t kd,
                                                        int64_t n, int64_t n0, int64_t cols, const float* ahead,
                                                        int every) {
  __m256 acc[R][2];
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  int countdown = every;
  for (int64_t j = 0; j < kd; ++j) {
    const float* col = pw + j * kPanel;
    if (ahead && --countdown == 0) {
      _mm_prefetch(reinterpret_cast<const char*>(ahead), _MM_HINT_T0);
      ahead += kPanel;
      countdown = every;
    }
    const __m256 w0 = _mm256_loadu_ps(col), w1 = _mm256_loadu_ps(col + 8);
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      const __m256 xv = _mm256_broadcast_ss(x + r * kd + j);
      acc[r][0] = _mm256_fmadd_ps(w0, xv, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(w1, xv, acc[r][1]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) {
    float* out = y + r * n + n0;
    if (cols == kPanel) {
      _mm256_storeu_ps(out, acc[r][0]);
      _mm256_storeu_ps(out + 8, acc[r][1]);
    } else {
      alignas(32) float buf[kPanel];
      _mm256_store_ps(buf, acc[r][0]);
      _mm256_store_ps(buf + 8, acc[r][1]);
      std::copy_n(buf, cols, out);
    }
  }
}

using PanelRows256Fn = void (*)(const float*, const float*, float*, int64_t, int64_t, int64_t, int64_t, const float*,
                                int);

template <size_t... I>
constexpr std::array<PanelRows256Fn, sizeof...(I)> panel_rows_256_table(std::index_sequence<I...>) {
  return {panel_rows_256<static_cast<int>(I) + 1>...};
}

__attribute__((target("avx2,fma"))) void linear_panels_256(const float* pw, const float* x, float* y, int64_t b,
                                                           int64_t n, int64_t kd, int64_t p0, int64_t p1) {
  static constexpr auto rows = panel_rows_256_table(std::make_index_sequence<kRows256>());
  for (int64_t p = p0; p < p1; ++p) {
    const float* panel = pw + p * kd * kPanel;
    const int64_t n0 = p * kPanel, cols = std::min(kPanel, n - n0);
    const int passes = static_cast<int>((b + kRows256 - 1) / kRows256);
    const int64_t share = (kd + passes - 1) / passes;  // columns of the next panel each pass asks for
    for (int64_t r0 = 0, q = 0; r0 < b; r0 += kRows256, ++q) {
      const float* ahead = p + 1 < p1 ? panel + (kd + q * share) * kPanel : nullptr;
      rows[std::min<int64_t>(kRows256, b - r0) - 1](panel, x + r0 * kd, y + r0 * n, kd, n, n0, cols, ahead, passes);
    }
  }
}

// A tensor derived from a long-lived weight (small_batch_linear's packed
// panels, mamba1_step's A = -exp(A_log)), computed at the first call for the
// weight and kept while the weight lives. Every call checks it against the
// weight's storage and version counter, so a weight changed in place (an
// optimizer step, a checkpoint load) is derived again. Each `derive` (a
// distinct lambda type) has its own cache. The weak reference keeps the
// TensorImpl's address from being reused while the entry exists; entries of
// dead weights go at the next miss. Not for inference tensors (no version
// counter).
struct DerivedEntry {
  c10::weak_intrusive_ptr<c10::TensorImpl> weight;
  const void* data = nullptr;
  int64_t version = -1;
  torch::Tensor value;
};

template <typename Derive>
torch::Tensor derived_from(const torch::Tensor& w, Derive derive) {
  static std::mutex mutex;
  static std::unordered_map<const c10::TensorImpl*, DerivedEntry> cache;
  const int64_t version = static_cast<int64_t>(w._version());
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(w.unsafeGetTensorImpl());
  if (it != cache.end() && it->second.data == w.data_ptr() && it->second.version == version) return it->second.value;
  for (auto e = cache.begin(); e != cache.end();)
    e = e->second.weight.expired() ? cache.erase(e) : std::next(e);
  torch::NoGradGuard no_grad;
  DerivedEntry entry{c10::weak_intrusive_ptr<c10::TensorImpl>(w.getIntrusivePtr()), w.data_ptr(), version, derive(w)};
  torch::Tensor out = entry.value;
  cache.insert_or_assign(w.unsafeGetTensorImpl(), std::move(entry));
  return out;
}

// W (N, kd) as panels (panels, kd, kPanel), rows past N zero.
torch::Tensor packed_weight(const torch::Tensor& w) {
  return derived_from(w, [](const torch::Tensor& weight) {
    const int64_t n = weight.size(0), kd = weight.size(1), panels = (n + kPanel - 1) / kPanel;
    torch::Tensor padded = torch::zeros({panels * kPanel, kd}, weight.options());
    padded.narrow(0, 0, n).copy_(weight);
    return padded.view({panels, kPanel, kd}).transpose(1, 2).contiguous();
  });
}

// ------------------------------------------------------------------ search's row-wise selection (AVX-512F, AVX2)

// Largest value of x[0, n) (-inf for n == 0); *nan: whether x holds a NaN.
__attribute__((target("avx512f"))) float row_max(const float* x, int64_t n, bool* nan) {
  const int64_t full = n / 16 * 16;
  const __mmask16 tail = static_cast<__mmask16>((1u << (n - full)) - 1);
  __m512 m = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __mmask16 unordered = 0;
  for (int64_t j = 0; j < full; j += 16) {
    const __m512 v = _mm512_loadu_ps(x + j);
    unordered |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    m = _mm512_max_ps(m, v);
  }
  if (tail) {
    const __m512 v = _mm512_maskz_loadu_ps(tail, x + full);
    unordered |= _mm512_mask_cmp_ps_mask(tail, v, v, _CMP_UNORD_Q);
    m = _mm512_mask_max_ps(m, tail, m, v);
  }
  *nan = unordered != 0;
  return _mm512_reduce_max_ps(m);
}

// The first j < n with x[j] == v (n if none).
__attribute__((target("avx512f"))) int64_t row_find(const float* x, int64_t n, float v) {
  const __m512 vv = _mm512_set1_ps(v);
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    const __mmask16 eq = _mm512_cmp_ps_mask(_mm512_loadu_ps(x + j), vv, _CMP_EQ_OQ);
    if (eq) return j + __builtin_ctz(eq);
  }
  for (; j < n; ++j)
    if (x[j] == v) return j;
  return n;
}

// out[j] = x[j] - log(sum_i exp(x[i] - max) ) - max for one row of n.
__attribute__((target("avx512f"))) void log_softmax_row(const float* x, float* out, int64_t n,
                                                        void (*exp)(const float*, float*, int64_t)) {
  bool nan = false;
  const float m = row_max(x, n, &nan);
  // exp(x - m) in chunks through a buffer, summed in 16 lanes.
  constexpr int64_t kChunk = 256;
  alignas(64) float buf[kChunk];
  const __m512 mv = _mm512_set1_ps(m);
  __m512 sum = _mm512_setzero_ps();
  for (int64_t j0 = 0; j0 < n; j0 += kChunk) {
    const int64_t c = std::min(kChunk, n - j0);
    const int64_t full = c / 16 * 16;
    const __mmask16 tail = static_cast<__mmask16>((1u << (c - full)) - 1);
    for (int64_t j = 0; j < full; j += 16) _mm512_store_ps(buf + j, _mm512_sub_ps(_mm512_loadu_ps(x + j0 + j), mv));
    if (tail) _mm512_mask_store_ps(buf + full, tail, _mm512_sub_ps(_mm512_maskz_loadu_ps(tail, x + j0 + full), mv));
    exp(buf, buf, c);
    for (int64_t j = 0; j < full; j += 16) sum = _mm512_add_ps(sum, _mm512_load_ps(buf + j));
    if (tail) sum = _mm512_add_ps(sum, _mm512_maskz_load_ps(tail, buf + full));
  }
  const __m512 lse = _mm512_set1_ps(m + std::log(_mm512_reduce_add_ps(sum)));
  const int64_t full = n / 16 * 16;
  const __mmask16 tail = static_cast<__mmask16>((1u << (n - full)) - 1);
  for (int64_t j = 0; j < full; j += 16) _mm512_storeu_ps(out + j, _mm512_sub_ps(_mm512_loadu_ps(x + j), lse));
  if (tail) _mm512_mask_storeu_ps(out + full, tail, _mm512_sub_ps(_mm512_maskz_loadu_ps(tail, x + full), lse));
}

// The m largest of x[0, n) (m <= n) with their indices, largest first (the
// lower index first among equal values), into val and idx; false if x holds
// a NaN (then val and idx are not usable). With AVX-512F; row_top_256 with
// AVX2, row_top_scalar on any CPU.
__attribute__((target("avx512f"))) bool row_top(const float* x, int64_t n, int64_t m, float* val, int64_t* idx) {
  int64_t filled = 0;
  // Insert (v, j) into the sorted list, dropping its last entry once full.
  auto insert = [&](float v, int64_t j) {
    int64_t pos = std::min(filled, m - 1);
    if (filled == m && !(v > val[m - 1])) return;
    while (pos > 0 && v > val[pos - 1]) {
      val[pos] = val[pos - 1], idx[pos] = idx[pos - 1];
      --pos;
    }
    val[pos] = v, idx[pos] = j;
    filled = std::min(filled + 1, m);
  };
  __mmask16 unordered = 0;
  int64_t j = 0;
  for (; j < n && filled < m; ++j) {
    if (std::isnan(x[j])) return false;
    insert(x[j], j);
  }
  for (; j + 16 <= n; j += 16) {
    const __m512 v = _mm512_loadu_ps(x + j);
    unordered |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    __mmask16 above = _mm512_cmp_ps_mask(v, _mm512_set1_ps(val[m - 1]), _CMP_GT_OQ);
    while (above) {
      const int bit = __builtin_ctz(above);
      insert(x[j + bit], j + bit);
      above &= static_cast<__mmask16>(above - 1);
    }
  }
  for (; j < n; ++j) {
    if (std::isnan(x[j])) return false;
    insert(x[j], j);
  }
  return unordered == 0;
}

// row_max, row_find, log_softmax_row and row_top with AVX2: the same loops
// in vectors of 8, the tails scalar.
__attribute__((target("avx2,fma"))) float row_max_256(const float* x, int64_t n, bool* nan) {
  __m256 m = _mm256_set1_ps(-std::numeric_limits<float>::infinity()), unordered = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 v = _mm256_loadu_ps(x + j);
    unordered = _mm256_or_ps(unordered, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    m = _mm256_max_ps(m, v);
  }
  float out = hmax_256(m);
  bool any = _mm256_movemask_ps(unordered) != 0;
  for (; j < n; ++j) {
    any = any || std::isnan(x[j]);
    out = std::max(out, x[j]);
  }
  *nan = any;
  return out;
}

__attribute__((target("avx2,fma"))) int64_t row_find_256(const float* x, int64_t n, float v) {
  const __m256 vv = _mm256_set1_ps(v);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const int eq = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + j), vv, _CMP_EQ_OQ));
    if (eq) return j + __builtin_ctz(static_cast<unsigned>(eq));
  }
  for (; j < n; ++j)
    if (x[j] == v) return j;
  return n;
}

// The scan of row_top with AVX2: vectors of 8 against the list's last value
// once it is full.
__attribute__((target("avx2,fma"))) bool row_top_256(const float* x, int64_t n, int64_t m, float* val, int64_t* idx) {
  TopList top{val, idx, m};
  int64_t j = 0;
  for (; j < n && !top.full(); ++j) {
    if (std::isnan(x[j])) return false;
    top.insert(x[j], j);
  }
  __m256 unordered = _mm256_setzero_ps();
  for (; j + 8 <= n; j += 8) {
    const __m256 v = _mm256_loadu_ps(x + j);
    unordered = _mm256_or_ps(unordered, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    const __m256 above_last = _mm256_cmp_ps(v, _mm256_set1_ps(val[m - 1]), _CMP_GT_OQ);
    unsigned above = static_cast<unsigned>(_mm256_movemask_ps(above_last));
    while (above) {
      const int bit = __builtin_ctz(above);
      top.insert(x[j + bit], j + bit);
      above &= above - 1;
    }
  }
  for (; j < n; ++j) {
    if (std::isnan(x[j])) return false;
    top.insert(x[j], j);
  }
  return _mm256_movemask_ps(unordered) == 0;
}

__attribute__((target("avx2,fma"))) void log_softmax_row_256(const float* x, float* out, int64_t n,
                                                             void (*exp)(const float*, float*, int64_t)) {
  bool nan = false;
  const float m = row_max_256(x, n, &nan);
  constexpr int64_t kChunk = 256;
  alignas(32) float buf[kChunk];
  const __m256 mv = _mm256_set1_ps(m);
  __m256 sum = _mm256_setzero_ps();
  float tail_sum = 0.0f;
  for (int64_t j0 = 0; j0 < n; j0 += kChunk) {
    const int64_t c = std::min(kChunk, n - j0), full = c / 8 * 8;
    for (int64_t j = 0; j < full; j += 8) _mm256_store_ps(buf + j, _mm256_sub_ps(_mm256_loadu_ps(x + j0 + j), mv));
    for (int64_t j = full; j < c; ++j) buf[j] = x[j0 + j] - m;
    exp(buf, buf, c);
    for (int64_t j = 0; j < full; j += 8) sum = _mm256_add_ps(sum, _mm256_load_ps(buf + j));
    for (int64_t j = full; j < c; ++j) tail_sum += buf[j];
  }
  const float lse = m + std::log(hsum_256(sum) + tail_sum);
  const __m256 lv = _mm256_set1_ps(lse);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) _mm256_storeu_ps(out + j, _mm256_sub_ps(_mm256_loadu_ps(x + j), lv));
  for (; j < n; ++j) out[j] = x[j] - lse;
}

// rms_norm_row with the sum of squares in 4 vectors of 16 partial sums.
__attribute__((target("avx512f"))) void rms_norm_row_512(const float* x, const float* w, float* out, int64_t dim,
                                                         float eps) {
  const int64_t full = dim / 16 * 16;
  const __mmask16 tail = static_cast<__mmask16>((1u << (dim - full)) - 1);
  __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
  int64_t j = 0;
  for (; j + 64 <= full; j += 64)
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const __m512 v = _mm512_loadu_ps(x + j + 16 * c);
      acc[c] = _mm512_fmadd_ps(v, v, acc[c]);
    }
  for (; j < full; j += 16) {
    const __m512 v = _mm512_loadu_ps(x + j);
    acc[0] = _mm512_fmadd_ps(v, v, acc[0]);
  }
  if (tail) {
    const __m512 v = _mm512_maskz_loadu_ps(tail, x + full);
    acc[1] = _mm512_fmadd_ps(v, v, acc[1]);
  }
  const float ss = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])));
  const __m512 scale = _mm512_set1_ps(1.0f / std::sqrt(ss / static_cast<float>(dim) + eps));
  for (j = 0; j < full; j += 16)
    _mm512_storeu_ps(out + j, _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(x + j), scale), _mm512_loadu_ps(w + j)));
  if (tail)
    _mm512_mask_storeu_ps(out + full, tail,
                          _mm512_mul_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(tail, x + full), scale),
                                        _mm512_maskz_loadu_ps(tail, w + full)));
}

// The same in 4 vectors of 8 partial sums, the tail scalar.
__attribute__((target("avx2,fma"))) void rms_norm_row_256(const float* x, const float* w, float* out, int64_t dim,
                                                          float eps) {
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  int64_t j = 0;
  for (; j + 32 <= dim; j += 32)
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const __m256 v = _mm256_loadu_ps(x + j + 8 * c);
      acc[c] = _mm256_fmadd_ps(v, v, acc[c]);
    }
  for (; j + 8 <= dim; j += 8) {
    const __m256 v = _mm256_loadu_ps(x + j);
    acc[0] = _mm256_fmadd_ps(v, v, acc[0]);
  }
  float ss = hsum_256(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
  for (int64_t t = j; t < dim; ++t) ss += x[t] * x[t];
  const float scale = 1.0f / std::sqrt(ss / static_cast<float>(dim) + eps);
  const __m256 sv = _mm256_set1_ps(scale);
  for (j = 0; j + 8 <= dim; j += 8)
    _mm256_storeu_ps(out + j, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + j), sv), _mm256_loadu_ps(w + j)));
  for (; j < dim; ++j) out[j] = x[j] * scale * w[j];
}

// ------------------------------------------------------------------ Mamba-2 decode step (AVX-512F, AVX2)

// Pointers and sizes of one mamba2_step call (see the header).
struct Mamba2Step {
  const float *in, *conv_w, *conv_b, *A_log, *D, *dt_bias, *norm_w;
  float *conv_state, *ssm_state, *out;
  int64_t in_stride, di, channels, width, nheads, headdim, ngroups, dstate;
  float eps;
  const kernels::cpu::FloatKernels* k;
};

// v[i] = v[i] * g[i] * sigmoid(g[i]) (v times SiLU(g)), or with kSiluOnly
// v[i] * sigmoid(g[i]) (SiLU(v) where g is v), for i < n; e is scratch for n
// floats.
template <bool kSiluOnly>
__attribute__((target("avx512f"))) void mul_silu_512(float* v, const float* g, float* e, int64_t n,
                                                     void (*exp)(const float*, float*, int64_t)) {
  const __m512 zero = _mm512_setzero_ps(), one = _mm512_set1_ps(1.0f);
  const int64_t full = n / 16 * 16;
  const __mmask16 tail = static_cast<__mmask16>((1u << (n - full)) - 1);
  for (int64_t j = 0; j < full; j += 16) _mm512_storeu_ps(e + j, _mm512_sub_ps(zero, _mm512_loadu_ps(g + j)));
  if (tail) _mm512_mask_storeu_ps(e + full, tail, _mm512_sub_ps(zero, _mm512_maskz_loadu_ps(tail, g + full)));
  exp(e, e, n);
  for (int64_t j = 0; j <= full; j += 16) {
    const __mmask16 m = j < full ? static_cast<__mmask16>(0xffff) : tail;
    if (!m) break;
    __m512 vv = _mm512_maskz_loadu_ps(m, v + j);
    if (!kSiluOnly) vv = _mm512_mul_ps(vv, _mm512_maskz_loadu_ps(m, g + j));
    _mm512_mask_storeu_ps(v + j, m, _mm512_div_ps(vv, _mm512_add_ps(one, _mm512_maskz_loadu_ps(m, e + j))));
  }
}

template <bool kSiluOnly>
__attribute__((target("avx2,fma"))) void mul_silu_256(float* v, const float* g, float* e, int64_t n,
                                                      void (*exp)(const float*, float*, int64_t)) {
  const __m256 zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.0f);
  const int64_t full = n / 8 * 8;
  for (int64_t j = 0; j < full; j += 8) _mm256_storeu_ps(e + j, _mm256_sub_ps(zero, _mm256_loadu_ps(g + j)));
  for (int64_t j = full; j < n; ++j) e[j] = -g[j];
  exp(e, e, n);
  for (int64_t j = 0; j < full; j += 8) {
    __m256 vv = _mm256_loadu_ps(v + j);
    if (!kSiluOnly) vv = _mm256_mul_ps(vv, _mm256_loadu_ps(g + j));
    _mm256_storeu_ps(v + j, _mm256_div_ps(vv, _mm256_add_ps(one, _mm256_loadu_ps(e + j))));
  }
  for (int64_t j = full; j < n; ++j) v[j] = (kSiluOnly ? v[j] : v[j] * g[j]) / (1.0f + e[j]);
}

// The causal conv of one row of `channels` channels: u = conv of the new
// input x against the last W-1 inputs (the state cs, oldest first), which
// shift by one. W is a constant so that the per-channel loops unroll (runtime
// loops of 1-3 taps took longer than the SSD update of a row on one thread).
template <int W>
void conv_step_row(const float* conv_w, const float* conv_b, int64_t channels, float* cs, const float* x, float* u) {
  for (int64_t c = 0; c < channels; ++c)
    u[c] = kernels::cpu::conv_step_channel<float, W>(conv_w + c * W, cs + c * (W - 1), x[c],
                                                     conv_b ? conv_b[c] : 0.0f);
}

void conv_step_row(int64_t width, const float* conv_w, const float* conv_b, int64_t channels, float* cs,
                   const float* x, float* u) {
  switch (width) {
    case 2: return conv_step_row<2>(conv_w, conv_b, channels, cs, x, u);
    case 3: return conv_step_row<3>(conv_w, conv_b, channels, cs, x, u);
    default: return conv_step_row<4>(conv_w, conv_b, channels, cs, x, u);  // asserted: 2 <= W <= 4
  }
}

// sum a[i] b[i] for i < n.
__attribute__((target("avx512f"))) float dot_512(const float* a, const float* b, int64_t n) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc0);
    acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), acc1);
  }
  for (; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << (n - i)) - 1);
    acc0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), acc0);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
}

// The vector loops a fused step's rows run with, one set per instruction
// set: the step bodies below are templates on it, inlined into a function
// compiled for that set.
using ExpFn = void (*)(const float*, float*, int64_t);
struct Loops512 {
  template <bool kSiluOnly>
  static void mul_silu(float* v, const float* g, float* e, int64_t n, ExpFn exp) {
    mul_silu_512<kSiluOnly>(v, g, e, n, exp);
  }
  static void rms_norm(const float* x, const float* w, float* out, int64_t dim, float eps) {
    rms_norm_row_512(x, w, out, dim, eps);
  }
  static float dot(const float* a, const float* b, int64_t n) { return dot_512(a, b, n); }
  // Inline (kernels/cpu/ssd_update_avx512.h), not through the kernel table.
  static void ssd_update(const kernels::cpu::FloatKernels&, int64_t P, int64_t np, float decay, float dt, float D,
                         const float* x, const float* B, const float* C, float* h, float* y) {
    kernels::cpu::ssd_update_avx512(P, np, decay, dt, D, x, B, C, h, y);
  }
};
struct Loops256 {
  template <bool kSiluOnly>
  static void mul_silu(float* v, const float* g, float* e, int64_t n, ExpFn exp) {
    mul_silu_256<kSiluOnly>(v, g, e, n, exp);
  }
  static void rms_norm(const float* x, const float* w, float* out, int64_t dim, float eps) {
    rms_norm_row_256(x, w, out, dim, eps);
  }
  static float dot(const float* a, const float* b, int64_t n) { return mambamt::models::detail::dot(a, b, n); }
  static void ssd_update(const kernels::cpu::FloatKernels& k, int64_t P, int64_t np, float decay, float dt, float D,
                         const float* x, const float* B, const float* C, float* h, float* y) {
    k.ssd_update(P, np, decay, dt, D, x, B, C, h, y);
  }
};

// One row of the step; u and y are scratch for channels and di floats, e for
// max(channels, di).
template <typename Loops>
MAMBAMT_INLINE void mamba2_step_row(const Mamba2Step& a, int64_t b, float* u, float* y, float* e) {
  const float* in = a.in + b * a.in_stride;
  const float *z = in, *xbc = in + a.di, *dt_in = in + a.di + a.channels;
  conv_step_row(a.width, a.conv_w, a.conv_b, a.channels, a.conv_state + b * a.channels * (a.width - 1), xbc, u);
  Loops::template mul_silu<true>(u, u, e, a.channels, a.k->exp);
  // SSD: per head, h = exp(dt A) h + dt x B; y = C.h + D x.
  const int64_t H = a.nheads, P = a.headdim, N = a.dstate, hpg = H / a.ngroups;
  for (int64_t h = 0; h < H; ++h) {
    float dt = dt_in[h] + a.dt_bias[h];
    if (dt <= 20.0f) dt = std::log1p(std::exp(dt));
    const float decay = std::exp(-std::exp(a.A_log[h]) * dt);
    const int64_t g = h / hpg;
    const float *x = u + h * P, *Bv = u + a.di + g * N, *Cv = u + a.di + a.ngroups * N + g * N;
    float* st = a.ssm_state + (b * H + h) * P * N;
    Loops::ssd_update(*a.k, P, N, decay, dt, a.D[h], x, Bv, Cv, st, y + h * P);
  }
  // Gate and norm: RMSNorm(y * silu(z)).
  Loops::template mul_silu<false>(y, z, e, a.di, a.k->exp);
  Loops::rms_norm(y, a.norm_w, a.out + b * a.di, a.di, a.eps);
}
__attribute__((target("avx512f"))) void mamba2_step_row_512(const Mamba2Step& a, int64_t b, float* u, float* y,
                                                            float* e) {
  mamba2_step_row<Loops512>(a, b, u, y, e);
}
__attribute__((target("avx2,fma"))) void mamba2_step_row_256(const Mamba2Step& a, int64_t b, float* u, float* y,
                                                             float* e) {
  mamba2_step_row<Loops256>(a, b, u, y, e);
}

// ------------------------------------------------------------------ Mamba-1 decode step (AVX-512F, AVX2)

// Pointers and sizes of one mamba1_step call (see the header).
struct Mamba1Step {
  const float *in, *conv_w, *conv_b, *x_proj, *dt_proj, *dt_bias, *A, *D;
  float *conv_state, *ssm_state, *out;
  int64_t in_stride, di, width, rank, dstate;
  const kernels::cpu::FloatKernels* k;
};

// Rows [begin, end) of the Mamba-1 step, n = end - begin; s is scratch for
// n (3 di + rank + 2 N) floats. Each phase runs over all the rows, so that
// each row of x_proj and dt_proj is read once for all of them rather than
// once per row.
template <typename Loops>
MAMBAMT_INLINE void mamba1_step_rows(const Mamba1Step& a, int64_t begin, int64_t end, float* s) {
  const int64_t di = a.di, R = a.rank, N = a.dstate, n = end - begin, X = R + 2 * N;
  float *u = s, *dl = u + n * di, *e = dl + n * di, *xd = e + n * di;  // u, dl, e: (n, di); xd: (n, X)
  for (int64_t r = 0; r < n; ++r) {
    const int64_t b = begin + r;
    conv_step_row(a.width, a.conv_w, a.conv_b, di, a.conv_state + b * di * (a.width - 1),
                  a.in + b * a.in_stride + di, u + r * di);
    Loops::template mul_silu<true>(u + r * di, u + r * di, e, di, a.k->exp);
  }
  // x_proj: [dt rank, B, C]; dt_proj with its bias, then softplus.
  for (int64_t j = 0; j < X; ++j)
    for (int64_t r = 0; r < n; ++r) xd[r * X + j] = Loops::dot(a.x_proj + j * di, u + r * di, di);
  for (int64_t d = 0; d < di; ++d)
    for (int64_t r = 0; r < n; ++r) dl[r * di + d] = Loops::dot(a.dt_proj + d * R, xd + r * X, R) + a.dt_bias[d];
  a.k->softplus(dl, dl, nullptr, n * di);
  // Each channel's state: h = exp(dl A) h + dl u B; y = C.h + D u; then the
  // silu(z) gate.
  for (int64_t r = 0; r < n; ++r) {
    const int64_t b = begin + r;
    const float *ur = u + r * di, *dr = dl + r * di, *Bv = xd + r * X + R, *Cv = Bv + N;
    float* y = a.out + b * di;
    float* h = a.ssm_state + b * di * N;
    for (int64_t d = 0; d < di; ++d) a.k->scan(1, N, dr + d, ur + d, a.A + d * N, Bv, Cv, a.D[d], h + d * N, y + d);
    Loops::template mul_silu<false>(y, a.in + b * a.in_stride, e, di, a.k->exp);
  }
}
__attribute__((target("avx512f"))) void mamba1_step_rows_512(const Mamba1Step& a, int64_t begin, int64_t end,
                                                             float* s) {
  mamba1_step_rows<Loops512>(a, begin, end, s);
}
__attribute__((target("avx2,fma"))) void mamba1_step_rows_256(const Mamba1Step& a, int64_t begin, int64_t end,
                                                              float* s) {
  mamba1_step_rows<Loops256>(a, begin, end, s);
}

// Whether the row-wise selection runs its own loops on x.
bool rows_fast(const torch::Tensor& x) {
  return has_avx2() && x.is_cpu() && x.dim() == 2 && x.scalar_type() == torch::kFloat && x.is_contiguous() &&
         x.size(1) > 0 && !(x.requires_grad() && torch::GradMode::is_enabled());
}

#pragma GCC diagnostic pop

}  // namespace

bool attend_cached_available() { return has_avx2(); }

bool small_batch_linear_available() { return has_avx2(); }

bool mul_silu_inplace(const torch::Tensor& up, const torch::Tensor& gate) {
  auto ok = [](const torch::Tensor& t) { return t.is_cpu() && t.scalar_type() == torch::kFloat && t.is_contiguous(); };
  if (torch::GradMode::is_enabled() || !has_avx2() || !ok(up) || !ok(gate) || up.sizes() != gate.sizes())
    return false;
  float* u = up.data_ptr<float>();
  const float* g = gate.data_ptr<float>();
  const auto exp = kernels::cpu::float_kernels().exp;
  // Chunks of 32K values: a decode step's rows in one, on this thread; a
  // prefill's in parallel.
  constexpr int64_t kChunk = 1 << 15;
  auto chunks = [&](int64_t begin, int64_t end) {
    std::vector<float> e(static_cast<size_t>(kChunk));
    for (int64_t c = begin; c < end; ++c) {
      const int64_t from = c * kChunk, n = std::min(kChunk, up.numel() - from);
      (has_avx512f() ? mul_silu_512<false> : mul_silu_256<false>)(u + from, g + from, e.data(), n, exp);
    }
  };
  const int64_t count = (up.numel() + kChunk - 1) / kChunk;
  if (count <= 1) chunks(0, count);
  else at::parallel_for(0, count, 1, chunks);
  return true;
}

void rms_norm_row(const float* x, const float* w, float* out, int64_t dim, float eps) {
  (has_avx512f() ? rms_norm_row_512 : has_avx2() ? rms_norm_row_256 : rms_norm_row_scalar)(x, w, out, dim, eps);
}

torch::Tensor attend_cached(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                            const torch::Tensor& valid, int64_t n, const torch::Tensor& rows) {
  TORCH_INTERNAL_ASSERT(attend_cached_available() && k.is_contiguous() && v.is_contiguous() &&
                        valid.is_contiguous() && k.scalar_type() == torch::kFloat && n >= 1 && n <= k.size(2));
  TORCH_INTERNAL_ASSERT(!rows.defined() || (rows.scalar_type() == torch::kBool && rows.is_contiguous() &&
                                            rows.numel() == k.size(0)));
  const int64_t b = k.size(0), h = k.size(1), cap = k.size(2), dh = k.size(3);
  const torch::Tensor qc = q.reshape({b, h, dh}).contiguous();
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dh)));
  torch::Tensor scores = torch::empty({b, h, n}, k.options());
  const float *qp = qc.data_ptr<float>(), *kp = k.data_ptr<float>(), *vp = v.data_ptr<float>();
  const bool* valid_p = valid.data_ptr<bool>();
  float* sp = scores.data_ptr<float>();
  const AttendPasses* fast = attend_passes_512(dh);
  torch::Tensor y = torch::empty({b, h, dh}, k.options());
  float* yp = y.data_ptr<float>();
  // Each head goes through scores, softmax and values in turn: one parallel
  // region, and the head's score row is still in cache for the value pass.
  // The (row, head) pairs to compute: all, or those of the rows asked for,
  // listed so that the threads split the computed ones evenly (skipped rows
  // may sit together at one end of the batch).
  std::vector<int64_t> work;
  if (rows.defined()) {
    const bool* rows_p = rows.data_ptr<bool>();
    for (int64_t r = 0; r < b; ++r) {
      if (rows_p[r])
        for (int64_t j = 0; j < h; ++j) work.push_back(r * h + j);
      else
        std::fill(yp + r * h * dh, yp + (r + 1) * h * dh, 0.0f);
    }
  }
  const int64_t count = rows.defined() ? static_cast<int64_t>(work.size()) : b * h;
  at::parallel_for(0, count, 1, [&](int64_t begin, int64_t end) {
    for (int64_t w = begin; w < end; ++w) {
      const int64_t i = rows.defined() ? work[static_cast<size_t>(w)] : w;
      if (fast) {
        fast->score(qp, kp, valid_p, sp, i, i + 1, h, cap, n, dh, scale);
        softmax_rows_512(sp, i, i + 1, n);
        fast->value(sp, vp, yp, i, i + 1, cap, n, dh);
      } else {
        score_heads_256(qp, kp, valid_p, sp, i, i + 1, h, cap, n, dh, scale);
        softmax_rows_256(sp, i, i + 1, n);
        value_heads_256(sp, vp, yp, i, i + 1, cap, n, dh);
      }
    }
  });
  return y;
}

torch::Tensor small_batch_linear(const torch::Tensor& x, const torch::Tensor& w) {
  TORCH_INTERNAL_ASSERT(small_batch_linear_available() && w.is_contiguous() && !w.is_inference() && x.dim() == 2 &&
                        x.size(0) >= 2 && x.size(0) <= 256 && x.scalar_type() == torch::kFloat &&
                        w.scalar_type() == torch::kFloat);
  const int64_t b = x.size(0), kd = w.size(1), n = w.size(0);
  const torch::Tensor panels = packed_weight(w);
  const torch::Tensor xc = x.contiguous();
  torch::Tensor y = torch::empty({b, n}, x.options());
  const float *wp = panels.data_ptr<float>(), *xp = xc.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  // At least 6 panels (96 rows) per task: every matrix of the decode step is
  // split over 2 threads.
  const auto panels_fn = has_avx512f() ? linear_panels : linear_panels_256;
  at::parallel_for(0, panels.size(0), 6, [&](int64_t begin, int64_t end) {
    panels_fn(wp, xp, yp, b, n, kd, begin, end);
  });
  return y;
}

// Whether a fused Mamba step takes these: no gradients, AVX-512F or AVX2, the input
// rows float32 on the CPU with unit column stride, and every other tensor
// (weights, states) float32 on the CPU and contiguous.
bool fused_step_applies(const torch::Tensor& in, std::initializer_list<const torch::Tensor*> rest) {
  if (torch::GradMode::is_enabled() || !has_avx2()) return false;
  auto cpu_float = [](const torch::Tensor& t) { return t.defined() && t.is_cpu() && t.scalar_type() == torch::kFloat; };
  if (!cpu_float(in) || in.dim() != 2 || in.stride(1) != 1) return false;
  for (const torch::Tensor* t : rest)
    if (!cpu_float(*t) || !t->is_contiguous()) return false;
  return true;
}

bool mamba2_step_available() { return has_avx2(); }

torch::Tensor mamba2_step(const torch::Tensor& zxbcdt, const Mamba2StepWeights& w, const torch::Tensor& conv_state,
                          const torch::Tensor& ssm_state) {
  if (!fused_step_applies(zxbcdt, {&w.conv_weight, &w.conv_bias, &w.A_log, &w.D, &w.dt_bias, &w.norm_weight,
                                   &conv_state, &ssm_state}))
    return {};
  const int64_t b = zxbcdt.size(0), c = w.conv_weight.size(0), width = w.conv_weight.size(1), h = w.A_log.size(0),
                di = w.norm_weight.size(0);
  TORCH_INTERNAL_ASSERT(zxbcdt.size(1) == di + c + h && (c - di) % (2 * w.ngroups) == 0 && h % w.ngroups == 0 &&
                        di % h == 0 && width >= 2 && width <= 4);
  const int64_t n = (c - di) / (2 * w.ngroups);
  TORCH_INTERNAL_ASSERT(conv_state.numel() == b * c * (width - 1) && ssm_state.numel() == b * di * n);
  Mamba2Step a;
  a.in = zxbcdt.data_ptr<float>();
  a.conv_w = w.conv_weight.data_ptr<float>();
  a.conv_b = w.conv_bias.data_ptr<float>();
  a.A_log = w.A_log.data_ptr<float>();
  a.D = w.D.data_ptr<float>();
  a.dt_bias = w.dt_bias.data_ptr<float>();
  a.norm_w = w.norm_weight.data_ptr<float>();
  a.conv_state = conv_state.data_ptr<float>();
  a.ssm_state = ssm_state.data_ptr<float>();
  torch::Tensor out = torch::empty({b, di}, zxbcdt.options());
  a.out = out.data_ptr<float>();
  a.in_stride = zxbcdt.stride(0);
  a.di = di, a.channels = c, a.width = width, a.nheads = h, a.headdim = di / h, a.ngroups = w.ngroups;
  a.dstate = n;
  a.eps = static_cast<float>(w.eps);
  a.k = &kernels::cpu::float_kernels();
  const auto row = has_avx512f() ? mamba2_step_row_512 : mamba2_step_row_256;
  at::parallel_for(0, b, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> scratch(2 * c + 2 * di);
    for (int64_t r = begin; r < end; ++r) row(a, r, scratch.data(), scratch.data() + c, scratch.data() + c + di);
  });
  return out;
}

bool mamba1_step_available(int64_t d_state) {
  return has_avx2() && d_state % kernels::cpu::kPadFloats == 0;
}

torch::Tensor mamba1_step(const torch::Tensor& xz, const Mamba1StepWeights& w, const torch::Tensor& conv_state,
                          const torch::Tensor& ssm_state) {
  if (!mamba1_step_available(w.A_log.size(-1)) ||
      !fused_step_applies(xz, {&w.conv_weight, &w.conv_bias, &w.x_proj, &w.dt_proj, &w.dt_bias, &w.A_log, &w.D,
                               &conv_state, &ssm_state}))
    return {};
  const int64_t b = xz.size(0), di = w.D.size(0), width = w.conv_weight.size(1), rank = w.dt_proj.size(1),
                n = w.A_log.size(1);
  TORCH_INTERNAL_ASSERT(xz.size(1) == 2 * di && width >= 2 && width <= 4 && w.x_proj.size(0) == rank + 2 * n &&
                        w.x_proj.size(1) == di && w.dt_proj.size(0) == di && w.A_log.size(0) == di);
  TORCH_INTERNAL_ASSERT(conv_state.numel() == b * di * (width - 1) && ssm_state.numel() == b * di * n);
  // A = -exp(A_log), computed once per A_log (and again after it changes).
  const auto minus_exp = [](const torch::Tensor& a_log) { return -torch::exp(a_log); };
  const torch::Tensor A = w.A_log.is_inference() ? minus_exp(w.A_log) : derived_from(w.A_log, minus_exp);
  Mamba1Step a;
  a.in = xz.data_ptr<float>();
  a.conv_w = w.conv_weight.data_ptr<float>();
  a.conv_b = w.conv_bias.data_ptr<float>();
  a.x_proj = w.x_proj.data_ptr<float>();
  a.dt_proj = w.dt_proj.data_ptr<float>();
  a.dt_bias = w.dt_bias.data_ptr<float>();
  a.A = A.data_ptr<float>();
  a.D = w.D.data_ptr<float>();
  a.conv_state = conv_state.data_ptr<float>();
  a.ssm_state = ssm_state.data_ptr<float>();
  torch::Tensor out = torch::empty({b, di}, xz.options());
  a.out = out.data_ptr<float>();
  a.in_stride = xz.stride(0);
  a.di = di, a.width = width, a.rank = rank, a.dstate = n;
  a.k = &kernels::cpu::float_kernels();
  at::parallel_for(0, b, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> scratch((end - begin) * (3 * di + rank + 2 * n));
    (has_avx512f() ? mamba1_step_rows_512 : mamba1_step_rows_256)(a, begin, end, scratch.data());
  });
  return out;
}

torch::Tensor log_softmax_rows(const torch::Tensor& x) {
  if (!rows_fast(x)) return torch::log_softmax(x, 1);
  torch::NoGradGuard no_grad;
  const int64_t r = x.size(0), n = x.size(1);
  torch::Tensor out = torch::empty_like(x);
  const float* xp = x.data_ptr<float>();
  float* op = out.data_ptr<float>();
  const auto exp = kernels::cpu::float_kernels().exp;
  const auto row = has_avx512f() ? log_softmax_row : log_softmax_row_256;
  at::parallel_for(0, r, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) row(xp + i * n, op + i * n, n, exp);
  });
  return out;
}

std::tuple<torch::Tensor, torch::Tensor> max_rows(const torch::Tensor& x) {
  if (!rows_fast(x)) return x.max(1);
  torch::NoGradGuard no_grad;
  const int64_t r = x.size(0), n = x.size(1);
  torch::Tensor values = torch::empty({r}, x.options());
  torch::Tensor indices = torch::empty({r}, x.options().dtype(torch::kLong));
  const float* xp = x.data_ptr<float>();
  float* vp = values.data_ptr<float>();
  int64_t* ip = indices.data_ptr<int64_t>();
  std::atomic<bool> any_nan{false};
  const auto max_fn = has_avx512f() ? row_max : row_max_256;
  const auto find_fn = has_avx512f() ? row_find : row_find_256;
  at::parallel_for(0, r, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float* row = xp + i * n;
      bool nan = false;
      vp[i] = max_fn(row, n, &nan);
      ip[i] = find_fn(row, n, vp[i]);
      if (nan) any_nan = true;
    }
  });
  if (any_nan) return x.max(1);  // NaN ordering as LibTorch's
  return {values, indices};
}

namespace {
RowTop vector_row_top() { return has_avx512f() ? row_top : has_avx2() ? row_top_256 : nullptr; }
}  // namespace

#else  // not x86: the callers keep the LibTorch ops

bool attend_cached_available() { return false; }
bool small_batch_linear_available() { return false; }
bool mul_silu_inplace(const torch::Tensor&, const torch::Tensor&) { return false; }
void rms_norm_row(const float* x, const float* w, float* out, int64_t dim, float eps) {
  rms_norm_row_scalar(x, w, out, dim, eps);
}
torch::Tensor attend_cached(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&, const torch::Tensor&,
                            int64_t, const torch::Tensor&) {
  TORCH_CHECK(false, "attend_cached: x86 only");
}
torch::Tensor small_batch_linear(const torch::Tensor&, const torch::Tensor&) {
  TORCH_CHECK(false, "small_batch_linear: x86 only");
}
bool mamba1_step_available(int64_t) { return false; }
torch::Tensor mamba1_step(const torch::Tensor&, const Mamba1StepWeights&, const torch::Tensor&, const torch::Tensor&) {
  return {};
}
bool mamba2_step_available() { return false; }
torch::Tensor mamba2_step(const torch::Tensor&, const Mamba2StepWeights&, const torch::Tensor&, const torch::Tensor&) {
  return {};
}
torch::Tensor log_softmax_rows(const torch::Tensor& x) { return torch::log_softmax(x, 1); }
std::tuple<torch::Tensor, torch::Tensor> max_rows(const torch::Tensor& x) { return x.max(1); }
namespace {
RowTop vector_row_top() { return nullptr; }
}  // namespace

#endif

std::tuple<torch::Tensor, torch::Tensor> beam_topk(const torch::Tensor& lp, const std::vector<double>& scores,
                                                   int64_t k, int64_t n) {
  TORCH_INTERNAL_ASSERT(lp.dim() == 2 && k >= 1 && lp.size(0) % k == 0 &&
                        static_cast<int64_t>(scores.size()) == lp.size(0) && n >= 1 && n <= k * lp.size(1));
  // Every CPU takes this path (its row scan is vectorised with AVX-512 or AVX2), so that
  // the order among ties does not depend on the CPU.
  if (!(lp.is_cpu() && lp.scalar_type() == torch::kFloat && lp.is_contiguous() && lp.size(1) > 0 &&
        !(lp.requires_grad() && torch::GradMode::is_enabled())))
    return beam_topk_torch(lp, scores, k, n);
  const RowTop top = vector_row_top() ? vector_row_top() : row_top_scalar;
  torch::NoGradGuard no_grad;
  const int64_t rows = lp.size(0), a = rows / k, v = lp.size(1), m = std::min(n, v);
  // The m best tokens of every row.
  std::vector<float> row_val(static_cast<size_t>(rows * m));
  std::vector<int64_t> row_idx(static_cast<size_t>(rows * m));
  const float* lpp = lp.data_ptr<float>();
  std::atomic<bool> nan{false};
  at::parallel_for(0, rows, 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      if (!top(lpp + r * v, v, m, row_val.data() + r * m, row_idx.data() + r * m)) nan = true;
  });
  if (nan) return beam_topk_torch(lp, scores, k, n);
  // Per source: the n best of its k * m candidates, in float64 as the sums.
  torch::Tensor top_sc = torch::empty({a, n}, torch::kDouble), top_ix = torch::empty({a, n}, torch::kLong);
  auto sca = top_sc.accessor<double, 2>();
  auto ixa = top_ix.accessor<int64_t, 2>();
  std::vector<std::pair<double, int64_t>> cand(static_cast<size_t>(k * m));
  for (int64_t s = 0; s < a; ++s) {
    for (int64_t j = 0; j < k; ++j)
      for (int64_t c = 0; c < m; ++c) {
        const size_t e = static_cast<size_t>((s * k + j) * m + c);
        cand[static_cast<size_t>(j * m + c)] = {scores[static_cast<size_t>(s * k + j)] + row_val[e],
                                                j * v + row_idx[e]};
      }
    std::partial_sort(cand.begin(), cand.begin() + n, cand.end(), [](const auto& x, const auto& y) {
      return x.first > y.first || (x.first == y.first && x.second < y.second);
    });
    for (int64_t c = 0; c < n; ++c) {
      sca[s][c] = cand[static_cast<size_t>(c)].first;
      ixa[s][c] = cand[static_cast<size_t>(c)].second;
    }
  }
  return {top_sc, top_ix};
}

}  // namespace mambamt::models::detail
