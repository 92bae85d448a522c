#include "results/tokenize.h"

#include "core/error.h"
#include "results/unicode.h"

namespace mambamt::results {
namespace {

// Python's ' '.join(s.split()).
std::u32string join_words(std::u32string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (const auto& w : split_whitespace(s)) {
    if (!out.empty()) out.push_back(U' ');
    out += w;
  }
  return out;
}

void replace_all(std::u32string& s, std::u32string_view from, std::u32string_view to) {
  std::size_t pos = 0;
  while ((pos = s.find(from, pos)) != std::u32string::npos) {
    s.replace(pos, from.size(), to);
    pos += to.size();
  }
}

// re.sub(r'(A)(B)', repl) for single-character classes A and B: matches are
// found left to right and never overlap, so "a.." splits only the first period.
// The replacement is "\1 \2 " (kAfter) or " \1 \2" (kBefore).
enum class Spaces { kAfter, kBefore };
template <typename First, typename Second>
std::u32string sub_pair(std::u32string_view s, First first, Second second, Spaces spaces) {
  std::u32string out;
  out.reserve(s.size() + s.size() / 4);
  std::size_t i = 0;
  while (i < s.size()) {
    if (i + 1 < s.size() && first(s[i]) && second(s[i + 1])) {
      if (spaces == Spaces::kBefore) out.push_back(U' ');
      out.push_back(s[i]);
      out.push_back(U' ');
      out.push_back(s[i + 1]);
      if (spaces == Spaces::kAfter) out.push_back(U' ');
      i += 2;
    } else {
      out.push_back(s[i]);
      ++i;
    }
  }
  return out;
}

// re.sub(r'(A)', r' \1 ') for a single-character class A.
template <typename Pred>
std::u32string pad_chars(std::u32string_view s, Pred pred) {
  std::u32string out;
  out.reserve(s.size() + s.size() / 4);
  for (char32_t c : s) {
    if (pred(c)) {
      out.push_back(U' ');
      out.push_back(c);
      out.push_back(U' ');
    } else {
      out.push_back(c);
    }
  }
  return out;
}

bool is_digit(char32_t c) { return c >= U'0' && c <= U'9'; }
bool is_period_or_comma(char32_t c) { return c == U'.' || c == U','; }

// The ASCII class [\{-\~\[-\` -\&\(-\+\:-\@\/] of mteval-v13a: everything
// printable except letters, digits, ' , - .
bool is_13a_punct(char32_t c) {
  return (c >= U'{' && c <= U'~') || (c >= U'[' && c <= U'`') || (c >= U' ' && c <= U'&') ||
         (c >= U'(' && c <= U'+') || (c >= U':' && c <= U'@') || c == U'/';
}

std::u32string tokenize_13a(std::u32string_view line) {
  std::u32string s(line);
  replace_all(s, U"<skipped>", U"");
  replace_all(s, U"-\n", U"");
  replace_all(s, U"\n", U" ");
  if (s.find(U'&') != std::u32string::npos) {
    replace_all(s, U"&quot;", U"\"");
    replace_all(s, U"&amp;", U"&");
    replace_all(s, U"&lt;", U"<");
    replace_all(s, U"&gt;", U">");
  }
  s = U" " + s + U" ";
  s = pad_chars(s, is_13a_punct);
  auto not_digit = [](char32_t c) { return !is_digit(c); };
  s = sub_pair(s, not_digit, is_period_or_comma, Spaces::kAfter);
  s = sub_pair(s, is_period_or_comma, not_digit, Spaces::kBefore);
  s = sub_pair(s, is_digit, [](char32_t c) { return c == U'-'; }, Spaces::kAfter);
  return join_words(s);
}

std::u32string tokenize_intl(std::u32string_view line) {
  auto not_number = [](char32_t c) { return !is_number(c); };
  auto punct = [](char32_t c) { return is_punctuation(c); };
  std::u32string s = sub_pair(line, not_number, punct, Spaces::kAfter);
  s = sub_pair(s, punct, not_number, Spaces::kBefore);
  s = pad_chars(s, [](char32_t c) { return is_symbol(c); });
  return join_words(s);
}

std::u32string tokenize_char(std::u32string_view line) {
  std::u32string out;
  out.reserve(line.size() * 2);
  for (char32_t c : line) {
    if (is_space(c)) continue;
    if (!out.empty()) out.push_back(U' ');
    out.push_back(c);
  }
  return out;
}

}  // namespace

Tokenizer parse_tokenizer(std::string_view name) {
  if (name == "none") return Tokenizer::kNone;
  if (name == "13a") return Tokenizer::k13a;
  if (name == "intl") return Tokenizer::kIntl;
  if (name == "char") return Tokenizer::kChar;
  throw InputError("unknown BLEU tokenizer '" + std::string(name) +
                   "' (known: none, 13a, intl, char)");
}

const char* tokenizer_name(Tokenizer tokenizer) {
  switch (tokenizer) {
    case Tokenizer::kNone: return "none";
    case Tokenizer::k13a: return "13a";
    case Tokenizer::kIntl: return "intl";
    case Tokenizer::kChar: return "char";
  }
  return "?";
}

std::u32string tokenize(std::u32string_view line, Tokenizer tokenizer) {
  switch (tokenizer) {
    case Tokenizer::kNone: return std::u32string(line);
    case Tokenizer::k13a: return tokenize_13a(line);
    case Tokenizer::kIntl: return tokenize_intl(line);
    case Tokenizer::kChar: return tokenize_char(line);
  }
  return std::u32string(line);
}

std::string tokenize(std::string_view line, Tokenizer tokenizer) {
  if (tokenizer == Tokenizer::kNone) return std::string(line);
  return encode_utf8(tokenize(decode_utf8(line), tokenizer));
}

}  // namespace mambamt::results
