#include "bench/data_bench.h"

#include <stdlib.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>

#include "core/error.h"
#include "data/batching.h"
#include "data/examples.h"
#include "data/synthetic.h"
#include "data/tokenizer.h"

namespace mambamt::bench {

const char* const kDataBenchHelp =
    "Tokenisation + batching throughput (tokens/s, one thread) on the synthetic corpus: sentencepiece's "
    "per-sentence encode as the baseline, then the data pipeline (word-cached encode from a cold cache, "
    "examples, CAT-N, token-budget planning, tensor collation), with the ratio. Options: --quick "
    "(2000 documents), --docs N (default 20000), --type bpe|unigram, --vocab N (1000), --max-tokens N "
    "(4096), --cat-n N (5), --repeat R (best of R, default 3).";

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Best wall time of `repeat` runs of f.
double best_of(int repeat, const std::function<void()>& f) {
  double best = 1e300;
  for (int r = 0; r < repeat; ++r) {
    const auto t0 = Clock::now();
    f();
    best = std::min(best, seconds_since(t0));
  }
  return best;
}

int64_t parse_int(const std::vector<std::string>& args, size_t& i, const std::string& name) {
  if (i + 1 >= args.size()) throw UsageError("bench data: " + name + " needs a value");
  const std::string& v = args[++i];
  char* end = nullptr;
  const long long n = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != 0 || n < 1) throw UsageError("bench data: " + name + " must be a positive integer, got '" + v + "'");
  return n;
}

std::string mtok(double tokens, double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%8.2f", tokens / seconds / 1e6);
  return buf;
}

}  // namespace

int run_data_bench(const std::vector<std::string>& args, std::ostream& out) {
  int64_t docs = 20000, vocab = 1000, max_tokens = 4096, cat_n = 5, repeat = 3;
  std::string type = "bpe";
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--quick") docs = 2000, repeat = 1;
    else if (args[i] == "--docs") docs = parse_int(args, i, "--docs");
    else if (args[i] == "--vocab") vocab = parse_int(args, i, "--vocab");
    else if (args[i] == "--max-tokens") max_tokens = parse_int(args, i, "--max-tokens");
    else if (args[i] == "--cat-n") cat_n = parse_int(args, i, "--cat-n");
    else if (args[i] == "--repeat") repeat = parse_int(args, i, "--repeat");
    else if (args[i] == "--type" && i + 1 < args.size()) type = args[++i];
    else throw UsageError("bench data: unknown argument '" + args[i] + "'");
  }
  // One core: the throughput a data-loading thread gets.
  const int threads_before = torch::get_num_threads();
  torch::set_num_threads(1);

  data::SyntheticOptions so;
  so.train_docs = docs;
  so.valid_docs = 1;
  so.test_docs = 1;
  const data::Corpus corpus = data::generate_synthetic(so).train;

  std::string dir = (std::filesystem::temp_directory_path() / "mambamt-bench-data-XXXXXX").string();
  if (!::mkdtemp(dir.data())) throw Error("bench data: cannot create a temporary directory");
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } cleanup{dir};

  data::TokenizerOptions to;
  to.model_type = type;
  to.vocab_size = vocab;
  auto t0 = Clock::now();
  const data::Tokenizer trained = data::Tokenizer::train(corpus, to, dir);
  const double train_s = seconds_since(t0);

  // Baseline: sentencepiece encoding every sentence on its own.
  int64_t tokens = 0;
  const double base_s = best_of(static_cast<int>(repeat), [&] {
    tokens = 0;
    for (const auto& d : corpus.documents)
      for (const auto& s : d.sentences)
        tokens += static_cast<int64_t>(trained.encode_uncached(s.src).size() + trained.encode_uncached(s.tgt).size());
  });

  // The pipeline, stage by stage, from a freshly loaded tokenizer (cold cache).
  const data::SpecialIds ids = trained.specials();
  data::BatchingOptions bo;
  bo.max_tokens = max_tokens;
  data::CatNOptions co;
  co.n = cat_n;
  co.max_tokens = 512;
  double tok_s = 1e300, batch_s = 1e300;
  data::BatchPlanStats stats;
  int64_t batches = 0, pipeline_tokens = 0;
  for (int64_t r = 0; r < repeat; ++r) {
    const data::Tokenizer fresh = data::Tokenizer::load(dir);
    t0 = Clock::now();
    const data::TokenizedCorpus tc = data::tokenize(corpus, fresh);
    tok_s = std::min(tok_s, seconds_since(t0));
    pipeline_tokens = tc.num_tokens();

    t0 = Clock::now();
    const auto base = data::make_examples(tc, data::ExampleOptions{}, ids.sep);
    const auto epoch = data::apply_cat_n(base, co, ids.sep, 1, 0);
    const auto plan = data::plan_batches(epoch, bo, 1, &stats);
    int64_t rows = 0;
    for (const auto& b : plan) rows += data::collate(epoch, b, ids, bo).size();
    batch_s = std::min(batch_s, seconds_since(t0));
    batches = static_cast<int64_t>(plan.size());
    if (rows != static_cast<int64_t>(epoch.size())) throw Error("bench data: batches lost examples");
  }
  torch::set_num_threads(threads_before);

  // Batching handles each token once per CAT-N copy; its rate is reported per
  // corpus token so that the stages add up to the pipeline.
  const double n = static_cast<double>(tokens);
  char line[160];
  out << "mambamt bench data: synthetic corpus, " << docs << " documents, " << corpus.num_sentences()
      << " sentence pairs, " << tokens << " tokens (" << type << ", vocab " << trained.vocab_size()
      << ", trained in " << static_cast<int>(train_s * 1000) << " ms); 1 thread, best of " << repeat << "\n";
  out << "  stage                                                   Mtokens/s\n";
  out << "  baseline  sentencepiece encode, sentence by sentence    " << mtok(n, base_s) << "\n";
  out << "  tokenize  word-cached encode (cold cache)               " << mtok(n, tok_s) << "\n";
  out << "  batch     examples + CAT-" << cat_n << " + plan + collate tensors     " << mtok(n, batch_s) << "\n";
  out << "  pipeline  tokenize + batch                              " << mtok(n, tok_s + batch_s) << "\n";
  std::snprintf(line, sizeof line, "  ratio pipeline / baseline: %.2fx\n", base_s / (tok_s + batch_s));
  out << line;
  std::snprintf(line, sizeof line, "  %lld batches of <= %lld tokens, padding %.1f%%\n", static_cast<long long>(batches),
                static_cast<long long>(max_tokens), 100.0 * stats.padding_fraction());
  out << line;
  if (pipeline_tokens != tokens) throw Error("bench data: cached and uncached encodings differ in length");
  return 0;
}

}  // namespace mambamt::bench
