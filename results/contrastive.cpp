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

double paired_accuracy_p(const std::vector<double>& baseline, const std::vector<double>& system,
                         const BootstrapOptions& options) {
  if (baseline.size() != system.size())
    throw InputError("paired accuracy test: " + std::to_string(baseline.size()) + " outcomes against " +
                     std::to_string(system.size()));
  if (baseline.empty()) throw InputError("paired accuracy test: no examples");
  auto accuracy = [](const std::vector<double>& outcomes) {
    return [&outcomes](const std::vector<std::size_t>& picked) {
      double sum = 0;
      for (std::size_t i : picked) sum += outcomes[i];
      return sum / static_cast<double>(picked.size());
    };
  };
  return paired_bootstrap(baseline.size(), accuracy(baseline), accuracy(system), options).p_value;
}

std::optional<ContrastiveOutcomes> contrastive_outcomes(const core::StoreSnapshot& store) {
  auto t = store.tables.find("contrastive/examples");
  auto set = store.texts.find("data.contrastive");
  if (t == store.tables.end() || set == store.texts.end()) return std::nullopt;
  const core::ResultTable& table = t->second;
  if (table.columns != std::vector<std::string>{"correct", "distance"} ||
      table.values.size() != table.rows.size() * 2 || table.rows.empty())
    return std::nullopt;
  ContrastiveOutcomes out;
  out.set = set->second;
  for (std::size_t r = 0; r < table.rows.size(); ++r) {
    out.correct.push_back(table.at(r, 0));
    out.distance.push_back(table.at(r, 1));
  }
  return out;
}

ContrastiveComparison compare_contrastive(const ContrastiveOutcomes& baseline, const ContrastiveOutcomes& system,
                                          const BootstrapOptions& options) {
  if (baseline.set != system.set || baseline.correct.size() != system.correct.size())
    throw InputError("contrastive sets differ: " + baseline.set + " and " + system.set);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto mean = [nan](const std::vector<double>& v) {
    double sum = 0;
    for (double x : v) sum += x;
    return v.empty() ? nan : sum / static_cast<double>(v.size());
  };
  ContrastiveComparison c;
  c.examples = system.correct.size();
  c.baseline = mean(baseline.correct);
  c.system = mean(system.correct);
  c.p = paired_accuracy_p(baseline.correct, system.correct, options);
  std::vector<double> b, s;
  for (std::size_t i = 0; i < system.correct.size(); ++i)
    if (system.distance[i] >= 1) {
      b.push_back(baseline.correct[i]);
      s.push_back(system.correct[i]);
    }
  c.earlier = s.size();
  c.baseline_earlier = mean(b);
  c.system_earlier = mean(s);
  c.p_earlier = s.empty() ? nan : paired_accuracy_p(b, s, options);
  return c;
}

}  // namespace mambamt::results
