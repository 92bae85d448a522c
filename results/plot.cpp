#include "results/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "core/error.h"
#include "results/svg.h"

namespace mambamt::results {
namespace {

using svg::escape;
using svg::num;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

bool usable(double v, bool log) { return std::isfinite(v) && (!log || v > 0); }

std::string attr(const char* name, const std::string& value) {
  return std::string(name) + "=\"" + value + "\"";
}

// An axis resolved from options and data: range, ticks and pixel mapping.
struct Axis {
  bool log = false;
  double lo = 0, hi = 1;
  std::vector<double> ticks;
  std::vector<std::string> labels;  // one per tick
  double p0 = 0, p1 = 1;            // pixels of lo and hi

  double map(double v) const {
    const double a = log ? std::log10(lo) : lo;
    const double b = log ? std::log10(hi) : hi;
    const double t = log ? std::log10(v) : v;
    return p0 + (t - a) / (b - a) * (p1 - p0);
  }
  double max_label_width(double font_size) const {
    double w = 0;
    for (const auto& l : labels) w = std::max(w, svg::text_width(l, font_size));
    return w;
  }
};

Axis resolve_axis(const AxisOptions& o, const std::vector<double>& values, bool include_zero,
                  const std::string& which) {
  Axis a;
  a.log = o.log_scale;
  if (o.min && o.max && !(*o.min < *o.max)) {
    throw InputError(which + " axis: min must be below max");
  }
  if (a.log && ((o.min && !(*o.min > 0)) || (o.max && !(*o.max > 0)))) {
    throw InputError(which + " axis: a log scale needs a positive range");
  }
  double lo = kInf, hi = -kInf;
  for (double v : values) {
    if (!usable(v, a.log)) continue;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  if (include_zero && !a.log && lo <= hi) {
    lo = std::min(lo, 0.0);
    hi = std::max(hi, 0.0);
  }
  if (o.min) lo = *o.min;
  if (o.max) hi = *o.max;
  if (!(lo <= hi)) {  // no data
    lo = a.log ? 1 : 0;
    hi = a.log ? 10 : 1;
    if (o.min) hi = a.log ? lo * 10 : lo + 1;
    if (o.max) lo = a.log ? hi / 10 : hi - 1;
  }
  if (a.log) {
    // Widen to the nearest 1, 2 or 5 times a power of ten, not to whole decades.
    auto nice_below = [](double v) {
      const double p = std::pow(10.0, std::floor(std::log10(v) + 1e-9));
      for (double m : {5.0, 2.0, 1.0}) {
        if (m * p <= v * (1 + 1e-9)) return m * p;
      }
      return p;
    };
    auto nice_above = [](double v) {
      const double p = std::pow(10.0, std::floor(std::log10(v) - 1e-9));
      for (double m : {1.0, 2.0, 5.0, 10.0}) {
        if (m * p >= v * (1 - 1e-9)) return m * p;
      }
      return 10 * p;
    };
    if (!o.min) lo = nice_below(lo);
    if (!o.max) hi = nice_above(hi);
    if (hi == lo) hi = lo * 10;
    a.ticks = svg::log_ticks(lo, hi);
  } else {
    a.ticks = svg::nice_ticks(lo, hi);
    if (!o.min) lo = std::min(lo, a.ticks.front());
    if (!o.max) hi = std::max(hi, a.ticks.back());
    if (hi == lo) {
      lo -= 1;
      hi += 1;
    }
  }
  a.lo = lo;
  a.hi = hi;
  const double eps = (a.log ? 1e-9 * hi : 1e-9 * (hi - lo));
  a.ticks.erase(std::remove_if(a.ticks.begin(), a.ticks.end(),
                               [&](double t) { return t < lo - eps || t > hi + eps; }),
                a.ticks.end());
  const double step = a.ticks.size() >= 2 ? a.ticks[1] - a.ticks[0] : (hi - lo);
  for (double t : a.ticks) a.labels.push_back(svg::tick_label(t, a.log ? t : step));
  return a;
}

// A categorical axis: positions 0..n-1 within [-0.5, n-0.5].
Axis category_axis(const std::vector<std::string>& categories) {
  Axis a;
  a.lo = -0.5;
  a.hi = static_cast<double>(std::max<std::size_t>(categories.size(), 1)) - 0.5;
  for (std::size_t k = 0; k < categories.size(); ++k) {
    a.ticks.push_back(static_cast<double>(k));
    a.labels.push_back(categories[k]);
  }
  return a;
}

struct LegendEntry {
  std::string name;
  std::string color;
  int marker = -1;  // shape index, -1 for none
  bool line = true;
  bool dashed = false;
  std::string cls = "legend-entry";
};

// Marker shapes cycle with the series so plots still read in black and white.
void draw_marker(svg::Writer& w, int shape, double x, double y, double r, const std::string& color,
                 const std::string& cls) {
  const std::string common = attr("class", cls) + " " + attr("fill", color) +
                             " stroke=\"#ffffff\" stroke-width=\"0.8\"";
  switch (shape % 4) {
    case 0:
      w.element("circle", attr("cx", num(x)) + " " + attr("cy", num(y)) + " " + attr("r", num(r)) +
                              " " + common);
      break;
    case 1:
      w.element("rect", attr("x", num(x - r * 0.9)) + " " + attr("y", num(y - r * 0.9)) + " " +
                            attr("width", num(r * 1.8)) + " " + attr("height", num(r * 1.8)) + " " +
                            common);
      break;
    case 2:
      w.element("path", attr("d", "M" + num(x) + " " + num(y - r * 1.15) + " L" + num(x + r * 1.05) +
                                      " " + num(y + r * 0.8) + " L" + num(x - r * 1.05) + " " +
                                      num(y + r * 0.8) + " Z") +
                            " " + common);
      break;
    default:
      w.element("path", attr("d", "M" + num(x) + " " + num(y - r * 1.2) + " L" + num(x + r * 1.1) +
                                      " " + num(y) + " L" + num(x) + " " + num(y + r * 1.2) + " L" +
                                      num(x - r * 1.1) + " " + num(y) + " Z") +
                            " " + common);
  }
}

void draw_cross(svg::Writer& w, double x, double y, double r, const std::string& color,
                const std::string& cls = "missing") {
  w.element("path", attr("class", cls) + " " +
                        attr("d", "M" + num(x - r) + " " + num(y - r) + " L" + num(x + r) + " " +
                                      num(y + r) + " M" + num(x - r) + " " + num(y + r) + " L" +
                                      num(x + r) + " " + num(y - r)) +
                        " " + attr("stroke", color) + " stroke-width=\"1.6\" fill=\"none\"");
}

// Margins and the plot area of an x/y chart.
struct Frame {
  double left = 0, top = 0, right = 0, bottom = 0;  // plot area edges in pixels
};

double legend_width(const std::vector<LegendEntry>& entries, double font_size) {
  if (entries.empty()) return 0;
  double w = 0;
  for (const auto& e : entries) w = std::max(w, svg::text_width(e.name, font_size * 0.9));
  return 16 + 30 + w + 10;
}

void draw_legend(svg::Writer& w, const std::vector<LegendEntry>& entries, double x, double y,
                 double font_size) {
  if (entries.empty()) return;
  w.open("g", "class=\"legend\"");
  const double row = font_size * 1.5;
  for (std::size_t k = 0; k < entries.size(); ++k) {
    const auto& e = entries[k];
    const double cy = y + row * (static_cast<double>(k) + 0.5);
    w.open("g", attr("class", e.cls) + " " + attr("data-name", escape(e.name)));
    if (e.line) {
      w.element("line", attr("x1", num(x)) + " " + attr("y1", num(cy)) + " " + attr("x2", num(x + 24)) +
                            " " + attr("y2", num(cy)) + " " + attr("stroke", e.color) +
                            " stroke-width=\"2\"" + (e.dashed ? " stroke-dasharray=\"5,3\"" : ""));
    }
    if (e.marker >= 0) draw_marker(w, e.marker, x + 12, cy, 4, e.color, "legend-marker");
    if (e.cls == "legend-missing") draw_cross(w, x + 12, cy, 4, e.color, "legend-marker");
    w.text(x + 30, cy, e.name, "dominant-baseline=\"central\" " + attr("font-size", num(font_size * 0.9)));
    w.close("g");
  }
  w.close("g");
}

void draw_title(svg::Writer& w, const PlotLayout& layout, double width) {
  if (layout.title.empty()) return;
  w.text(width / 2, 12 + layout.font_size * 1.15, layout.title,
         "class=\"title\" text-anchor=\"middle\" font-weight=\"bold\" " +
             attr("font-size", num(layout.font_size * 1.15)));
}

double title_height(const PlotLayout& layout) {
  return layout.title.empty() ? 14 : 20 + layout.font_size * 1.15 + 8;
}

// Background, grid, axes, tick labels and the y axis title of an x/y chart (the
// caller places the x title below its tick labels, which may be rotated).
void draw_axes(svg::Writer& w, const Frame& f, const Axis& x, const Axis& y, const std::string& y_label,
               double font_size, bool x_grid, double x_label_angle, double y_label_x) {
  const double tick_font = font_size * 0.85;
  w.element("rect", attr("x", num(f.left)) + " " + attr("y", num(f.top)) + " " +
                        attr("width", num(f.right - f.left)) + " " + attr("height", num(f.bottom - f.top)) +
                        " class=\"plot-area\" fill=\"#ffffff\" stroke=\"none\"");
  w.open("g", "class=\"grid\" stroke=\"#e3e3e3\" stroke-width=\"1\"");
  for (double t : y.ticks) {
    const double py = y.map(t);
    w.element("line", attr("x1", num(f.left)) + " " + attr("y1", num(py)) + " " + attr("x2", num(f.right)) +
                          " " + attr("y2", num(py)));
  }
  if (x_grid) {
    for (double t : x.ticks) {
      const double px = x.map(t);
      w.element("line", attr("x1", num(px)) + " " + attr("y1", num(f.top)) + " " + attr("x2", num(px)) +
                            " " + attr("y2", num(f.bottom)));
    }
  }
  w.close("g");

  w.open("g", "class=\"axis x\"");
  w.element("line", attr("x1", num(f.left)) + " " + attr("y1", num(f.bottom)) + " " + attr("x2", num(f.right)) +
                        " " + attr("y2", num(f.bottom)) + " stroke=\"#333333\"");
  for (std::size_t k = 0; k < x.ticks.size(); ++k) {
    const double px = x.map(x.ticks[k]);
    w.element("line", attr("x1", num(px)) + " " + attr("y1", num(f.bottom)) + " " + attr("x2", num(px)) +
                          " " + attr("y2", num(f.bottom + 4)) + " stroke=\"#333333\"");
    const double ty = f.bottom + 6 + tick_font;
    if (x_label_angle != 0) {
      w.text(px, f.bottom + 10, x.labels[k],
             "class=\"tick\" text-anchor=\"end\" " + attr("font-size", num(tick_font)) + " " +
                 attr("transform", "rotate(" + num(x_label_angle) + " " + num(px) + " " + num(f.bottom + 10) + ")"));
    } else {
      w.text(px, ty, x.labels[k], "class=\"tick\" text-anchor=\"middle\" " + attr("font-size", num(tick_font)));
    }
  }
  w.close("g");

  w.open("g", "class=\"axis y\"");
  w.element("line", attr("x1", num(f.left)) + " " + attr("y1", num(f.top)) + " " + attr("x2", num(f.left)) +
                        " " + attr("y2", num(f.bottom)) + " stroke=\"#333333\"");
  for (std::size_t k = 0; k < y.ticks.size(); ++k) {
    const double py = y.map(y.ticks[k]);
    w.element("line", attr("x1", num(f.left - 4)) + " " + attr("y1", num(py)) + " " + attr("x2", num(f.left)) +
                          " " + attr("y2", num(py)) + " stroke=\"#333333\"");
    w.text(f.left - 7, py, y.labels[k],
           "class=\"tick\" text-anchor=\"end\" dominant-baseline=\"central\" " + attr("font-size", num(tick_font)));
  }
  w.close("g");

  if (!y_label.empty()) {
    const double cy = (f.top + f.bottom) / 2;
    w.text(y_label_x, cy, y_label,
           "class=\"axis-label y\" text-anchor=\"middle\" " +
               attr("transform", "rotate(-90 " + num(y_label_x) + " " + num(cy) + ")"));
  }
}

// Left margin for y tick labels and the y axis title; returns it and sets the
// x position of the rotated y title.
double left_margin(const Axis& y, const std::string& y_label, double font_size, double& y_label_x) {
  double left = 12;
  if (!y_label.empty()) {
    y_label_x = left + font_size * 0.6;
    left += font_size * 1.3 + 4;
  }
  return left + y.max_label_width(font_size * 0.85) + 12;
}

void check_layout(const PlotLayout& layout) {
  if (!(layout.width >= 100) || !(layout.height >= 80)) {
    throw InputError("plot: width and height must be at least 100 x 80 pixels");
  }
  if (!(layout.font_size > 0)) throw InputError("plot: font_size must be positive");
}

std::string clip_defs(const Frame& f) {
  return "<defs><clipPath id=\"plot-clip\"><rect " + attr("x", num(f.left)) + " " + attr("y", num(f.top)) +
         " " + attr("width", num(f.right - f.left)) + " " + attr("height", num(f.bottom - f.top)) +
         "/></clipPath></defs>";
}

std::string format_value(double v) {
  char buf[32];
  if (std::fabs(v) < 10) std::snprintf(buf, sizeof buf, "%.2f", v);
  else std::snprintf(buf, sizeof buf, "%.3g", v);
  std::string s = buf;
  if (s.find('e') != std::string::npos || std::fabs(v) >= 1000) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
    s = buf;
  }
  return s;
}

}  // namespace

// ---- Pareto front -------------------------------------------------------------

std::vector<std::size_t> pareto_front(const std::vector<std::pair<double, double>>& points,
                                      bool maximize_x, bool maximize_y) {
  auto better_or_equal = [&](double a, double b, bool maximize) { return maximize ? a >= b : a <= b; };
  auto better = [&](double a, double b, bool maximize) { return maximize ? a > b : a < b; };
  std::vector<std::size_t> front;
  for (std::size_t i = 0; i < points.size(); ++i) {
    const auto [xi, yi] = points[i];
    if (!std::isfinite(xi) || !std::isfinite(yi)) continue;
    bool dominated = false;
    for (std::size_t j = 0; j < points.size() && !dominated; ++j) {
      if (j == i) continue;
      const auto [xj, yj] = points[j];
      if (!std::isfinite(xj) || !std::isfinite(yj)) continue;
      dominated = better_or_equal(xj, xi, maximize_x) && better_or_equal(yj, yi, maximize_y) &&
                  (better(xj, xi, maximize_x) || better(yj, yi, maximize_y));
    }
    if (!dominated) front.push_back(i);
  }
  std::stable_sort(front.begin(), front.end(), [&](std::size_t a, std::size_t b) {
    return points[a].first < points[b].first;
  });
  return front;
}

// ---- line plot --------------------------------------------------------------

std::string render_line_plot(const LinePlot& plot) {
  const PlotLayout& L = plot.layout;
  check_layout(L);
  const bool categorical = !plot.x_categories.empty();
  if (categorical && plot.x_axis.log_scale) throw InputError("line plot: a categorical x axis cannot be log");

  // x of point k of series s: given, or its position.
  auto x_of = [&](const LineSeries& s, std::size_t k) {
    return s.x.empty() ? static_cast<double>(k) : s.x[k];
  };
  std::vector<double> xs, ys;
  for (const auto& s : plot.series) {
    if (!s.x.empty() && s.x.size() != s.y.size()) {
      throw InputError("line plot: series '" + s.name + "' has " + std::to_string(s.x.size()) +
                       " x values and " + std::to_string(s.y.size()) + " y values");
    }
    if (!s.errors.empty() && s.errors.size() != s.y.size()) {
      throw InputError("line plot: series '" + s.name + "' has " + std::to_string(s.errors.size()) +
                       " error values and " + std::to_string(s.y.size()) + " y values");
    }
    for (std::size_t k = 0; k < s.y.size(); ++k) {
      xs.push_back(x_of(s, k));
      ys.push_back(s.y[k]);
      if (!s.errors.empty() && std::isfinite(s.errors[k])) {
        ys.push_back(s.y[k] - s.errors[k]);
        ys.push_back(s.y[k] + s.errors[k]);
      }
    }
  }
  for (const auto& v : plot.vertical_lines) xs.push_back(v.first);

  Axis x = categorical ? category_axis(plot.x_categories) : resolve_axis(plot.x_axis, xs, false, "x");
  Axis y = resolve_axis(plot.y_axis, ys, false, "y");

  // Which series have missing values (a NaN y at a usable x).
  bool any_missing = false;
  for (const auto& s : plot.series) {
    for (std::size_t k = 0; k < s.y.size(); ++k) {
      if (usable(x_of(s, k), x.log) && !usable(s.y[k], y.log)) any_missing = true;
    }
  }
  std::vector<LegendEntry> legend;
  for (std::size_t i = 0; i < plot.series.size(); ++i) {
    legend.push_back({plot.series[i].name, svg::series_color(i), plot.markers ? static_cast<int>(i) : -1, true,
                      plot.series[i].dashed});
  }
  if (any_missing) legend.push_back({"no value", "#555555", -1, false, false, "legend-missing"});

  const double fs = L.font_size;
  Frame f;
  double y_label_x = 0;
  f.left = left_margin(y, plot.y_axis.label, fs, y_label_x);
  f.top = title_height(L);
  f.right = L.width - 16 - legend_width(legend, fs);
  f.bottom = L.height - (12 + fs * 0.85 + 10 + (plot.x_axis.label.empty() ? 0 : fs * 1.3 + 4));
  if (f.right - f.left < 40 || f.bottom - f.top < 40) throw InputError("line plot: too small for its labels");
  x.p0 = f.left, x.p1 = f.right;
  y.p0 = f.bottom, y.p1 = f.top;

  svg::Writer w(L.width, L.height, L.font_family, fs);
  w.element("rect", "class=\"background\" width=\"100%\" height=\"100%\" fill=\"#ffffff\"");
  w.raw(clip_defs(f));
  draw_title(w, L, L.width);
  draw_axes(w, f, x, y, plot.y_axis.label, fs, !categorical, 0, y_label_x);
  if (!plot.x_axis.label.empty()) {
    w.text((f.left + f.right) / 2, L.height - 10, plot.x_axis.label, "class=\"axis-label x\" text-anchor=\"middle\"");
  }

  w.open("g", "class=\"reference-lines\"");
  for (const auto& [vx, label] : plot.vertical_lines) {
    if (!usable(vx, x.log)) continue;
    const double px = x.map(vx);
    if (px < f.left - 0.5 || px > f.right + 0.5) continue;
    w.element("line", "class=\"reference-line\" " + attr("x1", num(px)) + " " + attr("y1", num(f.top)) + " " +
                          attr("x2", num(px)) + " " + attr("y2", num(f.bottom)) +
                          " stroke=\"#777777\" stroke-dasharray=\"6,4\"");
    if (!label.empty()) {
      w.text(px + 4, f.top + fs * 0.9, label, attr("font-size", num(fs * 0.8)) + " fill=\"#555555\"");
    }
  }
  w.close("g");

  w.open("g", "class=\"data\"");
  for (std::size_t i = 0; i < plot.series.size(); ++i) {
    const auto& s = plot.series[i];
    const std::string color = svg::series_color(i);
    w.open("g", "class=\"series\" " + attr("data-name", escape(s.name)) + " " + attr("data-index", std::to_string(i)));
    std::vector<std::size_t> whiskers;  // isolated points with an error, drawn unclipped below
    w.open("g", "clip-path=\"url(#plot-clip)\"");
    if (!s.errors.empty()) {
      // The error band: one closed polygon per run of points with a value and an error.
      std::vector<std::size_t> run_idx;
      auto flush_band = [&] {
        if (run_idx.size() >= 2) {
          std::string d;
          for (std::size_t k = 0; k < run_idx.size(); ++k) {
            const std::size_t p = run_idx[k];
            d += (k ? " L" : "M") + num(x.map(x_of(s, p))) + " " + num(y.map(s.y[p] + s.errors[p]));
          }
          for (std::size_t k = run_idx.size(); k-- > 0;) {
            const std::size_t p = run_idx[k];
            const double lo = s.y[p] - s.errors[p];
            d += " L" + num(x.map(x_of(s, p))) + " " + num(usable(lo, y.log) ? y.map(lo) : f.bottom);
          }
          w.element("path", "class=\"error-band\" " + attr("d", d + " Z") + " " + attr("fill", color) +
                                " fill-opacity=\"0.18\" stroke=\"none\"");
        } else if (run_idx.size() == 1) {  // an isolated point gets a whisker instead
          whiskers.push_back(run_idx[0]);
        }
        run_idx.clear();
      };
      for (std::size_t k = 0; k < s.y.size(); ++k) {
        if (usable(x_of(s, k), x.log) && usable(s.y[k], y.log) && std::isfinite(s.errors[k]) &&
            usable(s.y[k] + s.errors[k], y.log)) {
          run_idx.push_back(k);
        } else {
          flush_band();
        }
      }
      flush_band();
    }
    // The line breaks at every missing value: one path per run of points.
    std::string d;
    int run = 0;
    for (std::size_t k = 0; k <= s.y.size(); ++k) {
      const bool ok = k < s.y.size() && usable(x_of(s, k), x.log) && usable(s.y[k], y.log);
      if (ok) {
        d += (run == 0 ? "M" : " L") + num(x.map(x_of(s, k))) + " " + num(y.map(s.y[k]));
        ++run;
      } else {
        if (run >= 2) {
          w.element("path", "class=\"line\" " + attr("d", d) + " fill=\"none\" " + attr("stroke", color) +
                                " stroke-width=\"2\" stroke-linejoin=\"round\"" +
                                (s.dashed ? " stroke-dasharray=\"6,4\"" : ""));
        }
        d.clear();
        run = 0;
      }
    }
    w.close("g");
    // Markers are not clipped (a point on the frame stays whole); points outside
    // a fixed range are left out instead.
    auto inside = [&](double px, double py) {
      return px >= f.left - 0.5 && px <= f.right + 0.5 && py >= f.top - 0.5 && py <= f.bottom + 0.5;
    };
    for (std::size_t p : whiskers) {
      const double px = x.map(x_of(s, p)), lo = s.y[p] - s.errors[p];
      if (!inside(px, y.map(s.y[p]))) continue;
      const double p_lo = std::clamp(usable(lo, y.log) ? y.map(lo) : f.bottom, f.top, f.bottom);
      const double p_hi = std::clamp(y.map(s.y[p] + s.errors[p]), f.top, f.bottom);
      w.element("path", "class=\"error-bar\" " +
                            attr("d", "M" + num(px) + " " + num(p_lo) + " L" + num(px) + " " + num(p_hi) +
                                          " M" + num(px - 4) + " " + num(p_lo) + " L" + num(px + 4) + " " +
                                          num(p_lo) + " M" + num(px - 4) + " " + num(p_hi) + " L" + num(px + 4) +
                                          " " + num(p_hi)) +
                            " " + attr("stroke", color) + " stroke-width=\"1.2\" fill=\"none\"");
    }
    for (std::size_t k = 0; k < s.y.size(); ++k) {
      const double xv = x_of(s, k);
      if (!usable(xv, x.log) || !inside(x.map(xv), f.bottom)) continue;
      if (usable(s.y[k], y.log)) {
        if (!inside(x.map(xv), y.map(s.y[k]))) continue;
        // Markers always show, so an isolated point between two gaps is visible.
        if (plot.markers) {
          draw_marker(w, static_cast<int>(i), x.map(xv), y.map(s.y[k]), 3.6, color, "point");
        } else {
          w.element("circle", "class=\"point\" " + attr("cx", num(x.map(xv))) + " " +
                                  attr("cy", num(y.map(s.y[k]))) + " r=\"1.6\" " + attr("fill", color));
        }
      } else {
        draw_cross(w, x.map(xv), f.bottom - 7 - 3 * static_cast<double>(i % 3), 4, color);
      }
    }
    w.close("g");
  }
  w.close("g");
  draw_legend(w, legend, f.right + 16, f.top, fs);
  return w.finish();
}

// ---- scatter plot -----------------------------------------------------------

std::string render_scatter_plot(const ScatterPlot& plot) {
  const PlotLayout& L = plot.layout;
  check_layout(L);
  std::vector<double> xs, ys;
  std::vector<std::pair<double, double>> all;
  std::vector<std::pair<std::size_t, std::size_t>> owner;  // (series, point) of all[k]
  for (std::size_t i = 0; i < plot.series.size(); ++i) {
    for (std::size_t k = 0; k < plot.series[i].points.size(); ++k) {
      const auto& p = plot.series[i].points[k];
      xs.push_back(p.x);
      ys.push_back(p.y);
    }
  }
  Axis x = resolve_axis(plot.x_axis, xs, false, "x");
  Axis y = resolve_axis(plot.y_axis, ys, false, "y");
  std::size_t missing = 0;
  for (std::size_t i = 0; i < plot.series.size(); ++i) {
    for (std::size_t k = 0; k < plot.series[i].points.size(); ++k) {
      const auto& p = plot.series[i].points[k];
      if (!usable(p.x, x.log) || !usable(p.y, y.log)) {
        ++missing;
        continue;
      }
      all.emplace_back(p.x, p.y);
      owner.emplace_back(i, k);
    }
  }
  std::vector<std::size_t> front;
  if (plot.pareto_front) front = pareto_front(all, plot.maximize_x, plot.maximize_y);
  std::vector<bool> on_front(all.size(), false);
  for (std::size_t k : front) on_front[k] = true;

  std::vector<LegendEntry> legend;
  for (std::size_t i = 0; i < plot.series.size(); ++i) {
    legend.push_back({plot.series[i].name, svg::series_color(i), static_cast<int>(i), false, false});
  }
  if (plot.pareto_front && !front.empty()) {
    legend.push_back({"Pareto front", "#333333", -1, true, true, "legend-pareto"});
  }

  const double fs = L.font_size;
  Frame f;
  double y_label_x = 0;
  f.left = left_margin(y, plot.y_axis.label, fs, y_label_x);
  f.top = title_height(L);
  f.right = L.width - 16 - legend_width(legend, fs);
  f.bottom = L.height - (12 + fs * 0.85 + 10 + (plot.x_axis.label.empty() ? 0 : fs * 1.3 + 4) +
                         (missing ? fs + 6 : 0));
  if (f.right - f.left < 40 || f.bottom - f.top < 40) throw InputError("scatter plot: too small for its labels");
  x.p0 = f.left, x.p1 = f.right;
  y.p0 = f.bottom, y.p1 = f.top;

  svg::Writer w(L.width, L.height, L.font_family, fs);
  w.element("rect", "class=\"background\" width=\"100%\" height=\"100%\" fill=\"#ffffff\"");
  w.raw(clip_defs(f));
  draw_title(w, L, L.width);
  draw_axes(w, f, x, y, plot.y_axis.label, fs, true, 0, y_label_x);
  const double x_title_y = L.height - 10 - (missing ? fs + 6 : 0);
  if (!plot.x_axis.label.empty()) {
    w.text((f.left + f.right) / 2, x_title_y, plot.x_axis.label, "class=\"axis-label x\" text-anchor=\"middle\"");
  }
  if (missing) {
    w.text(f.left, L.height - 8,
           std::to_string(missing) + (missing == 1 ? " point has" : " points have") +
               " no value and is not shown",
           "class=\"missing-note\" fill=\"#8a1c1c\" " + attr("font-size", num(fs * 0.85)));
  }

  if (front.size() >= 2) {
    std::string d;
    for (std::size_t k = 0; k < front.size(); ++k) {
      d += (k ? " L" : "M") + num(x.map(all[front[k]].first)) + " " + num(y.map(all[front[k]].second));
    }
    w.element("path", "class=\"pareto-front\" " + attr("d", d) +
                          " fill=\"none\" stroke=\"#333333\" stroke-width=\"1.5\" stroke-dasharray=\"6,4\"" +
                          " clip-path=\"url(#plot-clip)\"");
  }

  // Labels avoid each other: try four positions around the point.
  struct Box {
    double x0, y0, x1, y1;
  };
  std::vector<Box> placed;
  auto overlaps = [&](const Box& b) {
    for (const auto& o : placed) {
      if (b.x0 < o.x1 && o.x0 < b.x1 && b.y0 < o.y1 && o.y0 < b.y1) return true;
    }
    return false;
  };
  for (std::size_t k = 0; k < all.size(); ++k) {
    const double px = x.map(all[k].first), py = y.map(all[k].second);
    placed.push_back({px - 5, py - 5, px + 5, py + 5});
  }

  w.open("g", "class=\"data\"");
  std::size_t flat = 0;
  for (std::size_t i = 0; i < plot.series.size(); ++i) {
    const std::string color = svg::series_color(i);
    w.open("g", "class=\"series\" " + attr("data-name", escape(plot.series[i].name)) + " " +
                    attr("data-index", std::to_string(i)));
    for (; flat < all.size() && owner[flat].first == i; ++flat) {
      const auto& p = plot.series[i].points[owner[flat].second];
      const double px = x.map(p.x), py = y.map(p.y);
      if (on_front[flat]) {
        w.element("circle", "class=\"pareto\" " + attr("cx", num(px)) + " " + attr("cy", num(py)) +
                                " r=\"8\" fill=\"none\" stroke=\"#333333\" stroke-width=\"1.3\"");
      }
      draw_marker(w, static_cast<int>(i), px, py, 4.5, color, on_front[flat] ? "point on-front" : "point");
      if (!p.label.empty()) {
        const double lw = svg::text_width(p.label, fs * 0.8), lh = fs * 0.8;
        const double cand[4][3] = {{px + 8, py - 6, 0}, {px + 8, py + lh + 4, 0},
                                   {px - 8, py - 6, 1}, {px - 8, py + lh + 4, 1}};
        int pick = 0;
        for (int c = 0; c < 4; ++c) {
          const double x0 = cand[c][2] ? cand[c][0] - lw : cand[c][0];
          const Box b{x0, cand[c][1] - lh, x0 + lw, cand[c][1]};
          if (!overlaps(b) && b.x0 >= 0 && b.x1 <= L.width) {
            pick = c;
            break;
          }
        }
        const double x0 = cand[pick][2] ? cand[pick][0] - lw : cand[pick][0];
        placed.push_back({x0, cand[pick][1] - lh, x0 + lw, cand[pick][1]});
        w.text(cand[pick][0], cand[pick][1], p.label,
               std::string("class=\"point-label\" ") + (cand[pick][2] ? "text-anchor=\"end\" " : "") +
                   attr("font-size", num(fs * 0.8)) + " fill=\"#333333\"");
      }
    }
    w.close("g");
  }
  w.close("g");
  draw_legend(w, legend, f.right + 16, f.top, fs);
  return w.finish();
}

// ---- grouped bar chart ------------------------------------------------------

std::string render_bar_chart(const BarChart& chart) {
  const PlotLayout& L = chart.layout;
  check_layout(L);
  const std::size_t n_cat = chart.categories.size();
  const std::size_t n_ser = chart.series.size();
  if (n_cat == 0) throw InputError("bar chart: no categories");
  std::vector<double> values;
  for (const auto& s : chart.series) {
    if (s.values.size() != n_cat) {
      throw InputError("bar chart: series '" + s.name + "' has " + std::to_string(s.values.size()) +
                       " values for " + std::to_string(n_cat) + " categories");
    }
    if (!s.errors.empty() && s.errors.size() != n_cat) {
      throw InputError("bar chart: series '" + s.name + "' has " + std::to_string(s.errors.size()) +
                       " error bars for " + std::to_string(n_cat) + " categories");
    }
    for (std::size_t c = 0; c < n_cat; ++c) {
      values.push_back(s.values[c]);
      if (!s.errors.empty() && std::isfinite(s.errors[c])) {
        values.push_back(s.values[c] - s.errors[c]);
        values.push_back(s.values[c] + s.errors[c]);
      }
    }
  }
  Axis y = resolve_axis(chart.y_axis, values, true, "y");
  Axis x = category_axis(chart.categories);

  bool any_missing = false;
  for (const auto& s : chart.series) {
    for (double v : s.values) any_missing |= !usable(v, y.log);
  }
  std::vector<LegendEntry> legend;
  if (n_ser > 1 || (n_ser == 1 && !chart.series[0].name.empty())) {
    for (std::size_t i = 0; i < n_ser; ++i) {
      legend.push_back({chart.series[i].name, svg::series_color(i), 1, false, false});
    }
  }
  if (any_missing) legend.push_back({"n/a: no value", "#555555", -1, false, false, "legend-missing"});

  const double fs = L.font_size;
  Frame f;
  double y_label_x = 0;
  f.left = left_margin(y, chart.y_axis.label, fs, y_label_x);
  f.top = title_height(L) + (chart.show_values ? fs : 0);
  f.right = L.width - 16 - legend_width(legend, fs);
  // Long category names are rotated when they would not fit side by side.
  const double band = (f.right - f.left) / static_cast<double>(n_cat);
  double widest = 0;
  for (const auto& c : chart.categories) widest = std::max(widest, svg::text_width(c, fs * 0.85));
  const double angle = widest > band * 0.95 ? -35 : 0;
  const double tick_height = angle != 0 ? widest * 0.5736 /* sin 35 degrees */ + fs : fs * 0.85;
  f.bottom = L.height - (12 + tick_height + 10 + (chart.x_label.empty() ? 0 : fs * 1.3 + 4));
  if (f.right - f.left < 40 || f.bottom - f.top < 40) throw InputError("bar chart: too small for its labels");
  x.p0 = f.left, x.p1 = f.right;
  y.p0 = f.bottom, y.p1 = f.top;

  svg::Writer w(L.width, L.height, L.font_family, fs);
  w.element("rect", "class=\"background\" width=\"100%\" height=\"100%\" fill=\"#ffffff\"");
  w.raw(clip_defs(f));
  draw_title(w, L, L.width);
  draw_axes(w, f, x, y, chart.y_axis.label, fs, false, angle, y_label_x);
  if (!chart.x_label.empty()) {
    w.text((f.left + f.right) / 2, L.height - 10, chart.x_label, "class=\"axis-label x\" text-anchor=\"middle\"");
  }

  const double base = y.log ? f.bottom : std::clamp(y.map(0.0), f.top, f.bottom);
  const double group = band * 0.8;
  const double bar_w = group / static_cast<double>(std::max<std::size_t>(n_ser, 1));
  w.open("g", "class=\"data\"");
  for (std::size_t i = 0; i < n_ser; ++i) {
    const auto& s = chart.series[i];
    const std::string color = svg::series_color(i);
    w.open("g", "class=\"series\" " + attr("data-name", escape(s.name)) + " " + attr("data-index", std::to_string(i)));
    for (std::size_t c = 0; c < n_cat; ++c) {
      const double bx = f.left + band * static_cast<double>(c) + (band - group) / 2 + bar_w * static_cast<double>(i);
      const double v = s.values[c];
      const std::string tip = "<title>" + escape(s.name.empty() ? chart.categories[c] : s.name + ", " + chart.categories[c]) +
                              ": " + (usable(v, y.log) ? format_value(v) : std::string("no value")) + "</title>";
      if (!usable(v, y.log)) {
        const double h = std::min(16.0, base - f.top);
        w.open("rect", "class=\"bar missing\" " + attr("x", num(bx + 1)) + " " + attr("y", num(base - h)) + " " +
                           attr("width", num(std::max(bar_w - 2, 1.0))) + " " + attr("height", num(h)) +
                           " fill=\"none\" " + attr("stroke", color) + " stroke-dasharray=\"3,2\"");
        w.raw(tip);
        w.close("rect");
        w.text(bx + bar_w / 2, base - h - 3, "n/a",
               "class=\"missing\" text-anchor=\"middle\" fill=\"#8a1c1c\" " + attr("font-size", num(fs * 0.7)));
        continue;
      }
      const double py = std::clamp(y.map(v), f.top, f.bottom);
      const double top = std::min(py, base), height = std::max(std::fabs(py - base), 0.5);
      w.open("rect", "class=\"bar\" " + attr("x", num(bx + 0.5)) + " " + attr("y", num(top)) + " " +
                         attr("width", num(std::max(bar_w - 1, 1.0))) + " " + attr("height", num(height)) + " " +
                         attr("fill", color));
      w.raw(tip);
      w.close("rect");
      double label_top = top;  // the value label goes above the bar and its error bar
      if (!s.errors.empty() && std::isfinite(s.errors[c]) && s.errors[c] > 0) {
        const double lo = v - s.errors[c], hi = v + s.errors[c];
        const double p_lo = usable(lo, y.log) ? std::clamp(y.map(lo), f.top, f.bottom) : f.bottom;
        const double p_hi = std::clamp(y.map(hi), f.top, f.bottom);
        const double cx = bx + bar_w / 2, cap = std::min(bar_w * 0.25, 5.0);
        w.element("path", "class=\"error-bar\" " +
                              attr("d", "M" + num(cx) + " " + num(p_lo) + " L" + num(cx) + " " + num(p_hi) +
                                            " M" + num(cx - cap) + " " + num(p_lo) + " L" + num(cx + cap) + " " +
                                            num(p_lo) + " M" + num(cx - cap) + " " + num(p_hi) + " L" +
                                            num(cx + cap) + " " + num(p_hi)) +
                              " stroke=\"#222222\" stroke-width=\"1.2\" fill=\"none\"");
        label_top = std::min(label_top, std::min(p_lo, p_hi));
      }
      if (chart.show_values) {
        const double ty = v >= 0 || y.log ? label_top - 3 : top + height + fs * 0.75;
        w.text(bx + bar_w / 2, ty, format_value(v),
               "class=\"value\" text-anchor=\"middle\" " + attr("font-size", num(fs * 0.7)));
      }
    }
    w.close("g");
  }
  w.close("g");
  if (!y.log && y.lo < 0 && y.hi > 0) {
    w.element("line", "class=\"zero-line\" " + attr("x1", num(f.left)) + " " + attr("y1", num(base)) + " " +
                          attr("x2", num(f.right)) + " " + attr("y2", num(base)) + " stroke=\"#333333\"");
  }
  draw_legend(w, legend, f.right + 16, f.top, fs);
  return w.finish();
}

// ---- heatmap ----------------------------------------------------------------

std::string render_heatmap(const Heatmap& hm) {
  const PlotLayout& L = hm.layout;
  if (!(L.font_size > 0)) throw InputError("heatmap: font_size must be positive");
  const std::size_t rows = hm.values.size();
  const std::size_t cols = rows ? hm.values[0].size() : hm.x_labels.size();
  if (rows == 0 || cols == 0) throw InputError("heatmap: no values");
  for (std::size_t r = 0; r < rows; ++r) {
    if (hm.values[r].size() != cols) {
      throw InputError("heatmap: row " + std::to_string(r + 1) + " has " + std::to_string(hm.values[r].size()) +
                       " values, row 1 has " + std::to_string(cols));
    }
  }
  if (!hm.x_labels.empty() && hm.x_labels.size() != cols) {
    throw InputError("heatmap: " + std::to_string(hm.x_labels.size()) + " x labels for " +
                     std::to_string(cols) + " columns");
  }
  if (!hm.y_labels.empty() && hm.y_labels.size() != rows) {
    throw InputError("heatmap: " + std::to_string(hm.y_labels.size()) + " y labels for " +
                     std::to_string(rows) + " rows");
  }
  auto x_label = [&](std::size_t c) { return hm.x_labels.empty() ? std::to_string(c) : hm.x_labels[c]; };
  auto y_label = [&](std::size_t r) { return hm.y_labels.empty() ? std::to_string(r) : hm.y_labels[r]; };

  double vmin = kInf, vmax = -kInf;
  bool any_missing = false;
  for (const auto& row : hm.values) {
    for (double v : row) {
      if (!std::isfinite(v)) {
        any_missing = true;
        continue;
      }
      vmin = std::min(vmin, v);
      vmax = std::max(vmax, v);
    }
  }
  if (hm.diverging && vmin <= vmax) {
    const double m = std::max(std::fabs(vmin), std::fabs(vmax));
    vmin = -m;
    vmax = m;
  }
  if (hm.min) vmin = *hm.min;
  if (hm.max) vmax = *hm.max;
  if (!(vmin <= vmax)) vmin = 0, vmax = 1;  // nothing finite
  if (hm.min && hm.max && !(*hm.min < *hm.max)) throw InputError("heatmap: min must be below max");
  const bool flat = vmin == vmax;

  auto colour = [&](double t) { return hm.diverging ? svg::diverging(t) : svg::viridis(t); };
  const double fs = L.font_size;
  const double cell = hm.cell_size > 0
                          ? hm.cell_size
                          : std::clamp(480.0 / static_cast<double>(std::max(rows, cols)), 8.0, 36.0);
  const double label_fs = std::max(6.0, std::min(fs * 0.9, cell * 0.85));
  double ylw = 0, xlw = 0;
  for (std::size_t r = 0; r < rows; ++r) ylw = std::max(ylw, svg::text_width(y_label(r), label_fs));
  for (std::size_t c = 0; c < cols; ++c) xlw = std::max(xlw, svg::text_width(x_label(c), label_fs));

  const double grid_w = cell * static_cast<double>(cols), grid_h = cell * static_cast<double>(rows);
  double left = 12;
  double y_title_x = 0;
  if (!hm.y_axis_label.empty()) {
    y_title_x = left + fs * 0.6;
    left += fs * 1.3 + 4;
  }
  left += ylw + 8;
  const double top = title_height(L);
  const double bar_h = std::max(grid_h, 120.0);
  std::vector<double> bar_ticks = svg::nice_ticks(vmin, vmax, 6);
  bar_ticks.erase(std::remove_if(bar_ticks.begin(), bar_ticks.end(),
                                 [&](double t) { return t < vmin - 1e-12 || t > vmax + 1e-12; }),
                  bar_ticks.end());
  if (flat) bar_ticks = {vmin};
  const double bar_step = bar_ticks.size() >= 2 ? bar_ticks[1] - bar_ticks[0] : 1.0;
  double bar_label_w = 0;
  for (double t : bar_ticks) bar_label_w = std::max(bar_label_w, svg::text_width(svg::tick_label(t, bar_step), fs * 0.85));
  const double bar_x = left + grid_w + 18;
  double width = bar_x + 14 + 6 + bar_label_w + 10 + (hm.colorbar_label.empty() ? 0 : fs * 1.3 + 4);
  const double missing_h = any_missing ? fs * 1.6 : 0;
  const double bottom_labels = 8 + xlw + 8 + (hm.x_axis_label.empty() ? 0 : fs * 1.3 + 4) + 8;
  double height = std::max(top + grid_h + bottom_labels, top + bar_h + missing_h + 16);
  // The title is bold (about 12% wider than text_width's regular estimate); a
  // narrow matrix must not cut it off.
  if (!L.title.empty()) width = std::max(width, svg::text_width(L.title, fs * 1.15) * 1.12 + 24);
  width = std::ceil(width);  // whole pixels, so renderers agree on the image size
  height = std::ceil(height);

  svg::Writer w(width, height, L.font_family, fs);
  w.element("rect", "class=\"background\" width=\"100%\" height=\"100%\" fill=\"#ffffff\"");
  std::string defs = "<defs><linearGradient id=\"colorbar-gradient\" x1=\"0\" y1=\"1\" x2=\"0\" y2=\"0\">";
  for (int k = 0; k <= 10; ++k) {
    defs += "<stop offset=\"" + num(k / 10.0) + "\" stop-color=\"" + colour(k / 10.0) + "\"/>";
  }
  defs += "</linearGradient>";
  defs += "<pattern id=\"missing-hatch\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
          "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#eeeeee\"/>"
          "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#b0b0b0\" stroke-width=\"2.5\"/></pattern></defs>";
  w.raw(defs);
  draw_title(w, L, width);

  w.open("g", "class=\"cells\" shape-rendering=\"crispEdges\" " + attr("data-rows", std::to_string(rows)) + " " + attr("data-columns", std::to_string(cols)));
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < cols; ++c) {
      const double v = hm.values[r][c];
      const double cx = left + cell * static_cast<double>(c), cy = top + cell * static_cast<double>(r);
      const bool ok = std::isfinite(v);
      const double t = flat ? 0.5 : (v - vmin) / (vmax - vmin);
      const std::string fill = ok ? colour(t) : "url(#missing-hatch)";
      w.open("rect", std::string("class=\"cell") + (ok ? "" : " missing") + "\" " + attr("x", num(cx)) + " " +
                         attr("y", num(cy)) + " " + attr("width", num(cell)) + " " + attr("height", num(cell)) +
                         " " + attr("fill", fill));
      w.raw("<title>" + escape(y_label(r)) + " / " + escape(x_label(c)) + ": " +
            (ok ? escape(format_value(v)) : std::string("no value")) + "</title>");
      w.close("rect");
      if (hm.show_values && ok && cell >= 22) {
        const std::string ink = svg::luminance(fill) > 0.35 ? "#000000" : "#ffffff";
        w.text(cx + cell / 2, cy + cell / 2, format_value(v),
               "class=\"value\" text-anchor=\"middle\" dominant-baseline=\"central\" " +
                   attr("font-size", num(std::min(fs * 0.7, cell * 0.32))) + " " + attr("fill", ink));
      }
    }
  }
  w.close("g");
  w.element("rect", "class=\"grid-frame\" " + attr("x", num(left)) + " " + attr("y", num(top)) + " " +
                        attr("width", num(grid_w)) + " " + attr("height", num(grid_h)) +
                        " fill=\"none\" stroke=\"#333333\" stroke-width=\"0.8\"");

  w.open("g", "class=\"axis y\"");
  for (std::size_t r = 0; r < rows; ++r) {
    w.text(left - 5, top + cell * (static_cast<double>(r) + 0.5), y_label(r),
           "class=\"tick\" text-anchor=\"end\" dominant-baseline=\"central\" " + attr("font-size", num(label_fs)));
  }
  w.close("g");
  w.open("g", "class=\"axis x\"");
  const double xl_y = top + grid_h + 6;
  for (std::size_t c = 0; c < cols; ++c) {
    const double px = left + cell * (static_cast<double>(c) + 0.5);
    // Rotated -90 degrees about its anchor: the label hangs below the grid and
    // reads upwards, ending at the column.
    w.text(px, xl_y, x_label(c),
           "class=\"tick\" text-anchor=\"end\" dominant-baseline=\"central\" " + attr("font-size", num(label_fs)) +
               " " + attr("transform", "rotate(-90 " + num(px) + " " + num(xl_y) + ")"));
  }
  w.close("g");
  if (!hm.y_axis_label.empty()) {
    const double cy = top + grid_h / 2;
    w.text(y_title_x, cy, hm.y_axis_label,
           "class=\"axis-label y\" text-anchor=\"middle\" " +
               attr("transform", "rotate(-90 " + num(y_title_x) + " " + num(cy) + ")"));
  }
  if (!hm.x_axis_label.empty()) {
    w.text(left + grid_w / 2, xl_y + xlw + 8 + fs, hm.x_axis_label, "class=\"axis-label x\" text-anchor=\"middle\"");
  }

  w.open("g", "class=\"colorbar\"");
  w.element("rect", attr("x", num(bar_x)) + " " + attr("y", num(top)) + " width=\"14\" " + attr("height", num(bar_h)) +
                        " fill=\"url(#colorbar-gradient)\" stroke=\"#333333\" stroke-width=\"0.6\"");
  for (double t : bar_ticks) {
    const double py = flat ? top + bar_h / 2 : top + bar_h - (t - vmin) / (vmax - vmin) * bar_h;
    w.element("line", attr("x1", num(bar_x + 14)) + " " + attr("y1", num(py)) + " " + attr("x2", num(bar_x + 18)) +
                          " " + attr("y2", num(py)) + " stroke=\"#333333\"");
    w.text(bar_x + 20, py, svg::tick_label(t, bar_step),
           "class=\"tick\" dominant-baseline=\"central\" " + attr("font-size", num(fs * 0.85)));
  }
  if (!hm.colorbar_label.empty()) {
    const double lx = bar_x + 14 + 6 + bar_label_w + 6 + fs * 0.6, cy = top + bar_h / 2;
    w.text(lx, cy, hm.colorbar_label,
           "class=\"axis-label colorbar\" text-anchor=\"middle\" " +
               attr("transform", "rotate(-90 " + num(lx) + " " + num(cy) + ")"));
  }
  if (any_missing) {
    const double my = top + bar_h + 8;
    w.open("g", "class=\"legend-missing\"");
    w.element("rect", attr("x", num(bar_x)) + " " + attr("y", num(my)) +
                          " width=\"14\" height=\"14\" fill=\"url(#missing-hatch)\" stroke=\"#333333\" stroke-width=\"0.6\"");
    w.text(bar_x + 20, my + 7, "no value", "dominant-baseline=\"central\" " + attr("font-size", num(fs * 0.85)));
    w.close("g");
  }
  w.close("g");
  return w.finish();
}

}  // namespace mambamt::results
