#include "results/bleu.h"

#include <cmath>
#include <cstdio>
#include <unordered_map>

#include "core/error.h"
#include "results/unicode.h"

namespace mambamt::results {
namespace {

using NgramCounts = std::unordered_map<std::u32string, std::int64_t>;

// Word n-grams of orders 1..max_order (tokens joined by single spaces; tokens
// hold no whitespace, so the key also fixes the order), and the token count.
std::int64_t extract_ngrams(const std::u32string& tokenized, int max_order, NgramCounts& counts) {
  std::vector<std::u32string> words = split_whitespace(tokenized);
  const int n_words = static_cast<int>(words.size());
  for (int n = 1; n <= max_order; ++n) {
    for (int i = 0; i + n <= n_words; ++i) {
      std::u32string key = words[i];
      for (int k = 1; k < n; ++k) {
        key.push_back(U' ');
        key += words[i + k];
      }
      ++counts[key];
    }
  }
  return n_words;
}

std::u32string preprocess(std::string_view segment, const BleuOptions& options) {
  std::u32string s = decode_utf8(segment);
  if (options.lowercase) s = to_lower(s);
  return tokenize(rstrip(s), options.tokenize);
}

int order_of(const std::u32string& ngram) {
  int n = 1;
  for (char32_t c : ngram) n += (c == U' ');
  return n;
}

std::string fixed(double value, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, value);
  return buf;
}

}  // namespace

Smoothing parse_smoothing(std::string_view name) {
  if (name == "none") return Smoothing::kNone;
  if (name == "floor") return Smoothing::kFloor;
  if (name == "add-k") return Smoothing::kAddK;
  if (name == "exp") return Smoothing::kExp;
  throw InputError("unknown BLEU smoothing '" + std::string(name) +
                   "' (known: none, floor, add-k, exp)");
}

const char* smoothing_name(Smoothing smoothing) {
  switch (smoothing) {
    case Smoothing::kNone: return "none";
    case Smoothing::kFloor: return "floor";
    case Smoothing::kAddK: return "add-k";
    case Smoothing::kExp: return "exp";
  }
  return "?";
}

BleuOptions BleuOptions::sentence() {
  BleuOptions options;
  options.effective_order = true;
  return options;
}

double BleuOptions::resolved_smooth_value() const {
  if (smooth_value) return *smooth_value;
  switch (smooth_method) {
    case Smoothing::kFloor: return 0.1;
    case Smoothing::kAddK: return 1.0;
    default: return 0.0;
  }
}

BleuStats& BleuStats::operator+=(const BleuStats& other) {
  if (counts.empty() && totals.empty()) {
    counts.assign(other.counts.size(), 0);
    totals.assign(other.totals.size(), 0);
  }
  if (other.counts.size() != counts.size() || other.totals.size() != totals.size()) {
    throw Error("BLEU statistics of different n-gram orders cannot be added");
  }
  sys_len += other.sys_len;
  ref_len += other.ref_len;
  for (std::size_t n = 0; n < counts.size(); ++n) {
    counts[n] += other.counts[n];
    totals[n] += other.totals[n];
  }
  return *this;
}

std::string BleuScore::format(int width) const {
  std::string precs;
  for (std::size_t n = 0; n < precisions.size(); ++n) {
    if (n) precs += '/';
    precs += fixed(precisions[n], 1);
  }
  return "BLEU = " + fixed(score, width) + " " + precs + " (BP = " + fixed(bp, 3) +
         " ratio = " + fixed(ratio, 3) + " hyp_len = " + std::to_string(sys_len) +
         " ref_len = " + std::to_string(ref_len) + ")";
}

BleuScore bleu_from_stats(const BleuStats& stats, const BleuOptions& options) {
  const int max_order = options.max_ngram_order;
  if (max_order < 1) throw InputError("BLEU: max_ngram_order must be >= 1");
  if (static_cast<int>(stats.counts.size()) != max_order ||
      static_cast<int>(stats.totals.size()) != max_order) {
    throw InputError("BLEU: statistics have " + std::to_string(stats.counts.size()) +
                     " orders but max_ngram_order is " + std::to_string(max_order));
  }
  BleuScore out;
  out.counts = stats.counts;
  out.totals = stats.totals;
  out.sys_len = stats.sys_len;
  out.ref_len = stats.ref_len;
  out.ratio = stats.ref_len ? static_cast<double>(stats.sys_len) / stats.ref_len : 0.0;
  out.precisions.assign(max_order, 0.0);
  if (stats.sys_len < stats.ref_len) {
    out.bp = stats.sys_len > 0
                 ? std::exp(1.0 - static_cast<double>(stats.ref_len) / stats.sys_len)
                 : 0.0;
  } else {
    out.bp = 1.0;
  }

  bool any_match = false;
  for (auto c : stats.counts) any_match |= (c != 0);
  if (!any_match) return out;  // sacreBLEU's early stop (#141): score 0, precisions 0

  const double smooth_value = options.resolved_smooth_value();
  double smooth_mteval = 1.0;
  int eff_order = max_order;
  for (int n = 1; n <= max_order; ++n) {
    double correct = static_cast<double>(stats.counts[n - 1]);
    double total = static_cast<double>(stats.totals[n - 1]);
    if (options.smooth_method == Smoothing::kAddK && n > 1) {
      correct += smooth_value;
      total += smooth_value;
    }
    if (total == 0) break;
    if (options.effective_order) eff_order = n;
    double& p = out.precisions[n - 1];
    if (correct == 0) {
      if (options.smooth_method == Smoothing::kExp) {
        smooth_mteval *= 2;
        p = 100.0 / (smooth_mteval * total);
      } else if (options.smooth_method == Smoothing::kFloor) {
        p = 100.0 * smooth_value / total;
      }
    } else {
      p = 100.0 * correct / total;
    }
  }
  // sacreBLEU's my_log: log(0) is -9999999999, so a zero precision zeroes the score.
  double log_sum = 0;
  for (int n = 0; n < eff_order; ++n) {
    double p = out.precisions[n];
    log_sum += p == 0.0 ? -9999999999.0 : std::log(p);
  }
  out.score = out.bp * std::exp(log_sum / eff_order);
  return out;
}

std::string bleu_preprocess(std::string_view segment, const BleuOptions& options) {
  return encode_utf8(preprocess(segment, options));
}

BleuStats bleu_segment_stats(std::string_view hypothesis, const std::vector<std::string>& references,
                             const BleuOptions& options) {
  if (references.empty()) throw InputError("BLEU: a segment needs at least one reference");
  const int max_order = options.max_ngram_order;
  if (max_order < 1) throw InputError("BLEU: max_ngram_order must be >= 1");

  // Reference n-grams: the highest count of each n-gram in any one reference.
  NgramCounts ref_ngrams;
  std::vector<std::int64_t> ref_lens;
  for (const auto& ref : references) {
    NgramCounts this_ngrams;
    ref_lens.push_back(extract_ngrams(preprocess(ref, options), max_order, this_ngrams));
    for (auto& [ngram, count] : this_ngrams) {
      auto& merged = ref_ngrams[ngram];
      if (count > merged) merged = count;
    }
  }

  NgramCounts hyp_ngrams;
  BleuStats stats;
  stats.sys_len = extract_ngrams(preprocess(hypothesis, options), max_order, hyp_ngrams);

  // Closest reference length; on a tie the shorter one.
  std::int64_t closest_diff = -1, closest_len = -1;
  for (std::int64_t len : ref_lens) {
    std::int64_t diff = std::llabs(stats.sys_len - len);
    if (closest_diff == -1 || diff < closest_diff) {
      closest_diff = diff;
      closest_len = len;
    } else if (diff == closest_diff && len < closest_len) {
      closest_len = len;
    }
  }
  stats.ref_len = closest_len;

  stats.counts.assign(max_order, 0);
  stats.totals.assign(max_order, 0);
  for (const auto& [ngram, count] : hyp_ngrams) {
    int n = order_of(ngram) - 1;
    stats.totals[n] += count;
    auto it = ref_ngrams.find(ngram);
    if (it != ref_ngrams.end()) stats.counts[n] += std::min(count, it->second);
  }
  return stats;
}

std::vector<BleuStats> bleu_corpus_segment_stats(const std::vector<std::string>& hypotheses,
                                                 const ReferenceStreams& references,
                                                 const BleuOptions& options) {
  check_reference_streams("BLEU", hypotheses.size(), references);
  std::vector<BleuStats> out;
  out.reserve(hypotheses.size());
  for (std::size_t i = 0; i < hypotheses.size(); ++i) {
    out.push_back(bleu_segment_stats(hypotheses[i], segment_references(references, i), options));
  }
  return out;
}

BleuStats sum_bleu_stats(const std::vector<BleuStats>& segments, int max_ngram_order) {
  BleuStats total;
  total.counts.assign(max_ngram_order, 0);
  total.totals.assign(max_ngram_order, 0);
  for (const auto& s : segments) total += s;
  return total;
}

BleuScore corpus_bleu(const std::vector<std::string>& hypotheses, const ReferenceStreams& references,
                      const BleuOptions& options) {
  return bleu_from_stats(
      sum_bleu_stats(bleu_corpus_segment_stats(hypotheses, references, options),
                     options.max_ngram_order),
      options);
}

BleuScore sentence_bleu(std::string_view hypothesis, const std::vector<std::string>& references,
                        const BleuOptions& options) {
  return bleu_from_stats(bleu_segment_stats(hypothesis, references, options), options);
}

std::string bleu_signature(const BleuOptions& options, int num_references) {
  std::string smooth = smoothing_name(options.smooth_method);
  if (options.smooth_method == Smoothing::kFloor || options.smooth_method == Smoothing::kAddK) {
    smooth += "[" + fixed(options.resolved_smooth_value(), 2) + "]";
  }
  return "nrefs:" + std::to_string(num_references) +
         "|case:" + (options.lowercase ? "lc" : "mixed") +
         "|eff:" + (options.effective_order ? "yes" : "no") +
         "|tok:" + tokenizer_name(options.tokenize) + "|smooth:" + smooth;
}

}  // namespace mambamt::results
