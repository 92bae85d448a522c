#pragma once
// Grid expansion: a grid file's [grid] axes (cartesian product, or one factor
// at a time), times sweep.seeds, plus [[variant]] points, minus [[exclude]]
// patterns, into experiment points with stable ids.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/config.h"

namespace mambamt::orchestrator {

struct GridPoint {
  // The experiment id (core::ExperimentConfig::id()). An invalid point (a
  // combination the config rejects) gets "x" + a hash of its overrides, so it
  // too has a stable id and a store that says why it failed.
  std::string id;
  std::string name;     // label: the variant name, or the varied keys ("model.d_state=32 ...")
  std::string variant;  // "" for grid points
  int64_t seed = 0;
  std::vector<std::string> axis_values;  // each grid axis's value for this point (TOML text)
  std::vector<std::pair<std::string, std::string>> overrides;  // what was applied to the base
  std::optional<core::ExperimentConfig> config;  // absent for an invalid point
  std::string error;                             // why the point is invalid
  double cost = 0;                               // estimated training cost, PFLOP
  // The attention layers as built (models::attention_label: "2/12 (1:5)"), and
  // where model.attention_ratio asks for another ratio, why (else "").
  std::string attention, attention_warning;
  bool valid() const { return config.has_value(); }
};

struct ExpandedGrid {
  core::GridConfig grid;
  std::vector<std::string> axis_keys;    // grid axes in file order
  std::vector<std::string> base_values;  // the base's value of each axis
  std::vector<GridPoint> points;         // in grid order, variants last; ids unique
  // Points that resolved to an experiment already in the list (same id),
  // e.g. a variant equal to the base: "name -> id" notes for --dry-run.
  std::vector<std::string> duplicates;
};

ExpandedGrid expand_grid(const core::GridConfig& grid);

// The points' attention-ratio warnings (GridPoint::attention_warning), each
// once: "warning: <the warning> (<n> points, e.g. <name>)". What `sweep
// --dry-run`, `plan GRID` and `config check GRID` print.
std::vector<std::string> attention_warnings(const ExpandedGrid& grid);

// Estimated training cost in PFLOP: 6 x (parameters as models/plan.h counts
// them, less one embedding table) x training tokens (max_steps x max_tokens x
// accum_steps). Only used to order the work (most expensive first) and for
// --dry-run; it is not a measurement.
double estimate_cost_pflop(const core::ExperimentConfig& config);

}  // namespace mambamt::orchestrator
