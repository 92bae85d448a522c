#include "train/trainer.h"

#include <chrono>
#include <cstring>
#include <cmath>
#include <filesystem>
#include <limits>
#include <optional>
#include <set>
#include <sstream>

#include <spdlog/spdlog.h>

#include "core/allocator.h"
#include "core/autocast.h"
#include "core/error.h"
#include "core/signals.h"
#include "data/sampler.h"
#include "models/average.h"
#include "models/layers.h"
#include "results/bleu.h"
#include "results/chrf.h"
#include "train/decode.h"
#include "train/loss.h"
#include "train/memory.h"
#include "train/optim.h"

#ifdef MAMBAMT_WITH_CUDA
#include <ATen/cuda/CUDAGeneratorImpl.h>
#endif

namespace fs = std::filesystem;

namespace mambamt::train {

namespace {

using Clock = std::chrono::steady_clock;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string format_loss(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::ostringstream s;
  s.precision(6);
  s << v;
  return s.str();
}

// The RNG state of this process's default CPU generator as bytes, and back.
std::vector<uint8_t> cpu_rng_state() {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  torch::Tensor s = gen.get_state().contiguous();
  const uint8_t* p = s.data_ptr<uint8_t>();
  return std::vector<uint8_t>(p, p + s.numel());
}

void set_cpu_rng_state(const std::vector<uint8_t>& bytes) {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  torch::Tensor s = torch::empty({static_cast<int64_t>(bytes.size())}, torch::kUInt8);
  std::memcpy(s.data_ptr<uint8_t>(), bytes.data(), bytes.size());
  gen.set_state(s);
}

std::vector<uint8_t> cuda_rng_state(const torch::Device& device) {
#ifdef MAMBAMT_WITH_CUDA
  if (device.is_cuda()) {
    at::Generator gen = at::cuda::detail::getDefaultCUDAGenerator(device.index() < 0 ? 0 : device.index());
    std::lock_guard<std::mutex> lock(gen.mutex());
    torch::Tensor s = gen.get_state().contiguous();
    const uint8_t* p = s.data_ptr<uint8_t>();
    return std::vector<uint8_t>(p, p + s.numel());
  }
#endif
  return {};
}

void set_cuda_rng_state(const torch::Device& device, const std::vector<uint8_t>& bytes) {
#ifdef MAMBAMT_WITH_CUDA
  if (device.is_cuda() && !bytes.empty()) {
    at::Generator gen = at::cuda::detail::getDefaultCUDAGenerator(device.index() < 0 ? 0 : device.index());
    std::lock_guard<std::mutex> lock(gen.mutex());
    torch::Tensor s = torch::empty({static_cast<int64_t>(bytes.size())}, torch::kUInt8);
    std::memcpy(s.data_ptr<uint8_t>(), bytes.data(), bytes.size());
    gen.set_state(s);
  }
#endif
}

torch::Tensor bytes_tensor(const std::vector<uint8_t>& bytes) {
  torch::Tensor t = torch::empty({static_cast<int64_t>(bytes.size())}, torch::kUInt8);
  if (!bytes.empty()) std::memcpy(t.data_ptr<uint8_t>(), bytes.data(), bytes.size());
  return t;
}

std::vector<uint8_t> tensor_bytes(const torch::Tensor& t) {
  torch::Tensor c = t.to(torch::kUInt8).contiguous();
  const uint8_t* p = c.data_ptr<uint8_t>();
  return std::vector<uint8_t>(p, p + c.numel());
}

bool higher_is_better(const std::string& metric) { return metric != "loss"; }

// Appends a metric point unless the series already reaches this step: a
// resumed run recomputes the steps after its checkpoint, and (resume being
// exact) their points are already in the store.
void append_once(core::ExperimentStore& store, const std::string& name, int64_t step, double value) {
  auto& all = store.metrics();
  auto it = all.find(name);
  if (it != all.end() && !it->second.empty() && it->second.back().step >= step) return;
  store.append_metric(name, step, value);
}

}  // namespace

const char* to_string(StopReason r) {
  switch (r) {
    case StopReason::max_steps: return "max_steps";
    case StopReason::max_epochs: return "max_epochs";
    case StopReason::patience: return "patience";
    case StopReason::signal: return "signal";
    case StopReason::diverged: return "diverged";
  }
  return "?";
}

bool use_bf16(const core::TrainConfig& train, const torch::Device& device) {
  if (!device.is_cuda()) return false;
  return train.precision == "auto" || train.precision == "bf16";
}

AutocastGuard::AutocastGuard(const torch::Device& device, bool enabled) {
  if (!enabled || !device.is_cuda()) return;
  active_ = true;
  previous_ = core::begin_bf16_autocast(c10::DeviceType::CUDA);
}

AutocastGuard::~AutocastGuard() {
  if (active_) core::end_bf16_autocast(c10::DeviceType::CUDA, previous_);
}

std::map<std::string, torch::Tensor> model_tensors(const core::Checkpoint& ckpt) {
  std::map<std::string, torch::Tensor> out;
  const std::string prefix = "model/";
  for (auto& [name, t] : ckpt.tensors)
    if (name.rfind(prefix, 0) == 0) out[name.substr(prefix.size())] = t;
  return out;
}

// ---------------------------------------------------------------------- Impl

struct Trainer::Impl {
  const core::ExperimentConfig& config;
  const core::TrainConfig& tc;
  const PreparedData& data;
  models::ModelPtr model;
  Group& group;
  torch::Device device;
  core::ExperimentStore* store;
  core::CheckpointDir ckpt;
  TrainHooks hooks;
  bool bf16;
  data::SpecialIds ids;

  std::unique_ptr<data::BatchSampler> sampler;
  // The single sentences of the first data.sentence_steps updates (null when 0).
  std::unique_ptr<data::BatchSampler> sentence_sampler;
  std::unique_ptr<AdamW> optim;
  std::vector<torch::Tensor> params;  // in the optimiser's order
  std::vector<models::CrossAttentionImpl*> gated;  // the model's gated cross-attention modules

  // Training state (all of it goes into checkpoints).
  int64_t step = 0;
  double best_score = kNaN;  // by valid_metric
  double best_loss = kNaN;   // validation loss at the best point
  int64_t best_step = -1;
  int64_t bad_validations = 0;  // validations without improvement since the best
  int64_t last_validated = -1;
  // The unfinished log interval.
  double iv_loss = 0, iv_grad_norm = 0, iv_padding = 0;
  double iv_gate_sum = 0, iv_gate_count = 0;  // gated cross-attention: gates over target tokens and layers
  int64_t iv_tgt_tokens = 0, iv_tokens = 0, iv_steps = 0;
  double iv_seconds = 0;
  // Totals over all attempts (for efficiency/train_tokens_per_s).
  double total_seconds = 0;
  int64_t total_tokens = 0;

  // This attempt.
  double peak_memory = 0;
  core::FreePagesBound free_pages;
  int64_t attempt_first_step = 0;
  double attempt_train_seconds = 0;

  Impl(const core::ExperimentConfig& c, const PreparedData& d, models::ModelPtr m, Group& g, torch::Device dev,
       core::ExperimentStore* s, std::string dir, TrainHooks h)
      : config(c),
        tc(c.train),
        data(d),
        model(std::move(m)),
        group(g),
        device(dev),
        store(s),
        ckpt(std::move(dir)),
        hooks(std::move(h)),
        bf16(use_bf16(c.train, dev)),
        ids(d.tokenizer->specials()) {
    data::CatNOptions cat;
    cat.n = config.data.cat_n;
    cat.prob = config.data.cat_prob;
    cat.max_tokens = config.data.max_example_tokens;
    data::BatchingOptions batching;
    batching.max_tokens = config.data.max_tokens;
    batching.shuffle = true;
    batching.oversize = data::Oversize::kSkip;
    data::SamplerOptions so;
    so.seed = static_cast<uint64_t>(tc.seed);
    so.rank = group.rank();
    so.world_size = group.size();
    sampler = std::make_unique<data::BatchSampler>(data.train_examples, ids, cat, batching, so);
    if (config.data.sentence_steps > 0) {
      if (data.sentence_examples.empty())
        throw InputError(config.source + ": data.sentence_steps = " + std::to_string(config.data.sentence_steps) +
                         " but no single-sentence training examples");
      sentence_sampler = std::make_unique<data::BatchSampler>(data.sentence_examples, ids, cat, batching, so);
    }

    NamedParameters named;
    std::set<const void*> seen;  // tied embeddings appear under two names: optimise them once
    for (auto& item : model->named_parameters(/*recurse=*/true)) {
      if (!item.value().requires_grad()) continue;
      if (!seen.insert(item.value().unsafeGetTensorImpl()).second) continue;
      named.emplace_back(item.key(), item.value());
      params.push_back(item.value());
    }
    AdamWOptions ao;
    ao.beta1 = tc.beta1;
    ao.beta2 = tc.beta2;
    ao.eps = tc.eps;
    ao.weight_decay = tc.weight_decay;
    optim = std::make_unique<AdamW>(std::move(named), ao);
    gated = models::gated_cross_attention(*model);
  }

  bool improved(double score) const {
    if (std::isnan(best_score)) return true;
    return higher_is_better(tc.valid_metric) ? score > best_score : score < best_score;
  }

  // The sampler of update `s` (1-based): single sentences up to
  // data.sentence_steps, then the experiment's examples.
  data::BatchSampler& sampler_for(int64_t s) {
    return sentence_sampler && s <= config.data.sentence_steps ? *sentence_sampler : *sampler;
  }

  // Epochs (and max_epochs) count the experiment's examples, not the
  // single sentences of a first stage.
  int64_t epochs_done() const {
    data::SamplerState s = sampler->state();
    const int64_t batches = static_cast<int64_t>(sampler->plan().batches.size());
    return s.epoch + (s.position + group.size() > batches ? 1 : 0);
  }

  int64_t planned_steps() const {
    int64_t n = tc.max_steps;
    if (tc.max_epochs > 0)
      n = std::min<int64_t>(n, (sentence_sampler ? config.data.sentence_steps : 0) +
                                   tc.max_epochs * std::max<int64_t>(1, sampler->steps_per_epoch() / tc.accum_steps));
    return n;
  }

  void point(const char* where) {
    if (hooks.on_step_point) hooks.on_step_point(step + 1, where);
  }

  // ------------------------------------------------------------ checkpoints

  core::Checkpoint make_checkpoint() {
    core::Checkpoint c;
    for (auto& [name, t] : models::named_tensors(*model)) c.tensors["model/" + name] = t;
    optim->save(c, "optim/");
    // Every rank's generator states, gathered on rank 0.
    auto cpu = group.gather(cpu_rng_state());
    auto cuda = group.gather(cuda_rng_state(device));
    for (size_t r = 0; r < cpu.size(); ++r) c.tensors["rng/cpu/" + std::to_string(r)] = bytes_tensor(cpu[r]);
    for (size_t r = 0; r < cuda.size(); ++r)
      if (!cuda[r].empty()) c.tensors["rng/cuda/" + std::to_string(r)] = bytes_tensor(cuda[r]);
    data::SamplerState s = sampler->state();
    c.ints["step"] = step;
    c.ints["world_size"] = group.size();
    c.ints["sampler.epoch"] = s.epoch;
    c.ints["sampler.position"] = s.position;
    c.ints["sampler.seed"] = static_cast<int64_t>(s.seed);
    if (sentence_sampler) {
      data::SamplerState ss = sentence_sampler->state();
      c.ints["sentence_sampler.epoch"] = ss.epoch;
      c.ints["sentence_sampler.position"] = ss.position;
      c.ints["sentence_sampler.seed"] = static_cast<int64_t>(ss.seed);
    }
    c.ints["scheduler.step"] = step;
    c.ints["valid.best_step"] = best_step;
    c.ints["valid.bad"] = bad_validations;
    c.ints["valid.last"] = last_validated;
    c.ints["interval.tgt_tokens"] = iv_tgt_tokens;
    c.ints["interval.tokens"] = iv_tokens;
    c.ints["interval.steps"] = iv_steps;
    c.ints["total.tokens"] = total_tokens;
    c.floats["valid.best_score"] = best_score;
    c.floats["valid.best_loss"] = best_loss;
    c.floats["interval.loss"] = iv_loss;
    c.floats["interval.grad_norm"] = iv_grad_norm;
    c.floats["interval.padding"] = iv_padding;
    c.floats["interval.gate_sum"] = iv_gate_sum;
    c.floats["interval.gate_count"] = iv_gate_count;
    c.floats["interval.seconds"] = iv_seconds;
    c.floats["total.seconds"] = total_seconds;
    c.strings["experiment_id"] = config.id();
    c.strings["config"] = config.canonical();
    c.strings["valid_metric"] = tc.valid_metric;
    for (auto& [k, v] : hooks.checkpoint_strings) c.strings[k] = v;
    return c;
  }

  std::string not_finite_message(double loss) const {
    return "diverged at step " + std::to_string(step) + " (loss=" + format_loss(loss) + ", parameters not finite)";
  }

  // No NaN/Inf may reach a checkpoint.
  bool parameters_finite() {
    torch::NoGradGuard no_grad;
    for (auto& p : params)
      if (!torch::isfinite(p).all().item<bool>()) return false;
    return true;
  }

  void save_checkpoint(bool is_best) {
    core::Checkpoint c = make_checkpoint();  // collective (RNG gather)
    if (!group.is_root()) return;
    ckpt.save(step, c, tc.keep_checkpoints, is_best);
    spdlog::info("checkpoint step {}{} -> {}", step, is_best ? " (best)" : "", ckpt.path_for_step(step));
  }

  // The corpora of the hooks' "data.<split>" fingerprints against those the
  // checkpoint was trained with (checkpoints from before they were recorded
  // have none): continuing on other text would mix two trainings under one
  // experiment id.
  void check_same_data(const core::Checkpoint& c, const std::string& path) const {
    for (const auto& [key, now] : hooks.checkpoint_strings) {
      if (key.rfind("data.", 0) != 0) continue;
      auto it = c.strings.find(key);
      if (it == c.strings.end() || it->second == now) continue;
      const std::string split = key.substr(5);
      const std::string file = split == "train" ? config.data.train : split == "valid" ? config.data.valid : "";
      throw InputError(path + ": this checkpoint was trained on other " + split + " data than " +
                       (file.empty() ? "the corpus gives" : file + " holds") + " now (corpus fingerprint " +
                       it->second + " then, " + now +
                       " now): put the corpus back as it was, or train the experiment afresh in another directory");
    }
  }

  // Whether the checkpoint's config trains what ours does.
  bool same_training(const core::Checkpoint& c) const {
    auto text = c.strings.find("config");
    if (text == c.strings.end()) return false;
    try {
      return core::parse_experiment(text->second, "checkpoint").training_id() == config.training_id();
    } catch (const std::exception&) {
      return false;
    }
  }

  void restore(const core::Checkpoint& c) {
    auto get_int = [&](const std::string& k) {
      auto it = c.ints.find(k);
      if (it == c.ints.end()) throw InputError("checkpoint: missing " + k);
      return it->second;
    };
    auto get_float = [&](const std::string& k) {
      auto it = c.floats.find(k);
      if (it == c.floats.end()) throw InputError("checkpoint: missing " + k);
      return it->second;
    };
    // Ours, or one of the same training (a sweep's shared training, RunOptions::train_from).
    auto id = c.strings.find("experiment_id");
    if (id == c.strings.end() || (id->second != config.id() && !same_training(c)))
      throw InputError("checkpoint of another experiment (" + (id == c.strings.end() ? std::string("?") : id->second) +
                       ", this is " + config.id() + ")");
    {
      torch::NoGradGuard no_grad;
      models::load_named_tensors(*model, model_tensors(c));
    }
    optim->load(c, "optim/");
    step = get_int("step");
    data::SamplerState s;
    s.epoch = get_int("sampler.epoch");
    s.position = get_int("sampler.position");
    s.seed = static_cast<uint64_t>(get_int("sampler.seed"));
    sampler->restore(s);
    if (sentence_sampler) {
      data::SamplerState ss;
      ss.epoch = get_int("sentence_sampler.epoch");
      ss.position = get_int("sentence_sampler.position");
      ss.seed = static_cast<uint64_t>(get_int("sentence_sampler.seed"));
      sentence_sampler->restore(ss);
    }
    best_step = get_int("valid.best_step");
    bad_validations = get_int("valid.bad");
    last_validated = get_int("valid.last");
    iv_tgt_tokens = get_int("interval.tgt_tokens");
    iv_tokens = get_int("interval.tokens");
    iv_steps = get_int("interval.steps");
    total_tokens = get_int("total.tokens");
    best_score = get_float("valid.best_score");
    best_loss = get_float("valid.best_loss");
    iv_loss = get_float("interval.loss");
    iv_grad_norm = get_float("interval.grad_norm");
    iv_padding = get_float("interval.padding");
    // Checkpoints from before the gate metric have neither.
    iv_gate_sum = c.floats.count("interval.gate_sum") ? c.floats.at("interval.gate_sum") : 0.0;
    iv_gate_count = c.floats.count("interval.gate_count") ? c.floats.at("interval.gate_count") : 0.0;
    iv_seconds = get_float("interval.seconds");
    total_seconds = get_float("total.seconds");
    const std::string r = std::to_string(group.rank());
    auto cpu = c.tensors.find("rng/cpu/" + r);
    if (cpu != c.tensors.end()) {
      set_cpu_rng_state(tensor_bytes(cpu->second));
    } else {
      // Resumed with more ranks than the checkpoint had: this rank starts a new stream.
      torch::manual_seed(static_cast<uint64_t>(tc.seed) * 1000003ULL + static_cast<uint64_t>(group.rank()) + 7ULL * step);
      spdlog::warn("checkpoint has no RNG state for rank {}: reseeded (resume is not exact)", group.rank());
    }
    auto cuda = c.tensors.find("rng/cuda/" + r);
    if (cuda != c.tensors.end()) set_cuda_rng_state(device, tensor_bytes(cuda->second));
    if (get_int("world_size") != group.size())
      spdlog::warn("checkpoint was written by {} ranks, resuming with {}: the data order is re-balanced",
                   get_int("world_size"), group.size());
  }

  int64_t resume() {
    // Rank 0 picks the newest checkpoint that reads back: one that does not
    // (damaged on disk) is set aside with a warning and the one before it is
    // used, so a bad file costs the steps since that one, not the experiment
    // (resume is exact, so the steps done again give the same metrics).
    std::string path;
    std::optional<core::Checkpoint> mine;
    if (group.is_root()) {
      bool skipped = false;
      auto found = ckpt.latest_readable([&skipped](const std::string&, const std::string& error) {
        skipped = true;
        spdlog::warn("a checkpoint does not read back: {}; trying the one before it", error);
      });
      if (found) {
        path = found->path;
        mine = std::move(found->checkpoint);
      } else if (skipped) {
        spdlog::warn("no checkpoint in {} reads back: training starts again from step 0", ckpt.dir());
      }
    }
    path = group.broadcast(path);
    if (path.empty()) {
      // Fresh start: every rank begins from rank 0's parameters.
      std::vector<torch::Tensor> all;
      for (auto& [name, t] : models::named_tensors(*model)) all.push_back(t);
      group.broadcast(all);
      return 0;
    }
    const core::Checkpoint c = mine ? std::move(*mine) : core::read_checkpoint(path);
    check_same_data(c, path);
    restore(c);
    spdlog::info("resumed from {} (step {}, epoch {})", path, step, sampler->state().epoch);
    if (group.is_root()) {
      const std::string best = ckpt.repair_best(best_step);
      if (!best.empty()) spdlog::warn("the best checkpoint does not open: {}", best);
    }
    return step;
  }

  // ------------------------------------------------------------ validation

  // Validation loss, and BLEU/chrF when they are the metric. Every rank gets the same values.
  struct Validation {
    double loss = kNaN, bleu = kNaN, chrf = kNaN;
  };

  Validation validate() {
    Validation v;
    if (data.valid_examples.empty()) return v;
    NllSum s = teacher_forced_nll(*model, data.valid_examples, ids, config.data.max_tokens, device, bf16, group.rank(),
                                  group.size());
    const double nll = group.allreduce_sum(s.nll);
    const int64_t tokens = group.allreduce_sum(s.tokens);
    v.loss = tokens > 0 ? nll / static_cast<double>(tokens) : kNaN;
    if (tc.valid_metric != "loss") {
      // Greedy decoding of the validation passages on rank 0 (others wait).
      std::string scores;
      if (group.is_root()) {
        auto hyps = translate_examples(*model, data.valid_examples, ids, search_options(config.eval, 1),
                                       config.eval.batch_tokens, device, bf16);
        std::vector<std::string> hyp_text, refs;
        for (size_t i = 0; i < hyps.size(); ++i) {
          hyp_text.push_back(hypothesis_text(*data.tokenizer, hyps[i]));
          refs.push_back(data::target_text(data.valid_corpus, data.valid_examples[i], " "));
        }
        results::BleuOptions bo;
        bo.tokenize = results::parse_tokenizer(config.eval.bleu_tokenize);
        bo.lowercase = config.eval.lowercase;
        const double bleu = results::corpus_bleu(hyp_text, {refs}, bo).score;
        const double chrf = results::corpus_chrf(hyp_text, {refs}).score;
        std::ostringstream os;
        os.precision(17);
        os << bleu << " " << chrf;
        scores = os.str();
      }
      scores = group.broadcast(scores);
      std::istringstream is(scores);
      is >> v.bleu >> v.chrf;
    }
    return v;
  }

  // Validates, records the metrics, tracks the best point; returns whether
  // this step is the new best.
  bool run_validation() {
    if (hooks.on_progress) {
      Progress p;
      p.step = step;
      p.total_steps = planned_steps();
      p.phase = "validate";
      hooks.on_progress(p);
    }
    const auto t0 = Clock::now();
    Validation v = validate();
    last_validated = step;
    if (std::isnan(v.loss)) return false;
    const double score = tc.valid_metric == "bleu" ? v.bleu : tc.valid_metric == "chrf" ? v.chrf : v.loss;
    const bool best = improved(score);
    if (best) {
      best_score = score;
      best_loss = v.loss;
      best_step = step;
      bad_validations = 0;
    } else {
      ++bad_validations;
    }
    if (store) {
      append_once(*store, "valid_loss", step, v.loss);
      if (!std::isnan(v.bleu)) append_once(*store, "valid_bleu", step, v.bleu);
      if (!std::isnan(v.chrf)) append_once(*store, "valid_chrf", step, v.chrf);
      store->commit();
    }
    spdlog::info("validation step {}: loss {:.4f}{}{} ({:.1f} s){}", step, v.loss,
                 std::isnan(v.bleu) ? std::string() : fmt::format(" bleu {:.2f}", v.bleu),
                 std::isnan(v.chrf) ? std::string() : fmt::format(" chrf {:.2f}", v.chrf), seconds_since(t0),
                 best ? " best" : fmt::format(" ({} without improvement)", bad_validations));
    return best;
  }

  // ------------------------------------------------------------ metrics

  void log_interval(double lr, double eta) {
    if (iv_steps == 0) return;
    const double loss = iv_tgt_tokens > 0 ? iv_loss / static_cast<double>(iv_tgt_tokens) : kNaN;
    const double tps = iv_seconds > 0 ? static_cast<double>(iv_tokens) / iv_seconds : 0;
    const double mem = device_memory_mb(device);
    peak_memory = std::max(peak_memory, device.is_cuda() ? cuda_peak_mb(device) : peak_rss_mb());
    if (store) {
      append_once(*store, "train_loss", step, loss);
      append_once(*store, "lr", step, lr);
      append_once(*store, "grad_norm", step, iv_grad_norm / static_cast<double>(iv_steps));
      append_once(*store, "tokens_per_s", step, tps);
      append_once(*store, "padding_fraction", step, iv_padding / static_cast<double>(iv_steps));
      if (iv_gate_count > 0) append_once(*store, "gate_mean", step, iv_gate_sum / iv_gate_count);
      append_once(*store, "memory_mb", step, mem);
      core::StoreStatus st = store->status();
      st.step = step;
      st.total_steps = planned_steps();
      store->set_status(st);
      store->commit();
    }
    if (!hooks.every_step) {
      spdlog::info("step {}/{} loss {:.4f} lr {:.3g} grad {:.3f} {:.0f} tok/s pad {:.1f}% mem {:.0f} MiB{} eta {}", step,
                   planned_steps(), loss, lr, iv_grad_norm / static_cast<double>(iv_steps), tps,
                   100.0 * iv_padding / static_cast<double>(iv_steps), mem,
                   iv_gate_count > 0 ? fmt::format(" gate {:.3f}", iv_gate_sum / iv_gate_count) : std::string(),
                   eta > 0 ? fmt::format("{:.0f}s", eta) : std::string("-"));
    }
    iv_loss = iv_grad_norm = iv_padding = iv_seconds = iv_gate_sum = iv_gate_count = 0;
    iv_tgt_tokens = iv_tokens = iv_steps = 0;
  }

  void report(double loss, double lr, double tps, double eta) {
    if (!hooks.on_progress) return;
    Progress p;
    p.step = step;
    p.total_steps = planned_steps();
    p.loss = loss;
    p.lr = lr;
    p.tokens_per_s = tps;
    p.eta_seconds = eta;
    p.phase = "train";
    hooks.on_progress(p);
  }

  // ------------------------------------------------------------ one update

  // Returns false (and fills `error`) on divergence.
  bool update(std::string& error, double& lr_out, double& loss_out) {
    const auto t0 = Clock::now();
    const int64_t s = step + 1;
    std::vector<data::Batch> batches;
    int64_t local_tgt = 0, local_tokens = 0;
    double padding = 0;
    data::BatchSampler& source = sampler_for(s);
    if (sentence_sampler && s == config.data.sentence_steps + 1)
      spdlog::info("step {}: single sentences done, training on the examples of data.context_sentences = {}", s,
                   config.data.context_sentences);
    for (int64_t k = 0; k < tc.accum_steps; ++k) {
      batches.push_back(source.next());
      local_tgt += batches.back().tgt_tokens;
      local_tokens += batches.back().tgt_tokens + batches.back().src_tokens;
      padding += batches.back().padding_fraction();
    }
    point("batches");
    const int64_t global_tgt = group.allreduce_sum(local_tgt);
    const double denom = static_cast<double>(std::max<int64_t>(global_tgt, 1));

    for (auto& p : params) p.mutable_grad() = torch::Tensor();
    model->train();
    double loss_sum = 0;
    // Gated cross-attention: its gates, kept for train.gate_penalty and the gate_mean metric.
    struct KeepGates {
      const std::vector<models::CrossAttentionImpl*>& modules;
      explicit KeepGates(const std::vector<models::CrossAttentionImpl*>& m) : modules(m) {
        for (auto* c : modules) c->keep_gates = true;
      }
      ~KeepGates() {
        for (auto* c : modules) {
          c->keep_gates = false;
          c->kept_gates.clear();
        }
      }
    } keep_gates(gated);
    double gate_sum = 0, gate_count = 0;
    for (auto& b : batches) {
      to_device(b.src, device);
      to_device(b.src_mask, device);
      to_device(b.tgt_in, device);
      to_device(b.tgt_out, device);
      to_device(b.tgt_mask, device);
      LossSums ls;
      torch::Tensor objective;
      {
        AutocastGuard autocast(device, bf16);
        torch::Tensor logits = model->forward(b.src, b.src_mask, b.tgt_in, b.tgt_mask);
        ls = label_smoothed_loss(logits, b.tgt_out, b.tgt_mask, tc.label_smoothing);
        objective = ls.loss;
        if (!gated.empty()) {
          // The gates of every gated layer at the real target tokens, summed;
          // over the layers, the penalty is the mean gate per token summed
          // over the tokens, as the loss is.
          // Without a penalty the sum is only the metric: no graph behind it.
          const double penalty = gate_penalty_at(tc, s);
          const bool penalised = penalty > 0;
          const torch::Tensor real = b.tgt_mask.to(torch::kFloat);
          torch::Tensor sum = torch::zeros({}, real.options());
          for (auto* c : gated)
            for (const torch::Tensor& g : c->kept_gates)
              sum = sum + ((penalised ? g : g.detach()).to(torch::kFloat) * real).sum();
          const double layers = static_cast<double>(gated.size());
          if (penalised) objective = objective + sum * (penalty / layers);
          gate_sum += sum.detach().to(torch::kFloat64).item<double>();
          gate_count += layers * static_cast<double>(b.tgt_tokens);
          for (auto* c : gated) c->kept_gates.clear();
        }
      }
      (objective / denom).backward();
      loss_sum += ls.loss.detach().to(torch::kFloat64).item<double>();
    }
    point("backward");
    // Parameters this rank's batches did not reach still take part in the sum.
    for (auto& p : params)
      if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
    std::vector<torch::Tensor> grads;
    for (auto& p : params) grads.push_back(p.grad());
    group.allreduce_sum(grads);
    const double loss = group.allreduce_sum(loss_sum) / denom;
    if (!gated.empty()) {
      iv_gate_sum += group.allreduce_sum(gate_sum);
      iv_gate_count += group.allreduce_sum(gate_count);
    }
    const double norm = gradient_norm(params);
    loss_out = loss;
    if (!std::isfinite(loss) || !std::isfinite(norm)) {
      error = "diverged at step " + std::to_string(s) + " (loss=" + format_loss(loss) +
              (std::isfinite(norm) ? std::string() : ", grad_norm=" + format_loss(norm)) + ")";
      return false;
    }
    clip_gradients(params, norm, tc.clip_norm);
    const double lr = learning_rate(tc, s);
    lr_out = lr;
    optim->step(lr);
    step = s;
    for (auto& p : params) p.mutable_grad() = torch::Tensor();
    free_pages.tick();  // steps of changing shapes would grow the allocator's kept pages
    point("update");

    const double secs = seconds_since(t0);
    iv_loss += loss * denom;  // back to a sum, so the interval mean is per token
    iv_tgt_tokens += global_tgt;
    iv_tokens += local_tokens;
    iv_grad_norm += norm;
    iv_padding += padding / static_cast<double>(tc.accum_steps);
    iv_steps += 1;
    iv_seconds += secs;
    total_seconds += secs;
    total_tokens += local_tokens;
    attempt_train_seconds += secs;
    return true;
  }

  // Whether the checkpoint signal (or SIGTERM) has reached any rank.
  bool stop_signal() {
    const int64_t local = core::stop_requested() ? 1 : 0;
    return group.allreduce_max(local) != 0;
  }

  TrainOutcome finish(StopReason reason, const std::string& error = "") {
    TrainOutcome o;
    o.reason = reason;
    o.step = step;
    o.error = error;
    o.tokens_per_s = total_seconds > 0 ? static_cast<double>(total_tokens) / total_seconds : 0;
    peak_memory = std::max(peak_memory, device.is_cuda() ? cuda_peak_mb(device) : peak_rss_mb());
    o.peak_memory_mb = peak_memory;
    o.best_score = best_score;
    o.best_loss = best_loss;
    o.best_step = best_step;
    return o;
  }

  TrainOutcome train() {
    attempt_first_step = step;
    // This attempt's peak, not the worker process's earlier experiments'.
    start_peak_measurement(device);
    const int64_t total = planned_steps();
    if (step == 0)
      spdlog::info("training: {} parameters, {} steps planned, {} batches per epoch per rank, {} LibTorch threads, {}",
                   model->parameter_count(), total, sampler->steps_per_epoch(), torch::get_num_threads(),
                   core::allocator_name());
    if (step == 0 && sentence_sampler)
      spdlog::info("stage one: the first {} updates on {} single sentences ({} batches per epoch per rank)",
                   config.data.sentence_steps, data.sentence_examples.size(), sentence_sampler->steps_per_epoch());
    double lr = learning_rate(tc, std::max<int64_t>(step, 1)), last_loss = kNaN;
    bool saved_at_step = step > 0;  // resumed from a checkpoint of this step
    while (true) {
      // Stop conditions, at a step boundary.
      StopReason reason = StopReason::max_steps;
      bool done = false;
      if (step >= tc.max_steps) {
        done = true;
      } else if (tc.max_epochs > 0 && epochs_done() >= tc.max_epochs) {
        done = true;
        reason = StopReason::max_epochs;
      } else if (tc.patience > 0 && bad_validations >= tc.patience) {
        done = true;
        reason = StopReason::patience;
      }
      if (done) {
        // A last validation of the final parameters, then a final checkpoint.
        bool best = false;
        if (!data.valid_examples.empty() && last_validated != step && step > 0) best = run_validation();
        if (step > 0 && (!saved_at_step || best)) {
          if (!parameters_finite()) return finish(StopReason::diverged, not_finite_message(last_loss));
          save_checkpoint(best);
        }
        log_interval(lr, 0);
        spdlog::info("training stopped at step {} ({})", step, to_string(reason));
        return finish(reason);
      }
      if (stop_signal()) {
        // The unfinished log interval stays in the checkpoint (logged after
        // the resume, as an uninterrupted run would).
        if (step > 0 && !saved_at_step) {
          if (!parameters_finite()) return finish(StopReason::diverged, not_finite_message(last_loss));
          save_checkpoint(false);
        }
        spdlog::info("stop signal: checkpointed at step {}", step);
        return finish(StopReason::signal);
      }

      std::string error;
      if (!update(error, lr, last_loss)) {
        log_interval(lr, 0);
        spdlog::error("{}", error);
        return finish(StopReason::diverged, error);
      }
      saved_at_step = false;
      const double done_steps = static_cast<double>(step - attempt_first_step);
      const double eta = done_steps > 0 ? attempt_train_seconds / done_steps * static_cast<double>(total - step) : 0;
      if (hooks.every_step) {
        const double tps = iv_seconds > 0 ? static_cast<double>(iv_tokens) / iv_seconds : 0;
        report(last_loss, lr, tps, eta);
      }
      if (step % tc.log_every == 0) {
        const double tps = iv_seconds > 0 ? static_cast<double>(iv_tokens) / iv_seconds : 0;
        if (!hooks.every_step) report(iv_tgt_tokens > 0 ? iv_loss / static_cast<double>(iv_tgt_tokens) : last_loss, lr, tps, eta);
        log_interval(lr, eta);
      }
      bool best = false;
      if (step % tc.validate_every == 0) best = run_validation();
      if (best || step % tc.checkpoint_every == 0) {
        if (!parameters_finite()) {
          std::string e = not_finite_message(last_loss);
          spdlog::error("{}", e);
          return finish(StopReason::diverged, e);
        }
        save_checkpoint(best);
        saved_at_step = true;
      }
    }
  }
};

Trainer::Trainer(const core::ExperimentConfig& config, const PreparedData& data, models::ModelPtr model, Group& group,
                 torch::Device device, core::ExperimentStore* store, std::string ckpt_dir, TrainHooks hooks)
    : impl_(std::make_unique<Impl>(config, data, std::move(model), group, device, store, std::move(ckpt_dir),
                                   std::move(hooks))) {}

Trainer::~Trainer() = default;

int64_t Trainer::resume() { return impl_->resume(); }
TrainOutcome Trainer::train() { return impl_->train(); }
int64_t Trainer::step() const { return impl_->step; }
int64_t Trainer::planned_steps() const { return impl_->planned_steps(); }
double Trainer::validation_loss() { return impl_->validate().loss; }

}  // namespace mambamt::train
