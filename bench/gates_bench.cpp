#include "bench/gates_bench.h"

#include "bench/bench.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "core/config.h"
#include "core/error.h"
#include "models/layers.h"
#include "models/registry.h"

namespace mambamt::bench {

const char* const kGatesBenchHelp =
    "Gated cross-attention skipped where its gate is below eval.gate_skip, in CPU decode steps. Layer: one "
    "gated cross-attention of the preset's width and heads, a batch of one-token queries over sources of each "
    "length, with 0%, 50% or 100% of the rows' gates closed (the gate set to read one input feature, so the "
    "share is exact); against the same step with skipping off (every row computed), measured in the same "
    "rounds. Next to each measured time ratio, the ratio of the bytes the step reads (the q, out and gate "
    "weights once, the source K/V of every row computed): a decode step is memory-bound. Model: greedy "
    "decoding steps of the preset's hybrid with gated cross-attention (the source encoded before the clock "
    "starts), tokens/s with every gated layer closed "
    "(eval.gate_skip = 1) against none skipped: the most skipping can save in that model. Options: --quick "
    "(tiny preset, batch 4, sources 32,64, 8 output tokens, 2 rounds), --preset tiny|small|base|medium|large "
    "(small), --batch N (16), --src N,N (128,1024 source tokens), --out N (32 output tokens), --rounds R (5), "
    "--threads N (LibTorch's default).";

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[(v.size() - 1) / 2];
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace

int run_gates_bench(const std::vector<std::string>& args, std::ostream& out) {
  std::string preset = "small";
  int64_t batch = 16, out_len = 32, rounds = 5, threads = 0;
  std::vector<int64_t> sources{128, 1024};
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--quick") {
      preset = "tiny", batch = 4, sources = {32, 64}, out_len = 8, rounds = 2;
    } else if (args[i] == "--preset" && i + 1 < args.size()) {
      preset = args[++i];
    } else if (args[i] == "--batch") {
      batch = parse_list(args, i, "bench gates", "--batch").at(0);
    } else if (args[i] == "--src") {
      sources = parse_list(args, i, "bench gates", "--src");
    } else if (args[i] == "--out") {
      out_len = parse_list(args, i, "bench gates", "--out").at(0);
    } else if (args[i] == "--rounds") {
      rounds = parse_list(args, i, "bench gates", "--rounds").at(0);
    } else if (args[i] == "--threads") {
      threads = parse_list(args, i, "bench gates", "--threads").at(0);
    } else {
      throw UsageError("bench gates: unknown argument '" + args[i] + "'");
    }
  }
  torch::set_num_threads(static_cast<int>(threads > 0 ? threads : torch::get_num_threads()));
  torch::NoGradGuard no_grad;
  core::ModelConfig config;
  try {
    config = core::parse_experiment("[model]\nkind = \"hybrid\"\npreset = \"" + preset +
                                        "\"\ndropout = 0.0\ncross_attn = \"gated\"\n",
                                    "bench gates")
                 .model;
  } catch (const InputError& e) {
    throw UsageError(std::string("bench gates: --preset: ") + e.what());
  }
  const int64_t d = config.d_model, heads = config.n_heads;
  out << "gates benchmark: preset " << preset << " (d_model " << d << ", " << heads << " heads), batch " << batch
      << ", LibTorch threads " << torch::get_num_threads() << ", load average " << load_average() << "\n";
  out << "layer: one gated cross-attention decode step; off = skipping off, every row computed (baseline); "
         "closed = the share of rows whose gate is below eval.gate_skip; microseconds per step, median of "
      << rounds << " rounds of 200 steps in turns; bytes = what the step reads (weights once, K/V of the rows "
                   "computed)\n\n";
  char head[200];
  std::snprintf(head, sizeof head, "%8s %7s %10s %10s %9s %11s\n", "source", "closed", "off us", "skip us",
                "ratio", "bytes ratio");
  out << head;
  out.flush();
  const auto t_begin = Clock::now();

  torch::manual_seed(1);
  models::CrossAttention cross(models::CrossAttentionOptions(d, heads).kind(models::CrossAttentionKind::kGated));
  cross->eval();
  // The gate reads feature 0 alone: +1 opens a row (sigmoid(20)), -1 closes it.
  cross->gate->weight.zero_();
  cross->gate->weight[0][0] = 20.0;
  cross->gate->bias.zero_();
  const double weight_bytes = 4.0 * static_cast<double>(2 * d * d + d);  // q, out, gate (the K/V are the source's)
  for (int64_t s : sources) {
    const torch::Tensor enc = torch::randn({batch, s, d});
    const models::CrossKv kv = cross->memory(enc, torch::ones({batch, s}, torch::kBool));
    const torch::Tensor positions = torch::zeros({batch, 1}, torch::kLong);
    const double kv_row_bytes = 4.0 * static_cast<double>(2 * s * d);
    for (double closed : {0.0, 0.5, 1.0}) {
      torch::Tensor x = torch::randn({batch, 1, d});
      const auto n_closed = static_cast<int64_t>(closed * static_cast<double>(batch) + 0.5);
      x.select(2, 0).fill_(1.0);
      if (n_closed > 0) x.select(2, 0).narrow(0, 0, n_closed).fill_(-1.0);
      std::vector<double> off_s, skip_s;
      auto time = [&](double skip_below, std::vector<double>& into) {
        cross->skip_below = skip_below;
        constexpr int kSteps = 200;
        const auto t0 = Clock::now();
        for (int k = 0; k < kSteps; ++k) cross(x, positions, kv);
        into.push_back(seconds_since(t0) / kSteps);
      };
      time(0.0, off_s);  // warm-up
      time(0.5, skip_s);
      off_s.clear(), skip_s.clear();
      for (int64_t r = 0; r < rounds; ++r) {
        time(0.0, off_s);
        time(0.5, skip_s);
      }
      const double off = median(off_s), skip = median(skip_s);
      const double computed = static_cast<double>(batch - n_closed);
      const double bytes_off = weight_bytes + static_cast<double>(batch) * kv_row_bytes;
      const double bytes_skip = n_closed == batch ? 4.0 * static_cast<double>(d) : weight_bytes + computed * kv_row_bytes;
      char row[200];
      std::snprintf(row, sizeof row, "%8lld %6.0f%% %10.1f %10.1f %8.2fx %10.2fx\n", static_cast<long long>(s),
                    100.0 * static_cast<double>(n_closed) / static_cast<double>(batch), off * 1e6, skip * 1e6,
                    skip / off, bytes_skip / bytes_off);
      out << row;
      out.flush();
    }
  }
  cross->skip_below = 0;

  // The whole model: greedy decoding steps (the encoder and the cross-attention
  // K/V of the source outside the clock) with every gated layer closed against none.
  torch::manual_seed(1);
  models::ModelPtr model = models::build_model(config, 32000);
  model->eval();
  const models::TokenIds& ids = model->context().ids;
  out << "\nmodel: greedy decoding steps of the hybrid (" << model->plan().decoder.size()
      << " decoder layers, cross-attention every " << config.cross_attn_every << "), " << out_len
      << " steps after the source is encoded (not timed); tok/s, median of the rounds in turns; closed = "
         "eval.gate_skip 1 (every gated layer skipped), open = skipping off\n\n";
  std::snprintf(head, sizeof head, "%8s %11s %12s %9s\n", "source", "open tok/s", "closed tok/s", "speedup");
  out << head;
  for (int64_t s : sources) {
    torch::Tensor src = torch::randint(5, 32000, {batch, s}, torch::kLong);
    src.select(1, s - 1).fill_(ids.eos);
    const torch::Tensor mask = torch::ones(src.sizes(), torch::kBool);
    std::vector<double> open_s, closed_s;
    auto time = [&](double skip_below, std::vector<double>* into) {
      models::set_gate_skip(*model, skip_below);
      models::InferenceState st = model->start(src, mask, out_len + 1);
      torch::Tensor tokens = torch::full({batch}, ids.bos, torch::kLong);
      const auto t0 = Clock::now();
      for (int64_t k = 0; k < out_len; ++k) tokens = model->step(st, tokens).argmax(-1);
      if (into) into->push_back(seconds_since(t0));
    };
    time(0.0, nullptr);  // warm-up
    for (int64_t r = 0; r < rounds; ++r) {
      time(0.0, &open_s);
      time(1.0, &closed_s);
    }
    models::set_gate_skip(*model, 0.0);
    const double tokens = static_cast<double>(batch * out_len);
    char row[200];
    std::snprintf(row, sizeof row, "%8lld %11.0f %12.0f %8.2fx\n", static_cast<long long>(s), tokens / median(open_s),
                  tokens / median(closed_s), median(open_s) / median(closed_s));
    out << row;
    out.flush();
  }
  out << "\ntotal " << fmt("%.1f", seconds_since(t_begin)) << " s\n";
  return 0;
}

}  // namespace mambamt::bench
