#include "results/bootstrap.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "core/error.h"

namespace mambamt::results {
namespace {

// Unbiased integer in [0, n) from a 64-bit generator (rejection sampling), so the
// resamples are the same on every standard library for a given seed.
std::size_t uniform_index(std::mt19937_64& rng, std::size_t n) {
  const std::uint64_t range = n;
  const std::uint64_t limit = UINT64_MAX - (UINT64_MAX % range);
  std::uint64_t x;
  do {
    x = rng();
  } while (x >= limit);
  return static_cast<std::size_t>(x % range);
}

void check(std::size_t num_segments, const BootstrapOptions& options) {
  if (num_segments == 0) throw InputError("bootstrap: no segments to resample");
  if (options.num_samples < 1) throw InputError("bootstrap: num_samples must be >= 1");
}

// Calls visit(indices) for each resample, in order.
template <typename Visit>
void resample(std::size_t num_segments, const BootstrapOptions& options, Visit visit) {
  std::mt19937_64 rng(options.seed);
  std::vector<std::size_t> idx(num_segments);
  for (int s = 0; s < options.num_samples; ++s) {
    for (auto& i : idx) i = uniform_index(rng, num_segments);
    visit(idx);
  }
}

std::vector<std::size_t> all_segments(std::size_t n) {
  std::vector<std::size_t> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  return idx;
}

template <typename Stats, typename Sum>
ResampleScore scorer(const std::vector<Stats>& segments, Sum score_of_sum) {
  return [&segments, score_of_sum](const std::vector<std::size_t>& idx) {
    Stats total{};
    for (std::size_t i : idx) total += segments.at(i);
    return score_of_sum(total);
  };
}

}  // namespace

BootstrapResult estimate_ci(std::vector<double> scores) {
  if (scores.empty()) throw InputError("bootstrap: no resample scores");
  std::sort(scores.begin(), scores.end());
  const std::size_t n = scores.size();
  const std::size_t lower_idx = n / 40;
  const std::size_t upper_idx = n - lower_idx - 1;
  BootstrapResult r;
  r.mean = std::accumulate(scores.begin(), scores.end(), 0.0) / static_cast<double>(n);
  r.lower = scores[lower_idx];
  r.upper = scores[upper_idx];
  r.ci = 0.5 * (r.upper - r.lower);
  r.num_samples = static_cast<int>(n);
  return r;
}

BootstrapResult bootstrap(std::size_t num_segments, const ResampleScore& score,
                          const BootstrapOptions& options) {
  check(num_segments, options);
  std::vector<double> scores;
  scores.reserve(options.num_samples);
  resample(num_segments, options, [&](const auto& idx) { scores.push_back(score(idx)); });
  BootstrapResult r = estimate_ci(std::move(scores));
  r.score = score(all_segments(num_segments));
  return r;
}

PairedBootstrapResult paired_bootstrap(std::size_t num_segments, const ResampleScore& baseline,
                                       const ResampleScore& system,
                                       const BootstrapOptions& options) {
  check(num_segments, options);
  std::vector<double> bl, sys;
  bl.reserve(options.num_samples);
  sys.reserve(options.num_samples);
  resample(num_segments, options, [&](const auto& idx) {
    bl.push_back(baseline(idx));
    sys.push_back(system(idx));
  });
  PairedBootstrapResult r;
  const auto all = all_segments(num_segments);
  const double real_diff = std::fabs(baseline(all) - system(all));
  // sacreBLEU: centre the resampled absolute differences, count those above the real one.
  std::vector<double> diffs(bl.size());
  for (std::size_t s = 0; s < bl.size(); ++s) diffs[s] = std::fabs(sys[s] - bl[s]);
  const double mean_diff =
      std::accumulate(diffs.begin(), diffs.end(), 0.0) / static_cast<double>(diffs.size());
  std::size_t above = 0;
  for (double d : diffs) above += (d - mean_diff > real_diff);
  // No difference leaves nothing for chance to explain: p = 1. (sacreBLEU's
  // strict ">" would give identical systems 1 / (n + 1), "significant".)
  r.p_value = real_diff == 0.0 ? 1.0
                               : static_cast<double>(above + 1) / static_cast<double>(diffs.size() + 1);
  r.baseline = estimate_ci(std::move(bl));
  r.baseline.score = baseline(all);
  r.system = estimate_ci(std::move(sys));
  r.system.score = system(all);
  return r;
}

BootstrapResult bootstrap_bleu(const std::vector<BleuStats>& segments, const BleuOptions& bleu,
                               const BootstrapOptions& options) {
  return bootstrap(segments.size(),
                   scorer(segments, [bleu](const BleuStats& s) { return bleu_from_stats(s, bleu).score; }),
                   options);
}

BootstrapResult bootstrap_chrf(const std::vector<ChrfStats>& segments, const ChrfOptions& chrf,
                               const BootstrapOptions& options) {
  return bootstrap(segments.size(),
                   scorer(segments, [chrf](const ChrfStats& s) { return chrf_from_stats(s, chrf).score; }),
                   options);
}

BootstrapResult bootstrap_ter(const std::vector<TerStats>& segments, const BootstrapOptions& options) {
  return bootstrap(segments.size(),
                   scorer(segments, [](const TerStats& s) { return ter_from_stats(s).score; }), options);
}

PairedBootstrapResult paired_bootstrap_bleu(const std::vector<BleuStats>& baseline,
                                            const std::vector<BleuStats>& system,
                                            const BleuOptions& bleu, const BootstrapOptions& options) {
  if (baseline.size() != system.size()) {
    throw InputError("paired bootstrap: baseline has " + std::to_string(baseline.size()) +
                     " segments, system " + std::to_string(system.size()));
  }
  auto score = [bleu](const BleuStats& s) { return bleu_from_stats(s, bleu).score; };
  return paired_bootstrap(baseline.size(), scorer(baseline, score), scorer(system, score), options);
}

PairedBootstrapResult paired_bootstrap_chrf(const std::vector<ChrfStats>& baseline,
                                            const std::vector<ChrfStats>& system,
                                            const ChrfOptions& chrf, const BootstrapOptions& options) {
  if (baseline.size() != system.size()) {
    throw InputError("paired bootstrap: baseline has " + std::to_string(baseline.size()) +
                     " segments, system " + std::to_string(system.size()));
  }
  auto score = [chrf](const ChrfStats& s) { return chrf_from_stats(s, chrf).score; };
  return paired_bootstrap(baseline.size(), scorer(baseline, score), scorer(system, score), options);
}

}  // namespace mambamt::results
