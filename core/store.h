#pragma once
// The experiment store: one HDF5 file per experiment (runs/<sweep>/exp/<id>/
// store.h5) holding its config, status, metric series, evaluation results and
// system info. Only the worker that owns an experiment writes its store;
// status, the collector and users read it at any time.
//
// Crash safety: the owner holds the whole store in memory (it is small:
// metric series and result tables); every commit writes it to a temporary
// file next to store.h5, syncs it and renames it over store.h5. A process
// killed at any moment leaves the last committed store intact and readable,
// readers never see a half-written file, and the file never accumulates the
// free space that in-place HDF5 updates leave behind. See the README.
//
// Layout (all plain HDF5; h5dump and h5py read it):
//   /                 attrs: format ("mambamt-store"), format_version, experiment_id, name, sweep
//   /config           scalar string dataset: the canonical experiment TOML
//   /status           group, attrs: state, attempts, last_error, host, pid, job_id,
//                     created, started, updated, finished (Unix seconds), step, total_steps
//   /metrics/<name>   compound dataset {step int64, value float64, time float64}, extendible
//   /results/<path>   scalar float64 datasets (e.g. results/test/bleu) and 2-D float64
//                     tables with string attrs `rows` and `columns`
//   /results/text/<name>  string datasets (e.g. hypothesis file names, notes)
//   /system           attrs: host, cpu, threads, torch, cuda, device, git_revision, ...
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace mambamt::core {

enum class RunState { pending, running, completed, failed, interrupted };

// The version of what a whole evaluation (train::evaluate) writes into a
// store: raised whenever the evaluation adds a result or changes how one is
// computed. A whole suite that ran to its end records it as
// results/evaluation/version (stores from before it have none: version 0);
// `mambamt sweep --reevaluate` evaluates completed experiments of an older
// version again, and the collector counts them. The test "training and
// evaluation write every store name of docs/STORE.md ..." (test_experiment)
// lists what the current version writes and fails when that changes; a
// result computed otherwise also goes into result_defined_since().
//   1  entities/by_document and data.entities; eval.max_examples counts test
//      sentences (2026-11-27)
//   2  alignment/* (attention against gold word alignments, 2026-11-27)
//   3  alignment/aer of a layer chosen on the other half of the sentences,
//      alignment/aer_best_layer the best layer's (2026-11-27)
//   4  alignment/sentences and data.alignment: per-sentence counts for the
//      paired test of AER (2026-11-27)
//   5  <set>/sentence_segments, <set>/sentence_bleu and
//      <set>/passages_split_by_separator: test sets translated as passages
//      also scored sentence by sentence (2026-11-27)
//   6  <set>/comet_segments, <set>/sentence_comet and
//      <set>/sentence_comet_segments where comet-score runs: segment COMET
//      scores for its paired test, and COMET by sentence (2026-11-28)
//   7  <set>/ter and the texts signature.<set>.{bleu,chrf,chrfpp,ter}: TER
//      and sacreBLEU's signatures of every test set; the text weights: the
//      checkpoints averaged (2026-12-08)
inline constexpr int64_t kEvaluationVersion = 7;

// The evaluation version from which results/<path> means what it means now:
// 0 for results that kept their meaning since they were first written; for
// a result computed otherwise from some version on (alignment/aer: 3), that
// version. Older stores' values of it are not comparable with newer ones.
int64_t result_defined_since(const std::string& path);

// The parts of the evaluation suite (the names of train::EvalParts' fields:
// test_sets, contrastive, entities, extrapolation, efficiency, explain,
// gates, alignment) whose results a store evaluated by `version` lacks or
// holds computed otherwise: every part before version 2, none at
// kEvaluationVersion. `mambamt sweep --reevaluate` runs only these, so that
// the rest (the decoding of the test sets, the speed measured when the
// experiment ran) stays as it was.
std::set<std::string> evaluation_parts_changed_since(int64_t version);

const char* to_string(RunState s);
RunState run_state_from(const std::string& s);  // throws Error on an unknown name

struct StoreStatus {
  RunState state = RunState::pending;
  int64_t attempts = 0;        // attempts started so far
  std::string last_error;      // message of the last failure
  std::string host;            // host of the last attempt
  int64_t pid = 0;
  std::string job_id;          // scheduler job of the last attempt
  double created = 0;          // Unix seconds
  double started = 0;          // start of the last attempt
  double updated = 0;          // last commit
  double finished = 0;         // completed or failed
  int64_t step = 0;            // training step reached
  int64_t total_steps = 0;     // planned steps
};

struct MetricPoint {
  int64_t step = 0;
  double value = 0;
  double time = 0;  // Unix seconds
};

// A small 2-D table of numbers with labels (NaN = missing cell).
struct ResultTable {
  std::vector<std::string> rows;
  std::vector<std::string> columns;
  std::vector<double> values;  // row-major, rows.size() * columns.size()
  double at(size_t r, size_t c) const { return values.at(r * columns.size() + c); }
};

// Everything a reader gets from a store, read in one go.
struct StoreSnapshot {
  std::string path;
  std::string experiment_id;
  std::string name;    // human label (variant name or varied keys)
  std::string sweep;
  std::string config;  // canonical TOML
  StoreStatus status;
  std::map<std::string, std::vector<MetricPoint>> metrics;
  std::map<std::string, double> scalars;       // results/<path> -> value
  std::map<std::string, ResultTable> tables;   // results/<path> -> table
  std::map<std::string, std::string> texts;    // results/text/<name>
  std::map<std::string, std::string> system;
};

// results/evaluation/version of a store (kEvaluationVersion of the evaluation
// that wrote its results); 0 when it has none.
int64_t evaluation_version(const StoreSnapshot& store);

// A completed store whose results an older evaluation than this one wrote
// (`mambamt sweep --reevaluate` evaluates it again).
bool evaluated_by_older_version(const StoreSnapshot& store);

// Whether the store's results/<path> has today's meaning: its evaluation is
// at least result_defined_since(path). Readers that compare stores (the
// collector) treat the others' values as missing.
bool result_current(const StoreSnapshot& store, const std::string& path);

// Identity written once at creation.
struct StoreIdentity {
  std::string experiment_id;
  std::string name;
  std::string sweep;
  std::string config;  // canonical TOML
};

class ExperimentStore {
 public:
  // Creates a new store (status pending). Throws if the file exists.
  static ExperimentStore create(const std::string& path, const StoreIdentity& identity);
  // Opens an existing store for writing (its owner). Throws InputError if it is
  // not a readable store.
  static ExperimentStore open(const std::string& path);
  // Reads a whole store (any process, any time). Throws InputError naming the
  // path if the file is missing or not a mambamt store. A store without a
  // seal is read in a child process first when h5::set_unsealed_reads_in_child
  // says so.
  static StoreSnapshot read(const std::string& path);
  // Before many reads: the stores among `paths` without a seal read in
  // child processes now, several in one child (h5::in_children), when
  // h5::set_unsealed_reads_in_child says so; read() then reads the ones
  // found readable without a child of its own (unless they changed since)
  // and throws the others' reasons. Nothing otherwise.
  static void read_ahead(const std::vector<std::string>& paths);

  ExperimentStore(ExperimentStore&&) noexcept;
  ExperimentStore& operator=(ExperimentStore&&) noexcept;
  ~ExperimentStore();  // commits what is pending when it can; never throws

  const std::string& path() const { return path_; }
  const StoreStatus& status() const { return data_.status; }

  // Changes are buffered in memory until commit().
  void set_status(const StoreStatus& s);
  void append_metric(const std::string& name, int64_t step, double value, double time = 0 /* now */);
  void set_scalar(const std::string& path, double value);  // "test/bleu"
  void set_table(const std::string& path, const ResultTable& table);
  void set_text(const std::string& name, const std::string& value);
  void set_system(const std::map<std::string, std::string>& info);
  // Removes results/ entirely (an evaluation rerun replaces its results).
  void clear_results();

  // Writes every pending change atomically. After it returns, the changes
  // survive any crash of this process.
  void commit();
  bool has_pending() const;

  // The store as it will be after the next commit (the owner's view).
  const StoreSnapshot& contents() const { return data_; }
  const std::map<std::string, std::vector<MetricPoint>>& metrics() const { return data_.metrics; }

 private:
  ExperimentStore() = default;

  std::string path_;
  StoreSnapshot data_;
  bool dirty_ = false;
};

}  // namespace mambamt::core
