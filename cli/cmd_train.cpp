// `mambamt train`, `mambamt eval`, `mambamt translate`: one experiment on this
// machine (the runtime of train/experiment.h).
#include <mpi.h>
#include <spdlog/sinks/dist_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "cli/commands.h"
#include "core/config.h"
#include "core/device.h"
#include "core/error.h"
#include "core/log.h"
#include "core/signals.h"
#include "core/store.h"
#include "models/layers.h"
#include "slurm/env.h"
#include "train/decode.h"
#include "train/experiment.h"
#include "train/prepare.h"
#include "train/translate.h"

namespace fs = std::filesystem;

namespace mambamt::cli {

namespace {

std::string duration_text(double s) {
  if (!(s >= 0) || !std::isfinite(s)) return "-";
  const long t = static_cast<long>(s + 0.5);
  char buf[32];
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", t / 3600, (t / 60) % 60);
  else
    std::snprintf(buf, sizeof buf, "%ldm%02lds", t / 60, t % 60);
  return buf;
}

// On a terminal the progress line replaces the console's info lines (the
// experiment's log.txt still gets them all).
void quiet_console() {
  for (auto& sink : spdlog::default_logger()->sinks()) {
    auto dist = std::dynamic_pointer_cast<spdlog::sinks::dist_sink_mt>(sink);
    if (!dist) continue;
    for (auto& s : dist->sinks())
      if (std::dynamic_pointer_cast<spdlog::sinks::stderr_sink_mt>(s)) s->set_level(spdlog::level::warn);
  }
}

void draw_progress(const train::Progress& p) {
  std::ostringstream line;
  if (p.phase == "train") {
    char buf[200];
    std::snprintf(buf, sizeof buf, "step %lld/%lld  loss %.4f  lr %.3g  %.0f tok/s  ETA %s",
                  static_cast<long long>(p.step), static_cast<long long>(p.total_steps), p.loss, p.lr,
                  p.tokens_per_s, duration_text(p.eta_seconds).c_str());
    line << buf;
  } else {
    line << p.phase << (p.phase == "evaluate" ? " (test sets, contrastive, entities, extrapolation, efficiency)"
                                              : " at step " + std::to_string(p.step))
         << " ...";
  }
  std::fprintf(stderr, "\r\033[K%s", line.str().c_str());
  std::fflush(stderr);
}

// MPI for `train --data-parallel` (mpirun -np N mambamt train ...).
struct MpiSession {
  bool owned = false;
  MpiSession() {
    int init = 0;
    MPI_Initialized(&init);
    if (!init) {
      int provided = 0;
      MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
      owned = true;
    }
  }
  ~MpiSession() {
    int fin = 0;
    MPI_Finalized(&fin);
    if (owned && !fin) MPI_Finalize();
  }
};

void print_summary(const std::string& exp_dir) {
  core::StoreSnapshot s = core::ExperimentStore::read((fs::path(exp_dir) / "store.h5").string());
  auto show = [&](const std::string& key, const char* label, double scale, int prec) {
    auto it = s.scalars.find(key);
    if (it == s.scalars.end() || !std::isfinite(it->second)) return;
    std::printf("  %-26s %.*f\n", label, prec, it->second * scale);
  };
  std::printf("results (%s)\n", exp_dir.c_str());
  for (auto& [key, v] : s.scalars) {
    const size_t slash = key.find('/');
    if (slash != std::string::npos && key.substr(slash) == "/bleu") {
      const std::string set = key.substr(0, slash);
      show(set + "/bleu", (set + " BLEU").c_str(), 1, 2);
      show(set + "/chrf", (set + " chrF").c_str(), 1, 2);
    }
  }
  show("contrastive/accuracy", "contrastive accuracy %", 100, 1);
  show("entities/recall", "entity recall %", 100, 1);
  show("entities/consistency", "entity consistency %", 100, 1);
  show("efficiency/params", "parameters", 1, 0);
  show("efficiency/train_tokens_per_s", "training tokens/s", 1, 0);
}

// A --device value: auto, cpu or cuda, else a usage error.
std::string device_value(const std::string& v) {
  if (v != "auto" && v != "cpu" && v != "cuda") throw UsageError("--device " + v + ": use auto, cpu or cuda");
  return v;
}

}  // namespace

Command train_command() {
  CommandSpec spec;
  spec.name = "train";
  spec.summary = "train and evaluate one experiment (resumes from its checkpoints)";
  spec.positionals = {"EXPERIMENT"};
  spec.options = {
      {"--out", "DIR", "experiment directory (default runs/<file stem>)"},
      {"--shared", "DIR", "where corpora and tokenizers are prepared (default DIR/prepared)"},
      {"--name", "NAME", "label written into a new store (default the file stem)"},
      {"--signal", "SIG", "checkpoint signal: USR1, USR2 (default), TERM, INT, HUP; SIGTERM always stops too"},
      {"--device", "DEV", "auto, cpu or cuda for this run (default: the experiment's train.device)"},
      {"--no-eval", "", "stop after training (no test-set evaluation)"},
      {"--data-parallel", "", "under mpirun: every rank trains the experiment data-parallel (rank 0 writes)"},
  };
  spec.description =
      "Prepares the data, trains with periodic validation and checkpoints, then evaluates the test sets and\n"
      "writes everything into DIR/store.h5 (docs/STORE.md). Running it again resumes from the newest\n"
      "checkpoint in DIR/ckpt; a completed experiment is left as it is. A directory holding the store of\n"
      "another experiment is refused. On a terminal a progress line shows step, loss, learning rate,\n"
      "tokens/s and ETA; otherwise log lines every train.log_every steps.\n\n"
      "--device is not part of the experiment's identity: a run started on a GPU can be resumed (or\n"
      "debugged) on the CPU with the same store and checkpoints, and back.\n\n"
      "The checkpoint signal (or SIGTERM) makes it finish the current step, checkpoint and exit.\n"
      "Exit codes: 0 completed, 1 failed (the store says why), 2 usage error, 3 interrupted (run again to resume).";
  return {spec, [](const ParsedArgs& a) {
            const std::string path = a.positional[0];
            core::ExperimentConfig config = core::load_experiment(path);
            const std::string stem = fs::path(path).stem().string();
            train::RunOptions o;
            o.exp_dir = a.get("--out", (fs::path("runs") / stem).string());
            o.shared_dir = a.get("--shared", "");
            o.name = a.get("--name", stem);
            o.skip_evaluation = a.has("--no-eval");
            if (a.has("--device")) {
              o.device = device_value(a.get("--device"));
              core::select_device(o.device);  // no GPU for "cuda": refused before anything is written
            }
            core::install_stop_handlers(a.get("--signal", "USR2"));

            std::unique_ptr<MpiSession> mpi;
            int rank = 0;
            if (a.has("--data-parallel")) {
              mpi = std::make_unique<MpiSession>();
              MPI_Comm_rank(MPI_COMM_WORLD, &rank);
              int size = 1;
              MPI_Comm_size(MPI_COMM_WORLD, &size);
              core::log::set_rank(rank);
              if (size > 1) o.group = MPI_COMM_WORLD;
              // This node's share as the launcher says (a malformed variable is an
              // InputError naming it); MPI's own rank and size without one.
              const slurm::JobEnv job = slurm::read_job_env();
              const bool launched = job.launcher == slurm::Launcher::mpirun || job.launcher == slurm::Launcher::slurm;
              o.local_rank = launched ? job.local_rank : rank;
              o.ranks_on_node = launched ? job.local_size : size;
            }
            o.interactive = rank == 0 && ::isatty(STDERR_FILENO);
            if (o.interactive) {
              quiet_console();
              o.on_progress = draw_progress;
            }
            if (rank == 0) std::fprintf(stderr, "experiment %s -> %s\n", config.id().c_str(), o.exp_dir.c_str());
            train::RunResult r = train::run_experiment(config, o);
            if (o.interactive) std::fprintf(stderr, "\r\033[K");
            core::uninstall_stop_handlers();
            if (rank != 0) return r.state == core::RunState::failed ? 1 : r.state == core::RunState::interrupted ? 3 : 0;
            switch (r.state) {
              case core::RunState::completed:
                std::printf("completed at step %lld (%.0f s this run)\n", static_cast<long long>(r.step), r.seconds);
                if (!o.skip_evaluation) print_summary(o.exp_dir);
                return 0;
              case core::RunState::interrupted:
                std::fprintf(stderr, "interrupted at step %lld: checkpointed; run the same command again to resume\n",
                             static_cast<long long>(r.step));
                return 3;
              default:
                std::fprintf(stderr, "mambamt: error: experiment failed: %s\n", r.error.c_str());
                return 1;
            }
          }};
}

Command eval_command() {
  CommandSpec spec;
  spec.name = "eval";
  spec.summary = "evaluate a trained experiment again, or on more test sets";
  spec.options = {
      {"--store", "DIR", "the experiment directory (holds store.h5 and ckpt/)"},
      {"--test", "FILE...", "test sets: TSV if .tsv or the corpus is synthetic, else its format; results under their stem"},
      {"--contrastive", "FILE...", "ContraPro-format contrastive sets to score as well"},
      {"--weights", "W", "default (mean of the last eval.average_last, else best, else newest), best or latest"},
      {"--device", "DEV", "auto (default: the experiment's train.device), cpu or cuda"},
      {"--threads", "N", "CPU threads (default every core)"},
  };
  spec.description =
      "Without --test: the whole suite on the experiment's own sets (BLEU, chrF, chrF++ with bootstrap\n"
      "intervals, quality by length, COMET when comet-score is on PATH, contrastive accuracy, entity recall\n"
      "and consistency, length extrapolation, alignment error rate against gold alignments, efficiency). With\n"
      "--test: those files only (their scores, and the --contrastive sets). Parameters (--weights\n"
      "default): the mean of the last eval.average_last checkpoints, else best.h5, else the newest checkpoint.\n"
      "Hypotheses go to DIR/hyp/.\n"
      "On a GPU, MAMBAMT_CUDA_GRAPHS=1 in the environment replays the searches' steps from CUDA graphs\n"
      "(the same for train and translate).";
  return {spec, [](const ParsedArgs& a) {
            train::EvalRequest req;
            req.exp_dir = a.get("--store");
            req.test_files = a.get_list("--test");
            req.contrastive_files = a.get_list("--contrastive");
            if (a.has("--weights")) req.weights = weights_value(a.get("--weights"));
            if (a.has("--device")) req.device = device_value(a.get("--device"));
            if (a.has("--threads")) req.threads = static_cast<int>(a.get_int("--threads", 0));
            if (req.exp_dir.empty()) throw UsageError("--store DIR is required");
            train::evaluate_experiment(req);
            print_summary(req.exp_dir);
            return 0;
          }};
}

train::Weights weights_value(const std::string& w) {
  if (w == "default") return train::Weights::kDefault;
  if (w == "best") return train::Weights::kBest;
  if (w == "latest") return train::Weights::kLatest;
  throw UsageError("--weights " + w + ": use default, best or latest");
}

std::vector<OptionSpec> trained_experiment_options() {
  return {
      {"--store", "DIR", "the experiment directory (holds store.h5 and ckpt/)"},
      {"--weights", "W", "default (mean of the last eval.average_last, else best, else newest), best or latest"},
      {"--device", "DEV", "auto (default), cpu or cuda"},
  };
}

train::LoadedExperiment load_trained_experiment(const ParsedArgs& a) {
  const std::string dir = a.get("--store");
  if (dir.empty()) throw UsageError("--store DIR is required");
  return train::load_experiment(dir, device_value(a.get("--device", "auto")), weights_value(a.get("--weights", "default")));
}

Command translate_command() {
  CommandSpec spec;
  spec.name = "translate";
  spec.summary = "translate stdin to stdout with a trained experiment";
  spec.options = trained_experiment_options();
  spec.options.push_back({"--batch", "N", "lines translated together (default 64)"});
  spec.options.push_back({"--beam", "N", "beam size (default eval.beam_size; 1 = greedy)"});
  spec.options.push_back({"--length-penalty", "X", "rank hypotheses by log-prob / length^X (default eval.length_penalty)"});
  spec.options.push_back({"--nbest", "K", "print the K best translations of each line (default eval.nbest, at most the beam)"});
  spec.options.push_back({"--gate-skip", "T",
                          "skip gated cross-attention where its gate is below T (default eval.gate_skip; 0 = never)"});
  spec.description =
      "One sentence or passage per input line, one translation per output line (beam search with the\n"
      "experiment's eval settings, --beam and --length-penalty overriding them). Within a line, \" <sep> \"\n"
      "separates the sentences of a passage; a model trained with data.context_side = \"source\" translates\n"
      "the last sentence of the line, the ones before it being its context. A model trained on windows with\n"
      "eval.doc_decode = \"sentences\" reads one sentence per line and a blank line between documents, and\n"
      "translates each sentence after the ones before it in its document (their source, and its own\n"
      "translations of them as target prefix); --batch then counts lines of whole documents. With --nbest K\n"
      "above 1 each line gives up to K output lines, best first, \"<line> ||| <translation> ||| <score> |||\n"
      "<log-prob>\" (line: the input line from 0; score: log-prob / length^length-penalty; an empty input\n"
      "line gives none). On a GPU, MAMBAMT_CUDA_GRAPHS=1 in the environment replays the search's steps from\n"
      "CUDA graphs.";
  return {spec, [](const ParsedArgs& a) {
            const long batch = a.get_int("--batch", 64);
            if (batch < 1) throw UsageError("--batch must be >= 1");
            const long beam = a.get_int("--beam", 0);
            if (a.has("--beam") && (beam < 1 || beam > 256)) throw UsageError("--beam must be in [1, 256]");
            const double penalty = a.get_double("--length-penalty", 0);
            if (a.has("--length-penalty") && (penalty < 0 || penalty > 10))
              throw UsageError("--length-penalty must be in [0, 10]");
            const long nbest_arg = a.get_int("--nbest", 0);
            if (a.has("--nbest") && nbest_arg < 1) throw UsageError("--nbest must be >= 1");
            const double gate_skip = a.get_double("--gate-skip", 0);
            if (a.has("--gate-skip") && (gate_skip < 0 || gate_skip > 1)) throw UsageError("--gate-skip must be in [0, 1]");
            train::LoadedExperiment exp = load_trained_experiment(a);
            core::EvalConfig& e = exp.config.eval;
            if (a.has("--gate-skip")) {
              if (models::set_gate_skip(*exp.model, gate_skip) == 0 && gate_skip > 0)
                throw UsageError("--gate-skip: " + a.get("--store") + " has no gated cross-attention (model.cross_attn = \"" +
                                 exp.config.model.cross_attn + "\", kind " + exp.config.model.kind + ")");
              e.gate_skip = gate_skip;
            }
            if (a.has("--beam")) e.beam_size = beam;
            if (a.has("--length-penalty")) e.length_penalty = penalty;
            // Without --nbest, the experiment's eval.nbest as far as the beam allows.
            e.nbest = a.has("--nbest") ? nbest_arg : std::min<int64_t>(e.nbest, e.beam_size);
            if (e.nbest > e.beam_size)
              throw UsageError("--nbest " + std::to_string(e.nbest) + " exceeds the beam size " +
                               std::to_string(e.beam_size) + (a.has("--beam") ? "" : " (eval.beam_size; --beam N to widen it)"));
            const bool documents = train::translates_in_context(exp.config);
            if (e.nbest > 1 && documents)
              throw UsageError("--nbest " + std::to_string(e.nbest) + ": " + a.get("--store") +
                               " translates documents sentence by sentence (eval.doc_decode = \"sentences\"), "
                               "continuing from one translation: no n-best lists");
            spdlog::info("translating with {} ({}), beam {}, length penalty {}{}{}", a.get("--store"), exp.weights,
                         e.beam_size, e.length_penalty, e.nbest > 1 ? ", " + std::to_string(e.nbest) + "-best" : "",
                         e.gate_skip > 0 ? fmt::format(", cross-attention skipped below gate {}", e.gate_skip) : "");
            std::vector<std::string> lines;
            size_t first_line = 0;  // the index of lines[0] in the input
            auto flush = [&] {
              if (e.nbest > 1) {
                const auto lists = train::translate_lines_nbest(exp, lines);
                for (size_t i = 0; i < lists.size(); ++i)
                  for (const auto& t : lists[i]) std::cout << train::nbest_line(first_line + i, t.text, t.hypothesis) << "\n";
              } else {
                for (auto& t : train::translate_lines(exp, lines)) std::cout << t << "\n";
              }
              std::cout.flush();
              first_line += lines.size();
              lines.clear();
            };
            // In-context translation needs whole documents: flush at their ends only.
            for (std::string line; std::getline(std::cin, line);) {
              lines.push_back(line);
              const bool blank = line.find_first_not_of(" \t\r") == std::string::npos;
              if (static_cast<long>(lines.size()) >= batch && (!documents || blank)) flush();
            }
            flush();
            return 0;
          }};
}

}  // namespace mambamt::cli
