// The collector's plots, drawn with results/plot.h: quality against decoding
// speed with the Pareto front, quality against the cross-attention skipped
// (gated models evaluated with eval.gate_skip), quality by source-length bucket per model,
// validation loss against step, memory against sequence length, and one bar
// chart per ablation axis.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

#include "core/fs.h"
#include "results/detail/collector_model.h"
#include "results/plot.h"
#include "results/svg.h"

namespace fs = std::filesystem;

namespace mambamt::results::detail {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double group_mean(const PointGroup& g, const std::string& path) {
  return summarize(scalar_values(g, path)).mean;
}

const ReportTable* find_table(const std::vector<ReportTable>& tables, const std::string& name) {
  for (auto& t : tables)
    if (t.name == name) return &t;
  return nullptr;
}

// Groups of the sweep in plot order: the models, then every axis's rows.
std::vector<std::pair<std::string, std::vector<const PointGroup*>>> plot_sets(const SweepView& view) {
  std::vector<std::pair<std::string, std::vector<const PointGroup*>>> sets;
  sets.emplace_back("models", view.models);
  for (size_t k = 0; k < view.sweep->axes.size(); ++k) {
    std::vector<const PointGroup*> rows;
    for (auto& [value, g] : view.axis_rows(k))
      if (g) rows.push_back(g);
    sets.emplace_back(view.sweep->axes[k].key, rows);
  }
  return sets;
}

std::string plot_label(const PointGroup& g) { return g.base ? g.label + " (base)" : g.label; }

// A curve's series name: the model, or in an axis's plot the axis value alone;
// it says when some of the seeds are not finished.
std::string series_name(const SweepView& view, const std::string& set, const PointGroup& g) {
  std::string name = plot_label(g);
  for (size_t k = 0; k < view.sweep->axes.size(); ++k)
    if (view.sweep->axes[k].key == set && k < g.axis_values.size())
      name = axis_label(set, g.axis_values[k], &g) + (g.base ? " (base)" : "");
  for (auto* p : g.points)
    if (p->state != "completed") return name + " (partial)";
  return name;
}

bool all_completed(const PointGroup& g) {
  for (auto* p : g.points)
    if (p->state != "completed") return false;
  return !g.points.empty();
}

}  // namespace

std::vector<PlotFile> write_plots(const SweepView& view, const std::vector<ReportTable>& tables,
                                  const std::string& out_dir, std::ostream& log) {
  std::vector<PlotFile> out;
  const fs::path dir = fs::path(out_dir) / "plots";
  core::make_dirs(dir.string());
  auto write = [&](const std::string& stem, const std::string& title, const std::string& svg) {
    const std::string rel = "plots/" + file_stem(stem) + ".svg";
    svg::write_file((fs::path(out_dir) / rel).string(), svg);
    out.push_back({rel, title});
  };
  const std::string bleu = view.test_set + "/bleu";

  // Quality against decoding speed, every configuration once, with the Pareto front.
  {
    ScatterPlot plot;
    plot.layout.title = "BLEU against decoding speed (" + view.test_set + ")";
    plot.x_axis.label = "decoding tokens/s";
    plot.y_axis.label = "BLEU";
    std::vector<const PointGroup*> placed;
    for (auto& [name, groups] : plot_sets(view)) {
      ScatterSeries s;
      s.name = name;
      for (auto* g : groups) {
        if (std::find(placed.begin(), placed.end(), g) != placed.end()) continue;
        placed.push_back(g);
        // Configurations without both values stay in: the plot counts what it cannot place.
        const double x = group_mean(*g, "efficiency/decode_tokens_per_s"), y = group_mean(*g, bleu);
        s.points.push_back({x, y, plot_label(*g)});
      }
      if (!s.points.empty()) plot.series.push_back(std::move(s));
    }
    write("quality_vs_speed", "Quality against decoding speed (Pareto front)", render_scatter_plot(plot));
  }

  // Quality against the share of cross-attention skipped (eval.gate_skip),
  // every gated configuration once, when some of them skipped: an
  // eval.gate_skip axis traces one trained model's trade-off.
  {
    ScatterPlot plot;
    plot.layout.title = "BLEU against cross-attention skipped (" + view.test_set + ")";
    plot.x_axis.label = "cross-attention skipped (% of target tokens)";
    plot.y_axis.label = "BLEU";
    std::vector<const PointGroup*> placed;
    bool skipped = false;
    for (auto& [name, groups] : plot_sets(view)) {
      ScatterSeries s;
      s.name = name;
      for (auto* g : groups) {
        const double x = group_mean(*g, "gates/skipped");
        if (!std::isfinite(x) || std::find(placed.begin(), placed.end(), g) != placed.end()) continue;
        placed.push_back(g);
        skipped = skipped || x > 0;
        s.points.push_back({100 * x, group_mean(*g, bleu), plot_label(*g)});
      }
      if (!s.points.empty()) plot.series.push_back(std::move(s));
    }
    if (skipped)
      write("quality_vs_skipped", "Quality against cross-attention skipped (Pareto front)", render_scatter_plot(plot));
  }

  // Quality by source-length bucket, one line per model.
  if (const ReportTable* t = find_table(tables, "length_bleu")) {
    LinePlot plot;
    plot.layout.title = "BLEU by source length (" + view.test_set + ")";
    plot.x_axis.label = "source length (tokens)";
    plot.y_axis.label = "BLEU";
    for (auto& c : t->columns) plot.x_categories.push_back(c.title);
    for (auto& row : t->rows) {
      LineSeries s;
      s.name = row.base ? row.label + " (base)" : row.label;
      for (size_t c = 0; c < row.cells.size(); ++c) {
        s.x.push_back(static_cast<double>(c));
        s.y.push_back(row.cells[c].mean);
        s.errors.push_back(row.cells[c].std);
      }
      plot.series.push_back(std::move(s));
    }
    write("quality_by_length", "BLEU by source-length bucket", render_line_plot(plot));
  }

  // Validation loss against step: the models, and each axis's rows.
  for (auto& [name, groups] : plot_sets(view)) {
    LinePlot plot;
    plot.layout.title = "Validation loss" + (name == "models" ? std::string() : " \u2014 " + name);
    plot.x_axis.label = "step";
    plot.y_axis.label = "validation loss";
    plot.markers = false;
    bool any = false;
    for (auto* g : groups) {
      Curve c = metric_curve(*g, "valid_loss");
      LineSeries s;
      s.name = series_name(view, name, *g);
      s.x = c.x;
      s.y = c.mean;
      s.errors = c.std;
      s.dashed = !all_completed(*g);
      any = any || !c.x.empty();
      plot.series.push_back(std::move(s));
    }
    if (!any) {
      log << "collect: no valid_loss series for " << name << ": plot skipped\n";
      continue;
    }
    const std::string stem = name == "models" ? "valid_loss" : "valid_loss_" + name;
    write(stem, plot.layout.title + " against step", render_line_plot(plot));
  }

  // Memory against sequence length: training memory solid, decoding state dashed.
  {
    LinePlot plot;
    plot.layout.title = "Memory against sequence length";
    plot.x_axis.label = "sequence length (tokens)";
    plot.y_axis.label = "memory (MiB)";
    double lo = kNaN, hi = kNaN, y_lo = kNaN, y_hi = kNaN;
    for (auto* g : view.models) {
      for (const char* column : {"train_memory_mb", "decode_state_mb"}) {
        Curve c = memory_curve(*g, column);
        if (c.x.empty()) continue;
        LineSeries s;
        s.name = plot_label(*g) + (std::string(column) == "train_memory_mb" ? " train" : " decode state");
        s.dashed = std::string(column) == "decode_state_mb";
        s.x = c.x;
        s.y = c.mean;
        s.errors = c.std;
        for (double x : c.x) {
          lo = std::isfinite(lo) ? std::min(lo, x) : x;
          hi = std::isfinite(hi) ? std::max(hi, x) : x;
        }
        for (double y : c.mean)
          if (y > 0) {
            y_lo = std::isfinite(y_lo) ? std::min(y_lo, y) : y;
            y_hi = std::isfinite(y_hi) ? std::max(y_hi, y) : y;
          }
        plot.series.push_back(std::move(s));
      }
    }
    if (!plot.series.empty()) {
      // Lengths double and a decoding state is orders of magnitude below training
      // memory: log scales keep both readable.
      plot.x_axis.log_scale = lo > 0 && hi / lo >= 16;
      plot.y_axis.log_scale = y_lo > 0 && y_hi / y_lo >= 50;
      write("memory_by_length", "Memory against sequence length", render_line_plot(plot));
    } else {
      log << "collect: no efficiency/memory_by_length table in any completed store: plot skipped\n";
    }
  }

  // One bar chart per axis: BLEU and chrF with std error bars.
  for (size_t k = 0; k < view.sweep->axes.size(); ++k) {
    const SweepAxis& axis = view.sweep->axes[k];
    BarChart chart;
    chart.layout.title = "Ablation: " + axis.key + " (" + view.test_set + ")";
    chart.x_label = axis.key;
    chart.y_axis.label = "score";
    chart.show_values = true;
    BarSeries b{"BLEU", {}, {}}, c{"chrF", {}, {}};
    for (auto& [value, g] : view.axis_rows(k)) {
      chart.categories.push_back(axis_label(axis.key, value, g));
      ReportCell bc = g ? summarize(scalar_values(*g, bleu)) : ReportCell{};
      ReportCell cc = g ? summarize(scalar_values(*g, view.test_set + "/chrf")) : ReportCell{};
      b.values.push_back(bc.mean);
      b.errors.push_back(bc.std);
      c.values.push_back(cc.mean);
      c.errors.push_back(cc.std);
    }
    chart.series = {b, c};
    write("ablation_" + axis.key, "Ablation of " + axis.key + ": BLEU and chrF", render_bar_chart(chart));
  }
  return out;
}

}  // namespace mambamt::results::detail
