#pragma once
// Alignment quality of attention against gold word alignments: the alignment
// error rate of Och and Ney (2003), over sure links S and possible links P
// (S a subset of P) and predicted links A,
//
//     AER = 1 - (|A n S| + |A n P|) / (|A| + |S|),   precision = |A n P| / |A|,
//     recall = |A n S| / |S|,
//
// summed over a corpus before dividing (not averaged over sentences). With
// sure links only (the synthetic corpus), AER = 1 - F1.
//
// Predicted links come from an attention map the way attention is read as an
// alignment in the NMT literature (Garg et al. 2019): each target token is
// aligned to the source token it attends to most, and two words are aligned
// when any of their subword tokens are.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/store.h"
#include "results/bootstrap.h"

namespace mambamt::results {

// A word link (source word, target word), 0-based.
using Link = std::pair<int32_t, int32_t>;

struct AlignmentCounts {
  int64_t predicted = 0;      // |A|
  int64_t sure = 0;           // |S|
  int64_t sure_hits = 0;      // |A n S|
  int64_t possible_hits = 0;  // |A n P|
  int64_t sentences = 0;
  void add(const AlignmentCounts& o);
  double aer() const;        // NaN when |A| + |S| = 0
  double precision() const;  // NaN when |A| = 0
  double recall() const;     // NaN when |S| = 0
};

// Scores one sentence: `predicted` links (duplicates count once) against the
// gold `sure` and `possible` links (possible need not repeat the sure ones).
AlignmentCounts score_alignment(const std::vector<Link>& predicted, const std::vector<Link>& sure,
                                const std::vector<Link>& possible);

// The word links of one attention map `weights` (rows x cols, row-major): row
// r is the target token whose word is tgt_word[r], column c the source token
// whose word is src_word[c]; -1 marks tokens outside the sentence (context
// sentences, separators, eos). Each row inside the sentence is aligned to its
// largest column; a row whose largest column is outside the sentence gives no
// link. Sorted, without duplicates.
std::vector<Link> argmax_alignment(const float* weights, int64_t rows, int64_t cols,
                                   const std::vector<int32_t>& tgt_word, const std::vector<int32_t>& src_word);

// The layer with the lowest AER in `by_layer` (the first of equals); -1 when
// no layer has a finite one.
int64_t best_layer(const std::vector<AlignmentCounts>& by_layer);

// A layer chosen without looking at the sentences it is scored on: two-fold
// cross-validation. `halves[h][l]` holds layer l's counts on half h of a
// set's sentences; each half is scored at the layer best on the other half
// (best_layer) and the two halves' counts are summed. The best layer of the
// whole set is an optimistic estimate, the more so the more layers a model
// has to choose from; this one is not. A half whose other half has no finite
// AER (no sentences) is left out (chosen -1).
struct HeldOutLayer {
  AlignmentCounts counts;
  std::array<int64_t, 2> chosen{-1, -1};  // the layer each half was scored at
};
HeldOutLayer held_out_layer(const std::array<std::vector<AlignmentCounts>, 2>& halves);

// An experiment store's per-sentence counts of its reported alignment
// (results/alignment/sentences: rows "<document>:<sentence>" of the gold set,
// columns predicted, sure, sure_hits, possible_hits) and the text they come
// from (text data.alignment: the set, its fingerprint, the gold links').
struct AlignmentOutcomes {
  std::vector<std::string> sentences;
  std::vector<AlignmentCounts> counts;
  std::string set;
};
// Null when the store has no such table or text.
std::optional<AlignmentOutcomes> alignment_outcomes(const core::StoreSnapshot& store);

// p-value of sacreBLEU's paired bootstrap test (results/bootstrap.h) of two
// systems' AER on the same sentences: sentences resampled, both systems
// alike, each resample's AER from its summed counts. Throws InputError when
// the two differ in text or sentences.
double paired_aer_p(const AlignmentOutcomes& baseline, const AlignmentOutcomes& system,
                    const BootstrapOptions& options = {});

}  // namespace mambamt::results
