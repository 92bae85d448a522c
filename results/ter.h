#pragma once
// TER (translation edit rate with block shifts) exactly as sacreBLEU 2.x computes
// it: the Tercom tokenizer options, the beam-limited edit distance, Tercom's shift
// heuristics and limits, best reference per segment, average reference length.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "results/references.h"

namespace mambamt::results {

struct TerOptions {
  // Tercom normalization: XML unescaping, punctuation and possessive splitting.
  bool normalized = false;
  // Remove the punctuation . , ? : ; ! " ( ).
  bool no_punct = false;
  // Split CJK characters and Asian punctuation (with normalized / no_punct).
  bool asian_support = false;
  // Keep case (TER lowercases by default).
  bool case_sensitive = false;
};

// sacreBLEU's TercomTokenizer: tokens separated by single spaces.
std::string ter_tokenize(std::string_view sentence, const TerOptions& options = {});

// Edits (shifts + insertions + deletions + substitutions) that turn the hypothesis
// words into the reference words; an empty reference costs one per hypothesis word.
std::int64_t translation_edit_rate(const std::vector<std::string>& hypothesis_words,
                                   const std::vector<std::string>& reference_words);

struct TerStats {
  double num_edits = 0;   // fewest edits over the references
  double ref_length = 0;  // average reference length in words
  TerStats& operator+=(const TerStats& other);
};

struct TerScore {
  double score = 0;  // 100 * edits / reference length (0..100+)
  double num_edits = 0;
  double ref_length = 0;
  // "TER = 12.50".
  std::string format(int width = 2) const;
};

TerScore ter_from_stats(const TerStats& stats);
TerStats ter_segment_stats(std::string_view hypothesis, const std::vector<std::string>& references,
                           const TerOptions& options = {});
std::vector<TerStats> ter_corpus_segment_stats(const std::vector<std::string>& hypotheses,
                                               const ReferenceStreams& references,
                                               const TerOptions& options = {});
TerScore corpus_ter(const std::vector<std::string>& hypotheses, const ReferenceStreams& references,
                    const TerOptions& options = {});
TerScore sentence_ter(std::string_view hypothesis, const std::vector<std::string>& references,
                      const TerOptions& options = {});

// sacreBLEU-style signature without the version field, e.g.
// "nrefs:1|case:lc|tok:tercom|norm:no|punct:yes|asian:no".
std::string ter_signature(const TerOptions& options, int num_references);

}  // namespace mambamt::results
