#pragma once
// Contrastive test sets in the spirit of ContraPro: a sentence in its document
// context, its reference translation and wrong variants of the reference (the
// pronoun replaced by the other genders' forms, or an ambiguous word by its
// other sense). A model passes an example when it scores the reference above
// every variant.
//
// File layout (TSV, UTF-8, one example per line, a header line first):
//
//   doc_id  sentence  phenomenon  label  distance  src_context  tgt_context  source  reference  contrastive_1 [contrastive_2 ...]
//
//   sentence     1-based position of `source` in its document
//   phenomenon   "pronoun" or "lexical" (consistent translation of an ambiguous word)
//   label        the word of the reference the variants replace (the pronoun)
//   distance     sentences between the antecedent and `source` (0 = same sentence)
//   src_context  the preceding source sentences, oldest first, joined by " ||| "
//                (empty when there is none); tgt_context: their translations
//   contrastive  one column per wrong variant (at least one)
//
// The synthetic generator writes this layout; real ContraPro (its JSON plus
// OpenSubtitles documents) must be converted to it first.
#include <cstdint>
#include <string>
#include <vector>

namespace mambamt::data {

struct ContrastiveExample {
  std::string doc_id;
  int64_t sentence = 0;                  // 1-based position of `source` in its document
  std::string phenomenon = "pronoun";    // "pronoun" or "lexical"
  std::string label;                     // the reference word the variants replace
  int64_t distance = 0;                  // antecedent distance in sentences (0 = same sentence)
  std::vector<std::string> src_context;  // preceding source sentences, oldest first
  std::vector<std::string> tgt_context;  // their reference translations
  std::string source;
  std::string reference;
  std::vector<std::string> contrastive;  // wrong variants of `reference`

  bool operator==(const ContrastiveExample& o) const;
};

// "<16 hex digits> (<n> examples)": a fingerprint of every field of the
// examples in order (the store's text data.contrastive), so that per-example
// results of two experiments are compared only on the same set.
std::string contrastive_summary(const std::vector<ContrastiveExample>& examples);

// The reporting bucket of an antecedent distance: "0", "1", "2", "3" or ">3".
std::string distance_bucket(int64_t distance);

// The column separator of the context fields.
inline constexpr const char* kContextSeparator = " ||| ";

// Reads the TSV layout above; InputError with file:line:col on any malformed line.
std::vector<ContrastiveExample> read_contrastive(const std::string& path);

// Writes the TSV layout (atomically). Throws Error for text that cannot be
// represented (tabs, newlines, " ||| " inside a context sentence).
void write_contrastive(const std::vector<ContrastiveExample>& examples, const std::string& path);

}  // namespace mambamt::data
