// CUDA SSD (Mamba-2) scan: the chunked algorithm with chunk length Q =
// params.chunk_size, forward, backward and decode step.
//
// Forward, per (batch, head), in five kernels:
//   1. dt_cumsum   dt_t = softplus(dt + bias) (0 at padding), cs = cumsum(dt A) within each chunk
//   2. cb          C_t.B_s of every chunk and group (shared by the group's heads)
//   3. chunk_state S_c = sum_s e^(cs_last - cs_s) dt_s x_s B_s^T    (N, P) per chunk
//   4. state_pass  the state at every chunk start (and the final one), sequential over chunks
//   5. chunk_out   y_t = sum_{s<=t} C_t.B_s e^(cs_t - cs_s) dt_s x_s + e^cs_t C_t H_start + D x_t
// The backward pass recomputes 1-4 and follows the per-chunk formulas of the
// CPU kernel (cpu/ssd_cpu.cpp), with atomics for the sums over heads (dB, dC)
// and positions. The per-chunk products (2, 3, 5 and the backward's
// chunk_dstate, dots, du, dC and dB) run as 64 x 64 tiles of a block each,
// operands staged in shared memory and 4 x 4 outputs per thread (tile_mma);
// the scans over chunks and positions are grid-stride loops. fp32 (fp64 for
// fp64) accumulation; no tensor cores. Checked against the float64 reference
// and timed against LibTorch's chunked form on an NVIDIA H200 (test_kernels
// "[cuda]", `bench kernels --device cuda`; bench/README.md).
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/launch.h"

namespace mambamt::kernels::cuda {
namespace {

using detail::SsdBwdParams;
using detail::SsdParams;
using detail::SsdStepParams;

constexpr int kThreads = 256;

#define GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n); i += int64_t(gridDim.x) * blockDim.x)

// Sizes shared by every kernel.
struct Dims {
  int64_t Bn, L, H, P, G, N, Q, nc, hpg;
};

Dims dims_of(const SsdParams& p) {
  Dims d;
  d.Bn = p.batch, d.L = p.seqlen, d.H = p.nheads, d.P = p.headdim, d.G = p.ngroups, d.N = p.dstate;
  d.Q = p.chunk_size, d.nc = (p.seqlen + p.chunk_size - 1) / p.chunk_size, d.hpg = p.nheads / p.ngroups;
  return d;
}

// Workspace (accumulation type A): dte, cs (B,H,L); CB (B,G,nc,Q,Q);
// Hst (B,H,nc+1,N,P) states at every chunk start and, last, the final state.
template <typename A>
struct FwdWs {
  A *dte, *cs, *CB, *Hst;
  static size_t elems(const Dims& d) {
    return 2 * d.Bn * d.H * d.L + d.Bn * d.G * d.nc * d.Q * d.Q + d.Bn * d.H * (d.nc + 1) * d.N * d.P;
  }
  FwdWs(const Dims& d, void* ws) {
    A* w = static_cast<A*>(ws);
    dte = w, w += d.Bn * d.H * d.L;
    cs = w, w += d.Bn * d.H * d.L;
    CB = w, w += d.Bn * d.G * d.nc * d.Q * d.Q;
    Hst = w;
  }
};

template <typename T, typename A>
__global__ void dt_cumsum(SsdParams p, Dims d, A* dte, A* cs) {
  const A* dt = static_cast<const A*>(p.dt);
  const A* bias = static_cast<const A*>(p.dt_bias);
  const A* A_log = static_cast<const A*>(p.A_log);
  GRID_STRIDE(i, d.Bn * d.H * d.nc) {
    const int64_t c = i % d.nc, bh = i / d.nc, b = bh / d.H, h = bh % d.H;
    const A a = -exp(A_log[h]);
    const int64_t t0 = c * d.Q, t1 = min(d.L, t0 + d.Q);
    A run = 0;
    for (int64_t l = t0; l < t1; ++l) {
      A v = 0;
      if (!p.mask || p.mask[b * d.L + l]) {
        v = dt[(b * d.L + l) * d.H + h] + (bias ? bias[h] : A(0));
        if (p.dt_softplus) v = softplus20(v);
      }
      run += v * a;
      dte[bh * d.L + l] = v;
      cs[bh * d.L + l] = run;
    }
  }
}

// ------------------------------------------------------------ tile products
//
// The chunk's work is small matrix products (64 x 64 x 64 per chunk and head
// at the usual sizes). One block of 256 threads computes a 64 x 64 tile of
// one product: operands staged in shared memory 16 along k at a time, each
// thread keeping a 4 x 4 block of outputs in registers, rows ty + 16 i and
// columns tx + 16 j (tx = thread % 16, ty = thread / 16), so that the reads
// of shared memory are broadcasts or consecutive and the writes coalesce.
// The operands are functions (row, k) and (k, column) that form an element
// from the inputs on the fly (the decays, dt and the causal mask folded in),
// 0 outside the product.
constexpr int kTile = 64, kTileK = 16, kTileThreads = 256;

template <typename A>
struct TileSmem {
  A a[kTileK][kTile + 1];  // a[k][row]; +1: the k-fast fills spread over the banks
  A b[kTileK][kTile + 1];  // b[k][column]
};

// acc[i][j] += sum over k in [k0, k1) of fa(ty + 16 i, k) * fb(k, tx + 16 j).
// AKFast / BKFast: which index of each operand the threads fill consecutively
// (the one contiguous in its input, so that the global reads coalesce). Every
// thread of the block must call it (it synchronises).
template <bool AKFast, bool BKFast, typename A, typename FA, typename FB>
__device__ __forceinline__ void tile_mma(A (&acc)[4][4], TileSmem<A>& sm, int64_t k0, int64_t k1, FA fa, FB fb) {
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  for (int64_t kb = k0; kb < k1; kb += kTileK) {
    for (int e = tid; e < kTile * kTileK; e += kTileThreads) {
      const int r = AKFast ? e / kTileK : e % kTile, k = AKFast ? e % kTileK : e / kTile;
      sm.a[k][r] = kb + k < k1 ? fa(r, kb + k) : A(0);
    }
    for (int e = tid; e < kTile * kTileK; e += kTileThreads) {
      const int c = BKFast ? e / kTileK : e % kTile, k = BKFast ? e % kTileK : e / kTile;
      sm.b[k][c] = kb + k < k1 ? fb(kb + k, c) : A(0);
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kTileK; ++k) {
      A av[4], bv[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) av[i] = sm.a[k][ty + 16 * i];
#pragma unroll
      for (int j = 0; j < 4; ++j) bv[j] = sm.b[k][tx + 16 * j];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] += av[i] * bv[j];
    }
    __syncthreads();
  }
}

// The block's chunk and tile: blockIdx.x = (batch * heads + head) * nc + chunk
// (or batch * groups + group for the products shared by a group's heads),
// blockIdx.y / z the tile's rows / columns.
struct ChunkTile {
  int64_t b, h, g, bh, c, t0, len, r0, c0;
  int tx, ty;
  __device__ ChunkTile(const Dims& d, int64_t heads) {
    c = blockIdx.x % d.nc, bh = blockIdx.x / d.nc, b = bh / heads, h = bh % heads;
    g = heads == d.H ? h / d.hpg : h;
    t0 = c * d.Q, len = min(d.L, t0 + d.Q) - t0;
    r0 = int64_t(blockIdx.y) * kTile, c0 = int64_t(blockIdx.z) * kTile;
    tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  }
  __device__ int64_t row(int i) const { return r0 + ty + 16 * i; }
  __device__ int64_t col(int j) const { return c0 + tx + 16 * j; }
};

inline dim3 tile_grid(int64_t blocks, int64_t rows, int64_t cols) {
  return dim3(static_cast<unsigned>(blocks), static_cast<unsigned>((rows + kTile - 1) / kTile),
              static_cast<unsigned>((cols + kTile - 1) / kTile));
}

#define ZERO_ACC(acc)            \
  A acc[4][4];                   \
  for (int i_ = 0; i_ < 4; ++i_) \
    for (int j_ = 0; j_ < 4; ++j_) acc[i_][j_] = A(0)

// CB[t][s] = C_t.B_s for s <= t (0 above the diagonal and past the sequence):
// rows t, columns s, k = n. Grid (B G nc, Q/64, Q/64).
template <typename T, typename A>
__global__ void __launch_bounds__(kTileThreads) cb_kernel(SsdParams p, Dims d, A* CB) {
  __shared__ TileSmem<A> sm;
  const ChunkTile w(d, d.G);
  const T* Bp = static_cast<const T*>(p.B);
  const T* Cp = static_cast<const T*>(p.C);
  const T* Cc = Cp + w.b * p.C_bs + w.t0 * p.C_ls + w.g * p.C_gs;
  const T* Bc = Bp + w.b * p.B_bs + w.t0 * p.B_ls + w.g * p.B_gs;
  ZERO_ACC(acc);
  if (w.c0 <= w.r0 + kTile - 1)  // a tile wholly above the diagonal stays 0
    tile_mma<true, true>(
        acc, sm, 0, d.N,
        [&](int r, int64_t n) { const int64_t t = w.r0 + r; return t < w.len ? to_acc<A>(Cc[t * p.C_ls + n]) : A(0); },
        [&](int64_t n, int c) { const int64_t s = w.c0 + c; return s < w.len ? to_acc<A>(Bc[s * p.B_ls + n]) : A(0); });
  A* out = CB + blockIdx.x * d.Q * d.Q;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      const int64_t t = w.row(i), s = w.col(j);
      if (t < d.Q && s < d.Q) out[t * d.Q + s] = (s <= t && t < w.len) ? acc[i][j] : A(0);
    }
}

// Hst[c][n][p] = sum_s e^(cs_last - cs_s) dt_s B_s[n] x_s[p] (this chunk's own
// state): rows n, columns p, k = s. Grid (B H nc, N/64, P/64).
template <typename T, typename A>
__global__ void __launch_bounds__(kTileThreads) chunk_state(SsdParams p, Dims d, const A* dte, const A* cs, A* Hst) {
  __shared__ TileSmem<A> sm;
  const ChunkTile w(d, d.H);
  const T* xc = static_cast<const T*>(p.x) + w.b * p.x_bs + w.t0 * p.x_ls + w.h * p.x_hs;
  const T* Bc = static_cast<const T*>(p.B) + w.b * p.B_bs + w.t0 * p.B_ls + w.g * p.B_gs;
  const A* csc = cs + w.bh * d.L + w.t0;
  const A* dtc = dte + w.bh * d.L + w.t0;
  const A last = csc[w.len - 1];
  ZERO_ACC(acc);
  tile_mma<false, false>(
      acc, sm, 0, w.len,
      [&](int r, int64_t s) {
        const int64_t n = w.r0 + r;
        return n < d.N ? to_acc<A>(Bc[s * p.B_ls + n]) * exp(last - csc[s]) * dtc[s] : A(0);
      },
      [&](int64_t s, int c) { const int64_t pp = w.c0 + c; return pp < d.P ? to_acc<A>(xc[s * p.x_ls + pp]) : A(0); });
  A* out = Hst + (w.bh * (d.nc + 1) + w.c) * d.N * d.P;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      const int64_t n = w.row(i), pp = w.col(j);
      if (n < d.N && pp < d.P) out[n * d.P + pp] = acc[i][j];
    }
}

// In place: chunk states -> states at chunk starts; slot nc = final state.
template <typename A>
__global__ void state_pass(SsdParams p, Dims d, const A* cs, A* Hst) {
  const A* init = static_cast<const A*>(p.initial_state);
  A* fin = static_cast<A*>(p.final_state);
  GRID_STRIDE(i, d.Bn * d.H * d.N * d.P) {
    const int64_t pp = i % d.P, n = (i / d.P) % d.N, bh = i / (d.P * d.N);
    A s = init ? init[(bh * d.P + pp) * d.N + n] : A(0);
    for (int64_t c = 0; c < d.nc; ++c) {
      A* slot = Hst + ((bh * (d.nc + 1) + c) * d.N + n) * d.P + pp;
      const A local = *slot;
      *slot = s;
      const int64_t last = min(d.L, (c + 1) * d.Q) - 1;
      s = exp(cs[bh * d.L + last]) * s + local;
    }
    Hst[((bh * (d.nc + 1) + d.nc) * d.N + n) * d.P + pp] = s;
    if (fin) fin[(bh * d.P + pp) * d.N + n] = s;
  }
}

// y_t = sum_{s<=t} C_t.B_s e^(cs_t - cs_s) dt_s x_s + e^cs_t C_t H_start + D x_t,
// then the gate: rows t, columns p; k = s, then k = n. Grid (B H nc, Q/64, P/64).
template <typename T, typename A>
__global__ void __launch_bounds__(kTileThreads) chunk_out(SsdParams p, Dims d, const A* dte, const A* cs, const A* CB,
                                                          const A* Hst) {
  __shared__ TileSmem<A> sm;
  const ChunkTile w(d, d.H);
  if (w.r0 >= w.len) return;  // past the sequence's end: no outputs
  const T* xc = static_cast<const T*>(p.x) + w.b * p.x_bs + w.t0 * p.x_ls + w.h * p.x_hs;
  const T* Cc = static_cast<const T*>(p.C) + w.b * p.C_bs + w.t0 * p.C_ls + w.g * p.C_gs;
  const A* csc = cs + w.bh * d.L + w.t0;
  const A* dtc = dte + w.bh * d.L + w.t0;
  const A* cb = CB + ((w.b * d.G + w.g) * d.nc + w.c) * d.Q * d.Q;
  const A* hs = Hst + (w.bh * (d.nc + 1) + w.c) * d.N * d.P;
  ZERO_ACC(acc);
  tile_mma<true, false>(
      acc, sm, 0, min(w.len, w.r0 + kTile),
      [&](int r, int64_t s) {
        const int64_t t = w.r0 + r;
        return t < w.len && s <= t ? cb[t * d.Q + s] * exp(csc[t] - csc[s]) * dtc[s] : A(0);
      },
      [&](int64_t s, int c) { const int64_t pp = w.c0 + c; return pp < d.P ? to_acc<A>(xc[s * p.x_ls + pp]) : A(0); });
  tile_mma<true, false>(
      acc, sm, 0, d.N,
      [&](int r, int64_t n) {
        const int64_t t = w.r0 + r;
        return t < w.len ? to_acc<A>(Cc[t * p.C_ls + n]) * exp(csc[t]) : A(0);
      },
      [&](int64_t n, int c) { const int64_t pp = w.c0 + c; return pp < d.P ? hs[n * d.P + pp] : A(0); });
  const T* z = static_cast<const T*>(p.z);
  const A* D = static_cast<const A*>(p.D);
  T* y = static_cast<T*>(p.y);
  T* ypre = static_cast<T*>(p.y_pregate);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      const int64_t t = w.row(i), pp = w.col(j), l = w.t0 + t;
      if (t >= w.len || pp >= d.P) continue;
      const int64_t o = ((w.b * d.L + l) * d.H + w.h) * d.P + pp;
      A out = 0;
      if (!p.mask || p.mask[w.b * d.L + l]) out = acc[i][j] + (D ? D[w.h] : A(0)) * to_acc<A>(xc[t * p.x_ls + pp]);
      if (ypre) ypre[o] = from_acc<T>(out);
      if (z) {
        const A zv = to_acc<A>(z[w.b * p.z_bs + l * p.z_ls + w.h * p.z_hs + pp]);
        out *= zv * sigmoid(zv);
      }
      y[o] = from_acc<T>(out);
    }
}

template <typename T, typename A>
void forward_all(const SsdParams& p, const Dims& d, const FwdWs<A>& w, cudaStream_t st, bool outputs) {
  dt_cumsum<T, A><<<blocks_for(d.Bn * d.H * d.nc, kThreads), kThreads, 0, st>>>(p, d, w.dte, w.cs);
  MAMBAMT_CUDA_LAUNCH_CHECK("ssd dt_cumsum");
  cb_kernel<T, A><<<tile_grid(d.Bn * d.G * d.nc, d.Q, d.Q), kTileThreads, 0, st>>>(p, d, w.CB);
  MAMBAMT_CUDA_LAUNCH_CHECK("ssd cb");
  chunk_state<T, A><<<tile_grid(d.Bn * d.H * d.nc, d.N, d.P), kTileThreads, 0, st>>>(p, d, w.dte, w.cs, w.Hst);
  MAMBAMT_CUDA_LAUNCH_CHECK("ssd chunk_state");
  state_pass<A><<<blocks_for(d.Bn * d.H * d.N * d.P, kThreads), kThreads, 0, st>>>(p, d, w.cs, w.Hst);
  MAMBAMT_CUDA_LAUNCH_CHECK("ssd state_pass");
  if (!outputs) return;
  chunk_out<T, A><<<tile_grid(d.Bn * d.H * d.nc, d.Q, d.P), kTileThreads, 0, st>>>(p, d, w.dte, w.cs, w.CB, w.Hst);
  MAMBAMT_CUDA_LAUNCH_CHECK("ssd chunk_out");
}

// ---------------------------------------------------------------- backward

// Extra workspace: dY (B,L,H,P); dHend (B,H,nc,N,P) state gradients at chunk
// ends; S (B,H,nc,Q,Q) = dY_t.u_s; ddte, dcs (B,H,L).
template <typename A>
struct BwdWs {
  A *dY, *dHend, *S, *ddte, *dcs;
  static size_t elems(const Dims& d) {
    return d.Bn * d.L * d.H * d.P + d.Bn * d.H * d.nc * d.N * d.P + d.Bn * d.H * d.nc * d.Q * d.Q +
           2 * d.Bn * d.H * d.L;
  }
  BwdWs(const Dims& d, A* w) {
    dY = w, w += d.Bn * d.L * d.H * d.P;
    dHend = w, w += d.Bn * d.H * d.nc * d.N * d.P;
    S = w, w += d.Bn * d.H * d.nc * d.Q * d.Q;
    ddte = w, w += d.Bn * d.H * d.L;
    dcs = w;
  }
};

template <typename T, typename A>
__global__ void gate_bwd(SsdBwdParams p, Dims d, A* dY) {
  const T* dout = static_cast<const T*>(p.dout);
  const T* z = static_cast<const T*>(p.z);
  const T* ypre = static_cast<const T*>(p.y_pregate);
  T* dz = static_cast<T*>(p.dz);
  GRID_STRIDE(i, d.Bn * d.L * d.H * d.P) {
    const int64_t pp = i % d.P, h = (i / d.P) % d.H, l = (i / (d.P * d.H)) % d.L, b = i / (d.P * d.H * d.L);
    A g = to_acc<A>(dout[i]);
    if (z) {
      const A zv = to_acc<A>(z[b * p.z_bs + l * p.z_ls + h * p.z_hs + pp]);
      const A sg = sigmoid(zv);
      if (dz) dz[i] = from_acc<T>(g * to_acc<A>(ypre[i]) * sg * (A(1) + zv * (A(1) - sg)));
      g *= zv * sg;
    }
    if (p.mask && !p.mask[b * d.L + l]) g = 0;
    dY[i] = g;
  }
}

// dHend[c][n][p] first holds this chunk's own contribution
// sum_t e^cs_t C_t[n] dY_t[p]: rows n, columns p, k = t. Grid (B H nc, N/64, P/64).
template <typename T, typename A>
__global__ void __launch_bounds__(kTileThreads) chunk_dstate(SsdBwdParams p, Dims d, const A* cs, const A* dY,
                                                             A* dHend) {
  __shared__ TileSmem<A> sm;
  const ChunkTile w(d, d.H);
  const T* Cc = static_cast<const T*>(p.C) + w.b * p.C_bs + w.t0 * p.C_ls + w.g * p.C_gs;
  const A* csc = cs + w.bh * d.L + w.t0;
  const A* dyc = dY + ((w.b * d.L + w.t0) * d.H + w.h) * d.P;  // position t at dyc[t * H * P]
  const int64_t dy_ls = d.H * d.P;
  ZERO_ACC(acc);
  tile_mma<false, false>(
      acc, sm, 0, w.len,
      [&](int r, int64_t t) {
        const int64_t n = w.r0 + r;
        return n < d.N ? to_acc<A>(Cc[t * p.C_ls + n]) * exp(csc[t]) : A(0);
      },
      [&](int64_t t, int c) { const int64_t pp = w.c0 + c; return pp < d.P ? dyc[t * dy_ls + pp] : A(0); });
  A* out = dHend + (w.bh * d.nc + w.c) * d.N * d.P;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      const int64_t n = w.row(i), pp = w.col(j);
      if (n < d.N && pp < d.P) out[n * d.P + pp] = acc[i][j];
    }
}

// In place, in reverse: contributions -> state gradients at chunk ends.
template <typename A>
__global__ void dstate_pass(SsdBwdParams p, Dims d, const A* cs, A* dHend) {
  const A* dfin = static_cast<const A*>(p.dfinal_state);
  A* dinit = static_cast<A*>(p.dinitial_state);
  GRID_STRIDE(i, d.Bn * d.H * d.N * d.P) {
    const int64_t pp = i % d.P, n = (i / d.P) % d.N, bh = i / (d.P * d.N);
    A s = dfin ? dfin[(bh * d.P + pp) * d.N + n] : A(0);
    for (int64_t c = d.nc - 1; c >= 0; --c) {
      A* slot = dHend + ((bh * d.nc + c) * d.N + n) * d.P + pp;
      const A local = *slot;
      *slot = s;
      const int64_t last = min(d.L, (c + 1) * d.Q) - 1;
      s = exp(cs[bh * d.L + last]) * s + local;
    }
    if (dinit) dinit[(bh * d.P + pp) * d.N + n] = s;
  }
}

// S[t][s] = dt_s dY_t.x_s (s <= t), and the intra-chunk part of dcs:
// rows t, columns s, k = p. Grid (B H nc, Q/64, Q/64).
template <typename T, typename A>
__global__ void __launch_bounds__(kTileThreads) dots(SsdBwdParams p, Dims d, const A* dte, const A* cs, const A* CB,
                                                     const A* dY, A* S, A* dcs) {
  __shared__ TileSmem<A> sm;
  const ChunkTile w(d, d.H);
  const T* xc = static_cast<const T*>(p.x) + w.b * p.x_bs + w.t0 * p.x_ls + w.h * p.x_hs;
  const A* csc = cs + w.bh * d.L + w.t0;
  const A* dtc = dte + w.bh * d.L + w.t0;
  const A* dyc = dY + ((w.b * d.L + w.t0) * d.H + w.h) * d.P;
  const int64_t dy_ls = d.H * d.P;
  const A* cb = CB + ((w.b * d.G + w.g) * d.nc + w.c) * d.Q * d.Q;
  ZERO_ACC(acc);
  if (w.c0 <= w.r0 + kTile - 1)
    tile_mma<true, true>(
        acc, sm, 0, d.P,
        [&](int r, int64_t pp) { const int64_t t = w.r0 + r; return t < w.len ? dyc[t * dy_ls + pp] : A(0); },
        [&](int64_t pp, int c) {
          const int64_t s = w.c0 + c;
          return s < w.len ? to_acc<A>(xc[s * p.x_ls + pp]) : A(0);
        });
  A* out = S + (w.bh * d.nc + w.c) * d.Q * d.Q;
  A rows[4] = {0, 0, 0, 0}, cols[4] = {0, 0, 0, 0};
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      const int64_t t = w.row(i), s = w.col(j);
      if (t >= d.Q || s >= d.Q) continue;
      const A v = (s <= t && t < w.len) ? acc[i][j] * dtc[s] : A(0);
      out[t * d.Q + s] = v;
      if (s < t && t < w.len) {
        const A W = exp(csc[t] - csc[s]) * cb[t * d.Q + s] * v;
        rows[i] += W;
        cols[j] -= W;
      }
    }
  for (int i = 0; i < 4; ++i)
    if (w.row(i) < w.len && rows[i] != A(0)) atomicAdd(&dcs[w.bh * d.L + w.t0 + w.row(i)], rows[i]);
  for (int j = 0; j < 4; ++j)
    if (w.col(j) < w.len && cols[j] != A(0)) atomicAdd(&dcs[w.bh * d.L + w.t0 + w.col(j)], cols[j]);
}

// du_s = sum_{t>=s} e^(cs_t - cs_s) CB[t][s] dY_t + e^(cs_last - cs_s) B_s.dHend,
// then dx = dt du + D dY and x.du into ddte: rows s, columns p; k = t, then
// k = n. Grid (B H nc, Q/64, P/64).
template <typename T, typename A>
__global__ void __launch_bounds__(kTileThreads) du_kernel(SsdBwdParams p, Dims d, const A* dte, const A* cs,
                                                          const A* CB, const A* dY, const A* dHend, A* ddte) {
  __shared__ TileSmem<A> sm;
  const ChunkTile w(d, d.H);
  if (w.r0 >= w.len) return;
  const T* xc = static_cast<const T*>(p.x) + w.b * p.x_bs + w.t0 * p.x_ls + w.h * p.x_hs;
  const T* Bc = static_cast<const T*>(p.B) + w.b * p.B_bs + w.t0 * p.B_ls + w.g * p.B_gs;
  const A* csc = cs + w.bh * d.L + w.t0;
  const A* dtc = dte + w.bh * d.L + w.t0;
  const A* dyc = dY + ((w.b * d.L + w.t0) * d.H + w.h) * d.P;
  const int64_t dy_ls = d.H * d.P;
  const A* cb = CB + ((w.b * d.G + w.g) * d.nc + w.c) * d.Q * d.Q;
  const A* dh = dHend + (w.bh * d.nc + w.c) * d.N * d.P;
  const A last = csc[w.len - 1];
  ZERO_ACC(acc);
  tile_mma<false, false>(
      acc, sm, w.r0, w.len,
      [&](int r, int64_t t) {
        const int64_t s = w.r0 + r;
        return s < w.len && t >= s ? exp(csc[t] - csc[s]) * cb[t * d.Q + s] : A(0);
      },
      [&](int64_t t, int c) { const int64_t pp = w.c0 + c; return pp < d.P ? dyc[t * dy_ls + pp] : A(0); });
  tile_mma<true, false>(
      acc, sm, 0, d.N,
      [&](int r, int64_t n) {
        const int64_t s = w.r0 + r;
        return s < w.len ? to_acc<A>(Bc[s * p.B_ls + n]) * exp(last - csc[s]) : A(0);
      },
      [&](int64_t n, int c) { const int64_t pp = w.c0 + c; return pp < d.P ? dh[n * d.P + pp] : A(0); });
  const A* D = static_cast<const A*>(p.D);
  T* dx = static_cast<T*>(p.dx);
  for (int i = 0; i < 4; ++i) {
    const int64_t s = w.row(i);
    if (s >= w.len) continue;
    A xdu = 0;
    for (int j = 0; j < 4; ++j) {
      const int64_t pp = w.col(j);
      if (pp >= d.P) continue;
      const A du = acc[i][j];
      const int64_t o = ((w.b * d.L + w.t0 + s) * d.H + w.h) * d.P + pp;
      dx[o] = from_acc<T>(dtc[s] * du + (D ? D[w.h] : A(0)) * dY[o]);
      xdu += to_acc<A>(xc[s * p.x_ls + pp]) * du;
    }
    atomicAdd(&ddte[w.bh * d.L + w.t0 + s], xdu);
  }
}

// dC_t (summed over heads: atomics) = e^cs_t Hstart.dY_t + sum_{s<=t} e^(cs_t - cs_s)
// S[t][s] B_s, and C_t.(its first term) into dcs: rows t, columns n; k = p,
// then k = s. Grid (B H nc, Q/64, N/64).
template <typename T, typename A>
__global__ void __launch_bounds__(kTileThreads) dc_kernel(SsdBwdParams p, Dims d, const A* cs, const A* S,
                                                          const A* dY, const A* Hst, A* dcs) {
  __shared__ TileSmem<A> sm;
  const ChunkTile w(d, d.H);
  if (w.r0 >= w.len) return;
  const T* Bc = static_cast<const T*>(p.B) + w.b * p.B_bs + w.t0 * p.B_ls + w.g * p.B_gs;
  const T* Cc = static_cast<const T*>(p.C) + w.b * p.C_bs + w.t0 * p.C_ls + w.g * p.C_gs;
  const A* csc = cs + w.bh * d.L + w.t0;
  const A* dyc = dY + ((w.b * d.L + w.t0) * d.H + w.h) * d.P;
  const int64_t dy_ls = d.H * d.P;
  const A* hs = Hst + (w.bh * (d.nc + 1) + w.c) * d.N * d.P;
  const A* sc = S + (w.bh * d.nc + w.c) * d.Q * d.Q;
  ZERO_ACC(acc);
  tile_mma<true, true>(
      acc, sm, 0, d.P,
      [&](int r, int64_t pp) { const int64_t t = w.r0 + r; return t < w.len ? dyc[t * dy_ls + pp] : A(0); },
      [&](int64_t pp, int c) { const int64_t n = w.c0 + c; return n < d.N ? hs[n * d.P + pp] : A(0); });
  for (int i = 0; i < 4; ++i) {
    const int64_t t = w.row(i);
    if (t >= w.len) continue;
    const A e = exp(csc[t]);
    A part = 0;
    for (int j = 0; j < 4; ++j) {
      const int64_t n = w.col(j);
      acc[i][j] *= e;
      if (n < d.N) part += to_acc<A>(Cc[t * p.C_ls + n]) * acc[i][j];
    }
    atomicAdd(&dcs[w.bh * d.L + w.t0 + t], part);
  }
  tile_mma<true, false>(
      acc, sm, 0, min(w.len, w.r0 + kTile),
      [&](int r, int64_t s) {
        const int64_t t = w.r0 + r;
        return t < w.len && s <= t ? exp(csc[t] - csc[s]) * sc[t * d.Q + s] : A(0);
      },
      [&](int64_t s, int c) { const int64_t n = w.c0 + c; return n < d.N ? to_acc<A>(Bc[s * p.B_ls + n]) : A(0); });
  A* dC = static_cast<A*>(p.dC);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      const int64_t t = w.row(i), n = w.col(j);
      if (t < w.len && n < d.N) atomicAdd(&dC[((w.b * d.L + w.t0 + t) * d.G + w.g) * d.N + n], acc[i][j]);
    }
}

// dB_s (summed over heads: atomics) = e^(cs_last - cs_s) dt_s dHend.x_s +
// sum_{t>=s} e^(cs_t - cs_s) S[t][s] C_t, and -B_s.(its first term) into dcs:
// rows s, columns n; k = p, then k = t. Grid (B H nc, Q/64, N/64).
template <typename T, typename A>
__global__ void __launch_bounds__(kTileThreads) db_kernel(SsdBwdParams p, Dims d, const A* dte, const A* cs,
                                                          const A* S, const A* dHend, A* dcs) {
  __shared__ TileSmem<A> sm;
  const ChunkTile w(d, d.H);
  if (w.r0 >= w.len) return;
  const T* xc = static_cast<const T*>(p.x) + w.b * p.x_bs + w.t0 * p.x_ls + w.h * p.x_hs;
  const T* Bc = static_cast<const T*>(p.B) + w.b * p.B_bs + w.t0 * p.B_ls + w.g * p.B_gs;
  const T* Cc = static_cast<const T*>(p.C) + w.b * p.C_bs + w.t0 * p.C_ls + w.g * p.C_gs;
  const A* csc = cs + w.bh * d.L + w.t0;
  const A* dtc = dte + w.bh * d.L + w.t0;
  const A* dh = dHend + (w.bh * d.nc + w.c) * d.N * d.P;
  const A* sc = S + (w.bh * d.nc + w.c) * d.Q * d.Q;
  const A last = csc[w.len - 1];
  ZERO_ACC(acc);
  tile_mma<true, true>(
      acc, sm, 0, d.P,
      [&](int r, int64_t pp) {
        const int64_t s = w.r0 + r;
        return s < w.len ? to_acc<A>(xc[s * p.x_ls + pp]) : A(0);
      },
      [&](int64_t pp, int c) { const int64_t n = w.c0 + c; return n < d.N ? dh[n * d.P + pp] : A(0); });
  for (int i = 0; i < 4; ++i) {
    const int64_t s = w.row(i);
    if (s >= w.len) continue;
    const A e = exp(last - csc[s]) * dtc[s];
    A part = 0;
    for (int j = 0; j < 4; ++j) {
      const int64_t n = w.col(j);
      acc[i][j] *= e;
      if (n < d.N) part -= to_acc<A>(Bc[s * p.B_ls + n]) * acc[i][j];
    }
    atomicAdd(&dcs[w.bh * d.L + w.t0 + s], part);
  }
  tile_mma<false, false>(
      acc, sm, w.r0, w.len,
      [&](int r, int64_t t) {
        const int64_t s = w.r0 + r;
        return s < w.len && t >= s ? exp(csc[t] - csc[s]) * sc[t * d.Q + s] : A(0);
      },
      [&](int64_t t, int c) { const int64_t n = w.c0 + c; return n < d.N ? to_acc<A>(Cc[t * p.C_ls + n]) : A(0); });
  A* dB = static_cast<A*>(p.dB);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      const int64_t s = w.row(i), n = w.col(j);
      if (s < w.len && n < d.N) atomicAdd(&dB[((w.b * d.L + w.t0 + s) * d.G + w.g) * d.N + n], acc[i][j]);
    }
}

// <dH_end, H_end> of every chunk into dcs at its last position: one block per
// (batch, head, chunk).
template <typename A>
__global__ void hend_dot(Dims d, const A* dHend, const A* Hst, A* dcs) {
  __shared__ A part[kThreads];
  const int64_t blk = blockIdx.x, c = blk % d.nc, bh = blk / d.nc;
  const A* dh = dHend + (bh * d.nc + c) * d.N * d.P;
  const A* he = Hst + (bh * (d.nc + 1) + c + 1) * d.N * d.P;
  A acc = 0;
  for (int64_t j = threadIdx.x; j < d.N * d.P; j += blockDim.x) acc += dh[j] * he[j];
  part[threadIdx.x] = acc;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    const int64_t last = min(d.L, (c + 1) * d.Q) - 1;
    atomicAdd(&dcs[bh * d.L + last], part[0]);
  }
}

// Reverse cumsum of dcs within each chunk -> ddt and dA_log.
template <typename A>
__global__ void finalize(SsdBwdParams p, Dims d, const A* dte, const A* ddte, const A* dcs) {
  const A* dt = static_cast<const A*>(p.dt);
  const A* bias = static_cast<const A*>(p.dt_bias);
  const A* A_log = static_cast<const A*>(p.A_log);
  A* ddt = static_cast<A*>(p.ddt);
  A* dA = static_cast<A*>(p.dA_log_part);
  GRID_STRIDE(i, d.Bn * d.H * d.nc) {
    const int64_t c = i % d.nc, bh = i / d.nc, b = bh / d.H, h = bh % d.H;
    const A a = -exp(A_log[h]);
    const int64_t t0 = c * d.Q, t1 = min(d.L, t0 + d.Q);
    A dl = 0, da = 0;
    for (int64_t l = t1 - 1; l >= t0; --l) {
      dl += dcs[bh * d.L + l];
      A grad = 0;
      if (!p.mask || p.mask[b * d.L + l]) {
        const A v = dt[(b * d.L + l) * d.H + h] + (bias ? bias[h] : A(0));
        grad = (p.dt_softplus && v <= A(20)) ? sigmoid(v) : A(1);
      }
      ddt[(b * d.L + l) * d.H + h] = (ddte[bh * d.L + l] + dl * a) * grad;
      da += dl * dte[bh * d.L + l];
    }
    atomicAdd(&dA[bh], da * a);
  }
}

// dD[b,h] = sum over positions of dY.x: one block per (batch, head).
template <typename T, typename A>
__global__ void dd_kernel(SsdBwdParams p, Dims d, const A* dY) {
  __shared__ A part[kThreads];
  const int64_t bh = blockIdx.x, b = bh / d.H, h = bh % d.H;
  const T* x = static_cast<const T*>(p.x);
  A acc = 0;
  for (int64_t j = threadIdx.x; j < d.L * d.P; j += blockDim.x) {
    const int64_t l = j / d.P, pp = j % d.P;
    acc += dY[((b * d.L + l) * d.H + h) * d.P + pp] * to_acc<A>(x[b * p.x_bs + l * p.x_ls + h * p.x_hs + pp]);
  }
  part[threadIdx.x] = acc;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) static_cast<A*>(p.dD_part)[bh] = part[0];
}

// ------------------------------------------------------------- decode step

template <typename T, typename A>
__global__ void step_kernel(SsdStepParams p) {
  const int64_t H = p.nheads, P = p.headdim, N = p.dstate, hpg = p.nheads / p.ngroups;
  const T* x = static_cast<const T*>(p.x);
  const T* z = static_cast<const T*>(p.z);
  const T* Bp = static_cast<const T*>(p.B);
  const T* Cp = static_cast<const T*>(p.C);
  const A* dt = static_cast<const A*>(p.dt);
  const A* bias = static_cast<const A*>(p.dt_bias);
  const A* D = static_cast<const A*>(p.D);
  A* state = static_cast<A*>(p.state);
  T* y = static_cast<T*>(p.y);
  GRID_STRIDE(i, p.batch * H * P) {
    const int64_t pp = i % P, h = (i / P) % H, b = i / (P * H), g = h / hpg;
    if (p.mask && !p.mask[b]) {
      y[i] = from_acc<T>(A(0));
      continue;
    }
    A v = dt[b * p.dt_bs + h] + (bias ? bias[h] : A(0));
    if (p.dt_softplus) v = softplus20(v);
    const A decay = exp(-exp(static_cast<const A*>(p.A_log)[h]) * v);
    const A xv = to_acc<A>(x[b * p.x_bs + h * P + pp]);
    const T* br = Bp + b * p.B_bs + g * N;
    const T* cr = Cp + b * p.C_bs + g * N;
    A* st = state + i * N;
    A acc = 0;
    for (int64_t n = 0; n < N; ++n) {
      const A s = decay * st[n] + v * xv * to_acc<A>(br[n]);
      st[n] = s;
      acc += s * to_acc<A>(cr[n]);
    }
    A out = acc + (D ? D[h] : A(0)) * xv;
    if (z) {
      const A zv = to_acc<A>(z[b * p.z_bs + h * P + pp]);
      out *= zv * sigmoid(zv);
    }
    y[i] = from_acc<T>(out);
  }
}

template <typename T>
size_t acc_size() {
  return sizeof(typename Acc<T>::type);
}

}  // namespace

size_t ssd_forward_workspace_bytes(const SsdParams& p) {
  size_t bytes = 0;
  dispatch_dtype(p.dtype, [&](auto t) {
    using T = decltype(t);
    bytes = FwdWs<typename Acc<T>::type>::elems(dims_of(p)) * acc_size<T>();
  });
  return bytes;
}

void ssd_forward_launch(const SsdParams& p, void* workspace, void* stream) {
  const Dims d = dims_of(p);
  dispatch_dtype(p.dtype, [&](auto t) {
    using T = decltype(t);
    using A = typename Acc<T>::type;
    forward_all<T, A>(p, d, FwdWs<A>(d, workspace), static_cast<cudaStream_t>(stream), true);
  });
}

size_t ssd_backward_workspace_bytes(const SsdBwdParams& p) {
  size_t bytes = 0;
  dispatch_dtype(p.dtype, [&](auto t) {
    using T = decltype(t);
    using A = typename Acc<T>::type;
    const Dims d = dims_of(p);
    bytes = (FwdWs<A>::elems(d) + BwdWs<A>::elems(d)) * sizeof(A);
  });
  return bytes;
}

void ssd_backward_launch(const SsdBwdParams& p, void* workspace, void* stream) {
  const Dims d = dims_of(p);
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  dispatch_dtype(p.dtype, [&](auto t) {
    using T = decltype(t);
    using A = typename Acc<T>::type;
    FwdWs<A> fw(d, workspace);
    BwdWs<A> bw(d, static_cast<A*>(workspace) + FwdWs<A>::elems(d));
    // States at chunk starts (the forward pass keeps none on the GPU).
    SsdParams fp = p;
    fp.final_state = nullptr;
    forward_all<T, A>(fp, d, fw, st, false);
    check(cudaMemsetAsync(bw.ddte, 0, 2 * d.Bn * d.H * d.L * sizeof(A), st), "ssd memset");
    const auto n_out = d.Bn * d.L * d.H * d.P;
    gate_bwd<T, A><<<blocks_for(n_out, kThreads), kThreads, 0, st>>>(p, d, bw.dY);
    MAMBAMT_CUDA_LAUNCH_CHECK("ssd gate_bwd");
    const int64_t chunks = d.Bn * d.H * d.nc;
    chunk_dstate<T, A><<<tile_grid(chunks, d.N, d.P), kTileThreads, 0, st>>>(p, d, fw.cs, bw.dY, bw.dHend);
    MAMBAMT_CUDA_LAUNCH_CHECK("ssd chunk_dstate");
    dstate_pass<A><<<blocks_for(d.Bn * d.H * d.N * d.P, kThreads), kThreads, 0, st>>>(p, d, fw.cs, bw.dHend);
    MAMBAMT_CUDA_LAUNCH_CHECK("ssd dstate_pass");
    dots<T, A><<<tile_grid(chunks, d.Q, d.Q), kTileThreads, 0, st>>>(
        p, d, fw.dte, fw.cs, fw.CB, bw.dY, bw.S, bw.dcs);
    MAMBAMT_CUDA_LAUNCH_CHECK("ssd dots");
    du_kernel<T, A><<<tile_grid(chunks, d.Q, d.P), kTileThreads, 0, st>>>(p, d, fw.dte, fw.cs, fw.CB, bw.dY,
                                                                            bw.dHend, bw.ddte);
    MAMBAMT_CUDA_LAUNCH_CHECK("ssd du");
    dc_kernel<T, A><<<tile_grid(chunks, d.Q, d.N), kTileThreads, 0, st>>>(p, d, fw.cs, bw.S, bw.dY, fw.Hst, bw.dcs);
    MAMBAMT_CUDA_LAUNCH_CHECK("ssd dC");
    db_kernel<T, A><<<tile_grid(chunks, d.Q, d.N), kTileThreads, 0, st>>>(p, d, fw.dte, fw.cs, bw.S, bw.dHend, bw.dcs);
    MAMBAMT_CUDA_LAUNCH_CHECK("ssd dB");
    hend_dot<A><<<static_cast<unsigned>(d.Bn * d.H * d.nc), kThreads, 0, st>>>(d, bw.dHend, fw.Hst, bw.dcs);
    MAMBAMT_CUDA_LAUNCH_CHECK("ssd hend_dot");
    finalize<A><<<blocks_for(d.Bn * d.H * d.nc, kThreads), kThreads, 0, st>>>(p, d, fw.dte, bw.ddte, bw.dcs);
    MAMBAMT_CUDA_LAUNCH_CHECK("ssd finalize");
    if (p.dD_part) {
      dd_kernel<T, A><<<static_cast<unsigned>(d.Bn * d.H), kThreads, 0, st>>>(p, d, bw.dY);
      MAMBAMT_CUDA_LAUNCH_CHECK("ssd dD");
    }
  });
}

void ssd_step_launch(const SsdStepParams& p, void* stream) {
  dispatch_dtype(p.dtype, [&](auto t) {
    using T = decltype(t);
    using A = typename Acc<T>::type;
    step_kernel<T, A><<<blocks_for(p.batch * p.nheads * p.headdim, kThreads), kThreads, 0,
                        static_cast<cudaStream_t>(stream)>>>(p);
    MAMBAMT_CUDA_LAUNCH_CHECK("ssd step");
  });
}

}  // namespace mambamt::kernels::cuda
