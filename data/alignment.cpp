#include "data/alignment.h"

#include <set>
#include <utility>

#include "core/error.h"
#include "data/detail/text.h"

namespace mambamt::data {

namespace {

// A non-negative decimal number at text[at..); advances `at`. -1 when none.
int64_t read_number(std::string_view text, size_t& at) {
  const size_t from = at;
  int64_t v = 0;
  while (at < text.size() && text[at] >= '0' && text[at] <= '9') {
    v = v * 10 + (text[at] - '0');
    if (v > (int64_t{1} << 30)) return -1;
    ++at;
  }
  return at == from ? -1 : v;
}

bool is_space(char c) { return c == ' ' || c == '\t'; }

}  // namespace

WordAlignment parse_alignment(std::string_view line, const std::string& path, long line_no) {
  WordAlignment out;
  std::set<std::pair<int32_t, int32_t>> seen;
  size_t at = 0;
  while (true) {
    while (at < line.size() && is_space(line[at])) ++at;
    if (at >= line.size()) break;
    const size_t start = at;
    auto fail = [&](const std::string& why) {
      size_t end = start;
      while (end < line.size() && !is_space(line[end])) ++end;
      throw InputError(located(path, line_no, static_cast<long>(start) + 1,
                               "bad alignment link '" + std::string(line.substr(start, end - start)) + "': " + why));
    };
    const int64_t src = read_number(line, at);
    if (src < 0) fail("expected i-j (sure) or i?j (possible), 0-based word positions");
    if (at >= line.size() || (line[at] != '-' && line[at] != '?'))
      fail("expected i-j (sure) or i?j (possible), 0-based word positions");
    const bool sure = line[at] == '-';
    ++at;
    const int64_t tgt = read_number(line, at);
    if (tgt < 0 || (at < line.size() && !is_space(line[at])))
      fail("expected i-j (sure) or i?j (possible), 0-based word positions");
    if (!seen.emplace(static_cast<int32_t>(src), static_cast<int32_t>(tgt)).second) fail("the link is given twice");
    out.push_back(WordLink{static_cast<int32_t>(src), static_cast<int32_t>(tgt), sure});
  }
  return out;
}

std::string format_alignment(const WordAlignment& alignment) {
  std::string out;
  for (const WordLink& l : alignment) {
    if (!out.empty()) out += ' ';
    out += std::to_string(l.src) + (l.sure ? "-" : "?") + std::to_string(l.tgt);
  }
  return out;
}

std::vector<WordAlignment> read_alignments(const std::string& path) {
  detail::LineReader in(path);
  std::vector<WordAlignment> out;
  for (std::string line; in.next(line);) out.push_back(parse_alignment(line, path, in.line_number()));
  return out;
}

void write_alignments(const std::vector<WordAlignment>& alignments, const std::string& path) {
  std::string text;
  for (const WordAlignment& a : alignments) text += format_alignment(a) + "\n";
  detail::write_file_atomic(path, text);
}

int64_t word_count(std::string_view sentence) {
  int64_t n = 0;
  bool in_word = false;
  for (char c : sentence) {
    const bool space = is_space(c) || c == '\n' || c == '\r';
    if (!space && !in_word) ++n;
    in_word = !space;
  }
  return n;
}

std::vector<std::vector<WordAlignment>> alignments_for(const Corpus& corpus, std::vector<WordAlignment> lines,
                                                       const std::string& path, const std::string& corpus_path) {
  const int64_t sentences = corpus.num_sentences();
  const std::string of = corpus_path.empty() ? "" : " of " + corpus_path;
  if (static_cast<int64_t>(lines.size()) != sentences) {
    throw InputError(located(path, static_cast<long>(std::min<int64_t>(static_cast<int64_t>(lines.size()), sentences)) + 1,
                             0,
                             std::to_string(lines.size()) + " alignment lines for a test set of " +
                                 std::to_string(sentences) + " sentences" + of +
                                 ": one line per sentence pair, in corpus order, no blank lines between documents"));
  }
  std::vector<std::vector<WordAlignment>> out(corpus.documents.size());
  size_t k = 0;
  for (size_t d = 0; d < corpus.documents.size(); ++d) {
    for (const SentencePair& s : corpus.documents[d].sentences) {
      const int64_t src_words = word_count(s.src), tgt_words = word_count(s.tgt);
      for (const WordLink& l : lines[k]) {
        if (l.src >= src_words || l.tgt >= tgt_words) {
          throw InputError(located(
              path, static_cast<long>(k) + 1, 0,
              "link " + std::to_string(l.src) + (l.sure ? "-" : "?") + std::to_string(l.tgt) + " is outside sentence " +
                  std::to_string(s.id) + " of document " + corpus.documents[d].id + of + " (" +
                  std::to_string(src_words) + " source and " + std::to_string(tgt_words) + " target words)"));
        }
      }
      out[d].push_back(std::move(lines[k]));
      ++k;
    }
  }
  return out;
}

std::vector<int32_t> token_words(const Tokenizer& tokenizer, const std::vector<int32_t>& ids, int64_t words) {
  static const std::string kWordStart = "\xE2\x96\x81";  // U+2581, sentencepiece's whitespace mark
  std::vector<int32_t> out;
  out.reserve(ids.size());
  int32_t word = -1;
  for (int32_t id : ids) {
    const std::string piece = tokenizer.piece(id);
    if (word < 0 || piece.compare(0, kWordStart.size(), kWordStart) == 0) ++word;
    out.push_back(word);
  }
  if (static_cast<int64_t>(word) + 1 != words) return {};
  return out;
}

}  // namespace mambamt::data
