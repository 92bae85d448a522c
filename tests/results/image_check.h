#pragma once
// Checks on rendered plots for the results tests: SVG well-formedness, PNG
// rendering with rsvg-convert, the PNG header, and pixel counts. Decoding PNG
// pixels needs zlib's uncompress(), loaded with dlopen so the test does not
// depend on how the project links zlib; without it the pixel checks are skipped.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mambamt::results::testing {

// "" when `xml` is well-formed (balanced tags, quoted attributes, known entities),
// else a description of the first problem.
std::string xml_problem(const std::string& xml);

// Number of non-overlapping occurrences of `needle` in `haystack`.
std::size_t count_of(const std::string& haystack, const std::string& needle);

// Whether rsvg-convert is on PATH.
bool have_rsvg_convert();
// Renders an SVG file to PNG with rsvg-convert; returns the command's exit status.
int render_png(const std::string& svg_path, const std::string& png_path);

struct PngHeader {
  bool valid = false;
  std::uint32_t width = 0;
  std::uint32_t height = 0;
  int bit_depth = 0;
  int color_type = 0;
};
PngHeader read_png_header(const std::string& path);

struct Image {
  std::uint32_t width = 0;
  std::uint32_t height = 0;
  std::vector<std::uint8_t> rgba;  // width * height * 4

  // Pixels that are not (nearly) white or transparent.
  std::size_t count_non_white() const;
  // Pixels within `tolerance` per channel of the colour "#rrggbb".
  std::size_t count_color(const std::string& hex, int tolerance = 24) const;
};
// Decodes an 8-bit RGB/RGBA non-interlaced PNG (what rsvg-convert writes);
// nullopt when zlib cannot be loaded or the format is another one.
std::optional<Image> decode_png(const std::string& path);

}  // namespace mambamt::results::testing
