#include "bench/kernels_bench.h"

#include "bench/bench.h"

#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <thread>
#include <utility>

#include "core/device.h"
#include "core/error.h"
#include "kernels/isa.h"
#include "kernels/reference.h"
#include "kernels/selective_scan.h"
#include "kernels/ssd.h"

namespace mambamt::bench {

const char* const kKernelsBenchHelp =
    "SSM kernels at NMT shapes (B=8; L in 256,1024,4096; N in 16,64,128; SSD with H=16, P=64 (d_inner "
    "1024); Mamba-1 selective scan with d_inner=1024): (a) our kernel, (b) the best pure-LibTorch formulation "
    "(the Mamba-2 paper's chunked matmul form; SSD only), (c) the step-by-step LibTorch reference, "
    "forward and forward+backward, float32. Prints times (best of R), the ratios b/a and c/a, "
    "GFLOP/s next to LibTorch's own sgemm GFLOP/s measured in the same run, and (a)'s floor: its "
    "inputs read once and its outputs written once at the copy bandwidth measured in the same run "
    "(forward+backward: the inputs read twice, y written, dy read and a gradient of every input "
    "written). (a), (b), an sgemm and a 128 MiB copy run in R interleaved rounds per row, so that a "
    "machine whose speed drifts slows them alike: the row's % sgemm is against the sgemm of its own "
    "rounds and its floor at the copy bandwidth of its own rounds (column copy GB/s). "
    "(c) is skipped where it would take minutes or too much memory. Options: --quick (SSD at "
    "L=1024,256 with N=64, on a GPU L=4096,1024; Mamba-1 at L=1024 with N=16,64; 1 to 5 minutes on "
    "2 cores, most of it in (c)), --lengths LIST and --dstates LIST (every L with every N, for both "
    "ops; either one alone keeps the other's full list), --headdims LIST (SSD head widths P, each with "
    "H = 1024/P heads, so d_inner stays 1024; the shape column then shows P), --threads N (default: "
    "all hardware threads), "
    "--repeat R (default 5), --device cpu|cuda|auto (auto: the GPU when one is visible, as bench "
    "decode; on a GPU every timed call is waited for on the device, sgemm is cuBLAS's in float32 "
    "without TF32, the copy bandwidth a device-to-device copy, and the CUDA kernel's chunk length is "
    "the fastest of 32..256 at L=1024 N=64, as (b)'s).";

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

// The best time of each function over `rounds` rounds that call every one in
// turn: on a shared VM whose speed drifts over minutes (its sgemm gave 113 to
// 204 GFLOP/s from run to run), functions timed apart are timed on different
// machines; interleaved, a slow spell slows them alike. On a GPU each call is
// timed to the end of its work on the device.
std::vector<double> best_interleaved(const torch::Device& device, int rounds,
                                     const std::vector<std::function<void()>>& fns) {
  std::vector<double> best(fns.size(), 1e300);
  for (int r = 0; r < rounds; ++r)
    for (size_t i = 0; i < fns.size(); ++i) {
      finish_queued(device);
      const auto t0 = Clock::now();
      fns[i]();
      finish_queued(device);
      best[i] = std::min(best[i], std::chrono::duration<double>(Clock::now() - t0).count());
    }
  return best;
}

double best_of(const torch::Device& device, int repeat, const std::function<void()>& f) {
  return best_interleaved(device, repeat, {f})[0];
}

// Random values made on the CPU (the same on every device), on `device`.
torch::Tensor randn_on(at::IntArrayRef shape, const torch::Device& device) { return torch::randn(shape).to(device); }

// LibTorch's large-matrix product: n x n by n x n, float32.
struct Sgemm {
  int64_t n;
  torch::Tensor a, b;
  Sgemm(int64_t n_, const torch::Device& device)
      : n(n_), a(randn_on({n_, n_}, device)), b(randn_on({n_, n_}, device)) {
    run();
  }
  void run() const {
    torch::NoGradGuard g;
    torch::mm(a, b);
  }
  double gflops(double seconds) const { return 2.0 * n * n * n / seconds / 1e9; }
};

// Seconds as milliseconds to three significant digits (a GPU's times are
// fractions of a millisecond), whole milliseconds from 100 on.
std::string ms(double seconds) { return fmt(seconds >= 0.1 ? "%.0f" : "%.3g", seconds * 1e3); }

// GFLOP/s whole from 100 on, else to three significant digits: a small shape
// on a busy core can run below 0.5 GFLOP/s, which "%.0f" would print as 0.
std::string gflops_cell(double rate) { return fmt(rate >= 100 ? "%.0f" : "%.3g", rate); }

// What every row is measured with.
struct Setup {
  torch::Device device;
  int repeat;
  bool quick;
  const Sgemm& gemm;
  const CopyLoop& copy;  // timed in every row's rounds: the row's copy bandwidth
};

struct Row {
  Row(std::string op_, std::string shape_, std::string pass_)
      : op(std::move(op_)), shape(std::move(shape_)), pass(std::move(pass_)) {}
  std::string op, shape, pass;
  double a = kNaN, b = kNaN, c = kNaN;  // seconds
  double gemm = kNaN;                   // sgemm GFLOP/s in the rounds that timed a (and b)
  double bandwidth = kNaN;              // copy bandwidth in those rounds, bytes read + written per second
  double floor = kNaN;                  // (a)'s bytes at that bandwidth, seconds
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
  SsdProblem(int64_t b, int64_t l, int64_t h, int64_t p, int64_t n, const torch::Device& device) {
    x = randn_on({b, l, h, p}, device);
    dt = randn_on({b, l, h}, device) * 0.5 - 2.0;  // softplus: dt around 0.1
    A_log = torch::log(torch::rand({h}) * 15 + 1).to(device);
    B = randn_on({b, l, 1, n}, device);
    C = randn_on({b, l, 1, n}, device);
    D = randn_on({h}, device);
    dt_bias = randn_on({h}, device) * 0.1;
    gy = randn_on({b, l, h, p}, device);
  }
  // Bytes of the inputs and of the output y.
  double input_bytes() const {
    double n = 0;
    for (const torch::Tensor& t : {x, dt, A_log, B, C, D, dt_bias}) n += static_cast<double>(t.nbytes());
    return n;
  }
  double output_bytes() const { return static_cast<double>(gy.nbytes()); }
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

// The chunk length at which `f`'s forward pass is fastest here.
int64_t best_chunk(SsdFn f, int repeat, const torch::Device& device) {
  SsdProblem pr(8, 1024, 16, 64, 64, device);
  int64_t best = 64;
  double best_t = 1e300;
  for (int64_t c : {32, 64, 128, 256}) {
    pr.forward(f, c);  // warm-up
    const double t = best_of(device, repeat, [&] { pr.forward(f, c); });
    if (t < best_t) best_t = t, best = c;
  }
  return best;
}

// Seconds to read `in` bytes once and write `out` bytes once at the row's copy bandwidth.
void set_floor(Row& r, double in, double out) { r.floor = (in + out) / r.bandwidth; }

// chunk_a: the CUDA kernel's chunk length (the CPU kernel blocks on its own);
// chunk_b: (b)'s.
// P: the head width, with H = 1024 / P heads; show_p: P in the shape column.
void bench_ssd(int64_t L, int64_t N, int64_t P, bool show_p, int64_t chunk_a, int64_t chunk_b, const Setup& s,
               std::vector<Row>& rows) {
  const int64_t B = 8, H = 1024 / P;
  const int repeat = s.repeat;
  const bool quick = s.quick;
  const Sgemm& gemm = s.gemm;
  SsdProblem pr(B, L, H, P, N, s.device);
  const double elems = double(B) * L * H * P * N;
  const std::string shape =
      "L=" + std::to_string(L) + " N=" + std::to_string(N) + (show_p ? " P=" + std::to_string(P) : std::string());
  // (c) runs one position at a time; its backward keeps one (B,H,P,N) state
  // per position alive.
  const double c_bwd_bytes = double(B) * H * P * N * 4 * L * 1.5;
  const bool c_fwd = L <= (quick ? 1024 : 4096);
  const bool c_bwd = L <= 1024 && c_bwd_bytes < 8e9;
  const int rc = std::max(1, repeat / 3);

  const double in = pr.input_bytes(), out = pr.output_bytes();
  Row f{"ssd", shape, "fwd"};
  f.flops = 4 * elems;
  pr.forward(kn::ssd_scan, chunk_a);  // warm-up
  if (s.device.is_cuda()) pr.forward(kn::reference::ssd_scan_chunked, chunk_b);
  {
    const auto t = best_interleaved(s.device, repeat, {[&] { pr.forward(kn::ssd_scan, chunk_a); },
                                                       [&] { pr.forward(kn::reference::ssd_scan_chunked, chunk_b); },
                                                       [&] { gemm.run(); }, [&] { s.copy.run(); }});
    f.a = t[0], f.b = t[1], f.gemm = gemm.gflops(t[2]), f.bandwidth = s.copy.bandwidth(t[3]);
  }
  set_floor(f, in, out);
  if (c_fwd) f.c = best_of(s.device, rc, [&] { pr.forward(kn::reference::ssd_scan, chunk_b); });
  {
    torch::Tensor ya = pr.forward(kn::ssd_scan, chunk_a), yb = pr.forward(kn::reference::ssd_scan_chunked, chunk_b);
    f.note = "max|a-b|/max|b| " + fmt("%.1e", ((ya - yb).abs().max() / yb.abs().max()).item<double>());
  }
  if (!c_fwd) f.note += "; (c) skipped (minutes)";
  rows.push_back(f);

  Row fb{"ssd", shape, "fwd+bwd"};
  fb.flops = 16 * elems;
  pr.forward_backward(kn::ssd_scan, chunk_a);
  if (s.device.is_cuda()) pr.forward_backward(kn::reference::ssd_scan_chunked, chunk_b);
  {
    const auto t =
        best_interleaved(s.device, repeat, {[&] { pr.forward_backward(kn::ssd_scan, chunk_a); },
                                            [&] { pr.forward_backward(kn::reference::ssd_scan_chunked, chunk_b); },
                                            [&] { gemm.run(); }, [&] { s.copy.run(); }});
    fb.a = t[0], fb.b = t[1], fb.gemm = gemm.gflops(t[2]), fb.bandwidth = s.copy.bandwidth(t[3]);
  }
  set_floor(fb, 2 * in + out, out + in);
  if (c_bwd) fb.c = best_of(s.device, rc, [&] { pr.forward_backward(kn::reference::ssd_scan, chunk_b); });
  else fb.note = "(c) skipped (autograd would keep " + fmt("%.0f", c_bwd_bytes / 1e9) + " GB of states)";
  rows.push_back(fb);
}

// -------------------------------------------------------------- Mamba-1

using ScanFn = kn::SelectiveScanResult (*)(const torch::Tensor&, const torch::Tensor&,
                                           const torch::Tensor&, const torch::Tensor&,
                                           const torch::Tensor&, const kn::SelectiveScanOptions&);

void bench_scan(int64_t L, int64_t N, const Setup& s, std::vector<Row>& rows) {
  const int64_t B = 8, Dm = 1024;
  const int repeat = s.repeat;
  const bool quick = s.quick;
  const Sgemm& gemm = s.gemm;
  const torch::Device& dev = s.device;
  auto u = randn_on({B, Dm, L}, dev), delta = randn_on({B, Dm, L}, dev) * 0.5 - 2.0;
  auto A = (-torch::rand({Dm, N}) * 15 - 1).to(dev), Bm = randn_on({B, N, L}, dev), Cm = randn_on({B, N, L}, dev);
  auto D = randn_on({Dm}, dev), bias = randn_on({Dm}, dev) * 0.1, gy = randn_on({B, Dm, L}, dev);
  double in = 0;
  for (const torch::Tensor& t : {u, delta, A, Bm, Cm, D, bias}) in += static_cast<double>(t.nbytes());
  const double out = static_cast<double>(gy.nbytes());
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
    const auto t = best_interleaved(
        dev, repeat, {[&] { fwd(kn::selective_scan); }, [&] { gemm.run(); }, [&] { s.copy.run(); }});
    f.a = t[0], f.gemm = gemm.gflops(t[1]), f.bandwidth = s.copy.bandwidth(t[2]);
  }
  set_floor(f, in, out);
  if (c_fwd) f.c = best_of(dev, rc, [&] { fwd(kn::reference::selective_scan); });
  {
    torch::Tensor ya = fwd(kn::selective_scan), yc = fwd(kn::reference::selective_scan);
    f.note = "max|a-c|/max|c| " + fmt("%.1e", ((ya - yc).abs().max() / yc.abs().max()).item<double>());
  }
  rows.push_back(f);
  Row fb{"mamba1", shape, "fwd+bwd"};
  fb.flops = 16 * elems;
  fwdbwd(kn::selective_scan);
  {
    const auto t = best_interleaved(
        dev, repeat, {[&] { fwdbwd(kn::selective_scan); }, [&] { gemm.run(); }, [&] { s.copy.run(); }});
    fb.a = t[0], fb.gemm = gemm.gflops(t[1]), fb.bandwidth = s.copy.bandwidth(t[2]);
  }
  set_floor(fb, 2 * in + out, out + in);
  if (c_bwd) fb.c = best_of(dev, rc, [&] { fwdbwd(kn::reference::selective_scan); });
  else fb.note = "(c) skipped (minutes, GBs of autograd states)";
  rows.push_back(fb);
}

}  // namespace

int run_kernels_bench(const std::vector<std::string>& args, std::ostream& out) {
  bool quick = false;
  int64_t threads = 0, repeat = 0;
  std::vector<int64_t> lengths, dstates, headdims;
  std::string device_name = "auto";
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--quick") quick = true;
    else if (args[i] == "--threads") threads = parse_int(args, i, "--threads");
    else if (args[i] == "--repeat") repeat = parse_int(args, i, "--repeat");
    else if (args[i] == "--lengths") lengths = parse_list(args, i, "bench kernels", "--lengths");
    else if (args[i] == "--dstates") dstates = parse_list(args, i, "bench kernels", "--dstates");
    else if (args[i] == "--headdims") {
      headdims = parse_list(args, i, "bench kernels", "--headdims");
      for (int64_t P : headdims)
        if (1024 % P != 0)
          throw UsageError("bench kernels: --headdims takes divisors of 1024 (the SSD rows keep d_inner = 1024), not " +
                           std::to_string(P));
    }
    else if (args[i] == "--device") {
      if (i + 1 >= args.size()) throw UsageError("bench kernels: --device needs a value");
      device_name = args[++i];
      if (device_name != "cpu" && device_name != "cuda" && device_name != "auto")
        throw UsageError("bench kernels: --device must be cpu, cuda or auto, not '" + device_name + "'");
    } else throw UsageError("bench kernels: unknown argument '" + args[i] + "'");
  }
  torch::Device device(torch::kCPU);
  try {
    device = core::select_device(device_name);
  } catch (const InputError& e) {
    throw UsageError(std::string("bench kernels: --device: ") + e.what());
  }
  if (repeat == 0) repeat = 5;
  // LibTorch 1.13 defaults to the physical cores it detects, 1 on this VM:
  // use every hardware thread unless told otherwise.
  if (threads == 0) threads = std::max<int64_t>(1, std::thread::hardware_concurrency());
  torch::set_num_threads(static_cast<int>(threads));
  torch::manual_seed(0);
  const auto t_start = Clock::now();
  const bool gpu = device.is_cuda();

  const auto sys = core::system_info(device);
  out << "# mambamt bench kernels" << (quick ? " --quick" : "") << "\n\n"
      << "device: " << device.str() << (gpu ? " (CUDA kernels)" : " (CPU kernels: " + kn::cpu_isa() + ")")
      << "; CPU: " << sys.at("cpu") << ", " << torch::get_num_threads() << " threads; LibTorch " << TORCH_VERSION
      << ", float32" << (gpu ? " (no TF32)" : "") << ", best of " << repeat
      << " interleaved rounds of (a), (b), sgemm and a copy per row, best of " << std::max<int64_t>(1, repeat / 3)
      << " (c)\n";
  const Sgemm gemm(quick && !gpu ? 2048 : 4096, device);
  const double gemm_start = gemm.gflops(best_of(device, quick ? 3 : 5, [&] { gemm.run(); }));
  out << (gpu ? "cuBLAS" : "LibTorch") << " sgemm (" << gemm.n << "^3) at the start: " << fmt("%.0f", gemm_start)
      << " GFLOP/s; each row's sgemm column is the best of its own rounds\n";
  const double bandwidth = copy_bandwidth(device);
  out << "copy bandwidth at the start: " << fmt("%.2f", bandwidth / 1e9)
      << " GB/s (read + written, 256 MiB copies, best of 5); each row's copy GB/s is the best 128 MiB copy of "
         "its own rounds; floor = (a)'s inputs read once and outputs written once at it (fwd+bwd: inputs read "
         "twice, y written, dy read, every input's gradient written)\n";
  const CopyLoop copy(device, 128LL << 20);
  const int64_t chunk_b = best_chunk(kn::reference::ssd_scan_chunked, quick ? 1 : 2, device);
  out << "(b) chunk length (fastest of 32..256 at L=1024 N=64): " << chunk_b << "\n";
  const int64_t chunk_a = gpu ? best_chunk(kn::ssd_scan, quick ? 1 : 2, device) : chunk_b;
  if (gpu) out << "(a) chunk length of the CUDA kernel (the same choice): " << chunk_a << "\n";
  out << "GFLOP/s count the recurrence's multiply-adds: 4 per (b,l,h,p,n) forward, 16 forward+backward.\n\n";
  out.flush();
  const Setup setup{device, static_cast<int>(repeat), quick, gemm, copy};

  out << "| op | shape | pass | (a) ms | (b) ms | (c) ms | b/a | c/a | (a) GFLOP/s | sgemm GFLOP/s | % sgemm "
         "| copy GB/s | floor ms | a/floor | notes |\n"
      << "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n";
  out.flush();
  // Rows are printed as they are measured.
  auto print = [&](std::vector<Row>& rows) {
    for (const Row& r : rows) {
      const double gf = r.flops / r.a / 1e9;
      out << "| " << r.op << " | " << r.shape << " | " << r.pass << " | " << ms(r.a) << " | "
          << ms(r.b) << " | " << ms(r.c) << " | " << fmt("%.1fx", r.b / r.a)
          << " | " << fmt("%.1fx", r.c / r.a) << " | " << gflops_cell(gf) << " | " << gflops_cell(r.gemm)
          << " | " << fmt("%.0f%%", 100 * gf / r.gemm) << " | " << fmt("%.1f", r.bandwidth / 1e9) << " | "
          << ms(r.floor) << " | "
          << fmt("%.1fx", r.a / r.floor) << " | " << r.note << " |\n";
    }
    out.flush();
    rows.clear();
  };
  std::vector<Row> rows;
  // (L, N) pairs: the given lengths and d_states, else with --quick the given
  // pairs, else every L and N.
  using Cases = std::vector<std::pair<int64_t, int64_t>>;
  auto cases = [&](Cases quick_cases) {
    if (quick && lengths.empty() && dstates.empty()) return quick_cases;
    Cases all;
    for (int64_t L : lengths.empty() ? std::vector<int64_t>{256, 1024, 4096} : lengths)
      for (int64_t N : dstates.empty() ? std::vector<int64_t>{16, 64, 128} : dstates) all.push_back({L, N});
    return all;
  };
  // On a GPU the quick SSD rows include L = 4096, where the GPU target is.
  for (auto [L, N] : cases(gpu ? Cases{{4096, 64}, {1024, 64}} : Cases{{1024, 64}, {256, 64}}))
    for (int64_t P : headdims.empty() ? std::vector<int64_t>{64} : headdims) {
      bench_ssd(L, N, P, !headdims.empty(), chunk_a, chunk_b, setup, rows);
      print(rows);
    }
  for (auto [L, N] : cases({{1024, 16}, {1024, 64}})) {
    bench_scan(L, N, setup, rows);
    print(rows);
  }
  out << "\ntotal " << fmt("%.0f", std::chrono::duration<double>(Clock::now() - t_start).count())
      << " s\n";
  return 0;
}

}  // namespace mambamt::bench
