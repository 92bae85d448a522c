#include "bench/bench.h"

#include "bench/data_bench.h"
#include "bench/decode_bench.h"
#include "bench/gates_bench.h"
#include "bench/kernels_bench.h"
#include "bench/learn_bench.h"
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

struct CopyLoop::Buffers {
  torch::Device device;
  torch::Tensor src, dst;
  int copies;
};

CopyLoop::CopyLoop(const torch::Device& device, int64_t bytes)
    : buffers_(new Buffers{device, torch::ones({bytes / 4}, torch::TensorOptions().device(device)), {},
                           device.is_cuda() ? 10 : 1}) {
  buffers_->dst = torch::empty_like(buffers_->src);
  run();  // first touch: the pages are mapped before anything is timed
}

CopyLoop::~CopyLoop() = default;

void CopyLoop::run() const {
  for (int c = 0; c < buffers_->copies; ++c) buffers_->dst.copy_(buffers_->src);
  finish_queued(buffers_->device);
}

double CopyLoop::bandwidth(double seconds) const {
  return 2.0 * static_cast<double>(buffers_->src.nbytes()) * buffers_->copies / seconds;
}

double CopyLoop::sample() const {
  const auto t0 = std::chrono::steady_clock::now();
  run();
  return bandwidth(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

double copy_bandwidth(const torch::Device& device) {
  const CopyLoop copy(device, 256LL << 20);
  double best = 0;
  for (int r = 0; r < 5; ++r) best = std::max(best, copy.sample());
  return best;
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
      {"gates", kGatesBenchHelp, run_gates_bench},
      {"kernels", kKernelsBenchHelp, run_kernels_bench},
      {"learn", kLearnBenchHelp, run_learn_bench},
      {"orchestrator", kOrchestratorBenchHelp, run_orchestrator_bench},
      {"prefixes", kPrefixesBenchHelp, run_prefixes_bench},
      {"train", kTrainBenchHelp, run_train_bench},
  };
  return list;
}

}  // namespace mambamt::bench
