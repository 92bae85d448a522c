#include "bench/kernels_bench.h"

#include "bench/bench.h"

#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <limits>
#include <thread>
#include <utility>

#include "core/error.h"
#include "kernels/isa.h"
#include "kernels/reference.h"
#include "kernels/selective_scan.h"
#include "kernels/ssd.h"

namespace mambamt::bench {

const char* const kKernelsBenchHelp =
    "SSM kernels at NMT shapes (B=8; L in 256,1024,4096; N in 16,64,128; SSD with H=16, P=64; Mamba-1 "
    "selective scan with d_inner=1024): (a) our kernel, (b) the best pure-LibTorch formulation "
    "(the Mamba-2 paper's chunked matmul form; SSD only), (c) the step-by-step LibTorch reference, "
    "forward and forward+backward, float32. Prints times (best of R), the ratios b/a and c/a, and "
    "GFLOP/s next to LibTorch's own sgemm GFLOP/s measured in the same run: (a), (b) and an sgemm "
    "run in R interleaved rounds per row, so that a machine whose speed drifts slows them alike, "
    "and the row's % sgemm is against the sgemm of its own rounds. (c) is skipped where it "
    "would take minutes or too much memory. Options: --quick (SSD at L=256,1024 with N=64, Mamba-1 at "
    "L=1024 with N=16,64; about 5 minutes on 2 cores, most of it in (c)), --threads N (default: all "
    "hardware threads), --repeat R (default 5).";

namespace {

using Clock = std::chrono::steady_clock;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

int64_t parse_int(const std::vector<std::string>& args, size_t& i, const std::string& name) {
  if (i + 1 >= args.size()) throw UsageError("bench kernels: " + name + " needs a value");
  const std::string& v = args[++i];
  char* end = nullptr;
  const long long n = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != 0 || n < 1)
    throw UsageError("bench kernels: " + name + " must be a positive integer, got '" + v + "'");
  return n;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

// The best time of each function over `rounds` rounds that call every one in
// turn: on a shared VM whose speed drifts over minutes (its sgemm gave 113 to
// 204 GFLOP/s from run to run), functions timed apart are timed on different
// machines; interleaved, a slow spell slows them alike.
std::vector<double> best_interleaved(int rounds, const std::vector<std::function<void()>>& fns) {
  std::vector<double> best(fns.size(), 1e300);
  for (int r = 0; r < rounds; ++r)
    for (size_t i = 0; i < fns.size(); ++i) {
      const auto t0 = Clock::now();
      fns[i]();
      best[i] = std::min(best[i], std::chrono::duration<double>(Clock::now() - t0).count());
    }
  return best;
}

double best_of(int repeat, const std::function<void()>& f) { return best_interleaved(repeat, {f})[0]; }

// LibTorch's large-matrix product: n x n by n x n, float32.
struct Sgemm {
  int64_t n;
  torch::Tensor a, b;
  explicit Sgemm(int64_t n_) : n(n_), a(torch::randn({n_, n_})), b(torch::randn({n_, n_})) { run(); }
  void run() const {
    torch::NoGradGuard g;
    torch::mm(a, b);
  }
  double gflops(double seconds) const { return 2.0 * n * n * n / seconds / 1e9; }
};

struct Row {
  Row(std::string op_, std::string shape_, std::string pass_)
      : op(std::move(op_)), shape(std::move(shape_)), pass(std::move(pass_)) {}
  std::string op, shape, pass;
  double a = kNaN, b = kNaN, c = kNaN;  // seconds
  double gemm = kNaN;                   // sgemm GFLOP/s in the rounds that timed a (and b)
  double flops = 0;
  std::string note;
};

// ------------------------------------------------------------------- SSD

namespace kn = mambamt::kernels;
using SsdFn = kn::SsdScanResult (*)(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&,
                                    const torch::Tensor&, const torch::Tensor&,
                                    const kn::SsdScanOptions&);

struct SsdProblem {
  torch::Tensor x, dt, A_log, B, C, D, dt_bias, gy;
  SsdProblem(int64_t b, int64_t l, int64_t h, int64_t p, int64_t n) {
    x = torch::randn({b, l, h, p});
    dt = torch::randn({b, l, h}) * 0.5 - 2.0;  // softplus: dt around 0.1
    A_log = torch::log(torch::rand({h}) * 15 + 1);
    B = torch::randn({b, l, 1, n});
    C = torch::randn({b, l, 1, n});
    D = torch::randn({h});
    dt_bias = torch::randn({h}) * 0.1;
    gy = torch::randn({b, l, h, p});
  }
  kn::SsdScanOptions options(int64_t chunk) const {
    kn::SsdScanOptions o;
    o.D = D;
    o.dt_bias = dt_bias;
    o.chunk_size = chunk;
    return o;
  }
  torch::Tensor forward(SsdFn f, int64_t chunk) const {
    torch::NoGradGuard g;
    return f(x, dt, A_log, B, C, options(chunk)).y;
  }
  void forward_backward(SsdFn f, int64_t chunk) const {
    std::vector<torch::Tensor> in = {x, dt, A_log, B, C, D, dt_bias};
    for (auto& t : in) t = t.detach().requires_grad_(true);
    kn::SsdScanOptions o = options(chunk);
    o.D = in[5];
    o.dt_bias = in[6];
    torch::Tensor y = f(in[0], in[1], in[2], in[3], in[4], o).y;
    torch::autograd::grad({y}, in, {gy});
  }
};

// The chunk length at which the LibTorch chunked form is fastest here.
int64_t best_chunk(int repeat) {
  SsdProblem pr(8, 1024, 16, 64, 64);
  int64_t best = 64;
  double best_t = 1e300;
  for (int64_t c : {32, 64, 128, 256}) {
    const double t = best_of(repeat, [&] { pr.forward(kn::reference::ssd_scan_chunked, c); });
    if (t < best_t) best_t = t, best = c;
  }
  return best;
}

void bench_ssd(int64_t L, int64_t N, int64_t chunk, int repeat, bool quick, const Sgemm& gemm,
               std::vector<Row>& rows) {
  const int64_t B = 8, H = 16, P = 64;
  SsdProblem pr(B, L, H, P, N);
  const double elems = double(B) * L * H * P * N;
  const std::string shape = "L=" + std::to_string(L) + " N=" + std::to_string(N);
  // (c) runs one position at a time; its backward keeps one (B,H,P,N) state
  // per position alive.
  const double c_bwd_bytes = double(B) * H * P * N * 4 * L * 1.5;
  const bool c_fwd = L <= (quick ? 1024 : 4096);
  const bool c_bwd = L <= 1024 && c_bwd_bytes < 8e9;
  const int rc = std::max(1, repeat / 3);

  Row f{"ssd", shape, "fwd"};
  f.flops = 4 * elems;
  pr.forward(kn::ssd_scan, chunk);  // warm-up
  {
    const auto t = best_interleaved(repeat, {[&] { pr.forward(kn::ssd_scan, chunk); },
                                             [&] { pr.forward(kn::reference::ssd_scan_chunked, chunk); },
                                             [&] { gemm.run(); }});
    f.a = t[0], f.b = t[1], f.gemm = gemm.gflops(t[2]);
  }
  if (c_fwd) f.c = best_of(rc, [&] { pr.forward(kn::reference::ssd_scan, chunk); });
  {
    torch::Tensor ya = pr.forward(kn::ssd_scan, chunk), yb = pr.forward(kn::reference::ssd_scan_chunked, chunk);
    f.note = "max|a-b|/max|b| " + fmt("%.1e", ((ya - yb).abs().max() / yb.abs().max()).item<double>());
  }
  if (!c_fwd) f.note += "; (c) skipped (minutes)";
  rows.push_back(f);

  Row fb{"ssd", shape, "fwd+bwd"};
  fb.flops = 16 * elems;
  pr.forward_backward(kn::ssd_scan, chunk);
  {
    const auto t = best_interleaved(repeat, {[&] { pr.forward_backward(kn::ssd_scan, chunk); },
                                             [&] { pr.forward_backward(kn::reference::ssd_scan_chunked, chunk); },
                                             [&] { gemm.run(); }});
    fb.a = t[0], fb.b = t[1], fb.gemm = gemm.gflops(t[2]);
  }
  if (c_bwd) fb.c = best_of(rc, [&] { pr.forward_backward(kn::reference::ssd_scan, chunk); });
  else fb.note = "(c) skipped (autograd would keep " + fmt("%.0f", c_bwd_bytes / 1e9) + " GB of states)";
  rows.push_back(fb);
}

// -------------------------------------------------------------- Mamba-1

using ScanFn = kn::SelectiveScanResult (*)(const torch::Tensor&, const torch::Tensor&,
                                           const torch::Tensor&, const torch::Tensor&,
                                           const torch::Tensor&, const kn::SelectiveScanOptions&);

void bench_scan(int64_t L, int64_t N, int repeat, bool quick, const Sgemm& gemm, std::vector<Row>& rows) {
  const int64_t B = 8, Dm = 1024;
  auto u = torch::randn({B, Dm, L}), delta = torch::randn({B, Dm, L}) * 0.5 - 2.0;
  auto A = -torch::rand({Dm, N}) * 15 - 1, Bm = torch::randn({B, N, L}), Cm = torch::randn({B, N, L});
  auto D = torch::randn({Dm}), bias = torch::randn({Dm}) * 0.1, gy = torch::randn({B, Dm, L});
  auto opts = [&](const torch::Tensor& Dv, const torch::Tensor& bv) {
    kn::SelectiveScanOptions o;
    o.D = Dv, o.delta_bias = bv, o.delta_softplus = true;
    return o;
  };
  auto fwd = [&](ScanFn f) {
    torch::NoGradGuard g;
    return f(u, delta, A, Bm, Cm, opts(D, bias)).y;
  };
  auto fwdbwd = [&](ScanFn f) {
    std::vector<torch::Tensor> in = {u, delta, A, Bm, Cm, D, bias};
    for (auto& t : in) t = t.detach().requires_grad_(true);
    torch::Tensor y = f(in[0], in[1], in[2], in[3], in[4], opts(in[5], in[6])).y;
    torch::autograd::grad({y}, in, {gy});
  };
  const double elems = double(B) * Dm * L * N;
  const std::string shape = "L=" + std::to_string(L) + " D=1024 N=" + std::to_string(N);
  const int rc = std::max(1, repeat / 3);
  // The reference's autograd keeps every state (B*D*N floats per position).
  const bool c_fwd = L <= (quick ? 1024 : 4096), c_bwd = L * N <= 1024 * 16;
  Row f{"mamba1", shape, "fwd"};
  f.flops = 4 * elems;
  fwd(kn::selective_scan);
  {
    const auto t = best_interleaved(repeat, {[&] { fwd(kn::selective_scan); }, [&] { gemm.run(); }});
    f.a = t[0], f.gemm = gemm.gflops(t[1]);
  }
  if (c_fwd) f.c = best_of(rc, [&] { fwd(kn::reference::selective_scan); });
  {
    torch::Tensor ya = fwd(kn::selective_scan), yc = fwd(kn::reference::selective_scan);
    f.note = "max|a-c|/max|c| " + fmt("%.1e", ((ya - yc).abs().max() / yc.abs().max()).item<double>());
  }
  rows.push_back(f);
  Row fb{"mamba1", shape, "fwd+bwd"};
  fb.flops = 16 * elems;
  fwdbwd(kn::selective_scan);
  {
    const auto t = best_interleaved(repeat, {[&] { fwdbwd(kn::selective_scan); }, [&] { gemm.run(); }});
    fb.a = t[0], fb.gemm = gemm.gflops(t[1]);
  }
  if (c_bwd) fb.c = best_of(rc, [&] { fwdbwd(kn::reference::selective_scan); });
  else fb.note = "(c) skipped (minutes, GBs of autograd states)";
  rows.push_back(fb);
}

}  // namespace

int run_kernels_bench(const std::vector<std::string>& args, std::ostream& out) {
  bool quick = false;
  int64_t threads = 0, repeat = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--quick") quick = true;
    else if (args[i] == "--threads") threads = parse_int(args, i, "--threads");
    else if (args[i] == "--repeat") repeat = parse_int(args, i, "--repeat");
    else throw UsageError("bench kernels: unknown argument '" + args[i] + "'");
  }
  if (repeat == 0) repeat = 5;
  // LibTorch 1.13 defaults to the physical cores it detects, 1 on this VM:
  // use every hardware thread unless told otherwise.
  if (threads == 0) threads = std::max<int64_t>(1, std::thread::hardware_concurrency());
  torch::set_num_threads(static_cast<int>(threads));
  torch::manual_seed(0);
  const auto t_start = Clock::now();

  out << "# mambamt bench kernels" << (quick ? " --quick" : "") << "\n\n"
      << "CPU: " << cpu_model() << ", " << torch::get_num_threads() << " threads, kernels: "
      << kn::cpu_isa() << ", LibTorch " << TORCH_VERSION << ", float32, best of " << repeat
      << " interleaved rounds of (a), (b) and sgemm per row, best of " << std::max<int64_t>(1, repeat / 3)
      << " (c)\n";
  const Sgemm gemm(quick ? 2048 : 4096);
  const double gemm_start = gemm.gflops(best_of(quick ? 3 : 5, [&] { gemm.run(); }));
  out << "LibTorch sgemm (" << gemm.n << "^3) at the start: " << fmt("%.0f", gemm_start)
      << " GFLOP/s; each row's sgemm column is the best of its own rounds\n";
  const int64_t chunk = best_chunk(quick ? 1 : 2);
  out << "(b) chunk length (fastest of 32..256 at L=1024 N=64): " << chunk << "\n";
  out << "GFLOP/s count the recurrence's multiply-adds: 4 per (b,l,h,p,n) forward, 16 forward+backward.\n\n";
  out.flush();

  out << "| op | shape | pass | (a) ms | (b) ms | (c) ms | b/a | c/a | (a) GFLOP/s | sgemm GFLOP/s | % sgemm "
         "| notes |\n"
      << "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n";
  out.flush();
  // Rows are printed as they are measured.
  auto print = [&](std::vector<Row>& rows) {
    for (const Row& r : rows) {
      const double gf = r.flops / r.a / 1e9;
      out << "| " << r.op << " | " << r.shape << " | " << r.pass << " | " << fmt("%.1f", r.a * 1e3) << " | "
          << fmt("%.1f", r.b * 1e3) << " | " << fmt("%.1f", r.c * 1e3) << " | " << fmt("%.1fx", r.b / r.a)
          << " | " << fmt("%.1fx", r.c / r.a) << " | " << fmt("%.0f", gf) << " | " << fmt("%.0f", r.gemm)
          << " | " << fmt("%.0f%%", 100 * gf / r.gemm) << " | " << r.note << " |\n";
    }
    out.flush();
    rows.clear();
  };
  std::vector<Row> rows;
  // (L, N) pairs: the given ones with --quick, else every L and N.
  using Cases = std::vector<std::pair<int64_t, int64_t>>;
  auto cases = [&](Cases quick_cases) {
    if (quick) return quick_cases;
    Cases all;
    for (int64_t L : {256, 1024, 4096})
      for (int64_t N : {16, 64, 128}) all.push_back({L, N});
    return all;
  };
  for (auto [L, N] : cases({{1024, 64}, {256, 64}})) {
    bench_ssd(L, N, chunk, static_cast<int>(repeat), quick, gemm, rows);
    print(rows);
  }
  for (auto [L, N] : cases({{1024, 16}, {1024, 64}})) {
    bench_scan(L, N, static_cast<int>(repeat), quick, gemm, rows);
    print(rows);
  }
  out << "\ntotal " << fmt("%.0f", std::chrono::duration<double>(Clock::now() - t_start).count())
      << " s\n";
  return 0;
}

}  // namespace mambamt::bench
