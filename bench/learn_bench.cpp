#include "bench/learn_bench.h"

#include "bench/bench.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "core/config.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/store.h"
#include "data/corpus.h"
#include "results/bleu.h"
#include "results/chrf.h"
#include "results/json.h"
#include "train/experiment.h"
#include "train/prepare.h"

namespace fs = std::filesystem;

namespace mambamt::bench {

const char* const kLearnBenchHelp =
    "Learning against a reference implementation on real text: mambamt's Transformer (d_model 128, 3+3 "
    "layers, 4 heads, d_ff 512, ReLU, dropout 0.1, tied embeddings) and a plain PyTorch nn.Transformer of the "
    "same size (bench/learn/reference.py on Debian's python3-torch) train on the same corpus with the same "
    "sentencepiece model (BPE, 4000 pieces, trained by mambamt), 2048 tokens a batch, AdamW lr 1e-3 "
    "(betas 0.9/0.98, weight decay 0.01), warmup over the first tenth of the updates and cosine decay to 1e-5, "
    "clipping at 1.0, label smoothing 0.1; both greedy-decode the test set and one scorer (sacreBLEU 13a BLEU "
    "and chrF2, results/) scores both. Other kinds train beside them with the same recipe at about the "
    "Transformer's parameter count: hybrid (6+6 layers, 1:7 attention middle+end), mamba (decoder-only, 12 "
    "Mamba-2 layers), mamba-encdec (6 Bi-Mamba + 6 Mamba layers with cross-attention, no self-attention), "
    "decoder-only (7 attention layers over source <boundary> target: the pure Mamba's framing with attention). "
    "The corpus is a directory with train.tsv, valid.tsv and test.tsv (src<TAB>tgt<TAB>doc): "
    "`python3 bench/learn/make_corpus.py --out DIR` builds one from the German message catalogs Debian "
    "installs. Options: --corpus DIR (required), --out DIR (runs/bench_learn; experiments and reference runs "
    "finished there with the same settings are scored again, not rerun), --steps N (2000), --kinds LIST (transformer; also hybrid, mamba, "
    "mamba-encdec, decoder-only, or none), --no-reference, --python PATH (/usr/bin/python3), --reference-script PATH "
    "(bench/learn/reference.py under the working directory), --threads N (2), --init standard|normal (the "
    "mambamt models' model.init), --log-every N (50). Writes OUT/learn.json.";

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string corpus;
  std::string out = "runs/bench_learn";
  int64_t steps = 2000;
  std::vector<std::string> kinds = {"transformer"};
  bool reference = true;
  std::string python = "/usr/bin/python3";
  std::string script = "bench/learn/reference.py";
  int64_t threads = 2;
  std::string init = "standard";
  int64_t log_every = 50;
};

// One row of the table.
struct System {
  std::string name;
  bool ok = false;
  std::string error;
  int64_t updates = 0;
  int64_t parameters = 0;
  double seconds = NAN;  // wall time of training and decoding
  double bleu = NAN, chrf = NAN;
  std::vector<std::pair<int64_t, double>> losses;  // (update, mean train loss since the last point)
};

const std::vector<std::string>& known_kinds() {
  static const std::vector<std::string> k = {"transformer", "hybrid", "mamba", "mamba-encdec", "decoder-only"};
  return k;
}

Options parse(const std::vector<std::string>& args) {
  Options o;
  const std::string who = "bench learn";
  auto value = [&](size_t& i) -> const std::string& {
    if (i + 1 >= args.size()) throw UsageError(who + ": " + args[i] + " needs a value");
    return args[++i];
  };
  auto positive = [&](size_t& i) {
    const std::string& name = args[i];
    std::vector<int64_t> v = parse_list(args, i, who, name);
    if (v.size() != 1) throw UsageError(who + ": " + name + " takes one positive integer");
    return v[0];
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--corpus") {
      o.corpus = value(i);
    } else if (a == "--out") {
      o.out = value(i);
    } else if (a == "--steps") {
      o.steps = positive(i);
    } else if (a == "--threads") {
      o.threads = positive(i);
    } else if (a == "--log-every") {
      o.log_every = positive(i);
    } else if (a == "--no-reference") {
      o.reference = false;
    } else if (a == "--python") {
      o.python = value(i);
    } else if (a == "--reference-script") {
      o.script = value(i);
    } else if (a == "--init") {
      o.init = value(i);
      if (o.init != "standard" && o.init != "normal")
        throw UsageError(who + ": --init takes standard or normal, got '" + o.init + "'");
    } else if (a == "--kinds") {
      o.kinds.clear();
      std::stringstream ss(value(i));
      for (std::string k; std::getline(ss, k, ',');) {
        if (k == "none") continue;
        bool known = false;
        for (const auto& n : known_kinds()) known = known || n == k;
        if (!known)
          throw UsageError(who + ": --kinds: unknown kind '" + k +
                           "' (transformer, hybrid, mamba, mamba-encdec, decoder-only, or none)");
        o.kinds.push_back(k);
      }
    } else {
      throw UsageError(who + ": unknown option " + a);
    }
  }
  if (o.corpus.empty()) throw UsageError(who + ": --corpus DIR is required (bench/learn/make_corpus.py builds one)");
  for (const char* f : {"train.tsv", "valid.tsv", "test.tsv"})
    if (!fs::is_regular_file(fs::path(o.corpus) / f))
      throw UsageError(who + ": --corpus " + o.corpus + " has no " + f +
                       " (python3 bench/learn/make_corpus.py --out DIR builds the three files)");
  if (o.reference && !fs::is_regular_file(o.script))
    throw UsageError(who + ": the reference trainer " + o.script +
                     " is not there: run from the repository root, or give --reference-script (or --no-reference)");
  return o;
}

// The [model] lines of a kind (sizes chosen near the Transformer's parameter count).
std::string model_lines(const std::string& kind) {
  const std::string common = "d_model = 128\nn_heads = 4\nd_ff = 512\nmlp = \"relu\"\ndropout = 0.1\n";
  if (kind == "transformer") return "kind = \"transformer\"\nenc_layers = 3\ndec_layers = 3\n" + common;
  if (kind == "hybrid") return "kind = \"hybrid\"\nenc_layers = 6\ndec_layers = 6\n" + common;
  if (kind == "mamba") return "kind = \"mamba\"\ndec_layers = 12\n" + common;
  if (kind == "decoder-only")  // the pure Mamba's framing with attention layers only
    return "kind = \"decoder_only\"\ndec_layers = 7\nattention_ratio = 1.0\n" + common;
  return "kind = \"hybrid\"\nenc_layers = 6\ndec_layers = 6\nattention_ratio = 0.0\n" + common;  // mamba-encdec
}

std::string experiment_text(const Options& o, const std::string& kind, const std::string& tokenizer_dir) {
  const std::string corpus = fs::absolute(o.corpus).lexically_normal().string();
  std::ostringstream t;
  t << "[model]\n" << model_lines(kind) << "init = \"" << o.init << "\"\n";
  t << "[data]\ncorpus = \"tsv\"\ntrain = \"" << corpus << "/train.tsv\"\nvalid = \"" << corpus
    << "/valid.tsv\"\ntest = [\"" << corpus << "/test.tsv\"]\nsrc_lang = \"en\"\ntgt_lang = \"de\"\n"
    << "vocab_size = 4000\ntokenizer = \"bpe\"\nmax_tokens = 2048\n";
  if (!tokenizer_dir.empty()) t << "tokenizer_dir = \"" << tokenizer_dir << "\"\n";
  const int64_t warmup = std::max<int64_t>(1, static_cast<int64_t>(std::lround(0.1 * static_cast<double>(o.steps))));
  t << "[train]\nmax_steps = " << o.steps << "\nlr = 1e-3\nschedule = \"cosine\"\nwarmup_steps = " << warmup
    << "\nmin_lr = 1e-5\nbeta1 = 0.9\nbeta2 = 0.98\nweight_decay = 0.01\nclip_norm = 1.0\nlabel_smoothing = 0.1\n"
    << "threads = " << o.threads << "\nseed = 1\nlog_every = " << o.log_every << "\nvalidate_every = " << o.steps
    << "\ncheckpoint_every = " << o.steps << "\nkeep_checkpoints = 1\ndevice = \"cpu\"\n";
  t << "[eval]\nbeam_size = 1\nmax_len_a = 1.5\nmax_len_b = 10\ncontrastive = false\nentity_recall = false\n"
    << "extrapolation = false\nalignment = false\nbootstrap_samples = 0\ncomet = \"off\"\n";
  return t.str();
}

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path + ": cannot read");
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

// The test references in file order (documents are contiguous in the file).
std::vector<std::string> test_references(const std::string& corpus_dir) {
  const data::Corpus test = data::read_tsv((fs::path(corpus_dir) / "test.tsv").string());
  std::vector<std::string> refs;
  for (const auto& d : test.documents)
    for (const auto& s : d.sentences) refs.push_back(s.tgt);
  return refs;
}

void score(System& s, const std::vector<std::string>& hyps, const std::vector<std::string>& refs,
           const std::string& hyp_path) {
  if (hyps.size() != refs.size())
    throw Error(hyp_path + ": " + std::to_string(hyps.size()) + " hypotheses for " + std::to_string(refs.size()) +
                " test references");
  s.bleu = results::corpus_bleu(hyps, {refs}).score;
  s.chrf = results::corpus_chrf(hyps, {refs}).score;
}

System run_mambamt(const Options& o, const std::string& kind, const std::string& tokenizer_dir,
                   const std::vector<std::string>& refs, std::ostream& out) {
  System s;
  s.name = "mambamt " + kind;
  try {
    const std::string text = experiment_text(o, kind, tokenizer_dir);
    const core::ExperimentConfig config = core::parse_experiment(text, kind + ".toml");
    const std::string dir = (fs::path(o.out) / (kind + "-" + config.id())).string();
    fs::create_directories(dir);
    std::ofstream(fs::path(dir) / "experiment.toml") << text;
    out << "bench learn: " << s.name << " in " << dir << "\n" << std::flush;
    train::RunOptions ro;
    ro.exp_dir = dir;
    ro.name = s.name;
    ro.shared_dir = (fs::path(o.out) / "shared").string();
    ro.device = "cpu";
    const auto t0 = Clock::now();
    const train::RunResult r = train::run_experiment(config, ro);
    const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
    if (r.state != core::RunState::completed) throw Error("did not complete: " + r.error);
    const core::StoreSnapshot store = core::ExperimentStore::read((fs::path(dir) / "store.h5").string());
    auto it = store.metrics.find("train_loss");
    if (it != store.metrics.end())
      for (const auto& p : it->second) s.losses.emplace_back(p.step, p.value);
    auto params = store.scalars.find("efficiency/params");
    if (params != store.scalars.end()) s.parameters = static_cast<int64_t>(params->second);
    s.updates = r.step > 0 ? r.step : o.steps;
    // A store completed by an earlier run comes back at once: the wall time
    // of the run that trained it is kept beside it.
    const fs::path wall_file = fs::path(dir) / "wall_seconds.txt";
    if (r.seconds > 5.0 || !fs::exists(wall_file)) std::ofstream(wall_file) << wall << "\n";
    std::ifstream(wall_file) >> s.seconds;
    const std::string hyp = (fs::path(dir) / "hyp" / (train::set_name(o.corpus + "/test.tsv") + ".txt")).string();
    score(s, read_lines(hyp), refs, hyp);
    s.ok = true;
  } catch (const std::exception& e) {
    s.error = e.what();
  }
  return s;
}

// Quotes an argument for the shell.
std::string quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

System run_reference(const Options& o, const std::string& spm_model, const std::vector<std::string>& refs,
                     std::ostream& out) {
  System s;
  s.name = "PyTorch nn.Transformer (reference)";
  try {
    // One directory per setting; a finished run there is scored again, not rerun.
    const std::string dir = (fs::path(o.out) / ("reference-" + std::to_string(o.steps) + "-" +
                                                 std::to_string(o.threads) + "-" + std::to_string(o.log_every)))
                                .string();
    fs::create_directories(dir);
    const std::string log = dir + "/log.txt";
    const std::string command =
        quoted(o.python) + " " + quoted(o.script) + " --corpus " + quoted(o.corpus) + " --spm " + quoted(spm_model) +
        " --out " + quoted(dir) + " --steps " + std::to_string(o.steps) + " --threads " + std::to_string(o.threads) +
        " --log-every " + std::to_string(o.log_every) + " > " + quoted(log) + " 2>&1";
    out << "bench learn: the reference in " << dir << " (log " << log << ")\n" << std::flush;
    if (!fs::exists(dir + "/reference.json") || !fs::exists(dir + "/hyp.txt")) {
      const int rc = std::system(command.c_str());
      if (rc != 0) throw Error("the reference trainer failed (exit status " + std::to_string(rc) + "); see " + log);
    }
    const nlohmann::ordered_json j = results::read_json_file(dir + "/reference.json");
    s.updates = j.at("updates").get<int64_t>();
    s.parameters = j.at("parameters").get<int64_t>();
    s.seconds = j.at("train_seconds").get<double>() + j.at("decode_seconds").get<double>();
    for (const auto& p : j.at("losses")) s.losses.emplace_back(p.at(0).get<int64_t>(), p.at(1).get<double>());
    score(s, read_lines(dir + "/hyp.txt"), refs, dir + "/hyp.txt");
    s.ok = true;
  } catch (const std::exception& e) {
    s.error = e.what();
  }
  return s;
}

// The mean train loss logged at the first point at or after `step` ("-" without one).
double loss_at(const System& s, int64_t step) {
  for (const auto& [at, v] : s.losses)
    if (at >= step) return v;
  return NAN;
}

}  // namespace

int run_learn_bench(const std::vector<std::string>& args, std::ostream& out) {
  const Options o = parse(args);
  fs::create_directories(o.out);
  out << "mambamt bench learn: corpus " << o.corpus << ", " << o.steps << " updates, " << o.threads
      << " threads, mambamt init " << o.init << ", load " << load_average() << "\n";

  // The tokenizer first: every system reads the same sentencepiece model.
  const std::string tokenizer_dir = fs::absolute(fs::path(o.out) / "tokenizer").lexically_normal().string();
  {
    const core::ExperimentConfig config =
        core::parse_experiment(experiment_text(o, "transformer", tokenizer_dir), "tokenizer.toml");
    train::prepare_shared(config, (fs::path(o.out) / "shared").string());
  }
  const std::string spm_model = tokenizer_dir + "/spm.model";
  const std::vector<std::string> refs = test_references(o.corpus);
  out << "test set: " << refs.size() << " sentences; sentencepiece model " << spm_model << "\n\n";

  std::vector<System> systems;
  for (const std::string& kind : o.kinds) systems.push_back(run_mambamt(o, kind, tokenizer_dir, refs, out));
  if (o.reference) systems.push_back(run_reference(o, spm_model, refs, out));

  const std::vector<int64_t> at = {100, 250, 500, 1000, 2000};
  out << "\n| system | updates | parameters | test BLEU | chrF2 | wall s |";
  for (int64_t a : at)
    if (a <= o.steps) out << " loss@" << a << " |";
  out << "\n|---|---:|---:|---:|---:|---:|";
  for (int64_t a : at)
    if (a <= o.steps) out << "---:|";
  out << "\n";
  nlohmann::ordered_json json = nlohmann::ordered_json::object();
  json["corpus"] = fs::absolute(o.corpus).lexically_normal().string();
  json["steps"] = o.steps;
  json["threads"] = o.threads;
  json["init"] = o.init;
  json["systems"] = nlohmann::ordered_json::array();
  int rc = 0;
  for (const System& s : systems) {
    if (!s.ok) {
      out << "| " << s.name << " | failed: " << s.error << " |\n";
      rc = 1;
    } else {
      out << "| " << s.name << " | " << s.updates << " | " << s.parameters << " | " << fmt("%.2f", s.bleu) << " | "
          << fmt("%.2f", s.chrf) << " | " << fmt("%.0f", s.seconds) << " |";
      for (int64_t a : at)
        if (a <= o.steps) out << " " << fmt("%.3f", loss_at(s, a)) << " |";
      out << "\n";
    }
    nlohmann::ordered_json row = nlohmann::ordered_json::object();
    row["system"] = s.name;
    row["ok"] = s.ok;
    if (!s.ok) row["error"] = s.error;
    row["updates"] = s.updates;
    row["parameters"] = s.parameters;
    row["bleu"] = s.bleu;
    row["chrf"] = s.chrf;
    row["seconds"] = s.seconds;
    nlohmann::ordered_json losses = nlohmann::ordered_json::array();
    for (const auto& [step, v] : s.losses) losses.push_back(nlohmann::ordered_json::array({step, v}));
    row["losses"] = losses;
    json["systems"].push_back(row);
  }
  const std::string path = (fs::path(o.out) / "learn.json").string();
  core::write_file_atomic(path, results::dump_json(json) + "\n");
  out << "\nlosses: mean label-smoothed cross-entropy per target token over the " << o.log_every
      << " updates up to the step; BLEU: sacreBLEU 13a, chrF2: sacreBLEU's default; written to " << path << "\n";
  return rc;
}

}  // namespace mambamt::bench
