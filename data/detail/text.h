#pragma once
// Text helpers shared by the readers and writers of data/: line reading with
// UTF-8 checks, trimming, splitting, atomic file writes, hashing.
#include <cstdint>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

namespace mambamt::data::detail {

// Byte offset of the first invalid UTF-8 sequence in s, or npos when s is valid
// (overlong forms, surrogates and code points above U+10FFFF are invalid).
size_t utf8_invalid_at(std::string_view s);

// Reads a text file line by line. Strips a trailing '\r' and a UTF-8 byte order
// mark on the first line, and throws InputError naming file:line:col on invalid
// UTF-8. Line numbers are 1-based.
class LineReader {
 public:
  explicit LineReader(const std::string& path);
  // Reads the next line into `line`; false at end of file.
  bool next(std::string& line);
  long line_number() const { return line_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::ifstream in_;
  long line_ = 0;
};

// The string without leading and trailing ASCII whitespace.
std::string_view trim(std::string_view s);

// Splits on one character; keeps empty fields.
std::vector<std::string_view> split(std::string_view s, char sep);

// Splits on runs of ' '; no empty fields.
std::vector<std::string_view> split_words(std::string_view s);

bool starts_with(std::string_view s, std::string_view prefix);
bool ends_with(std::string_view s, std::string_view suffix);

// Writes `content` to `path` through a temporary file in the same directory and
// a rename, so readers (and processes racing to write the same file) see either
// the old or the whole new file, never a partial one. Creates parent folders.
void write_file_atomic(const std::string& path, const std::string& content);

bool file_exists(const std::string& path);

// 64-bit FNV-1a, for fingerprints of options and training text.
uint64_t fnv1a(std::string_view s, uint64_t h = 0xcbf29ce484222325ULL);

std::string hex64(uint64_t v);

}  // namespace mambamt::data::detail
