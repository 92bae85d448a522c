#include "results/alignment.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <stdexcept>

#include "core/error.h"

namespace mambamt::results {

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
}

void AlignmentCounts::add(const AlignmentCounts& o) {
  predicted += o.predicted;
  sure += o.sure;
  sure_hits += o.sure_hits;
  possible_hits += o.possible_hits;
  sentences += o.sentences;
}

double AlignmentCounts::aer() const {
  if (predicted + sure == 0) return kNaN;
  return 1.0 - static_cast<double>(sure_hits + possible_hits) / static_cast<double>(predicted + sure);
}

double AlignmentCounts::precision() const {
  return predicted > 0 ? static_cast<double>(possible_hits) / static_cast<double>(predicted) : kNaN;
}

double AlignmentCounts::recall() const {
  return sure > 0 ? static_cast<double>(sure_hits) / static_cast<double>(sure) : kNaN;
}

AlignmentCounts score_alignment(const std::vector<Link>& predicted, const std::vector<Link>& sure,
                                const std::vector<Link>& possible) {
  const std::set<Link> a(predicted.begin(), predicted.end());
  const std::set<Link> s(sure.begin(), sure.end());
  std::set<Link> p(possible.begin(), possible.end());
  p.insert(s.begin(), s.end());
  AlignmentCounts out;
  out.sentences = 1;
  out.predicted = static_cast<int64_t>(a.size());
  out.sure = static_cast<int64_t>(s.size());
  for (const Link& l : a) {
    out.sure_hits += s.count(l);
    out.possible_hits += p.count(l);
  }
  return out;
}

std::vector<Link> argmax_alignment(const float* weights, int64_t rows, int64_t cols,
                                   const std::vector<int32_t>& tgt_word, const std::vector<int32_t>& src_word) {
  if (static_cast<int64_t>(tgt_word.size()) != rows || static_cast<int64_t>(src_word.size()) != cols)
    throw std::invalid_argument("argmax_alignment: word maps do not match the attention map's shape");
  std::set<Link> links;
  for (int64_t r = 0; r < rows; ++r) {
    if (tgt_word[static_cast<size_t>(r)] < 0 || cols == 0) continue;
    const float* row = weights + r * cols;
    const int64_t best = std::max_element(row, row + cols) - row;
    const int32_t w = src_word[static_cast<size_t>(best)];
    if (w >= 0) links.emplace(w, tgt_word[static_cast<size_t>(r)]);
  }
  return {links.begin(), links.end()};
}

int64_t best_layer(const std::vector<AlignmentCounts>& by_layer) {
  int64_t best = -1;
  for (size_t l = 0; l < by_layer.size(); ++l) {
    const double aer = by_layer[l].aer();
    if (std::isfinite(aer) && (best < 0 || aer < by_layer[static_cast<size_t>(best)].aer()))
      best = static_cast<int64_t>(l);
  }
  return best;
}

HeldOutLayer held_out_layer(const std::array<std::vector<AlignmentCounts>, 2>& halves) {
  if (halves[0].size() != halves[1].size())
    throw std::invalid_argument("held_out_layer: the two halves have different numbers of layers");
  HeldOutLayer out;
  for (size_t h = 0; h < 2; ++h) {
    const int64_t l = best_layer(halves[1 - h]);
    out.chosen[h] = l;
    if (l >= 0) out.counts.add(halves[h][static_cast<size_t>(l)]);
  }
  return out;
}

std::optional<AlignmentOutcomes> alignment_outcomes(const core::StoreSnapshot& store) {
  auto t = store.tables.find("alignment/sentences");
  auto set = store.texts.find("data.alignment");
  if (t == store.tables.end() || set == store.texts.end()) return std::nullopt;
  const core::ResultTable& table = t->second;
  if (table.columns != std::vector<std::string>{"predicted", "sure", "sure_hits", "possible_hits"} ||
      table.values.size() != table.rows.size() * 4 || table.rows.empty())
    return std::nullopt;
  AlignmentOutcomes out;
  out.set = set->second;
  out.sentences = table.rows;
  for (size_t r = 0; r < table.rows.size(); ++r) {
    AlignmentCounts n;
    n.predicted = static_cast<int64_t>(table.at(r, 0));
    n.sure = static_cast<int64_t>(table.at(r, 1));
    n.sure_hits = static_cast<int64_t>(table.at(r, 2));
    n.possible_hits = static_cast<int64_t>(table.at(r, 3));
    n.sentences = 1;
    out.counts.push_back(n);
  }
  return out;
}

double paired_aer_p(const AlignmentOutcomes& baseline, const AlignmentOutcomes& system,
                    const BootstrapOptions& options) {
  if (baseline.set != system.set)
    throw InputError("alignment: the systems were scored on different text: " + baseline.set + " and " +
                     system.set);
  if (baseline.sentences != system.sentences || baseline.counts.size() != baseline.sentences.size() ||
      system.counts.size() != system.sentences.size())
    throw InputError("alignment: the systems' scored sentences differ (" + std::to_string(baseline.sentences.size()) +
                     " and " + std::to_string(system.sentences.size()) + ")");
  if (baseline.sentences.empty()) throw InputError("alignment: no sentences");
  auto aer = [](const std::vector<AlignmentCounts>& counts) {
    return [&counts](const std::vector<std::size_t>& picked) {
      AlignmentCounts n;
      for (std::size_t i : picked) n.add(counts[i]);
      const double v = n.aer();
      return std::isfinite(v) ? v : 1.0;
    };
  };
  return paired_bootstrap(baseline.counts.size(), aer(baseline.counts), aer(system.counts), options).p_value;
}

}  // namespace mambamt::results
