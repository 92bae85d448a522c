#include "results/tokenize.h"

#include "core/error.h"
#include "results/detail/rewrite.h"
#include "results/unicode.h"

namespace mambamt::results {
namespace {

using detail::is_13a_punct;
using detail::is_digit;
using detail::is_period_or_comma;
using detail::join_words;
using detail::pad_chars;
using detail::replace_all;
using detail::Spaces;
using detail::sub_pair;

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
