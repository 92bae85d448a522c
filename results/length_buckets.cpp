#include "results/length_buckets.h"

#include <algorithm>
#include <limits>

#include "core/error.h"
#include "results/unicode.h"

namespace mambamt::results {
namespace {

void check_edges(const std::vector<std::int64_t>& edges) {
  if (edges.empty()) throw InputError("length buckets: no bucket edges given");
  for (std::size_t k = 1; k < edges.size(); ++k) {
    if (edges[k] <= edges[k - 1]) {
      throw InputError("length buckets: edges must be strictly ascending (edge " +
                       std::to_string(k + 1) + " is " + std::to_string(edges[k]) + ")");
    }
  }
}

}  // namespace

std::string length_bucket_label(std::int64_t lower, std::int64_t upper) {
  if (upper < 0) return std::to_string(lower) + "+";
  if (upper - 1 == lower) return std::to_string(lower);
  return std::to_string(lower) + "-" + std::to_string(upper - 1);
}

std::size_t length_bucket_index(const std::vector<std::int64_t>& edges, std::int64_t length) {
  if (edges.empty() || length < edges.front()) {
    throw InputError("length buckets: source length " + std::to_string(length) +
                     " is below the first bucket edge");
  }
  return static_cast<std::size_t>(std::upper_bound(edges.begin(), edges.end(), length) -
                                  edges.begin()) - 1;
}

std::vector<LengthBucket> quality_by_length(const std::vector<std::int64_t>& source_lengths,
                                            const std::vector<std::string>& hypotheses,
                                            const ReferenceStreams& references,
                                            const LengthBucketOptions& options) {
  check_edges(options.edges);
  check_reference_streams("length buckets", hypotheses.size(), references);
  if (source_lengths.size() != hypotheses.size()) {
    throw InputError("length buckets: " + std::to_string(source_lengths.size()) +
                     " source lengths for " + std::to_string(hypotheses.size()) + " hypotheses");
  }
  const std::size_t n_buckets = options.edges.size();
  std::vector<std::vector<std::size_t>> members(n_buckets);
  for (std::size_t i = 0; i < source_lengths.size(); ++i) {
    members[length_bucket_index(options.edges, source_lengths[i])].push_back(i);
  }
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<LengthBucket> out(n_buckets);
  for (std::size_t b = 0; b < n_buckets; ++b) {
    LengthBucket& bucket = out[b];
    bucket.lower = options.edges[b];
    bucket.upper = b + 1 < n_buckets ? options.edges[b + 1] : -1;
    bucket.label = length_bucket_label(bucket.lower, bucket.upper);
    bucket.segments = static_cast<std::int64_t>(members[b].size());
    if (members[b].empty()) {
      bucket.mean_source_length = bucket.bleu = bucket.chrf = nan;
      continue;
    }
    std::vector<std::string> hyps;
    ReferenceStreams refs(references.size());
    double length_sum = 0;
    for (std::size_t i : members[b]) {
      hyps.push_back(hypotheses[i]);
      for (std::size_t k = 0; k < references.size(); ++k) refs[k].push_back(references[k][i]);
      length_sum += static_cast<double>(source_lengths[i]);
    }
    bucket.mean_source_length = length_sum / static_cast<double>(members[b].size());
    bucket.bleu = corpus_bleu(hyps, refs, options.bleu).score;
    bucket.chrf = corpus_chrf(hyps, refs, options.chrf).score;
  }
  return out;
}

std::vector<std::int64_t> whitespace_lengths(const std::vector<std::string>& sources) {
  std::vector<std::int64_t> out;
  out.reserve(sources.size());
  for (const auto& s : sources) {
    out.push_back(static_cast<std::int64_t>(split_whitespace(decode_utf8(s)).size()));
  }
  return out;
}

}  // namespace mambamt::results
