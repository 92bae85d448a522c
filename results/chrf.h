#pragma once
// chrF and chrF++ exactly as sacreBLEU 2.x computes them (Popović 2015/2017):
// character n-grams (whitespace removed unless asked), optional word n-grams with
// punctuation split off, best reference per segment, corpus scores from summed
// statistics.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "results/references.h"

namespace mambamt::results {

struct ChrfOptions {
  // Character n-gram orders 1..char_order.
  int char_order = 6;
  // Word n-gram orders 1..word_order; 2 gives chrF++.
  int word_order = 0;
  // Recall is beta times as important as precision.
  double beta = 2;
  // Lowercase (Python's str.lower) hypotheses and references.
  bool lowercase = false;
  // Keep whitespace inside character n-grams (sacreBLEU removes it by default).
  bool whitespace = false;
  // Average per-order F-scores with an epsilon for empty orders (chrF's original
  // definition) instead of sacreBLEU's default "effective order" averaging of
  // precision and recall.
  bool eps_smoothing = false;

  // chrF++: word_order = 2, everything else as above.
  static ChrfOptions plus_plus();
};

// Counts of one n-gram order.
struct ChrfOrderStats {
  std::int64_t hyp = 0;    // hypothesis n-grams (0 when the reference has none of this order)
  std::int64_t ref = 0;    // reference n-grams
  std::int64_t match = 0;  // common n-grams (clipped)
};

// Statistics of one segment (against its best reference) or summed over a corpus:
// char orders 1..char_order, then word orders 1..word_order.
struct ChrfStats {
  std::vector<ChrfOrderStats> orders;
  ChrfStats& operator+=(const ChrfStats& other);
};

struct ChrfScore {
  double score = 0;  // 0..100
  double beta = 2;
  int char_order = 6;
  int word_order = 0;

  // "chrF2", "chrF2++" (one '+' per word order).
  std::string name() const;
  // "chrF2 = 59.73".
  std::string format(int width = 2) const;
};

ChrfScore chrf_from_stats(const ChrfStats& stats, const ChrfOptions& options = {});

// Statistics of the best-scoring reference for one hypothesis (a later reference
// replaces an earlier one only with a strictly higher sentence score).
ChrfStats chrf_segment_stats(std::string_view hypothesis, const std::vector<std::string>& references,
                             const ChrfOptions& options = {});
std::vector<ChrfStats> chrf_corpus_segment_stats(const std::vector<std::string>& hypotheses,
                                                 const ReferenceStreams& references,
                                                 const ChrfOptions& options = {});
ChrfStats sum_chrf_stats(const std::vector<ChrfStats>& segments, const ChrfOptions& options = {});

ChrfScore corpus_chrf(const std::vector<std::string>& hypotheses, const ReferenceStreams& references,
                      const ChrfOptions& options = {});
ChrfScore sentence_chrf(std::string_view hypothesis, const std::vector<std::string>& references,
                        const ChrfOptions& options = {});

// sacreBLEU-style signature without the version field, e.g.
// "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no".
std::string chrf_signature(const ChrfOptions& options, int num_references);

}  // namespace mambamt::results
