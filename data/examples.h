#pragma once
// From documents to training and evaluation examples, all in token ids:
//
//   tokenize            a Corpus -> the same documents as id sequences
//   make_examples       single sentences, or windows of consecutive sentences
//                       of one document joined by <sep>, up to a token budget
//   apply_cat_n         CAT-N (the SSM-for-MT paper): each sample is kept with
//                       probability 1 - prob, otherwise replaced by itself plus
//                       N-1 random samples joined by <sep>; redrawn every epoch
//   validation_passages passages of 1..max consecutive sentences
//   extrapolation_passages  passages at least a given length, joining
//                       consecutive test sentences (the length-extrapolation set)
//
// An example's ids carry no bos/eos: batching adds them (source + eos; target
// input bos + target, output target + eos). Lengths and budgets below count
// those added tokens, i.e. a sequence's length as the model sees it.
#include <cstdint>
#include <string>
#include <vector>

#include "data/corpus.h"
#include "data/tokenizer.h"

namespace mambamt::data {

struct TokenizedSentence {
  std::vector<int32_t> src, tgt;
};

struct TokenizedDocument {
  std::vector<TokenizedSentence> sentences;
};

// Same shape as the Corpus it came from (document d, sentence i).
struct TokenizedCorpus {
  std::vector<TokenizedDocument> documents;
  int64_t num_sentences() const;
  int64_t num_tokens() const;  // source plus target ids
};

TokenizedCorpus tokenize(const Corpus& corpus, const Tokenizer& tokenizer);

// A run of consecutive sentences of one document.
struct Span {
  int32_t doc = 0;
  int32_t first = 0;  // index of the first sentence in the document
  int32_t count = 1;
};

struct Example {
  std::vector<int32_t> src, tgt;  // sentences joined by <sep>; no bos/eos
  std::vector<Span> spans;        // where the sentences come from, in order
  // Leading sentences of `spans` that are source-side context only: their
  // source is in `src`, their target is not in `tgt` (ExampleOptions::
  // source_context). 0 for examples translated whole.
  int32_t context = 0;
  int64_t sentences() const;      // number of sentences joined (context included)
  // Lengths as the model sees them: source + eos, bos + target.
  int64_t src_len() const { return static_cast<int64_t>(src.size()) + 1; }
  int64_t tgt_len() const { return static_cast<int64_t>(tgt.size()) + 1; }
};

struct ExampleOptions {
  // Sentences per example: 0 or 1 = single sentences; k > 1 = windows of up
  // to k consecutive sentences of one document joined by <sep>.
  int64_t context_sentences = 0;
  // Longest example (src_len and tgt_len each). A window stops before it would
  // exceed it; a single sentence longer than it is dropped (and counted).
  int64_t max_tokens = 512;
  // Sentences between window starts: 0 = the window size (non-overlapping
  // windows covering each sentence once); 1 = a window at every sentence.
  int64_t stride = 0;
  // Source-side context instead of windows: one example per sentence, its
  // source the sentence preceded by up to context_sentences - 1 source
  // sentences of its document (as many as fit max_tokens), its target the
  // sentence alone. stride is unused.
  bool source_context = false;
  // Multi-resolution windows: every document is split once for each window
  // size from 1 to context_sentences (non-overlapping windows of that size,
  // stride unused), so each sentence is in context_sentences examples: alone,
  // and in a window of every larger size. Ignored with source_context.
  bool multi_resolution = false;
};

struct ExampleStats {
  int64_t examples = 0;
  int64_t dropped_sentences = 0;  // longer than max_tokens on their own
};

std::vector<Example> make_examples(const TokenizedCorpus& corpus, const ExampleOptions& options,
                                   int32_t sep_id, ExampleStats* stats = nullptr);

struct CatNOptions {
  // Samples per concatenation (1 = CAT-N off; the paper uses 5 and 10).
  int64_t n = 1;
  // Probability that a sample is replaced by a concatenation.
  double prob = 0.5;
  // Longest concatenation (src_len and tgt_len each): samples are appended
  // while they fit, so a concatenation may hold fewer than n samples.
  int64_t max_tokens = 512;
};

struct CatNStats {
  int64_t examples = 0;
  int64_t concatenated = 0;  // examples replaced by a concatenation
  int64_t truncated = 0;     // concatenations cut short by max_tokens
};

// The examples of one epoch: a pure function of (base, options, seed, epoch).
// The output has one example per base example, in the same order; a replaced
// sample leads its concatenation, followed by n-1 samples drawn uniformly (with
// replacement) from the whole base set.
std::vector<Example> apply_cat_n(const std::vector<Example>& base, const CatNOptions& options, int32_t sep_id,
                                 uint64_t seed, int64_t epoch, CatNStats* stats = nullptr);

// Splits every document into consecutive passages of 1..max_sentences
// sentences (uniform lengths, seeded): the validation set of the paper.
std::vector<Example> validation_passages(const TokenizedCorpus& corpus, int64_t max_sentences, int32_t sep_id,
                                         uint64_t seed);

// Passages whose source is at least min_src_len long (src_len, as above),
// joining consecutive sentences of the corpus in order, across document
// boundaries when one document is too short; disjoint, at most max_passages
// (0 = as many as the corpus gives; a short remainder is dropped).
std::vector<Example> extrapolation_passages(const TokenizedCorpus& corpus, int64_t min_src_len, int32_t sep_id,
                                            int64_t max_passages = 0);

// The longest src_len in `examples` (0 when empty); extrapolation sets use
// 2x and 4x the longest training example.
int64_t longest_source(const std::vector<Example>& examples);

// The text of an example's sentences (joined by `separator`) from the corpus
// it was made from: references for evaluation. Source-side context sentences
// (Example::context) are left out of both: the text is what is translated.
std::string source_text(const Corpus& corpus, const Example& example, const std::string& separator = " ");
std::string target_text(const Corpus& corpus, const Example& example, const std::string& separator = " ");
// The source and target sentences source_text and target_text join, one string each.
std::vector<std::string> source_sentences(const Corpus& corpus, const Example& example);
std::vector<std::string> target_sentences(const Corpus& corpus, const Example& example);

}  // namespace mambamt::data
