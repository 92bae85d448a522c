#include "train/decode.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/allocator.h"
#include "core/error.h"
#include "data/batching.h"
#include "models/layers.h"
#include "train/trainer.h"

namespace mambamt::train {

namespace {
thread_local const std::function<bool()>* current_stop = nullptr;
}  // namespace

StopScope::StopScope(std::function<bool()> should_stop) : should_stop_(std::move(should_stop)), outer_(current_stop) {
  current_stop = should_stop_ ? &should_stop_ : outer_;
}

StopScope::~StopScope() { current_stop = outer_; }

void check_stop() {
  if (current_stop && (*current_stop)()) throw Stopped{};
}

namespace {

using Clock = std::chrono::steady_clock;

std::vector<data::BatchIndices> eval_batches(const std::vector<data::Example>& examples, int64_t max_tokens) {
  data::BatchingOptions o;
  o.max_tokens = max_tokens;
  o.shuffle = false;
  o.oversize = data::Oversize::kSingleton;
  return data::plan_batches(examples, o);
}

data::Batch eval_collate(const std::vector<data::Example>& examples, const data::BatchIndices& b,
                         const data::SpecialIds& ids, const torch::Device& device) {
  data::BatchingOptions o;
  o.oversize = data::Oversize::kSingleton;
  data::Batch batch = data::collate(examples, b, ids, o);
  to_device(batch.src, device);
  to_device(batch.src_mask, device);
  to_device(batch.tgt_in, device);
  to_device(batch.tgt_out, device);
  to_device(batch.tgt_mask, device);
  return batch;
}

// MAMBAMT_CUDA_GRAPHS (search_options).
bool cuda_graphs_from_env() {
  const char* v = std::getenv("MAMBAMT_CUDA_GRAPHS");
  const std::string value = v ? v : "";
  if (value.empty() || value == "0") return false;
  if (value == "1") return true;
  throw InputError("environment variable MAMBAMT_CUDA_GRAPHS=" + value + ": expected 0 or 1");
}

}  // namespace

void to_device(torch::Tensor& t, const torch::Device& device) {
  if (t.defined() && t.device() != device) t = t.to(device);
}

models::SearchOptions search_options(const core::EvalConfig& eval, int64_t beam_size) {
  models::SearchOptions s;
  s.beam_size = beam_size;
  s.nbest = std::min(eval.nbest, beam_size);
  s.length_penalty = eval.length_penalty;
  s.max_len_a = eval.max_len_a;
  s.max_len_b = eval.max_len_b;
  s.cuda_graphs = cuda_graphs_from_env();
  return s;
}

std::vector<models::NBest> translate_examples_nbest(models::TranslationModel& model,
                                                   const std::vector<data::Example>& examples,
                                                   const data::SpecialIds& ids, const models::SearchOptions& search,
                                                   int64_t batch_tokens, const torch::Device& device, bool bf16,
                                                   DecodeStats* stats, const models::Prefixes* prefixes) {
  std::vector<models::NBest> out(examples.size());
  if (examples.empty()) return out;
  if (prefixes && prefixes->size() != examples.size())
    throw Error("translate_examples: " + std::to_string(prefixes->size()) + " prefixes for " +
                std::to_string(examples.size()) + " examples");
  torch::NoGradGuard no_grad;
  AutocastGuard autocast(device, bf16);
  // Only the source matters here, but the batch plan counts targets too: plan
  // on source-only copies so long references do not shrink the batches.
  std::vector<data::Example> sources(examples.size());
  for (size_t i = 0; i < examples.size(); ++i) sources[i].src = examples[i].src;
  core::FreePagesBound free_pages;  // batches of changing shapes (core/allocator.h)
  for (auto& b : eval_batches(sources, batch_tokens)) {
    check_stop();
    data::Batch batch = eval_collate(sources, b, ids, device);
    const auto t0 = Clock::now();
    models::Prefixes batch_prefixes;
    if (prefixes)
      for (int64_t i : b) batch_prefixes.push_back((*prefixes)[static_cast<size_t>(i)]);
    std::vector<models::NBest> res = models::translate(model, batch.src, batch.src_mask, search, batch_prefixes);
    if (device.is_cuda()) torch::cuda::synchronize();
    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    for (size_t r = 0; r < b.size(); ++r) {
      const models::Hypothesis& h = res[r].front();
      if (stats) stats->generated_tokens += static_cast<int64_t>(h.tokens.size()) + (h.finished ? 1 : 0);
      out[static_cast<size_t>(b[r])] = std::move(res[r]);
    }
    if (stats) stats->seconds += secs;
    free_pages.tick();
  }
  return out;
}

std::vector<std::vector<int64_t>> translate_examples(models::TranslationModel& model,
                                                     const std::vector<data::Example>& examples,
                                                     const data::SpecialIds& ids, const models::SearchOptions& search,
                                                     int64_t batch_tokens, const torch::Device& device, bool bf16,
                                                     DecodeStats* stats, const models::Prefixes* prefixes) {
  std::vector<models::NBest> lists =
      translate_examples_nbest(model, examples, ids, search, batch_tokens, device, bf16, stats, prefixes);
  std::vector<std::vector<int64_t>> out;
  out.reserve(lists.size());
  for (models::NBest& l : lists) out.push_back(l.empty() ? std::vector<int64_t>{} : std::move(l.front().tokens));
  return out;
}

std::vector<std::vector<int64_t>> translate_in_context(models::TranslationModel& model,
                                                       const data::TokenizedCorpus& corpus,
                                                       const std::vector<data::Example>& examples, int64_t context,
                                                       int64_t max_tokens, const data::SpecialIds& ids,
                                                       const models::SearchOptions& search, int64_t batch_tokens,
                                                       const torch::Device& device, bool bf16, DecodeStats* stats) {
  // The last sentence to translate in each document.
  std::vector<int32_t> last(corpus.documents.size(), -1);
  int32_t rounds = 0;
  for (size_t i = 0; i < examples.size(); ++i) {
    const auto& e = examples[i];
    if (e.spans.size() != 1 || e.spans[0].count != 1 || e.context != 0)
      throw Error("translate_in_context: example " + std::to_string(i) + " is not a single sentence");
    const data::Span& sp = e.spans[0];
    if (sp.doc < 0 || static_cast<size_t>(sp.doc) >= corpus.documents.size() || sp.first < 0 ||
        static_cast<size_t>(sp.first) >= corpus.documents[static_cast<size_t>(sp.doc)].sentences.size())
      throw Error("translate_in_context: example " + std::to_string(i) + " names no sentence of the corpus");
    last[static_cast<size_t>(sp.doc)] = std::max(last[static_cast<size_t>(sp.doc)], sp.first);
    rounds = std::max(rounds, sp.first + 1);
  }
  std::vector<std::vector<std::vector<int64_t>>> done(corpus.documents.size());  // [doc][sentence]
  // Round r translates sentence r of every document, after the translations
  // of rounds r-context .. r-1.
  for (int32_t r = 0; r < rounds; ++r) {
    std::vector<data::Example> batch;
    models::Prefixes prefixes;
    std::vector<size_t> docs;
    for (size_t d = 0; d < corpus.documents.size(); ++d) {
      if (last[d] < r) continue;
      const auto& sents = corpus.documents[d].sentences;
      const auto& cur = sents[static_cast<size_t>(r)];
      int64_t src_len = static_cast<int64_t>(cur.src.size()) + 1;
      int64_t tgt_len = 1 + static_cast<int64_t>(cur.src.size()) + 1;  // bos, the sentence (estimated), eos
      int32_t first = r;
      while (first > 0 && r - first < context) {
        const auto& s = sents[static_cast<size_t>(first - 1)].src;
        const auto& t = done[d][static_cast<size_t>(first - 1)];
        const int64_t ns = src_len + static_cast<int64_t>(s.size()) + 1;
        const int64_t nt = tgt_len + static_cast<int64_t>(t.size()) + 1;
        if (ns > max_tokens || nt > max_tokens) break;
        src_len = ns;
        tgt_len = nt;
        --first;
      }
      data::Example e;
      std::vector<int64_t> prefix;
      for (int32_t j = first; j < r; ++j) {
        const auto& s = sents[static_cast<size_t>(j)].src;
        e.src.insert(e.src.end(), s.begin(), s.end());
        e.src.push_back(ids.sep);
        const auto& t = done[d][static_cast<size_t>(j)];
        prefix.insert(prefix.end(), t.begin(), t.end());
        prefix.push_back(ids.sep);
      }
      e.src.insert(e.src.end(), cur.src.begin(), cur.src.end());
      batch.push_back(std::move(e));
      prefixes.push_back(std::move(prefix));
      docs.push_back(d);
    }
    auto hyps = translate_examples(model, batch, ids, search, batch_tokens, device, bf16, stats, &prefixes);
    for (size_t k = 0; k < hyps.size(); ++k) {
      auto& h = hyps[k];
      auto sep = std::find(h.begin(), h.end(), static_cast<int64_t>(ids.sep));
      h.erase(sep, h.end());
      done[docs[k]].push_back(std::move(h));
    }
  }
  std::vector<std::vector<int64_t>> out;
  out.reserve(examples.size());
  for (auto& e : examples)
    out.push_back(done[static_cast<size_t>(e.spans[0].doc)][static_cast<size_t>(e.spans[0].first)]);
  return out;
}

std::vector<std::string> hypothesis_sentences(const data::Tokenizer& tokenizer, const std::vector<int64_t>& ids) {
  return tokenizer.decode_sentences(std::vector<int32_t>(ids.begin(), ids.end()));
}

std::string hypothesis_text(const data::Tokenizer& tokenizer, const std::vector<int64_t>& ids) {
  std::string out;
  for (auto& s : hypothesis_sentences(tokenizer, ids)) {
    if (s.empty()) continue;
    if (!out.empty()) out += ' ';
    out += s;
  }
  return out;
}

std::string nbest_line(size_t index, const std::string& text, const models::Hypothesis& h) {
  char nums[64];
  std::snprintf(nums, sizeof nums, "%.4f ||| %.4f", h.score, h.log_prob);
  std::string clean = text;
  for (char& ch : clean)
    if (ch == '\n' || ch == '\r') ch = ' ';
  return std::to_string(index) + " ||| " + clean + " ||| " + nums;
}

NllSum teacher_forced_nll(models::TranslationModel& model, const std::vector<data::Example>& examples,
                          const data::SpecialIds& ids, int64_t max_tokens, const torch::Device& device, bool bf16,
                          int rank, int world) {
  NllSum out;
  if (examples.empty()) return out;
  torch::NoGradGuard no_grad;
  models::EvalModeGuard eval_mode(model);
  AutocastGuard autocast(device, bf16);
  auto batches = eval_batches(examples, max_tokens);
  core::FreePagesBound free_pages;
  for (size_t i = static_cast<size_t>(rank); i < batches.size(); i += static_cast<size_t>(world)) {
    data::Batch b = eval_collate(examples, batches[i], ids, device);
    torch::Tensor logits = model.forward(b.src, b.src_mask, b.tgt_in, b.tgt_mask);
    torch::Tensor lp = logits.to(torch::kFloat32).log_softmax(-1);
    torch::Tensor nll = -lp.gather(2, b.tgt_out.unsqueeze(2)).squeeze(2);
    out.nll += nll.masked_select(b.tgt_mask).to(torch::kFloat64).sum().item<double>();
    out.tokens += b.tgt_tokens;
    free_pages.tick();
  }
  return out;
}

std::vector<GateValues> cross_gate_values(models::TranslationModel& model, const std::vector<data::Example>& examples,
                                          const data::SpecialIds& ids, int64_t max_tokens,
                                          const torch::Device& device, bool bf16) {
  std::vector<GateValues> out;
  std::vector<std::string> names;
  std::vector<models::CrossAttentionImpl*> gated = models::gated_cross_attention(model, &names);
  for (std::string& name : names) {
    GateValues g;
    g.layer = std::move(name);  // "decoder.layers.3.cross" -> "decoder.3.cross", as explain/ names layers
    if (const size_t at = g.layer.find(".layers."); at != std::string::npos) g.layer.replace(at, 8, ".");
    out.push_back(std::move(g));
  }
  if (gated.empty() || examples.empty()) return out;
  struct Recording {
    std::vector<models::CrossAttentionImpl*>& modules;
    explicit Recording(std::vector<models::CrossAttentionImpl*>& m) : modules(m) {
      for (auto* c : modules) c->record_gate = true;
    }
    ~Recording() {
      for (auto* c : modules) {
        c->record_gate = false;
        c->last_gate = torch::Tensor();
      }
    }
  } recording(gated);
  torch::NoGradGuard no_grad;
  models::EvalModeGuard eval_mode(model);
  AutocastGuard autocast(device, bf16);
  for (auto& b : eval_batches(examples, max_tokens)) {
    data::Batch batch = eval_collate(examples, b, ids, device);
    model.final_hidden(batch.src, batch.src_mask, batch.tgt_in, batch.tgt_mask);
    const torch::Tensor mask = batch.tgt_mask.cpu();
    for (size_t k = 0; k < gated.size(); ++k) {
      const torch::Tensor g = gated[k]->last_gate.cpu().masked_select(mask).contiguous();
      const float* p = g.data_ptr<float>();
      out[k].values.insert(out[k].values.end(), p, p + g.numel());
    }
  }
  return out;
}

std::vector<double> score_pairs(models::TranslationModel& model, const std::vector<data::Example>& pairs,
                                const std::vector<int64_t>& score_from, const data::SpecialIds& ids,
                                int64_t max_tokens, const torch::Device& device, bool bf16) {
  std::vector<double> out(pairs.size(), 0.0);
  if (pairs.empty()) return out;
  torch::NoGradGuard no_grad;
  AutocastGuard autocast(device, bf16);
  core::FreePagesBound free_pages;
  for (auto& b : eval_batches(pairs, max_tokens)) {
    check_stop();
    data::Batch batch = eval_collate(pairs, b, ids, device);
    torch::Tensor lp = models::token_log_probs(model, batch.src, batch.src_mask, batch.tgt_in, batch.tgt_out,
                                               batch.tgt_mask)
                           .to(torch::kFloat64)
                           .cpu();  // (B,T)
    const int64_t T = lp.size(1);
    torch::Tensor from = torch::empty({static_cast<int64_t>(b.size()), 1}, torch::kInt64);
    for (size_t r = 0; r < b.size(); ++r) from[static_cast<int64_t>(r)][0] = score_from[static_cast<size_t>(b[r])];
    torch::Tensor keep = torch::arange(T, torch::kInt64).unsqueeze(0).ge(from) & batch.tgt_mask.cpu();
    torch::Tensor sums = (lp * keep.to(torch::kFloat64)).sum(1);
    auto acc = sums.accessor<double, 1>();
    for (size_t r = 0; r < b.size(); ++r) out[static_cast<size_t>(b[r])] = acc[static_cast<int64_t>(r)];
    free_pages.tick();
  }
  return out;
}

}  // namespace mambamt::train
