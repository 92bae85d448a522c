#include "results/detail/collector_model.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <set>

#include "results/report_table.h"

namespace mambamt::results::detail {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

bool parse_number(const std::string& s, double& out) {
  if (s.empty()) return false;
  char* end = nullptr;
  out = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size() && std::isfinite(out);
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Order of baseline rows by model kind (Table 2 of the SSM-for-MT paper lists
// the Transformer first, then RetNet, then the SSM-only model, then the
// hybrids; the recurrent RNNsearch follows the Transformer).
int kind_rank(const std::string& kind) {
  if (kind == "transformer") return 0;
  if (kind == "rnnsearch") return 1;
  if (kind == "retnet") return 2;
  if (kind == "mamba") return 3;
  if (kind == "decoder_only") return 4;
  if (kind == "hybrid") return 5;
  return 6;
}

}  // namespace

std::string canonical_value(const std::string& text) {
  size_t b = text.find_first_not_of(" \t\r\n"), e = text.find_last_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  std::string s = text.substr(b, e - b + 1);
  double v;
  if (parse_number(s, v)) return shortest_number(v);
  return s;
}

std::string display_value(const std::string& key, const std::string& value) {
  std::string v = value;
  if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
  double r;
  if (key == "model.attention_ratio" && parse_number(v, r)) {
    if (r == 0) return v + " (no attention)";
    if (r > 0 && r <= 1) {
      double mamba = 1 / r - 1;
      if (std::fabs(mamba - std::round(mamba)) < 1e-6) return v + " (1:" + shortest_number(std::round(mamba)) + ")";
    }
  }
  return v;
}

std::string axis_label(const std::string& key, const std::string& value, const PointGroup* group) {
  const std::string shown = display_value(key, value);
  if (!group || (key != "model.attention_ratio" && key != "model.attention_placement")) return shown;
  for (const SweepPoint* p : group->points) {
    if (!p->store) continue;
    auto it = p->store->texts.find("model.attention");
    if (it != p->store->texts.end() && !it->second.empty()) return shown + " \u2192 " + it->second;
  }
  return shown;
}

std::string device_label(const core::StoreSnapshot& store) {
  auto get = [&store](const char* key) {
    auto it = store.system.find(key);
    return it == store.system.end() ? std::string() : it->second;
  };
  const std::string device = get("device");
  if (device.rfind("cuda", 0) == 0) return get("gpu").empty() ? "GPU" : get("gpu");
  std::string cpu = get("cpu");
  if (cpu.empty() || cpu == "unknown") return device.empty() ? "" : "CPU";
  for (const char* word : {"(R)", "(TM)", "(tm)", " CPU", " Processor"})
    for (size_t at; (at = cpu.find(word)) != std::string::npos;) cpu.erase(at, std::strlen(word));
  if (size_t at = cpu.find(" @"); at != std::string::npos) cpu.erase(at);  // "@ 2.20GHz"
  if (size_t at = cpu.find("-Core"); at != std::string::npos) {              // "64-Core"
    size_t start = cpu.rfind(' ', at);
    cpu.erase(start == std::string::npos ? 0 : start, at + 5 - (start == std::string::npos ? 0 : start));
  }
  size_t b = cpu.find_first_not_of(' '), e = cpu.find_last_not_of(' ');
  return b == std::string::npos ? "CPU" : cpu.substr(b, e - b + 1);
}

std::string efficiency_device(const SweepData& sweep) {
  std::set<std::string> devices;
  for (const SweepPoint& p : sweep.points)
    if (p.store && p.state == "completed" && !outside_grid(sweep, p)) {
      const std::string d = device_label(*p.store);
      if (!d.empty()) devices.insert(d);
    }
  if (devices.empty()) return "";
  return devices.size() == 1 ? *devices.begin() : "several devices";
}

std::string PointGroup::status(std::int64_t expected_seeds) const {
  if (points.empty()) return "not in the grid";
  std::map<std::string, int> counts;
  for (auto* p : points) ++counts[p->state];
  int missing_extra = 0;
  if (expected_seeds > static_cast<std::int64_t>(points.size()))
    missing_extra = static_cast<int>(expected_seeds - static_cast<std::int64_t>(points.size()));
  counts["missing"] += missing_extra;
  std::string out;
  for (const char* s : kStates) {
    auto it = counts.find(s);
    if (it == counts.end() || it->second == 0) continue;
    if (!out.empty()) out += ", ";
    out += std::to_string(it->second) + " " + s;
  }
  return out;
}

std::vector<const core::StoreSnapshot*> PointGroup::completed() const {
  std::vector<const core::StoreSnapshot*> out;
  for (auto* p : points)
    if (p->state == "completed" && p->store) out.push_back(p->store.get());
  return out;
}

bool PointGroup::any_state(const std::string& state) const {
  for (auto* p : points)
    if (p->state == state) return true;
  return false;
}

const PointGroup* SweepView::find_grid(const std::vector<std::string>& axis_values) const {
  for (auto& g : groups)
    if (g.variant.empty() && g.axis_values == axis_values) return &g;
  return nullptr;
}

std::vector<std::pair<std::string, const PointGroup*>> SweepView::axis_rows(size_t k) const {
  std::vector<std::pair<std::string, const PointGroup*>> rows;
  const auto& axes = sweep->axes;
  std::vector<std::string> want;
  for (auto& a : axes) want.push_back(a.target);
  for (auto& v : axes.at(k).values) {
    want[k] = v;
    rows.emplace_back(v, find_grid(want));
  }
  return rows;
}

bool outside_grid(const SweepData& sweep, const SweepPoint& p) { return sweep.has_sweep_file && !p.in_grid; }

SweepView make_view(const SweepData& sweep, const std::string& test_set) {
  SweepView view;
  view.sweep = &sweep;
  view.test_set = test_set;
  std::vector<std::string> targets;
  for (auto& a : sweep.axes) targets.push_back(a.target);

  std::map<std::pair<std::string, std::vector<std::string>>, size_t> index;
  for (auto& p : sweep.points) {
    if (p.state == "unreadable" && !p.in_grid) continue;  // cannot be placed
    if (outside_grid(sweep, p)) continue;
    auto key = std::make_pair(p.variant, p.axis_values);
    auto it = index.find(key);
    if (it == index.end()) {
      PointGroup g;
      g.variant = p.variant;
      g.axis_values = p.axis_values;
      index[key] = view.groups.size();
      view.groups.push_back(std::move(g));
      it = index.find(key);
    }
    PointGroup& g = view.groups[it->second];
    g.points.push_back(&p);
    if (g.kind.empty()) g.kind = p.kind;
  }

  // Keys and labels: variant name, or the axes that differ from the targets
  // (the label with the attention layers as built).
  for (auto& g : view.groups) {
    std::string varied, varied_label;
    for (size_t k = 0; k < sweep.axes.size() && k < g.axis_values.size(); ++k) {
      if (g.axis_values[k] == targets[k]) continue;
      if (!varied.empty()) varied += " ", varied_label += " ";
      varied += sweep.axes[k].key + "=" + display_value(sweep.axes[k].key, g.axis_values[k]);
      varied_label += sweep.axes[k].key + "=" + axis_label(sweep.axes[k].key, g.axis_values[k], &g);
    }
    if (g.variant.empty()) {
      g.base = varied.empty();
      g.key = varied.empty() ? "base" : varied;
      g.label = varied.empty() ? (g.kind.empty() ? std::string("hybrid") : g.kind) : varied_label;
    } else {
      // A variant run at the base alone is its name; one run on every grid point names its axes.
      int configurations = 0;
      for (auto& other : view.groups) configurations += other.variant == g.variant;
      const bool alone = varied.empty() || configurations == 1;
      g.key = alone ? g.variant : g.variant + " " + varied;
      g.label = alone ? g.variant : g.variant + " " + varied_label;
    }
  }

  // Baseline rows: each variant at the targets (or its first configuration), then the base.
  std::vector<const PointGroup*> variants;
  for (auto& name : sweep.variants) {
    const PointGroup* pick = nullptr;
    for (auto& g : view.groups) {
      if (g.variant != name) continue;
      if (!pick) pick = &g;
      if (g.axis_values == targets) {
        pick = &g;
        break;
      }
    }
    if (pick) variants.push_back(pick);
  }
  std::stable_sort(variants.begin(), variants.end(),
                   [](const PointGroup* a, const PointGroup* b) { return kind_rank(a->kind) < kind_rank(b->kind); });
  for (auto* g : variants)
    if (!view.reference && g->kind == "transformer") view.reference = g;
  if (!view.reference)
    for (auto* g : variants)
      if (lower(g->variant).find("transformer") != std::string::npos) {
        view.reference = g;
        break;
      }
  view.models = variants;
  view.base = view.find_grid(targets);
  if (view.base) view.models.push_back(view.base);
  return view;
}

std::string choose_test_set(const SweepData& sweep, const std::string& wanted) {
  if (!wanted.empty()) return wanted;
  std::vector<std::string> sets;
  for (auto& p : sweep.points) {
    if (!p.store) continue;
    for (auto& [path, value] : p.store->scalars) {
      const auto slash = path.find('/');
      if (slash == std::string::npos || path.substr(slash + 1) != "bleu") continue;
      const std::string set = path.substr(0, slash);
      if (set == "test") return set;
      if (std::find(sets.begin(), sets.end(), set) == sets.end()) sets.push_back(set);
    }
  }
  return sets.empty() ? "test" : sets.front();
}

std::vector<double> scalar_values(const PointGroup& group, const std::string& path, double scale) {
  std::vector<double> out;
  for (auto* s : group.completed()) {
    auto it = s->scalars.find(path);
    out.push_back(it == s->scalars.end() || !core::result_current(*s, path) ? kNaN : it->second * scale);
  }
  return out;
}

std::vector<double> table_values(const PointGroup& group, const std::string& path, const std::string& row,
                                 const std::string& column, double scale) {
  std::vector<double> out;
  for (auto* s : group.completed()) {
    double v = kNaN;
    auto it = s->tables.find(path);
    if (it != s->tables.end() && core::result_current(*s, path)) {
      const core::ResultTable& t = it->second;
      auto r = std::find(t.rows.begin(), t.rows.end(), row);
      auto c = std::find(t.columns.begin(), t.columns.end(), column);
      if (r != t.rows.end() && c != t.columns.end() && t.values.size() == t.rows.size() * t.columns.size())
        v = t.at(static_cast<size_t>(r - t.rows.begin()), static_cast<size_t>(c - t.columns.begin())) * scale;
    }
    out.push_back(v);
  }
  return out;
}

bool any_table_column(const SweepData& sweep, const std::string& path, const std::string& column) {
  for (auto& p : sweep.points) {
    if (!p.store || outside_grid(sweep, p)) continue;
    auto it = p.store->tables.find(path);
    if (it == p.store->tables.end()) continue;
    const auto& cols = it->second.columns;
    if (std::find(cols.begin(), cols.end(), column) != cols.end()) return true;
  }
  return false;
}

std::vector<std::string> table_row_labels(const SweepData& sweep, const std::string& path) {
  std::vector<std::string> labels;
  for (auto& p : sweep.points) {
    if (!p.store || outside_grid(sweep, p)) continue;
    auto it = p.store->tables.find(path);
    if (it == p.store->tables.end()) continue;
    // Merge keeping each store's order: a new label goes after the label before it.
    size_t at = 0;
    for (auto& r : it->second.rows) {
      auto found = std::find(labels.begin(), labels.end(), r);
      if (found == labels.end()) {
        labels.insert(labels.begin() + static_cast<std::ptrdiff_t>(at), r);
        ++at;
      } else {
        at = static_cast<size_t>(found - labels.begin()) + 1;
      }
    }
  }
  return labels;
}

std::string file_stem(const std::string& name) {
  std::string out;
  for (char c : name) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_') ? c : '_';
  return out.empty() ? "_" : out;
}

}  // namespace mambamt::results::detail

namespace mambamt::results::detail {
namespace {

Curve curve_from(const std::map<double, std::vector<double>>& by_x) {
  Curve c;
  for (auto& [x, values] : by_x) {
    ReportCell cell = summarize(values);
    if (!cell.has_value()) continue;
    c.x.push_back(x);
    c.mean.push_back(cell.mean);
    c.std.push_back(cell.std);
    c.n.push_back(cell.n);
  }
  return c;
}

}  // namespace

Curve metric_curve(const PointGroup& group, const std::string& metric) {
  std::map<double, std::vector<double>> by_step;
  for (auto* p : group.points) {
    if (!p->store) continue;
    auto it = p->store->metrics.find(metric);
    if (it == p->store->metrics.end()) continue;
    for (auto& pt : it->second) by_step[static_cast<double>(pt.step)].push_back(pt.value);
  }
  return curve_from(by_step);
}

Curve memory_curve(const PointGroup& group, const std::string& column) {
  std::map<double, std::vector<double>> by_length;
  for (auto* s : group.completed()) {
    auto it = s->tables.find("efficiency/memory_by_length");
    if (it == s->tables.end()) continue;
    const core::ResultTable& t = it->second;
    auto c = std::find(t.columns.begin(), t.columns.end(), column);
    if (c == t.columns.end() || t.values.size() != t.rows.size() * t.columns.size()) continue;
    for (size_t r = 0; r < t.rows.size(); ++r) {
      double length;
      if (!parse_number(t.rows[r], length)) continue;
      by_length[length].push_back(t.at(r, static_cast<size_t>(c - t.columns.begin())));
    }
  }
  return curve_from(by_length);
}

}  // namespace mambamt::results::detail
