#pragma once
// The regular-expression rewrites of sacreBLEU's tokenizers (13a, intl; the
// tercom normalisation of TER), written as passes over code points. Internal
// to results/.
#include <string>
#include <string_view>

#include "results/unicode.h"

namespace mambamt::results::detail {

// s.replace(from, to), left to right.
inline void replace_all(std::u32string& s, std::u32string_view from, std::u32string_view to) {
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

// re.sub(r'A', '') for a single-character class A.
template <typename Pred>
std::u32string remove_chars(std::u32string_view s, Pred pred) {
  std::u32string out;
  for (char32_t c : s) {
    if (!pred(c)) out.push_back(c);
  }
  return out;
}

// Python's ' '.join(s.split()).
inline std::u32string join_words(std::u32string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (const auto& w : split_whitespace(s)) {
    if (!out.empty()) out.push_back(U' ');
    out += w;
  }
  return out;
}

inline bool is_digit(char32_t c) { return c >= U'0' && c <= U'9'; }
inline bool is_period_or_comma(char32_t c) { return c == U'.' || c == U','; }

// The ASCII class [\{-\~\[-\` -\&\(-\+\:-\@\/] of mteval-v13a (and of
// tercom's western normalisation): everything printable except letters,
// digits, ' , - .
inline bool is_13a_punct(char32_t c) {
  return (c >= U'{' && c <= U'~') || (c >= U'[' && c <= U'`') || (c >= U' ' && c <= U'&') ||
         (c >= U'(' && c <= U'+') || (c >= U':' && c <= U'@') || c == U'/';
}

}  // namespace mambamt::results::detail
