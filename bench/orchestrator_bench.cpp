#include "bench/orchestrator_bench.h"

#include "bench/bench.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <thread>

#include "core/error.h"
#include "core/fs.h"
#include "core/log.h"
#include "orchestrator/sweep.h"

namespace mambamt::bench {

const char* const kOrchestratorBenchHelp =
    "Sweep machinery (orchestrator/sweep.h) over N simulated experiments (each one a sleep of MS ms, "
    "run_sweep's simulate_ms) on R MPI ranks: dispatch latency (coordinator: result received -> next "
    "experiment sent to that rank) p50/p99/max, worker utilisation (busy / rank seconds), wall time against "
    "the ideal N x MS / R, and the targets p99 < 20 ms and utilisation >= 90%. Baseline: the MPI round trip "
    "of a 64-byte message between rank 0 and every other rank (p50/p99), dispatch latency as a multiple of "
    "it. Started outside MPI it re-launches itself with `mpirun --oversubscribe -np R`; under mpirun/srun it "
    "uses the ranks it has. Options: --ranks R (8), --experiments N (200), --ms MS (300), --quick (40 "
    "experiments of 100 ms on 4 ranks).";

namespace {

struct Options {
  int ranks = 8;
  int experiments = 200;
  double ms = 300;
  bool quick = false;
};

int64_t parse_int(const std::vector<std::string>& args, size_t& i, const std::string& name, int64_t min) {
  if (i + 1 >= args.size()) throw UsageError("bench orchestrator: " + name + " needs a value");
  const std::string& v = args[++i];
  char* end = nullptr;
  const long long n = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != 0 || n < min || n > 1000000)
    throw UsageError("bench orchestrator: " + name + " must be an integer >= " + std::to_string(min) + ", got '" + v +
                     "'");
  return n;
}

Options parse(const std::vector<std::string>& args) {
  Options o;
  bool ranks = false, experiments = false, ms = false;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--quick") o.quick = true;
    else if (args[i] == "--ranks") o.ranks = static_cast<int>(parse_int(args, i, "--ranks", 2)), ranks = true;
    else if (args[i] == "--experiments")
      o.experiments = static_cast<int>(parse_int(args, i, "--experiments", 1)), experiments = true;
    else if (args[i] == "--ms") o.ms = static_cast<double>(parse_int(args, i, "--ms", 0)), ms = true;
    else throw UsageError("bench orchestrator: unknown argument '" + args[i] + "'");
  }
  // --quick sets what was not given explicitly.
  if (o.quick) {
    if (!ranks) o.ranks = 4;
    if (!experiments) o.experiments = 40;
    if (!ms) o.ms = 100;
  }
  return o;
}

// True when an MPI launcher started this process (mpirun sets OMPI_COMM_WORLD_SIZE,
// srun --mpi=pmix PMIX_RANK; the marker stops a re-launch from re-launching). Decided
// from the environment, before MPI_Init, so that a plain process never initialises
// MPI as a singleton and then forks mpirun.
bool under_mpi_launcher() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE", "MAMBAMT_BENCH_RELAUNCHED"})
    if (std::getenv(v)) return true;
  return false;
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// `mpirun --oversubscribe -np R <this binary> bench orchestrator ARGS`, its
// output (stdout and stderr) relayed to `out` as it comes; returns its exit code.
int relaunch(const Options& o, const std::vector<std::string>& args, std::ostream& out) {
  std::error_code ec;
  const std::string self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  if (ec || self.empty()) throw Error("bench orchestrator: cannot find this binary (/proc/self/exe): " + ec.message());
  // Root needs OpenMPI's consent; more ranks than cores share them, and idle
  // ranks must yield the CPU (OMPI_MCA_mpi_yield_when_idle) or they starve the busy ones.
  std::string cmd =
      "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1 "
      "MAMBAMT_BENCH_RELAUNCHED=1 mpirun --oversubscribe -np " +
      std::to_string(o.ranks) + " " + shell_quote(self) + " bench orchestrator";
  for (auto& a : args) cmd += " " + shell_quote(a);
  cmd += " < /dev/null 2>&1";
  out.flush();
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) throw Error("bench orchestrator: cannot start mpirun");
  char buf[4096];
  while (true) {
    const ssize_t n = ::read(::fileno(p), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.write(buf, n);
    out.flush();
  }
  const int st = ::pclose(p);
  const int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  if (code == 127) out << "bench orchestrator: mpirun could not be started (is OpenMPI installed?)\n";
  return code;
}

// MPI for the benchmark; the sweep runtime needs MPI_THREAD_MULTIPLE (its
// coordinator is a thread beside rank 0's worker), as in `mambamt sweep`.
class MpiScope {
 public:
  MpiScope() {
    int initialised = 0;
    MPI_Initialized(&initialised);
    if (initialised) return;  // someone else owns it
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    owns_ = true;
    if (provided < MPI_THREAD_MULTIPLE) {
      MPI_Finalize();
      owns_ = false;
      throw Error("bench orchestrator: this MPI library does not support MPI_THREAD_MULTIPLE");
    }
  }
  ~MpiScope() {
    if (owns_) MPI_Finalize();
  }
  MpiScope(const MpiScope&) = delete;
  MpiScope& operator=(const MpiScope&) = delete;

 private:
  bool owns_ = false;
};

enum Tag : int { kTurn = 7201, kPing = 7202, kDone = 7203 };

using Clock = std::chrono::steady_clock;

// Receives without spinning: while rank 0 measures against one rank, the other
// ranks (8 ranks share 2 cores here) must not take the CPU from the two that work.
void quiet_recv(int source, int tag) {
  int flag = 0;
  while (true) {
    MPI_Iprobe(source, tag, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
    if (flag) break;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  char c = 0;
  MPI_Recv(&c, 1, MPI_CHAR, source, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

// Baseline: blocking ping-pong of a 64-byte message (about the size of a result
// message) between rank 0 and each other rank in turn. Round trips in ms on
// rank 0; empty elsewhere.
std::vector<double> round_trips(int rank, int world, int reps, int warmup) {
  char buf[64] = {};
  char c = 0;
  std::vector<double> rtt;
  if (rank == 0) {
    for (int r = 1; r < world; ++r) {
      MPI_Send(&c, 1, MPI_CHAR, r, kTurn, MPI_COMM_WORLD);
      for (int i = 0; i < warmup + reps; ++i) {
        const auto t0 = Clock::now();
        MPI_Send(buf, sizeof buf, MPI_CHAR, r, kPing, MPI_COMM_WORLD);
        MPI_Recv(buf, sizeof buf, MPI_CHAR, r, kPing, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (i >= warmup) rtt.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      }
    }
    for (int r = 1; r < world; ++r) MPI_Send(&c, 1, MPI_CHAR, r, kDone, MPI_COMM_WORLD);
  } else {
    quiet_recv(0, kTurn);
    for (int i = 0; i < warmup + reps; ++i) {
      MPI_Recv(buf, sizeof buf, MPI_CHAR, 0, kPing, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(buf, sizeof buf, MPI_CHAR, 0, kPing, MPI_COMM_WORLD);
    }
    quiet_recv(0, kDone);
  }
  return rtt;
}

// Nearest-rank percentile (p in [0, 1]) of v; 0 for an empty v.
double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t k = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, k == 0 ? 0 : k - 1)];
}

// A grid of exactly n points: no [grid] axes, n seeds (every seed is its own
// experiment id). The base is the default experiment, which is valid; nothing
// trains under simulate_ms, so its size does not matter.
std::string grid_text(const std::string& output_dir, int n, double ms) {
  std::string seeds;
  for (int i = 1; i <= n; ++i) seeds += (i > 1 ? ", " : "") + std::to_string(i);
  // A simulated experiment sends no heartbeats: the timeout must outlast it.
  const double timeout = std::min(864000.0, std::max(300.0, 2.0 * ms / 1000.0 + 60.0));
  return "[sweep]\nname = \"bench-orchestrator\"\noutput_dir = \"" + output_dir + "\"\nseeds = [" + seeds +
         "]\norder = \"grid\"\nretries = 0\nheartbeat_timeout = " + fmt("%.1f", timeout) + "\n\n[base]\n";
}

int measure(const Options& o, std::ostream& out) {
  MpiScope mpi;
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  core::log::set_rank(rank);
  try {
    const int reps = o.quick ? 200 : 1000;
    const std::vector<double> rtt = round_trips(rank, world, reps, 20);

    std::string tmp;
    if (rank == 0) {
      tmp = (std::filesystem::temp_directory_path() / "mambamt-bench-orchestrator-XXXXXX").string();
      if (!::mkdtemp(tmp.data())) throw Error("bench orchestrator: cannot create a temporary directory");
      core::write_file_atomic(tmp + "/grid.toml", grid_text(tmp + "/runs", o.experiments, o.ms));
    }
    struct Cleanup {
      std::string dir;
      ~Cleanup() {
        std::error_code ec;
        if (!dir.empty()) std::filesystem::remove_all(dir, ec);
      }
    } cleanup{tmp};

    orchestrator::SweepOptions opt;
    opt.grid_file = tmp + "/grid.toml";  // read by rank 0 only
    opt.simulate_ms = o.ms;
    opt.log = [](const std::string&) {};  // one line per start and finish otherwise
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = Clock::now();
    const orchestrator::SweepSummary s = orchestrator::run_sweep(opt);
    const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
    if (rank != 0) return 0;

    const int n = o.experiments;
    const double ideal = n * o.ms / 1000.0 / world;
    const double slept = n * o.ms / 1000.0;
    const double util_busy = s.rank_seconds > 0 ? s.busy_seconds / s.rank_seconds : 0;
    const double util_slept = s.rank_seconds > 0 ? std::min(1.0, slept / s.rank_seconds) : 0;
    const double d50 = percentile(s.dispatch_ms, 0.5), d99 = percentile(s.dispatch_ms, 0.99);
    const double dmax = s.dispatch_ms.empty() ? 0 : *std::max_element(s.dispatch_ms.begin(), s.dispatch_ms.end());
    const double r50 = percentile(rtt, 0.5), r99 = percentile(rtt, 0.99);
    const bool p99_ok = !s.dispatch_ms.empty() && d99 < 20.0;
    const bool util_ok = util_busy >= 0.9 && util_slept >= 0.9;

    out << "mambamt bench orchestrator: " << n << " simulated experiments of " << o.ms << " ms on " << world
        << " ranks (rank 0 coordinates beside its worker), " << std::thread::hardware_concurrency()
        << " CPU cores\n";
    if (rtt.empty())
      out << "  baseline     MPI round trip: n/a (one rank)\n";
    else
      out << "  baseline     MPI round trip, 64 bytes, rank 0 <-> each other rank (" << world - 1 << " x " << reps
          << "): p50 " << fmt("%.4f", r50) << " ms  p99 " << fmt("%.4f", r99) << " ms\n";
    out << "  dispatch     result received -> next experiment sent, " << s.dispatch_ms.size() << " dispatches: p50 "
        << fmt("%.3f", d50) << " ms  p99 " << fmt("%.3f", d99) << " ms  max " << fmt("%.3f", dmax) << " ms\n";
    if (!rtt.empty() && r50 > 0 && r99 > 0)
      out << "  ratio        dispatch / round trip: p50 " << fmt("%.1f", d50 / r50) << "x  p99 "
          << fmt("%.1f", d99 / r99) << "x\n";
    out << "  rank idle    (rank time - experiment time) / experiments: "
        << fmt("%.2f", n > 0 ? (s.rank_seconds - slept) / n * 1000.0 : 0) << " ms per experiment (start-up and tail "
        << "included)\n";
    out << "  utilisation  busy / rank time " << fmt("%.4f", util_busy) << "  (" << fmt("%.2f", s.busy_seconds)
        << " s of " << fmt("%.2f", s.rank_seconds) << " s); experiment time / rank time " << fmt("%.4f", util_slept)
        << "\n";
    out << "  wall         " << fmt("%.2f", wall) << " s (coordinator " << fmt("%.2f", s.rank_seconds / world)
        << " s); ideal " << n << " x " << o.ms << " ms / " << world << " = " << fmt("%.2f", ideal)
        << " s; ideal / wall " << fmt("%.3f", wall > 0 ? ideal / wall : 0) << "\n";
    out << "  experiments  " << s.completed << " of " << s.total << " completed, " << s.ran << " dispatched, "
        << s.failed << " failed, " << s.lost_ranks << " lost ranks\n";
    out << "  targets      dispatch p99 < 20 ms: " << (p99_ok ? "met" : "MISSED") << " (" << fmt("%.2f", d99)
        << " ms); utilisation >= 90%: " << (util_ok ? "met" : "MISSED") << " ("
        << fmt("%.1f", 100.0 * std::min(util_busy, util_slept)) << "%)\n";
    out.flush();
    return s.completed == s.total && s.total == n ? 0 : 1;
  } catch (const std::exception& e) {
    // The other ranks may wait for this one forever: end them all.
    std::cerr << "mambamt: error: [rank " << rank << "] " << e.what() << std::endl;
    MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
  }
}

}  // namespace

int run_orchestrator_bench(const std::vector<std::string>& args, std::ostream& out) {
  for (auto& a : args)
    if (a == "--help" || a == "-h") {
      out << "usage: mambamt bench orchestrator [--ranks R] [--experiments N] [--ms MS] [--quick]\n\n"
          << kOrchestratorBenchHelp << "\n";
      return 0;
    }
  const Options o = parse(args);
  if (!under_mpi_launcher()) return relaunch(o, args, out);
  return measure(o, out);
}

}  // namespace mambamt::bench
