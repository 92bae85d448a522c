#pragma once
// Per-segment BLEU and chrF statistics of a test set, kept in the experiment's
// store beside its corpus scores (results/<set>/segments, docs/STORE.md), so
// that two experiments translated on the same segments can be compared by
// paired bootstrap resampling afterwards: the collector's significance of each
// model against the Transformer.
//
// Table layout: one row per segment (labels "0", "1", ...), columns
//   bleu_sys_len, bleu_ref_len, bleu_match_<n>, bleu_total_<n> for n = 1..4,
//   chrf_c<k>_{hyp,ref,match} for the character orders k = 1..6, then
//   chrf_w<k>_{hyp,ref,match} for the word orders (none for chrF).
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "core/store.h"
#include "results/bleu.h"
#include "results/bootstrap.h"
#include "results/chrf.h"

namespace mambamt::results {

struct SegmentStats {
  std::vector<BleuStats> bleu;
  std::vector<ChrfStats> chrf;
  int chrf_char_order = 6;
  int chrf_word_order = 0;
  // Each segment's COMET score where `comet-score` scored them (a table of
  // its own: comet_segment_table); empty otherwise.
  std::vector<double> comet;

  // The chrF options these statistics are scored with (their orders, beta 2).
  ChrfOptions chrf_options() const;
  // Whether `other` holds the same segments against the same references: as
  // many segments, and each one's reference-side numbers equal (BLEU's
  // reference length after its tokenisation, chrF's reference n-grams of
  // every order). Hypotheses are free to differ.
  bool same_references(const SegmentStats& other) const;
};

// The table of segment statistics (BLEU at orders 1..4, chrF at the orders of
// `chrf`). Throws InputError when the two lists differ in length or the chrF
// statistics have orders other than those of `chrf`.
core::ResultTable segment_table(const std::vector<BleuStats>& bleu, const std::vector<ChrfStats>& chrf,
                                const ChrfOptions& chrf_options);

// The statistics back from a table segment_table wrote. Throws InputError
// naming what is wrong when the table is not one (missing or extra columns).
SegmentStats segment_stats(const core::ResultTable& table);

// The table of segment COMET scores (one column `comet`, a row per segment)
// and back; comet_scores throws InputError when the table is not one.
core::ResultTable comet_segment_table(const std::vector<double>& scores);
std::vector<double> comet_scores(const core::ResultTable& table);

// A store's statistics of test set `set`: its own segments
// (`<set>/segments`, with `<set>/comet_segments`) and the same by sentence
// (`<set>/sentence_segments` with `<set>/sentence_comet_segments` of a model
// that translated passages, split into their sentences: results/resegment.h;
// else the own ones). Each null where the store lacks it; COMET scores are
// left out where their count is not the segments'. Throws InputError naming
// the table ("/results/<set>/...: ...") when one is not a table of segment
// statistics or scores.
struct StoreSegments {
  std::optional<SegmentStats> own, by_sentence;
};
StoreSegments store_segments(const core::StoreSnapshot& store, const std::string& set);

// The segments on which two experiments' translations are paired: their own
// when those are the same segments against the same references; else, where
// one translated passages and the other single sentences (or passages of
// other windows), their by_sentence ones when those are. Null when neither.
struct PairedSegments {
  SegmentStats baseline, system;
  bool by_sentence = false;  // the sentence-level statistics, not both stores' own segments
};
std::optional<PairedSegments> paired_segments(const StoreSegments& baseline, const StoreSegments& system);

// p-values of sacreBLEU's paired bootstrap test of `system` against
// `baseline` on the same segments (same_references), for BLEU and for chrF,
// and for COMET (the mean of the segments' scores, as comet-compare tests it)
// where both have segment COMET scores (all drawn from the same seed, so on
// the same resamples), and the differences of their corpus scores. Throws
// InputError when the segment counts differ.
struct PairedSignificance {
  double bleu_p = 1;
  double chrf_p = 1;
  double bleu_delta = 0;  // system's corpus BLEU minus the baseline's
  double chrf_delta = 0;
  double comet_p = std::numeric_limits<double>::quiet_NaN();  // NaN: not both scored by COMET
  double comet_delta = std::numeric_limits<double>::quiet_NaN();
};
PairedSignificance paired_significance(const SegmentStats& baseline, const SegmentStats& system,
                                       const BootstrapOptions& options = {});

}  // namespace mambamt::results
