#include "bench/bench.h"

#include "bench/data_bench.h"
#include "bench/decode_bench.h"
#include "bench/kernels_bench.h"
#include "bench/orchestrator_bench.h"
#include "bench/prefixes_bench.h"
#include "bench/train_bench.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/config.h"
#include "core/error.h"
#include "models/registry.h"

namespace mambamt::bench {

std::vector<int64_t> parse_list(const std::vector<std::string>& args, size_t& i, const std::string& who,
                                const std::string& option) {
  if (i + 1 >= args.size()) throw UsageError(who + ": " + option + " needs a value");
  std::vector<int64_t> out;
  std::stringstream ss(args[++i]);
  for (std::string item; std::getline(ss, item, ',');) {
    char* end = nullptr;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != 0 || v < 1)
      throw UsageError(who + ": " + option + " takes positive integers separated by commas, got '" + args[i] + "'");
    out.push_back(v);
  }
  if (out.empty()) throw UsageError(who + ": " + option + " is empty");
  return out;
}

std::string fmt(const char* format, double v) {
  if (std::isnan(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string load_average() {
  std::string load = "?";
  std::ifstream la("/proc/loadavg");
  if (la) std::getline(la, load);
  return load;
}

void finish_queued(const c10::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index() < 0 ? -1 : device.index());
}

double copy_bandwidth(const torch::Device& device) {
  const int64_t n = 64LL << 20;  // 256 MiB of float32
  const auto o = torch::TensorOptions().device(device);
  torch::Tensor src = torch::ones({n}, o), dst = torch::empty({n}, o);
  const int copies = device.is_cuda() ? 10 : 1;
  dst.copy_(src);
  finish_queued(device);
  double best = 1e300;
  for (int r = 0; r < 5; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int c = 0; c < copies; ++c) dst.copy_(src);
    finish_queued(device);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / copies);
  }
  return 2.0 * static_cast<double>(n) * 4.0 / best;
}

std::shared_ptr<models::TranslationModel> preset_model(const std::string& kind, const std::string& preset,
                                                       int64_t vocab, const std::string& who) {
  core::ModelConfig c;
  try {
    const std::string toml = "[model]\nkind = \"" + kind + "\"\npreset = \"" + preset + "\"\ndropout = 0.0\n";
    c = core::parse_experiment(toml, who).model;
  } catch (const InputError& e) {
    throw UsageError(who + ": --preset: " + e.what());
  }
  torch::manual_seed(1);
  return models::build_model(c, vocab);
}

const std::vector<Benchmark>& all() {
  // One line per benchmark; each lives in bench/<name>_bench.cpp.
  static const std::vector<Benchmark> list = {
      {"data", kDataBenchHelp, run_data_bench},
      {"decode", kDecodeBenchHelp, run_decode_bench},
      {"kernels", kKernelsBenchHelp, run_kernels_bench},
      {"orchestrator", kOrchestratorBenchHelp, run_orchestrator_bench},
      {"prefixes", kPrefixesBenchHelp, run_prefixes_bench},
      {"train", kTrainBenchHelp, run_train_bench},
  };
  return list;
}

}  // namespace mambamt::bench
