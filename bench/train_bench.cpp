#include "bench/train_bench.h"

#include "bench/bench.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <set>
#include <sstream>

#include "core/allocator.h"
#include "core/error.h"
#include "models/registry.h"
#include "train/loss.h"
#include "train/memory.h"
#include "train/optim.h"

namespace mambamt::bench {

const char* const kTrainBenchHelp =
    "Training steps (forward, label-smoothed loss, backward, AdamW) of the hybrid (1:7, attention "
    "middle+end, cross-attention every 4 layers) and the Transformer of one size preset on a batch of one "
    "document of L source and L target tokens, L = 512, 2048 and 8192: tokens/s (source + target) and peak "
    "memory above the idle process (CPU resident set, or CUDA peak allocated), with the hybrid/Transformer "
    "ratios. A size that fails (out of memory) is reported as such. Options: --quick (lengths 128,512, one "
    "step), --preset tiny|small|base|medium|large (tiny; small and up need a GPU at 8192), --lengths LIST, "
    "--steps N timed steps after one warm-up (2), --threads N (LibTorch's default).";

namespace {

using Clock = std::chrono::steady_clock;

struct Measure {
  bool ok = false;
  std::string error;
  double tok_s = 0;
  double memory_mb = 0;
  double step_s = 0;
};

Measure measure(models::TranslationModel& model, int64_t length, int64_t steps, int64_t vocab,
                const torch::Device& device) {
  Measure m;
  try {
    torch::manual_seed(3);
    torch::Tensor ids = torch::randint(5, vocab, {1, length}, torch::TensorOptions().dtype(torch::kInt64).device(device));
    torch::Tensor mask = torch::ones({1, length}, torch::TensorOptions().dtype(torch::kBool).device(device));
    train::NamedParameters named;
    std::vector<torch::Tensor> params;
    std::set<const void*> seen;  // tied embeddings appear under two names
    for (auto& p : model.named_parameters()) {
      if (!seen.insert(p.value().unsafeGetTensorImpl()).second) continue;
      named.emplace_back(p.key(), p.value());
      params.push_back(p.value());
    }
    train::AdamW opt(named, train::AdamWOptions{});
    model.train();
    core::FreePagesBound free_pages;
    auto one_step = [&] {
      for (auto& p : params) p.mutable_grad() = torch::Tensor();
      torch::Tensor logits = model.forward(ids, mask, ids, mask);
      train::LossSums ls = train::label_smoothed_loss(logits, ids, mask, 0.1);
      (ls.loss / static_cast<double>(ls.tokens)).backward();
      opt.step(1e-4);
      free_pages.tick();  // as the trainer does
    };
    train::start_peak_measurement(device);  // pages kept from the last model would hide this peak
    const double base = device.is_cuda() ? 0 : train::rss_mb();
    one_step();  // warm-up (allocations, kernel selection)
    finish_queued(device);
    const auto t0 = Clock::now();
    for (int64_t s = 0; s < steps; ++s) one_step();
    finish_queued(device);
    m.step_s = std::chrono::duration<double>(Clock::now() - t0).count() / static_cast<double>(steps);
    m.tok_s = 2.0 * static_cast<double>(length) / m.step_s;
    m.memory_mb = device.is_cuda() ? train::cuda_peak_mb(device) : std::max(0.0, train::peak_rss_mb() - base);
    for (auto& p : params) p.mutable_grad() = torch::Tensor();
    m.ok = true;
  } catch (const std::exception& e) {
    m.error = e.what();
    const size_t nl = m.error.find('\n');
    if (nl != std::string::npos) m.error.resize(nl);
  }
  return m;
}

}  // namespace

int run_train_bench(const std::vector<std::string>& args, std::ostream& out) {
  std::string preset = "tiny";
  std::vector<int64_t> lengths{512, 2048, 8192};
  int64_t steps = 2, threads = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--quick") {
      lengths = {128, 512}, steps = 1;
    } else if (args[i] == "--preset" && i + 1 < args.size()) {
      preset = args[++i];
    } else if (args[i] == "--lengths") {
      lengths = parse_list(args, i, "bench train", "--lengths");
    } else if (args[i] == "--steps") {
      steps = parse_list(args, i, "bench train", "--steps").at(0);
    } else if (args[i] == "--threads") {
      threads = parse_list(args, i, "bench train", "--threads").at(0);
    } else {
      throw UsageError("bench train: unknown argument '" + args[i] + "'");
    }
  }
  if (threads > 0) torch::set_num_threads(static_cast<int>(threads));
  const torch::Device device = torch::cuda::is_available() ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);
  const int64_t vocab = 8000;
  const std::vector<std::string> kinds{"transformer", "hybrid"};  // the baseline first
  std::vector<models::ModelPtr> ms;
  for (const std::string& kind : kinds) {
    ms.push_back(preset_model(kind, preset, vocab, "bench train"));
    ms.back()->to(device);
  }
  const std::string load = load_average();
  out << "train benchmark: preset " << preset << ", batch of one document (L source + L target tokens), vocabulary "
      << vocab << ", fp32, " << device.str() << ", LibTorch threads " << torch::get_num_threads() << ", "
      << core::allocator_name() << ", load average " << load << "\n";
  for (size_t k = 0; k < kinds.size(); ++k)
    out << "  " << kinds[k] << ": " << fmt("%.2f", ms[k]->parameter_count() / 1e6) << "M parameters\n";
  out << "\n     L  model           tok/s   s/step  peak MiB | tok/s x transf  memory x transf\n";
  for (int64_t len : lengths) {
    std::vector<Measure> res;
    for (auto& m : ms) res.push_back(measure(*m, len, steps, vocab, device));
    for (size_t k = 0; k < kinds.size(); ++k) {
      const Measure& r = res[k];
      char line[256];
      if (!r.ok) {
        std::snprintf(line, sizeof line, "%6lld  %-12s  failed: %s\n", static_cast<long long>(len), kinds[k].c_str(),
                      r.error.substr(0, 120).c_str());
        out << line;
        continue;
      }
      const bool base_ok = res[0].ok;
      std::snprintf(line, sizeof line, "%6lld  %-12s %8.0f %8.3f %9.0f | %14s %16s\n", static_cast<long long>(len),
                    kinds[k].c_str(), r.tok_s, r.step_s, r.memory_mb,
                    base_ok ? fmt("%.2f", r.tok_s / res[0].tok_s).c_str() : "-",
                    base_ok && res[0].memory_mb > 0 ? fmt("%.2f", r.memory_mb / res[0].memory_mb).c_str() : "-");
      out << line;
    }
    out.flush();
  }
  out << "\nmemory: the peak above the process before the first step of that size (CPU: resident set, measured\n"
         "from after the allocator handed its free pages back; CUDA: allocator peak).\n";
  return 0;
}

}  // namespace mambamt::bench
