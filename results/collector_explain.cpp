// The collector's source-attention and occlusion heatmaps: evaluation stores
// results/explain/<k>/{occlusion,attention} for the first short test sentences
// (docs/STORE.md); each model of the sweep gets them drawn from its first
// completed store that has them, under plots/explain/.
#include <filesystem>

#include "core/fs.h"
#include "results/detail/collector_model.h"
#include "results/plot.h"
#include "results/svg.h"

namespace fs = std::filesystem;

namespace mambamt::results::detail {
namespace {

// Sentences explained per store that the report shows.
constexpr int kMaxSentences = 3;

const core::ResultTable* find(const core::StoreSnapshot& s, const std::string& path) {
  auto it = s.tables.find(path);
  return it == s.tables.end() ? nullptr : &it->second;
}

}  // namespace

std::string tokens_text(const std::vector<std::string>& pieces) {
  std::string out;
  for (const std::string& p : pieces) {
    if (p == "</s>" || p == "<s>" || p == "<pad>") continue;
    if (p == "<sep>") {
      out += " <sep>";
      continue;
    }
    std::string w = p;
    // sentencepiece marks a word start with U+2581 (3 bytes in UTF-8).
    static const std::string kSpace = "\u2581";
    for (size_t at; (at = w.find(kSpace)) != std::string::npos;) w.replace(at, kSpace.size(), " ");
    out += w;
  }
  const size_t b = out.find_first_not_of(' ');
  return b == std::string::npos ? std::string() : out.substr(b);
}

Heatmap explain_heatmap(const core::ResultTable& table, const std::string& title, const std::string& colorbar) {
  Heatmap hm;
  hm.layout.title = title;
  hm.x_labels = table.columns;
  hm.y_labels = table.rows;
  hm.x_axis_label = "source";
  hm.y_axis_label = "translation";
  hm.colorbar_label = colorbar;
  hm.min = 0.0;
  for (size_t r = 0; r < table.rows.size(); ++r) {
    std::vector<double> row;
    for (size_t c = 0; c < table.columns.size(); ++c) row.push_back(table.at(r, c));
    hm.values.push_back(std::move(row));
  }
  return hm;
}

std::vector<ExplainPlot> write_explain_plots(const SweepView& view, const std::string& out_dir, std::ostream& log) {
  std::vector<ExplainPlot> out;
  for (const PointGroup* g : view.models) {
    const core::StoreSnapshot* store = nullptr;
    for (auto* s : g->completed())
      if (find(*s, "explain/0/occlusion") || find(*s, "explain/0/attention")) {
        store = s;
        break;
      }
    if (!store) continue;
    for (int k = 0; k < kMaxSentences; ++k) {
      const std::string prefix = "explain/" + std::to_string(k) + "/";
      const core::ResultTable* occ = find(*store, prefix + "occlusion");
      const core::ResultTable* att = find(*store, prefix + "attention");
      if (!occ && !att) break;
      ExplainPlot p;
      p.model = g->base ? g->label + " (base)" : g->label;
      p.index = k;
      const core::ResultTable* any = occ ? occ : att;
      p.source = tokens_text(any->columns);
      p.translation = tokens_text(any->rows);
      auto draw = [&](const core::ResultTable* t, const std::string& method, const std::string& title,
                      const std::string& colorbar) -> std::string {
        if (!t) return "";
        if (t->values.size() != t->rows.size() * t->columns.size() || t->rows.empty() || t->columns.empty()) {
          log << "collect: " << store->path << ": results/" << prefix << method << " is malformed: skipped\n";
          return "";
        }
        const std::string rel =
            "plots/explain/" + file_stem(g->key) + "_" + std::to_string(k + 1) + "_" + method + ".svg";
        svg::write_file((fs::path(out_dir) / rel).string(), render_heatmap(explain_heatmap(*t, title, colorbar)));
        return rel;
      };
      p.attention = draw(att, "attention", p.model + ": attention (mean of layers and heads)",
                         "attention weight");
      p.occlusion = draw(occ, "occlusion", p.model + ": occlusion importance",
                         "\u2016h(occluded) \u2212 h\u2016 / \u2016h\u2016");
      if (!p.attention.empty() || !p.occlusion.empty()) out.push_back(std::move(p));
    }
  }
  return out;
}

}  // namespace mambamt::results::detail
