#include "bench/decode_bench.h"

#include "bench/bench.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include "core/config.h"
#include "core/error.h"
#include "models/registry.h"

namespace mambamt::bench {

const char* const kDecodeBenchHelp =
    "Greedy decoding of the hybrid (1:7, attention middle+end, cross-attention every 4 layers), the pure "
    "Mamba and the Transformer of one size preset (equal parameter counts, 32k vocabulary), source 128 "
    "tokens, batch 1 and 16, target lengths 256, 1024 and 4096 (one run per model and batch, measured at "
    "each length): tokens/s, time per token at the end against the start of the output, decoder-state "
    "memory (KV cache against Mamba states), as ratios to the Transformer, next to the ratios predicted "
    "by the bytes each step reads (decoder weights once, every cache and state of every sequence) at the "
    "copy bandwidth measured in the same run. Options: --quick (tiny preset, lengths 64,256, batch 1,4), "
    "--preset tiny|small|base|medium|large (small), --batch LIST, --lengths LIST, --src N (128), "
    "--threads N (LibTorch's default), --repeat R (best of R runs, 1).";

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Copy bandwidth (bytes read + written per second) of a copy far larger than
// the caches, best of 5: the rate a memory-bound decoding step can stream at.
double copy_bandwidth() {
  const int64_t n = 64LL << 20;  // 256 MiB of float32
  torch::Tensor src = torch::ones({n}), dst = torch::empty({n});
  dst.copy_(src);
  double best = 1e300;
  for (int r = 0; r < 5; ++r) {
    const auto t0 = Clock::now();
    dst.copy_(src);
    best = std::min(best, since(t0));
  }
  return 2.0 * static_cast<double>(n) * 4.0 / best;
}

struct Run {
  std::vector<double> step_s;      // wall time of each step
  std::vector<double> step_bytes;  // bytes the step reads (model of a memory-bound step)
  std::map<int64_t, models::StateBytes> state_at;  // state after T steps
  double start_s = 0;
  double total() const {
    double s = 0;
    for (double x : step_s) s += x;
    return s;
  }
};

// One greedy decode of `steps` tokens per row (eos masked so every row runs to the end).
Run decode(models::TranslationModel& m, const torch::Tensor& src, int64_t steps, const std::vector<int64_t>& marks) {
  torch::NoGradGuard no_grad;
  const auto& ids = m.context().ids;
  const int64_t b = src.size(0);
  const double weight_bytes = static_cast<double>(m.decoder_parameter_count()) * 4.0;
  Run r;
  auto t0 = Clock::now();
  models::InferenceState st = m.start(src, torch::ones(src.sizes(), torch::kBool), steps);
  r.start_s = since(t0);
  torch::Tensor tokens = torch::full({b}, ids.bos, torch::kLong);
  for (int64_t t = 0; t < steps; ++t) {
    const models::StateBytes sb = st.bytes();
    // Weights once per step; KV caches and cross K/V read; Mamba states read and written.
    r.step_bytes.push_back(weight_bytes + static_cast<double>(sb.kv_cache + sb.cross_kv + 2 * sb.mamba));
    const auto t1 = Clock::now();
    torch::Tensor logits = m.step(st, tokens);
    logits.select(1, ids.eos).fill_(-std::numeric_limits<float>::infinity());
    tokens = logits.argmax(1);
    r.step_s.push_back(since(t1));
    if (std::find(marks.begin(), marks.end(), t + 1) != marks.end()) r.state_at[t + 1] = st.bytes();
  }
  return r;
}

struct Result {
  double tok_s = 0, pred_tok_s = 0;
  double start_ms = 0, end_ms = 0;  // per token
  models::StateBytes state;
};

Result summarise(const Run& r, int64_t b, int64_t len, double bandwidth) {
  Result out;
  double time = 0, bytes = 0;
  for (int64_t t = 0; t < len; ++t) time += r.step_s[t], bytes += r.step_bytes[t];
  out.tok_s = static_cast<double>(b * len) / time;
  out.pred_tok_s = static_cast<double>(b * len) / (bytes / bandwidth);
  // Mean step time over an eighth of the output at its start (after two warm-up
  // steps) and at its end, per token.
  const int64_t n = std::max<int64_t>(4, len / 8), skip = std::min<int64_t>(2, len - n);
  double s = 0, e = 0;
  for (int64_t t = skip; t < skip + n; ++t) s += r.step_s[t];
  for (int64_t t = len - n; t < len; ++t) e += r.step_s[t];
  out.start_ms = s / static_cast<double>(n) / static_cast<double>(b) * 1e3;
  out.end_ms = e / static_cast<double>(n) / static_cast<double>(b) * 1e3;
  out.state = r.state_at.at(len);
  return out;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string mb(int64_t bytes) { return fmt("%.1f", static_cast<double>(bytes) / (1 << 20)); }

}  // namespace

int run_decode_bench(const std::vector<std::string>& args, std::ostream& out) {
  std::string preset = "small";
  std::vector<int64_t> batches{1, 16}, lengths{256, 1024, 4096};
  int64_t src_len = 128, threads = 0, repeat = 1;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--quick") {
      preset = "tiny", batches = {1, 4}, lengths = {64, 256};
    } else if (args[i] == "--preset" && i + 1 < args.size()) {
      preset = args[++i];
    } else if (args[i] == "--batch") {
      batches = parse_list(args, i, "bench decode", "--batch");
    } else if (args[i] == "--lengths") {
      lengths = parse_list(args, i, "bench decode", "--lengths");
    } else if (args[i] == "--src") {
      src_len = parse_list(args, i, "bench decode", "--src").at(0);
    } else if (args[i] == "--threads") {
      threads = parse_list(args, i, "bench decode", "--threads").at(0);
    } else if (args[i] == "--repeat") {
      repeat = parse_list(args, i, "bench decode", "--repeat").at(0);
    } else {
      throw UsageError("bench decode: unknown argument '" + args[i] + "'");
    }
  }
  std::sort(lengths.begin(), lengths.end());
  // Set explicitly even at the default: it also caps OpenMP (which OpenBLAS
  // uses) to the same count; left at its default, OpenBLAS ran one thread per
  // core, and on a busy machine its spinning threads made a gemv 10x slower.
  torch::set_num_threads(static_cast<int>(threads > 0 ? threads : torch::get_num_threads()));
  const int64_t vocab = 32000, max_len = lengths.back();

  // The baseline first: every ratio is against it.
  const std::vector<std::string> kinds{"transformer", "hybrid", "mamba"};
  std::vector<models::ModelPtr> ms;
  for (const std::string& kind : kinds) {
    core::ModelConfig c;
    try {
      c = core::parse_experiment("[model]\nkind = \"" + kind + "\"\npreset = \"" + preset + "\"\ndropout = 0.0\n",
                                 "bench decode")
              .model;
    } catch (const InputError& e) {
      throw UsageError(std::string("bench decode: --preset: ") + e.what());
    }
    torch::manual_seed(1);
    ms.push_back(models::build_model(c, vocab));
    ms.back()->eval();
  }
  std::string load = "?";
  {
    std::ifstream la("/proc/loadavg");
    if (la) std::getline(la, load);
  }
  const double bw = copy_bandwidth();
  out << "decode benchmark: greedy, preset " << preset << ", source " << src_len << " tokens, vocabulary " << vocab
      << ", LibTorch threads " << torch::get_num_threads() << ", load average " << load << "\n";
  for (size_t k = 0; k < kinds.size(); ++k)
    out << "  " << kinds[k] << ": " << fmt("%.1f", ms[k]->parameter_count() / 1e6) << "M parameters, "
        << fmt("%.1f", ms[k]->decoder_parameter_count() / 1e6) << "M read per step\n";
  out << "copy bandwidth: " << fmt("%.2f", bw / 1e9) << " GB/s (read + written, 256 MiB copies, best of 5)\n";
  out << "predicted = the bytes each step reads at that bandwidth (decoder weights once; KV caches and cross K/V "
         "read; Mamba states read and written)\n";

  for (int64_t b : batches) {
    torch::manual_seed(2);
    torch::Tensor src = torch::randint(5, vocab, {b, src_len}, torch::kLong);
    src.select(1, src_len - 1).fill_(ms[0]->context().ids.eos);
    std::vector<Run> runs;
    for (auto& m : ms) {
      Run best;
      for (int64_t r = 0; r < repeat; ++r) {
        Run run = decode(*m, src, max_len, lengths);
        if (r == 0 || run.total() < best.total()) best = std::move(run);
      }
      runs.push_back(std::move(best));
    }
    out << "\nbatch " << b << "\n";
    out << "model        target   tok/s  pred tok/s | x transf  pred   meas/pred | ms/token start    end  end/start |"
           "  KV MB  Mamba MB  cross MB  state x transf\n";
    for (int64_t len : lengths) {
      Result base = summarise(runs[0], b, len, bw);
      for (size_t k = 0; k < kinds.size(); ++k) {
        Result r = summarise(runs[k], b, len, bw);
        const double ratio = r.tok_s / base.tok_s, pred = r.pred_tok_s / base.pred_tok_s;
        const int64_t dec = r.state.decoder_state();
        char line[512];
        std::snprintf(line, sizeof line,
                      "%-12s %6lld %7.0f %11.0f | %8.2f %5.2f %9.2f  | %14.3f %6.3f %9.2f  | %6s %9s %9s %15s\n",
                      kinds[k].c_str(), static_cast<long long>(len), r.tok_s, r.pred_tok_s, ratio, pred, ratio / pred,
                      r.start_ms, r.end_ms, r.end_ms / r.start_ms, mb(r.state.kv_cache).c_str(),
                      mb(r.state.mamba).c_str(), mb(r.state.cross_kv).c_str(),
                      dec > 0 ? fmt("%.2f", static_cast<double>(base.state.decoder_state()) / static_cast<double>(dec)).c_str()
                              : "-");
        out << line;
      }
    }
    out << "encode/prefill (s):";
    for (size_t k = 0; k < kinds.size(); ++k) out << " " << kinds[k] << " " << fmt("%.3f", runs[k].start_s);
    out << "\n";
  }
  out.flush();
  return 0;
}

}  // namespace mambamt::bench
