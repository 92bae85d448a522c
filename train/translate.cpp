#include "train/translate.h"

#include "models/layers.h"

#include <filesystem>

#include "core/device.h"
#include "core/error.h"
#include "core/store.h"
#include "models/average.h"
#include "models/registry.h"
#include "train/decode.h"
#include "train/prepare.h"
#include "train/trainer.h"

namespace fs = std::filesystem;

namespace mambamt::train {

namespace {

models::TensorMap read_model_tensors(const std::string& path) { return model_tensors(core::read_checkpoint(path)); }

std::string string_or(const core::Checkpoint& c, const std::string& key, const std::string& def) {
  auto it = c.strings.find(key);
  return it == c.strings.end() ? def : it->second;
}

}  // namespace

models::ModelPtr build_for_checkpoint(const core::ExperimentConfig& config, int64_t vocab_size,
                                      const core::Checkpoint& ckpt) {
  models::ModelContext ctx;
  ctx.vocab_size = vocab_size;
  models::ModelPtr model = models::build_model(config.model, ctx);
  torch::NoGradGuard no_grad;
  models::load_named_tensors(*model, model_tensors(ckpt));
  return model;
}

std::string load_weights(models::TranslationModel& model, const std::string& ckpt_dir, Weights which,
                         int64_t average_last) {
  core::CheckpointDir dir(ckpt_dir);
  const auto steps = dir.steps();
  const bool has_best = fs::exists(dir.best_path());
  if (steps.empty() && !has_best) throw InputError(ckpt_dir + ": no checkpoint to load");
  torch::NoGradGuard no_grad;
  if (which == Weights::kDefault && average_last > 1 && steps.size() > 1) {
    const size_t k = std::min<size_t>(static_cast<size_t>(average_last), steps.size());
    std::vector<models::TensorMap> maps;
    std::string desc = "mean of steps";
    for (size_t i = steps.size() - k; i < steps.size(); ++i) {
      maps.push_back(read_model_tensors(dir.path_for_step(steps[i])));
      desc += " " + std::to_string(steps[i]);
    }
    models::load_named_tensors(model, models::average_tensors(maps));
    return desc;
  }
  if (which != Weights::kLatest && has_best) {
    models::TensorMap best;
    try {
      best = read_model_tensors(dir.best_path());
    } catch (const InputError& e) {
      // Damaged on disk, and not repaired at resume (its step's file was
      // pruned): the newest step is the way on, named, never taken silently.
      if (steps.empty()) throw;
      throw InputError(std::string(e.what()) + "; the best checkpoint is lost (its step's file is no longer kept): " +
                       "`--weights latest` evaluates or translates with the newest step (" +
                       dir.path_for_step(steps.back()) + ") instead");
    }
    models::load_named_tensors(model, best);
    return dir.best_path();
  }
  if (steps.empty()) {
    models::load_named_tensors(model, read_model_tensors(dir.best_path()));
    return dir.best_path();
  }
  models::load_named_tensors(model, read_model_tensors(dir.path_for_step(steps.back())));
  return dir.path_for_step(steps.back());
}

LoadedExperiment load_experiment(const std::string& exp_dir, const std::string& device, Weights which, int local_rank) {
  const std::string store_path = (fs::path(exp_dir) / "store.h5").string();
  if (!fs::exists(store_path)) throw InputError(exp_dir + ": no experiment store (store.h5) here");
  core::StoreSnapshot snap = core::ExperimentStore::read(store_path);
  LoadedExperiment out;
  out.exp_dir = exp_dir;
  out.config = core::parse_experiment(snap.config, store_path + ":/config");
  core::CheckpointDir dir((fs::path(exp_dir) / "ckpt").string());
  std::string any;
  if (auto latest = dir.latest_step())
    any = dir.path_for_step(*latest);
  else if (fs::exists(dir.best_path()))
    any = dir.best_path();
  else
    throw InputError(exp_dir + ": no checkpoint in " + dir.dir() + " (has the experiment trained?)");
  core::Checkpoint ckpt = core::read_checkpoint(any);
  out.shared_dir = string_or(ckpt, "shared_dir", (fs::path(exp_dir) / "prepared").string());
  const std::string tok_dir = string_or(ckpt, "tokenizer_dir", "");
  if (tok_dir.empty() || !fs::exists(fs::path(tok_dir) / "spm.model"))
    throw InputError(any + ": the tokenizer of this experiment (" + (tok_dir.empty() ? "?" : tok_dir) +
                     ") is missing");
  out.tokenizer = data::Tokenizer::load(tok_dir);
  out.model = build_for_checkpoint(out.config, out.tokenizer->vocab_size(), ckpt);
  out.weights = load_weights(*out.model, dir.dir(), which, out.config.eval.average_last);
  out.device = core::select_device(device == "auto" ? out.config.train.device : device, local_rank);
  out.model->to(out.device);
  out.model->eval();
  models::set_gate_skip(*out.model, out.config.eval.gate_skip);
  return out;
}

namespace {

// One sentence per line, documents separated by blank lines: each sentence is
// translated after its document's preceding ones (translate_in_context).
std::vector<std::string> translate_in_documents(const LoadedExperiment& exp, const std::vector<std::string>& lines) {
  const data::Tokenizer& tok = *exp.tokenizer;
  const auto& c = exp.config;
  data::TokenizedCorpus corpus;
  std::vector<data::Example> examples;
  std::vector<size_t> index;
  bool open = false;  // a document is being read
  for (size_t i = 0; i < lines.size(); ++i) {
    data::TokenizedSentence s;
    tok.encode_append(lines[i], s.src);
    if (s.src.empty()) {
      open = false;
      continue;
    }
    if (!open) corpus.documents.emplace_back();
    open = true;
    auto& doc = corpus.documents.back();
    data::Example e;
    e.src = s.src;
    e.spans.push_back(data::Span{static_cast<int32_t>(corpus.documents.size() - 1),
                                 static_cast<int32_t>(doc.sentences.size()), 1});
    doc.sentences.push_back(std::move(s));
    examples.push_back(std::move(e));
    index.push_back(i);
  }
  std::vector<std::string> out(lines.size());
  auto hyps = translate_in_context(*exp.model, corpus, examples, c.data.context_sentences - 1,
                                   c.data.max_example_tokens, tok.specials(), search_options(c.eval, c.eval.beam_size),
                                   c.eval.batch_tokens, exp.device, use_bf16(c.train, exp.device));
  for (size_t k = 0; k < hyps.size(); ++k) out[index[k]] = hypothesis_text(tok, hyps[k]);
  return out;
}

}  // namespace

std::vector<std::vector<ScoredTranslation>> translate_lines_nbest(const LoadedExperiment& exp,
                                                                   const std::vector<std::string>& lines) {
  if (translates_in_context(exp.config))
    throw InputError("experiment " + exp.exp_dir +
                     " translates documents sentence by sentence (eval.doc_decode = \"sentences\"): one translation per "
                     "sentence, no n-best lists");
  const data::Tokenizer& tok = *exp.tokenizer;
  std::vector<data::Example> examples;
  std::vector<size_t> index;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    data::Example e;
    // " <sep> " separates the sentences of a passage.
    size_t start = 0;
    bool first = true;
    while (true) {
      const size_t at = line.find("<sep>", start);
      const std::string part = line.substr(start, at == std::string::npos ? std::string::npos : at - start);
      if (!first) e.src.push_back(tok.specials().sep);
      tok.encode_append(part, e.src);
      first = false;
      if (at == std::string::npos) break;
      start = at + 5;
    }
    if (e.src.empty()) continue;
    examples.push_back(std::move(e));
    index.push_back(i);
  }
  std::vector<std::vector<ScoredTranslation>> out(lines.size());
  const auto& c = exp.config;
  std::vector<models::NBest> lists =
      translate_examples_nbest(*exp.model, examples, tok.specials(), search_options(c.eval, c.eval.beam_size),
                               c.eval.batch_tokens, exp.device, use_bf16(c.train, exp.device));
  for (size_t k = 0; k < lists.size(); ++k)
    for (models::Hypothesis& h : lists[k]) {
      std::string text = hypothesis_text(tok, h.tokens);
      out[index[k]].push_back({std::move(text), std::move(h)});
    }
  return out;
}

std::vector<std::string> translate_lines(const LoadedExperiment& exp, const std::vector<std::string>& lines) {
  if (translates_in_context(exp.config)) return translate_in_documents(exp, lines);
  std::vector<std::string> out;
  out.reserve(lines.size());
  for (auto& list : translate_lines_nbest(exp, lines)) out.push_back(list.empty() ? std::string() : list.front().text);
  return out;
}

}  // namespace mambamt::train
