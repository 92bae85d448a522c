#pragma once
// A passage's translation cut into one hypothesis per reference sentence, so
// that a model that translates passages (windows of sentences joined by
// <sep>, eval.doc_decode = "passages") is also scored sentence by sentence,
// on the same segments as a sentence-level model: the paired significance
// test of the two (results/segments.h) needs equal segments.
//
// The model's own separators cut it where it wrote as many sentences as the
// passage has. Where it wrote more or fewer, the words are cut again the way
// the IWSLT evaluations re-segment speech translations against their
// reference sentences (mwerSegmenter): into consecutive runs, one per
// reference, with the least total word edit distance to the references.
#include <string>
#include <vector>

namespace mambamt::results {

// The whitespace-separated words of `hypothesis` cut into references.size()
// consecutive runs (a run may be empty), joined by single spaces: of all such
// cuts, the one whose summed word-level Levenshtein distance (insertions,
// deletions, substitutions, each 1) to the references is least; among equal
// ones, the one whose last run starts earliest, then the one before it, and
// so on. Empty for no references.
std::vector<std::string> resegment(const std::string& hypothesis, const std::vector<std::string>& references);

struct PassageSplit {
  std::vector<std::string> sentences;  // one per reference
  bool by_separators = false;          // the model's separators gave them (else resegment)
};
// `pieces`: the translation split at the model's separators (an empty piece
// where two separators meet). As many pieces as references: those, as they
// are. Otherwise: resegment of the non-empty pieces joined by spaces.
PassageSplit split_passage(const std::vector<std::string>& pieces, const std::vector<std::string>& references);

}  // namespace mambamt::results
