#pragma once
// A parallel corpus that keeps its document boundaries, and the readers and
// writers of the plain formats:
//
//   parallel  PREFIX.<src> and PREFIX.<tgt>, one sentence per line, line i of
//             one the translation of line i of the other. Documents are
//             separated by a blank line (in both files at the same line), or,
//             when PREFIX.docids exists, given by it: one document id per
//             line, consecutive equal ids forming a document (blank lines are
//             then an error).
//   tsv       one sentence pair per line: src<TAB>tgt or src<TAB>tgt<TAB>doc_id.
//             With doc ids, consecutive lines with the same id form a document
//             (blank lines are skipped); without, blank lines separate documents.
//
// The IWSLT formats are in data/iwslt.h. Every reader throws InputError naming
// the file and line (and document/segment for alignment errors) on invalid
// UTF-8, differing line counts, unclosed tags or empty documents, and returns
// nothing partly read. Sentences are trimmed of surrounding whitespace.
#include <cstdint>
#include <string>
#include <vector>

namespace mambamt::data {

// One aligned sentence pair.
struct SentencePair {
  std::string src;
  std::string tgt;
  int64_t id = 0;  // IWSLT <seg id>; otherwise the 1-based position in its document
};

struct Document {
  std::string id;  // doc id from the file; "<n>" (1-based) where the format has none
  std::vector<SentencePair> sentences;
};

struct Corpus {
  std::vector<Document> documents;

  int64_t num_sentences() const;
  bool operator==(const Corpus& other) const;
};

bool operator==(const SentencePair& a, const SentencePair& b);
bool operator==(const Document& a, const Document& b);

// 16 hex digits that change with the text of any sentence (source or target)
// and with the document boundaries, not with document ids or the file format:
// what the experiment store records of each corpus it trained or was scored on.
std::string corpus_fingerprint(const Corpus& corpus);
// "<fingerprint> (<n> documents, <m> sentences)".
std::string corpus_summary(const Corpus& corpus);

// Reads a plain parallel corpus. docids_path may be empty (blank lines then
// separate documents).
Corpus read_parallel(const std::string& src_path, const std::string& tgt_path,
                     const std::string& docids_path = "");

// Reads a TSV corpus (src<TAB>tgt[<TAB>doc_id]).
Corpus read_tsv(const std::string& path);

// Writes src<TAB>tgt<TAB>doc_id lines (documents keep their ids; read_tsv gives
// the corpus back, sentence ids renumbered 1..n within each document).
// Throws Error when a sentence contains a tab or a newline.
void write_tsv(const Corpus& corpus, const std::string& path);

// Writes src_path/tgt_path with one sentence per line and, when docids_path is
// not empty, the doc ids; without docids a blank line separates documents.
void write_parallel(const Corpus& corpus, const std::string& src_path, const std::string& tgt_path,
                    const std::string& docids_path = "");

// Where a corpus comes from: the [data] fields corpus/train/src_lang/tgt_lang.
struct CorpusOptions {
  // "iwslt", "parallel" or "tsv" (the synthetic corpus is made by data/synthetic.h).
  std::string format = "tsv";
  // iwslt: a directory holding train.tags.<pair>.<lang>, a train.tags.<pair>
  // prefix, or an IWSLT1x.TED.<set>.<pair> prefix / .<src>.xml file;
  // parallel: the PREFIX of PREFIX.<src_lang>; tsv: the file.
  std::string path;
  // Source language code (file suffix of iwslt and parallel).
  std::string src_lang = "src";
  // Target language code.
  std::string tgt_lang = "tgt";
};

// Reads a corpus in any of the formats above.
Corpus read_corpus(const CorpusOptions& options);

}  // namespace mambamt::data
