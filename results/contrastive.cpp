#include "results/contrastive.h"

#include <cmath>
#include <limits>

#include "core/error.h"

namespace mambamt::results {

double AccuracyCell::accuracy() const {
  return total > 0 ? static_cast<double>(correct) / static_cast<double>(total)
                   : std::numeric_limits<double>::quiet_NaN();
}

int distance_bucket_index(std::int64_t distance) {
  if (distance < 0) {
    throw InputError("antecedent distance " + std::to_string(distance) + " is negative");
  }
  return distance > 3 ? 4 : static_cast<int>(distance);
}

const char* distance_bucket_label(int bucket) {
  static const char* const kLabels[kDistanceBuckets] = {"0", "1", "2", "3", ">3"};
  return bucket >= 0 && bucket < kDistanceBuckets ? kLabels[bucket] : "?";
}

bool contrastive_correct(const ContrastiveScores& example) {
  if (example.contrastive.empty()) return false;
  for (double c : example.contrastive) {
    // `!(a > b)` is also true when either is NaN.
    if (!(example.reference > c)) return false;
  }
  return true;
}

ContrastiveResult contrastive_accuracy(const std::vector<ContrastiveScores>& examples) {
  ContrastiveResult result;
  for (std::size_t i = 0; i < examples.size(); ++i) {
    const auto& ex = examples[i];
    if (ex.contrastive.empty()) {
      throw InputError("contrastive example " + std::to_string(i + 1) +
                       " has no contrastive scores");
    }
    int bucket;
    try {
      bucket = distance_bucket_index(ex.distance);
    } catch (const InputError& e) {
      throw InputError("contrastive example " + std::to_string(i + 1) + ": " + e.what());
    }
    const int ok = contrastive_correct(ex) ? 1 : 0;
    for (AccuracyCell* cell : {&result.total, &result.by_label[ex.label], &result.by_distance[bucket]}) {
      cell->correct += ok;
      cell->total += 1;
    }
  }
  return result;
}

}  // namespace mambamt::results
