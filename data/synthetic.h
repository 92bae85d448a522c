#pragma once
// The synthetic document-level corpus: the embedded default corpus of the demo
// sweep and of the tests. A deterministic (seeded) generator for a translation
// task between two invented languages:
//
//   source  SVO, adjectives before the noun, no grammatical gender, one
//           third-person pronoun for everything ("ul", object "ulo"), past
//           tense by a particle ("pa"), determiners ta (the) / en (a).
//   target  verb-final (SOV), adjectives after the noun, three genders that
//           are a lexical property of each noun (like German die Sonne / der
//           Mond); determiners agree with the noun's gender, definiteness and
//           case, adjectives with its gender; pronouns have one form per
//           gender and case; past tense is a verb suffix.
//
// So a sentence translates word by word with local reordering and agreement,
// and three phenomena need the document:
//
//   pronouns   a sentence with "ul"/"ulo" refers to the subject of the most
//              recent sentence whose subject is a common noun (named entities
//              are repeated by name, never pronominalised), 1..max_distance
//              sentences back (0: "... ok ul ..." in the same sentence). The
//              target pronoun shows that noun's gender; nothing in the
//              pronoun's own sentence does (its words are drawn independently
//              of the antecedent), so a sentence-level model is at chance (1/3).
//   entities   capitalised names, copied verbatim, recurring within a document
//              (each document has a cast of 1-3); Zipf-distributed over the
//              corpus, a fraction never seen in training.
//   ambiguous  some source nouns have two translations (of different genders);
//              the sense is fixed per document and signalled only by a cue
//              adjective at the noun's first mention, so later mentions must
//              stay consistent with it.
//
// Measured with the defaults (a scratch 1.2M-parameter LibTorch transformer, one
// busy CPU thread, about 300 steps of 1500 tokens, 7 minutes): teacher-forced
// token accuracy 75% after 3 epochs; contrastive pronoun accuracy of the
// sentence-level model 89% at distance 0 but 33% (chance) at distances >= 1,
// of a model on 4-sentence windows 86% at distances >= 1 after 2 epochs.
//
// Files written by write_synthetic (all UTF-8):
//   train.tsv valid.tsv test.tsv  src<TAB>tgt<TAB>doc_id (read_tsv loads them)
//   test.align                    the gold word alignment of every test sentence
//                                 pair (data/alignment.h), from the generator's
//                                 word-by-word correspondences
//   contrastive.tsv               the contrastive set of data/contrastive.h, built
//                                 from test: every pronoun (variants: the other
//                                 two genders) and every later mention of an
//                                 ambiguous noun (variant: the other sense, the
//                                 sentence re-inflected to stay grammatical)
//   entities.tsv                  entity<TAB>train<TAB>valid<TAB>test occurrence
//                                 counts (source side) for every entity, header first
//   manifest.txt                  generator version and options; written last
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "data/alignment.h"
#include "data/contrastive.h"
#include "data/corpus.h"

namespace mambamt::data {

struct SyntheticOptions {
  // Generator seed: the corpus is a pure function of these fields.
  uint64_t seed = 1234;
  // Documents per split.
  int64_t train_docs = 2000;
  int64_t valid_docs = 100;
  int64_t test_docs = 100;
  // Sentences per document, uniform in [min_sentences, max_sentences].
  int64_t min_sentences = 3;
  int64_t max_sentences = 8;
  // Content words per language: 45% nouns, 25% verbs, 30% adjectives.
  int64_t vocab_size = 300;
  // Distinct named entities.
  int64_t entities = 200;
  // Fraction of the entities that never occur in train (the "unseen" bucket).
  double unseen_entity_fraction = 0.1;
  // Source nouns with two translations, one sense per document (capped at a
  // quarter of the nouns and a third of the adjectives for small vocabularies).
  int64_t ambiguous_words = 8;
  // Longest pronoun-antecedent distance in train and valid sentences.
  int64_t max_distance = 3;
  // Longest distance in test and its contrastive set; larger than max_distance
  // fills the ">3" bucket with distances never seen in training.
  int64_t test_max_distance = 5;
  // Exponent of the Zipf law over entities (higher = more skewed).
  double entity_zipf = 1.0;
};

// Per-entity occurrence counts in the source side of each split.
struct EntityCount {
  std::string name;
  int64_t train = 0;
  int64_t valid = 0;
  int64_t test = 0;
};

// The closed-class words and the noun genders of the generated languages
// (for tests and analyses; genders 0, 1, 2 = masculine, feminine, neuter).
struct SyntheticLexicon {
  std::string src_subject_pronoun, src_object_pronoun;
  std::array<std::string, 3> subject_pronouns, object_pronouns;  // target, by gender
  std::map<std::string, int> determiner_gender;                  // target determiner -> gender
  std::map<std::string, int> noun_gender;                        // target noun -> gender
  std::map<std::string, std::array<std::string, 2>> ambiguous;   // source noun -> its two target nouns
  std::map<std::string, std::string> cue_adjectives;             // source cue adjective -> target noun it selects
};

struct SyntheticCorpus {
  Corpus train, valid, test;
  std::vector<ContrastiveExample> contrastive;  // built from test
  std::vector<EntityCount> entities;            // every entity, by descending train count
  std::vector<WordAlignment> test_alignments;   // one per test sentence, in corpus order
  SyntheticLexicon lexicon;                     // filled by generate_synthetic, not by load_synthetic
};

// Throws InputError naming the option for values the generator cannot use.
void validate(const SyntheticOptions& options);

SyntheticCorpus generate_synthetic(const SyntheticOptions& options);

// Writes the files listed above into `dir` (each atomically, manifest last).
void write_synthetic(const SyntheticCorpus& corpus, const SyntheticOptions& options, const std::string& dir);

// Reads a directory written by write_synthetic.
SyntheticCorpus load_synthetic(const std::string& dir);

// Loads `dir` when its manifest matches `options`; generates and writes it when
// there is no manifest. A manifest for other options is an InputError (nothing
// is overwritten). Safe when several processes call it at once.
SyntheticCorpus ensure_synthetic(const SyntheticOptions& options, const std::string& dir);

// The manifest text for `options` (also a stable fingerprint of them).
std::string synthetic_manifest(const SyntheticOptions& options);

std::vector<EntityCount> read_entities(const std::string& path);
void write_entities(const std::vector<EntityCount>& entities, const std::string& path);

}  // namespace mambamt::data
