#include "orchestrator/grid.h"

#include <algorithm>
#include <map>
#include <set>

#include "core/error.h"
#include "models/plan.h"

namespace mambamt::orchestrator {

namespace {

using Overrides = std::vector<std::pair<std::string, std::string>>;

std::string label_of(const Overrides& varied) {
  std::string out;
  for (auto& [k, v] : varied) {
    if (!out.empty()) out += " ";
    std::string value = v;
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') value = value.substr(1, value.size() - 2);
    out += k + "=" + value;
  }
  return out;
}

// Canonical text of a TOML value as it would be stored in a config (so
// "0.50" in an [[exclude]] matches 0.5 from a grid axis).
std::string canonical_value(const core::GridConfig& grid, const std::string& key, const std::string& text) {
  try {
    return core::config_value_text(grid.point({{key, text}}), key);
  } catch (const InputError&) {
    return text;  // the value alone makes an invalid base; compare literally
  }
}

}  // namespace

std::vector<std::string> attention_warnings(const ExpandedGrid& g) {
  std::vector<std::string> order;
  std::map<std::string, std::pair<int, std::string>> seen;  // warning -> (points, first point's name)
  for (const GridPoint& p : g.points) {
    if (p.attention_warning.empty()) continue;
    auto [it, first] = seen.emplace(p.attention_warning, std::make_pair(0, p.name));
    if (first) order.push_back(p.attention_warning);
    ++it->second.first;
  }
  std::vector<std::string> out;
  for (const std::string& w : order) {
    const auto& [n, name] = seen.at(w);
    out.push_back("warning: " + w + " (" + std::to_string(n) + (n == 1 ? " point: " : " points, e.g. ") + name + ")");
  }
  return out;
}

double estimate_cost_pflop(const core::ExperimentConfig& c) {
  // The model's own parameter count (models/plan.h counts every kind from
  // its layers, without building the model), less one embedding table:
  // lookups cost nothing, the output projection does.
  const int64_t vocab = c.data.vocab_size;
  const double params = static_cast<double>(models::count_parameters(c.model, vocab)) -
                        static_cast<double>(vocab) * static_cast<double>(c.model.d_model);
  const double tokens = static_cast<double>(c.train.max_steps) * static_cast<double>(c.data.max_tokens) *
                        static_cast<double>(c.train.accum_steps);
  return 6.0 * std::max(params, 0.0) * tokens / 1e15;
}

ExpandedGrid expand_grid(const core::GridConfig& grid) {
  ExpandedGrid out;
  out.grid = grid;
  for (auto& ax : grid.axes) out.axis_keys.push_back(ax.key);

  // The base must be a valid experiment on its own.
  core::ExperimentConfig base = grid.point({});
  for (auto& ax : grid.axes) out.base_values.push_back(core::config_value_text(base, ax.key));

  // Axis combinations as (value index per axis).
  std::vector<std::vector<size_t>> combos;
  size_t n_axes = grid.axes.size();
  if (n_axes == 0) {
    combos.push_back({});
  } else if (grid.sweep.design == "one_factor") {
    // The base point, then every other value of each axis alone. An axis whose
    // base value is not among its values contributes all its values.
    std::vector<size_t> base_idx(n_axes, SIZE_MAX);
    for (size_t a = 0; a < n_axes; ++a)
      for (size_t v = 0; v < grid.axes[a].values.size(); ++v)
        if (canonical_value(grid, grid.axes[a].key, grid.axes[a].values[v]) == out.base_values[a]) base_idx[a] = v;
    combos.push_back(base_idx);
    for (size_t a = 0; a < n_axes; ++a)
      for (size_t v = 0; v < grid.axes[a].values.size(); ++v) {
        if (v == base_idx[a]) continue;
        std::vector<size_t> c = base_idx;
        c[a] = v;
        combos.push_back(c);
      }
  } else {
    std::vector<size_t> idx(n_axes, 0);
    while (true) {
      combos.push_back(idx);
      size_t a = n_axes;
      while (a > 0) {
        --a;
        if (++idx[a] < grid.axes[a].values.size()) break;
        idx[a] = 0;
        if (a == 0) {
          a = SIZE_MAX;
          break;
        }
      }
      if (a == SIZE_MAX) break;
    }
  }

  // Canonical exclude patterns.
  std::vector<std::vector<std::pair<std::string, std::string>>> excludes;
  for (auto& ex : grid.excludes) {
    std::vector<std::pair<std::string, std::string>> m;
    for (auto& [k, v] : ex.match) m.emplace_back(k, canonical_value(grid, k, v));
    excludes.push_back(m);
  }

  std::set<std::string> seen;
  std::map<std::string, std::string> name_of_id;

  auto add_point = [&](const std::string& variant, const std::string& label, const Overrides& overrides,
                       const std::vector<core::SourcePlace>& places, int64_t seed) {
    GridPoint p;
    p.variant = variant;
    p.seed = seed;
    p.name = label;
    p.overrides = overrides;
    Overrides with_seed = overrides;
    std::vector<core::SourcePlace> with_places = places;
    with_seed.emplace_back("train.seed", std::to_string(seed));
    with_places.push_back({grid.source, 0, 0});
    try {
      core::ExperimentConfig c = grid.point(with_seed, with_places);
      for (auto& m : excludes) {
        bool all = true;
        for (auto& [k, v] : m) all = all && core::config_value_text(c, k) == v;
        if (all) return;
      }
      p.id = c.id();
      for (auto& key : out.axis_keys) p.axis_values.push_back(core::config_value_text(c, key));
      p.cost = estimate_cost_pflop(c);
      const models::Plan plan = models::make_plan(c.model);
      p.attention = models::attention_label(c.model, plan);
      p.attention_warning = models::attention_ratio_warning(c.model, plan);
      p.config = std::move(c);
    } catch (const InputError& e) {
      // Excludes match invalid points by their override text.
      for (auto& m : excludes) {
        bool all = true;
        for (auto& [k, v] : m) {
          bool hit = false;
          for (auto& [ok, ov] : with_seed) hit = hit || (ok == k && canonical_value(grid, k, ov) == v);
          all = all && hit;
        }
        if (all) return;
      }
      std::string key_text;
      for (auto& [k, v] : with_seed) key_text += k + "=" + v + "\n";
      p.id = "x" + core::short_hash(grid.sweep.name + "\n" + key_text, 11);
      p.error = e.what();
      for (size_t a = 0; a < out.axis_keys.size(); ++a) {
        std::string v = out.base_values[a];
        for (auto& [k, val] : overrides)
          if (k == out.axis_keys[a]) v = canonical_value(grid, k, val);
        p.axis_values.push_back(v);
      }
    }
    if (!seen.insert(p.id).second) {
      out.duplicates.push_back((p.name.empty() ? std::string("base") : p.name) + " (seed " + std::to_string(seed) +
                               ") -> " + p.id + " (same as " + name_of_id[p.id] + ")");
      return;
    }
    name_of_id[p.id] = p.name.empty() ? "base" : p.name;
    out.points.push_back(std::move(p));
  };

  auto grid_overrides = [&](const std::vector<size_t>& combo, Overrides& ov, std::vector<core::SourcePlace>& places,
                            Overrides& varied) {
    for (size_t a = 0; a < n_axes; ++a) {
      if (combo[a] == SIZE_MAX) continue;  // one_factor: axis at the base value
      const auto& ax = grid.axes[a];
      ov.emplace_back(ax.key, ax.values[combo[a]]);
      places.push_back(ax.value_places[combo[a]]);
      // The label shows what differs from the base (all axes for cartesian).
      if (grid.sweep.design == "cartesian" || canonical_value(grid, ax.key, ax.values[combo[a]]) != out.base_values[a])
        varied.emplace_back(ax.key, ax.values[combo[a]]);
    }
  };

  for (int64_t seed : grid.sweep.seeds)
    for (auto& combo : combos) {
      Overrides ov, varied;
      std::vector<core::SourcePlace> places;
      grid_overrides(combo, ov, places, varied);
      add_point("", varied.empty() ? "base" : label_of(varied), ov, places, seed);
    }

  for (auto& var : grid.variants)
    for (int64_t seed : grid.sweep.seeds) {
      if (!var.with_grid) {
        add_point(var.name, var.name, var.overrides, var.override_places, seed);
        continue;
      }
      for (auto& combo : combos) {
        Overrides ov, varied;
        std::vector<core::SourcePlace> places;
        grid_overrides(combo, ov, places, varied);
        ov.insert(ov.end(), var.overrides.begin(), var.overrides.end());
        places.insert(places.end(), var.override_places.begin(), var.override_places.end());
        add_point(var.name, var.name + (varied.empty() ? "" : " " + label_of(varied)), ov, places, seed);
      }
    }
  return out;
}

}  // namespace mambamt::orchestrator
