#include "train/evaluate.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>

#include <spdlog/spdlog.h>

#include "core/error.h"
#include "core/fs.h"
#include "core/hash.h"
#include "data/alignment.h"
#include "models/layers.h"
#include "data/batching.h"
#include "data/contrastive.h"
#include "results/bleu.h"
#include "results/bootstrap.h"
#include "results/chrf.h"
#include "results/entities.h"
#include "results/length_buckets.h"
#include "results/references.h"
#include "results/resegment.h"
#include "results/segments.h"
#include "results/ter.h"
#include "train/decode.h"
#include "train/explain.h"
#include "train/memory.h"
#include "train/trainer.h"

namespace fs = std::filesystem;

namespace mambamt::train {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
using Clock = std::chrono::steady_clock;
// Test examples explained into the store, and their longest source (tokens + eos).
constexpr size_t kExplainSentences = 3;
constexpr size_t kExplainMaxTokens = 40;
// Test sentences whose alignment is also read from occlusion (one forward pass
// per source token of their examples).
constexpr int64_t kOcclusionAlignmentSentences = 200;

results::BleuOptions bleu_options(const core::EvalConfig& e) {
  results::BleuOptions o;
  o.tokenize = results::parse_tokenizer(e.bleu_tokenize);
  o.lowercase = e.lowercase;
  return o;
}

results::ChrfOptions chrf_options(const core::EvalConfig& e, bool plus_plus) {
  results::ChrfOptions o = plus_plus ? results::ChrfOptions::plus_plus() : results::ChrfOptions{};
  o.lowercase = e.lowercase;
  return o;
}

// Decodes `examples` with the experiment's beam search; hypothesis texts.
std::vector<std::string> decode_texts(models::TranslationModel& model, const core::ExperimentConfig& c,
                                      const data::Tokenizer& tok, const std::vector<data::Example>& examples,
                                      const torch::Device& device) {
  auto ids = translate_examples(model, examples, tok.specials(), search_options(c.eval, c.eval.beam_size),
                                c.eval.batch_tokens, device, use_bf16(c.train, device));
  std::vector<std::string> out;
  out.reserve(ids.size());
  for (auto& h : ids) out.push_back(hypothesis_text(tok, h));
  return out;
}

// The document test example i comes from (its first sentence's; examples
// never cross documents), or -1 when it records none.
int64_t document_of(const TestSet& t, size_t i) {
  return i < t.examples.size() && !t.examples[i].spans.empty() ? t.examples[i].spans.front().doc : -1;
}

// The hypothesis texts of a test set: its examples translated whole, or one
// sentence at a time in document context (translates_in_context). With
// eval.nbest > 1 (whole examples only: the configuration refuses it in
// context), `nbest` receives the lines of their n-best lists (nbest_line).
// `sentences`, when given, receives each hypothesis split at <sep>
// (hypothesis_sentences).
std::vector<std::string> decode_test_set(models::TranslationModel& model, const core::ExperimentConfig& c,
                                         const data::Tokenizer& tok, const TestSet& t, const torch::Device& device,
                                         std::vector<std::string>& nbest,
                                         std::vector<std::vector<std::string>>* sentences = nullptr) {
  const models::SearchOptions search = search_options(c.eval, c.eval.beam_size);
  std::vector<std::string> out;
  out.reserve(t.examples.size());
  if (!translates_in_context(c)) {
    const std::vector<models::NBest> lists = translate_examples_nbest(
        model, t.examples, tok.specials(), search, c.eval.batch_tokens, device, use_bf16(c.train, device));
    for (size_t i = 0; i < lists.size(); ++i) {
      out.push_back(hypothesis_text(tok, lists[i].front().tokens));
      if (sentences) sentences->push_back(hypothesis_sentences(tok, lists[i].front().tokens));
      if (search.nbest > 1)
        for (const models::Hypothesis& h : lists[i]) nbest.push_back(nbest_line(i, hypothesis_text(tok, h.tokens), h));
    }
    return out;
  }
  auto ids = translate_in_context(model, t.tokenized, t.examples, c.data.context_sentences - 1,
                                  c.data.max_example_tokens, tok.specials(), search, c.eval.batch_tokens, device,
                                  use_bf16(c.train, device));
  for (auto& h : ids) {
    out.push_back(hypothesis_text(tok, h));
    if (sentences) sentences->push_back(hypothesis_sentences(tok, h));
  }
  return out;
}

void write_lines(const std::string& path, const std::vector<std::string>& lines) {
  std::string text;
  for (auto& l : lines) {
    std::string clean = l;
    for (char& ch : clean)
      if (ch == '\n' || ch == '\r') ch = ' ';
    text += clean + "\n";
  }
  core::make_dirs(fs::path(path).parent_path().string());
  core::write_file_atomic(path, text);
}

// The statistics of a test set translated as passages, by sentence: each
// passage's translation (`sentences`: split at its separators, one list per
// example) cut into the passage's sentences (results::split_passage). Null
// when no example holds more than one sentence to translate.
struct SentenceScores {
  std::vector<std::string> sources, hypotheses, references;  // one per sentence
  std::vector<results::BleuStats> bleu;
  std::vector<results::ChrfStats> chrf;
  int64_t passages = 0;       // examples of two or more sentences
  int64_t by_separators = 0;  // of those, split at the model's own separators
};
std::optional<SentenceScores> score_by_sentence(const TestSet& t, const std::vector<std::vector<std::string>>& sentences,
                                                const results::BleuOptions& bo, const results::ChrfOptions& co) {
  const bool passages = std::any_of(t.examples.begin(), t.examples.end(),
                                    [](const data::Example& x) { return x.sentences() - x.context > 1; });
  if (!passages || sentences.size() != t.examples.size()) return std::nullopt;
  SentenceScores out;
  for (size_t i = 0; i < t.examples.size(); ++i) {
    const std::vector<std::string> r = data::target_sentences(t.corpus, t.examples[i]);
    const std::vector<std::string> src = data::source_sentences(t.corpus, t.examples[i]);
    const results::PassageSplit split = results::split_passage(sentences[i], r);
    if (r.size() > 1) {
      ++out.passages;
      out.by_separators += split.by_separators ? 1 : 0;
    }
    out.hypotheses.insert(out.hypotheses.end(), split.sentences.begin(), split.sentences.end());
    out.references.insert(out.references.end(), r.begin(), r.end());
    out.sources.insert(out.sources.end(), src.begin(), src.end());
  }
  const results::ReferenceStreams streams{out.references};
  out.bleu = results::bleu_corpus_segment_stats(out.hypotheses, streams, bo);
  out.chrf = results::chrf_corpus_segment_stats(out.hypotheses, streams, co);
  return out;
}

// Rows of quality_by_length as a table (bleu, chrf, n, mean_src_len).
core::ResultTable length_table(const std::vector<results::LengthBucket>& buckets,
                               const std::vector<std::string>& labels = {}) {
  core::ResultTable t;
  t.columns = {"bleu", "chrf", "n", "mean_src_len"};
  for (size_t i = 0; i < buckets.size(); ++i) {
    const auto& b = buckets[i];
    t.rows.push_back(i < labels.size() ? labels[i] : b.label);
    t.values.push_back(b.segments > 0 ? b.bleu : kNaN);
    t.values.push_back(b.segments > 0 ? b.chrf : kNaN);
    t.values.push_back(static_cast<double>(b.segments));
    t.values.push_back(b.segments > 0 ? b.mean_source_length : kNaN);
  }
  return t;
}

std::vector<int64_t> source_lengths(const std::vector<data::Example>& examples) {
  std::vector<int64_t> out;
  for (auto& e : examples) out.push_back(std::max<int64_t>(1, static_cast<int64_t>(e.src.size())));
  return out;
}

// Scores of one whole set (one bucket spanning every length).
results::LengthBucket whole_set(const std::vector<int64_t>& lengths, const std::vector<std::string>& hyps,
                                const std::vector<std::string>& refs, const core::EvalConfig& e) {
  results::LengthBucket b;
  b.segments = static_cast<int64_t>(hyps.size());
  if (hyps.empty()) {
    b.bleu = b.chrf = b.mean_source_length = kNaN;
    return b;
  }
  b.bleu = results::corpus_bleu(hyps, {refs}, bleu_options(e)).score;
  b.chrf = results::corpus_chrf(hyps, {refs}, chrf_options(e, false)).score;
  double sum = 0;
  for (auto l : lengths) sum += static_cast<double>(l);
  b.mean_source_length = sum / static_cast<double>(lengths.size());
  return b;
}

bool on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  if (!path) return false;
  std::stringstream ss(path);
  for (std::string dir; std::getline(ss, dir, ':');) {
    if (dir.empty()) continue;
    fs::path p = fs::path(dir) / program;
    if (::access(p.c_str(), X_OK) == 0) return true;
  }
  return false;
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

const std::vector<double>& gate_thresholds() {
  static const std::vector<double> t = {0.01, 0.05, 0.1, 0.2, 0.5};
  return t;
}

std::vector<int64_t> length_bucket_edges(const std::vector<int64_t>& upper) {
  std::vector<int64_t> edges{1};
  for (auto u : upper)
    if (u + 1 > edges.back()) edges.push_back(u + 1);
  return edges;
}

CometScores comet_score(const std::vector<std::string>& sources, const std::vector<std::string>& hypotheses,
                        const std::vector<std::string>& references, const std::string& work_dir, bool gpu,
                        const std::string& model) {
  CometScores out;
  if (!on_path("comet-score")) {
    out.note = "comet-score not found on PATH: COMET skipped";
    return out;
  }
  core::make_dirs(work_dir);
  const std::string src = work_dir + "/src.txt", hyp = work_dir + "/hyp.txt", ref = work_dir + "/ref.txt",
                    err = work_dir + "/stderr.txt";
  write_lines(src, sources);
  write_lines(hyp, hypotheses);
  write_lines(ref, references);
  // Without --only_system (and --quiet, which meant the same in earlier
  // releases) it prints every segment's score before the system's; its logs
  // and progress bars go to stderr, kept apart.
  const std::string cmd = "comet-score -s " + shell_quote(src) + " -t " + shell_quote(hyp) + " -r " +
                          shell_quote(ref) + (model.empty() ? "" : " --model " + shell_quote(model)) + " --gpus " +
                          (gpu ? "1" : "0") + " 2>" + shell_quote(err);
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) {
    out.note = "comet-score could not be started";
    return out;
  }
  std::string output;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) output.append(buf, n);
  const int st = ::pclose(p);
  std::string errors;
  try {
    errors = core::read_file(err);
  } catch (const std::exception&) {
  }
  std::error_code ec;
  fs::remove_all(work_dir, ec);
  auto tail = [](const std::string& text) { return text.substr(text.size() > 500 ? text.size() - 500 : 0); };
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    out.note = "comet-score failed: " + tail(errors + output);
    return out;
  }
  // "<file>\tSegment <i>\tscore: <x>" per segment, then "<file>\tscore: <x>".
  auto score_field = [](const std::string& field, double& value) {
    if (field.rfind("score: ", 0) != 0) return false;
    try {
      size_t used = 0;
      value = std::stod(field.substr(7), &used);
      return used > 0;
    } catch (const std::exception&) {
      return false;
    }
  };
  std::vector<double> segments(hypotheses.size(), kNaN);
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> fields;
    for (size_t at = 0;;) {
      const size_t tab = line.find('\t', at);
      fields.push_back(line.substr(at, tab == std::string::npos ? std::string::npos : tab - at));
      if (tab == std::string::npos) break;
      at = tab + 1;
    }
    double v = kNaN;
    if (fields.size() == 2 && score_field(fields[1], v)) {
      out.system = v;
    } else if (fields.size() >= 3 && fields[1].rfind("Segment ", 0) == 0 && score_field(fields[2], v)) {
      try {
        const long long i = std::stoll(fields[1].substr(8));
        if (i >= 0 && static_cast<size_t>(i) < segments.size()) segments[static_cast<size_t>(i)] = v;
      } catch (const std::exception&) {
      }
    }
  }
  if (!segments.empty() && std::none_of(segments.begin(), segments.end(), [](double v) { return std::isnan(v); }))
    out.segments = std::move(segments);
  if (std::isnan(out.system)) out.note = "comet-score printed no system score: " + tail(output);
  return out;
}

std::vector<results::ContrastiveScores> contrastive_scores(models::TranslationModel& model,
                                                           const core::ExperimentConfig& c,
                                                           const data::Tokenizer& tok,
                                                           const std::vector<data::ContrastiveExample>& examples,
                                                           const torch::Device& device) {
  const int32_t sep = tok.specials().sep;
  const int64_t budget = c.data.max_example_tokens;
  const int64_t context = std::max<int64_t>(0, c.data.context_sentences - 1);
  // Source-side context: the candidates are scored after the source context
  // alone, with no target prefix (the model never saw one).
  const bool source_only = c.data.context_side == "source";
  std::vector<data::Example> pairs;
  std::vector<int64_t> score_from;
  std::vector<size_t> first;  // index of each example's reference pair
  for (auto& ex : examples) {
    if (ex.contrastive.empty()) throw InputError("contrastive example of document " + ex.doc_id + " has no variants");
    std::vector<int32_t> src = tok.encode(ex.source);
    std::vector<std::vector<int32_t>> cands;
    cands.push_back(tok.encode(ex.reference));
    for (auto& v : ex.contrastive) cands.push_back(tok.encode(v));
    size_t longest = 0;
    for (auto& cand : cands) longest = std::max(longest, cand.size());
    // Context sentences, newest first, while they fit the training budget.
    std::vector<std::vector<int32_t>> ctx_src, ctx_tgt;
    int64_t src_len = static_cast<int64_t>(src.size()) + 1, tgt_len = static_cast<int64_t>(longest) + 1;
    const size_t available = source_only ? ex.src_context.size() : std::min(ex.src_context.size(), ex.tgt_context.size());
    const int64_t n_ctx = std::min<int64_t>(context, static_cast<int64_t>(available));
    for (int64_t k = 0; k < n_ctx; ++k) {
      const size_t i = ex.src_context.size() - 1 - static_cast<size_t>(k);
      auto s = tok.encode(ex.src_context[i]);
      auto t = source_only ? std::vector<int32_t>{} : tok.encode(ex.tgt_context[ex.tgt_context.size() - 1 - static_cast<size_t>(k)]);
      if (src_len + static_cast<int64_t>(s.size()) + 1 > budget) break;
      if (!source_only && tgt_len + static_cast<int64_t>(t.size()) + 1 > budget) break;
      src_len += static_cast<int64_t>(s.size()) + 1;
      ctx_src.insert(ctx_src.begin(), std::move(s));
      if (source_only) continue;
      tgt_len += static_cast<int64_t>(t.size()) + 1;
      ctx_tgt.insert(ctx_tgt.begin(), std::move(t));
    }
    std::vector<int32_t> full_src, prefix;
    for (auto& s : ctx_src) {
      full_src.insert(full_src.end(), s.begin(), s.end());
      full_src.push_back(sep);
    }
    full_src.insert(full_src.end(), src.begin(), src.end());
    for (auto& t : ctx_tgt) {
      prefix.insert(prefix.end(), t.begin(), t.end());
      prefix.push_back(sep);
    }
    first.push_back(pairs.size());
    for (auto& cand : cands) {
      data::Example e;
      e.src = full_src;
      e.tgt = prefix;
      e.tgt.insert(e.tgt.end(), cand.begin(), cand.end());
      pairs.push_back(std::move(e));
      score_from.push_back(static_cast<int64_t>(prefix.size()));
    }
  }
  std::vector<double> scores = score_pairs(model, pairs, score_from, tok.specials(), c.eval.batch_tokens, device,
                                           use_bf16(c.train, device));
  std::vector<results::ContrastiveScores> out;
  for (size_t i = 0; i < examples.size(); ++i) {
    results::ContrastiveScores s;
    s.reference = scores[first[i]];
    for (size_t k = 1; k <= examples[i].contrastive.size(); ++k) s.contrastive.push_back(scores[first[i] + k]);
    s.label = examples[i].label;
    s.distance = examples[i].distance;
    out.push_back(std::move(s));
  }
  return out;
}

namespace {

void write_contrastive(core::ExperimentStore& store, const std::string& prefix,
                       const std::vector<data::ContrastiveExample>& examples,
                       const std::vector<results::ContrastiveScores>& scores) {
  results::ContrastiveResult all = results::contrastive_accuracy(scores);
  store.set_scalar(prefix + "accuracy", all.total.accuracy());
  std::vector<results::ContrastiveScores> pronouns;
  std::map<std::string, std::vector<results::ContrastiveScores>> by_phenomenon;
  for (size_t i = 0; i < scores.size(); ++i) {
    if (examples[i].phenomenon == "pronoun") pronouns.push_back(scores[i]);
    by_phenomenon[examples[i].phenomenon].push_back(scores[i]);
  }
  core::ResultTable by_pronoun;
  by_pronoun.columns = {"accuracy", "n"};
  if (!pronouns.empty()) {
    results::ContrastiveResult pr = results::contrastive_accuracy(pronouns);
    for (auto& [label, cell] : pr.by_label) {
      by_pronoun.rows.push_back(label);
      by_pronoun.values.push_back(cell.accuracy());
      by_pronoun.values.push_back(static_cast<double>(cell.total));
    }
  }
  store.set_table(prefix + "by_pronoun", by_pronoun);
  core::ResultTable by_distance;
  by_distance.columns = {"accuracy", "n"};
  for (int b = 0; b < results::kDistanceBuckets; ++b) {
    by_distance.rows.push_back(results::distance_bucket_label(b));
    by_distance.values.push_back(all.by_distance[b].accuracy());
    by_distance.values.push_back(static_cast<double>(all.by_distance[b].total));
  }
  store.set_table(prefix + "by_distance", by_distance);
  core::ResultTable by_ph;
  by_ph.columns = {"accuracy", "n"};
  for (auto& [name, list] : by_phenomenon) {
    results::ContrastiveResult r = results::contrastive_accuracy(list);
    by_ph.rows.push_back(name);
    by_ph.values.push_back(r.total.accuracy());
    by_ph.values.push_back(static_cast<double>(r.total.total));
  }
  store.set_table(prefix + "by_phenomenon", by_ph);
  // Each example's outcome and antecedent distance in the set's order, and the
  // set's fingerprint (text data.contrastive[.<set>]): the collector's paired
  // test of two experiments on the same examples.
  core::ResultTable outcomes;
  outcomes.columns = {"correct", "distance"};
  for (size_t i = 0; i < scores.size(); ++i) {
    outcomes.rows.push_back(std::to_string(i));
    outcomes.values.push_back(results::contrastive_correct(scores[i]) ? 1 : 0);
    outcomes.values.push_back(static_cast<double>(scores[i].distance));
  }
  store.set_table(prefix + "examples", outcomes);
  std::string text = "data." + prefix.substr(0, prefix.size() - 1);  // prefix: contrastive/[<set>/]
  std::replace(text.begin(), text.end(), '/', '.');
  store.set_text(text, data::contrastive_summary(examples));
}

// Peak training memory of one forward+backward at batch 1, source and target
// of `length` tokens, and the decoder state after `length` decoding steps (MiB).
std::pair<double, double> memory_at_length(models::TranslationModel& model, int64_t length, int64_t vocab,
                                           const torch::Device& device, bool bf16) {
  double train_mb = kNaN, state_mb = kNaN;
  const auto ids = torch::randint(5, std::max<int64_t>(vocab, 6), {1, length},
                                  torch::TensorOptions().dtype(torch::kInt64).device(device));
  const auto mask = torch::ones({1, length}, torch::TensorOptions().dtype(torch::kBool).device(device));
  try {
    {
      models::EvalModeGuard eval_mode(model);  // no dropout: a measurement, not a training step
      const bool reset = start_peak_measurement(device);
      const double base = device.is_cuda() ? 0 : rss_mb();
      {
        AutocastGuard autocast(device, bf16);
        torch::Tensor logits = model.forward(ids, mask, ids, mask);
        logits.to(torch::kFloat32).logsumexp(-1).sum().backward();
      }
      if (reset) train_mb = device.is_cuda() ? cuda_peak_mb(device) : std::max(0.0, peak_rss_mb() - base);
      for (auto& p : model.parameters()) p.mutable_grad() = torch::Tensor();
    }
    {
      torch::NoGradGuard no_grad;
      models::EvalModeGuard eval_mode(model);
      AutocastGuard autocast(device, bf16);
      auto src = ids.narrow(1, 0, std::min<int64_t>(length, 16));
      auto src_mask = mask.narrow(1, 0, src.size(1));
      models::InferenceState st = model.start(src, src_mask, length);
      torch::Tensor tok = torch::full({1}, 2, torch::TensorOptions().dtype(torch::kInt64).device(device));
      for (int64_t t = 0; t < length; ++t) {
        model.step(st, tok);
        tok = ids.select(1, t);
      }
      state_mb = static_cast<double>(st.bytes().decoder_state()) / (1024.0 * 1024.0);
    }
  } catch (const std::exception& e) {
    spdlog::warn("memory at length {}: {}", length, e.what());
  }
  return {train_mb, state_mb};
}

}  // namespace

EvalParts eval_parts_named(const std::set<std::string>& names) {
  EvalParts p;
  const std::vector<std::pair<std::string, bool*>> fields = {
      {"test_sets", &p.test_sets},         {"contrastive", &p.contrastive}, {"entities", &p.entities},
      {"extrapolation", &p.extrapolation}, {"efficiency", &p.efficiency},   {"explain", &p.explain},
      {"gates", &p.gates},                 {"alignment", &p.alignment}};
  for (const auto& [name, on] : fields) *on = names.count(name) > 0;
  for (const std::string& n : names)
    if (std::none_of(fields.begin(), fields.end(), [&n](const auto& f) { return f.first == n; }))
      throw Error("no part of the evaluation is called `" + n + "`");
  return p;
}

namespace {

// The suite, part by part; `stop` is asked between them (and, through the
// caller's StopScope, between the batches inside them).
bool evaluate_parts(models::TranslationModel& model, const core::ExperimentConfig& c, const PreparedData& data,
                    const torch::Device& device, core::ExperimentStore& store, const std::string& exp_dir,
                    const TrainingFacts& facts, const EvalParts& parts, const std::function<bool()>& should_stop) {
  auto stop = [&] { return should_stop && should_stop(); };
  const data::Tokenizer& tok = *data.tokenizer;
  const auto& e = c.eval;
  const bool bf16 = use_bf16(c.train, device);
  // Gated cross-attention skips below eval.gate_skip while the suite runs.
  models::GateSkipGuard gate_skip(model, e.gate_skip);
  std::vector<std::vector<std::string>> all_hyps(data.tests.size());

  if (parts.test_sets) {
    if (!facts.weights.empty()) store.set_text("weights", facts.weights);
    for (size_t si = 0; si < data.tests.size(); ++si) {
      if (stop()) return false;
      const TestSet& t = data.tests[si];
      const auto t0 = Clock::now();
      std::vector<std::string> nbest;
      std::vector<std::vector<std::string>> sentences;
      std::vector<std::string> hyps = decode_test_set(model, c, tok, t, device, nbest, &sentences);
      all_hyps[si] = hyps;
      write_lines((fs::path(exp_dir) / "hyp" / (t.name + ".txt")).string(), hyps);
      if (!nbest.empty()) write_lines((fs::path(exp_dir) / "hyp" / (t.name + ".nbest.txt")).string(), nbest);
      const auto bo = bleu_options(e);
      const auto co = chrf_options(e, false);
      const auto cpp = chrf_options(e, true);
      results::ReferenceStreams refs{t.references};
      const auto bleu_segs = results::bleu_corpus_segment_stats(hyps, refs, bo);
      const auto chrf_segs = results::chrf_corpus_segment_stats(hyps, refs, co);
      const double bleu = results::bleu_from_stats(results::sum_bleu_stats(bleu_segs), bo).score;
      const double chrf = results::chrf_from_stats(results::sum_chrf_stats(chrf_segs, co), co).score;
      const double chrfpp = results::corpus_chrf(hyps, refs, cpp).score;
      store.set_text("data.test." + t.name, data::corpus_summary(t.corpus));
      store.set_scalar(t.name + "/bleu", bleu);
      store.set_scalar(t.name + "/chrf", chrf);
      store.set_scalar(t.name + "/chrfpp", chrfpp);
      const double ter = results::corpus_ter(hyps, refs).score;
      store.set_scalar(t.name + "/ter", ter);
      // What a paper prints beside the scores: sacreBLEU's signatures.
      const int nrefs = static_cast<int>(refs.size());
      const std::string version = "|" + results::signature_version_field();
      store.set_text("signature." + t.name + ".bleu", results::bleu_signature(bo, nrefs) + version);
      store.set_text("signature." + t.name + ".chrf", results::chrf_signature(co, nrefs) + version);
      store.set_text("signature." + t.name + ".chrfpp", results::chrf_signature(cpp, nrefs) + version);
      store.set_text("signature." + t.name + ".ter", results::ter_signature({}, nrefs) + version);
      // Per-segment statistics: the collector's paired tests against other experiments.
      if (!hyps.empty()) store.set_table(t.name + "/segments", results::segment_table(bleu_segs, chrf_segs, co));
      // Passages translated whole are also scored sentence by sentence, on the
      // segments of a model that translates single sentences: the paired tests
      // between the two use them.
      double sentence_bleu = bleu;
      const std::optional<SentenceScores> by_sentence = score_by_sentence(t, sentences, bo, co);
      if (by_sentence) {
        store.set_table(t.name + "/sentence_segments", results::segment_table(by_sentence->bleu, by_sentence->chrf, co));
        sentence_bleu = results::bleu_from_stats(results::sum_bleu_stats(by_sentence->bleu), bo).score;
        const double sentence_chrf = results::chrf_from_stats(results::sum_chrf_stats(by_sentence->chrf, co), co).score;
        store.set_scalar(t.name + "/passages_split_by_separator",
                         static_cast<double>(by_sentence->by_separators) /
                             static_cast<double>(std::max<int64_t>(1, by_sentence->passages)));
        spdlog::info("test set {}: {} of {} passages split into their sentences at the model's separators, {} re-cut; "
                     "BLEU by sentence {:.2f}, chrF by sentence {:.2f}",
                     t.name, by_sentence->by_separators, by_sentence->passages,
                     by_sentence->passages - by_sentence->by_separators, sentence_bleu, sentence_chrf);
      }
      if (!hyps.empty()) store.set_scalar(t.name + "/sentence_bleu", sentence_bleu);
      if (e.bootstrap_samples > 0 && !hyps.empty()) {
        results::BootstrapOptions bs;
        bs.num_samples = static_cast<int>(e.bootstrap_samples);
        auto bb = results::bootstrap_bleu(bleu_segs, bo, bs);
        auto cb = results::bootstrap_chrf(chrf_segs, co, bs);
        store.set_scalar(t.name + "/bleu_ci_low", bb.lower);
        store.set_scalar(t.name + "/bleu_ci_high", bb.upper);
        store.set_scalar(t.name + "/chrf_ci_low", cb.lower);
        store.set_scalar(t.name + "/chrf_ci_high", cb.upper);
      }
      results::LengthBucketOptions lo;
      lo.edges = length_bucket_edges(e.length_buckets);
      lo.bleu = bo;
      lo.chrf = co;
      if (!hyps.empty()) store.set_table(t.name + "/by_length", length_table(results::quality_by_length(source_lengths(t.examples), hyps, refs, lo)));
      if (e.comet == "auto") {
        // comet-score runs beside this process and loads its own model: on a
        // GPU it gets the memory this process holds cached but unused.
        release_cached_memory(device);
        const std::string work_dir = (fs::path(exp_dir) / "hyp" / ".comet").string();
        const CometScores comet = comet_score(t.sources, hyps, t.references, work_dir, device.is_cuda(), e.comet_model);
        if (!std::isnan(comet.system)) {
          store.set_scalar(t.name + "/comet", comet.system);
          // Segment scores: the paired tests of COMET (results::paired_significance).
          if (!comet.segments.empty())
            store.set_table(t.name + "/comet_segments", results::comet_segment_table(comet.segments));
          // Passages are scored by sentence too, as for BLEU above.
          CometScores sentence_comet = comet;
          if (by_sentence) {
            sentence_comet = comet_score(by_sentence->sources, by_sentence->hypotheses, by_sentence->references,
                                         work_dir, device.is_cuda(), e.comet_model);
            if (!sentence_comet.segments.empty())
              store.set_table(t.name + "/sentence_comet_segments",
                              results::comet_segment_table(sentence_comet.segments));
            if (std::isnan(sentence_comet.system)) spdlog::info("by sentence: {}", sentence_comet.note);
          }
          if (!std::isnan(sentence_comet.system)) store.set_scalar(t.name + "/sentence_comet", sentence_comet.system);
          // What scored it (replacing the note of an earlier run that could not).
          store.set_text("comet", "scored by comet-score (" +
                                      (e.comet_model.empty() ? std::string("its default model") : e.comet_model) +
                                      ") on the " +
                                      (device.is_cuda() ? "GPU" : "CPU") +
                                      (comet.segments.empty() ? ", system score only" : ", segment by segment"));
          spdlog::info("test set {}: COMET {:.4f} ({} segment scores), by sentence {:.4f}", t.name, comet.system,
                       comet.segments.size(), sentence_comet.system);
        } else {
          spdlog::info("{}", comet.note);
          store.set_text("comet", comet.note);
        }
      } else {
        store.set_text("comet", "eval.comet = \"off\"");
      }
      store.commit();
      spdlog::info("test set {}: {} segments, BLEU {:.2f} chrF {:.2f} chrF++ {:.2f} TER {:.2f} ({:.1f} s)", t.name,
                   hyps.size(), bleu, chrf, chrfpp, ter, std::chrono::duration<double>(Clock::now() - t0).count());
    }
  }

  if (stop()) return false;
  if (parts.contrastive && e.contrastive) {
    for (size_t k = 0; k < data.contrastive.size(); ++k) {
      const ContrastiveSet& set = data.contrastive[k];
      if (set.examples.empty()) continue;
      const auto t0 = Clock::now();
      auto scores = contrastive_scores(model, c, tok, set.examples, device);
      // The first set is the experiment's contrastive set; further ones also under their name.
      if (k == 0) write_contrastive(store, "contrastive/", set.examples, scores);
      if (k > 0 || data.contrastive.size() > 1) write_contrastive(store, "contrastive/" + set.name + "/", set.examples, scores);
      store.commit();
      spdlog::info("contrastive set {}: {} examples, accuracy {:.3f} ({:.1f} s)", set.name, scores.size(),
                   results::contrastive_accuracy(scores).total.accuracy(),
                   std::chrono::duration<double>(Clock::now() - t0).count());
    }
  }

  if (stop()) return false;
  if (parts.gates && !data.tests.empty() && !data.tests[0].examples.empty()) {
    // How often the gates of gated cross-attention are (nearly) closed on the
    // references of the first test set: the share of cross-attention work a
    // threshold skips (a layer's gates, and all layers' together).
    const auto gates = cross_gate_values(model, data.tests[0].examples, tok.specials(), e.batch_tokens, device, bf16);
    if (!gates.empty()) {
      const auto& thresholds = gate_thresholds();
      core::ResultTable table;
      table.columns = {"mean"};
      for (double t : thresholds) {
        std::ostringstream name;
        name << "below_" << t;
        table.columns.push_back(name.str());
      }
      table.columns.push_back("skipped");
      table.columns.push_back("n");
      double sum = 0;
      int64_t n = 0, skipped = 0;
      for (const auto& layer : gates) {
        double layer_sum = 0;
        std::vector<int64_t> below(thresholds.size(), 0);
        int64_t layer_skipped = 0;
        for (float v : layer.values) {
          layer_sum += v;
          for (size_t k = 0; k < thresholds.size(); ++k) below[k] += v < thresholds[k];
          layer_skipped += v < e.gate_skip;
        }
        const auto count = static_cast<int64_t>(layer.values.size());
        const double denom = count > 0 ? static_cast<double>(count) : kNaN;
        table.rows.push_back(layer.layer);
        table.values.push_back(layer_sum / denom);
        for (int64_t b : below) table.values.push_back(static_cast<double>(b) / denom);
        table.values.push_back(static_cast<double>(layer_skipped) / denom);
        table.values.push_back(static_cast<double>(count));
        sum += layer_sum;
        n += count;
        skipped += layer_skipped;
      }
      const double denom = n > 0 ? static_cast<double>(n) : kNaN;
      store.set_table("gates/by_layer", table);
      store.set_scalar("gates/mean", sum / denom);
      store.set_scalar("gates/skipped", static_cast<double>(skipped) / denom);
      store.set_scalar("gates/skip_threshold", e.gate_skip);
      spdlog::info("cross-attention gates on {} reference tokens x {} gated layers: mean {:.3f}, {:.1f}% below "
                   "eval.gate_skip = {}",
                   gates.front().values.size(), gates.size(), sum / denom, 100.0 * static_cast<double>(skipped) / denom,
                   e.gate_skip);
      // The same along the model's own translations: step-by-step decoding
      // equals teacher forcing, so these are the gates its search saw on the
      // tokens it output (translations made in document context aside: their
      // forced prefixes are not in the test examples).
      const std::vector<std::string>& hyps = all_hyps[0];
      if (hyps.size() == data.tests[0].examples.size() && !translates_in_context(c)) {
        std::vector<data::Example> own = data.tests[0].examples;
        for (size_t i = 0; i < own.size(); ++i) own[i].tgt = tok.encode(hyps[i]);
        double own_sum = 0, own_n = 0, own_skipped = 0;
        for (const auto& layer : cross_gate_values(model, own, tok.specials(), e.batch_tokens, device, bf16))
          for (float v : layer.values) {
            own_sum += v;
            own_n += 1;
            own_skipped += v < e.gate_skip;
          }
        store.set_scalar("gates/translations_mean", own_n > 0 ? own_sum / own_n : kNaN);
        store.set_scalar("gates/translations_skipped", own_n > 0 ? own_skipped / own_n : kNaN);
        spdlog::info("cross-attention gates along the translations: mean {:.3f}, {:.1f}% skipped", own_sum / own_n,
                     100.0 * own_skipped / own_n);
      }
      store.commit();
    }
  }

  if (stop()) return false;
  const auto gold = std::find_if(data.tests.begin(), data.tests.end(),
                                 [](const TestSet& t) { return !t.alignments.empty(); });
  if (parts.alignment && e.alignment && gold != data.tests.end()) {
    // Word alignments read from the attention over the source (each layer's,
    // and all layers' together) and from occlusion (every kind), scored
    // against the gold alignments of the first test set that has them.
    const TestSet& t = *gold;
    const auto t0 = Clock::now();
    const AttentionAlignment a = attention_alignment(model, t, tok, device);
    int64_t skipped = 0;
    const results::AlignmentCounts occlusion =
        occlusion_alignment(model, t, tok, device, kOcclusionAlignmentSentences, &skipped);
    if (!a.empty()) skipped = a.skipped;  // over every example, not only those occlusion read
    core::ResultTable table;
    table.columns = {"aer", "precision", "recall", "links", "gold_links", "sentences"};
    auto add_row = [&table](const std::string& name, const results::AlignmentCounts& n) {
      table.rows.push_back(name);
      for (double v : {n.aer(), n.precision(), n.recall(), static_cast<double>(n.predicted),
                       static_cast<double>(n.sure), static_cast<double>(n.sentences)})
        table.values.push_back(v);
    };
    for (size_t l = 0; l < a.layers.size(); ++l) add_row(a.layers[l], a.by_layer[l]);
    // The layer reported: chosen on the other half of the sentences, so that
    // a model with more layers to choose from is not favoured by the choice.
    const results::HeldOutLayer held = results::held_out_layer(a.halves());
    const int64_t best = results::best_layer(a.by_layer);
    if (!a.empty()) {
      add_row("all layers", a.all_layers);
      add_row("held-out layer", held.counts);
    }
    add_row("occlusion", occlusion);
    store.set_table("alignment/by_layer", table);
    store.set_scalar("alignment/occlusion_aer", occlusion.aer());
    std::string note = std::to_string(a.empty() ? occlusion.sentences : a.all_layers.sentences) + " sentences of " +
                       t.name + " against " + t.alignment_file +
                       (occlusion.sentences < a.all_layers.sentences
                            ? " (occlusion: the first " + std::to_string(occlusion.sentences) + ")"
                            : "") +
                       (skipped > 0
                            ? ", " + std::to_string(skipped) + " left out (tokens that do not split into the words)"
                            : "");
    if (!a.empty()) {
      auto layer_name = [&a](int64_t l) { return l < 0 ? std::string("none") : a.layers[static_cast<size_t>(l)]; };
      store.set_scalar("alignment/aer", held.counts.aer());
      // Each sentence's counts at the layer its half was scored at: the units
      // of the paired test of AER (results::paired_aer_p), with the text they
      // were scored on.
      core::ResultTable sentences;
      sentences.columns = {"predicted", "sure", "sure_hits", "possible_hits"};
      for (const AttentionAlignment::Sentence& s : a.sentences) {
        const int64_t l = held.chosen[static_cast<size_t>(s.half)];
        if (l < 0) continue;
        const results::AlignmentCounts& n = s.by_layer[static_cast<size_t>(l)];
        sentences.rows.push_back(std::to_string(s.document) + ":" + std::to_string(s.sentence));
        for (int64_t v : {n.predicted, n.sure, n.sure_hits, n.possible_hits})
          sentences.values.push_back(static_cast<double>(v));
      }
      store.set_table("alignment/sentences", sentences);
      core::Fnv64 gold_links;
      for (const auto& document : t.alignments)
        for (const data::WordAlignment& links : document) gold_links.add(data::format_alignment(links) + "\n");
      store.set_text("data.alignment", t.name + " " + data::corpus_summary(t.corpus) + ", gold links " +
                                           gold_links.hex());
      store.set_scalar("alignment/aer_best_layer", best < 0 ? kNaN : a.by_layer[static_cast<size_t>(best)].aer());
      store.set_scalar("alignment/aer_all_layers", a.all_layers.aer());
      // One scored sentence (or scored sentences in one half only): no layer
      // can be chosen on the other half, and the reported AER is NaN.
      const std::string held_out =
          held.counts.sentences == 0
              ? "held-out layer: none (every scored sentence is in one half: a held-out choice needs two or more)"
              : "held-out layer: " + layer_name(held.chosen[0]) + " for the even sentences, " +
                    layer_name(held.chosen[1]) + " for the odd (each chosen on the other half)";
      note = held_out + "; best layer " + layer_name(best) + "; " + note;
      spdlog::info("alignment: AER {:.3f} (held-out layer; best layer {} {:.3f}), {:.3f} over all layers, {:.3f} by "
                   "occlusion; {} sentences ({:.1f} s)",
                   held.counts.aer(), layer_name(best), best < 0 ? kNaN : a.by_layer[static_cast<size_t>(best)].aer(),
                   a.all_layers.aer(), occlusion.aer(), occlusion.sentences,
                   std::chrono::duration<double>(Clock::now() - t0).count());
    } else {
      note = "no attention over the source: occlusion only; " + note;
      spdlog::info("alignment: AER {:.3f} by occlusion (no attention over the source); {} sentences ({:.1f} s)",
                   occlusion.aer(), occlusion.sentences, std::chrono::duration<double>(Clock::now() - t0).count());
    }
    store.set_text("alignment", note);
    store.commit();
  }

  if (stop()) return false;
  if (parts.entities && e.entity_recall && !data.tests.empty()) {
    const TestSet& t = data.tests[0];
    std::vector<std::string> hyps = all_hyps[0];
    if (hyps.empty() && !t.examples.empty()) {
      std::vector<std::string> unused_nbest;
      hyps = decode_test_set(model, c, tok, t, device, unused_nbest);
    }
    std::vector<results::EntitySegment> segs;
    std::unordered_map<std::string, int64_t> freq;
    if (!data.entity_frequency.empty()) {
      for (auto& [name, n] : data.entity_frequency) freq[name] = n;
      for (size_t i = 0; i < hyps.size(); ++i) {
        results::EntitySegment s{t.sources[i], t.references[i], hyps[i], {}, document_of(t, i)};
        for (auto& [name, n] : data.entity_frequency)
          if (results::contains_verbatim(s.source, name)) s.entities.push_back(name);
        segs.push_back(std::move(s));
      }
    } else {
      std::vector<std::string> names;
      for (size_t i = 0; i < hyps.size(); ++i) {
        results::EntitySegment s{t.sources[i], t.references[i], hyps[i], {}, document_of(t, i)};
        s.entities = results::verbatim_entity_candidates(s.source, s.reference);
        names.insert(names.end(), s.entities.begin(), s.entities.end());
        segs.push_back(std::move(s));
      }
      results::EntityCounter counter(names);
      for (auto& d : data.train_corpus.documents)
        for (auto& s : d.sentences) counter.add_line(s.src);
      freq = counter.counts();
    }
    results::EntityRecallResult r = results::entity_recall(segs, freq);
    results::EntityConsistencyResult k = results::entity_consistency(segs, freq);
    store.set_scalar("entities/recall", r.total.recall());
    store.set_scalar("entities/consistency", k.total.consistency());
    store.set_scalar("entities/consistency_n", static_cast<double>(k.total.rendered));
    core::ResultTable table;
    table.columns = {"recall", "n", "consistency", "consistency_n"};
    const char* rows[] = {"unseen", "1-15", "16+"};
    for (int b = 0; b < results::kEntityBuckets; ++b) {
      table.rows.push_back(rows[b]);
      table.values.push_back(r.by_bucket[b].recall());
      table.values.push_back(static_cast<double>(r.by_bucket[b].total));
      table.values.push_back(k.by_bucket[b].consistency());
      table.values.push_back(static_cast<double>(k.by_bucket[b].rendered));
    }
    store.set_table("entities/by_frequency", table);
    // Per document, for the collector's paired test; the text names what was
    // translated, so that only systems scored on the same sentences are paired.
    core::ResultTable docs;
    docs.columns = {"consistent", "rendered", "repeated"};
    for (auto& [doc, cell] : k.by_document) {
      docs.rows.push_back(std::to_string(doc));
      docs.values.push_back(static_cast<double>(cell.consistent));
      docs.values.push_back(static_cast<double>(cell.rendered));
      docs.values.push_back(static_cast<double>(cell.repeated));
    }
    store.set_table("entities/by_document", docs);
    int64_t translated = 0;
    for (auto& ex : t.examples) translated += ex.sentences() - ex.context;
    store.set_text("data.entities", t.name + " " + data::corpus_summary(t.corpus) + ", the first " +
                                        std::to_string(translated) + " sentences translated");
    store.commit();
    spdlog::info("entity recall {:.3f} over {} entity mentions; consistency {:.3f} over the {} of {} entities "
                 "repeated in a document that are rendered there",
                 r.total.recall(), r.total.total, k.total.consistency(), k.total.rendered, k.total.repeated);
  }

  if (stop()) return false;
  const bool one_sentence_out = c.data.context_side == "source" && c.data.context_sentences > 1;
  if (parts.extrapolation && e.extrapolation && !data.tests.empty() && one_sentence_out)
    spdlog::info("extrapolation skipped: data.context_side = source, the model translates one sentence at a time");
  if (parts.extrapolation && e.extrapolation && !data.tests.empty() && !one_sentence_out) {
    const TestSet& t = data.tests[0];
    // The longest source the model was trained on (CAT-N concatenations included).
    int64_t longest = data::longest_source(data.train_examples);
    if (c.data.cat_n > 1) {
      data::CatNOptions cat{c.data.cat_n, c.data.cat_prob, c.data.max_example_tokens};
      longest = data::longest_source(data::apply_cat_n(data.train_examples, cat, tok.specials().sep,
                                                       static_cast<uint64_t>(c.train.seed), 0));
    }
    core::ResultTable table;
    std::vector<results::LengthBucket> rows;
    std::vector<std::string> labels;
    for (int64_t factor : {1, 2, 4}) {
      auto passages = data::extrapolation_passages(t.tokenized, factor * longest, tok.specials().sep, e.max_examples);
      std::vector<std::string> refs, hyps;
      for (auto& p : passages) refs.push_back(data::target_text(t.corpus, p, " "));
      if (!passages.empty()) hyps = decode_texts(model, c, tok, passages, device);
      rows.push_back(whole_set(source_lengths(passages), hyps, refs, e));
      labels.push_back(std::to_string(factor) + "x");
      spdlog::info("extrapolation {}x (>= {} source tokens): {} passages, BLEU {:.2f}", factor, factor * longest,
                   passages.size(), rows.back().bleu);
    }
    store.set_table("extrapolation/by_length", length_table(rows, labels));
    store.commit();
  }

  if (stop()) return false;
  if (parts.efficiency) {
    store.set_scalar("efficiency/params", static_cast<double>(model.parameter_count()));
    store.set_scalar("efficiency/train_tokens_per_s", facts.train_tokens_per_s > 0 ? facts.train_tokens_per_s : kNaN);
    store.set_scalar("efficiency/peak_memory_mb", facts.peak_memory_mb > 0 ? facts.peak_memory_mb : kNaN);
    // Greedy decoding speed over (up to 200 examples of) the first test set.
    if (!data.tests.empty() && !data.tests[0].examples.empty()) {
      std::vector<data::Example> sample = data.tests[0].examples;
      if (sample.size() > 200) sample.resize(200);
      DecodeStats ds;
      translate_examples(model, sample, tok.specials(), search_options(e, 1), e.batch_tokens, device, bf16, &ds);
      if (ds.generated_tokens > 0 && ds.seconds > 0) {
        store.set_scalar("efficiency/decode_tokens_per_s", static_cast<double>(ds.generated_tokens) / ds.seconds);
        store.set_scalar("efficiency/ms_per_token", 1000.0 * ds.seconds / static_cast<double>(ds.generated_tokens));
      }
    }
    core::ResultTable mem;
    mem.columns = {"train_memory_mb", "decode_state_mb"};
    for (int64_t len : {128, 512, 2048}) {
      auto [train_mb, state_mb] = memory_at_length(model, len, model.vocab_size(), device, bf16);
      mem.rows.push_back(std::to_string(len));
      mem.values.push_back(train_mb);
      mem.values.push_back(state_mb);
    }
    store.set_table("efficiency/memory_by_length", mem);
    store.commit();
  }

  if (stop()) return false;
  if (parts.explain && !data.tests.empty()) {
    // Heatmaps for the collector's report: the first few short test examples
    // (a translation, one teacher-forced pass and one batch of occluded copies
    // each). Never fails the evaluation: a kind that cannot explain leaves a note.
    const auto t0 = Clock::now();
    std::vector<std::vector<int32_t>> sources;
    for (auto& ex : data.tests[0].examples) sources.push_back(ex.src);
    std::vector<std::vector<int32_t>> chosen;
    for (size_t i : pick_short(sources, kExplainSentences, kExplainMaxTokens)) chosen.push_back(sources[i]);
    try {
      store_explanations(store, explain_sources(model, c, tok, chosen, device, true, true));
      store.commit();
      spdlog::info("explain: occlusion{} maps of {} test sentences ({:.1f} s)",
                   model.has_source_attention() ? " and attention" : "", chosen.size(),
                   std::chrono::duration<double>(Clock::now() - t0).count());
    } catch (const std::exception& ex) {
      spdlog::warn("explain: no heatmaps: {}", ex.what());
      store.set_text("explain", std::string("no heatmaps: ") + ex.what());
      store.commit();
    }
  }
  if (parts.whole() || parts.brings_up_to_date) {
    store.set_scalar("evaluation/version", static_cast<double>(core::kEvaluationVersion));
    store.commit();
  }
  return true;
}

}  // namespace

bool evaluate(models::TranslationModel& model, const core::ExperimentConfig& c, const PreparedData& data,
              const torch::Device& device, core::ExperimentStore& store, const std::string& exp_dir,
              const TrainingFacts& facts, const EvalParts& parts, const std::function<bool()>& should_stop) {
  // A stop inside a part leaves the store as the parts before it committed it:
  // a part writes its results after its decoding and scoring.
  StopScope scope(should_stop);
  try {
    return evaluate_parts(model, c, data, device, store, exp_dir, facts, parts, should_stop);
  } catch (const Stopped&) {
    spdlog::info("evaluation stopped within a part (stop request)");
    return false;
  }
}

}  // namespace mambamt::train
