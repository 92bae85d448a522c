#include "bench/prefixes_bench.h"

#include "bench/bench.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

#include "core/error.h"
#include "models/registry.h"
#include "models/search.h"

namespace mambamt::bench {

const char* const kPrefixesBenchHelp =
    "Beam search after forced target prefixes of different lengths, as document-level models translate a "
    "sentence after their own translations of the sentences before it (train::translate_in_context): the "
    "Transformer, the hybrid (1:7, middle+end) and the pure Mamba of one size preset, a batch of random "
    "sources with prefixes of random lengths, every output forced to the same length. Baseline: the part "
    "of the prefix every row has (the shortest) goes through one prefill and the rest of each row is fed "
    "one step per token (SearchOptions::prefill_prefixes false, what kinds without ragged prefill do); "
    "against it, each row's whole prefix in one prefill (TranslationModel::prefill with lengths). Both in "
    "turns, R rounds, median; the hypotheses of the two must be the same ('same' column). Options: --quick "
    "(tiny preset, batch 4, beam 2, source 24, prefixes 4,24, output 6, 2 rounds), --preset "
    "tiny|small|base|medium|large (small), --batch N (16), --beam K (4), --src N (100), --prefixes MIN,MAX "
    "(20,120: lengths drawn uniformly), --out N (24 output tokens), --rounds R (3), --threads N (LibTorch's "
    "default).";

namespace {

using Clock = std::chrono::steady_clock;

// The median (the lower middle one of an even count).
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[(v.size() - 1) / 2];
}

bool same(const std::vector<models::NBest>& a, const std::vector<models::NBest>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].size() != b[i].size()) return false;
    for (size_t j = 0; j < a[i].size(); ++j)
      if (a[i][j].tokens != b[i][j].tokens || std::abs(a[i][j].log_prob - b[i][j].log_prob) > 1e-3) return false;
  }
  return true;
}

}  // namespace

int run_prefixes_bench(const std::vector<std::string>& args, std::ostream& out) {
  std::string preset = "small";
  int64_t batch = 16, beam = 4, src_len = 100, out_len = 24, rounds = 3, threads = 0;
  std::vector<int64_t> range{20, 120};
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--quick") {
      preset = "tiny", batch = 4, beam = 2, src_len = 24, range = {4, 24}, out_len = 6, rounds = 2;
    } else if (args[i] == "--preset" && i + 1 < args.size()) {
      preset = args[++i];
    } else if (args[i] == "--batch") {
      batch = parse_list(args, i, "bench prefixes", "--batch").at(0);
    } else if (args[i] == "--beam") {
      beam = parse_list(args, i, "bench prefixes", "--beam").at(0);
    } else if (args[i] == "--src") {
      src_len = parse_list(args, i, "bench prefixes", "--src").at(0);
    } else if (args[i] == "--prefixes") {
      range = parse_list(args, i, "bench prefixes", "--prefixes");
      if (range.size() != 2 || range[0] > range[1])
        throw UsageError("bench prefixes: --prefixes takes MIN,MAX with MIN <= MAX, got '" + args[i] + "'");
    } else if (args[i] == "--out") {
      out_len = parse_list(args, i, "bench prefixes", "--out").at(0);
    } else if (args[i] == "--rounds") {
      rounds = parse_list(args, i, "bench prefixes", "--rounds").at(0);
    } else if (args[i] == "--threads") {
      threads = parse_list(args, i, "bench prefixes", "--threads").at(0);
    } else {
      throw UsageError("bench prefixes: unknown argument '" + args[i] + "'");
    }
  }
  // As bench decode: set explicitly, which also caps OpenMP's threads.
  torch::set_num_threads(static_cast<int>(threads > 0 ? threads : torch::get_num_threads()));
  torch::NoGradGuard no_grad;
  const int64_t vocab = 32000;
  const std::vector<std::string> kinds{"transformer", "hybrid", "mamba"};
  std::vector<models::ModelPtr> ms;
  for (const std::string& kind : kinds) {
    ms.push_back(preset_model(kind, preset, vocab, "bench prefixes"));
    ms.back()->eval();
  }
  const models::TokenIds& ids = ms[0]->context().ids;

  // Sources of src_len tokens (the last one eos); prefixes of lengths drawn
  // uniformly in the range, random tokens that are not eos.
  torch::manual_seed(2);
  torch::Tensor src = torch::randint(5, vocab, {batch, src_len}, torch::kLong);
  src.select(1, src_len - 1).fill_(ids.eos);
  const torch::Tensor mask = torch::ones(src.sizes(), torch::kBool);
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<int64_t> length(range[0], range[1]), token(5, vocab - 1);
  models::Prefixes prefixes(static_cast<size_t>(batch));
  for (auto& p : prefixes) {
    p.resize(static_cast<size_t>(length(rng)));
    for (auto& t : p) t = token(rng);
  }
  int64_t shortest = range[1], longest = 0;
  for (const auto& p : prefixes) {
    shortest = std::min<int64_t>(shortest, static_cast<int64_t>(p.size()));
    longest = std::max<int64_t>(longest, static_cast<int64_t>(p.size()));
  }

  models::SearchOptions o;
  o.beam_size = beam;
  o.nbest = 1;
  o.min_length = out_len;  // no eos before out_len tokens, and none after: every row runs to the end
  o.max_length = out_len;
  o.max_len_a = 0;
  o.max_len_b = out_len;

  const std::string load = load_average();
  out << "prefixes benchmark: beam " << beam << ", batch " << batch << ", preset " << preset << ", source "
      << src_len << " tokens, prefixes " << range[0] << ".." << range[1] << " tokens (drawn: " << shortest << ".."
      << longest << "), " << out_len << " output tokens, vocabulary " << vocab << ", LibTorch threads "
      << torch::get_num_threads() << ", load average " << load << "\n";
  out << "stepped = the shortest prefix prefilled, the rest fed one step per token (baseline); prefilled = every "
         "row's whole prefix in one prefill; seconds per search, median of "
      << rounds << " rounds in turns after a warm-up search; tok/s = output tokens (batch x " << out_len
      << ") per second\n\n";
  char head[200];
  std::snprintf(head, sizeof head, "%-12s %13s %11s %11s %13s %10s %5s\n", "model", "steps", "stepped s",
                "prefilled s", "tok/s", "speedup", "same");
  out << head;
  out.flush();
  const auto t_begin = Clock::now();
  for (size_t k = 0; k < kinds.size(); ++k) {
    std::vector<double> stepped_s, prefilled_s;
    bool agree = true;
    models::translate(*ms[k], src, mask, o, prefixes);  // warm-up: first-call costs (packed weights) out of the rounds
    for (int64_t r = 0; r < rounds; ++r) {
      std::vector<models::NBest> res[2];
      for (int pass = 0; pass < 2; ++pass) {
        models::SearchOptions so = o;
        so.prefill_prefixes = pass == 1;
        const auto t0 = Clock::now();
        res[pass] = models::translate(*ms[k], src, mask, so, prefixes);
        (pass == 1 ? prefilled_s : stepped_s).push_back(std::chrono::duration<double>(Clock::now() - t0).count());
      }
      agree = agree && same(res[0], res[1]);
    }
    const double a = median(stepped_s), b = median(prefilled_s);
    const int64_t steps_stepped = longest - shortest + out_len;
    const int64_t steps_prefilled = ms[k]->prefills_ragged() ? out_len : steps_stepped;
    char row[240];
    std::snprintf(row, sizeof row, "%-12s %13s %11.3f %11.3f %6.0f/%6.0f %9.2fx %5s\n", kinds[k].c_str(),
                  (std::to_string(steps_stepped) + "/" + std::to_string(steps_prefilled)).c_str(), a, b,
                  static_cast<double>(batch * out_len) / a, static_cast<double>(batch * out_len) / b, a / b,
                  agree ? "yes" : "NO");
    out << row;
    out.flush();
  }
  out << "\nsteps: stepped/prefilled decoder steps per search; tok/s: stepped/prefilled; speedup = stepped s / "
         "prefilled s\n";
  out << "total " << fmt("%.1f", std::chrono::duration<double>(Clock::now() - t_begin).count()) << " s\n";
  return 0;
}

}  // namespace mambamt::bench
