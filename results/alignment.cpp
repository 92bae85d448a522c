#include "results/alignment.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <stdexcept>

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

}  // namespace mambamt::results
