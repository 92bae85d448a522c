#pragma once
// SVG plots drawn by the project itself (no plotting library): line plots with
// several series, scatter plots with point labels and a Pareto front, grouped
// bar charts, and heatmaps with tick labels on both axes (attention and
// occlusion maps: source tokens across, target tokens down).
//
// Missing values (NaN, or non-positive values on a log axis) are never drawn as
// zero: lines break and mark the gap with a cross on the x axis, bars show a
// dashed "n/a" outline, heatmap cells are hatched grey, scatter plots note how
// many points they could not place. Elements carry classes (series, legend-entry,
// missing, pareto, cell, ...) so tests and stylesheets can find them.
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mambamt::results {

struct AxisOptions {
  std::string label;
  // Logarithmic (base 10) scale; values <= 0 count as missing.
  bool log_scale = false;
  // Fixed range; unset ends come from the data (widened to nice tick values).
  std::optional<double> min;
  std::optional<double> max;
};

struct PlotLayout {
  std::string title;
  double width = 720;  // pixels (heatmaps size themselves from their cells)
  double height = 450;
  double font_size = 13;
  std::string font_family = "DejaVu Sans, Arial, Helvetica, sans-serif";
};

// ---- line plots -------------------------------------------------------------

struct LineSeries {
  std::string name;
  std::vector<double> x;
  std::vector<double> y;  // NaN = no value at this x
  bool dashed = false;
  // Optional half-widths (e.g. std over seeds), drawn as a shaded band y +- error;
  // empty or one per point.
  std::vector<double> errors = {};
};

struct LinePlot {
  PlotLayout layout;
  AxisOptions x_axis;
  AxisOptions y_axis;
  std::vector<LineSeries> series;
  bool markers = true;
  // Categorical x axis (e.g. length buckets): x values are positions 0..n-1 and
  // the ticks show these labels.
  std::vector<std::string> x_categories;
  // Dashed vertical reference lines at these x values (e.g. the longest training
  // length), each with an optional label.
  std::vector<std::pair<double, std::string>> vertical_lines;
};

// ---- scatter plots ----------------------------------------------------------

struct ScatterPoint {
  double x = 0;
  double y = 0;
  std::string label;  // drawn next to the point when not empty
};

struct ScatterSeries {
  std::string name;
  std::vector<ScatterPoint> points;
};

struct ScatterPlot {
  PlotLayout layout;
  AxisOptions x_axis;
  AxisOptions y_axis;
  std::vector<ScatterSeries> series;
  // Overlay the Pareto front of all points (all series together).
  bool pareto_front = true;
  // Which direction is better on each axis (quality and speed: both higher).
  bool maximize_x = true;
  bool maximize_y = true;
};

// Indices of the Pareto-optimal points among (x, y) pairs: no other point is at
// least as good on both axes and strictly better on one. Points with a NaN
// coordinate are never on the front. Sorted by x ascending.
std::vector<std::size_t> pareto_front(const std::vector<std::pair<double, double>>& points,
                                      bool maximize_x = true, bool maximize_y = true);

// ---- grouped bar charts -----------------------------------------------------

struct BarSeries {
  std::string name;
  std::vector<double> values;  // one per category; NaN = missing
  std::vector<double> errors = {};  // optional half-widths of error bars (empty or one per value)
};

struct BarChart {
  PlotLayout layout;
  std::vector<std::string> categories;  // groups along the x axis
  std::string x_label;
  AxisOptions y_axis;
  std::vector<BarSeries> series;  // bars within each group
  bool show_values = false;       // print each value above its bar
};

// ---- heatmaps ---------------------------------------------------------------

struct Heatmap {
  PlotLayout layout;  // width and height are ignored: the cells set the size
  std::vector<std::string> x_labels;          // columns (source tokens), left to right
  std::vector<std::string> y_labels;          // rows (target tokens), top to bottom
  std::vector<std::vector<double>> values;    // values[row][column]; NaN = missing
  std::string x_axis_label = "source";
  std::string y_axis_label = "target";
  std::string colorbar_label;
  std::optional<double> min;  // colour scale range; default from the data
  std::optional<double> max;
  double cell_size = 0;       // pixels; 0 picks one from the matrix size
  bool show_values = false;   // print values inside cells large enough
  // Blue-white-red scale symmetric around 0 (signed values such as occlusion
  // effects) instead of viridis; min/max then default to -m and m.
  bool diverging = false;
};

// Each returns a complete SVG document. Inconsistent input (series with x and y
// of different lengths, a heatmap row of the wrong width, ...) throws InputError.
std::string render_line_plot(const LinePlot& plot);
std::string render_scatter_plot(const ScatterPlot& plot);
std::string render_bar_chart(const BarChart& chart);
std::string render_heatmap(const Heatmap& heatmap);

}  // namespace mambamt::results
