#include "results/chrf.h"

#include <cstdio>
#include <unordered_map>

#include "core/error.h"
#include "results/unicode.h"

namespace mambamt::results {
namespace {

using NgramCounts = std::unordered_map<std::u32string, std::int64_t>;

// One counter per order: char orders 1..char_order, then word orders.
using SegmentNgrams = std::vector<NgramCounts>;

// Python's string.punctuation.
bool is_ascii_punct(char32_t c) {
  return (c >= U'!' && c <= U'/') || (c >= U':' && c <= U'@') || (c >= U'[' && c <= U'`') ||
         (c >= U'{' && c <= U'~');
}

// sacreBLEU's _remove_punctuation: a trailing (else a leading) ASCII punctuation
// character of a word longer than one character becomes its own word.
std::vector<std::u32string> words_for_ngrams(std::u32string_view sentence) {
  std::vector<std::u32string> out;
  for (auto& w : split_whitespace(sentence)) {
    if (w.size() == 1) {
      out.push_back(std::move(w));
    } else if (is_ascii_punct(w.back())) {
      out.push_back(w.substr(0, w.size() - 1));
      out.push_back(w.substr(w.size() - 1));
    } else if (is_ascii_punct(w.front())) {
      out.push_back(w.substr(0, 1));
      out.push_back(w.substr(1));
    } else {
      out.push_back(std::move(w));
    }
  }
  return out;
}

SegmentNgrams extract(std::string_view segment, const ChrfOptions& options) {
  std::u32string s = decode_utf8(segment);
  if (options.lowercase) s = to_lower(s);
  SegmentNgrams out(options.char_order + options.word_order);

  std::u32string chars;
  if (options.whitespace) {
    chars = s;
  } else {
    for (char32_t c : s) {
      if (!is_space(c)) chars.push_back(c);
    }
  }
  for (int n = 1; n <= options.char_order; ++n) {
    for (std::size_t i = 0; i + n <= chars.size(); ++i) ++out[n - 1][chars.substr(i, n)];
  }
  if (options.word_order > 0) {
    std::vector<std::u32string> words = words_for_ngrams(s);
    for (int n = 1; n <= options.word_order; ++n) {
      NgramCounts& counts = out[options.char_order + n - 1];
      for (std::size_t i = 0; i + n <= words.size(); ++i) {
        std::u32string key = words[i];
        for (int k = 1; k < n; ++k) {
          key.push_back(U' ');
          key += words[i + k];
        }
        ++counts[key];
      }
    }
  }
  return out;
}

ChrfStats match(const SegmentNgrams& hyp, const SegmentNgrams& ref) {
  ChrfStats stats;
  stats.orders.resize(hyp.size());
  for (std::size_t o = 0; o < hyp.size(); ++o) {
    std::int64_t hyp_count = 0, ref_count = 0, matches = 0;
    for (const auto& [ngram, count] : hyp[o]) {
      hyp_count += count;
      auto it = ref[o].find(ngram);
      if (it != ref[o].end()) matches += std::min(count, it->second);
    }
    for (const auto& [ngram, count] : ref[o]) ref_count += count;
    // No hypothesis n-grams are counted for an order the reference lacks.
    stats.orders[o] = {ref_count > 0 ? hyp_count : 0, ref_count, matches};
  }
  return stats;
}

void check_options(const ChrfOptions& options) {
  if (options.char_order < 1) throw InputError("chrF: char_order must be >= 1");
  if (options.word_order < 0) throw InputError("chrF: word_order must be >= 0");
}

std::string format_number(double value) {
  // Python's str() of beta: 2 for an int, 2.5 for a float.
  char buf[64];
  if (value == static_cast<long long>(value)) {
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(value));
  } else {
    std::snprintf(buf, sizeof buf, "%g", value);
  }
  return buf;
}

}  // namespace

ChrfOptions ChrfOptions::plus_plus() {
  ChrfOptions options;
  options.word_order = 2;
  return options;
}

ChrfStats& ChrfStats::operator+=(const ChrfStats& other) {
  if (orders.empty()) orders.resize(other.orders.size());
  if (orders.size() != other.orders.size()) {
    throw Error("chrF statistics of different orders cannot be added");
  }
  for (std::size_t o = 0; o < orders.size(); ++o) {
    orders[o].hyp += other.orders[o].hyp;
    orders[o].ref += other.orders[o].ref;
    orders[o].match += other.orders[o].match;
  }
  return *this;
}

std::string ChrfScore::name() const {
  return "chrF" + format_number(beta) + std::string(static_cast<std::size_t>(word_order), '+');
}

std::string ChrfScore::format(int width) const {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", width, score);
  return name() + " = " + buf;
}

ChrfScore chrf_from_stats(const ChrfStats& stats, const ChrfOptions& options) {
  check_options(options);
  const std::size_t order = options.char_order + options.word_order;
  if (stats.orders.size() != order) {
    throw InputError("chrF: statistics have " + std::to_string(stats.orders.size()) +
                     " orders but the options ask for " + std::to_string(order));
  }
  constexpr double kEps = 1e-16;
  const double factor = options.beta * options.beta;
  double score = 0, avg_prec = 0, avg_rec = 0;
  int effective_order = 0;
  for (const auto& s : stats.orders) {
    double prec = s.hyp > 0 ? static_cast<double>(s.match) / s.hyp : kEps;
    double rec = s.ref > 0 ? static_cast<double>(s.match) / s.ref : kEps;
    double denom = factor * prec + rec;
    score += denom > 0 ? (1 + factor) * prec * rec / denom : kEps;
    if (s.hyp > 0 && s.ref > 0) {
      avg_prec += prec;
      avg_rec += rec;
      ++effective_order;
    }
  }
  ChrfScore out;
  out.beta = options.beta;
  out.char_order = options.char_order;
  out.word_order = options.word_order;
  if (options.eps_smoothing) {
    out.score = 100 * score / static_cast<double>(order);
    return out;
  }
  if (effective_order == 0) {
    avg_prec = avg_rec = 0;
  } else {
    avg_prec /= effective_order;
    avg_rec /= effective_order;
  }
  if (avg_prec + avg_rec != 0) {
    double f = (1 + factor) * avg_prec * avg_rec;
    f /= (factor * avg_prec) + avg_rec;
    out.score = 100 * f;
  }
  return out;
}

ChrfStats chrf_segment_stats(std::string_view hypothesis, const std::vector<std::string>& references,
                             const ChrfOptions& options) {
  check_options(options);
  if (references.empty()) throw InputError("chrF: a segment needs at least one reference");
  SegmentNgrams hyp = extract(hypothesis, options);
  ChrfStats best;
  double best_f = -1.0;
  for (const auto& ref : references) {
    ChrfStats stats = match(hyp, extract(ref, options));
    double f = chrf_from_stats(stats, options).score;
    if (f > best_f) {
      best_f = f;
      best = std::move(stats);
    }
  }
  return best;
}

std::vector<ChrfStats> chrf_corpus_segment_stats(const std::vector<std::string>& hypotheses,
                                                 const ReferenceStreams& references,
                                                 const ChrfOptions& options) {
  check_reference_streams("chrF", hypotheses.size(), references);
  std::vector<ChrfStats> out;
  out.reserve(hypotheses.size());
  for (std::size_t i = 0; i < hypotheses.size(); ++i) {
    out.push_back(chrf_segment_stats(hypotheses[i], segment_references(references, i), options));
  }
  return out;
}

ChrfStats sum_chrf_stats(const std::vector<ChrfStats>& segments, const ChrfOptions& options) {
  ChrfStats total;
  total.orders.resize(options.char_order + options.word_order);
  for (const auto& s : segments) total += s;
  return total;
}

ChrfScore corpus_chrf(const std::vector<std::string>& hypotheses, const ReferenceStreams& references,
                      const ChrfOptions& options) {
  return chrf_from_stats(
      sum_chrf_stats(chrf_corpus_segment_stats(hypotheses, references, options), options), options);
}

ChrfScore sentence_chrf(std::string_view hypothesis, const std::vector<std::string>& references,
                        const ChrfOptions& options) {
  return chrf_from_stats(chrf_segment_stats(hypothesis, references, options), options);
}

std::string chrf_signature(const ChrfOptions& options, int num_references) {
  return "nrefs:" + std::to_string(num_references) +
         "|case:" + (options.lowercase ? "lc" : "mixed") +
         "|eff:" + (options.eps_smoothing ? "no" : "yes") +
         "|nc:" + std::to_string(options.char_order) +
         "|nw:" + std::to_string(options.word_order) +
         "|space:" + (options.whitespace ? "yes" : "no");
}

}  // namespace mambamt::results
