#pragma once
// UTF-8 and the few Unicode properties the metrics need, with Python's
// semantics (sacreBLEU is Python): str.split() whitespace, str.lower(), and the
// \p{P} \p{S} \p{N} categories of the `regex` module used by the intl tokenizer.
#include <string>
#include <string_view>
#include <vector>

namespace mambamt::results {

// Decodes UTF-8. Each byte that does not start a valid sequence (truncated,
// overlong, surrogate, stray continuation byte) becomes one U+FFFD.
std::u32string decode_utf8(std::string_view text);
// Encodes code points as UTF-8 (surrogates and values above U+10FFFF become U+FFFD).
std::string encode_utf8(std::u32string_view text);
void append_utf8(std::string& out, char32_t cp);

// Coarse general category: the classes tokenizers and plots distinguish.
enum class CharClass { kPunctuation, kSymbol, kNumber, kOther };
CharClass char_class(char32_t cp);
inline bool is_punctuation(char32_t cp) { return char_class(cp) == CharClass::kPunctuation; }
inline bool is_symbol(char32_t cp) { return char_class(cp) == CharClass::kSymbol; }
inline bool is_number(char32_t cp) { return char_class(cp) == CharClass::kNumber; }

// Python's str.isspace(): what str.split() with no argument splits on.
bool is_space(char32_t cp);

// Python's str.lower(): full mappings (U+0130 becomes "i̇") and the Final_Sigma
// rule for U+03A3.
std::u32string to_lower(std::u32string_view text);
std::string to_lower(std::string_view utf8);

// Python's str.split() with no argument: runs of whitespace separate, no empty parts.
std::vector<std::u32string> split_whitespace(std::u32string_view text);
std::vector<std::string> split_whitespace(std::string_view utf8);
// Python's str.rstrip() with no argument.
std::u32string_view rstrip(std::u32string_view text);

// Number of code points of valid UTF-8 (invalid bytes count one each).
std::size_t utf8_length(std::string_view text);

}  // namespace mambamt::results
