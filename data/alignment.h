#pragma once
// Gold word alignments of a test set, for the alignment quality of a model's
// attention (the research plan's "Alignment" metric of the cross-attention
// frequency ablation; results/alignment.h scores it).
//
// File format (the Pharaoh format of Moses and fast_align, with the "?" of
// possible links that AER tools read): one line per sentence pair of the
// test set, in corpus order, no blank lines between documents; each line a
// space-separated list of links
//     i-j   sure link between source word i and target word j
//     i?j   possible link
// with 0-based word positions in the whitespace-separated words of the
// sentence (an empty line: a sentence without links). A test set PATH looks
// for its alignments in <directory of PATH>/<set name>.align (set name as in
// train/prepare.h: "tst2015.tsv" -> "tst2015.align"); the synthetic corpus
// writes test.align.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/corpus.h"
#include "data/tokenizer.h"

namespace mambamt::data {

struct WordLink {
  int32_t src = 0;
  int32_t tgt = 0;
  bool sure = true;  // false: possible link ("i?j")
  bool operator==(const WordLink& o) const { return src == o.src && tgt == o.tgt && sure == o.sure; }
};
using WordAlignment = std::vector<WordLink>;

// One line of an alignment file; InputError naming path:line:col when a link
// is malformed or given twice.
WordAlignment parse_alignment(std::string_view line, const std::string& path = "<alignment>", long line_no = 0);
// "0-0 1-2 2?1": the line parse_alignment reads back.
std::string format_alignment(const WordAlignment& alignment);

// Every line of an alignment file.
std::vector<WordAlignment> read_alignments(const std::string& path);
// Writes one line per alignment (atomically).
void write_alignments(const std::vector<WordAlignment>& alignments, const std::string& path);

// The alignments of `corpus` in its shape (document, sentence) from the lines
// of `path`: InputError naming the file and line when the number of lines is
// not the number of sentences or a link points past the end of its sentence
// (and naming `corpus_path`, the file the corpus was read from, when given).
std::vector<std::vector<WordAlignment>> alignments_for(const Corpus& corpus, std::vector<WordAlignment> lines,
                                                       const std::string& path, const std::string& corpus_path = "");

// The word (0-based, as in the alignment files) of each token of one
// sentence's ids: a sentencepiece piece starting with U+2581 begins a word,
// any other piece continues the current one. Empty when the ids do not
// split into `words` words (a normalisation of the tokenizer merged or split
// words), so the caller can skip the sentence rather than misalign it.
std::vector<int32_t> token_words(const Tokenizer& tokenizer, const std::vector<int32_t>& ids, int64_t words);

// Number of whitespace-separated words of a sentence.
int64_t word_count(std::string_view sentence);

}  // namespace mambamt::data
