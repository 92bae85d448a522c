#pragma once
// Contrastive accuracy (ContraPro-style): a model gets an example right when it
// scores the reference strictly above every contrastive variant. A tie is wrong,
// and so is any NaN score, so a broken scorer cannot look good.
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/store.h"
#include "results/bootstrap.h"

namespace mambamt::results {

// One example's forced-decoding scores (higher is better, e.g. log-probabilities).
struct ContrastiveScores {
  double reference = 0;             // score of the reference translation
  std::vector<double> contrastive;  // scores of the wrong variants (at least one)
  std::string label;                // the pronoun (or word) the variants replace
  std::int64_t distance = 0;        // antecedent distance in sentences (0 = same sentence)
};

struct AccuracyCell {
  std::int64_t correct = 0;
  std::int64_t total = 0;
  // correct / total, NaN when there are no examples (a missing cell, not 0).
  double accuracy() const;
};

// Reporting buckets of antecedent distance: 0, 1, 2, 3, >3.
inline constexpr int kDistanceBuckets = 5;
// The bucket index of a distance (0..4); throws InputError for a negative distance.
int distance_bucket_index(std::int64_t distance);
// "0", "1", "2", "3", ">3".
const char* distance_bucket_label(int bucket);

struct ContrastiveResult {
  AccuracyCell total;
  std::map<std::string, AccuracyCell> by_label;              // by pronoun, sorted
  std::array<AccuracyCell, kDistanceBuckets> by_distance{};  // by distance_bucket_index
};

// Whether the reference wins: strictly above every contrastive score.
bool contrastive_correct(const ContrastiveScores& example);

// Throws InputError (naming the example's index) for an example without
// contrastive scores or with a negative distance.
ContrastiveResult contrastive_accuracy(const std::vector<ContrastiveScores>& examples);

// p-value of sacreBLEU's paired bootstrap test (results/bootstrap.h) of two
// systems' accuracy on the same examples, from each example's outcome (1 =
// right, 0 = wrong): both resampled alike, 1000 times. Throws InputError when
// the lists differ in length or are empty.
double paired_accuracy_p(const std::vector<double>& baseline, const std::vector<double>& system,
                         const BootstrapOptions& options = {});

// An experiment store's per-example outcomes of its first contrastive set
// (results/contrastive/examples: 1 right, 0 wrong, and the antecedent
// distance) and the set's fingerprint (text data.contrastive).
struct ContrastiveOutcomes {
  std::vector<double> correct;
  std::vector<double> distance;
  std::string set;
};
// Null when the store has no such table or fingerprint.
std::optional<ContrastiveOutcomes> contrastive_outcomes(const core::StoreSnapshot& store);

// Two systems on the same examples: accuracies (0-1) and paired p-values over
// all examples and over those whose antecedent is in an earlier sentence
// (distance >= 1; NaN accuracies and p when there are none).
struct ContrastiveComparison {
  std::size_t examples = 0, earlier = 0;
  double baseline = 0, system = 0, p = 1;
  double baseline_earlier = 0, system_earlier = 0, p_earlier = 1;
};
// Throws InputError when the two are not of the same set (fingerprint or size).
ContrastiveComparison compare_contrastive(const ContrastiveOutcomes& baseline, const ContrastiveOutcomes& system,
                                          const BootstrapOptions& options = {});

}  // namespace mambamt::results
