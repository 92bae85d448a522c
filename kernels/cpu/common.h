#pragma once
// Shared by the CPU ops' algorithm files: the typed access to the micro-kernels
// (float: the run-time picked set; double: portable), the per-ISA variant
// machinery and small helpers.
#include <ATen/Parallel.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "kernels/cpu/simd.h"
#include "kernels/cpu/simd_generic.h"

namespace mambamt::kernels::cpu {

// The per-block work functions are inlined into float entry points compiled
// once per instruction set (target attributes) and picked at run time together
// with the micro-kernels (cpu/simd.h), so their element-wise loops and
// reductions vectorise with AVX-512 or AVX2 while the binary still runs on any
// x86-64. The double path (tests) runs the baseline build.
#define MAMBAMT_INLINE inline __attribute__((always_inline))
#if defined(__GNUC__) && defined(__x86_64__)
#define MAMBAMT_ISA_VARIANTS 1
#define MAMBAMT_TARGET_AVX512 __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")))
#define MAMBAMT_TARGET_AVX2 __attribute__((target("avx2,fma")))
#endif

// Which instruction-set variant of the float entry points to run: the one
// matching the micro-kernel set in use.
inline int isa_level() {
  static const int level = [] {
    const char* n = float_kernels().name;
    return n[0] == 'a' && n[3] == '5' ? 2 : n[0] == 'a' ? 1 : 0;  // "avx512", "avx2", "generic"
  }();
  return level;
}
template <typename S>
struct Ops;

// Defines `void name(const Params&, const Ops<S>&, int64_t begin, int64_t end)`
// for S = float, running body<float> in the variant compiled for the
// instruction set in use, and for S = double, running body<double> (baseline).
// For range kernels (the decode steps); the scans' block functions, with
// longer signatures, spell their variants out.
#ifdef MAMBAMT_ISA_VARIANTS
#define MAMBAMT_RANGE_KERNEL(name, Params, body)                                                      \
  void name##_base(const Params& p, const Ops<float>& ops, int64_t begin, int64_t end) {             \
    body<float>(p, ops, begin, end);                                                                  \
  }                                                                                                   \
  MAMBAMT_TARGET_AVX512 void name##_avx512(const Params& p, const Ops<float>& ops, int64_t begin,   \
                                           int64_t end) {                                           \
    body<float>(p, ops, begin, end);                                                                  \
  }                                                                                                   \
  MAMBAMT_TARGET_AVX2 void name##_avx2(const Params& p, const Ops<float>& ops, int64_t begin,       \
                                       int64_t end) {                                               \
    body<float>(p, ops, begin, end);                                                                  \
  }                                                                                                   \
  void name(const Params& p, const Ops<float>& ops, int64_t begin, int64_t end) {                    \
    if (isa_level() == 2) return name##_avx512(p, ops, begin, end);                                   \
    if (isa_level() == 1) return name##_avx2(p, ops, begin, end);                                     \
    name##_base(p, ops, begin, end);                                                                  \
  }                                                                                                   \
  void name(const Params& p, const Ops<double>& ops, int64_t begin, int64_t end) {                   \
    body<double>(p, ops, begin, end);                                                                 \
  }
#else
#define MAMBAMT_RANGE_KERNEL(name, Params, body)                                                      \
  void name(const Params& p, const Ops<float>& ops, int64_t begin, int64_t end) {                    \
    body<float>(p, ops, begin, end);                                                                  \
  }                                                                                                   \
  void name(const Params& p, const Ops<double>& ops, int64_t begin, int64_t end) {                   \
    body<double>(p, ops, begin, end);                                                                 \
  }
#endif

template <>
struct Ops<float> {
  const FloatKernels& k = float_kernels();
  void gemm(int64_t M, int64_t K, int64_t W, const float* A, int64_t a_rs, int64_t a_cs,
            const float* Bm, int64_t ldb, float* C, int64_t ldc, float beta) const {
    k.gemm(M, K, W, A, a_rs, a_cs, Bm, ldb, C, ldc, beta);
  }
  void exp(const float* in, float* out, int64_t n) const { k.exp(in, out, n); }
  void softplus(const float* in, float* out, float* sig, int64_t n) const { k.softplus(in, out, sig, n); }
  void transpose(int64_t rows, int64_t cols, const float* src, int64_t lds, float* dst, int64_t ldd) const {
    k.transpose(rows, cols, src, lds, dst, ldd);
  }
  void scan(int64_t len, int64_t np, const float* dl, const float* u, const float* A, const float* B,
            const float* C, float D, float* h, float* y) const {
    k.scan(len, np, dl, u, A, B, C, D, h, y);
  }
  void scan_states(int64_t len, int64_t np, const float* dl, const float* u, const float* A, const float* B,
                   float* a, float* H) const {
    k.scan_states(len, np, dl, u, A, B, a, H);
  }
  void scan_bwd(int64_t len, int64_t np, const float* dl, const float* u, const float* dy, const float* A,
                const float* a, const float* B, const float* C, const float* H, float* dB, float* dC, float* dh,
                float* dA, float* sB, float* g) const {
    k.scan_bwd(len, np, dl, u, dy, A, a, B, C, H, dB, dC, dh, dA, sB, g);
  }
  void ssd_update(int64_t P, int64_t np, float decay, float dt, float D, const float* x, const float* B,
                  const float* C, float* h, float* y) const {
    k.ssd_update(P, np, decay, dt, D, x, B, C, h, y);
  }
};

template <>
struct Ops<double> {
  void gemm(int64_t M, int64_t K, int64_t W, const double* A, int64_t a_rs, int64_t a_cs,
            const double* Bm, int64_t ldb, double* C, int64_t ldc, double beta) const {
    generic::gemm<double>(M, K, W, A, a_rs, a_cs, Bm, ldb, C, ldc, beta);
  }
  void exp(const double* in, double* out, int64_t n) const { generic::exp<double>(in, out, n); }
  void softplus(const double* in, double* out, double* sig, int64_t n) const {
    generic::softplus<double>(in, out, sig, n);
  }
  void transpose(int64_t rows, int64_t cols, const double* src, int64_t lds, double* dst, int64_t ldd) const {
    generic::transpose<double>(rows, cols, src, lds, dst, ldd);
  }
  void scan(int64_t len, int64_t np, const double* dl, const double* u, const double* A, const double* B,
            const double* C, double D, double* h, double* y) const {
    generic::scan<double>(len, np, dl, u, A, B, C, D, h, y);
  }
  void scan_states(int64_t len, int64_t np, const double* dl, const double* u, const double* A, const double* B,
                   double* a, double* H) const {
    generic::scan_states<double>(len, np, dl, u, A, B, a, H);
  }
  void scan_bwd(int64_t len, int64_t np, const double* dl, const double* u, const double* dy, const double* A,
                const double* a, const double* B, const double* C, const double* H, double* dB, double* dC,
                double* dh, double* dA, double* sB, double* g) const {
    generic::scan_bwd<double>(len, np, dl, u, dy, A, a, B, C, H, dB, dC, dh, dA, sB, g);
  }
  void ssd_update(int64_t P, int64_t np, double decay, double dt, double D, const double* x, const double* B,
                  const double* C, double* h, double* y) const {
    generic::ssd_update<double>(P, np, decay, dt, D, x, B, C, h, y);
  }
};

// LibTorch maps every multi-megabyte tensor afresh, and the first writes to
// it fault its pages in 4 KB at a time: ~8000 faults for a 32 MB output (15%
// of the SSD forward here), and a TLB entry per 4 KB page, which a head's
// rows (one per page in (B,L,H,P)) each need. Asking for transparent huge
// pages on the output's 2 MB-aligned part, before it is written, makes that a
// few dozen faults where the kernel grants them on request (THP "madvise");
// elsewhere the advice is ignored.
inline void advise_huge_pages(void* data, int64_t bytes) {
#ifdef MADV_HUGEPAGE
  constexpr uintptr_t k2M = uintptr_t(1) << 21;
  if (!data || bytes < int64_t(4 * k2M)) return;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + k2M - 1) & ~(k2M - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + bytes) & ~(k2M - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#endif
}

// Runs f(state, task) for every task < n on LibTorch's intra-op threads, each
// thread with its own state = make(). Tasks are handed out one at a time from
// a shared counter rather than in equal ranges fixed up front: on a shared
// machine a thread that loses its core for a while then takes fewer tasks
// instead of holding the others up at the end.
template <typename Make, typename F>
void parallel_tasks(int64_t n, const Make& make, const F& f) {
  std::atomic<int64_t> next{0};
  const int64_t workers = std::max<int64_t>(1, std::min<int64_t>(n, at::get_num_threads()));
  at::parallel_for(0, workers, 1, [&](int64_t, int64_t) {
    auto state = make();
    for (int64_t task; (task = next.fetch_add(1)) < n;) f(state, task);
  });
}

// a . b with 64 independent partial sums: the vectorised loop then keeps
// several accumulator registers instead of waiting on one chain of adds.
template <typename S>
MAMBAMT_INLINE S dot(const S* a, const S* b, int64_t n) {
  constexpr int64_t kw = 64;
  S part[kw] = {};
  int64_t i = 0;
  for (; i + kw <= n; i += kw)
    for (int64_t k = 0; k < kw; ++k) part[k] += a[i + k] * b[i + k];
  S sum = 0;
  for (; i < n; ++i) sum += a[i] * b[i];
  for (int64_t k = 0; k < kw; ++k) sum += part[k];
  return sum;
}

// Rows of one head are 4 KB apart or more in (B,L,H,P) tensors, a new page each,
// where the hardware prefetchers stop; so the next block's rows are requested
// by hand while the current block computes (on every row's cache lines). Into
// L2, not L1: a block's rows (32 rows of up to 8 heads, 64 KB) at a 4 KB
// stride fall into the same few L1 sets and would evict one another.
template <typename S>
inline void prefetch_rows(const S* row0, int64_t row_stride, int64_t rows, int64_t row_len, bool write) {
  if (!row0) return;
  for (int64_t r = 0; r < rows; ++r) {
    const char* p = reinterpret_cast<const char*>(row0 + r * row_stride);
    for (int64_t off = 0; off < row_len * int64_t(sizeof(S)); off += 64) {
      if (write) __builtin_prefetch(p + off, 1, 2);
      else __builtin_prefetch(p + off, 0, 2);
    }
  }
}

// One channel of the causal conv's decode step: bias + the W taps w against
// the last W-1 inputs (the state st, oldest first) and the new input x; the
// state shifts by one to take x. The conv's step kernel and the models' fused
// decode steps (models/detail/decode_cpu.cpp) run it per channel.
template <typename S, int W>
MAMBAMT_INLINE S conv_step_channel(const S* w, S* st, S x, S bias) {
  constexpr int W1 = W - 1;
  S acc = bias;
  for (int k = 0; k < W1; ++k) acc += w[k] * st[k];
  acc += w[W1] * x;
  for (int k = 0; k + 1 < W1; ++k) st[k] = st[k + 1];
  st[W1 - 1] = x;
  return acc;
}

}  // namespace mambamt::kernels::cpu
