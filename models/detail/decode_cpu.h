#pragma once
// CPU fast paths of the decode step (internal to models/), for float32
// without gradients. A decode step is memory-bound: it streams the weights and
// the KV caches once per step, and these paths read each byte once at close to
// copy bandwidth where LibTorch's general ops did not (measured on the
// development machine, one thread, copy bandwidth 10.6 GB/s read + written):
//   - attention of one query per row over a KV cache of 4096 columns: matmul
//     (bmm with one query row) + masked softmax + matmul read K and V at
//     5 GB/s at batch 16 (7 GB/s at batch 1);
//   - y = x W^T for 2..256 rows: OpenBLAS's sgemm packs W on every call and
//     streamed a 32000 x 352 output projection at 3.9 GB/s at batch 16 (mv
//     already streams at copy bandwidth for one row); small_batch_linear
//     packs W once and keeps the packed copy. Over a pure-Mamba step's
//     weights on 2 threads (a later machine, OpenBLAS's SkylakeX kernels) it
//     was 1.6-2.2x faster than torch::mm at 64, 80, 128 and 256 rows.
// The callers check the conditions (available(), dtypes, contiguity) and keep
// the LibTorch ops otherwise; results equal those ops up to float rounding.
#include <torch/torch.h>

#include <cstdint>
#include <tuple>
#include <vector>

namespace mambamt::models::detail {

// The loops of attend_cached, small_batch_linear, mul_silu_inplace,
// rms_norm_row and the fused Mamba steps and search's row-wise selection come
// in AVX-512F and AVX2 versions, run with the instruction set of the kernels'
// float micro-kernels (kernels/isa.h: MAMBAMT_CPU_KERNELS=avx2 forces the
// AVX2 ones on an AVX-512 CPU, generic turns them off). attend_cached's
// AVX-512 passes take head dims up to 128 (larger ones run the AVX2 passes).

// Whether attend_cached runs here (AVX-512F or AVX2 in use).
bool attend_cached_available();

// Whether small_batch_linear runs here (AVX-512F or AVX2).
bool small_batch_linear_available();

// One row of RMSNorm in float32: out = x / sqrt(mean(x^2) + eps) * w, the sum
// of squares in partial sums of 16 (AVX-512F) or 8 (AVX2) lanes (a scalar
// loop with the portable kernels).
void rms_norm_row(const float* x, const float* w, float* out, int64_t dim, float eps);

// One query per (row, head) over the first n columns of a KV cache:
//   q (B,H,Dh), k, v (B,H,cap,Dh) contiguous float32, valid (B,cap) bool
//   -> (B,H,Dh) = softmax(q k^T / sqrt(Dh), invalid columns masked) v
// As models::attend: a row without a valid column gets uniform weights.
// With `rows` (B) contiguous bool, only the rows where it is true are
// computed: the others read nothing of k and v and get zeros (gated
// cross-attention's skipped tokens).
torch::Tensor attend_cached(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                            const torch::Tensor& valid, int64_t n, const torch::Tensor& rows = {});

// x (B,K) float32 with 2 <= B <= 256, w (N,K) contiguous float32 (not an
// inference tensor: it has no version counter) -> (B,N) = x w^T, reading w
// once. The first call for a weight packs a copy of it in panels of 16 rows
// (as many bytes again as w) and keeps it while w lives (the copy of a weight
// that is gone is freed at the next packing); a weight whose storage or
// version counter changed (an in-place update) is packed again. Meant for
// the long-lived weights of a model.
torch::Tensor small_batch_linear(const torch::Tensor& x, const torch::Tensor& w);

// One decode step of a Mamba-2 mixer between its two projections, in one
// pass over the rows (one parallel region). It applies without gradients on
// AVX-512F or AVX2 (mamba2_step_available()) to float32 CPU tensors, the
// weights and states contiguous; elsewhere it returns an undefined tensor
// and the caller takes the kernels' steps. zxbcdt (B, di + C + H) is the
// in-projection's output, columns [z (di), x (di), B (G N), C (G N), dt (H)]
// with C = di + 2 G N channels, rows of unit stride; conv_state (B, C, W-1)
// and ssm_state (B, H, P, N) (contiguous) advance in place by one position.
// Returns (B, di) = RMSNorm(y * silu(z)), y the SSD output with the D skip:
// what kernels::causal_conv1d_step (SiLU), kernels::ssd_step (softplus dt,
// gate z) and RMSNorm give in turn, up to float rounding, without their
// conversions, checks, intermediate tensors and three parallel regions: a
// pure-Mamba step went from 462 to 98 LibTorch profiler events (33 -> 7 per
// layer), a mixer step of the small preset at batch 16 on 2 threads from
// 175 to 142 us, at batch 1 from 21 to 9 us (measured with `mambamt bench decode`).
struct Mamba2StepWeights {
  torch::Tensor conv_weight, conv_bias;  // (C, W), (C)
  torch::Tensor A_log, D, dt_bias;       // (H)
  torch::Tensor norm_weight;             // (di)
  double eps = 1e-5;
  int64_t ngroups = 1;
};
bool mamba2_step_available();
torch::Tensor mamba2_step(const torch::Tensor& zxbcdt, const Mamba2StepWeights& w, const torch::Tensor& conv_state,
                          const torch::Tensor& ssm_state);

// The same for a Mamba-1 mixer: xz (B, 2 di) is the in-projection's output,
// columns [z (di), x (di)], rows of unit stride; conv_state (B, di, W-1) and
// ssm_state (B, di, N) advance in place. Each row runs the conv with SiLU,
// x_proj (its rows [dt rank R, B (N), C (N)]), dt_proj with its bias and
// softplus, the selective-scan update of every channel (the kernels' own
// one-position scan, with the D skip) and the silu(z) gate, and returns
// (B, di): what kernels::causal_conv1d_step, the two products and
// kernels::selective_scan_step give, up to float rounding. It applies as
// mamba2_step does, and only for N a multiple of 16 (mamba1_step_available);
// elsewhere an undefined tensor. A = -exp(A_log) is computed at the first
// call for an A_log and kept while it lives and is unchanged (as
// small_batch_linear keeps its packed weights). A pure Mamba-1 step went
// from 504 to 126 profiler events, 9.8 to 8.3 ms at batch 16 on 2 threads
// (measured with `mambamt bench decode`).
struct Mamba1StepWeights {
  torch::Tensor conv_weight, conv_bias;  // (di, W), (di)
  torch::Tensor x_proj, dt_proj;         // (R + 2N, di), (di, R)
  torch::Tensor dt_bias, A_log, D;       // (di), (di, N), (di)
};
bool mamba1_step_available(int64_t d_state);
torch::Tensor mamba1_step(const torch::Tensor& xz, const Mamba1StepWeights& w, const torch::Tensor& conv_state,
                          const torch::Tensor& ssm_state);

// One decode step's rotary embedding and KV-cache append of an attention
// layer, in one pass over the rows: qkv (B, 3 H Dh) is the qkv projection's
// output, each row [q (H Dh) | k (H Dh) | v (H Dh)]; cos and sin hold Dh/2
// values per row (the tables of each row's position, as rope_tables). Writes
// k rotated and v into column `col` of the caches k_cache, v_cache
// (B, H, cap, Dh), sets valid[:, col] (B, cap), and returns q rotated,
// (B, H, Dh) contiguous: what apply_rope on q and k, the three copies of
// AttentionImpl::append and a contiguous q give, as one op where those were
// about twenty small LibTorch ops per layer. It applies without gradients to
// contiguous float32 CPU tensors (valid bool) with 0 <= col < cap; elsewhere
// it returns an undefined tensor and the caller keeps the LibTorch ops.
torch::Tensor rotate_append(const torch::Tensor& qkv, const torch::Tensor& cos, const torch::Tensor& sin,
                            const torch::Tensor& k_cache, const torch::Tensor& v_cache, const torch::Tensor& valid,
                            int64_t col);

// SwiGLU's gate without gradients: up *= silu(gate), in place, for float32
// CPU tensors, contiguous and of one shape (a decode step's rows, a
// prefill's), with AVX-512F or AVX2, in one pass where silu and mul made two
// tensors; returns whether it did (the caller keeps LibTorch's silu and mul
// otherwise).
bool mul_silu_inplace(const torch::Tensor& up, const torch::Tensor& gate);

// The per-step selection of search: row-wise log-softmax and row-wise max of
// (R,V) logits. LibTorch 1.13's ops took 1.2 ms (log_softmax) and 0.34 ms
// (max over dim 1) for 16 rows of 32000 on 2 threads, 8-10% of a decode step
// at batch 16. These run AVX-512 or AVX2 loops for contiguous float32 CPU tensors and
// call the LibTorch ops otherwise (other devices, dtypes, layouts, CPUs).
//   log_softmax_rows: as torch::log_softmax(x, 1), up to float rounding.
//   max_rows: as x.max(1): the largest value of each row and its first index;
//   a row holding NaN gives what x.max(1) gives.
torch::Tensor log_softmax_rows(const torch::Tensor& x);
std::tuple<torch::Tensor, torch::Tensor> max_rows(const torch::Tensor& x);

// Beam search's candidates at one step: for each of the A sources, the n
// largest of scores[s*k + j] + lp[s*k + j][t] over its k beams j and tokens
// t, in descending order, as (A, n) float64 sums and (A, n) int64 flat
// indices j * V + t: what (lp.double() + scores).view({A, k*V}).topk(n, 1)
// gives (topk orders ties either way; this puts the lower flat index first),
// with n <= k*V. lp (A*k, V) float32. A candidate must be among the n best
// of its own beam's row, so each row is scanned once against a running
// threshold (vectorised with AVX-512 or AVX2) and only k*n candidates per
// source are sorted. For 16 sources of beam 5 over 32000
// tokens on 2 threads the LibTorch expression took 14-26 ms on a loaded
// development machine and 5.2-5.4 ms on a later one, this 0.4-0.7 and
// 0.39-0.41 ms (measured with `mambamt bench decode`).
// LibTorch's ops (a stable sort, ties in the same order) for other layouts,
// dtypes and devices, and for rows holding NaN.
std::tuple<torch::Tensor, torch::Tensor> beam_topk(const torch::Tensor& lp, const std::vector<double>& scores,
                                                   int64_t k, int64_t n);

}  // namespace mambamt::models::detail
