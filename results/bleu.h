#pragma once
// BLEU exactly as sacreBLEU 2.x computes it: the same tokenizers, smoothing
// methods, effective order, multi-reference clipping and closest reference
// length, so scores agree to floating-point precision.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "results/references.h"
#include "results/tokenize.h"

namespace mambamt::results {

// How zero n-gram precisions are smoothed (Chen & Cherry, 2014).
enum class Smoothing {
  kNone,   // no smoothing: one zero precision makes the score 0
  kFloor,  // zero precisions become smooth_value / total (method 1)
  kAddK,   // add smooth_value to matches and totals of orders >= 2 (method 2)
  kExp,    // NIST geometric: 1 / (2^k * total) for the k-th zero precision (method 3)
};

// "none", "floor", "add-k", "exp"; anything else throws InputError.
Smoothing parse_smoothing(std::string_view name);
const char* smoothing_name(Smoothing smoothing);

struct BleuOptions {
  // Tokenizer for hypotheses and references (after lowercasing and rstrip).
  Tokenizer tokenize = Tokenizer::k13a;
  // Lowercase (Python's str.lower) before tokenizing.
  bool lowercase = false;
  // Smoothing of zero precisions; sacreBLEU's default is exp.
  Smoothing smooth_method = Smoothing::kExp;
  // Value for floor and add-k; unset means the method's default (floor 0.1, add-k 1).
  std::optional<double> smooth_value;
  // Highest n-gram order.
  int max_ngram_order = 4;
  // Average only over the orders the hypotheses have n-grams of. Use it for
  // sentence-level BLEU (sacreBLEU's sentence_bleu turns it on).
  bool effective_order = false;

  // sacreBLEU's sentence_bleu defaults: as above with effective_order = true.
  static BleuOptions sentence();
  // The smoothing value actually used (the method default when unset).
  double resolved_smooth_value() const;
};

// Sufficient statistics of one segment, or summed over a corpus.
struct BleuStats {
  std::int64_t sys_len = 0;  // hypothesis tokens
  std::int64_t ref_len = 0;  // closest reference length (a tie goes to the shorter)
  // Per order 1..max_ngram_order: hypothesis n-grams that match, clipped by the
  // highest count of that n-gram in any one reference; and all hypothesis n-grams.
  std::vector<std::int64_t> counts;
  std::vector<std::int64_t> totals;

  BleuStats& operator+=(const BleuStats& other);
};

struct BleuScore {
  double score = 0;                   // 0..100
  std::vector<std::int64_t> counts;   // as in the stats (add-k is not added here)
  std::vector<std::int64_t> totals;
  std::vector<double> precisions;     // percent, after smoothing; 0 past the last order with n-grams
  double bp = 0;                      // brevity penalty
  std::int64_t sys_len = 0;
  std::int64_t ref_len = 0;
  double ratio = 0;                   // sys_len / ref_len, 0 when ref_len is 0

  // sacreBLEU's verbose line, e.g.
  // "BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)".
  std::string format(int width = 2) const;
};

// sacreBLEU's BLEU.compute_bleu with the options' smoothing and order settings.
// Throws InputError when the stats do not have max_ngram_order entries.
BleuScore bleu_from_stats(const BleuStats& stats, const BleuOptions& options = {});

// Lowercase (optional), rstrip and tokenize one segment as BLEU does.
std::string bleu_preprocess(std::string_view segment, const BleuOptions& options);

// Statistics of one hypothesis against its references (at least one).
BleuStats bleu_segment_stats(std::string_view hypothesis, const std::vector<std::string>& references,
                             const BleuOptions& options = {});
// Statistics per segment of a corpus (for bootstrap resampling and buckets).
std::vector<BleuStats> bleu_corpus_segment_stats(const std::vector<std::string>& hypotheses,
                                                 const ReferenceStreams& references,
                                                 const BleuOptions& options = {});
// Sum of segment statistics (zero stats of max_ngram_order entries when empty).
BleuStats sum_bleu_stats(const std::vector<BleuStats>& segments, int max_ngram_order = 4);

// Corpus BLEU: statistics summed over segments, then one score.
BleuScore corpus_bleu(const std::vector<std::string>& hypotheses, const ReferenceStreams& references,
                      const BleuOptions& options = {});
// Sentence BLEU of one hypothesis (pass BleuOptions::sentence() for sacreBLEU's defaults).
BleuScore sentence_bleu(std::string_view hypothesis, const std::vector<std::string>& references,
                        const BleuOptions& options = BleuOptions::sentence());

// sacreBLEU-style signature without the version field, e.g.
// "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp".
std::string bleu_signature(const BleuOptions& options, int num_references);

}  // namespace mambamt::results
