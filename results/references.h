#pragma once
// The reference layout shared by the corpus metrics (sacreBLEU's "reference
// streams"): refs[k][i] is the k-th reference of segment i, so a corpus with two
// references per segment is {stream_1, stream_2}, each as long as the hypotheses.
#include <string>
#include <string_view>
#include <vector>

namespace mambamt::results {

using ReferenceStreams = std::vector<std::vector<std::string>>;

// Throws InputError naming `metric` unless there is at least one stream and every
// stream has one reference per hypothesis.
void check_reference_streams(std::string_view metric, std::size_t num_hypotheses,
                             const ReferenceStreams& refs);

// The references of segment i, one per stream.
std::vector<std::string> segment_references(const ReferenceStreams& refs, std::size_t i);

// The version field that completes a metric's signature (bleu_signature,
// chrf_signature, ter_signature): the scores are mambamt's own implementation
// of sacreBLEU 2.6's metrics (tests/results checks them against the values
// sacreBLEU's test suite states), so the field names both,
// "version:mambamt-<version>/sacrebleu-2.6".
std::string signature_version_field();

}  // namespace mambamt::results
