#include "results/unicode.h"

#include <algorithm>

#include "results/detail/unicode_tables.h"

namespace mambamt::results {
namespace {

constexpr char32_t kReplacement = 0xFFFD;

// Class letter of the range holding cp, or 0.
char lookup(const detail::CategoryRange* table, std::size_t count, char32_t cp) {
  const detail::CategoryRange* end = table + count;
  const auto* it = std::upper_bound(table, end, cp, [](char32_t c, const detail::CategoryRange& r) {
    return c < r.first;
  });
  if (it == table) return 0;
  --it;
  return cp <= it->last ? it->cls : 0;
}

char32_t lower_simple(char32_t cp) {
  if (cp < 0x80) return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
  const detail::LowerRun* table = detail::kLowerRuns;
  const detail::LowerRun* end = table + detail::kLowerRunCount;
  const auto* it = std::upper_bound(table, end, cp, [](char32_t c, const detail::LowerRun& r) {
    return c < r.first;
  });
  if (it == table) return cp;
  --it;
  if (cp > it->last || (cp - it->first) % it->stride != 0) return cp;
  return static_cast<char32_t>(static_cast<std::int64_t>(cp) + it->delta);
}

char sigma_class(char32_t cp) {
  return lookup(detail::kSigmaClassRanges, detail::kSigmaClassRangeCount, cp);
}

// Python's handle_capital_sigma: U+03A3 at i is final when a cased letter
// precedes it and none follows (case-ignorable characters skipped both ways).
bool is_final_sigma(std::u32string_view s, std::size_t i) {
  std::size_t j = i;
  char before = 0;
  while (j > 0) {
    --j;
    before = sigma_class(s[j]);
    if (before != 'I') break;
  }
  if (before != 'C') return false;
  for (std::size_t k = i + 1; k < s.size(); ++k) {
    char after = sigma_class(s[k]);
    if (after != 'I') return after != 'C';
  }
  return true;
}

}  // namespace

void append_utf8(std::string& out, char32_t cp) {
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = kReplacement;
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::u32string decode_utf8(std::string_view text) {
  std::u32string out;
  out.reserve(text.size());
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  std::size_t i = 0;
  while (i < n) {
    unsigned char b = s[i];
    if (b < 0x80) {
      out.push_back(b);
      ++i;
      continue;
    }
    int len = 0;
    char32_t cp = 0;
    char32_t min = 0;
    if (b >= 0xC2 && b <= 0xDF) {
      len = 2, cp = b & 0x1F, min = 0x80;
    } else if (b >= 0xE0 && b <= 0xEF) {
      len = 3, cp = b & 0x0F, min = 0x800;
    } else if (b >= 0xF0 && b <= 0xF4) {
      len = 4, cp = b & 0x07, min = 0x10000;
    }
    bool ok = len > 0 && i + len <= n;
    for (int k = 1; ok && k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) ok = false;
      else cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    if (ok && (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))) ok = false;
    if (ok) {
      out.push_back(cp);
      i += len;
    } else {
      out.push_back(kReplacement);
      ++i;
    }
  }
  return out;
}

std::string encode_utf8(std::u32string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t cp : text) append_utf8(out, cp);
  return out;
}

CharClass char_class(char32_t cp) {
  switch (lookup(detail::kCategoryRanges, detail::kCategoryRangeCount, cp)) {
    case 'P': return CharClass::kPunctuation;
    case 'S': return CharClass::kSymbol;
    case 'N': return CharClass::kNumber;
    default: return CharClass::kOther;
  }
}

bool is_space(char32_t cp) {
  if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F);
  if (cp < 0x85) return false;
  switch (cp) {
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F:
    case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

std::u32string to_lower(std::u32string_view text) {
  std::u32string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    char32_t cp = text[i];
    if (cp == 0x130) {
      out.push_back(U'i');
      out.push_back(0x307);  // COMBINING DOT ABOVE
    } else if (cp == 0x3A3) {
      out.push_back(is_final_sigma(text, i) ? 0x3C2 : 0x3C3);
    } else {
      out.push_back(lower_simple(cp));
    }
  }
  return out;
}

std::string to_lower(std::string_view utf8) {
  bool ascii = std::all_of(utf8.begin(), utf8.end(), [](char c) { return (c & 0x80) == 0; });
  if (ascii) {
    std::string out(utf8);
    for (char& c : out) {
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
    }
    return out;
  }
  return encode_utf8(to_lower(decode_utf8(utf8)));
}

std::vector<std::u32string> split_whitespace(std::u32string_view text) {
  std::vector<std::u32string> out;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && is_space(text[i])) ++i;
    std::size_t start = i;
    while (i < text.size() && !is_space(text[i])) ++i;
    if (i > start) out.emplace_back(text.substr(start, i - start));
  }
  return out;
}

std::vector<std::string> split_whitespace(std::string_view utf8) {
  std::vector<std::string> out;
  for (const auto& w : split_whitespace(decode_utf8(utf8))) out.push_back(encode_utf8(w));
  return out;
}

std::u32string_view rstrip(std::u32string_view text) {
  std::size_t n = text.size();
  while (n > 0 && is_space(text[n - 1])) --n;
  return text.substr(0, n);
}

std::size_t utf8_length(std::string_view text) { return decode_utf8(text).size(); }

}  // namespace mambamt::results
