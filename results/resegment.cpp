#include "results/resegment.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <sstream>

namespace mambamt::results {

namespace {

std::vector<std::string> words_of(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  std::string w;
  while (in >> w) out.push_back(std::move(w));
  return out;
}

std::string join(const std::vector<std::string>& words, size_t begin, size_t end) {
  std::string out;
  for (size_t i = begin; i < end; ++i) {
    if (i > begin) out += ' ';
    out += words[i];
  }
  return out;
}

}  // namespace

std::vector<std::string> resegment(const std::string& hypothesis, const std::vector<std::string>& references) {
  const size_t k = references.size();
  if (k == 0) return {};
  const std::vector<std::string> hyp = words_of(hypothesis);
  const size_t n = hyp.size();
  constexpr int64_t kInf = std::numeric_limits<int64_t>::max() / 4;
  // cost[j][e]: the least distance of hyp[0, e) cut into references 0..j-1;
  // from[j][e]: where the last of those runs starts.
  std::vector<std::vector<int64_t>> cost(k + 1, std::vector<int64_t>(n + 1, kInf));
  std::vector<std::vector<size_t>> from(k + 1, std::vector<size_t>(n + 1, 0));
  cost[0][0] = 0;
  std::vector<int64_t> row, next;
  for (size_t j = 1; j <= k; ++j) {
    const std::vector<std::string> ref = words_of(references[j - 1]);
    const size_t m = ref.size();
    // The last reference takes every word left; the others any run.
    for (size_t i = 0; i <= n; ++i) {
      if (cost[j - 1][i] >= kInf) continue;
      // row[c]: the distance of hyp[i, e) to ref[0, c), one hypothesis word
      // at a time (e = i first: the empty run).
      row.resize(m + 1);
      for (size_t c = 0; c <= m; ++c) row[c] = static_cast<int64_t>(c);
      for (size_t e = i;; ++e) {
        if (j < k || e == n) {
          const int64_t total = cost[j - 1][i] + row[m];
          if (total < cost[j][e]) {
            cost[j][e] = total;
            from[j][e] = i;
          }
        }
        if (e == n) break;
        next.assign(m + 1, 0);
        next[0] = row[0] + 1;
        for (size_t c = 1; c <= m; ++c)
          next[c] = std::min({row[c] + 1, next[c - 1] + 1, row[c - 1] + (hyp[e] == ref[c - 1] ? 0 : 1)});
        row.swap(next);
      }
    }
  }
  std::vector<std::string> out(k);
  size_t e = n;
  for (size_t j = k; j >= 1; --j) {
    const size_t i = from[j][e];
    out[j - 1] = join(hyp, i, e);
    e = i;
  }
  return out;
}

PassageSplit split_passage(const std::vector<std::string>& pieces, const std::vector<std::string>& references) {
  PassageSplit out;
  if (pieces.size() == references.size()) {
    out.sentences = pieces;
    out.by_separators = true;
    return out;
  }
  std::string whole;
  for (const std::string& p : pieces) {
    if (p.empty()) continue;
    if (!whole.empty()) whole += ' ';
    whole += p;
  }
  out.sentences = resegment(whole, references);
  return out;
}

}  // namespace mambamt::results
