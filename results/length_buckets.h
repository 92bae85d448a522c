#pragma once
// Translation quality by source length (the SSM-for-MT paper's length
// sensitivity analysis, §5.2 and Figures 2, 3, 5, 6): segments are grouped by
// their number of source tokens and each group gets its own corpus BLEU and chrF.
#include <cstdint>
#include <string>
#include <vector>

#include "results/bleu.h"
#include "results/chrf.h"

namespace mambamt::results {

struct LengthBucketOptions {
  // Lower edges of the buckets, strictly ascending: {1, 17, 33} gives the buckets
  // [1,17), [17,33) and [33, inf). Lengths below the first edge are an error.
  std::vector<std::int64_t> edges = {0, 16, 32, 64, 128, 256};
  BleuOptions bleu;
  ChrfOptions chrf;
};

struct LengthBucket {
  std::int64_t lower = 0;   // inclusive
  std::int64_t upper = -1;  // exclusive; -1 for the open last bucket
  std::string label;        // "16-31", "256+"
  std::int64_t segments = 0;
  double mean_source_length = 0;  // NaN when empty
  double bleu = 0;                // corpus BLEU of the bucket, NaN when empty
  double chrf = 0;                // corpus chrF of the bucket, NaN when empty
};

// "lower-(upper-1)" or "lower+" for the open bucket.
std::string length_bucket_label(std::int64_t lower, std::int64_t upper);

// Index of the bucket holding `length` (throws InputError below the first edge).
std::size_t length_bucket_index(const std::vector<std::int64_t>& edges, std::int64_t length);

// One bucket per edge, empty ones included (with NaN scores) so tables and plots
// show them as missing.
std::vector<LengthBucket> quality_by_length(const std::vector<std::int64_t>& source_lengths,
                                            const std::vector<std::string>& hypotheses,
                                            const ReferenceStreams& references,
                                            const LengthBucketOptions& options = {});

// Whitespace token counts, for callers without a subword tokenizer at hand.
std::vector<std::int64_t> whitespace_lengths(const std::vector<std::string>& sources);

}  // namespace mambamt::results
