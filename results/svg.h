#pragma once
// Building blocks of the SVG plots (plot.h): XML escaping, a small element
// writer, text width estimates, nice axis ticks, colours. Plain C++, no external
// libraries; the output renders with librsvg (rsvg-convert) and browsers.
#include <string>
#include <string_view>
#include <vector>

namespace mambamt::results::svg {

// Escapes text for XML content and attribute values: & < > " ' become entities,
// invalid UTF-8 and characters XML 1.0 forbids (C0 controls except tab, newline,
// carriage return; U+FFFE, U+FFFF) become U+FFFD.
std::string escape(std::string_view text);

// Approximate rendered width of a UTF-8 string in a sans-serif font of size
// `font_size` (wide East Asian characters count a full em, combining marks none).
double text_width(std::string_view text, double font_size);

// Coordinates with at most two decimals and no trailing zeros ("12.5", "3").
std::string num(double value);

// Tick positions covering [lo, hi] in steps of 1, 2, 2.5 or 5 times a power of
// ten, at most about `max_ticks` of them, first <= lo and last >= hi.
std::vector<double> nice_ticks(double lo, double hi, int max_ticks = 7);
// Decade ticks (1, 10, 100, ...) covering [lo, hi] (both > 0), with 2x and 5x
// ticks added when the range spans fewer than three decades.
std::vector<double> log_ticks(double lo, double hi);
// A tick label: as many decimals as the tick step needs; 1e+06-style for very
// large or small magnitudes.
std::string tick_label(double value, double step);

// Categorical colours (Okabe-Ito, colour-blind safe), cycling.
const char* series_color(std::size_t index);
// Viridis colour for t in [0, 1] as "#rrggbb".
std::string viridis(double t);
// Diverging blue-white-red colour for t in [0, 1] (0.5 is white), for signed
// values such as occlusion effects.
std::string diverging(double t);
// Relative luminance of a "#rrggbb" colour (0 black .. 1 white).
double luminance(std::string_view hex_color);

// Writes an SVG document to `path` atomically (temporary file + rename),
// creating missing parent directories.
void write_file(const std::string& path, const std::string& svg);

// Appends SVG elements to a string. Attribute strings are written verbatim, so
// callers pass already-escaped values (escape()) for user text.
class Writer {
 public:
  Writer(double width, double height, std::string_view font_family, double font_size);

  // <tag attrs/> and <tag attrs>...</tag>.
  void element(std::string_view tag, std::string_view attrs);
  void open(std::string_view tag, std::string_view attrs = {});
  void close(std::string_view tag);
  // <text x y attrs>escaped content</text>.
  void text(double x, double y, std::string_view content, std::string_view attrs = {});
  void raw(std::string_view markup);

  // The finished document (closes the root element).
  std::string finish();

 private:
  std::string out_;
  int depth_ = 1;
};

}  // namespace mambamt::results::svg
