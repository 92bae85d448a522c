#pragma once
// `mambamt prepare GRID`: the data of a grid made ready in its run directory
// before the sweep runs, on a login node or any machine that shares the
// filesystem. Every distinct data setup of the grid's points (the fields of
// their [data] and [eval] sections that prepare_data reads; points that
// differ only in the model, the training, CAT-N or the decoding share one) is
// prepared once with train::prepare_data, as an
// experiment does at its start: the synthetic corpus is generated and the
// tokenizer trained into the run directory's shared folders (keyed as
// train/prepare.h says, so the sweep's workers find them instead of building
// them), and the training, validation, test and contrastive sets are read and
// tokenized, so that a missing file or a malformed line is reported now, not
// at the start of each experiment on the cluster. The grid is not frozen and
// no store is written: running the sweep afterwards is unchanged.
#include <functional>
#include <string>
#include <vector>

#include "orchestrator/grid.h"

namespace mambamt::orchestrator {

// One distinct data setup and what preparing it found.
struct DataSetup {
  std::string key;                  // short hash of the setup (the fields prepare_data reads)
  std::vector<std::string> points;  // the labels of the points that use it, in grid order
  std::string tokenizer_dir;        // where the tokenizer is (trained now or found)
  std::string corpus_dir;           // the synthetic corpus ("" for corpora read from files)
  bool tokenizer_found = false;     // the tokenizer was there before
  bool corpus_found = false;        // the synthetic corpus was there before
  int64_t train_examples = 0, valid_examples = 0, vocab_size = 0;
  std::vector<std::pair<std::string, int64_t>> tests;        // test set name, examples
  std::vector<std::pair<std::string, int64_t>> contrastive;  // contrastive set name, examples
  double seconds = 0;
  std::string error;  // why it could not be prepared ("" when it was)
};

struct PrepareSummary {
  std::string run_dir;
  std::vector<DataSetup> setups;  // in the order of their first point
  // Points whose config is invalid (the sweep marks them failed): "label: why".
  std::vector<std::string> invalid_points;
  size_t failed() const {
    size_t n = 0;
    for (const DataSetup& s : setups) n += s.error.empty() ? 0 : 1;
    return n;
  }
};

// Prepares every data setup of `grid` under its run directory (created if
// missing), calling `on_done` after each (progress). A setup that fails is
// recorded with its error (an InputError names the file and line) and the
// others are still prepared.
PrepareSummary prepare_grid(const ExpandedGrid& grid,
                            const std::function<void(const DataSetup&, size_t index, size_t total)>& on_done = nullptr);

// What `mambamt prepare` prints for one setup.
std::string describe_setup(const DataSetup& setup, size_t index, size_t total);

}  // namespace mambamt::orchestrator
