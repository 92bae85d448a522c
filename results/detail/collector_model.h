#pragma once
// Internals of the collector shared by its files: configurations (the points of
// one variant and axis values, any seed), the rows of the comparison tables and
// aggregation over seeds.
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "results/collector.h"
#include "results/plot.h"

namespace mambamt::results::detail {

// Every state a point can have, in the order reports list them.
inline constexpr const char* kStates[] = {"completed", "running", "pending", "interrupted", "failed", "missing",
                                          "unreadable"};

// TOML value text in one form, so "1e-4" and "0.0001" (or "64" and "64.0") are
// the same axis value: numbers in shortest round-trip form, anything else trimmed.
std::string canonical_value(const std::string& text);

// An axis value for people: strings without quotes; attention ratios with the
// attention:Mamba ratio ("0.125 (1:7)").
std::string display_value(const std::string& key, const std::string& value);

struct PointGroup;

// An axis value's label in tables and plots: display_value, and on the
// attention axes (model.attention_ratio, model.attention_placement) the
// attention layers as built, from the text model.attention of a store of the
// group: "0.125 (1:7) → 2/12 (1:5)". Without such a store (none started, or
// older than the text) the requested value alone.
std::string axis_label(const std::string& key, const std::string& value, const PointGroup* group);

// Whether a point is a store of a point that the sweep's grid no longer has
// (left by a grid changed with --allow-grid-change): sweep.h5 does not list
// it. Such points are counted apart and kept out of the tables, where they
// would pass for more seeds of the configuration with their variant and axis
// values (nor do they add table rows or columns). Without sweep.h5 every point
// comes from a store and none is outside.
bool outside_grid(const SweepData& sweep, const SweepPoint& p);

// The device a store's efficiency was measured on: the GPU's name for a CUDA
// device ("NVIDIA H100 80GB HBM3"), else the CPU model without its trademark
// and core-count words ("AMD EPYC 7B13"); "" when the store does not say.
std::string device_label(const core::StoreSnapshot& store);

// The device of every completed store of the grid when it is one, "several
// devices" when they differ, "" when none says.
std::string efficiency_device(const SweepData& sweep);

// The points of one configuration: same variant and axis values, one per seed.
struct PointGroup {
  std::string key;    // stable machine label: "transformer", "model.d_state=32", "base"
  std::string label;  // shown
  std::string variant;
  std::string kind;   // model.kind of its points ("" when unknown)
  std::vector<std::string> axis_values;
  std::vector<const SweepPoint*> points;
  bool base = false;  // the base hybrid (every axis at its target, no variant)

  // "2 completed, 1 running", "missing", "not in the grid" (no points).
  std::string status(std::int64_t expected_seeds) const;
  std::vector<const core::StoreSnapshot*> completed() const;
  bool any_state(const std::string& state) const;
};

// A sweep seen as configurations, with the rows of the comparison tables.
// Holds pointers into its own groups: movable, not copyable.
struct SweepView {
  SweepView() = default;
  SweepView(SweepView&&) = default;
  SweepView& operator=(SweepView&&) = default;
  SweepView(const SweepView&) = delete;
  SweepView& operator=(const SweepView&) = delete;

  const SweepData* sweep = nullptr;
  std::string test_set;                 // results/<set>/...
  std::vector<PointGroup> groups;       // every configuration, grid order
  std::vector<const PointGroup*> models;  // baseline rows: variants (Transformer first), then the base hybrid
  const PointGroup* reference = nullptr;  // the Transformer variant, null when there is none
  const PointGroup* base = nullptr;        // the base hybrid, null when it is not in the sweep

  // The grid point with these axis values (no variant), null when absent.
  const PointGroup* find_grid(const std::vector<std::string>& axis_values) const;
  // Rows of the ablation table of axis k: one per axis value, the others at their targets
  // (null where the grid has no such point).
  std::vector<std::pair<std::string, const PointGroup*>> axis_rows(size_t k) const;
};

SweepView make_view(const SweepData& sweep, const std::string& test_set);

// The test set to tabulate: `wanted` when given, else "test" when a store has
// it, else the first set found in the stores ("test" when there are none).
std::string choose_test_set(const SweepData& sweep, const std::string& wanted);

// results/<path> of every completed point of the group, times `scale` (NaN for
// a point without it, or whose evaluation computed it otherwise than this
// version's: core::result_current).
std::vector<double> scalar_values(const PointGroup& group, const std::string& path, double scale = 1);

// Cell (row, column) of results/<path> tables of the group's completed points
// (NaN as above).
std::vector<double> table_values(const PointGroup& group, const std::string& path, const std::string& row,
                                 const std::string& column, double scale = 1);

// Row labels of results/<path> over every store of the sweep, in first-seen order.
std::vector<std::string> table_row_labels(const SweepData& sweep, const std::string& path);
// Whether some store's table `path` has the column.
bool any_table_column(const SweepData& sweep, const std::string& path, const std::string& column);

// A metric series or memory table aggregated over a group's seeds: one entry per
// x (step or sequence length), mean and sample std over the seeds that have it.
struct Curve {
  std::vector<double> x, mean, std;
  std::vector<std::int64_t> n;
};
// /metrics/<name> of every readable store of the group (running ones too: a
// partial curve is still a curve).
Curve metric_curve(const PointGroup& group, const std::string& metric);
// Column `column` of results/efficiency/memory_by_length (rows = sequence
// lengths) over the group's completed stores.
Curve memory_curve(const PointGroup& group, const std::string& column);

// A plot written by the collector.
struct PlotFile {
  std::string file;   // relative to the output directory: plots/<name>.svg
  std::string title;
};
// Draws every plot of the sweep into <out_dir>/plots/.
std::vector<PlotFile> write_plots(const SweepView& view, const std::vector<ReportTable>& tables,
                                  const std::string& out_dir, std::ostream& log);

// Heatmaps of where each model's translations look in the source
// (results/explain/<k>/... of its first completed store that has them).
struct ExplainPlot {
  std::string model;        // the model's label
  int index = 0;            // k of results/explain/<k>
  std::string source, translation;  // texts, from the maps' token labels
  std::string attention;    // plots/explain/<model>_<k+1>_attention.svg; "" when the model has none
  std::string occlusion;    // plots/explain/<model>_<k+1>_occlusion.svg; "" when not stored
};
// Draws them into <out_dir>/plots/explain/ (up to three sentences per model).
std::vector<ExplainPlot> write_explain_plots(const SweepView& view, const std::string& out_dir, std::ostream& log);
// A heatmap of a stored map: rows (target tokens) down, columns (source tokens) across, from 0.
Heatmap explain_heatmap(const core::ResultTable& table, const std::string& title, const std::string& colorbar);
// Text of sentencepiece pieces (word starts U+2581 -> spaces, specials dropped).
std::string tokens_text(const std::vector<std::string>& pieces);

// A name usable as a file stem and an HDF5 link name.
std::string file_stem(const std::string& name);

}  // namespace mambamt::results::detail
