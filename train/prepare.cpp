#include "train/prepare.h"

#include <filesystem>
#include <sstream>

#include <spdlog/spdlog.h>

#include "core/error.h"
#include "data/synthetic.h"

namespace fs = std::filesystem;

namespace mambamt::train {

namespace {

data::SyntheticOptions synthetic_options(const core::ExperimentConfig& c) {
  const auto& s = c.data.synthetic;
  data::SyntheticOptions o;
  o.seed = static_cast<uint64_t>(s.seed);
  o.train_docs = s.train_docs;
  o.valid_docs = s.valid_docs;
  o.test_docs = s.test_docs;
  o.min_sentences = s.min_sentences;
  o.max_sentences = s.max_sentences;
  o.vocab_size = s.vocab_size;
  o.entities = s.entities;
  return o;
}

data::TokenizerOptions tokenizer_options(const core::ExperimentConfig& c) {
  data::TokenizerOptions o;
  o.model_type = c.data.tokenizer;
  o.vocab_size = c.data.vocab_size;
  o.seed = 1;
  o.threads = 1;
  return o;
}

data::Corpus read_split(const core::ExperimentConfig& c, const std::string& path) {
  data::CorpusOptions o;
  o.format = c.data.corpus;
  o.path = path;
  o.src_lang = c.data.src_lang;
  o.tgt_lang = c.data.tgt_lang;
  // The synthetic corpus has no file format of its own: files given to a
  // synthetic experiment (eval --test) are TSV.
  if (fs::path(path).extension() == ".tsv" || o.format == "synthetic") o.format = "tsv";
  return data::read_corpus(o);
}

data::Tokenizer tokenizer_for(const core::ExperimentConfig& c, const data::Corpus& train, const std::string& dir) {
  if (!c.data.tokenizer_dir.empty() && fs::exists(fs::path(dir) / "spm.model")) return data::Tokenizer::load(dir);
  return data::Tokenizer::train_or_load(train, tokenizer_options(c), dir);
}

// A test corpus read from `path`, with its gold word alignments
// (alignment_path empty when it has none).
struct TestCorpus {
  std::string name;
  data::Corpus corpus;
  std::vector<data::WordAlignment> alignments;
  std::string alignment_path;
  std::string path;
};

TestCorpus read_test_corpus(const core::ExperimentConfig& c, const std::string& path) {
  TestCorpus t{set_name(path), read_split(c, path), {}, gold_alignment_path(path), path};
  if (!t.alignment_path.empty()) t.alignments = data::read_alignments(t.alignment_path);
  return t;
}

// The training corpus (generating the synthetic one when needed).
struct Corpora {
  data::Corpus train, valid;
  std::vector<TestCorpus> tests;
  std::vector<ContrastiveSet> contrastive;
  std::map<std::string, int64_t> entities;
  std::string data_dir;
};

Corpora load_corpora(const core::ExperimentConfig& c, const std::string& shared_dir, bool with_tests) {
  Corpora out;
  if (c.data.corpus == "synthetic") {
    out.data_dir = synthetic_dir_for(c, shared_dir);
    data::SyntheticCorpus s = data::ensure_synthetic(synthetic_options(c), out.data_dir);
    out.train = std::move(s.train);
    out.valid = std::move(s.valid);
    if (with_tests) {
      const std::string gold = s.test_alignments.empty() ? "" : out.data_dir + "/test.align";
      out.tests.push_back({"test", std::move(s.test), std::move(s.test_alignments), gold, out.data_dir + "/test.tsv"});
      out.contrastive.push_back({"synthetic", std::move(s.contrastive)});
      for (auto& e : s.entities) out.entities[e.name] = e.train;
    }
  } else {
    if (c.data.train.empty())
      throw InputError(c.source + ": data.train is required for data.corpus = \"" + c.data.corpus + "\"");
    out.train = read_split(c, c.data.train);
    if (!c.data.valid.empty()) out.valid = read_split(c, c.data.valid);
  }
  if (with_tests) {
    for (auto& path : c.data.test) out.tests.push_back(read_test_corpus(c, path));
    for (auto& path : c.data.contrastive) out.contrastive.push_back({set_name(path), data::read_contrastive(path)});
  }
  return out;
}

}  // namespace

std::string set_name(const std::string& path) {
  fs::path p(path);
  while (!p.empty() && p.filename().empty()) p = p.parent_path();  // "dir/" -> "dir"
  std::string name = p.filename().string();
  for (const char* ext : {".tsv", ".txt", ".xml"}) {
    const std::string e = ext;
    if (name.size() > e.size() && name.compare(name.size() - e.size(), e.size(), e) == 0) {
      name.resize(name.size() - e.size());
      break;
    }
  }
  return name.empty() ? "test" : name;
}

std::string gold_alignment_path(const std::string& test_path) {
  fs::path p(test_path);
  while (!p.empty() && p.filename().empty()) p = p.parent_path();
  const fs::path gold = p.parent_path() / (set_name(test_path) + ".align");
  std::error_code ec;
  return fs::is_regular_file(gold, ec) ? gold.string() : "";
}

std::string synthetic_key(const core::ExperimentConfig& c) {
  return core::short_hash(data::synthetic_manifest(synthetic_options(c)));
}

std::string tokenizer_key(const core::ExperimentConfig& c) {
  std::ostringstream s;
  s << "corpus=" << c.data.corpus << "\nsrc_lang=" << c.data.src_lang << "\ntgt_lang=" << c.data.tgt_lang
    << "\ntokenizer=" << c.data.tokenizer << "\nvocab_size=" << c.data.vocab_size << "\n";
  if (c.data.corpus == "synthetic")
    s << "synthetic=" << synthetic_key(c) << "\n";
  else
    s << "train=" << fs::absolute(c.data.train).lexically_normal().string() << "\n";
  return core::short_hash(s.str());
}

std::string tokenizer_dir_for(const core::ExperimentConfig& c, const std::string& shared_dir) {
  if (!c.data.tokenizer_dir.empty()) return c.data.tokenizer_dir;
  return (fs::path(shared_dir) / "tokenizer" / tokenizer_key(c)).string();
}

std::string synthetic_dir_for(const core::ExperimentConfig& c, const std::string& shared_dir) {
  if (c.data.corpus != "synthetic") return "";
  return (fs::path(shared_dir) / "data" / synthetic_key(c)).string();
}

data::ExampleOptions example_options(const core::ExperimentConfig& c) {
  data::ExampleOptions o;
  o.context_sentences = c.data.context_sentences;
  o.max_tokens = c.data.max_example_tokens;
  o.source_context = c.data.context_side == "source";
  o.multi_resolution = c.data.multi_resolution;
  return o;
}

bool translates_in_context(const core::ExperimentConfig& c) {
  return c.eval.doc_decode == "sentences" && c.data.context_sentences > 1 && c.data.context_side == "both";
}

void prepare_shared(const core::ExperimentConfig& config, const std::string& shared_dir) {
  Corpora corpora = load_corpora(config, shared_dir, false);
  tokenizer_for(config, corpora.train, tokenizer_dir_for(config, shared_dir));
}

TestSet make_test_set(const core::ExperimentConfig& c, const data::Tokenizer& tokenizer, const std::string& name,
                      data::Corpus corpus, std::vector<data::WordAlignment> alignments,
                      const std::string& alignment_path, const std::string& corpus_path) {
  TestSet t;
  t.name = name;
  t.corpus = std::move(corpus);
  if (!alignment_path.empty()) {
    t.alignments = data::alignments_for(t.corpus, std::move(alignments), alignment_path, corpus_path);
    t.alignment_file = alignment_path;
  }
  t.tokenized = data::tokenize(t.corpus, tokenizer);
  // Test windows use the training budget, but no test sentence may be dropped:
  // the budget grows to the longest sentence when one exceeds it.
  // Windows of the context size only (no multi-resolution copies), or single
  // sentences translated in context.
  data::ExampleOptions o = example_options(c);
  o.multi_resolution = false;
  if (translates_in_context(c)) o.context_sentences = 0;
  for (auto& d : t.tokenized.documents)
    for (auto& s : d.sentences)
      o.max_tokens = std::max<int64_t>(o.max_tokens, static_cast<int64_t>(std::max(s.src.size(), s.tgt.size())) + 1);
  // eval.max_examples caps the test sentences, not the examples: the examples
  // are made from the first max_examples sentences (in document order, the
  // last document cut there), so a model translating windows of sentences and
  // its sentence-level twin are scored on the same text. Spans index the full
  // corpus, of which the capped one is a prefix.
  const int64_t cap = c.eval.max_examples;
  if (cap > 0 && t.tokenized.num_sentences() > cap) {
    data::TokenizedCorpus capped;
    int64_t left = cap;
    for (auto& d : t.tokenized.documents) {
      if (left == 0) break;
      data::TokenizedDocument& kept = capped.documents.emplace_back();
      const int64_t n = std::min<int64_t>(left, static_cast<int64_t>(d.sentences.size()));
      kept.sentences.assign(d.sentences.begin(), d.sentences.begin() + n);
      left -= n;
    }
    t.examples = data::make_examples(capped, o, tokenizer.specials().sep);
  } else {
    t.examples = data::make_examples(t.tokenized, o, tokenizer.specials().sep);
  }
  for (auto& e : t.examples) {
    t.sources.push_back(data::source_text(t.corpus, e, " "));
    t.references.push_back(data::target_text(t.corpus, e, " "));
  }
  return t;
}

TestSet load_test_set(const core::ExperimentConfig& c, const data::Tokenizer& tokenizer, const std::string& path) {
  TestCorpus t = read_test_corpus(c, path);
  return make_test_set(c, tokenizer, t.name, std::move(t.corpus), std::move(t.alignments), t.alignment_path, t.path);
}

PreparedData prepare_data(const core::ExperimentConfig& c, const std::string& shared_dir, bool with_tests) {
  PreparedData p;
  p.synthetic = c.data.corpus == "synthetic";
  Corpora corpora = load_corpora(c, shared_dir, with_tests);
  p.data_dir = corpora.data_dir;
  p.tokenizer_dir = tokenizer_dir_for(c, shared_dir);
  p.tokenizer = tokenizer_for(c, corpora.train, p.tokenizer_dir);
  const data::Tokenizer& tok = *p.tokenizer;
  const int32_t sep = tok.specials().sep;

  data::ExampleStats stats;
  p.train_corpus = std::move(corpora.train);
  const data::TokenizedCorpus train_tokens = data::tokenize(p.train_corpus, tok);
  p.train_examples = data::make_examples(train_tokens, example_options(c), sep, &stats);
  p.dropped_sentences = stats.dropped_sentences;
  if (c.data.sentence_steps > 0) {
    data::ExampleOptions single;
    single.max_tokens = c.data.max_example_tokens;
    p.sentence_examples = data::make_examples(train_tokens, single, sep);
  }
  if (p.train_examples.empty())
    throw InputError(c.source + ": no training examples (every sentence is longer than data.max_example_tokens = " +
                     std::to_string(c.data.max_example_tokens) + "?)");

  p.valid_corpus = std::move(corpora.valid);
  if (!p.valid_corpus.documents.empty()) {
    // The same passages for every seed, so validation scores compare across
    // runs. A model with source-side context translates one sentence at a
    // time: it is validated on examples made as its training examples are.
    if (c.data.context_side == "source" && c.data.context_sentences > 1)
      p.valid_examples = data::make_examples(data::tokenize(p.valid_corpus, tok), example_options(c), sep);
    else
      p.valid_examples = data::validation_passages(data::tokenize(p.valid_corpus, tok), c.data.valid_passages, sep, 1);
    if (c.data.max_valid_examples > 0 && static_cast<int64_t>(p.valid_examples.size()) > c.data.max_valid_examples)
      p.valid_examples.resize(static_cast<size_t>(c.data.max_valid_examples));
  }
  for (auto& t : corpora.tests)
    p.tests.push_back(
        make_test_set(c, tok, t.name, std::move(t.corpus), std::move(t.alignments), t.alignment_path, t.path));
  p.contrastive = std::move(corpora.contrastive);
  p.entity_frequency = std::move(corpora.entities);
  return p;
}

}  // namespace mambamt::train
