#include "orchestrator/prepare.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>

#include "core/config.h"
#include "core/error.h"
#include "core/fs.h"
#include "orchestrator/rundir.h"
#include "train/prepare.h"

namespace fs = std::filesystem;

namespace mambamt::orchestrator {
namespace {

// The data setup of a point: the fields prepare_data reads, everything else
// at its default. Of [data] all but those applied while training (CAT-N and
// the batch's token budget), of [eval] the two that shape the test sets; so
// points that differ in model, training, CAT-N or decoding share a setup. A
// field missed here costs nothing but a report: the experiments prepare
// their data themselves at their start.
std::string setup_key(const core::ExperimentConfig& c) {
  const core::ExperimentConfig defaults;
  core::ExperimentConfig k;
  k.data = c.data;
  k.data.cat_n = defaults.data.cat_n;
  k.data.cat_prob = defaults.data.cat_prob;
  k.data.max_tokens = defaults.data.max_tokens;
  k.eval.doc_decode = c.eval.doc_decode;
  k.eval.max_examples = c.eval.max_examples;
  return k.id();
}

void prepare_one(DataSetup& s, const core::ExperimentConfig& c, const std::string& root) {
  s.tokenizer_dir = train::tokenizer_dir_for(c, root);
  s.corpus_dir = train::synthetic_dir_for(c, root);
  s.tokenizer_found = fs::exists(fs::path(s.tokenizer_dir) / "spm.model");
  s.corpus_found = !s.corpus_dir.empty() && fs::exists(fs::path(s.corpus_dir) / "manifest.txt");
  const auto t0 = std::chrono::steady_clock::now();
  try {
    train::PreparedData d = train::prepare_data(c, root, /*with_tests=*/true);
    s.train_examples = static_cast<int64_t>(d.train_examples.size());
    s.valid_examples = static_cast<int64_t>(d.valid_examples.size());
    s.vocab_size = d.tokenizer ? d.tokenizer->vocab_size() : 0;
    for (const train::TestSet& t : d.tests) s.tests.emplace_back(t.name, static_cast<int64_t>(t.examples.size()));
    for (const train::ContrastiveSet& t : d.contrastive)
      s.contrastive.emplace_back(t.name, static_cast<int64_t>(t.examples.size()));
  } catch (const std::exception& e) {
    s.error = e.what();
  }
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string sets_text(const std::vector<std::pair<std::string, int64_t>>& sets) {
  std::string out;
  for (const auto& [name, n] : sets) out += (out.empty() ? "" : ", ") + name + " " + std::to_string(n);
  return out.empty() ? "none" : out;
}

}  // namespace

PrepareSummary prepare_grid(const ExpandedGrid& grid,
                            const std::function<void(const DataSetup&, size_t, size_t)>& on_done) {
  PrepareSummary out;
  const RunDirectory dir = run_directory_for(grid.grid);
  out.run_dir = dir.root();
  // The setups in the order of their first point, with one config each.
  std::map<std::string, size_t> index;
  std::vector<const core::ExperimentConfig*> configs;
  for (const GridPoint& p : grid.points) {
    if (!p.valid()) {
      out.invalid_points.push_back(p.name + ": " + p.error);
      continue;
    }
    const std::string key = setup_key(*p.config);
    auto [it, added] = index.emplace(key, out.setups.size());
    if (added) {
      out.setups.emplace_back();
      out.setups.back().key = key;
      configs.push_back(&*p.config);
    }
    out.setups[it->second].points.push_back(p.name.empty() ? p.id : p.name);
  }
  core::make_dirs(out.run_dir);
  for (size_t i = 0; i < out.setups.size(); ++i) {
    prepare_one(out.setups[i], *configs[i], out.run_dir);
    if (on_done) on_done(out.setups[i], i, out.setups.size());
  }
  return out;
}

std::string describe_setup(const DataSetup& s, size_t index, size_t total) {
  std::ostringstream o;
  o << "data setup " << index + 1 << "/" << total << " (" << s.points.size() << " point"
    << (s.points.size() == 1 ? "" : "s") << ": ";
  for (size_t i = 0; i < s.points.size() && i < 3; ++i) o << (i ? ", " : "") << s.points[i];
  if (s.points.size() > 3) o << ", ...";
  o << ")\n";
  if (!s.error.empty()) {
    o << "  error: " << s.error << "\n";
    return o.str();
  }
  o << "  tokenizer  " << s.tokenizer_dir << " (" << (s.tokenizer_found ? "found" : "trained") << ", vocabulary "
    << s.vocab_size << ")\n";
  if (!s.corpus_dir.empty())
    o << "  corpus     " << s.corpus_dir << " (" << (s.corpus_found ? "found" : "generated") << ")\n";
  o << "  examples   " << s.train_examples << " training, " << s.valid_examples << " validation; test sets: "
    << sets_text(s.tests) << "; contrastive sets: " << sets_text(s.contrastive) << "\n";
  char t[32];
  std::snprintf(t, sizeof t, "%.2f", s.seconds);
  o << "  time       " << t << " s\n";
  return o.str();
}

}  // namespace mambamt::orchestrator
