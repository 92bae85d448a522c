#include "data/iwslt.h"

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <unordered_set>
#include <utility>

#include "core/error.h"
#include "data/detail/text.h"

namespace mambamt::data {

using detail::LineReader;
using detail::starts_with;
using detail::trim;

namespace {

struct RawSeg {
  int64_t id = 0;
  std::string text;
  long line = 0;
};

struct RawDoc {
  std::string id;
  long line = 0;  // where the document starts
  std::vector<RawSeg> segs;
};

// If `t` starts with a tag, sets its name and whether it is a closing tag.
bool parse_tag(std::string_view t, std::string& name, bool& closing) {
  if (t.size() < 3 || t[0] != '<') return false;
  size_t i = 1;
  closing = t[i] == '/';
  if (closing) ++i;
  const size_t b = i;
  // A tag name starts with a letter: a text line such as "<3 ..." is text.
  if (i >= t.size() || !std::isalpha(static_cast<unsigned char>(t[i]))) return false;
  while (i < t.size() && (std::isalnum(static_cast<unsigned char>(t[i])) || t[i] == '_' || t[i] == '-')) ++i;
  if (i == b || i >= t.size() || !(t[i] == '>' || t[i] == ' ' || t[i] == '\t' || t[i] == '/')) return false;
  name.assign(t.substr(b, i - b));
  for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return true;
}

// The value of attribute `key` in the opening tag at the start of `t`.
std::optional<std::string> attribute(std::string_view t, std::string_view key) {
  const size_t end = t.find('>');
  const std::string_view tag = t.substr(0, end);
  size_t pos = 0;
  while ((pos = tag.find(key, pos)) != std::string_view::npos) {
    const bool word_start = pos > 0 && (tag[pos - 1] == ' ' || tag[pos - 1] == '\t');
    size_t i = pos + key.size();
    while (i < tag.size() && tag[i] == ' ') ++i;
    if (!word_start || i >= tag.size() || tag[i] != '=') {
      pos += key.size();
      continue;
    }
    ++i;
    while (i < tag.size() && tag[i] == ' ') ++i;
    if (i < tag.size() && (tag[i] == '"' || tag[i] == '\'')) {
      const char q = tag[i];
      const size_t close = tag.find(q, i + 1);
      if (close == std::string_view::npos) return std::nullopt;
      return std::string(tag.substr(i + 1, close - i - 1));
    }
    size_t e = i;
    while (e < tag.size() && tag[e] != ' ' && tag[e] != '/') ++e;
    return std::string(tag.substr(i, e - i));
  }
  return std::nullopt;
}

bool closed_on_line(std::string_view t, const std::string& name) {
  if (t.find("</" + name + ">") != std::string_view::npos) return true;
  const size_t gt = t.find('>');
  return gt != std::string_view::npos && gt > 0 && t[gt - 1] == '/';
}

// Inner text of <name ...>text</name>.
std::string inner_text(std::string_view t, const std::string& name) {
  const size_t open_end = t.find('>');
  const size_t close = t.find("</" + name + ">");
  if (open_end == std::string_view::npos || close == std::string_view::npos || close < open_end) return "";
  return std::string(trim(t.substr(open_end + 1, close - open_end - 1)));
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Decodes the five XML entities and numeric references; anything else that
// starts with '&' is kept as it is (real IWSLT files have bare ampersands).
std::string decode_entities(std::string_view s) {
  static const std::pair<std::string_view, char> named[] = {
      {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    if (s[i] != '&') {
      out += s[i++];
      continue;
    }
    bool done = false;
    for (const auto& [ent, ch] : named) {
      if (s.compare(i, ent.size(), ent) == 0) {
        out += ch;
        i += ent.size();
        done = true;
        break;
      }
    }
    if (!done && i + 2 < s.size() && s[i + 1] == '#') {
      const size_t semi = s.find(';', i);
      if (semi != std::string_view::npos && semi - i <= 10) {
        const bool hex = s[i + 2] == 'x' || s[i + 2] == 'X';
        const std::string digits(s.substr(i + (hex ? 3 : 2), semi - i - (hex ? 3 : 2)));
        char* end = nullptr;
        const unsigned long cp = digits.empty() ? 0 : std::strtoul(digits.c_str(), &end, hex ? 16 : 10);
        if (!digits.empty() && end && *end == 0 && cp > 0 && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF)) {
          append_utf8(out, static_cast<uint32_t>(cp));
          i = semi + 1;
          done = true;
        }
      }
    }
    if (!done) out += s[i++];
  }
  return out;
}

class DocCollector {
 public:
  explicit DocCollector(std::string path) : path_(std::move(path)) {}
  bool open() const { return open_; }
  RawDoc& current() { return cur_; }

  void start(long line, std::string id = "") {
    finish();
    cur_ = RawDoc{std::move(id), line, {}};
    open_ = true;
  }
  void finish() {
    if (!open_) return;
    if (cur_.segs.empty()) {
      throw InputError(located(path_, cur_.line, 0,
                               "empty document" + (cur_.id.empty() ? std::string() : " '" + cur_.id + "'") +
                                   ": no sentences"));
    }
    docs_.push_back(std::move(cur_));
    open_ = false;
  }
  std::vector<RawDoc> take(long lines) {
    finish();
    if (docs_.empty()) throw InputError(located(path_, lines, 0, "no documents in file"));
    // Talks without a docid or <talkid> are numbered by position (both sides alike).
    for (size_t i = 0; i < docs_.size(); ++i) {
      if (docs_[i].id.empty()) docs_[i].id = std::to_string(i + 1);
    }
    return std::move(docs_);
  }

 private:
  std::string path_;
  std::vector<RawDoc> docs_;
  RawDoc cur_;
  bool open_ = false;
};

std::vector<RawDoc> parse_train_tags(const std::string& path) {
  LineReader in(path);
  DocCollector docs(path);
  bool wrapped = false;  // inside <doc> ... </doc>
  long wrap_line = 0;
  std::string line, name;
  bool closing = false;
  while (in.next(line)) {
    const long ln = in.line_number();
    const std::string_view t = trim(line);
    if (t.empty()) continue;
    if (parse_tag(t, name, closing)) {
      if (name == "doc") {
        if (!closing) {
          if (wrapped) {
            throw InputError(located(path, ln, 0,
                                     "<doc> inside the <doc> opened at line " + std::to_string(wrap_line) +
                                         " (missing </doc>)"));
          }
          docs.start(ln, attribute(t, "docid").value_or(""));
          wrapped = true;
          wrap_line = ln;
        } else {
          if (!wrapped) throw InputError(located(path, ln, 0, "</doc> without an open <doc>"));
          docs.finish();
          wrapped = false;
        }
        continue;
      }
      if (closing) throw InputError(located(path, ln, 0, "stray </" + name + ">"));
      if (!closed_on_line(t, name)) {
        throw InputError(located(path, ln, 0, "unclosed <" + name + "> (metadata tags close on their line)"));
      }
      // Outside a <doc> wrapper, the metadata block of a talk starts a new document.
      if (!docs.open() || (!wrapped && !docs.current().segs.empty())) docs.start(ln);
      if (name == "talkid" && docs.current().id.empty()) docs.current().id = inner_text(t, name);
      continue;
    }
    if (!docs.open()) docs.start(ln);
    auto& segs = docs.current().segs;
    segs.push_back(RawSeg{static_cast<int64_t>(segs.size()) + 1, std::string(t), ln});
  }
  if (wrapped) {
    throw InputError(located(path, wrap_line, 0, "unclosed <doc> (no </doc> before the end of the file)"));
  }
  return docs.take(in.line_number());
}

bool is_container(const std::string& name) {
  return name == "mteval" || name == "srcset" || name == "refset" || name == "tstset";
}

std::vector<RawDoc> parse_xml(const std::string& path) {
  LineReader in(path);
  DocCollector docs(path);
  std::vector<std::pair<std::string, long>> containers;
  std::unordered_set<int64_t> seg_ids;
  std::string line, name;
  bool closing = false;
  while (in.next(line)) {
    const long ln = in.line_number();
    const std::string_view t = trim(line);
    if (t.empty() || starts_with(t, "<?xml") || starts_with(t, "<!--")) continue;
    if (!parse_tag(t, name, closing)) {
      throw InputError(located(path, ln, 0, "text outside <seg>"));
    }
    if (is_container(name)) {
      if (!closing) {
        if (!closed_on_line(t, name)) containers.emplace_back(name, ln);
        continue;
      }
      if (docs.open()) {
        throw InputError(located(path, ln, 0,
                                 "</" + name + "> before the <doc> opened at line " +
                                     std::to_string(docs.current().line) + " is closed"));
      }
      if (containers.empty() || containers.back().first != name) {
        throw InputError(located(path, ln, 0,
                                 containers.empty() ? "</" + name + "> without an open <" + name + ">"
                                                    : "</" + name + "> does not close the <" + containers.back().first +
                                                          "> opened at line " + std::to_string(containers.back().second)));
      }
      containers.pop_back();
      continue;
    }
    if (name == "doc") {
      if (!closing) {
        if (docs.open()) {
          throw InputError(located(path, ln, 0,
                                   "<doc> inside the <doc> opened at line " + std::to_string(docs.current().line) +
                                       " (missing </doc>)"));
        }
        auto id = attribute(t, "docid");
        if (!id || id->empty()) throw InputError(located(path, ln, 0, "<doc> without a docid"));
        docs.start(ln, *id);
        seg_ids.clear();
      } else {
        if (!docs.open()) throw InputError(located(path, ln, 0, "</doc> without an open <doc>"));
        docs.finish();
      }
      continue;
    }
    if (name == "seg") {
      if (closing) throw InputError(located(path, ln, 0, "stray </seg>"));
      if (!docs.open()) throw InputError(located(path, ln, 0, "<seg> outside <doc>"));
      const auto id_text = attribute(t, "id");
      char* end = nullptr;
      const long long id = id_text && !id_text->empty() ? std::strtoll(id_text->c_str(), &end, 10) : 0;
      if (!id_text || id_text->empty() || *end != 0) {
        throw InputError(located(path, ln, 0, "<seg> without a numeric id"));
      }
      const size_t open_end = t.find('>');
      const size_t close = t.find("</seg>", open_end);
      if (close == std::string_view::npos) {
        throw InputError(located(path, ln, 0,
                                 "unclosed <seg id=\"" + *id_text + "\"> (segments close on their line)"));
      }
      if (!seg_ids.insert(id).second) {
        throw InputError(located(path, ln, 0,
                                 "document '" + docs.current().id + "': duplicate segment id " + *id_text));
      }
      docs.current().segs.push_back(
          RawSeg{id, decode_entities(trim(t.substr(open_end + 1, close - open_end - 1))), ln});
      continue;
    }
    if (closing) throw InputError(located(path, ln, 0, "stray </" + name + ">"));
    if (!closed_on_line(t, name)) {
      throw InputError(located(path, ln, 0, "unclosed <" + name + "> (metadata tags close on their line)"));
    }
  }
  if (docs.open()) {
    throw InputError(located(path, docs.current().line, 0,
                             "unclosed <doc docid=\"" + docs.current().id + "\"> (no </doc> before the end of the file)"));
  }
  if (!containers.empty()) {
    throw InputError(located(path, containers.back().second, 0,
                             "unclosed <" + containers.back().first + "> (no </" + containers.back().first +
                                 "> before the end of the file)"));
  }
  return docs.take(in.line_number());
}

std::string at(const std::string& path, long line) { return path + ":" + std::to_string(line); }

Corpus align(std::vector<RawDoc> src, std::vector<RawDoc> tgt, const std::string& sp, const std::string& tp,
             bool by_segment_id) {
  const size_t n = std::min(src.size(), tgt.size());
  Corpus corpus;
  corpus.documents.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    RawDoc& s = src[i];
    RawDoc& t = tgt[i];
    if (s.id != t.id) {
      throw InputError(located(sp, s.line, 0,
                               "document '" + s.id + "' is paired with document '" + t.id + "' at " + at(tp, t.line) +
                                   " (the files list different documents)"));
    }
    const size_t m = std::min(s.segs.size(), t.segs.size());
    if (by_segment_id) {
      for (size_t k = 0; k < m; ++k) {
        if (s.segs[k].id != t.segs[k].id) {
          throw InputError(located(sp, s.segs[k].line, 0,
                                   "document '" + s.id + "': segment id " + std::to_string(s.segs[k].id) +
                                       " is paired with segment id " + std::to_string(t.segs[k].id) + " at " +
                                       at(tp, t.segs[k].line)));
        }
      }
    } else if (s.segs.size() != t.segs.size()) {
      // train.tags talks are aligned line by line; name both line ranges so
      // the missing or extra line can be found.
      throw InputError(located(sp, s.line, 0,
                               "document '" + s.id + "' has " + std::to_string(s.segs.size()) +
                                   " sentences here (lines " + std::to_string(s.segs.front().line) + "-" +
                                   std::to_string(s.segs.back().line) + ") but " + std::to_string(t.segs.size()) +
                                   " in " + at(tp, t.segs.front().line) + "-" + std::to_string(t.segs.back().line)));
    }
    if (s.segs.size() != t.segs.size()) {
      const bool src_longer = s.segs.size() > t.segs.size();
      const RawSeg& extra = src_longer ? s.segs[m] : t.segs[m];
      throw InputError(located(src_longer ? sp : tp, extra.line, 0,
                               "document '" + s.id + "': segment " + std::to_string(extra.id) +
                                   " has no counterpart in " + (src_longer ? tp : sp) + " (" +
                                   std::to_string(s.segs.size()) + " vs " + std::to_string(t.segs.size()) +
                                   " segments)"));
    }
    Document d;
    d.id = s.id;
    d.sentences.reserve(m);
    for (size_t k = 0; k < m; ++k) {
      d.sentences.push_back(SentencePair{std::move(s.segs[k].text), std::move(t.segs[k].text), s.segs[k].id});
    }
    corpus.documents.push_back(std::move(d));
  }
  if (src.size() != tgt.size()) {
    const bool src_longer = src.size() > tgt.size();
    const RawDoc& extra = src_longer ? src[n] : tgt[n];
    throw InputError(located(src_longer ? sp : tp, extra.line, 0,
                             "document '" + extra.id + "' has no counterpart in " + (src_longer ? tp : sp) + " (" +
                                 std::to_string(src.size()) + " vs " + std::to_string(tgt.size()) + " documents)"));
  }
  return corpus;
}

}  // namespace

Corpus read_iwslt_train(const std::string& src_path, const std::string& tgt_path) {
  auto s = parse_train_tags(src_path);
  auto t = parse_train_tags(tgt_path);
  return align(std::move(s), std::move(t), src_path, tgt_path, false);
}

Corpus read_iwslt_xml(const std::string& src_path, const std::string& tgt_path) {
  auto s = parse_xml(src_path);
  auto t = parse_xml(tgt_path);
  return align(std::move(s), std::move(t), src_path, tgt_path, true);
}

Corpus read_iwslt(const std::string& path, const std::string& src_lang, const std::string& tgt_lang) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    for (const std::string& pair : {src_lang + "-" + tgt_lang, tgt_lang + "-" + src_lang}) {
      const std::string prefix = (fs::path(path) / ("train.tags." + pair)).string();
      if (detail::file_exists(prefix + "." + src_lang)) {
        return read_iwslt_train(prefix + "." + src_lang, prefix + "." + tgt_lang);
      }
    }
    throw InputError(located(path, 0, 0,
                             "no train.tags." + src_lang + "-" + tgt_lang + "." + src_lang + " (or train.tags." +
                                 tgt_lang + "-" + src_lang + "." + src_lang + ") in this directory"));
  }
  const std::string src_xml_suffix = "." + src_lang + ".xml";
  if (detail::ends_with(path, src_xml_suffix)) {
    const std::string prefix = path.substr(0, path.size() - src_xml_suffix.size());
    return read_iwslt_xml(path, prefix + "." + tgt_lang + ".xml");
  }
  if (detail::file_exists(path + src_xml_suffix)) {
    return read_iwslt_xml(path + src_xml_suffix, path + "." + tgt_lang + ".xml");
  }
  return read_iwslt_train(path + "." + src_lang, path + "." + tgt_lang);
}

}  // namespace mambamt::data
