#pragma once
// The joint subword vocabulary: sentencepiece (BPE or unigram) trained through
// its C++ API on the source and target sentences of the training corpus.
//
// Special tokens have fixed ids: pad 0, unk 1, bos 2, eos 3, the sentence
// separator <sep> 4 (between the sentences of a document-level example), then
// one tag per language, "<xx>" for language code xx. They are control symbols:
// text never encodes to them (a literal "<sep>" in a sentence stays text).
//
// Files in the tokenizer directory (the sweep's runs/<sweep>/tokenizer/):
//   spm.model      the sentencepiece model (load() needs only this)
//   spm.vocab      piece<TAB>score per line, for people
//   tokenizer.txt  the options, a fingerprint of the training text and one of
//                  spm.model (load() checks it: a truncated model can parse)
// Each is written to a temporary name and renamed, spm.model last, so a reader
// never sees half a tokenizer and processes racing to train the same tokenizer
// (same text and options give byte-identical files) are harmless.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "data/corpus.h"

namespace mambamt::data {

struct TokenizerOptions {
  // sentencepiece model type: "bpe" or "unigram".
  std::string model_type = "bpe";
  // Joint vocabulary size, special tokens included. sentencepiece may stop
  // short of it on a tiny corpus (the limit is soft); vocab_size() tells.
  int64_t vocab_size = 1000;
  // Language codes that get a tag token "<xx>" (e.g. {"de", "en"}).
  std::vector<std::string> languages;
  // Fraction of characters covered by the vocabulary (rarer ones become unk).
  double character_coverage = 1.0;
  // At most this many sentences are used for training (a seeded sample of them
  // when the corpus has more).
  int64_t max_training_sentences = 2000000;
  // Seed of that sample and of sentencepiece's own randomness.
  uint32_t seed = 1;
  // Trainer threads. Training is reproducible for any count, but one thread
  // leaves the other cores to the rest of the job.
  int threads = 1;
};

// The special token ids (identical for every tokenizer trained here).
struct SpecialIds {
  int32_t pad = 0;
  int32_t unk = 1;
  int32_t bos = 2;
  int32_t eos = 3;
  int32_t sep = 4;
};

class Tokenizer {
 public:
  // Trains on every source and target sentence of `corpus` and writes `dir`.
  static Tokenizer train(const Corpus& corpus, const TokenizerOptions& options, const std::string& dir);
  // Loads a tokenizer written by train().
  static Tokenizer load(const std::string& dir);
  // Loads `dir` when it holds a tokenizer trained with these options on this
  // text, trains it when it holds none; InputError when it holds another one.
  static Tokenizer train_or_load(const Corpus& corpus, const TokenizerOptions& options, const std::string& dir);

  // Token ids of one sentence (no bos/eos). Thread-safe. Segmentation is per
  // whitespace-separated word, so encodings of words are cached; the result is
  // identical to sentencepiece's own encoding of the sentence.
  std::vector<int32_t> encode(std::string_view text) const;
  // Appends the ids of `text` to `out`.
  void encode_append(std::string_view text, std::vector<int32_t>& out) const;
  // sentencepiece's encoding without the word cache (the benchmark baseline).
  std::vector<int32_t> encode_uncached(std::string_view text) const;

  // Text of `ids`; special tokens are dropped (<sep> included).
  std::string decode(const std::vector<int32_t>& ids) const;
  // Splits `ids` at <sep> and decodes each part: one string per sentence.
  std::vector<std::string> decode_sentences(const std::vector<int32_t>& ids) const;

  const SpecialIds& specials() const;
  // Id of the tag of language `code`; InputError if it has none.
  int32_t language_id(const std::string& code) const;
  int64_t vocab_size() const;
  std::string piece(int32_t id) const;
  const std::string& dir() const;

 private:
  struct Impl;
  explicit Tokenizer(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

}  // namespace mambamt::data
