#pragma once
// Data of one experiment: the corpus (the synthetic one is generated once per
// shared directory), the tokenizer (trained once per shared directory), and
// the examples the runtime needs (training, validation, test sets, contrastive
// sets, entity frequencies).
//
// Shared layout (shared_dir is runs/<sweep>, or <exp_dir>/prepared):
//   <shared_dir>/data/<key>/        the synthetic corpus (data/synthetic.h files)
//   <shared_dir>/tokenizer/<key>/   the sentencepiece model (data/tokenizer.h files)
// Each <key> is a short hash of the config fields that directory depends on,
// so experiments of a sweep that differ elsewhere share them, and both are
// written race-safely (several processes may prepare the same key at once).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/config.h"
#include "data/alignment.h"
#include "data/contrastive.h"
#include "data/corpus.h"
#include "data/examples.h"
#include "data/tokenizer.h"

namespace mambamt::train {

// A test set: examples (windows of the experiment's context size, or single
// sentences when it translates in context: translates_in_context) with their
// references.
struct TestSet {
  std::string name;  // "test" for the synthetic test split, else the file stem
  data::Corpus corpus;
  data::TokenizedCorpus tokenized;
  std::vector<data::Example> examples;
  std::vector<std::string> sources;     // source text of each example
  std::vector<std::string> references;  // reference text of each example
  // Gold word alignments (data/alignment.h) in the corpus's shape (document,
  // sentence); empty when the set has none.
  std::vector<std::vector<data::WordAlignment>> alignments;
  std::string alignment_file;  // where they were read from
};

struct ContrastiveSet {
  std::string name;  // "synthetic" or the file stem
  std::vector<data::ContrastiveExample> examples;
};

struct PreparedData {
  std::optional<data::Tokenizer> tokenizer;
  std::string data_dir;       // synthetic corpus directory ("" for other corpora)
  std::string tokenizer_dir;  // where the tokenizer lives
  data::Corpus train_corpus;
  std::vector<data::Example> train_examples;  // before CAT-N
  // Single sentences of the training corpus for the first data.sentence_steps
  // updates (empty when that is 0).
  std::vector<data::Example> sentence_examples;
  data::Corpus valid_corpus;
  std::vector<data::Example> valid_examples;  // validation passages
  std::vector<TestSet> tests;
  std::vector<ContrastiveSet> contrastive;
  // Named entities with their training (source-side) frequency: the synthetic
  // corpus's list; empty for other corpora (evaluation then counts the
  // verbatim candidates of the test sets in train_corpus).
  std::map<std::string, int64_t> entity_frequency;
  bool synthetic = false;
  int64_t dropped_sentences = 0;  // training sentences longer than max_example_tokens
};

// Directory keys (exposed for tests and `mambamt prepare`).
std::string synthetic_key(const core::ExperimentConfig& config);
std::string tokenizer_key(const core::ExperimentConfig& config);

// Where prepare_data keeps the tokenizer under `shared_dir` (data.tokenizer_dir
// when that is set), and the synthetic corpus ("" for corpora read from files).
std::string tokenizer_dir_for(const core::ExperimentConfig& config, const std::string& shared_dir);
std::string synthetic_dir_for(const core::ExperimentConfig& config, const std::string& shared_dir);

// Prepares everything above. `with_tests` = false skips test and contrastive
// sets (the data-parallel ranks other than 0 do not evaluate).
PreparedData prepare_data(const core::ExperimentConfig& config, const std::string& shared_dir,
                          bool with_tests = true);

// Only the corpus and tokenizer on disk (what a sweep may prepare ahead).
void prepare_shared(const core::ExperimentConfig& config, const std::string& shared_dir);

// The example options of the experiment (context window and token budget).
data::ExampleOptions example_options(const core::ExperimentConfig& config);

// Whether test sets are translated one sentence at a time after the model's
// own translations of the sentences before (eval.doc_decode = "sentences" on
// a model trained on windows with context on both sides).
bool translates_in_context(const core::ExperimentConfig& config);

// A test set read from `path` in the experiment's corpus format (.tsv files,
// and every file of a synthetic experiment, are read as TSV); name = the file
// stem. Its gold word alignments are read from gold_alignment_path(path) when
// that file exists.
TestSet load_test_set(const core::ExperimentConfig& config, const data::Tokenizer& tokenizer, const std::string& path);
// A test set from a corpus already in memory (read from `corpus_path`, when
// it came from a file), with the lines of its gold alignment file
// (`alignment_path` empty: none; InputError naming that file and the corpus's
// when they do not fit the corpus).
TestSet make_test_set(const core::ExperimentConfig& config, const data::Tokenizer& tokenizer, const std::string& name,
                      data::Corpus corpus, std::vector<data::WordAlignment> alignments = {},
                      const std::string& alignment_path = "", const std::string& corpus_path = "");

// Where the gold word alignments of the test set at `path` are:
// <directory>/<set_name(path)>.align, or "" when there is no such file.
std::string gold_alignment_path(const std::string& path);

// The stem of a test or contrastive file name ("dir/tst2015.de-en.tsv" -> "tst2015.de-en").
std::string set_name(const std::string& path);

}  // namespace mambamt::train
