// CPU SSD (Mamba-2) scan: forward, backward and decode step.
//
// Why the chunked form: per position and head the recurrence does P*N
// multiply-adds for the state, P*N for the output and reloads the (P,N) state
// from L1 every step (a scalar C++ loop ran at 12% of sgemm here). The chunked
// (state-space dual) form over blocks of T = 32 positions turns the same work
// into small dense products that keep their operands in registers:
//   Y     = [L | diag(e^cs) C] [X ; S]     (T x (T+N)) (T+N x P)    outputs
//   S_end = e^cs_T S + (decay*dt*B)^T X     (N x T)(T x P)           state
// so 2*P*N + T*P multiply-adds per position, all in cpu/simd.h's register-
// blocked gemm, with the exponentials vectorised. L[t,s] = (C_t.B_s) e^(cs_t-cs_s)
// dt_s for s <= t; C_t.B_s is shared by the heads of a group and computed
// once. The backward pass recomputes the states from checkpoints saved by the
// forward pass every kSsdCheckpointLen positions and runs the chunks in
// reverse with the same products (see ssd_backward below for the formulas).
//
// Layouts: forward states are (N, Pp) (n-major, P padded to kPadFloats) so
// that both products read P-wide rows; backward states and state gradients are
// (P, Np), the API's (P,N) layout padded, which the contractions over P need.
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/cpu.h"
#include "kernels/cpu/common.h"

namespace mambamt::kernels::cpu {
namespace {

using detail::SsdBwdParams;
using detail::SsdParams;
using detail::SsdStepParams;

constexpr int64_t T = 32;  // positions per block

constexpr int64_t kChunksPerCkpt = detail::kSsdCheckpointLen / T;
static_assert(detail::kSsdCheckpointLen % T == 0, "checkpoints must fall on block starts");

struct Dims {
  int64_t Bn, L, H, P, G, N, hpg, Pp, Np, nc, nck;
  explicit Dims(const SsdParams& p)
      : Bn(p.batch), L(p.seqlen), H(p.nheads), P(p.headdim), G(p.ngroups), N(p.dstate),
        hpg(p.nheads / p.ngroups), Pp(pad_to_vector(p.headdim)), Np(pad_to_vector(p.dstate)),
        nc((p.seqlen + T - 1) / T),
        nck((p.seqlen + detail::kSsdCheckpointLen - 1) / detail::kSsdCheckpointLen) {}
};

// Element pointers into the strided inputs.
template <typename S>
struct Inputs {
  const SsdParams& p;
  const S* x(int64_t b, int64_t l, int64_t h) const {
    return static_cast<const S*>(p.x) + b * p.x_bs + l * p.x_ls + h * p.x_hs;
  }
  const S* z(int64_t b, int64_t l, int64_t h) const {
    return static_cast<const S*>(p.z) + b * p.z_bs + l * p.z_ls + h * p.z_hs;
  }
  const S* B(int64_t b, int64_t l, int64_t g) const {
    return static_cast<const S*>(p.B) + b * p.B_bs + l * p.B_ls + g * p.B_gs;
  }
  const S* C(int64_t b, int64_t l, int64_t g) const {
    return static_cast<const S*>(p.C) + b * p.C_bs + l * p.C_ls + g * p.C_gs;
  }
  bool real(int64_t b, int64_t l) const { return !p.mask || p.mask[b * p.seqlen + l]; }
};

// Effective dt of one block and its cumulative log-decay.
template <typename S>
struct Decay {
  int64_t len = 0;  // positions in this block (T, or fewer in the last one)
  S dte[T];         // softplus(dt + bias), 0 at padding
  S grad[T];        // d dte / d dt
  S cs[T];          // inclusive cumulative sum of dte * A (held constant past len)
};

// softplus(dt + bias) and its derivative for every (b, l, h), once per call:
// the scalar log1p/exp would otherwise be paid again for every block pass.
template <typename S>
struct EffectiveDt {
  std::vector<S> dte, grad;  // (B,L,H)
  EffectiveDt(const SsdParams& p, const Ops<S>& ops) : dte(p.batch * p.seqlen * p.nheads), grad(dte.size()) {
    const S* dt = static_cast<const S*>(p.dt);
    const S* bias = static_cast<const S*>(p.dt_bias);
    const int64_t H = p.nheads;
    at::parallel_for(0, p.batch * p.seqlen, 256, [&](int64_t begin, int64_t end) {
      S* e = dte.data() + begin * H;
      S* g = grad.data() + begin * H;
      const int64_t n = (end - begin) * H;
      for (int64_t i = 0; i < n; ++i) e[i] = dt[begin * H + i] + (bias ? bias[i % H] : S(0));
      if (p.dt_softplus) ops.softplus(e, e, g, n);
      else std::fill(g, g + n, S(1));
      if (p.mask) {
        for (int64_t bl = begin; bl < end; ++bl)
          if (!p.mask[bl]) {
            std::fill_n(dte.data() + bl * H, H, S(0));
            std::fill_n(grad.data() + bl * H, H, S(0));
          }
      }
    });
  }
};

template <typename S>
MAMBAMT_INLINE void compute_decay(const SsdParams& p, const EffectiveDt<S>& edt, int64_t b,
                                  int64_t h, int64_t t0, S A, Decay<S>& d) {
  d.len = std::min(T, p.seqlen - t0);
  S run = 0;
  for (int64_t t = 0; t < T; ++t) {
    S e = 0, g = 0;
    if (t < d.len) {
      const int64_t i = (b * p.seqlen + t0 + t) * p.nheads + h;
      e = edt.dte[i];
      g = edt.grad[i];
    }
    d.dte[t] = e;
    d.grad[t] = g;
    run += e * A;
    d.cs[t] = run;
  }
}

// Exponentials of a block, in one vectorised call:
//   E[t*T+s] = e^(cs_t - cs_s) for s <= t (0 above the diagonal),
//   ec[t] = e^cs_t (decay from the block start), eb[s] = e^(cs_last - cs_s).
template <typename S>
struct BlockExp {
  S buf[T * T + 2 * T];
  const S* E() const { return buf; }
  const S* ec() const { return buf + T * T; }
  const S* eb() const { return buf + T * T + T; }
  // Whole rows with selects instead of loops up to the diagonal, so that they
  // vectorise: above the diagonal the exponent is 0 (no overflow) and the
  // result is masked to 0 after the exp.
  MAMBAMT_INLINE void compute(const Ops<S>& ops, const Decay<S>& d) {
    const S last = d.cs[d.len - 1];
    for (int64_t t = 0; t < T; ++t) {
      const S ct = d.cs[t];
      S* row = buf + t * T;
      for (int64_t s = 0; s < T; ++s) row[s] = s <= t ? ct - d.cs[s] : S(0);
    }
    for (int64_t t = 0; t < T; ++t) {
      buf[T * T + t] = d.cs[t];
      buf[T * T + T + t] = last - d.cs[t];
    }
    ops.exp(buf, buf, T * T + 2 * T);
    for (int64_t t = 0; t < T; ++t) {
      S* row = buf + t * T;
      for (int64_t s = 0; s < T; ++s) row[s] = s <= t ? row[s] : S(0);
    }
  }
};

// C_t.B_s of every block and group, shared by the group's heads:
// CB (B,G,nc,T,T).
template <typename S>
void group_products(const SsdParams& p, const Dims& d, const Ops<S>& ops, std::vector<S>& CB) {
  const Inputs<S> in{p};
  const int64_t tasks = d.Bn * d.G * d.nc;
  CB.assign(tasks * T * T, S(0));
  at::parallel_for(0, tasks, 16, [&](int64_t begin, int64_t end) {
    std::vector<S> bt(d.Np * T);
    for (int64_t i = begin; i < end; ++i) {
      const int64_t b = i / (d.G * d.nc), g = (i / d.nc) % d.G, c = i % d.nc;
      const int64_t t0 = c * T, len = std::min(T, d.L - t0);
      std::fill(bt.begin(), bt.end(), S(0));
      for (int64_t s = 0; s < len; ++s) {
        const S* row = in.B(b, t0 + s, g);
        for (int64_t n = 0; n < d.N; ++n) bt[n * T + s] = row[n];
      }
      ops.gemm(len, d.N, T, in.C(b, t0, g), p.C_ls, 1, bt.data(), T, CB.data() + i * T * T, T, S(0));
    }
  });
}

inline int64_t grain(int64_t tasks) { return std::max<int64_t>(1, tasks / (8 * at::get_num_threads())); }

// ----------------------------------------------------------------- forward
//
// A task is one batch row and a block of heads, walked block by block with
// the heads innermost: the block's rows of x and y are then read and written
// in long runs, and B and C rows serve all its heads while in cache.

template <typename S>
struct FwdWork {
  std::vector<S> XH, LC, Yb, Bs, tmp;  // XH: per head [X rows (T) ; state rows (N)] x Pp
  FwdWork(const Dims& d, int64_t heads)
      : XH(heads * (T + d.N) * d.Pp), LC(T * (T + d.N)), Yb(T * d.Pp), Bs(T * d.N), tmp(2 * d.Pp) {}
};

template <typename S>
MAMBAMT_INLINE void forward_block(const SsdParams& p, const Dims& d, const Ops<S>& ops, const S* CB,
                                  const EffectiveDt<S>& edt, int64_t b, int64_t h0, int64_t h1,
                                  FwdWork<S>& w) {
  const Inputs<S> in{p};
  const S* A_log = static_cast<const S*>(p.A_log);
  const int64_t K1 = T + d.N;  // columns of [L | C']
  const int64_t head_buf = (T + d.N) * d.Pp;
  Decay<S> dec;
  BlockExp<S> ex;
  std::fill(w.XH.begin(), w.XH.end(), S(0));
  for (int64_t h = h0; h < h1; ++h) {
    S* Hs = w.XH.data() + (h - h0) * head_buf + T * d.Pp;  // state (N, Pp) below the X rows
    if (p.initial_state) {
      const S* s0 = static_cast<const S*>(p.initial_state) + (b * d.H + h) * d.P * d.N;
      for (int64_t pp = 0; pp < d.P; ++pp)
        for (int64_t n = 0; n < d.N; ++n) Hs[n * d.Pp + pp] = s0[pp * d.N + n];
    }
  }
  for (int64_t c = 0; c < d.nc; ++c) {
    const int64_t t0 = c * T;
    if (t0 + T < d.L) {
      const int64_t n1 = std::min(T, d.L - t0 - T);
      for (int64_t h = h0; h < h1; ++h) {
        prefetch_rows(in.x(b, t0 + T, h), p.x_ls, n1, d.P, false);
        if (p.z) prefetch_rows(in.z(b, t0 + T, h), p.z_ls, n1, d.P, false);
      }
    }
    for (int64_t h = h0; h < h1; ++h) {
      const int64_t g = h / d.hpg;
      const S A = -std::exp(A_log[h]);
      const S Dh = p.D ? static_cast<const S*>(p.D)[h] : S(0);
      S* XH = w.XH.data() + (h - h0) * head_buf;
      S* Hs = XH + T * d.Pp;
      if (p.checkpoints && t0 % detail::kSsdCheckpointLen == 0) {
        S* ck = static_cast<S*>(p.checkpoints) +
                ((b * d.H + h) * d.nck + t0 / detail::kSsdCheckpointLen) * d.P * d.N;
        for (int64_t pp = 0; pp < d.P; ++pp)
          for (int64_t n = 0; n < d.N; ++n) ck[pp * d.N + n] = Hs[n * d.Pp + pp];
      }
      compute_decay<S>(p, edt, b, h, t0, A, dec);
      const int64_t len = dec.len;
      ex.compute(ops, dec);
      for (int64_t t = 0; t < T; ++t) {
        S* row = XH + t * d.Pp;
        if (t < len) std::memcpy(row, in.x(b, t0 + t, h), d.P * sizeof(S));
        else std::fill(row, row + d.P, S(0));
      }
      // [L | diag(e^cs) C]
      const S* cb = CB + ((b * d.G + g) * d.nc + c) * T * T;
      for (int64_t t = 0; t < len; ++t) {
        S* row = w.LC.data() + t * K1;
        for (int64_t s = 0; s < T; ++s) row[s] = cb[t * T + s] * ex.E()[t * T + s] * dec.dte[s];
        const S* crow = in.C(b, t0 + t, g);
        const S f = ex.ec()[t];
        for (int64_t n = 0; n < d.N; ++n) row[T + n] = f * crow[n];
      }
      ops.gemm(len, K1, d.Pp, w.LC.data(), K1, 1, XH, d.Pp, w.Yb.data(), d.Pp, S(0));
      // Epilogue: + D x, padding, gate.
      for (int64_t t = 0; t < len; ++t) {
        const int64_t l = t0 + t;
        S* yrow = static_cast<S*>(p.y) + ((b * d.L + l) * d.H + h) * d.P;
        S* ypre = p.y_pregate ? static_cast<S*>(p.y_pregate) + ((b * d.L + l) * d.H + h) * d.P : nullptr;
        if (!in.real(b, l)) {
          std::fill(yrow, yrow + d.P, S(0));
          if (ypre) std::fill(ypre, ypre + d.P, S(0));
          continue;
        }
        const S* xrow = XH + t * d.Pp;
        const S* yb = w.Yb.data() + t * d.Pp;
        if (!p.z) {
          for (int64_t pp = 0; pp < d.P; ++pp) yrow[pp] = yb[pp] + Dh * xrow[pp];
          continue;
        }
        const S* zrow = in.z(b, l, h);
        S* v = w.tmp.data();
        S* ez = w.tmp.data() + d.Pp;
        for (int64_t pp = 0; pp < d.P; ++pp) {
          v[pp] = yb[pp] + Dh * xrow[pp];
          ez[pp] = -zrow[pp];
        }
        if (ypre) std::memcpy(ypre, v, d.P * sizeof(S));
        ops.exp(ez, ez, d.P);
        for (int64_t pp = 0; pp < d.P; ++pp) yrow[pp] = v[pp] * zrow[pp] / (S(1) + ez[pp]);
      }
      // State update: S = e^cs_last S + (eb * dt * B)^T X.
      for (int64_t s = 0; s < len; ++s) {
        const S f = ex.eb()[s] * dec.dte[s];
        const S* brow = in.B(b, t0 + s, g);
        for (int64_t n = 0; n < d.N; ++n) w.Bs[s * d.N + n] = f * brow[n];
      }
      ops.gemm(d.N, len, d.Pp, w.Bs.data(), 1, d.N, XH, d.Pp, Hs, d.Pp, ex.ec()[len - 1]);
    }
  }
  if (p.final_state) {
    for (int64_t h = h0; h < h1; ++h) {
      const S* Hs = w.XH.data() + (h - h0) * head_buf + T * d.Pp;
      S* fs = static_cast<S*>(p.final_state) + (b * d.H + h) * d.P * d.N;
      for (int64_t pp = 0; pp < d.P; ++pp)
        for (int64_t n = 0; n < d.N; ++n) fs[pp * d.N + n] = Hs[n * d.Pp + pp];
    }
  }
}

#define MAMBAMT_FWD_ARGS                                                                       \
  const SsdParams &p, const Dims &d, const Ops<float> &ops, const float *CB,                   \
      const EffectiveDt<float> &edt, int64_t b, int64_t h0, int64_t h1, FwdWork<float> &w
void forward_block_base(MAMBAMT_FWD_ARGS) { forward_block<float>(p, d, ops, CB, edt, b, h0, h1, w); }
#ifdef MAMBAMT_ISA_VARIANTS
MAMBAMT_TARGET_AVX512 void forward_block_avx512(MAMBAMT_FWD_ARGS) {
  forward_block<float>(p, d, ops, CB, edt, b, h0, h1, w);
}
MAMBAMT_TARGET_AVX2 void forward_block_avx2(MAMBAMT_FWD_ARGS) {
  forward_block<float>(p, d, ops, CB, edt, b, h0, h1, w);
}
#endif

void forward_block_any(MAMBAMT_FWD_ARGS) {
#ifdef MAMBAMT_ISA_VARIANTS
  if (isa_level() == 2) return forward_block_avx512(p, d, ops, CB, edt, b, h0, h1, w);
  if (isa_level() == 1) return forward_block_avx2(p, d, ops, CB, edt, b, h0, h1, w);
#endif
  forward_block_base(p, d, ops, CB, edt, b, h0, h1, w);
}

void forward_block_any(const SsdParams& p, const Dims& d, const Ops<double>& ops, const double* CB,
                       const EffectiveDt<double>& edt, int64_t b, int64_t h0, int64_t h1,
                       FwdWork<double>& w) {
  forward_block<double>(p, d, ops, CB, edt, b, h0, h1, w);
}

// Heads per task: whole blocks of up to 8 heads, small enough for the
// states to stay in L2, while leaving at least 4 tasks per thread.
inline int64_t heads_per_task(const Dims& d) {
  const int64_t threads = at::get_num_threads();
  int64_t hb = std::min<int64_t>(8, d.H);
  while (hb > 1 && d.Bn * ((d.H + hb - 1) / hb) < 4 * threads) hb /= 2;
  return hb;
}

template <typename S>
void forward_impl(const SsdParams& p) {
  const Dims d(p);
  const Ops<S> ops;
  const int64_t act_bytes = d.Bn * d.L * d.H * d.P * int64_t(sizeof(S));
  advise_huge_pages(p.y, act_bytes);
  advise_huge_pages(p.y_pregate, act_bytes);
  advise_huge_pages(p.checkpoints, d.Bn * d.H * d.nck * d.P * d.N * int64_t(sizeof(S)));
  std::vector<S> CB;
  group_products<S>(p, d, ops, CB);
  const EffectiveDt<S> edt(p, ops);
  const int64_t hb = heads_per_task(d), nblk = (d.H + hb - 1) / hb;
  parallel_tasks(d.Bn * nblk, [&] { return FwdWork<S>(d, hb); }, [&](FwdWork<S>& w, int64_t task) {
    const int64_t b = task / nblk, h0 = (task % nblk) * hb, h1 = std::min(d.H, h0 + hb);
    forward_block_any(p, d, ops, CB.data(), edt, b, h0, h1, w);
  });
}

// ---------------------------------------------------------------- backward
//
// Per block, with u_s = dt_s x_s, M[t,s] = e^(cs_t - cs_s) (s <= t), H0 / H1
// the states at the block's start / end, dH1 the gradient of H1 and dY the
// gradient of the block's y before D and the gate:
//   du_s   = sum_{t>=s} M[t,s] (C_t.B_s) dY_t + e^(cs_T-cs_s) dH1 B_s
//   dC_t   = e^cs_t H0^T dY_t + sum_{s<=t} M[t,s] (dY_t.u_s) B_s
//   dB_s   = e^(cs_T-cs_s) dH1^T u_s + sum_{t>=s} M[t,s] (dY_t.u_s) C_t
//   dH0    = e^cs_T dH1 + sum_t e^cs_t dY_t C_t^T
//   dcs_t  = C_t.dC_t - B_t.dB_t + [t = last] <dH1, H1>
//            (this head's dB, dC: the intra-block sums over s<t and r>t of
//            W[t,s] = M[t,s] (C_t.B_s) (dY_t.u_s) are C_t.dC_t and B_t.dB_t
//            less their common diagonal)
//   d(dt_t A) = sum_{r>=t} dcs_r;  dx = dt du + D dY;  ddt = x.du + A d(dt A).
// As products: with S = dY u^T,
//   dC = (M o S) B + diag(e^cs) dY H0,   dB = (M o S)^T C + diag(e^(cs_T-cs)) u dH1,
//   du = [diag(e^(cs_T-cs)) B | (M o CB)^T] [dH1^T ; dY]  (one product along K),
//   dH0 = e^cs_T dH1 + (diag(e^cs) dY)^T C.
// B and C rows of a segment are packed once per task and shared by its heads.

template <typename S>
struct BwdWork {
  std::vector<S> Hs, XP, XT, dHTdY, AC, AB, AU, Sm, dCh, dBh, dU, Bs, tmp;
  std::vector<Decay<S>> dec;
  explicit BwdWork(const Dims& d)
      : Hs((kChunksPerCkpt + 1) * d.Pp * d.Np), XP(kChunksPerCkpt * T * d.Pp), XT(d.Pp * T),
        dHTdY((d.Np + T) * d.Pp), AC(T * (T + d.Pp)), AB(T * d.Pp), AU(T * (d.Np + T)),
        Sm(T * T), dCh(T * d.Np), dBh(T * d.Np), dU(T * d.Pp), Bs(T * d.Np), tmp(2 * d.Pp),
        dec(kChunksPerCkpt) {}
};

// One checkpoint segment of one head: recompute its block-start states, then
// run its blocks in reverse. dH (Pp, Np) carries the state gradient from the
// segment's end to its start; Bseg, Cseg (kSsdCheckpointLen, Np) are the
// segment's B and C rows (zero past L); dA_acc, dD_acc collect the head's sums.
template <typename S>
MAMBAMT_INLINE void backward_segment(const SsdBwdParams& p, const Dims& d, const Ops<S>& ops,
                                     const S* CBall, const EffectiveDt<S>& edt,
                                     int64_t b, int64_t h, int64_t seg, S* dH, const S* Bseg,
                                     const S* Cseg, S* dA_acc, S* dD_acc, S* dBout, S* dCout,
                                     BwdWork<S>& w) {
  const Inputs<S> in{p};
  const int64_t g = h / d.hpg;
  const S A = -std::exp(static_cast<const S*>(p.A_log)[h]);
  const S Dh = p.D ? static_cast<const S*>(p.D)[h] : S(0);
  const int64_t PNp = d.P * d.Np, HS = d.Pp * d.Np, ldA = T + d.Pp, ldU = d.Np + T;
  S* dY = w.dHTdY.data() + d.Np * d.Pp;  // (T, Pp) below dH^T
  S dA_sum = 0, dD_sum = 0;
  BlockExp<S> ex;
  const int64_t c0 = seg * kChunksPerCkpt, nj = std::min(kChunksPerCkpt, d.nc - c0);
  // Recompute the states at every block start of the segment, and one past its end.
  {
    const S* ck = static_cast<const S*>(p.checkpoints) + ((b * d.H + h) * d.nck + seg) * d.P * d.N;
    for (int64_t pp = 0; pp < d.P; ++pp) std::memcpy(&w.Hs[pp * d.Np], ck + pp * d.N, d.N * sizeof(S));
  }
  for (int64_t j = 0; j < nj; ++j) {
    const int64_t t0 = (c0 + j) * T;
    Decay<S>& dec = w.dec[j];
    compute_decay<S>(p, edt, b, h, t0, A, dec);
    const int64_t len = dec.len;
    if (j + 1 < nj) {
      prefetch_rows(in.x(b, t0 + T, h), p.x_ls, std::min(T, d.L - t0 - T), d.P, false);
    } else {  // the reverse pass starts here
      const int64_t off = ((b * d.L + t0) * d.H + h) * d.P, rs = d.H * d.P;
      prefetch_rows(static_cast<const S*>(p.dout) + off, rs, len, d.P, false);
      if (p.z) {
        prefetch_rows(in.z(b, t0, h), p.z_ls, len, d.P, false);
        prefetch_rows(static_cast<const S*>(p.y_pregate) + off, rs, len, d.P, false);
      }
    }
    S* X = w.XP.data() + j * T * d.Pp;
    for (int64_t t = 0; t < len; ++t) std::memcpy(X + t * d.Pp, in.x(b, t0 + t, h), d.P * sizeof(S));
    for (int64_t t = len; t < T; ++t) std::fill(X + t * d.Pp, X + t * d.Pp + d.P, S(0));
    const S last = dec.cs[len - 1];
    S f[T];
    for (int64_t s = 0; s < len; ++s) f[s] = last - dec.cs[s];
    ops.exp(f, f, len);
    const S* Bb = Bseg + j * T * d.Np;
    for (int64_t s = 0; s < len; ++s) {
      const S fs = f[s] * dec.dte[s];
      for (int64_t n = 0; n < d.Np; ++n) w.Bs[s * d.Np + n] = fs * Bb[s * d.Np + n];
    }
    const S* H0 = w.Hs.data() + j * HS;
    S* H1 = w.Hs.data() + (j + 1) * HS;
    std::memcpy(H1, H0, PNp * sizeof(S));
    ops.gemm(d.P, len, d.Np, X, 1, d.Pp, w.Bs.data(), d.Np, H1, d.Np, std::exp(last));
  }
  // The blocks of the segment in reverse.
  for (int64_t j = nj - 1; j >= 0; --j) {
    const int64_t c = c0 + j, t0 = c * T;
    const Decay<S>& dec = w.dec[j];
    const int64_t len = dec.len;
    const S* X = w.XP.data() + j * T * d.Pp;
    const S* H0 = w.Hs.data() + j * HS;
    const S* H1 = w.Hs.data() + (j + 1) * HS;
    const S* Bb = Bseg + j * T * d.Np;
    const S* Cb = Cseg + j * T * d.Np;
    if (j == 0 && h + 1 < d.H) {  // the next head starts on this segment's x rows
      prefetch_rows(in.x(b, c0 * T, h + 1), p.x_ls, std::min(T, d.L - c0 * T), d.P, false);
    } else if (t0 > 0) {  // the previous block's rows, needed next
      const int64_t off = ((b * d.L + t0 - T) * d.H + h) * d.P, rs = d.H * d.P;
      prefetch_rows(static_cast<const S*>(p.dout) + off, rs, T, d.P, false);
      if (p.z) {
        prefetch_rows(in.z(b, t0 - T, h), p.z_ls, T, d.P, false);
        prefetch_rows(static_cast<const S*>(p.y_pregate) + off, rs, T, d.P, false);
      }
    }
    ex.compute(ops, dec);
    const S* E = ex.E();
    const S* ec = ex.ec();
    const S* eb = ex.eb();

    // dY (the gradient of y before D, padding and the gate) and e^cs dY.
    for (int64_t t = 0; t < T; ++t) {
      const int64_t l = t0 + t;
      S* dy = dY + t * d.Pp;
      S* edy = w.AC.data() + t * ldA + T;
      if (t >= len || !in.real(b, l)) {
        std::fill(dy, dy + d.P, S(0));
        std::fill(edy, edy + d.P, S(0));
        if (t < len && p.dz) {
          S* dz = static_cast<S*>(p.dz) + ((b * d.L + l) * d.H + h) * d.P;
          std::fill(dz, dz + d.P, S(0));
        }
        continue;
      }
      const int64_t off = ((b * d.L + l) * d.H + h) * d.P;
      const S* go = static_cast<const S*>(p.dout) + off;
      const S* xr = X + t * d.Pp;
      const S f = ec[t];
      if (p.z) {
        const S* zrow = in.z(b, l, h);
        const S* ypre = static_cast<const S*>(p.y_pregate) + off;
        S* dz = p.dz ? static_cast<S*>(p.dz) + off : nullptr;
        S* sg = w.tmp.data();
        for (int64_t pp = 0; pp < d.P; ++pp) sg[pp] = -zrow[pp];
        ops.exp(sg, sg, d.P);
        for (int64_t pp = 0; pp < d.P; ++pp) {
          const S sig = S(1) / (S(1) + sg[pp]), zv = zrow[pp];
          dy[pp] = go[pp] * zv * sig;
          if (dz) dz[pp] = go[pp] * ypre[pp] * sig * (S(1) + zv * (S(1) - sig));
        }
        for (int64_t pp = 0; pp < d.P; ++pp) edy[pp] = f * dy[pp];
      } else {
        for (int64_t pp = 0; pp < d.P; ++pp) {
          dy[pp] = go[pp];
          edy[pp] = f * go[pp];
        }
      }
      dD_sum += dot(dy, xr, d.P);
    }
    // S = dY x^T (scaled by dt_s inside M o S).
    ops.transpose(T, d.Pp, X, d.Pp, w.XT.data(), T);
    ops.gemm(len, d.P, T, dY, d.Pp, 1, w.XT.data(), T, w.Sm.data(), T, S(0));

    // Left operands: AC = [M o S | e^cs dY], AB = e^(cs_T-cs) u,
    // AU = [e^(cs_T-cs) B | (M o CB)^T]; zero past len.
    const S* cb = CBall + ((b * d.G + g) * d.nc + c) * T * T;
    for (int64_t t = 0; t < T; ++t) {
      S* ac = w.AC.data() + t * ldA;
      const S* sm = w.Sm.data() + t * T;
      if (t < len) {
        for (int64_t s = 0; s < T; ++s) ac[s] = E[t * T + s] * sm[s] * dec.dte[s];
      } else {
        std::fill(ac, ac + T, S(0));
      }
    }
    // (M o CB)^T by a vector transpose (Sm is free once AC holds M o S); the
    // (M o S)^T columns of AB are not stored: dB's product reads AC transposed.
    for (int64_t i = 0; i < T * T; ++i) w.Sm[i] = E[i] * cb[i];
    ops.transpose(T, T, w.Sm.data(), T, w.AU.data() + d.Np, ldU);
    for (int64_t s = 0; s < T; ++s) {
      S* ab = w.AB.data() + s * d.Pp;
      S* au = w.AU.data() + s * ldU;
      const S* xr = X + s * d.Pp;
      const S fu = eb[s] * dec.dte[s];
      for (int64_t pp = 0; pp < d.P; ++pp) ab[pp] = fu * xr[pp];
      const S fb = s < len ? eb[s] : S(0);
      for (int64_t n = 0; n < d.Np; ++n) au[n] = fb * Bb[s * d.Np + n];
    }

    ops.gemm(len, T, d.Np, w.AC.data(), ldA, 1, Bb, d.Np, w.dCh.data(), d.Np, S(0));
    ops.gemm(len, d.P, d.Np, w.AC.data() + T, ldA, 1, H0, d.Np, w.dCh.data(), d.Np, S(1));
    ops.gemm(len, T, d.Np, w.AC.data(), 1, ldA, Cb, d.Np, w.dBh.data(), d.Np, S(0));
    ops.gemm(len, d.P, d.Np, w.AB.data(), d.Pp, 1, dH, d.Np, w.dBh.data(), d.Np, S(1));
    ops.transpose(d.Pp, d.Np, dH, d.Np, w.dHTdY.data(), d.Pp);
    ops.gemm(len, d.Np + T, d.Pp, w.AU.data(), ldU, 1, w.dHTdY.data(), d.Pp, w.dU.data(), d.Pp, S(0));

    // Gradient of the cumulative log-decay; dC, dB of the group.
    S dcs[T];
    for (int64_t t = 0; t < len; ++t) {
      const S* dc = w.dCh.data() + t * d.Np;
      const S* db = w.dBh.data() + t * d.Np;
      S* outc = dCout + ((b * d.L + t0 + t) * d.G + g) * d.N;
      S* outb = dBout + ((b * d.L + t0 + t) * d.G + g) * d.N;
      const S* crow = Cb + t * d.Np;
      const S* brow = Bb + t * d.Np;
      S v = 0;
      for (int64_t n = 0; n < d.N; ++n) {
        v += crow[n] * dc[n] - brow[n] * db[n];
        outc[n] += dc[n];
        outb[n] += db[n];
      }
      dcs[t] = v;
    }
    dcs[len - 1] += dot(dH, H1, PNp);
    // dx, ddt, dA.
    S dl = 0;
    S* ddt = static_cast<S*>(p.ddt);
    for (int64_t s = len - 1; s >= 0; --s) {
      dl += dcs[s];
      const int64_t l = t0 + s;
      const S* dy = dY + s * d.Pp;
      const S* du = w.dU.data() + s * d.Pp;
      S* dx = static_cast<S*>(p.dx) + ((b * d.L + l) * d.H + h) * d.P;
      const S dte = dec.dte[s];
      for (int64_t pp = 0; pp < d.P; ++pp) dx[pp] = dte * du[pp] + Dh * dy[pp];
      ddt[(b * d.L + l) * d.H + h] = (dot(X + s * d.Pp, du, d.P) + dl * A) * dec.grad[s];
      dA_sum += dl * dte;
    }
    // dH0 = e^cs_last dH1 + (e^cs dY)^T C.
    ops.gemm(d.P, len, d.Np, w.AC.data() + T, 1, ldA, Cb, d.Np, dH, d.Np, ec[len - 1]);
  }
  *dA_acc += dA_sum;
  *dD_acc += dD_sum;
}

#define MAMBAMT_BWD_ARGS                                                                      \
  const SsdBwdParams &p, const Dims &d, const Ops<float> &ops, const float *CB,                  \
      const EffectiveDt<float> &edt, int64_t b, int64_t h, int64_t seg, float *dH,              \
      const float *Bseg, const float *Cseg, float *dA_acc, float *dD_acc, float *dB, float *dC, \
      BwdWork<float> &w
#define MAMBAMT_BWD_CALL p, d, ops, CB, edt, b, h, seg, dH, Bseg, Cseg, dA_acc, dD_acc, dB, dC, w
void backward_segment_base(MAMBAMT_BWD_ARGS) { backward_segment<float>(MAMBAMT_BWD_CALL); }
#ifdef MAMBAMT_ISA_VARIANTS
MAMBAMT_TARGET_AVX512 void backward_segment_avx512(MAMBAMT_BWD_ARGS) {
  backward_segment<float>(MAMBAMT_BWD_CALL);
}
MAMBAMT_TARGET_AVX2 void backward_segment_avx2(MAMBAMT_BWD_ARGS) {
  backward_segment<float>(MAMBAMT_BWD_CALL);
}
#endif

void backward_segment_any(MAMBAMT_BWD_ARGS) {
#ifdef MAMBAMT_ISA_VARIANTS
  if (isa_level() == 2) return backward_segment_avx512(MAMBAMT_BWD_CALL);
  if (isa_level() == 1) return backward_segment_avx2(MAMBAMT_BWD_CALL);
#endif
  backward_segment_base(MAMBAMT_BWD_CALL);
}

void backward_segment_any(const SsdBwdParams& p, const Dims& d, const Ops<double>& ops,
                          const double* CB, const EffectiveDt<double>& edt, int64_t b, int64_t h,
                          int64_t seg, double* dH, const double* Bseg, const double* Cseg,
                          double* dA_acc, double* dD_acc, double* dB, double* dC,
                          BwdWork<double>& w) {
  backward_segment<double>(MAMBAMT_BWD_CALL);
}

template <typename S>
void backward_impl(const SsdBwdParams& p) {
  const Dims d(p);
  const Ops<S> ops;
  const int64_t act_bytes = d.Bn * d.L * d.H * d.P * int64_t(sizeof(S));
  advise_huge_pages(p.dx, act_bytes);
  advise_huge_pages(p.dz, act_bytes);
  std::vector<S> CB;
  group_products<S>(p, d, ops, CB);
  const EffectiveDt<S> edt(p, ops);
  const Inputs<S> in{p};
  // Tasks: (batch, group, slice of the group's heads). dB and dC sum over the
  // heads of a group, so a task owns its rows; when there are fewer (batch,
  // group) pairs than threads, the heads are split and each slice sums into its
  // own buffer, added up at the end.
  const int64_t threads = at::get_num_threads();
  const int64_t pairs = d.Bn * d.G;
  const int64_t splits = std::min<int64_t>(d.hpg, std::max<int64_t>(1, (2 * threads + pairs - 1) / pairs));
  const int64_t rows = d.Bn * d.L * d.G * d.N;
  const int64_t nseg = (d.nc + kChunksPerCkpt - 1) / kChunksPerCkpt;
  constexpr int64_t SL = detail::kSsdCheckpointLen;
  std::vector<S> extra((splits - 1) * 2 * rows, S(0));
  S* dB = static_cast<S*>(p.dB);
  S* dC = static_cast<S*>(p.dC);
  // Per thread: work buffers; dH of every head of a task, (Pp, Np) with zero
  // padding rows (transposed whole); the head sums; a segment's B and C rows.
  const int64_t HS = d.Pp * d.Np, max_heads = d.hpg / splits + 1;
  struct Thread {
    BwdWork<S> w;
    std::vector<S> dHs, acc, Bseg, Cseg;
  };
  auto make = [&] {
    return Thread{BwdWork<S>(d), std::vector<S>(max_heads * HS), std::vector<S>(2 * max_heads),
                  std::vector<S>(SL * d.Np), std::vector<S>(SL * d.Np)};
  };
  parallel_tasks(pairs * splits, make, [&](Thread& th, int64_t task) {
    std::vector<S>&dHs = th.dHs, &acc = th.acc, &Bseg = th.Bseg, &Cseg = th.Cseg;
    const int64_t b = task / (d.G * splits), g = (task / splits) % d.G, sp = task % splits;
    S* dBt = sp == 0 ? dB : extra.data() + (sp - 1) * 2 * rows;
    S* dCt = sp == 0 ? dC : extra.data() + (sp - 1) * 2 * rows + rows;
    if (sp == 0) {
      for (int64_t l = 0; l < d.L; ++l) {
        std::fill_n(dBt + ((b * d.L + l) * d.G + g) * d.N, d.N, S(0));
        std::fill_n(dCt + ((b * d.L + l) * d.G + g) * d.N, d.N, S(0));
      }
    }
    // Segment by segment with the heads inside, so that B, C and the dB, dC
    // rows of a segment stay in cache for all the heads.
    const int64_t h0 = g * d.hpg + sp * d.hpg / splits, h1 = g * d.hpg + (sp + 1) * d.hpg / splits;
    const int64_t nh = h1 - h0;
    std::fill(dHs.begin(), dHs.begin() + nh * HS, S(0));
    std::fill(acc.begin(), acc.end(), S(0));
    for (int64_t h = h0; h < h1; ++h) {
      if (!p.dfinal_state) break;
      const S* src = static_cast<const S*>(p.dfinal_state) + (b * d.H + h) * d.P * d.N;
      for (int64_t pp = 0; pp < d.P; ++pp)
        std::memcpy(&dHs[(h - h0) * HS + pp * d.Np], src + pp * d.N, d.N * sizeof(S));
    }
    for (int64_t seg = nseg - 1; seg >= 0; --seg) {
      std::fill(Bseg.begin(), Bseg.end(), S(0));
      std::fill(Cseg.begin(), Cseg.end(), S(0));
      for (int64_t l = seg * SL; l < std::min(d.L, (seg + 1) * SL); ++l) {
        std::memcpy(&Bseg[(l - seg * SL) * d.Np], in.B(b, l, g), d.N * sizeof(S));
        std::memcpy(&Cseg[(l - seg * SL) * d.Np], in.C(b, l, g), d.N * sizeof(S));
      }
      for (int64_t h = h0; h < h1; ++h)
        backward_segment_any(p, d, ops, CB.data(), edt, b, h, seg, dHs.data() + (h - h0) * HS,
                             Bseg.data(), Cseg.data(), &acc[2 * (h - h0)], &acc[2 * (h - h0) + 1],
                             dBt, dCt, th.w);
    }
    for (int64_t h = h0; h < h1; ++h) {
      const S A = -std::exp(static_cast<const S*>(p.A_log)[h]);
      static_cast<S*>(p.dA_log_part)[b * d.H + h] = acc[2 * (h - h0)] * A;  // dA/dA_log = A
      if (p.dD_part) static_cast<S*>(p.dD_part)[b * d.H + h] = acc[2 * (h - h0) + 1];
      if (p.dinitial_state) {
        S* out = static_cast<S*>(p.dinitial_state) + (b * d.H + h) * d.P * d.N;
        for (int64_t pp = 0; pp < d.P; ++pp)
          std::memcpy(out + pp * d.N, &dHs[(h - h0) * HS + pp * d.Np], d.N * sizeof(S));
      }
    }
  });
  if (splits > 1) {
    at::parallel_for(0, rows, 4096, [&](int64_t begin, int64_t end) {
      for (int64_t sp = 1; sp < splits; ++sp) {
        const S* eb = extra.data() + (sp - 1) * 2 * rows;
        const S* ecc = eb + rows;
        for (int64_t i = begin; i < end; ++i) {
          dB[i] += eb[i];
          dC[i] += ecc[i];
        }
      }
    });
  }
}

// ------------------------------------------------------------- decode step

// Rows (batch, head) [begin, end): the state update and output of each
// channel in one pass over its N states (the micro-kernels' ssd_update); the
// gate's exps in vectorised calls over up to 64 channels.
template <typename S>
MAMBAMT_INLINE void step_rows(const SsdStepParams& p, const Ops<S>& ops, int64_t begin, int64_t end) {
  const int64_t H = p.nheads, P = p.headdim, N = p.dstate, hpg = p.nheads / p.ngroups;
  constexpr int64_t kChunk = 64;
  S v[kChunk], e[kChunk];
  for (int64_t task = begin; task < end; ++task) {
    const int64_t b = task / H, h = task % H, g = h / hpg;
    const S* x = static_cast<const S*>(p.x) + b * p.x_bs + h * P;
    S* y = static_cast<S*>(p.y) + task * P;
    if (p.mask && !p.mask[b]) {
      std::fill(y, y + P, S(0));
      continue;
    }
    S dte = static_cast<const S*>(p.dt)[b * p.dt_bs + h] + (p.dt_bias ? static_cast<const S*>(p.dt_bias)[h] : S(0));
    if (p.dt_softplus && dte <= S(20)) dte = std::log1p(std::exp(dte));
    const S decay = std::exp(-std::exp(static_cast<const S*>(p.A_log)[h]) * dte);
    const S Dh = p.D ? static_cast<const S*>(p.D)[h] : S(0);
    const S* Bv = static_cast<const S*>(p.B) + b * p.B_bs + g * N;
    const S* Cv = static_cast<const S*>(p.C) + b * p.C_bs + g * N;
    S* st = static_cast<S*>(p.state) + task * P * N;
    for (int64_t p0 = 0; p0 < P; p0 += kChunk) {
      const int64_t n = std::min(kChunk, P - p0);
      ops.ssd_update(n, N, decay, dte, Dh, x + p0, Bv, Cv, st + p0 * N, v);
      if (!p.z) {
        std::copy(v, v + n, y + p0);
        continue;
      }
      const S* z = static_cast<const S*>(p.z) + b * p.z_bs + h * P + p0;
      for (int64_t j = 0; j < n; ++j) e[j] = -z[j];
      ops.exp(e, e, n);
      for (int64_t j = 0; j < n; ++j) y[p0 + j] = v[j] * z[j] / (S(1) + e[j]);
    }
  }
}

MAMBAMT_RANGE_KERNEL(step_rows_any, SsdStepParams, step_rows)

template <typename S>
void step_impl(const SsdStepParams& p) {
  const Ops<S> ops;
  at::parallel_for(0, p.batch * p.nheads, grain(p.batch * p.nheads),
                   [&](int64_t begin, int64_t end) { step_rows_any(p, ops, begin, end); });
}

}  // namespace

void ssd_forward(const SsdParams& p) {
  if (p.dtype == detail::DType::kFloat64) forward_impl<double>(p);
  else forward_impl<float>(p);
}

void ssd_backward(const SsdBwdParams& p) {
  if (p.dtype == detail::DType::kFloat64) backward_impl<double>(p);
  else backward_impl<float>(p);
}

void ssd_step(const SsdStepParams& p) {
  if (p.dtype == detail::DType::kFloat64) step_impl<double>(p);
  else step_impl<float>(p);
}

}  // namespace mambamt::kernels::cpu
