#include "data/corpus.h"

#include <filesystem>
#include <optional>
#include <sstream>
#include <unordered_map>

#include "core/error.h"
#include "core/hash.h"
#include "data/detail/text.h"
#include "data/iwslt.h"

namespace mambamt::data {

using detail::LineReader;
using detail::trim;

int64_t Corpus::num_sentences() const {
  int64_t n = 0;
  for (const auto& d : documents) n += static_cast<int64_t>(d.sentences.size());
  return n;
}

std::string corpus_fingerprint(const Corpus& corpus) {
  // The sentences with a separator byte after each source (0x1f), each
  // target (0x1e) and each document (0x1d).
  core::Fnv64 h;
  for (const Document& d : corpus.documents) {
    for (const SentencePair& p : d.sentences) {
      h.add(p.src);
      h.add_byte(0x1f);
      h.add(p.tgt);
      h.add_byte(0x1e);
    }
    h.add_byte(0x1d);
  }
  return h.hex();
}

std::string corpus_summary(const Corpus& corpus) {
  return corpus_fingerprint(corpus) + " (" + std::to_string(corpus.documents.size()) + " documents, " +
         std::to_string(corpus.num_sentences()) + " sentences)";
}

bool operator==(const SentencePair& a, const SentencePair& b) {
  return a.src == b.src && a.tgt == b.tgt && a.id == b.id;
}
bool operator==(const Document& a, const Document& b) {
  return a.id == b.id && a.sentences == b.sentences;
}
bool Corpus::operator==(const Corpus& other) const { return documents == other.documents; }

namespace {

// Collects documents, checking that a document id does not come back after
// another document started (which would silently split a document in two).
class DocumentBuilder {
 public:
  explicit DocumentBuilder(std::string file) : file_(std::move(file)) {}

  bool open() const { return open_; }
  const std::string& current_id() const { return current_.id; }
  size_t current_size() const { return current_.sentences.size(); }

  void start(const std::string& id, long line) {
    finish();
    auto it = ended_at_.find(id);
    if (it != ended_at_.end()) {
      throw InputError(located(file_, line, 0,
                               "document '" + id + "' is split: it already ended at line " +
                                   std::to_string(it->second)));
    }
    current_ = Document{id, {}};
    open_ = true;
  }

  void add(std::string src, std::string tgt, long line) {
    SentencePair p;
    p.src = std::move(src);
    p.tgt = std::move(tgt);
    p.id = static_cast<int64_t>(current_.sentences.size()) + 1;
    current_.sentences.push_back(std::move(p));
    last_line_ = line;
  }

  void finish() {
    if (!open_) return;
    ended_at_[current_.id] = last_line_;
    corpus_.documents.push_back(std::move(current_));
    current_ = Document{};
    open_ = false;
  }

  Corpus take(long lines) {
    finish();
    if (corpus_.documents.empty()) throw InputError(located(file_, lines, 0, "no sentences in file"));
    return std::move(corpus_);
  }

 private:
  std::string file_;
  Corpus corpus_;
  Document current_;
  bool open_ = false;
  long last_line_ = 0;
  std::unordered_map<std::string, long> ended_at_;
};

// Counts the lines left in a reader (for the differing-line-count message).
long count_rest(LineReader& r) {
  std::string line;
  while (r.next(line)) {
  }
  return r.line_number();
}

[[noreturn]] void line_count_error(LineReader& shorter, LineReader& longer) {
  const long n = shorter.line_number();
  const long m = count_rest(longer);
  throw InputError(located(shorter.path(), n + 1, 0,
                           "file ends after " + std::to_string(n) + " lines but " + longer.path() +
                               " has " + std::to_string(m) + " (line counts differ)"));
}

void check_writable(const std::string& s, const std::string& what) {
  if (s.find_first_of("\t\n\r") != std::string::npos) {
    throw Error(what + " contains a tab or newline and cannot be written: '" + s + "'");
  }
}

}  // namespace

Corpus read_parallel(const std::string& src_path, const std::string& tgt_path,
                     const std::string& docids_path) {
  LineReader src(src_path), tgt(tgt_path);
  std::optional<LineReader> ids;
  if (!docids_path.empty()) ids.emplace(docids_path);
  DocumentBuilder docs(src_path);
  std::string ls, lt, ld;
  int64_t next_doc = 1;
  long blank_line = 0;  // line of the last document separator (0 = none pending)
  while (true) {
    const bool gs = src.next(ls);
    const bool gt = tgt.next(lt);
    if (gs && !gt) line_count_error(tgt, src);
    if (!gs && gt) line_count_error(src, tgt);
    if (ids) {
      const bool gd = ids->next(ld);
      if (gs && !gd) line_count_error(*ids, src);
      if (!gs && gd) line_count_error(src, *ids);
    }
    if (!gs) break;
    const long line = src.line_number();
    std::string s(trim(ls)), t(trim(lt));
    if (ids) {
      const std::string id(trim(ld));
      if (id.empty()) throw InputError(located(ids->path(), line, 0, "empty document id"));
      for (const auto* f : {&s, &t}) {
        if (f->empty()) {
          throw InputError(located(f == &s ? src_path : tgt_path, line, 0,
                                   "empty sentence (with a .docids file blank lines do not separate documents)"));
        }
      }
      if (!docs.open() || docs.current_id() != id) docs.start(id, line);
      docs.add(std::move(s), std::move(t), line);
      continue;
    }
    if (s.empty() != t.empty()) {
      const std::string& blank = s.empty() ? src_path : tgt_path;
      const std::string& other = s.empty() ? tgt_path : src_path;
      throw InputError(located(blank, line, 0,
                               "blank line (a document boundary) but line " + std::to_string(line) + " of " +
                                   other + " is not blank"));
    }
    if (s.empty()) {
      if (!docs.open() || docs.current_size() == 0) {
        throw InputError(located(src_path, line, 0,
                                 blank_line ? "empty document: second blank line in a row (previous at line " +
                                                  std::to_string(blank_line) + ")"
                                            : "empty document: blank line before the first sentence"));
      }
      docs.finish();
      blank_line = line;
      continue;
    }
    if (!docs.open()) docs.start(std::to_string(next_doc++), line);
    docs.add(std::move(s), std::move(t), line);
  }
  return docs.take(src.line_number());
}

Corpus read_tsv(const std::string& path) {
  LineReader in(path);
  DocumentBuilder docs(path);
  std::string line;
  size_t fields_expected = 0;
  long first_line = 0, blank_line = 0;
  int64_t next_doc = 1;
  while (in.next(line)) {
    const long ln = in.line_number();
    if (trim(line).empty()) {
      if (fields_expected == 3) continue;
      if (!docs.open()) {
        throw InputError(located(path, ln, 0,
                                 blank_line ? "empty document: second blank line in a row (previous at line " +
                                                  std::to_string(blank_line) + ")"
                                            : "empty document: blank line before the first sentence"));
      }
      docs.finish();
      blank_line = ln;
      continue;
    }
    const auto fields = detail::split(line, '\t');
    if (fields.size() != 2 && fields.size() != 3) {
      throw InputError(located(path, ln, 0,
                               "expected 2 or 3 tab-separated fields (src, tgt[, doc_id]), found " +
                                   std::to_string(fields.size())));
    }
    if (fields_expected == 0) {
      fields_expected = fields.size();
      first_line = ln;
    } else if (fields.size() != fields_expected) {
      throw InputError(located(path, ln, 0,
                               "line has " + std::to_string(fields.size()) + " fields but line " +
                                   std::to_string(first_line) + " has " + std::to_string(fields_expected)));
    }
    long col = 1;
    const char* names[] = {"source sentence", "target sentence", "document id"};
    std::string values[3];
    for (size_t f = 0; f < fields.size(); ++f) {
      values[f] = std::string(trim(fields[f]));
      if (values[f].empty()) throw InputError(located(path, ln, col, std::string("empty ") + names[f]));
      col += static_cast<long>(fields[f].size()) + 1;
    }
    if (fields.size() == 3) {
      if (!docs.open() || docs.current_id() != values[2]) docs.start(values[2], ln);
    } else if (!docs.open()) {
      docs.start(std::to_string(next_doc++), ln);
    }
    docs.add(std::move(values[0]), std::move(values[1]), ln);
  }
  return docs.take(in.line_number());
}

void write_tsv(const Corpus& corpus, const std::string& path) {
  std::string out;
  for (const auto& d : corpus.documents) {
    check_writable(d.id, "document id");
    if (d.id.empty()) throw Error("empty document id cannot be written to " + path);
    for (const auto& s : d.sentences) {
      check_writable(s.src, "sentence");
      check_writable(s.tgt, "sentence");
      out += s.src;
      out += '\t';
      out += s.tgt;
      out += '\t';
      out += d.id;
      out += '\n';
    }
  }
  detail::write_file_atomic(path, out);
}

void write_parallel(const Corpus& corpus, const std::string& src_path, const std::string& tgt_path,
                    const std::string& docids_path) {
  std::string s, t, ids;
  bool first = true;
  for (const auto& d : corpus.documents) {
    if (docids_path.empty() && !first) {
      s += '\n';
      t += '\n';
    }
    first = false;
    check_writable(d.id, "document id");
    for (const auto& p : d.sentences) {
      check_writable(p.src, "sentence");
      check_writable(p.tgt, "sentence");
      if (p.src.empty() || p.tgt.empty()) throw Error("empty sentence cannot be written in the parallel format");
      s += p.src + '\n';
      t += p.tgt + '\n';
      ids += d.id + '\n';
    }
  }
  detail::write_file_atomic(src_path, s);
  detail::write_file_atomic(tgt_path, t);
  if (!docids_path.empty()) detail::write_file_atomic(docids_path, ids);
}

Corpus read_corpus(const CorpusOptions& o) {
  if (o.path.empty()) throw InputError("data: no corpus path given for format '" + o.format + "'");
  if (o.format == "tsv") return read_tsv(o.path);
  if (o.format == "parallel") {
    const std::string docids = o.path + ".docids";
    return read_parallel(o.path + "." + o.src_lang, o.path + "." + o.tgt_lang,
                         detail::file_exists(docids) ? docids : "");
  }
  if (o.format == "iwslt") return read_iwslt(o.path, o.src_lang, o.tgt_lang);
  throw InputError(o.path + ": unknown corpus format '" + o.format + "' (expected iwslt, parallel or tsv)");
}

}  // namespace mambamt::data
