// Reading a sweep's run directory for the collector: sweep.h5 (expected points),
// sweep.toml (axes, base, variants) and every exp/*/store.h5.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <optional>
#include <set>

#include "core/config.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/hdf5.h"
#include "core/store.h"
#include "results/collector.h"
#include "results/detail/collector_model.h"

namespace fs = std::filesystem;

namespace mambamt::results {
namespace {

using detail::canonical_value;

// Config keys that differ between points without being a study axis.
bool bookkeeping_key(const std::string& key) {
  return key == "train.seed" || key == "train.device" || key == "train.threads" || key == "data.tokenizer_dir" ||
         key == "data.train" || key == "data.valid" || key == "data.test" || key == "data.contrastive";
}

struct SweepFile {
  std::vector<std::string> axes, base_values;
  std::vector<SweepPoint> points;
  std::string state, design;
};

SweepFile read_sweep_file(const std::string& path) {
  namespace h5 = core::h5;
  SweepFile s;
  h5::File f = h5::File::open(path);
  h5::Group root = f.root();
  if (root.attr_string_or("format", "") != "mambamt-sweep")
    throw InputError(path + ": not a mambamt sweep file (format attribute is not \"mambamt-sweep\")");
  s.state = root.attr_string_or("state", "");
  s.design = root.attr_string_or("design", "");
  if (!root.has_group("points")) throw InputError(path + ": no /points group");
  h5::Group pts = root.group("points");
  if (pts.has_attr("axes")) s.axes = pts.attr_strings("axes");
  if (pts.has_attr("base_values")) s.base_values = pts.attr_strings("base_values");
  if (!s.base_values.empty() && s.base_values.size() != s.axes.size())
    throw InputError(path + ": /points base_values has " + std::to_string(s.base_values.size()) + " entries for " +
                     std::to_string(s.axes.size()) + " axes");
  auto strings = [&](const char* name) {
    return pts.has_dataset(name) ? pts.dataset(name).read_strings() : std::vector<std::string>{};
  };
  std::vector<std::string> ids = strings("id"), names = strings("name"), variants = strings("variant");
  std::vector<int64_t> seeds = pts.has_dataset("seed") ? pts.dataset("seed").read_ints() : std::vector<int64_t>{};
  std::vector<std::string> values = strings("axis_values");
  const size_t n = ids.size(), a = s.axes.size();
  auto check = [&](size_t got, size_t want, const char* what) {
    if (got != want)
      throw InputError(path + ": /points/" + what + " has " + std::to_string(got) + " entries, expected " +
                       std::to_string(want));
  };
  if (!names.empty()) check(names.size(), n, "name");
  if (!variants.empty()) check(variants.size(), n, "variant");
  if (!seeds.empty()) check(seeds.size(), n, "seed");
  if (a > 0) check(values.size(), n * a, "axis_values");
  for (size_t i = 0; i < n; ++i) {
    SweepPoint p;
    p.id = ids[i];
    p.name = names.empty() ? "" : names[i];
    p.variant = variants.empty() ? "" : variants[i];
    p.seed = seeds.empty() ? 0 : seeds[i];
    for (size_t k = 0; k < a; ++k) p.axis_values.push_back(canonical_value(values[i * a + k]));
    p.state = "missing";
    s.points.push_back(std::move(p));
  }
  return s;
}

// Every dotted key of a stored config with its value as canonical TOML text.
// A config that no longer validates (a store written by another version, or a
// canonical form the current checks reject) is read line by line instead:
// canonical TOML has one `key = value` per line under [section] headers, which
// is enough to place the store on the axes. `note` says which way was taken.
using ConfigValues = std::map<std::string, std::string>;

ConfigValues config_values(const std::string& text, const std::string& source, std::string& note) {
  ConfigValues out;
  try {
    core::ExperimentConfig config = core::parse_experiment(text, source);
    for (auto& key : core::experiment_keys()) out[key] = canonical_value(core::config_value_text(config, key));
    return out;
  } catch (const Error& e) {
    note = e.what();
  }
  std::string section;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    start = end + 1;
    size_t b = line.find_first_not_of(" \t\r");
    if (b == std::string::npos || line[b] == '#') continue;
    line = line.substr(b);
    if (line[0] == '[') {
      section = line.substr(1, line.find(']') - 1);
      continue;
    }
    size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string key = canonical_value(line.substr(0, eq));
    if (key.size() >= 2 && key.front() == '"' && key.back() == '"') key = key.substr(1, key.size() - 2);
    out[section.empty() ? key : section + "." + key] = canonical_value(line.substr(eq + 1));
  }
  return out;
}

std::string value_or(const ConfigValues& values, const std::string& key) {
  auto it = values.find(key);
  return it == values.end() ? "" : it->second;
}

// Every `key = value` of a config but the seed, the machine's fields and those
// of document context, one per line.
std::string context_free_config(const ConfigValues& config) {
  std::string out;
  for (auto& [key, value] : config) {
    if (key == "train.seed" || key == "train.device" || key == "train.threads" || key == "data.tokenizer_dir" ||
        std::find(std::begin(kDocumentContextKeys), std::end(kDocumentContextKeys), key) !=
            std::end(kDocumentContextKeys))
      continue;
    out += key + " = " + value + "\n";
  }
  return out;
}

std::string unquote(const std::string& v) {
  return v.size() >= 2 && v.front() == '"' && v.back() == '"' ? v.substr(1, v.size() - 2) : v;
}

bool contains_value(const std::vector<std::string>& values, const std::string& v) {
  return std::find(values.begin(), values.end(), v) != values.end();
}

// Numeric values sort by number, others as text.
void sort_values(std::vector<std::string>& values) {
  auto number = [](const std::string& s, double& out) {
    char* end = nullptr;
    out = std::strtod(s.c_str(), &end);
    return !s.empty() && end == s.c_str() + s.size();
  };
  std::stable_sort(values.begin(), values.end(), [&](const std::string& a, const std::string& b) {
    double x, y;
    if (number(a, x) && number(b, y)) return x < y;
    return a < b;
  });
}

bool numeric_order(const std::vector<std::string>& values, bool ascending) {
  for (size_t i = 0; i < values.size(); ++i) {
    char* end = nullptr;
    const double v = std::strtod(values[i].c_str(), &end);
    if (values[i].empty() || end != values[i].c_str() + values[i].size()) return false;
    if (i > 0) {
      const double prev = std::strtod(values[i - 1].c_str(), nullptr);
      if (ascending ? !(prev < v) : !(prev > v)) return false;
    }
  }
  return true;
}
bool is_ascending(const std::vector<std::string>& values) { return numeric_order(values, true); }
bool is_descending(const std::vector<std::string>& values) { return values.size() > 1 && numeric_order(values, false); }

}  // namespace

SweepData load_sweep(const std::string& run_dir_in, std::ostream& log) {
  std::string run_dir = run_dir_in;
  while (run_dir.size() > 1 && run_dir.back() == '/') run_dir.pop_back();
  const fs::path dir(run_dir);
  core::require_run_directory(run_dir);
  const fs::path sweep_h5 = dir / "sweep.h5", sweep_toml = dir / "sweep.toml", exp = dir / "exp";

  SweepData sweep;
  sweep.run_dir = run_dir;
  sweep.name = dir.filename().string();

  // The grid: axes in file order, the base's values, the variants.
  std::optional<core::GridConfig> grid;
  if (fs::exists(sweep_toml)) {
    try {
      grid = core::load_grid(sweep_toml.string());
      sweep.has_grid_file = true;
      sweep.seeds_per_point = static_cast<int64_t>(grid->sweep.seeds.size());
      sweep.design = grid->sweep.design;
      for (auto& v : grid->variants) sweep.variants.push_back(v.name);
    } catch (const Error& e) {
      sweep.problems.push_back(sweep_toml.string() + ": " + e.what());
      log << "collect: cannot read " << sweep_toml.string() << ": " << e.what() << "\n";
    }
  }
  std::vector<std::string> grid_base;  // one per grid->axes
  if (grid) {
    try {
      core::ExperimentConfig base = grid->point({});
      for (auto& axis : grid->axes) grid_base.push_back(canonical_value(core::config_value_text(base, axis.key)));
    } catch (const Error& e) {
      sweep.problems.push_back(sweep_toml.string() + ": base: " + e.what());
      grid_base.clear();
    }
  }

  // Expected points.
  std::vector<std::string> base_values;
  if (fs::exists(sweep_h5)) {
    try {
      SweepFile sf = read_sweep_file(sweep_h5.string());
      sweep.has_sweep_file = true;
      sweep.state = sf.state;
      if (!sf.design.empty()) sweep.design = sf.design;
      for (auto& key : sf.axes) sweep.axes.push_back(SweepAxis{key, {}, "", ""});
      for (auto& v : sf.base_values) base_values.push_back(canonical_value(v));
      sweep.points = std::move(sf.points);
      for (auto& p : sweep.points)
        if (!p.variant.empty() && !contains_value(sweep.variants, p.variant)) sweep.variants.push_back(p.variant);
    } catch (const Error& e) {
      sweep.problems.push_back(sweep_h5.string() + ": " + e.what());
      log << "collect: cannot read " << sweep_h5.string() << " (points come from the stores): " << e.what() << "\n";
    }
  }
  if (!sweep.has_sweep_file && grid) {
    for (size_t i = 0; i < grid->axes.size(); ++i) sweep.axes.push_back(SweepAxis{grid->axes[i].key, {}, "", ""});
    base_values = grid_base;
  }

  // Stores.
  std::map<std::string, size_t> by_id;
  for (size_t i = 0; i < sweep.points.size(); ++i) by_id[sweep.points[i].id] = i;
  std::vector<fs::path> dirs;
  if (fs::is_directory(exp))
    for (auto& entry : fs::directory_iterator(exp))
      if (entry.is_directory()) dirs.push_back(entry.path());
  std::sort(dirs.begin(), dirs.end());

  std::vector<std::pair<size_t, ConfigValues>> store_configs;  // point index -> config values
  bool infer_axes = !sweep.has_sweep_file && !grid;
  std::vector<std::string> store_paths;
  for (auto& d : dirs) store_paths.push_back((d / "store.h5").string());
  core::ExperimentStore::read_ahead(store_paths);
  for (auto& d : dirs) {
    const std::string id = d.filename().string();
    const fs::path store_path = d / "store.h5";
    if (!fs::exists(store_path)) continue;  // claimed, store not written yet: the point stays missing/pending
    auto it = by_id.find(id);
    size_t index;
    if (it != by_id.end()) {
      index = it->second;
    } else {
      SweepPoint p;
      p.id = id;
      p.in_grid = false;
      p.axis_values.assign(sweep.axes.size(), "");
      index = sweep.points.size();
      sweep.points.push_back(std::move(p));
      by_id[id] = index;
    }
    SweepPoint& p = sweep.points[index];
    p.store_path = store_path.string();
    std::shared_ptr<core::StoreSnapshot> snap;
    try {
      snap = std::make_shared<core::StoreSnapshot>(core::ExperimentStore::read(store_path.string()));
    } catch (const std::exception& e) {
      p.state = "unreadable";
      p.error = e.what();
      const std::string why = core::h5::after_file(store_path.string(), e.what());
      sweep.problems.push_back(store_path.string() + ": " + why);
      log << "collect: skipping unreadable store " << store_path.string() << ": " << why << "\n";
      continue;
    }
    std::string note;
    ConfigValues config = config_values(snap->config, store_path.string() + ":/config", note);
    if (!note.empty()) log << "collect: " << store_path.string() << ": config read line by line (" << note << ")\n";
    p.store = snap;
    p.unsealed = !core::h5::has_seal(store_path.string());
    p.state = core::to_string(snap->status.state);
    p.error = snap->status.last_error;
    p.kind = unquote(value_or(config, "model.kind"));
    p.context_free_config = context_free_config(config);
    p.context_sentences = std::strtoll(value_or(config, "data.context_sentences").c_str(), nullptr, 10);
    if (p.name.empty()) p.name = snap->name;
    if (!p.in_grid) {
      p.seed = std::strtoll(value_or(config, "train.seed").c_str(), nullptr, 10);
      // Which variant: by its label (the variant name starts it).
      for (auto& v : sweep.variants)
        if (snap->name == v || snap->name.rfind(v + " ", 0) == 0) p.variant = v;
      if (p.variant.empty() && !grid && !snap->name.empty() && snap->name.find('=') == std::string::npos &&
          snap->name != "base")
        p.variant = snap->name;
      if (!p.variant.empty() && !contains_value(sweep.variants, p.variant)) sweep.variants.push_back(p.variant);
      for (size_t k = 0; k < sweep.axes.size(); ++k) p.axis_values[k] = value_or(config, sweep.axes[k].key);
    }
    if (infer_axes) store_configs.emplace_back(index, std::move(config));
  }

  // No sweep file and no grid: the axes are the keys on which the grid points' configs differ.
  if (infer_axes) {
    for (auto& key : core::experiment_keys()) {
      if (bookkeeping_key(key)) continue;
      std::set<std::string> seen;
      for (auto& [index, config] : store_configs)
        if (sweep.points[index].variant.empty()) seen.insert(value_or(config, key));
      if (seen.size() > 1) sweep.axes.push_back(SweepAxis{key, {}, "", ""});
    }
    for (auto& p : sweep.points) p.axis_values.assign(sweep.axes.size(), "");
    for (auto& [index, config] : store_configs)
      for (size_t k = 0; k < sweep.axes.size(); ++k)
        sweep.points[index].axis_values[k] = value_or(config, sweep.axes[k].key);
  }

  // Points of the grid without a store: their model kind from the grid, when there is one.
  if (grid) {
    for (auto& p : sweep.points) {
      if (!p.kind.empty()) continue;
      std::vector<std::pair<std::string, std::string>> overrides;
      for (size_t k = 0; k < sweep.axes.size(); ++k)
        if (!p.axis_values[k].empty()) overrides.emplace_back(sweep.axes[k].key, p.axis_values[k]);
      for (auto& v : grid->variants)
        if (v.name == p.variant) overrides.insert(overrides.end(), v.overrides.begin(), v.overrides.end());
      try {
        p.kind = grid->point(overrides).model.kind;
      } catch (const Error&) {
      }
    }
  }

  // Axis values (grid order when the grid is known), base and target.
  for (size_t k = 0; k < sweep.axes.size(); ++k) {
    SweepAxis& axis = sweep.axes[k];
    if (grid) {
      for (auto& ga : grid->axes)
        if (ga.key == axis.key)
          for (auto& v : ga.values) axis.values.push_back(canonical_value(v));
    }
    std::vector<std::string> extra;
    for (auto& p : sweep.points) {
      const std::string& v = p.axis_values[k];
      if (!v.empty() && p.variant.empty() && !contains_value(axis.values, v) && !contains_value(extra, v))
        extra.push_back(v);
    }
    // Values the grid does not list (a one-factor base value held by the other
    // axes' points): numeric ones go in order when the grid's values are ordered.
    const bool descending = grid && is_descending(axis.values);
    const bool ordered = !grid || is_ascending(axis.values) || descending;
    axis.values.insert(axis.values.end(), extra.begin(), extra.end());
    if (!extra.empty() && ordered) {
      sort_values(axis.values);
      if (descending) std::reverse(axis.values.begin(), axis.values.end());
    }
    if (k < base_values.size()) axis.base = base_values[k];
    bool base_present = false;
    for (auto& p : sweep.points)
      if (p.variant.empty() && !axis.base.empty() && p.axis_values[k] == axis.base) base_present = true;
    axis.target = base_present ? axis.base : (axis.values.empty() ? "" : axis.values.front());
  }

  // Test sets scored on different text (the stores' results/text/data.test.<set>
  // fingerprints differ), and COMET by different models (their text `comet`):
  // their scores sit in one column but do not compare.
  std::map<std::string, std::map<std::string, std::vector<std::string>>> test_texts;  // set -> fingerprint -> ids
  std::map<std::string, std::vector<std::string>> comet_models;                       // model -> ids
  const std::string scored_by = "scored by comet-score (";
  for (const auto& p : sweep.points) {
    if (!p.store || p.state != "completed") continue;
    for (const auto& [name, value] : p.store->texts) {
      if (name.rfind("data.test.", 0) == 0)
        test_texts[name.substr(10)][value.substr(0, value.find(' '))].push_back(p.id);
      // "scored by comet-score (<model>) on the GPU, ...": a model path may hold ")".
      const size_t model_end = value.rfind(") on the ");
      if (name == "comet" && value.rfind(scored_by, 0) == 0 && model_end != std::string::npos)
        comet_models[value.substr(scored_by.size(), model_end - scored_by.size())].push_back(p.id);
    }
  }
  auto report_mixed = [&](const std::string& what, const std::string& kind,
                          const std::map<std::string, std::vector<std::string>>& groups) {
    if (groups.size() < 2) return;
    std::string problem = (fs::path(sweep.run_dir) / "exp").string() + ": " + what + ", its scores do not compare:";
    for (const auto& [value, ids] : groups) {
      problem += " " + kind + value + " by " + std::to_string(ids.size()) + " experiment(s) (" + ids.front();
      for (size_t i = 1; i < ids.size() && i < 3; ++i) problem += ", " + ids[i];
      problem += ids.size() > 3 ? ", ...);" : ");";
    }
    problem.pop_back();
    sweep.problems.push_back(problem);
    log << "collect: " << problem << "\n";
  };
  for (const auto& [set, by_text] : test_texts)
    report_mixed("test set " + set + " was scored on different texts", "fingerprint ", by_text);
  report_mixed("COMET was scored with different models (eval.comet_model pins one)", "", comet_models);

  log << "collect: " << sweep.name << ": " << sweep.points.size() << " points"
      << (sweep.has_sweep_file ? " (sweep.h5)" : " (from the stores)") << ", " << sweep.axes.size() << " axes, "
      << sweep.variants.size() << " variants\n";
  return sweep;
}

std::map<std::string, std::int64_t> state_counts(const SweepData& sweep) {
  std::map<std::string, std::int64_t> counts;
  for (const char* s : detail::kStates) counts[s] = 0;
  counts["total"] = 0;
  counts["outside_grid"] = 0;
  counts["older_evaluation"] = 0;
  counts["unsealed"] = 0;
  for (auto& p : sweep.points) {
    if (p.unsealed) ++counts["unsealed"];
    if (detail::outside_grid(sweep, p)) {
      ++counts["outside_grid"];
      continue;
    }
    ++counts[p.state];
    ++counts["total"];
    if (p.state == "completed" && p.store && core::evaluated_by_older_version(*p.store)) ++counts["older_evaluation"];
  }
  return counts;
}

}  // namespace mambamt::results
