#pragma once
// Bootstrap resampling confidence intervals as sacreBLEU computes them
// (--confidence and --paired-bs): resample segments with replacement, re-score
// each resample from summed segment statistics, report the mean and the 95%
// interval (the 2.5th and 97.5th percentiles of the sorted resample scores).
// The random generator is ours (seeded mt19937_64), so the resamples differ from
// sacreBLEU's numpy ones; the statistics computed from them are the same.
#include <cstdint>
#include <functional>
#include <vector>

#include "results/bleu.h"
#include "results/chrf.h"
#include "results/ter.h"

namespace mambamt::results {

struct BootstrapOptions {
  // Number of resamples (sacreBLEU: 1000).
  int num_samples = 1000;
  // Seed of the resampling generator (sacreBLEU's default SACREBLEU_SEED is 12345).
  std::uint64_t seed = 12345;
};

struct BootstrapResult {
  double score = 0;  // on the full set
  double mean = 0;   // mean over resamples
  double lower = 0;  // sorted resample score at index n/40
  double upper = 0;  // sorted resample score at index n - n/40 - 1
  double ci = 0;     // half width, (upper - lower) / 2: report as mean ± ci
  int num_samples = 0;
};

struct PairedBootstrapResult {
  BootstrapResult baseline;
  BootstrapResult system;
  // sacreBLEU's paired bootstrap p-value for "the difference is due to chance":
  // (1 + #resamples whose centred |system - baseline| exceeds the real one) / (n + 1);
  // 1 where the two systems score the same on the whole test set.
  double p_value = 1;
};

// Generic form: `score` turns a multiset of segment indices (with repetition,
// size = num_segments) into a corpus score.
using ResampleScore = std::function<double(const std::vector<std::size_t>& segments)>;
BootstrapResult bootstrap(std::size_t num_segments, const ResampleScore& score,
                          const BootstrapOptions& options = {});
// Both systems are scored on the same resamples.
PairedBootstrapResult paired_bootstrap(std::size_t num_segments, const ResampleScore& baseline,
                                       const ResampleScore& system,
                                       const BootstrapOptions& options = {});

// Confidence interval of one system from its segment statistics.
BootstrapResult bootstrap_bleu(const std::vector<BleuStats>& segments, const BleuOptions& bleu = {},
                               const BootstrapOptions& options = {});
BootstrapResult bootstrap_chrf(const std::vector<ChrfStats>& segments, const ChrfOptions& chrf = {},
                               const BootstrapOptions& options = {});
BootstrapResult bootstrap_ter(const std::vector<TerStats>& segments,
                              const BootstrapOptions& options = {});

// Paired test of a system against a baseline on the same segments.
PairedBootstrapResult paired_bootstrap_bleu(const std::vector<BleuStats>& baseline,
                                            const std::vector<BleuStats>& system,
                                            const BleuOptions& bleu = {},
                                            const BootstrapOptions& options = {});
PairedBootstrapResult paired_bootstrap_chrf(const std::vector<ChrfStats>& baseline,
                                            const std::vector<ChrfStats>& system,
                                            const ChrfOptions& chrf = {},
                                            const BootstrapOptions& options = {});

// Mean and sacreBLEU's 95% interval of already computed resample scores
// (score is left 0). Throws InputError when `scores` is empty.
BootstrapResult estimate_ci(std::vector<double> scores);

}  // namespace mambamt::results
