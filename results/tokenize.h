#pragma once
// sacreBLEU 2.x's BLEU tokenizers, on UTF-8 strings.
#include <string>
#include <string_view>

namespace mambamt::results {

enum class Tokenizer {
  kNone,  // identity ("none")
  k13a,   // mteval-v13a.pl: XML unescaping, ASCII punctuation split ("13a", the default)
  kIntl,  // mteval-v14 international: Unicode punctuation and symbols ("intl")
  kChar,  // every non-space character is a token ("char")
};

// "none", "13a", "intl", "char" -> Tokenizer; anything else throws InputError.
Tokenizer parse_tokenizer(std::string_view name);
// The name sacreBLEU's signature uses ("none", "13a", "intl", "char").
const char* tokenizer_name(Tokenizer tokenizer);

// Tokenizes one line; tokens are separated by single spaces, with no leading or
// trailing space (except kNone, which returns the line unchanged).
std::string tokenize(std::string_view line, Tokenizer tokenizer);
std::u32string tokenize(std::u32string_view line, Tokenizer tokenizer);

}  // namespace mambamt::results
