#pragma once
// Typed configuration: TOML -> validated structs, with every error naming the
// file, line, column and key. The fields and their defaults, checks and docs
// are listed once in core/config_fields.h.
//
// An experiment file has the sections [model] [data] (with [data.synthetic])
// [train] [eval]. A grid file adds [sweep], [base] (an experiment), [grid]
// (dotted keys -> value lists), [[variant]] (named points) and [[exclude]].
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/config_fields.h"

namespace mambamt::core {

#define MAMBAMT_DECLARE_FIELD(name, type, def, check, doc) type name = def;

struct ModelConfig {
  MAMBAMT_MODEL_FIELDS(MAMBAMT_DECLARE_FIELD)
  bool operator==(const ModelConfig&) const;
};

struct SyntheticConfig {
  MAMBAMT_SYNTHETIC_FIELDS(MAMBAMT_DECLARE_FIELD)
  bool operator==(const SyntheticConfig&) const;
};

struct DataConfig {
  MAMBAMT_DATA_FIELDS(MAMBAMT_DECLARE_FIELD)
  SyntheticConfig synthetic;
  bool operator==(const DataConfig&) const;
};

struct TrainConfig {
  MAMBAMT_TRAIN_FIELDS(MAMBAMT_DECLARE_FIELD)
  bool operator==(const TrainConfig&) const;
};

struct EvalConfig {
  MAMBAMT_EVAL_FIELDS(MAMBAMT_DECLARE_FIELD)
  bool operator==(const EvalConfig&) const;
};

struct SweepConfig {
  MAMBAMT_SWEEP_FIELDS(MAMBAMT_DECLARE_FIELD)
  bool operator==(const SweepConfig&) const;
};

#undef MAMBAMT_DECLARE_FIELD

// Where a key was written: file, line, column (line 0 = not from a file).
struct SourcePlace {
  std::string file;
  long line = 0;
  long column = 0;
};

struct ExperimentConfig {
  ModelConfig model;
  DataConfig data;
  TrainConfig train;
  EvalConfig eval;

  // Not part of the experiment's identity: where it came from, for messages.
  std::string source;                          // file it was read from
  std::map<std::string, SourcePlace> places;   // "model.d_state" -> place

  // Canonical TOML: every field (defaults filled), sections and keys sorted,
  // numbers in shortest round-trip form. Equal configs give equal text.
  std::string canonical() const;
  // Short stable hash of canonical(): 12 hex digits. Fields added after the
  // first ids were handed out count only when they differ from their default
  // (fields_hashed_when_set in config.cpp), so no upgrade changes an id.
  std::string id() const;
  // The id of the training alone: id() with the [eval] fields that training
  // does not read set to their defaults (beam_size, length_penalty, nbest,
  // doc_decode, bootstrap_samples, length_buckets, contrastive, entity_recall,
  // extrapolation, alignment, comet, max_examples, gate_skip; and, when train.valid_metric is loss,
  // the validation decoding's max_len_a, max_len_b, batch_tokens,
  // bleu_tokenize and lowercase). Experiments with equal training ids train
  // the same model; a sweep trains it once (sweep.share_training).
  std::string training_id() const;

  bool operator==(const ExperimentConfig& o) const {
    return model == o.model && data == o.data && train == o.train && eval == o.eval;
  }
};

// Reads and validates an experiment file. Throws InputError naming the place.
ExperimentConfig load_experiment(const std::string& path);
// The same from TOML text; `source` names it in messages.
ExperimentConfig parse_experiment(const std::string& text, const std::string& source);

// One axis of [grid]: a dotted key and the values it takes.
struct GridAxis {
  std::string key;                  // e.g. "model.attention_ratio"
  std::vector<std::string> values;  // each value as TOML text, e.g. "0.125", "\"uniform\""
  std::vector<SourcePlace> value_places;
  SourcePlace place;
};

// A named point: the base with overrides (dotted key -> TOML value text).
struct GridVariant {
  std::string name;
  std::vector<std::pair<std::string, std::string>> overrides;
  std::vector<SourcePlace> override_places;
  bool with_grid = false;  // variant applied on top of every grid point instead of the base alone
  SourcePlace place;
};

// Points matching all of `match` (dotted key -> TOML value text) are dropped.
struct GridExclude {
  std::vector<std::pair<std::string, std::string>> match;
  SourcePlace place;
};

struct GridConfig {
  SweepConfig sweep;
  std::vector<GridAxis> axes;
  std::vector<GridVariant> variants;
  std::vector<GridExclude> excludes;
  std::string source;
  std::string text;  // the file as read (frozen into runs/<sweep>/sweep.toml)

  // The experiment of the base with these dotted-key overrides applied; errors
  // name the place of the offending value (grid or variant line).
  ExperimentConfig point(const std::vector<std::pair<std::string, std::string>>& overrides,
                         const std::vector<SourcePlace>& override_places = {}) const;
};

GridConfig load_grid(const std::string& path);
GridConfig parse_grid(const std::string& text, const std::string& source);

// Reads a text file; throws InputError naming the path if it can't.
std::string read_text(const std::string& path);

// Does this file look like a grid (has [sweep] or [grid])?
bool is_grid_text(const std::string& text);

// The value of a dotted key ("model.d_state") as canonical TOML text ("64").
// Throws Error for an unknown key.
std::string config_value_text(const ExperimentConfig& config, const std::string& key);

// Every dotted key an experiment accepts ("model.d_state", "data.synthetic.seed", ...).
std::vector<std::string> experiment_keys();

// The reference of every field (key, type, default, allowed values, doc) as Markdown.
std::string config_reference_markdown();

// Short stable hex hash used for ids (FNV-1a 64, folded to `digits` hex digits).
std::string short_hash(const std::string& text, int digits = 12);

}  // namespace mambamt::core
