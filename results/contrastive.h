#pragma once
// Contrastive accuracy (ContraPro-style): a model gets an example right when it
// scores the reference strictly above every contrastive variant. A tie is wrong,
// and so is any NaN score, so a broken scorer cannot look good.
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

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

}  // namespace mambamt::results
