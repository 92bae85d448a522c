#pragma once
// The collector: a sweep's stores -> the study's tables, plots and summary
// (`mambamt collect RUN_DIR`). It reads runs/<sweep>/sweep.h5 (the points the
// grid expects, with their axis values), runs/<sweep>/sweep.toml (axes, base,
// variants) and every runs/<sweep>/exp/*/store.h5, at any time: while the sweep
// runs, unfinished points are shown with their state (running, pending,
// interrupted, failed, missing = no store yet), never dropped; an unreadable
// store is reported by path and skipped. Without sweep.h5 the points are what
// the stores say, placed on the axes of sweep.toml by their configs.
//
// Output (results/<sweep>/ beside runs/, or CollectOptions::out_dir):
//   report.md            status counts, every table, the plots, the points not completed
//   summary.h5           every aggregated number (layout below)
//   plots/*.svg          quality vs decoding speed (Pareto front), quality by length,
//                        validation loss vs step, memory vs sequence length, one bar chart per axis
//   plots/explain/*.svg  per model (variants and the base): attention and occlusion heatmaps of
//                        the first short test sentences (results/explain/<k>/... of its store)
//   tables.md            (md)   every table
//   tables/<name>.csv    (csv)  one file per table, plus points.csv
//   tables.tex           (tex)  a standalone LaTeX document (booktabs) with every table,
//                               and tables/<name>.tex fragments to \input
//   tables/<name>.json   (json) the CSV's records; summary.json: status, points and tables nested
// Tables: ablation_<axis> (one per grid axis: rows are the axis values, the other
// axes at the base point, with the p-values of the same paired test against
// the axis's base value), baselines (variants and the base hybrid, speed and
// memory relative to the Transformer, and the p-values of sacreBLEU's paired
// bootstrap test of BLEU and chrF against the Transformer of the same seed,
// from the stores' results/<set>/segments; the largest over the seeds),
// length_bleu and length_chrf (quality by
// source-length bucket), extrapolation_bleu (1x/2x/4x passages),
// document_context (each document-level model against its sentence-level
// twin, when the sweep has one: contrastive accuracy, BLEU and entity
// consistency with the gain seed by seed), contrastive_pronoun,
// contrastive_distance, entities_frequency, entities_consistency (stores
// with entity consistency only) and cross_attention_gates (configurations
// with gated cross-attention: how often its gates are nearly closed, and what
// eval.gate_skip skipped; with some skipping, the other tables get a
// "Cross-attn skipped (%)" column), alignment_by_layer (stores with gold
// alignments: the alignment error rate of each attention layer and of
// occlusion, models and the values of a model.cross_attn_every axis; the
// other tables then get "AER (%)", the best layer's, and "Occlusion AER (%)",
// which pure Mamba has too).
//
// summary.h5 (plain HDF5):
//   /                     attrs format = "mambamt-summary", format_version = 1, sweep, run_dir,
//                         sweep_state, design, test_set, points_source (sweep.h5 | stores), created, partial
//   /status               attrs: one int64 per state (completed, running, pending, interrupted,
//                         failed, missing, unreadable), total, outside_grid (stores of points
//                         a changed grid no longer has: not in the other counts, nor in the tables),
//                         older_evaluation and unsealed (as state_counts below)
//   /points/{id,name,variant,state,error,store}  string arrays; seed, in_grid int64 arrays;
//                         axis_values 2-D strings (points x axes); attrs axes, base_values, target_values
//   /problems             string array: "path: reason" of every unreadable file
//   /tables/<name>        mean, std (float64), n, best (int64): 2-D rows x columns; attrs rows, columns
//                         (machine keys), title, caption, row_title; row_labels, row_status,
//                         row_base, column_titles, column_relative
//   /curves/valid_loss/<configuration>          [steps x 4]: step, mean, std, n over seeds
//   /curves/memory_by_length/<model> <column>   [lengths x 4]: length, mean, std, n
// Numbers are in the tables' units: BLEU/chrF 0-100, accuracy and recall in
// percent, tokens/s, MiB, parameters as a count, relative columns in percent.
#include <cstdint>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "core/store.h"
#include "results/report_table.h"

namespace mambamt::results {

struct CollectOptions {
  // The sweep's run directory: runs/<sweep>.
  std::string run_dir;
  // Table formats to write besides report.md, summary.h5 and the plots: any of
  // "md", "csv", "tex", "json".
  std::vector<std::string> formats = {"md"};
  // Output directory; "" = results/<sweep> next to the runs/ folder that holds run_dir.
  std::string out_dir;
  // Test set whose results/<set>/... scores fill the tables; "" = "test" when a
  // store has it, else the first set found.
  std::string test_set;
  // Draw the SVG plots.
  bool plots = true;
};

// Parses "md,csv,tex,json" (any subset, any order). Throws UsageError naming an
// unknown format.
std::vector<std::string> parse_formats(const std::string& list);

// One axis of the grid.
struct SweepAxis {
  std::string key;                  // dotted config key: "model.d_state"
  std::vector<std::string> values;  // canonical TOML text, grid order
  std::string base;                 // the base's value ("" when unknown)
  // The value the other axes' tables hold this axis at: the base's value when
  // points have it, else the axis's first value.
  std::string target;
};

// One expected or found experiment.
struct SweepPoint {
  std::string id;
  std::string name;     // label: variant name or the varied keys
  std::string variant;  // "" for grid points
  std::int64_t seed = 0;
  std::vector<std::string> axis_values;  // one per SweepData::axes, canonical TOML text
  // pending, running, completed, failed, interrupted (the store's state),
  // missing (in the grid, no store yet) or unreadable (store.h5 cannot be read).
  std::string state;
  std::string store_path;  // "" when missing
  std::string error;       // last_error of a failed store, or why it is unreadable
  std::string kind;        // model.kind ("" when unknown)
  bool in_grid = true;     // listed by sweep.h5 (false: a store the sweep file does not list)
  // From the store's config ("" and -1 without a readable store): every field
  // but the seed, the machine's and those of document context (the keys of
  // kDocumentContextKeys), so a document-level model and its sentence-level
  // twin share it; and data.context_sentences.
  std::string context_free_config;
  std::int64_t context_sentences = -1;
  std::shared_ptr<const core::StoreSnapshot> store;  // null unless readable
  // A readable store without a seal (written by h5py or an older mambamt):
  // damage to it is not caught when it is read.
  bool unsealed = false;
};

// The config fields that make a model document-level rather than
// sentence-level (a sentence-level model: data.context_sentences <= 1).
inline constexpr const char* kDocumentContextKeys[] = {"data.context_sentences", "data.context_side",
                                                       "data.multi_resolution", "data.sentence_steps",
                                                       "eval.doc_decode"};

struct SweepData {
  std::string name;      // sweep name (the run directory's name)
  std::string run_dir;
  std::string state;     // sweep.h5 state (running, interrupted, completed), "" without sweep.h5
  std::string design;    // cartesian or one_factor, "" when unknown
  bool has_sweep_file = false;  // points came from sweep.h5
  bool has_grid_file = false;   // sweep.toml was read
  std::int64_t seeds_per_point = 0;  // from sweep.toml (0 = unknown)
  std::vector<SweepAxis> axes;
  std::vector<std::string> variants;  // variant names in grid order
  std::vector<SweepPoint> points;     // sweep.h5 order, then stores it does not list
  std::vector<std::string> problems;  // "path: reason" for every file that could not be read
};

// Reads a sweep's run directory. Throws InputError when run_dir is not a run
// directory (neither sweep.h5, sweep.toml nor exp/).
SweepData load_sweep(const std::string& run_dir, std::ostream& log);

// Point counts by state (every state name, zeros included, and "total") of the
// grid's points, "outside_grid": stores of points it no longer has, and
// "older_evaluation": completed points whose store an older evaluation wrote
// (results/evaluation/version below core::kEvaluationVersion), and
// "unsealed": readable stores without a seal, in the grid or not
// (`mambamt store seal RUN_DIR` seals them).
std::map<std::string, std::int64_t> state_counts(const SweepData& sweep);

struct CollectReport {
  std::string out_dir;
  std::vector<std::string> files;  // every file written (paths under out_dir)
  std::map<std::string, std::int64_t> counts;  // state_counts of the sweep
  std::vector<std::string> problems;           // unreadable files, "path: reason"
  bool partial = false;                        // not every expected point is completed
  std::vector<ReportTable> tables;             // the tables as written
};

// Everything above. Progress and problems go to `log` one line each. Throws
// InputError for an unusable run directory, UsageError for a bad option.
CollectReport collect(const CollectOptions& options, std::ostream& log);

// The tables of a loaded sweep (what collect() writes), for callers that render
// them elsewhere (e.g. `mambamt status`).
std::vector<ReportTable> build_tables(const SweepData& sweep, const std::string& test_set);

}  // namespace mambamt::results
