#include "results/svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "results/unicode.h"

namespace mambamt::results::svg {

std::string escape(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 8);
  for (char32_t c : decode_utf8(text)) {
    switch (c) {
      case U'&': out += "&amp;"; break;
      case U'<': out += "&lt;"; break;
      case U'>': out += "&gt;"; break;
      case U'"': out += "&quot;"; break;
      case U'\'': out += "&#39;"; break;
      default:
        if ((c < 0x20 && c != U'\t' && c != U'\n' && c != U'\r') || c == 0xFFFE || c == 0xFFFF) {
          c = 0xFFFD;
        }
        append_utf8(out, c);
    }
  }
  return out;
}

double text_width(std::string_view text, double font_size) {
  double em = 0;
  for (char32_t c : decode_utf8(text)) {
    if (c >= 0x300 && c <= 0x36F) continue;  // combining marks
    const bool wide = (c >= 0x1100 && c <= 0x115F) || (c >= 0x2E80 && c <= 0xA4CF) ||
                      (c >= 0xAC00 && c <= 0xD7A3) || (c >= 0xF900 && c <= 0xFAFF) ||
                      (c >= 0xFE30 && c <= 0xFE4F) || (c >= 0xFF00 && c <= 0xFF60) ||
                      (c >= 0xFFE0 && c <= 0xFFE6) || c >= 0x20000;
    if (wide) em += 1.0;
    else if (c == U'i' || c == U'l' || c == U'.' || c == U',' || c == U'\'' || c == U' ') em += 0.3;
    else if (c >= U'A' && c <= U'Z') em += 0.68;
    else em += 0.58;
  }
  return em * font_size;
}

std::string num(double value) {
  if (!std::isfinite(value)) return "0";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f", value);
  std::string s = buf;
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  if (s == "-0") s = "0";
  return s;
}

std::vector<double> nice_ticks(double lo, double hi, int max_ticks) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) return {};
  if (hi < lo) std::swap(lo, hi);
  if (hi == lo) {
    const double pad = lo == 0 ? 1.0 : std::fabs(lo) * 0.1;
    lo -= pad;
    hi += pad;
  }
  max_ticks = std::max(max_ticks, 2);
  const double raw = (hi - lo) / (max_ticks - 1);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag * 10;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (m * mag >= raw * (1 - 1e-9)) {
      step = m * mag;
      break;
    }
  }
  const double first = std::floor(lo / step + 1e-9) * step;
  const double last = std::ceil(hi / step - 1e-9) * step;
  std::vector<double> ticks;
  for (int k = 0;; ++k) {
    double t = first + k * step;
    if (std::fabs(t) < step * 1e-9) t = 0;  // no "-0"
    ticks.push_back(t);
    if (t >= last - step * 1e-9 || k > 1000) break;
  }
  return ticks;
}

std::vector<double> log_ticks(double lo, double hi) {
  if (!(lo > 0) || !(hi > 0) || !std::isfinite(lo) || !std::isfinite(hi)) return {};
  if (hi < lo) std::swap(lo, hi);
  const int d0 = static_cast<int>(std::floor(std::log10(lo) + 1e-9));
  int d1 = static_cast<int>(std::ceil(std::log10(hi) - 1e-9));
  if (d1 == d0) ++d1;
  const int decades = d1 - d0;
  const int every = std::max(1, (decades + 7) / 8);  // at most ~8 decade ticks
  std::vector<double> ticks;
  for (int d = d0; d <= d1; ++d) {
    if ((d - d0) % every != 0 && d != d1) continue;
    const double base = std::pow(10.0, d);
    ticks.push_back(base);
    if (decades < 3 && d < d1) {
      ticks.push_back(2 * base);
      ticks.push_back(5 * base);
    }
  }
  return ticks;
}

std::string tick_label(double value, double step) {
  char buf[64];
  const double mag = std::fabs(value);
  if (value != 0 && (mag >= 1e6 || mag < 1e-4)) {
    std::snprintf(buf, sizeof buf, "%.3g", value);
    return buf;
  }
  int decimals = 0;
  if (step > 0 && std::isfinite(step)) {
    decimals = std::max(0, static_cast<int>(-std::floor(std::log10(step) + 1e-9)));
    // 2.5 x 10^k needs one more decimal than its power of ten.
    const double scaled = step * std::pow(10.0, decimals);
    if (std::fabs(scaled - std::round(scaled)) > 1e-6) ++decimals;
    decimals = std::min(decimals, 6);
  }
  std::snprintf(buf, sizeof buf, "%.*f", decimals, value);
  std::string s = buf;
  if (s.find_first_not_of("-0.") == std::string::npos) s = decimals ? "0." + std::string(decimals, '0') : "0";
  return s;
}

const char* series_color(std::size_t index) {
  static const char* const kPalette[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                         "#E69F00", "#56B4E9", "#000000", "#999933"};
  return kPalette[index % (sizeof kPalette / sizeof kPalette[0])];
}

std::string viridis(double t) {
  // Viridis sampled at 9 points; linear interpolation between them.
  static const double kStops[9][3] = {
      {68, 1, 84},    {71, 44, 122},  {59, 81, 139},   {44, 113, 142}, {33, 144, 141},
      {39, 173, 129}, {92, 200, 99},  {170, 220, 50},  {253, 231, 37}};
  if (!std::isfinite(t)) t = 0;
  t = std::clamp(t, 0.0, 1.0) * 8;
  const int k = std::min(static_cast<int>(t), 7);
  const double f = t - k;
  char buf[8];
  int rgb[3];
  for (int c = 0; c < 3; ++c) {
    rgb[c] = static_cast<int>(std::lround(kStops[k][c] + f * (kStops[k + 1][c] - kStops[k][c])));
  }
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", rgb[0], rgb[1], rgb[2]);
  return buf;
}

std::string diverging(double t) {
  // Blue (#2166ac) through white to red (#b2182b), as in ColorBrewer's RdBu.
  static const double kStops[5][3] = {
      {33, 102, 172}, {146, 197, 222}, {247, 247, 247}, {244, 165, 130}, {178, 24, 43}};
  if (!std::isfinite(t)) t = 0.5;
  t = std::clamp(t, 0.0, 1.0) * 4;
  const int k = std::min(static_cast<int>(t), 3);
  const double f = t - k;
  char buf[8];
  int rgb[3];
  for (int c = 0; c < 3; ++c) {
    rgb[c] = static_cast<int>(std::lround(kStops[k][c] + f * (kStops[k + 1][c] - kStops[k][c])));
  }
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", rgb[0], rgb[1], rgb[2]);
  return buf;
}

double luminance(std::string_view hex) {
  if (hex.size() != 7 || hex[0] != '#') return 0;
  auto channel = [&](int k) {
    const double v = std::stoi(std::string(hex.substr(1 + 2 * k, 2)), nullptr, 16) / 255.0;
    return v <= 0.03928 ? v / 12.92 : std::pow((v + 0.055) / 1.055, 2.4);
  };
  return 0.2126 * channel(0) + 0.7152 * channel(1) + 0.0722 * channel(2);
}

void write_file(const std::string& path, const std::string& svg) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  std::error_code ec;
  if (target.has_parent_path()) fs::create_directories(target.parent_path(), ec);
  fs::path tmp = target;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error(tmp.string() + ": cannot open for writing");
    out << svg;
    out.flush();
    if (!out) throw Error(tmp.string() + ": write failed");
  }
  fs::rename(tmp, target, ec);
  if (ec) throw Error("cannot rename " + tmp.string() + " to " + path + ": " + ec.message());
}

Writer::Writer(double width, double height, std::string_view font_family, double font_size) {
  out_ = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out_ += "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"" + num(width) +
          "\" height=\"" + num(height) + "\" viewBox=\"0 0 " + num(width) + " " + num(height) +
          "\" font-family=\"" + escape(font_family) + "\" font-size=\"" + num(font_size) + "\">\n";
}

void Writer::element(std::string_view tag, std::string_view attrs) {
  out_.append(static_cast<std::size_t>(depth_ * 2), ' ');
  out_ += "<";
  out_ += tag;
  if (!attrs.empty()) {
    out_ += ' ';
    out_ += attrs;
  }
  out_ += "/>\n";
}

void Writer::open(std::string_view tag, std::string_view attrs) {
  out_.append(static_cast<std::size_t>(depth_ * 2), ' ');
  out_ += "<";
  out_ += tag;
  if (!attrs.empty()) {
    out_ += ' ';
    out_ += attrs;
  }
  out_ += ">\n";
  ++depth_;
}

void Writer::close(std::string_view tag) {
  --depth_;
  out_.append(static_cast<std::size_t>(depth_ * 2), ' ');
  out_ += "</";
  out_ += tag;
  out_ += ">\n";
}

void Writer::text(double x, double y, std::string_view content, std::string_view attrs) {
  out_.append(static_cast<std::size_t>(depth_ * 2), ' ');
  out_ += "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\"";
  if (!attrs.empty()) {
    out_ += ' ';
    out_ += attrs;
  }
  out_ += ">" + escape(content) + "</text>\n";
}

void Writer::raw(std::string_view markup) {
  out_.append(static_cast<std::size_t>(depth_ * 2), ' ');
  out_ += markup;
  out_ += '\n';
}

std::string Writer::finish() {
  out_ += "</svg>\n";
  return std::move(out_);
}

}  // namespace mambamt::results::svg
