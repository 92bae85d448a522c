#include "models/detail/decode_cpu.h"

#include <ATen/Parallel.h>
#if defined(__x86_64__) || defined(__i386__)
#define MAMBAMT_DECODE_X86 1
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <limits>

namespace mambamt::models::detail {
#ifdef MAMBAMT_DECODE_X86
namespace {

// ------------------------------------------------------------------ attention (AVX2 + FMA)

__attribute__((target("avx2,fma"))) float dot(const float* a, const float* b, int64_t d) {
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= d; i += 16) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
  }
  for (; i + 8 <= d; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
  s0 = _mm256_add_ps(s0, s1);
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(s0), _mm256_extractf128_ps(s0, 1));
  s = _mm_hadd_ps(s, s);
  s = _mm_hadd_ps(s, s);
  float out = _mm_cvtss_f32(s);
  for (; i < d; ++i) out += a[i] * b[i];
  return out;
}

// y += a * x over d values.
__attribute__((target("avx2,fma"))) void axpy(float a, const float* x, float* y, int64_t d) {
  const __m256 av = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= d; i += 8)
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  for (; i < d; ++i) y[i] += a * x[i];
}

// Scores of heads [begin, end) of (B*H): s[j] = q . k[j] * scale, or the lowest
// float at an invalid column (what models::attend's masked_fill puts there).
__attribute__((target("avx2,fma"))) void score_heads(const float* q, const float* k, const bool* valid, float* s,
                                                      int64_t begin, int64_t end, int64_t heads, int64_t cap,
                                                      int64_t n, int64_t dh, float scale) {
  const float lowest = std::numeric_limits<float>::lowest();
  for (int64_t bh = begin; bh < end; ++bh) {
    const float* qi = q + bh * dh;
    const float* ki = k + bh * cap * dh;
    const bool* vi = valid + (bh / heads) * cap;
    float* si = s + bh * n;
    for (int64_t j = 0; j < n; ++j) si[j] = vi[j] ? dot(qi, ki + j * dh, dh) * scale : lowest;
  }
}

// y[bh] = sum_j p[bh][j] v[bh][j] for heads [begin, end); columns of weight 0
// (masked) are not read.
__attribute__((target("avx2,fma"))) void value_heads(const float* p, const float* v, float* y, int64_t begin,
                                                      int64_t end, int64_t cap, int64_t n, int64_t dh) {
  for (int64_t bh = begin; bh < end; ++bh) {
    const float* pi = p + bh * n;
    const float* vi = v + bh * cap * dh;
    float* yi = y + bh * dh;
    for (int64_t j = 0; j < n; ++j)
      if (pi[j] != 0.0f) axpy(pi[j], vi + j * dh, yi, dh);
  }
}

// ------------------------------------------------------------------ small-batch linear (AVX-512F)

// Columns [i0, i1) of y (b, N) = W rows [i0, i1) times xt (K,16): each W
// value is broadcast against the 16 batch lanes of its column, 8 W rows at a
// time (8 independent FMA chains), so W is read once, in order. A block's 8 x
// 16 results are written to y's b rows directly (no transposed copy after).
__attribute__((target("avx512f"))) void linear_rows(const float* w, const float* xt, float* y, int64_t b,
                                                    int64_t n, int64_t i0, int64_t i1, int64_t kd) {
  alignas(64) float out[8 * 16];
  const auto put = [&](int64_t row0, int64_t rows) {
    for (int64_t lane = 0; lane < b; ++lane)
      for (int64_t r = 0; r < rows; ++r) y[lane * n + row0 + r] = out[r * 16 + lane];
  };
  int64_t i = i0;
  for (; i + 8 <= i1; i += 8) {
    const float* r = w + i * kd;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    // The next block's 8 rows (contiguous, kd / 2 cache lines): one line
    // requested every other column, so they are in flight while this block
    // computes.
    const char* next = reinterpret_cast<const char*>(r + 8 * kd);
    const bool more = i + 16 <= i1;
    for (int64_t j = 0; j < kd; ++j) {
      if (more && (j & 1) == 0) _mm_prefetch(next + j * 32, _MM_HINT_T0);
      const __m512 x = _mm512_loadu_ps(xt + j * 16);
      a0 = _mm512_fmadd_ps(_mm512_set1_ps(r[j]), x, a0);
      a1 = _mm512_fmadd_ps(_mm512_set1_ps(r[kd + j]), x, a1);
      a2 = _mm512_fmadd_ps(_mm512_set1_ps(r[2 * kd + j]), x, a2);
      a3 = _mm512_fmadd_ps(_mm512_set1_ps(r[3 * kd + j]), x, a3);
      a4 = _mm512_fmadd_ps(_mm512_set1_ps(r[4 * kd + j]), x, a4);
      a5 = _mm512_fmadd_ps(_mm512_set1_ps(r[5 * kd + j]), x, a5);
      a6 = _mm512_fmadd_ps(_mm512_set1_ps(r[6 * kd + j]), x, a6);
      a7 = _mm512_fmadd_ps(_mm512_set1_ps(r[7 * kd + j]), x, a7);
    }
    _mm512_store_ps(out, a0);
    _mm512_store_ps(out + 16, a1);
    _mm512_store_ps(out + 32, a2);
    _mm512_store_ps(out + 48, a3);
    _mm512_store_ps(out + 64, a4);
    _mm512_store_ps(out + 80, a5);
    _mm512_store_ps(out + 96, a6);
    _mm512_store_ps(out + 112, a7);
    put(i, 8);
  }
  for (; i < i1; ++i) {
    const float* r = w + i * kd;
    __m512 a = _mm512_setzero_ps();
    for (int64_t j = 0; j < kd; ++j) a = _mm512_fmadd_ps(_mm512_set1_ps(r[j]), _mm512_loadu_ps(xt + j * 16), a);
    _mm512_store_ps(out, a);
    put(i, 1);
  }
}

}  // namespace

bool attend_cached_available() {
  static const bool ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return ok;
}

bool small_batch_linear_available() {
  static const bool ok = __builtin_cpu_supports("avx512f");
  return ok;
}

torch::Tensor attend_cached(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                            const torch::Tensor& valid, int64_t n) {
  TORCH_INTERNAL_ASSERT(attend_cached_available() && k.is_contiguous() && v.is_contiguous() &&
                        valid.is_contiguous() && k.scalar_type() == torch::kFloat && n >= 1 && n <= k.size(2));
  const int64_t b = k.size(0), h = k.size(1), cap = k.size(2), dh = k.size(3);
  const torch::Tensor qc = q.reshape({b, h, dh}).contiguous();
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dh)));
  torch::Tensor scores = torch::empty({b, h, n}, k.options());
  const float *qp = qc.data_ptr<float>(), *kp = k.data_ptr<float>(), *vp = v.data_ptr<float>();
  const bool* valid_p = valid.data_ptr<bool>();
  float* sp = scores.data_ptr<float>();
  at::parallel_for(0, b * h, 1, [&](int64_t begin, int64_t end) {
    score_heads(qp, kp, valid_p, sp, begin, end, h, cap, n, dh, scale);
  });
  // LibTorch's (vectorised) softmax over the small score buffer, as models::attend.
  const torch::Tensor p = torch::softmax(scores, -1);
  torch::Tensor y = torch::zeros({b, h, dh}, k.options());
  const float* pp = p.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  at::parallel_for(0, b * h, 1, [&](int64_t begin, int64_t end) { value_heads(pp, vp, yp, begin, end, cap, n, dh); });
  return y;
}

torch::Tensor small_batch_linear(const torch::Tensor& x, const torch::Tensor& w) {
  TORCH_INTERNAL_ASSERT(small_batch_linear_available() && w.is_contiguous() && x.dim() == 2 && x.size(0) >= 2 &&
                        x.size(0) <= 16 && x.scalar_type() == torch::kFloat && w.scalar_type() == torch::kFloat);
  const int64_t b = x.size(0), kd = w.size(1), n = w.size(0);
  // The batch as 16 lanes per input column (padding lanes zero).
  torch::Tensor xt = torch::zeros({kd, 16}, x.options());
  xt.narrow(1, 0, b).copy_(x.t());
  torch::Tensor y = torch::empty({b, n}, x.options());
  const float *wp = w.data_ptr<float>(), *xp = xt.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  // Blocks of 8 W rows, at least 16 per task (128 rows: 256 KiB of W at
  // d_model 512). A coarser grain left every matrix of fewer than 2048 rows
  // (all but the output projection) on one thread.
  const int64_t blocks = (n + 7) / 8;
  at::parallel_for(0, blocks, 16, [&](int64_t begin, int64_t end) {
    linear_rows(wp, xp, yp, b, n, begin * 8, std::min(end * 8, n), kd);
  });
  return y;
}

#else  // not x86: the callers keep the LibTorch ops

bool attend_cached_available() { return false; }
bool small_batch_linear_available() { return false; }
torch::Tensor attend_cached(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&, const torch::Tensor&,
                            int64_t) {
  TORCH_CHECK(false, "attend_cached: x86 only");
}
torch::Tensor small_batch_linear(const torch::Tensor&, const torch::Tensor&) {
  TORCH_CHECK(false, "small_batch_linear: x86 only");
}

#endif
}  // namespace mambamt::models::detail
