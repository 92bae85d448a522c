#pragma once
// Benchmarks run by `mambamt bench <name>`. Each one measures its baseline in
// the same run and prints ratios against it; none is a test.
#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

namespace c10 {
struct Device;
}
namespace mambamt::models {
class TranslationModel;
}

namespace mambamt::bench {

struct Benchmark {
  std::string name;  // the word after `mambamt bench`
  std::string help;  // one paragraph: what it measures and its options
  // args: the arguments after the name (e.g. {"--quick"}); returns the exit code.
  std::function<int(const std::vector<std::string>& args, std::ostream& out)> run;
};

// The value of option args[i] (i advances past it): positive integers
// separated by commas; a UsageError naming `who` ("bench decode") and the option otherwise.
std::vector<int64_t> parse_list(const std::vector<std::string>& args, size_t& i, const std::string& who,
                                const std::string& option);

// Every benchmark, in the order `mambamt bench --help` lists them.
const std::vector<Benchmark>& all();

// One value printed with a printf format ("%.2f"); "-" for NaN.
std::string fmt(const char* format, double v);

// The first line of /proc/loadavg ("?" where there is none): how busy the
// machine was, printed in every benchmark's header.
std::string load_average();

// Waits for the work queued on `device` (a GPU runs it asynchronously), so
// that a clock read afterwards includes it; nothing on the CPU.
void finish_queued(const c10::Device& device);

// A copy between two buffers far larger than the caches, made once, to be
// timed beside the work whose bytes it prices: on these shared machines the
// copy bandwidth moved in steps of up to 2x between runs and within one (22,
// 31, 43 GB/s), so a bandwidth is measured in the same rounds as the timings
// it is compared with. On a GPU a run is 10 device-to-device copies queued
// back to back (one 256 MiB copy takes well under a millisecond there).
class CopyLoop {
 public:
  CopyLoop(const c10::Device& device, int64_t bytes);
  ~CopyLoop();
  CopyLoop(const CopyLoop&) = delete;
  CopyLoop& operator=(const CopyLoop&) = delete;
  // The copies, finished on the device.
  void run() const;
  // Bytes read + written per second of a run() that took `seconds`.
  double bandwidth(double seconds) const;
  // run() timed once: its bandwidth.
  double sample() const;

 private:
  struct Buffers;
  std::unique_ptr<Buffers> buffers_;
};

// Copy bandwidth (bytes read + written per second) of a 256 MiB CopyLoop,
// best of 5: the rate a memory-bound op can stream at.
double copy_bandwidth(const c10::Device& device);

// A model of `kind` at size `preset` (dropout 0, initialised from seed 1, so
// every run builds the same weights) for a vocabulary of `vocab`; a bad preset
// is a UsageError naming `who` ("bench decode") and --preset.
std::shared_ptr<models::TranslationModel> preset_model(const std::string& kind, const std::string& preset,
                                                       int64_t vocab, const std::string& who);

}  // namespace mambamt::bench
