#include "train/experiment.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <limits>
#include <optional>

#include <spdlog/spdlog.h>

#include "core/checkpoint.h"
#include "core/device.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/log.h"
#include "core/signals.h"
#include "data/corpus.h"
#include "kernels/isa.h"
#include "models/plan.h"
#include "models/registry.h"
#include "train/distributed.h"
#include "train/evaluate.h"
#include "train/prepare.h"
#include "train/trainer.h"
#include "train/translate.h"

namespace fs = std::filesystem;

namespace mambamt::train {

namespace {

using Clock = std::chrono::steady_clock;

models::ModelContext model_context(const data::Tokenizer& tok) {
  models::ModelContext ctx;
  ctx.vocab_size = tok.vocab_size();
  const auto& s = tok.specials();
  ctx.ids.pad = s.pad;
  ctx.ids.unk = s.unk;
  ctx.ids.bos = s.bos;
  ctx.ids.eos = s.eos;
  ctx.ids.sep = s.sep;
  return ctx;
}

// Records a failure in the store (rank 0) and builds the result.
RunResult fail(core::ExperimentStore* store, const std::string& message, int64_t step, Clock::time_point t0) {
  spdlog::error("experiment failed: {}", message);
  if (store) {
    core::StoreStatus st = store->status();
    st.state = core::RunState::failed;
    st.last_error = message;
    st.finished = core::unix_time();
    if (step > 0) st.step = step;
    store->set_status(st);
    store->commit();
  }
  RunResult r;
  r.state = core::RunState::failed;
  r.error = message;
  r.step = step;
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return r;
}

// The outcome of a run that ends `state` at `step` (interrupted: a run
// again resumes it; completed: finished now), recorded in the store.
RunResult end_run(core::ExperimentStore* store, core::RunState state, int64_t step, Clock::time_point t0) {
  if (store) {
    core::StoreStatus s = store->status();
    s.state = state;
    s.step = step;
    if (state == core::RunState::completed) s.finished = core::unix_time();
    store->set_status(s);
    store->commit();
  }
  RunResult r;
  r.state = state;
  r.step = step;
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return r;
}

// The training of a completed experiment of the same training id taken over
// (RunOptions::train_from): its checkpoint files linked into `ckpt_dir`
// (through a temporary directory renamed into place), its metric series and
// validation results copied into `store`. Returns its outcome, or nothing
// (with the reason logged) when it does not qualify.
std::optional<TrainOutcome> adopt_training(const core::ExperimentConfig& config, const std::string& twin_dir,
                                           const PreparedData& data, const std::string& ckpt_dir,
                                           core::ExperimentStore& store) {
  auto refuse = [&](const std::string& why) -> std::optional<TrainOutcome> {
    spdlog::warn("not sharing the training of {}: {}; training here", twin_dir, why);
    return std::nullopt;
  };
  if (core::CheckpointDir(ckpt_dir).latest_step()) return std::nullopt;  // our own checkpoints: resume them
  core::StoreSnapshot twin;
  try {
    twin = core::ExperimentStore::read((fs::path(twin_dir) / "store.h5").string());
  } catch (const std::exception& e) {
    return refuse(e.what());
  }
  if (twin.status.state != core::RunState::completed) return refuse("it is not completed");
  try {
    if (core::parse_experiment(twin.config, twin_dir).training_id() != config.training_id())
      return refuse("its training differs");
  } catch (const std::exception& e) {
    return refuse(e.what());
  }
  for (const auto& [key, corpus] : {std::pair<std::string, const data::Corpus*>{"data.train", &data.train_corpus},
                                    {"data.valid", &data.valid_corpus}}) {
    auto it = twin.texts.find(key);
    if (it == twin.texts.end() || it->second != data::corpus_summary(*corpus))
      return refuse(key + " was " + (it == twin.texts.end() ? "not recorded" : it->second) + " there, " +
                    data::corpus_summary(*corpus) + " here");
  }
  const fs::path from = fs::path(twin_dir) / "ckpt";
  std::vector<fs::path> files;
  std::error_code ec;
  for (auto& entry : fs::directory_iterator(from, ec)) {
    const std::string name = entry.path().filename().string();
    const bool checkpoint = name == "best.h5" || (name.rfind("step_", 0) == 0 && entry.path().extension() == ".h5");
    if (entry.is_regular_file() && checkpoint) files.push_back(entry.path());
  }
  if (ec || files.empty()) return refuse("no checkpoint files in " + from.string());
  const fs::path tmp = fs::path(ckpt_dir).string() + ".shared-tmp";
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp);
  for (const fs::path& f : files) {
    fs::create_hard_link(f, tmp / f.filename(), ec);
    if (ec) fs::copy_file(f, tmp / f.filename());  // another filesystem
  }
  if (fs::exists(ckpt_dir)) fs::remove_all(ckpt_dir);  // no checkpoint in it (above)
  fs::rename(tmp, ckpt_dir);

  for (const auto& [name, series] : twin.metrics)
    for (const core::MetricPoint& m : series) store.append_metric(name, m.step, m.value, m.time);
  auto scalar = [&](const std::string& key) {
    auto it = twin.scalars.find(key);
    return it == twin.scalars.end() ? std::numeric_limits<double>::quiet_NaN() : it->second;
  };
  TrainOutcome out;
  out.reason = StopReason::max_steps;
  out.step = twin.status.step;
  out.tokens_per_s = scalar("efficiency/train_tokens_per_s");
  out.peak_memory_mb = scalar("efficiency/peak_memory_mb");
  out.best_loss = scalar("valid/best_loss");
  const double best_step = scalar("valid/best_step");
  out.best_step = std::isnan(best_step) ? -1 : static_cast<int64_t>(best_step);
  store.set_text("training", "shared with experiment " + twin.experiment_id + " (" + twin_dir +
                                 "): the same training, other evaluation settings; its checkpoints are linked here");
  store.commit();
  spdlog::info("sharing the training of experiment {} ({}): {} checkpoint file(s) linked, step {}", twin.experiment_id,
               twin_dir, files.size(), out.step);
  return out;
}

}  // namespace

RunResult run_experiment(const core::ExperimentConfig& config, const RunOptions& options) {
  const auto t0 = Clock::now();
  Group group(options.group);
  const std::string exp_dir = options.exp_dir;
  const std::string store_path = (fs::path(exp_dir) / "store.h5").string();
  const std::string id = config.id();

  // Rank 0 opens (or creates) the store; every rank learns the outcome.
  std::optional<core::ExperimentStore> store;
  std::string setup_error;
  int64_t completed_step = -1;
  if (group.is_root()) {
    try {
      std::error_code ec;
      fs::create_directories(exp_dir, ec);
      if (!fs::is_directory(exp_dir)) throw Error(exp_dir + ": cannot create the experiment directory");
      if (::access(exp_dir.c_str(), W_OK) != 0) throw Error(exp_dir + ": the experiment directory is not writable");
      if (fs::exists(store_path)) {
        store.emplace(core::ExperimentStore::open(store_path));
        if (store->contents().experiment_id != id)
          throw InputError(exp_dir + " holds the store of experiment " + store->contents().experiment_id + " (" +
                           store->contents().name + "), not of " + id + ": use another directory");
        if (store->status().state == core::RunState::completed) completed_step = store->status().step;
      } else {
        core::StoreIdentity ident;
        ident.experiment_id = id;
        ident.name = options.name;
        ident.sweep = options.sweep;
        ident.config = config.canonical();
        store.emplace(core::ExperimentStore::create(store_path, ident));
      }
    } catch (const std::exception& e) {
      setup_error = e.what();
      if (setup_error.empty()) setup_error = "unusable experiment directory";
    }
  }
  setup_error = group.broadcast(setup_error);
  if (!setup_error.empty()) {
    if (group.is_root()) throw InputError(setup_error);
    throw Error(setup_error);
  }
  completed_step = static_cast<int64_t>(std::llround(group.allreduce_sum(group.is_root() ? static_cast<double>(completed_step) : 0.0)));
  if (completed_step >= 0) {
    // A completed store is never rewritten.
    RunResult r;
    r.state = core::RunState::completed;
    r.step = completed_step;
    return r;
  }

  std::optional<core::log::ExperimentLog> log;
  if (group.is_root()) log.emplace(id, (fs::path(exp_dir) / "log.txt").string());
  core::ExperimentStore* st = store ? &*store : nullptr;
  int64_t step = 0;
  torch::Device device = torch::kCPU;
  try {
    device = core::select_device(options.device.empty() ? config.train.device : options.device, options.local_rank);
    const int threads = core::configure_threads(static_cast<int>(config.train.threads), options.ranks_on_node);
    if (st) {
      core::StoreStatus s = st->status();
      s.attempts = options.reset_attempts ? 1 : s.attempts + 1;
      s.state = core::RunState::running;
      s.last_error.clear();
      s.host = core::host_name();
      s.pid = static_cast<int64_t>(::getpid());
      s.job_id = options.job_id;
      s.started = core::unix_time();
      s.finished = 0;
      s.total_steps = config.train.max_steps;
      st->set_status(s);
      std::map<std::string, std::string> system = core::system_info(device);
      system["cpu_kernels"] = kernels::cpu_isa();
      st->set_system(system);
      st->commit();
      spdlog::info("experiment {} ({}) attempt {} on {} with {} thread(s), {} rank(s)", id,
                   options.name.empty() ? "-" : options.name, s.attempts, device.str(), threads, group.size());
    }

    // Data: rank 0 prepares the shared corpus and tokenizer first.
    const std::string shared_dir =
        options.shared_dir.empty() ? (fs::path(exp_dir) / "prepared").string() : options.shared_dir;
    if (!group.single()) {
      if (group.is_root()) prepare_shared(config, shared_dir);
      group.barrier();
    }
    PreparedData data = prepare_data(config, shared_dir, /*with_tests=*/group.is_root());
    spdlog::info("data: {} training examples ({} sentences over the token budget dropped), {} validation passages, vocabulary {}",
                 data.train_examples.size(), data.dropped_sentences, data.valid_examples.size(),
                 data.tokenizer->vocab_size());

    torch::manual_seed(static_cast<uint64_t>(config.train.seed));
    models::ModelPtr model = models::build_model(config.model, model_context(*data.tokenizer));
    model->to(device, torch::kFloat32);
    // Dropout streams differ between ranks (rank 0 keeps the seed's stream).
    if (group.rank() > 0)
      torch::manual_seed(static_cast<uint64_t>(config.train.seed) * 1000003ULL + static_cast<uint64_t>(group.rank()));

    TrainHooks hooks;
    hooks.on_progress = options.on_progress;
    hooks.on_step_point = options.on_step_point;
    hooks.every_step = options.interactive;
    hooks.checkpoint_strings["shared_dir"] = fs::absolute(shared_dir).lexically_normal().string();
    hooks.checkpoint_strings["tokenizer_dir"] = fs::absolute(data.tokenizer_dir).lexically_normal().string();
    // The text trained and validated on: a resume from checkpoints of other text is refused (Trainer::resume).
    hooks.checkpoint_strings["data.train"] = data::corpus_fingerprint(data.train_corpus);
    hooks.checkpoint_strings["data.valid"] = data::corpus_fingerprint(data.valid_corpus);
    const std::string ckpt_dir = (fs::path(exp_dir) / "ckpt").string();
    // Another experiment's training, when the sweep found one of the same
    // training id completed: rank 0 takes it over, every rank skips training.
    std::optional<TrainOutcome> shared;
    if (!options.train_from.empty()) {
      if (group.is_root() && st) shared = adopt_training(config, options.train_from, data, ckpt_dir, *st);
      if (group.broadcast(shared ? std::string("shared") : std::string()).empty()) shared.reset();
      else if (!shared) shared.emplace();  // the other ranks of the group: nothing to train
    }
    auto record_data = [&] {
      if (!st) return;
      st->set_text("data.train", data::corpus_summary(data.train_corpus));
      st->set_text("data.valid", data::corpus_summary(data.valid_corpus));
      // The attention layers as built, for the labels of the collector's tables.
      const std::string attention = models::attention_label(config.model, models::make_plan(config.model));
      if (!attention.empty()) st->set_text("model.attention", attention);
    };
    TrainOutcome out;
    if (shared) {
      record_data();
      out = *shared;
    } else {
      Trainer trainer(config, data, model, group, device, st, ckpt_dir, hooks);
      trainer.resume();
      record_data();
      if (config.train.activation_checkpointing)
        spdlog::warn("train.activation_checkpointing: not applied (the model stacks offer no per-layer hook yet)");
      out = trainer.train();
    }
    step = out.step;

    if (out.reason == StopReason::diverged) return fail(st, out.error, step, t0);
    if (out.reason == StopReason::signal) return end_run(st, core::RunState::interrupted, step, t0);

    if (st) {
      if (out.best_step >= 0) {
        st->set_scalar("valid/best_loss", out.best_loss);
        st->set_scalar("valid/best_step", static_cast<double>(out.best_step));
      }
      st->commit();
    }
    // Evaluation on rank 0; the other ranks are done.
    if (group.is_root() && !options.skip_evaluation) {
      if (options.on_progress) {
        Progress p;
        p.step = step;
        p.total_steps = step;
        p.phase = "evaluate";
        options.on_progress(p);
      }
      const std::string weights = load_weights(*model, ckpt_dir, Weights::kDefault, config.eval.average_last);
      spdlog::info("evaluating {} parameters from {}", model->parameter_count(), weights);
      TrainingFacts facts;
      facts.train_tokens_per_s = out.tokens_per_s;
      facts.peak_memory_mb = out.peak_memory_mb;
      facts.weights = weights;
      const bool finished = evaluate(*model, config, data, device, *st, exp_dir, facts, {},
                                     [] { return core::stop_requested(); });
      if (!finished) return end_run(st, core::RunState::interrupted, step, t0);
    }
    RunResult r = end_run(st, core::RunState::completed, step, t0);
    if (st) spdlog::info("experiment {} completed at step {} ({:.0f} s)", id, step, r.seconds);
    return r;
  } catch (const std::exception& e) {
    return fail(st, e.what(), step, t0);
  }
}

bool evaluate_experiment(const EvalRequest& req) {
  const std::string store_path = (fs::path(req.exp_dir) / "store.h5").string();
  if (!fs::exists(store_path)) throw InputError(req.exp_dir + ": no experiment store (store.h5) here");
  int64_t stored_version = 0;
  {
    core::StoreSnapshot snap = core::ExperimentStore::read(store_path);
    const auto& s = snap.status;
    if (s.state == core::RunState::running && s.host == core::host_name() && core::process_alive(s.pid) &&
        s.pid != static_cast<int64_t>(::getpid()))
      throw InputError(store_path + ": the experiment is running (pid " + std::to_string(s.pid) +
                       "); evaluate it when it has stopped");
    stored_version = core::evaluation_version(snap);
  }
  const bool whole = req.test_files.empty();
  std::set<std::string> changed;
  if (whole && req.changed_parts_only) {
    changed = core::evaluation_parts_changed_since(stored_version);
    if (changed.empty()) return true;  // nothing to do: its results are this version's
  }
  core::configure_threads(req.threads, req.ranks_on_node);
  LoadedExperiment exp = load_experiment(req.exp_dir, req.device, req.weights, req.local_rank);
  core::log::ExperimentLog log(exp.config.id(), (fs::path(req.exp_dir) / "log.txt").string());
  spdlog::info("evaluating {} with parameters from {}", req.exp_dir, exp.weights);

  PreparedData data;
  EvalParts parts;
  if (whole) {
    data = prepare_data(exp.config, exp.shared_dir, true);
    if (req.changed_parts_only) {
      parts = eval_parts_named(changed);
      parts.brings_up_to_date = true;
      std::string names;
      for (const std::string& n : changed) names += (names.empty() ? "" : ", ") + n;
      spdlog::info("evaluated by version {}, now {}: evaluating again what changed since ({})", stored_version,
                   core::kEvaluationVersion, names);
    }
  } else {
    // Only the given sets: no training data needed.
    data.tokenizer = exp.tokenizer;
    parts.entities = parts.extrapolation = parts.efficiency = parts.explain = parts.gates = parts.alignment = false;
    for (auto& f : req.test_files) data.tests.push_back(load_test_set(exp.config, *exp.tokenizer, f));
  }
  if (!whole || !req.contrastive_files.empty()) {
    if (!whole) data.contrastive.clear();
    for (auto& f : req.contrastive_files) data.contrastive.push_back({set_name(f), data::read_contrastive(f)});
    parts.contrastive = !data.contrastive.empty();
  }
  core::ExperimentStore store = core::ExperimentStore::open(store_path);
  TrainingFacts facts;
  facts.weights = exp.weights;
  const auto& metrics = store.metrics();
  if (auto it = metrics.find("tokens_per_s"); it != metrics.end() && !it->second.empty()) {
    double sum = 0;
    for (auto& p : it->second) sum += p.value;
    facts.train_tokens_per_s = sum / static_cast<double>(it->second.size());
  }
  if (auto it = metrics.find("memory_mb"); it != metrics.end())
    for (auto& p : it->second) facts.peak_memory_mb = std::max(facts.peak_memory_mb, p.value);
  if (auto it = store.contents().scalars.find("efficiency/peak_memory_mb"); it != store.contents().scalars.end() &&
                                                                            std::isfinite(it->second))
    facts.peak_memory_mb = it->second;
  const bool finished = evaluate(*exp.model, exp.config, data, exp.device, store, req.exp_dir, facts, parts,
                                 req.should_stop);
  store.commit();
  return finished;
}

}  // namespace mambamt::train
