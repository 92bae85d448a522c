// CUDA SSD (Mamba-2) scan: the chunked algorithm with chunk length Q =
// params.chunk_size, forward, backward and decode step.
//
// Forward, per (batch, head), in five kernels over flat index spaces:
//   1. dt_cumsum   dt_t = softplus(dt + bias) (0 at padding), cs = cumsum(dt A) within each chunk
//   2. cb          C_t.B_s of every chunk and group (shared by the group's heads)
//   3. chunk_state S_c = sum_s e^(cs_last - cs_s) dt_s x_s B_s^T    (N, P) per chunk
//   4. state_pass  the state at every chunk start (and the final one), sequential over chunks
//   5. chunk_out   y_t = sum_{s<=t} C_t.B_s e^(cs_t - cs_s) dt_s x_s + e^cs_t C_t H_start + D x_t
// The backward pass recomputes 1-4 and follows the per-chunk formulas of the
// CPU kernel (cpu/ssd_cpu.cpp), with atomics for the sums over heads (dB, dC)
// and positions. Every kernel is a plain grid-stride loop, one output element
// per thread, fp32 (fp64 for fp64) accumulation; no tensor cores. Correctness
// first: checked against the float64 reference on an NVIDIA H200
// (test_kernels "[cuda]"); timed there by `bench kernels --device cuda`
// (bench/README.md): slower than LibTorch's chunked form, far from its floor.
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

template <typename T, typename A>
__global__ void cb_kernel(SsdParams p, Dims d, A* CB) {
  const T* Bp = static_cast<const T*>(p.B);
  const T* Cp = static_cast<const T*>(p.C);
  GRID_STRIDE(i, d.Bn * d.G * d.nc * d.Q * d.Q) {
    const int64_t s = i % d.Q, t = (i / d.Q) % d.Q, c = (i / (d.Q * d.Q)) % d.nc;
    const int64_t bg = i / (d.Q * d.Q * d.nc), b = bg / d.G, g = bg % d.G;
    const int64_t lt = c * d.Q + t, ls = c * d.Q + s;
    A acc = 0;
    if (s <= t && lt < d.L) {
      const T* cr = Cp + b * p.C_bs + lt * p.C_ls + g * p.C_gs;
      const T* br = Bp + b * p.B_bs + ls * p.B_ls + g * p.B_gs;
      for (int64_t n = 0; n < d.N; ++n) acc += to_acc<A>(cr[n]) * to_acc<A>(br[n]);
    }
    CB[i] = acc;
  }
}

// Hst[c] = sum_s e^(cs_last - cs_s) dt_s B_s[n] x_s[p] (this chunk's own state).
template <typename T, typename A>
__global__ void chunk_state(SsdParams p, Dims d, const A* dte, const A* cs, A* Hst) {
  const T* x = static_cast<const T*>(p.x);
  const T* Bp = static_cast<const T*>(p.B);
  GRID_STRIDE(i, d.Bn * d.H * d.nc * d.N * d.P) {
    const int64_t pp = i % d.P, n = (i / d.P) % d.N, c = (i / (d.P * d.N)) % d.nc;
    const int64_t bh = i / (d.P * d.N * d.nc), b = bh / d.H, h = bh % d.H, g = h / d.hpg;
    const int64_t t0 = c * d.Q, t1 = min(d.L, t0 + d.Q);
    const A last = cs[bh * d.L + t1 - 1];
    A acc = 0;
    for (int64_t l = t0; l < t1; ++l) {
      const A w = exp(last - cs[bh * d.L + l]) * dte[bh * d.L + l];
      acc += w * to_acc<A>(Bp[b * p.B_bs + l * p.B_ls + g * p.B_gs + n]) *
             to_acc<A>(x[b * p.x_bs + l * p.x_ls + h * p.x_hs + pp]);
    }
    Hst[((bh * (d.nc + 1) + c) * d.N + n) * d.P + pp] = acc;
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

template <typename T, typename A>
__global__ void chunk_out(SsdParams p, Dims d, const A* dte, const A* cs, const A* CB, const A* Hst) {
  const T* x = static_cast<const T*>(p.x);
  const T* Cp = static_cast<const T*>(p.C);
  const T* z = static_cast<const T*>(p.z);
  const A* D = static_cast<const A*>(p.D);
  T* y = static_cast<T*>(p.y);
  T* ypre = static_cast<T*>(p.y_pregate);
  GRID_STRIDE(i, d.Bn * d.L * d.H * d.P) {
    const int64_t pp = i % d.P, h = (i / d.P) % d.H, l = (i / (d.P * d.H)) % d.L, b = i / (d.P * d.H * d.L);
    const int64_t bh = b * d.H + h, g = h / d.hpg, c = l / d.Q, t = l % d.Q, t0 = c * d.Q;
    const T* xb = x + b * p.x_bs + h * p.x_hs + pp;
    A out = 0;
    if (!p.mask || p.mask[b * d.L + l]) {
      const A cst = cs[bh * d.L + l];
      const A* cb = CB + (((b * d.G + g) * d.nc + c) * d.Q + t) * d.Q;
      A acc = 0;
      for (int64_t s = 0; s <= t; ++s) {
        const int64_t ls = t0 + s;
        acc += cb[s] * exp(cst - cs[bh * d.L + ls]) * dte[bh * d.L + ls] * to_acc<A>(xb[ls * p.x_ls]);
      }
      const T* cr = Cp + b * p.C_bs + l * p.C_ls + g * p.C_gs;
      const A* hs = Hst + (bh * (d.nc + 1) + c) * d.N * d.P + pp;
      A off = 0;
      for (int64_t n = 0; n < d.N; ++n) off += to_acc<A>(cr[n]) * hs[n * d.P];
      out = acc + exp(cst) * off + (D ? D[h] : A(0)) * to_acc<A>(xb[l * p.x_ls]);
    }
    if (ypre) ypre[i] = from_acc<T>(out);
    if (z) {
      const A zv = to_acc<A>(z[b * p.z_bs + l * p.z_ls + h * p.z_hs + pp]);
      out *= zv * sigmoid(zv);
    }
    y[i] = from_acc<T>(out);
  }
}

template <typename T, typename A>
void forward_all(const SsdParams& p, const Dims& d, const FwdWs<A>& w, cudaStream_t st, bool outputs) {
  dt_cumsum<T, A><<<blocks_for(d.Bn * d.H * d.nc, kThreads), kThreads, 0, st>>>(p, d, w.dte, w.cs);
  MAMBAMT_CUDA_LAUNCH_CHECK("ssd dt_cumsum");
  cb_kernel<T, A><<<blocks_for(d.Bn * d.G * d.nc * d.Q * d.Q, kThreads), kThreads, 0, st>>>(p, d, w.CB);
  MAMBAMT_CUDA_LAUNCH_CHECK("ssd cb");
  chunk_state<T, A><<<blocks_for(d.Bn * d.H * d.nc * d.N * d.P, kThreads), kThreads, 0, st>>>(p, d, w.dte, w.cs, w.Hst);
  MAMBAMT_CUDA_LAUNCH_CHECK("ssd chunk_state");
  state_pass<A><<<blocks_for(d.Bn * d.H * d.N * d.P, kThreads), kThreads, 0, st>>>(p, d, w.cs, w.Hst);
  MAMBAMT_CUDA_LAUNCH_CHECK("ssd state_pass");
  if (!outputs) return;
  chunk_out<T, A><<<blocks_for(d.Bn * d.L * d.H * d.P, kThreads), kThreads, 0, st>>>(p, d, w.dte, w.cs, w.CB, w.Hst);
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

// dHend[c] first holds this chunk's own contribution sum_t e^cs_t C_t dY_t^T.
template <typename T, typename A>
__global__ void chunk_dstate(SsdBwdParams p, Dims d, const A* cs, const A* dY, A* dHend) {
  const T* Cp = static_cast<const T*>(p.C);
  GRID_STRIDE(i, d.Bn * d.H * d.nc * d.N * d.P) {
    const int64_t pp = i % d.P, n = (i / d.P) % d.N, c = (i / (d.P * d.N)) % d.nc;
    const int64_t bh = i / (d.P * d.N * d.nc), b = bh / d.H, h = bh % d.H, g = h / d.hpg;
    const int64_t t0 = c * d.Q, t1 = min(d.L, t0 + d.Q);
    A acc = 0;
    for (int64_t l = t0; l < t1; ++l)
      acc += exp(cs[bh * d.L + l]) * to_acc<A>(Cp[b * p.C_bs + l * p.C_ls + g * p.C_gs + n]) *
             dY[((b * d.L + l) * d.H + h) * d.P + pp];
    dHend[i] = acc;
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

// S[t][s] = dY_t.u_s, and the intra-chunk part of dcs.
template <typename T, typename A>
__global__ void dots(SsdBwdParams p, Dims d, const A* dte, const A* cs, const A* CB, const A* dY, A* S, A* dcs) {
  const T* x = static_cast<const T*>(p.x);
  GRID_STRIDE(i, d.Bn * d.H * d.nc * d.Q * d.Q) {
    const int64_t s = i % d.Q, t = (i / d.Q) % d.Q, c = (i / (d.Q * d.Q)) % d.nc;
    const int64_t bh = i / (d.Q * d.Q * d.nc), b = bh / d.H, h = bh % d.H, g = h / d.hpg;
    const int64_t lt = c * d.Q + t, ls = c * d.Q + s;
    A acc = 0;
    if (s <= t && lt < d.L) {
      const A* dy = dY + ((b * d.L + lt) * d.H + h) * d.P;
      const T* xs = x + b * p.x_bs + ls * p.x_ls + h * p.x_hs;
      for (int64_t pp = 0; pp < d.P; ++pp) acc += dy[pp] * to_acc<A>(xs[pp]);
      acc *= dte[bh * d.L + ls];
      if (s < t) {
        const A W = exp(cs[bh * d.L + lt] - cs[bh * d.L + ls]) * CB[(((b * d.G + g) * d.nc + c) * d.Q + t) * d.Q + s] * acc;
        atomicAdd(&dcs[bh * d.L + lt], W);
        atomicAdd(&dcs[bh * d.L + ls], -W);
      }
    }
    S[i] = acc;
  }
}

// du_s, then dx = dt du + D dY and x.du into ddte.
template <typename T, typename A>
__global__ void du_kernel(SsdBwdParams p, Dims d, const A* dte, const A* cs, const A* CB, const A* dY,
                          const A* dHend, A* ddte) {
  const T* x = static_cast<const T*>(p.x);
  const T* Bp = static_cast<const T*>(p.B);
  const A* D = static_cast<const A*>(p.D);
  T* dx = static_cast<T*>(p.dx);
  GRID_STRIDE(i, d.Bn * d.L * d.H * d.P) {
    const int64_t pp = i % d.P, h = (i / d.P) % d.H, l = (i / (d.P * d.H)) % d.L, b = i / (d.P * d.H * d.L);
    const int64_t bh = b * d.H + h, g = h / d.hpg, c = l / d.Q, s = l % d.Q, t0 = c * d.Q;
    const int64_t t1 = min(d.L, t0 + d.Q);
    const A css = cs[bh * d.L + l];
    A du = 0;
    for (int64_t lt = l; lt < t1; ++lt) {
      const A m = exp(cs[bh * d.L + lt] - css) * CB[(((b * d.G + g) * d.nc + c) * d.Q + (lt - t0)) * d.Q + s];
      du += m * dY[((b * d.L + lt) * d.H + h) * d.P + pp];
    }
    const T* br = Bp + b * p.B_bs + l * p.B_ls + g * p.B_gs;
    const A* dh = dHend + (bh * d.nc + c) * d.N * d.P + pp;
    A st = 0;
    for (int64_t n = 0; n < d.N; ++n) st += to_acc<A>(br[n]) * dh[n * d.P];
    du += exp(cs[bh * d.L + t1 - 1] - css) * st;
    const A xv = to_acc<A>(x[b * p.x_bs + l * p.x_ls + h * p.x_hs + pp]);
    dx[i] = from_acc<T>(dte[bh * d.L + l] * du + (D ? D[h] : A(0)) * dY[i]);
    atomicAdd(&ddte[bh * d.L + l], xv * du);
  }
}

// dC_t (summed over heads) and its dcs term.
template <typename T, typename A>
__global__ void dc_kernel(SsdBwdParams p, Dims d, const A* dte, const A* cs, const A* S, const A* dY,
                          const A* Hst, A* dcs) {
  const T* Bp = static_cast<const T*>(p.B);
  const T* Cp = static_cast<const T*>(p.C);
  A* dC = static_cast<A*>(p.dC);
  GRID_STRIDE(i, d.Bn * d.H * d.L * d.N) {
    const int64_t n = i % d.N, l = (i / d.N) % d.L, bh = i / (d.N * d.L), b = bh / d.H, h = bh % d.H;
    const int64_t g = h / d.hpg, c = l / d.Q, t = l % d.Q, t0 = c * d.Q;
    const A* dy = dY + ((b * d.L + l) * d.H + h) * d.P;
    const A* hs = Hst + ((bh * (d.nc + 1) + c) * d.N + n) * d.P;
    A st = 0;
    for (int64_t pp = 0; pp < d.P; ++pp) st += hs[pp] * dy[pp];
    st *= exp(cs[bh * d.L + l]);
    A intra = 0;
    const A* srow = S + ((bh * d.nc + c) * d.Q + t) * d.Q;
    for (int64_t s = 0; s <= t; ++s) {
      const int64_t ls = t0 + s;
      intra += exp(cs[bh * d.L + l] - cs[bh * d.L + ls]) * srow[s] *
               to_acc<A>(Bp[b * p.B_bs + ls * p.B_ls + g * p.B_gs + n]);
    }
    atomicAdd(&dC[((b * d.L + l) * d.G + g) * d.N + n], st + intra);
    atomicAdd(&dcs[bh * d.L + l], to_acc<A>(Cp[b * p.C_bs + l * p.C_ls + g * p.C_gs + n]) * st);
  }
}

// dB_s (summed over heads) and its dcs term.
template <typename T, typename A>
__global__ void db_kernel(SsdBwdParams p, Dims d, const A* dte, const A* cs, const A* S, const A* dHend,
                          A* dcs) {
  const T* x = static_cast<const T*>(p.x);
  const T* Bp = static_cast<const T*>(p.B);
  const T* Cp = static_cast<const T*>(p.C);
  A* dB = static_cast<A*>(p.dB);
  GRID_STRIDE(i, d.Bn * d.H * d.L * d.N) {
    const int64_t n = i % d.N, l = (i / d.N) % d.L, bh = i / (d.N * d.L), b = bh / d.H, h = bh % d.H;
    const int64_t g = h / d.hpg, c = l / d.Q, s = l % d.Q, t0 = c * d.Q, t1 = min(d.L, t0 + d.Q);
    const T* xs = x + b * p.x_bs + l * p.x_ls + h * p.x_hs;
    const A* dh = dHend + ((bh * d.nc + c) * d.N + n) * d.P;
    A st = 0;
    for (int64_t pp = 0; pp < d.P; ++pp) st += dh[pp] * to_acc<A>(xs[pp]);
    const A css = cs[bh * d.L + l];
    st *= exp(cs[bh * d.L + t1 - 1] - css) * dte[bh * d.L + l];
    A intra = 0;
    for (int64_t lt = l; lt < t1; ++lt)
      intra += exp(cs[bh * d.L + lt] - css) * S[((bh * d.nc + c) * d.Q + (lt - t0)) * d.Q + s] *
               to_acc<A>(Cp[b * p.C_bs + lt * p.C_ls + g * p.C_gs + n]);
    atomicAdd(&dB[((b * d.L + l) * d.G + g) * d.N + n], st + intra);
    atomicAdd(&dcs[bh * d.L + l], -to_acc<A>(Bp[b * p.B_bs + l * p.B_ls + g * p.B_gs + n]) * st);
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
    const auto n_state = d.Bn * d.H * d.nc * d.N * d.P;
    chunk_dstate<T, A><<<blocks_for(n_state, kThreads), kThreads, 0, st>>>(p, d, fw.cs, bw.dY, bw.dHend);
    MAMBAMT_CUDA_LAUNCH_CHECK("ssd chunk_dstate");
    dstate_pass<A><<<blocks_for(d.Bn * d.H * d.N * d.P, kThreads), kThreads, 0, st>>>(p, d, fw.cs, bw.dHend);
    MAMBAMT_CUDA_LAUNCH_CHECK("ssd dstate_pass");
    dots<T, A><<<blocks_for(d.Bn * d.H * d.nc * d.Q * d.Q, kThreads), kThreads, 0, st>>>(
        p, d, fw.dte, fw.cs, fw.CB, bw.dY, bw.S, bw.dcs);
    MAMBAMT_CUDA_LAUNCH_CHECK("ssd dots");
    du_kernel<T, A><<<blocks_for(n_out, kThreads), kThreads, 0, st>>>(p, d, fw.dte, fw.cs, fw.CB, bw.dY,
                                                                        bw.dHend, bw.ddte);
    MAMBAMT_CUDA_LAUNCH_CHECK("ssd du");
    const auto n_bc = d.Bn * d.H * d.L * d.N;
    dc_kernel<T, A><<<blocks_for(n_bc, kThreads), kThreads, 0, st>>>(p, d, fw.dte, fw.cs, bw.S, bw.dY, fw.Hst, bw.dcs);
    MAMBAMT_CUDA_LAUNCH_CHECK("ssd dC");
    db_kernel<T, A><<<blocks_for(n_bc, kThreads), kThreads, 0, st>>>(p, d, fw.dte, fw.cs, bw.S, bw.dHend, bw.dcs);
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
