#pragma once
// The SSD decode update of cpu/simd.h (ssd_update) with AVX-512F, inline: the
// AVX-512 kernel set's entry calls it, and the models' fused Mamba-2 decode
// step (models/detail/decode_cpu.cpp) inlines it into its per-row pass (a call
// per head through the kernel table made that step 10-18% slower at batch 16).
// Callers must run on a CPU with AVX-512F. Static: each file keeps its own
// copy, compiled for the instruction sets of that file (simd_avx512.cpp's
// pragma adds VL/DQ/BW), so the linker never hands one caller the other's.
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include <cstdint>

namespace mambamt::kernels::cpu {

// h[p] = decay * h[p] + (dt x[p]) B;  y[p] = C.h[p] + D x[p]  for p < P (h: P
// rows of np floats). Each channel's states in vectors of 16, two at a time with two
// partial sums of C.h, the last one masked.
__attribute__((target("avx512f"))) static inline void ssd_update_avx512(int64_t P, int64_t np, float decay,
                                                                        float dt, float D, const float* x,
                                                                        const float* B, const float* C, float* h,
                                                                        float* y) {
  const __m512 dv = _mm512_set1_ps(decay);
  const int64_t full = np / 16 * 16;
  const __mmask16 tail = static_cast<__mmask16>((1u << (np - full)) - 1);
  for (int64_t p = 0; p < P; ++p) {
    float* row = h + p * np;
    const __m512 uv = _mm512_set1_ps(dt * x[p]);
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + 32 <= full; k += 32) {
      const __m512 s0 = _mm512_fmadd_ps(dv, _mm512_loadu_ps(row + k), _mm512_mul_ps(uv, _mm512_loadu_ps(B + k)));
      const __m512 s1 =
          _mm512_fmadd_ps(dv, _mm512_loadu_ps(row + k + 16), _mm512_mul_ps(uv, _mm512_loadu_ps(B + k + 16)));
      _mm512_storeu_ps(row + k, s0);
      _mm512_storeu_ps(row + k + 16, s1);
      acc0 = _mm512_fmadd_ps(s0, _mm512_loadu_ps(C + k), acc0);
      acc1 = _mm512_fmadd_ps(s1, _mm512_loadu_ps(C + k + 16), acc1);
    }
    for (; k < full; k += 16) {
      const __m512 s0 = _mm512_fmadd_ps(dv, _mm512_loadu_ps(row + k), _mm512_mul_ps(uv, _mm512_loadu_ps(B + k)));
      _mm512_storeu_ps(row + k, s0);
      acc0 = _mm512_fmadd_ps(s0, _mm512_loadu_ps(C + k), acc0);
    }
    if (tail) {
      const __m512 s0 = _mm512_fmadd_ps(dv, _mm512_maskz_loadu_ps(tail, row + full),
                                        _mm512_mul_ps(uv, _mm512_maskz_loadu_ps(tail, B + full)));
      _mm512_mask_storeu_ps(row + full, tail, s0);
      acc1 = _mm512_fmadd_ps(s0, _mm512_maskz_loadu_ps(tail, C + full), acc1);
    }
    y[p] = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1)) + D * x[p];
  }
}

}  // namespace mambamt::kernels::cpu
#endif
