// The collector on a fake run directory written by the test: stores with known
// numbers (several seeds, NaN and missing cells, a failed, a running and a
// pending store, an unreadable store file, a point with no store) and a
// sweep.h5 written per docs/STORE.md. Checks the tables (mean/std/n, the marked
// best, percentages relative to the Transformer, failed and missing shown), the
// CSV parsed back, the JSON, summary.h5 read back, the LaTeX structure, and
// every SVG rendered to PNG. MAMBAMT_COLLECTOR_KEEP=DIR keeps the output there.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>
#include <sstream>

#include "core/config.h"
#include "core/error.h"
#include "core/hdf5.h"
#include "core/store.h"
#include "image_check.h"
#include "results/collector.h"
#include "results/detail/collector_model.h"
#include "results/json.h"
#include "results/report_table.h"
#include "results/segments.h"
#include "results/svg.h"
#include "test_support.h"

using namespace mambamt;
using namespace mambamt::results;
using namespace mambamt::results::testing;
namespace fs = std::filesystem;
namespace h5 = mambamt::core::h5;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

const char* kGrid = R"([sweep]
name = "abl"
seeds = [1, 2]

[base]
model.d_model = 64
model.n_heads = 4
train.max_steps = 100

[grid]
model.attention_ratio = [0.25, 0.125]
model.d_state = [32, 64]

[[variant]]
name = "transformer"
model.kind = "transformer"

[[variant]]
name = "mamba"
model.kind = "mamba"
)";

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

core::ResultTable table(std::vector<std::string> rows, std::vector<std::string> columns, std::vector<double> values) {
  core::ResultTable t;
  t.rows = std::move(rows);
  t.columns = std::move(columns);
  t.values = std::move(values);
  return t;
}

// Per-document entity counts for the paired tests of entity consistency: 40
// documents with two repeated entities each, both rendered, `consistent` of
// them consistent (one fewer in the first `fewer` documents), from `text`;
// `rendered` = 0: none rendered (and none consistent).
void write_entity_counts(const std::string& store_path, int consistent, const std::string& text, int fewer = 0,
                         int rendered = 2) {
  core::ExperimentStore store = core::ExperimentStore::open(store_path);
  std::vector<std::string> rows;
  std::vector<double> values;
  for (int d = 0; d < 40; ++d) {
    rows.push_back(std::to_string(d));
    values.insert(values.end(), {rendered == 0 ? 0.0 : static_cast<double>(consistent - (d < fewer ? 1 : 0)),
                                 static_cast<double>(rendered), 2});
  }
  store.set_table("entities/by_document", table(rows, {"consistent", "rendered", "repeated"}, values));
  store.set_text("data.entities", text);
  store.commit();
}

// The results of one completed experiment. NaN scalars are written as NaN;
// `absent` names scalars not written at all.
struct Results {
  double bleu = kNaN, chrf = kNaN, comet = kNaN, contrastive = kNaN, recall = kNaN;
  double decode = kNaN, train = kNaN, memory = kNaN, params = kNaN;
  bool comet_written = false, recall_written = true;
  // entities/consistency and the consistency columns of entities/by_frequency
  // (NaN: neither, as in stores from before them).
  double consistency = kNaN;
  std::vector<double> by_length;  // BLEU of 1-16, 17-32, 33+ (empty: no table)
  bool long_bucket = true;        // the 33+ row exists
  double valid_offset = 0;        // valid_loss curve = 5 - step/50 + offset
  int explain = 0;                // results/explain/<k>/occlusion for k < explain
  bool explain_attention = false; // and results/explain/<k>/attention
  // results/test/segments of translations of test_references() with every
  // garbled_every-th one and those in `garbled` garbled (0: no table).
  int garbled_every = 0;
  std::vector<int> garbled;
  // The model translated passages of two sentences: test/segments of the
  // passages (two translations and their references joined), and
  // test/sentence_segments of the sentences.
  bool passages = false;
  // With segment statistics: COMET too, each sentence 0.9 (0.3 garbled), a
  // passage the mean of its two: test/comet_segments (and
  // test/sentence_comet_segments of passages), test/comet, test/sentence_comet.
  bool comet_segments = false;
};

// 120 reference sentences of a test set.
std::vector<std::string> test_references() {
  const std::vector<std::string> who = {"the cat", "a farmer", "my sister", "the old teacher", "our neighbour"};
  const std::vector<std::string> did = {"saw", "painted", "sold", "found", "carried"};
  const std::vector<std::string> what = {"a red boat", "the small house", "three apples", "an old map"};
  std::vector<std::string> refs;
  for (int i = 0; i < 120; ++i)
    refs.push_back(who[i % who.size()] + " " + did[(i / 5) % did.size()] + " " + what[(i / 25) % what.size()] +
                   " on day " + std::to_string(i) + " .");
  return refs;
}

// The references translated, those garbled (their words in reverse order,
// the day wrong) as Results::garbled_every and garbled say.
std::vector<std::string> test_translations(const Results& r) {
  std::vector<std::string> hyps = test_references();
  for (int i = 0; i < static_cast<int>(hyps.size()); ++i) {
    if (i % r.garbled_every != 0 && std::find(r.garbled.begin(), r.garbled.end(), i) == r.garbled.end()) continue;
    std::istringstream in(hyps[i]);
    std::vector<std::string> words;
    for (std::string w; in >> w;) words.push_back(w == std::to_string(i) ? "yesterday" : w);
    std::reverse(words.begin(), words.end());
    std::string out;
    for (auto& w : words) out += (out.empty() ? "" : " ") + w;
    hyps[i] = out;
  }
  return hyps;
}

// The segment statistics of translations `hyps` of `refs` (one reference each).
core::ResultTable segments_table(const std::vector<std::string>& hyps, const std::vector<std::string>& refs) {
  const ReferenceStreams streams{refs};
  return segment_table(bleu_corpus_segment_stats(hyps, streams), chrf_corpus_segment_stats(hyps, streams),
                       ChrfOptions{});
}

// Neighbouring sentences joined in twos: the passages of a model trained on windows of two.
std::vector<std::string> in_twos(const std::vector<std::string>& sentences) {
  std::vector<std::string> out;
  for (size_t i = 0; i + 1 < sentences.size(); i += 2) out.push_back(sentences[i] + " " + sentences[i + 1]);
  return out;
}

// results/test/segments (and sentence_segments) as Results::garbled_every,
// garbled and passages say.
void write_segments(core::ExperimentStore& store, const Results& r) {
  if (r.garbled_every <= 0) return;
  const std::vector<std::string> hyps = test_translations(r), refs = test_references();
  store.set_scalar("test/sentence_bleu", corpus_bleu(hyps, ReferenceStreams{refs}).score);
  if (r.passages) {
    store.set_table("test/sentence_segments", segments_table(hyps, refs));
    store.set_table("test/segments", segments_table(in_twos(hyps), in_twos(refs)));
  } else {
    store.set_table("test/segments", segments_table(hyps, refs));
  }
  if (r.comet_segments) {
    std::vector<double> sentences, passages;
    for (size_t i = 0; i < hyps.size(); ++i) sentences.push_back(hyps[i] == refs[i] ? 0.9 : 0.3);
    for (size_t i = 0; i + 1 < sentences.size(); i += 2) passages.push_back((sentences[i] + sentences[i + 1]) / 2);
    const double mean = std::accumulate(sentences.begin(), sentences.end(), 0.0) / sentences.size();
    store.set_table("test/comet_segments", comet_segment_table(r.passages ? passages : sentences));
    if (r.passages) store.set_table("test/sentence_comet_segments", comet_segment_table(sentences));
    store.set_scalar("test/comet", mean);
    store.set_scalar("test/sentence_comet", mean);
  }
}

struct Point {
  std::string id, name, variant;
  int64_t seed;
  std::vector<std::string> axis_values;
};

void write_store(const fs::path& run, const Point& p, const core::ExperimentConfig& config, const std::string& state,
                 const Results& r, const std::string& error = "") {
  const fs::path dir = run / "exp" / p.id;
  fs::create_directories(dir);
  core::StoreIdentity id{p.id, p.name, "abl", config.canonical()};
  core::ExperimentStore store = core::ExperimentStore::create((dir / "store.h5").string(), id);
  core::StoreStatus s;
  s.state = core::run_state_from(state);
  s.attempts = 1;
  s.last_error = error;
  s.step = state == "running" ? 50 : (state == "completed" ? 100 : 0);
  s.total_steps = 100;
  store.set_status(s);
  if (state == "completed" || state == "running") {
    const int last = state == "running" ? 50 : 100;
    for (int step = 10; step <= last; step += 10) store.append_metric("valid_loss", step, 5.0 - step / 50.0 + r.valid_offset);
  }
  if (state == "completed") {
    store.set_scalar("evaluation/version", static_cast<double>(core::kEvaluationVersion));
    store.set_scalar("test/bleu", r.bleu);
    store.set_scalar("test/chrf", r.chrf);
    if (r.comet_written) store.set_scalar("test/comet", r.comet);
    store.set_scalar("contrastive/accuracy", r.contrastive);
    if (r.recall_written) store.set_scalar("entities/recall", r.recall);
    if (!std::isnan(r.consistency)) store.set_scalar("entities/consistency", r.consistency);
    store.set_scalar("efficiency/decode_tokens_per_s", r.decode);
    store.set_scalar("efficiency/train_tokens_per_s", r.train);
    store.set_scalar("efficiency/peak_memory_mb", r.memory);
    store.set_scalar("efficiency/params", r.params);
    write_segments(store, r);
    if (!r.by_length.empty()) {
      std::vector<std::string> rows = {"1-16", "17-32"};
      std::vector<double> v = {r.by_length[0], r.by_length[0] + 20, 5, 10, r.by_length[1], r.by_length[1] + 20, 5, 24};
      if (r.long_bucket) {
        rows.push_back("33+");
        for (double x : {r.by_length[2], r.by_length[2] + 20, 3.0, 40.0}) v.push_back(x);
      }
      store.set_table("test/by_length", table(rows, {"bleu", "chrf", "n", "mean_src_len"}, v));
      store.set_table("extrapolation/by_length",
                      table({"1x", "2x", "4x"}, {"bleu", "chrf", "n", "mean_src_len"},
                            {r.bleu, r.chrf, 5, 30, r.bleu - 5, r.chrf - 5, 5, 60, r.bleu - 10, r.chrf - 10, 5, 120}));
      store.set_table("contrastive/by_pronoun", table({"er", "sie", "es"}, {"accuracy", "n"},
                                                      {r.contrastive, 10, r.contrastive - 0.1, 10, kNaN, 0}));
      store.set_table("contrastive/by_distance", table({"0", "1", "2", "3", ">3"}, {"accuracy", "n"},
                                                       {0.9, 10, 0.8, 10, 0.7, 10, 0.6, 10, r.contrastive - 0.3, 10}));
      if (std::isnan(r.consistency)) {
        store.set_table("entities/by_frequency", table({"unseen", "1-15", "16+"}, {"recall", "n"},
                                                       {0.3, 10, 0.5, 10, 0.9, 10}));
      } else {
        const double k = r.consistency;
        store.set_table("entities/by_frequency",
                        table({"unseen", "1-15", "16+"}, {"recall", "n", "consistency", "consistency_n"},
                              {0.3, 10, k - 0.2, 4, 0.5, 10, k, 5, 0.9, 10, k + 0.1, 6}));
      }
      store.set_table("efficiency/memory_by_length",
                      table({"128", "256", "512", "1024"}, {"train_memory_mb", "decode_state_mb"},
                            {r.memory / 4, r.params / 1e6, r.memory / 2, r.params / 1e6 * 1.5, r.memory, r.params / 1e6 * 2,
                             r.memory * 2, r.params / 1e6 * 3}));
    }
    // Heatmaps of explained sentences: target pieces down, source pieces across
    // (a repeated label, a special token and a character to escape included).
    for (int k = 0; k < r.explain; ++k) {
      const std::vector<std::string> src = {"\u2581Ta", "\u2581ul", "\u2581pa", "\u2581ul", "\u2581<&>", "</s>"};
      const std::vector<std::string> tgt = {"\u2581Zor", "ek", "\u2581ul", "</s>"};
      std::vector<double> occ, att;
      for (size_t t = 0; t < tgt.size(); ++t)
        for (size_t j = 0; j < src.size(); ++j) {
          occ.push_back(t == j ? 0.5 + 0.1 * k : 0.05 * static_cast<double>(j));
          att.push_back(t == j ? 0.75 : 0.05);
        }
      const std::string prefix = "explain/" + std::to_string(k) + "/";
      store.set_table(prefix + "occlusion", table(tgt, src, occ));
      if (r.explain_attention) store.set_table(prefix + "attention", table(tgt, src, att));
    }
  }
  store.commit();
}

// A vlen-string 2-D dataset (points x axes), as the coordinator writes /points/axis_values.
void write_string_matrix(h5::Group& g, const std::string& name, const std::vector<std::string>& values, size_t rows,
                         size_t cols) {
  h5::Handle t(H5Tcopy(H5T_C_S1));
  H5Tset_size(t.get(), H5T_VARIABLE);
  std::vector<const char*> ptrs;
  for (auto& v : values) ptrs.push_back(v.c_str());
  g.write_raw(name, t.get(), {rows, cols}, ptrs.data());
}

// sweep.h5 as the coordinator writes it: the sweep's state ("running") and
// design, and /points, one row per point (its values of `axes`); `more` adds
// attributes to the root.
void write_sweep_file(const fs::path& path, const std::string& design, const std::vector<Point>& points,
                      const std::vector<std::string>& axes, const std::vector<std::string>& base_values,
                      const std::function<void(h5::Group&)>& more = {}) {
  h5::File file = h5::File::create(path.string());
  h5::Group root = file.root();
  root.set_attr("format", "mambamt-sweep");
  root.set_attr("state", "running");
  root.set_attr("design", design);
  if (more) more(root);
  h5::Group pts = root.create_group("points");
  std::vector<std::string> ids, names, variants, values;
  std::vector<int64_t> seeds;
  for (const Point& p : points) {
    ids.push_back(p.id);
    names.push_back(p.name);
    variants.push_back(p.variant);
    seeds.push_back(p.seed);
    values.insert(values.end(), p.axis_values.begin(), p.axis_values.end());
  }
  pts.write_strings("id", ids);
  pts.write_strings("name", names);
  pts.write_strings("variant", variants);
  pts.write_ints("seed", seeds);
  write_string_matrix(pts, "axis_values", values, points.size(), axes.size());
  pts.set_attr("axes", axes);
  pts.set_attr("base_values", base_values);
}

// The fake sweep: 4 grid points x 2 seeds + 2 variants x 2 seeds = 12 points.
//   base (0.125, 64):  seeds 1, 2 completed (BLEU 30, 32; COMET 0.81 and NaN)
//   (0.25, 64):        seed 1 completed (BLEU 28, no entity recall), seed 2 running
//   (0.125, 32):       seed 1 completed (BLEU 29, memory 500), seed 2 failed
//   (0.25, 32):        seed 1 store unreadable, seed 2 missing (no store)
//   transformer:       seeds 1, 2 completed (BLEU 27, 29; decode 100; train 2000; memory 1000)
//   mamba:             seed 1 completed (BLEU 25; decode 250; train 2500; memory 400), seed 2 pending
struct FakeSweep {
  fs::path root, run;
  std::vector<Point> points;

  // The store of a point: a variant's, or the grid point at `axis_values`.
  std::string store_of(const std::string& variant, const std::vector<std::string>& axis_values, int64_t seed) const {
    for (const Point& p : points)
      if (p.variant == variant && (!variant.empty() || p.axis_values == axis_values) && p.seed == seed)
        return (run / "exp" / p.id / "store.h5").string();
    FAIL("no point " << variant << " of seed " << seed);
    return std::string();
  }

  // The ids of the completed stores, sorted (the unreadable store left out).
  std::vector<std::string> completed_ids() const {
    std::vector<std::string> ids;
    for (auto& entry : fs::directory_iterator(run / "exp")) {
      const std::string path = (entry.path() / "store.h5").string();
      try {
        if (fs::exists(path) && core::ExperimentStore::read(path).status.state == core::RunState::completed)
          ids.push_back(entry.path().filename().string());
      } catch (const std::exception&) {
      }  // the sweep's unreadable store
    }
    std::sort(ids.begin(), ids.end());
    return ids;
  }
};

FakeSweep make_sweep(const fs::path& root, bool with_sweep_file = true, bool with_grid_file = true) {
  FakeSweep f;
  f.root = root;
  f.run = root / "runs" / "abl";
  fs::create_directories(f.run / "exp");
  if (with_grid_file) std::ofstream(f.run / "sweep.toml") << kGrid;
  core::GridConfig grid = core::parse_grid(kGrid, "sweep.toml");

  auto make = [&](const std::string& variant, const std::string& ratio, const std::string& d_state, int64_t seed) {
    std::vector<std::pair<std::string, std::string>> ov;
    Point p;
    p.variant = variant;
    p.seed = seed;
    if (variant.empty()) {
      ov = {{"model.attention_ratio", ratio}, {"model.d_state", d_state}};
      p.name = "model.attention_ratio=" + ratio + " model.d_state=" + d_state;
      p.axis_values = {ratio, d_state};
    } else {
      for (auto& v : grid.variants)
        if (v.name == variant) ov = v.overrides;
      p.name = variant;
      p.axis_values = {"0.125", "64"};
    }
    ov.emplace_back("train.seed", std::to_string(seed));
    core::ExperimentConfig c = grid.point(ov);
    p.id = c.id();
    f.points.push_back(p);
    return std::make_pair(p, c);
  };

  auto res = [](double bleu, double decode, double train, double memory, double params) {
    Results r;
    r.bleu = bleu;
    r.chrf = bleu + 20;
    r.contrastive = 0.8;
    r.recall = 0.6;
    r.decode = decode;
    r.train = train;
    r.memory = memory;
    r.params = params;
    r.by_length = {bleu + 5, bleu, bleu - 10};
    return r;
  };

  for (const char* ratio : {"0.25", "0.125"})
    for (const char* d_state : {"32", "64"})
      for (int64_t seed : {1, 2}) {
        auto [p, c] = make("", ratio, d_state, seed);
        const std::string key = std::string(ratio) + "/" + d_state + "/" + std::to_string(seed);
        if (key == "0.125/64/1") {
          Results r = res(30, 200, 1000, 600, 2e6);
          r.garbled_every = 10;
          r.chrf = 50;
          r.contrastive = 0.80;
          r.recall = 0.6;
          r.comet_written = true;
          r.comet = 0.81;
          r.explain = 3;
          r.explain_attention = true;
          r.consistency = 0.5;
          write_store(f.run, p, c, "completed", r);
        } else if (key == "0.125/64/2") {
          Results r = res(32, 220, 1100, 600, 2e6);
          r.garbled_every = 10;
          r.chrf = 54;
          r.contrastive = 0.90;
          r.recall = 0.7;
          r.comet_written = true;  // written as NaN: a missing cell
          r.long_bucket = false;
          r.valid_offset = 0.2;
          r.consistency = 0.7;
          write_store(f.run, p, c, "completed", r);
        } else if (key == "0.25/64/1") {
          Results r = res(28, 190, 900, 650, 2.1e6);
          r.garbled_every = 3;  // against a tenth for the base: significant
          r.recall_written = false;
          write_store(f.run, p, c, "completed", r);
        } else if (key == "0.25/64/2") {
          write_store(f.run, p, c, "running", Results{});
        } else if (key == "0.125/32/1") {
          Results r = res(29, 230, 1200, 500, 1.8e6);
          r.garbled_every = 10;  // one translation more garbled than the base's: not significant
          r.garbled = {5};
          write_store(f.run, p, c, "completed", r);
        } else if (key == "0.125/32/2") {
          write_store(f.run, p, c, "failed", Results{}, "CUDA out of memory at step 7");
        } else if (key == "0.25/32/1") {
          fs::create_directories(f.run / "exp" / p.id);
          std::ofstream(f.run / "exp" / p.id / "store.h5") << "not an HDF5 file";
        }
        // 0.25/32/2: no store at all
      }
  {
    // Half the Transformer's translations garbled, a tenth of the base
    // hybrid's, one more than the Transformer's of the pure Mamba's.
    auto [p1, c1] = make("transformer", "", "", 1);
    Results t1 = res(27, 100, 2000, 1000, 3e6);
    t1.garbled_every = 2;
    t1.consistency = 0.4;
    write_store(f.run, p1, c1, "completed", t1);
    auto [p2, c2] = make("transformer", "", "", 2);
    Results t2 = res(29, 100, 2000, 1000, 3e6);
    t2.garbled_every = 2;
    t2.consistency = 0.6;
    write_store(f.run, p2, c2, "completed", t2);
    auto [p3, c3] = make("mamba", "", "", 1);
    Results mamba = res(25, 250, 2500, 400, 2.5e6);
    mamba.garbled_every = 2;
    mamba.garbled = {1};
    mamba.passages = true;  // paired with the Transformer sentence by sentence
    mamba.explain = 2;  // occlusion only: a pure Mamba has no attention over the source
    write_store(f.run, p3, c3, "completed", mamba);
    auto [p4, c4] = make("mamba", "", "", 2);
    write_store(f.run, p4, c4, "pending", Results{});
  }

  if (with_sweep_file)
    write_sweep_file(f.run / "sweep.h5", "cartesian", f.points, {"model.attention_ratio", "model.d_state"},
                     {"0.125", "64"}, [](h5::Group& root) {
                       root.set_attr("name", "abl");
                       root.set_attr("job_ids", std::vector<std::string>{"4242"});
                       root.set_attr("requeues", int64_t{0});
                     });
  return f;
}

const ReportTable& find_table(const CollectReport& r, const std::string& name) {
  for (auto& t : r.tables)
    if (t.name == name) return t;
  FAIL("no table " << name);
  throw std::logic_error("unreachable");
}

const ReportRow& find_row(const ReportTable& t, const std::string& key) {
  for (auto& r : t.rows)
    if (r.key == key) return r;
  FAIL("table " << t.name << " has no row " << key);
  throw std::logic_error("unreachable");
}

const ReportCell& cell(const ReportTable& t, const std::string& row, const std::string& column) {
  const ReportRow& r = find_row(t, row);
  for (size_t c = 0; c < t.columns.size(); ++c)
    if (t.columns[c].key == column) return r.cells.at(c);
  FAIL("table " << t.name << " has no column " << column);
  throw std::logic_error("unreachable");
}

// RFC 4180 reader: rows of fields.
std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string field;
  bool quoted = false, any = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c == '"') {
      quoted = true;
      any = true;
    } else if (c == ',') {
      row.push_back(field);
      field.clear();
      any = true;
    } else if (c == '\n') {
      row.push_back(field);
      rows.push_back(row);
      row.clear();
      field.clear();
      any = false;
    } else {
      field += c;
      any = true;
    }
  }
  if (any) {
    row.push_back(field);
    rows.push_back(row);
  }
  return rows;
}

struct Collected {
  TempDir dir;
  FakeSweep sweep;
  CollectReport report;
  std::string log;
  fs::path out;
};

std::unique_ptr<Collected> run_collect(bool with_sweep_file = true, bool with_grid_file = true,
                                       std::vector<std::string> formats = {"md", "csv", "tex", "json"}) {
  auto c = std::make_unique<Collected>();
  c->sweep = make_sweep(c->dir.path(), with_sweep_file, with_grid_file);
  CollectOptions o;
  o.run_dir = c->sweep.run.string();
  o.formats = formats;
  std::ostringstream log;
  c->report = collect(o, log);
  c->log = log.str();
  c->out = c->report.out_dir;
  if (const char* keep = std::getenv("MAMBAMT_COLLECTOR_KEEP")) {
    fs::create_directories(keep);
    fs::copy(c->out, keep, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  }
  return c;
}

// The full sweep collected once in every format, shared by the tests that only
// read the output (building the stores dominates the time).
const Collected* shared_collect() {
  static std::unique_ptr<Collected> c = run_collect();
  return c.get();
}

}  // namespace

TEST_CASE("collector: status counts, unreadable stores and the default output directory", "[results][collector]") {
  const Collected* c = shared_collect();
  CHECK(fs::path(c->report.out_dir) == c->dir.path() / "results" / "abl");
  const auto& n = c->report.counts;
  CHECK(n.at("total") == 12);
  CHECK(n.at("completed") == 7);
  CHECK(n.at("running") == 1);
  CHECK(n.at("pending") == 1);
  CHECK(n.at("failed") == 1);
  CHECK(n.at("missing") == 1);
  CHECK(n.at("unreadable") == 1);
  CHECK(c->report.partial);
  REQUIRE(c->report.problems.size() == 1);
  CHECK(c->report.problems[0].find("store.h5") != std::string::npos);
  // The store's path once, at the start, in the problem and in the log line.
  const std::string store = c->report.problems[0].substr(0, c->report.problems[0].find(": "));
  CHECK_THAT(store, Catch::EndsWith("store.h5"));
  CHECK(c->report.problems[0].find(store, 1) == std::string::npos);
  const std::string head = "collect: skipping unreadable store " + store + ": ";
  const size_t line = c->log.find(head);
  REQUIRE(line != std::string::npos);
  CHECK(c->log.substr(line + head.size(), c->log.find('\n', line) - line - head.size()).find(store) ==
        std::string::npos);
  for (const char* f : {"report.md", "summary.h5", "tables.md", "tables.tex", "summary.json", "tables/baselines.csv",
                        "tables/points.csv", "tables/ablation_model.d_state.json", "plots/quality_vs_speed.svg"})
    CHECK(fs::exists(c->out / f));
}

TEST_CASE("collector: ablation tables hold mean, std and n over seeds with the best marked", "[results][collector]") {
  const Collected* c = shared_collect();
  const ReportTable& ratio = find_table(c->report, "ablation_model.attention_ratio");
  REQUIRE(ratio.rows.size() == 2);
  CHECK(ratio.rows[0].key == "0.25");
  CHECK(ratio.rows[0].label == "0.25 (1:3)");
  CHECK(ratio.rows[1].label == "0.125 (1:7)");
  CHECK(ratio.rows[1].base);
  const ReportCell& base_bleu = cell(ratio, "0.125", "bleu");
  CHECK(base_bleu.mean == Approx(31));
  CHECK(base_bleu.std == Approx(std::sqrt(2.0)));
  CHECK(base_bleu.n == 2);
  CHECK(base_bleu.best);
  const ReportCell& b25 = cell(ratio, "0.25", "bleu");
  CHECK(b25.mean == Approx(28));
  CHECK(b25.n == 1);
  CHECK(std::isnan(b25.std));
  CHECK_FALSE(b25.best);
  CHECK(find_row(ratio, "0.25").status == "1 completed, 1 running");
  // Entity recall absent from the 0.25 store: no value, and nothing to compare.
  CHECK(cell(ratio, "0.25", "entity_recall").n == 0);
  CHECK_FALSE(cell(ratio, "0.125", "entity_recall").best);
  CHECK(cell(ratio, "0.125", "entity_recall").mean == Approx(65));
  CHECK(cell(ratio, "0.125", "contrastive_accuracy").mean == Approx(85));
  CHECK(cell(ratio, "0.125", "contrastive_accuracy").std == Approx(std::sqrt(50.0)));
  // COMET: 0.81 and a NaN -> one value.
  CHECK(cell(ratio, "0.125", "comet").mean == Approx(0.81));
  CHECK(cell(ratio, "0.125", "comet").n == 1);
  // Lower memory is better.
  CHECK(cell(ratio, "0.25", "peak_memory_mb").mean == Approx(650));
  CHECK(cell(ratio, "0.125", "peak_memory_mb").best);

  const ReportTable& ds = find_table(c->report, "ablation_model.d_state");
  REQUIRE(ds.rows.size() == 2);
  CHECK(find_row(ds, "32").status == "1 completed, 1 failed");
  CHECK(cell(ds, "32", "peak_memory_mb").best);
  CHECK(cell(ds, "32", "decode_tokens_per_s").best);
  CHECK(cell(ds, "64", "bleu").best);

  // Paired bootstrap against the base value of the axis, seed by seed (only
  // seed 1 has a completed point in both rows).
  CHECK_THAT(ratio.caption, Catch::Contains("against model.attention_ratio = 0.125 (1:7) of the same seed"));
  for (const char* col : {"bleu_p_vs_base", "chrf_p_vs_base"}) {
    INFO(col);
    CHECK(cell(ratio, "0.25", col).n == 1);
    CHECK(cell(ratio, "0.25", col).mean < 0.01);
    CHECK_FALSE(cell(ratio, "0.125", col).has_value());
    CHECK(cell(ds, "32", col).n == 1);
    CHECK(cell(ds, "32", col).mean > 0.05);
    CHECK_FALSE(cell(ds, "64", col).has_value());
  }
  // Each p follows its metric.
  std::vector<std::string> keys;
  for (const ReportColumn& col : ratio.columns) keys.push_back(col.key);
  const auto bleu_at = std::find(keys.begin(), keys.end(), "bleu");
  REQUIRE(bleu_at + 1 < keys.end());
  CHECK(*(bleu_at + 1) == "bleu_p_vs_base");
  CHECK(*(std::find(keys.begin(), keys.end(), "chrf") + 1) == "chrf_p_vs_base");
  CHECK(ratio.columns[static_cast<size_t>(bleu_at - keys.begin()) + 1].title == "BLEU p vs 0.125 (1:7)");

  const std::string md = table_markdown(ratio);
  CHECK(md.find("| 0.125 (1:7) (base) | 2 completed |") != std::string::npos);
  CHECK(md.find("**31.00 \u00b1 1.41** (n=2)") != std::string::npos);
  CHECK(md.find("28.00 (n=1)") != std::string::npos);
  CHECK(md.find(kMissingText) != std::string::npos);
  CHECK(md.find("nan") == std::string::npos);
}

TEST_CASE("collector: baseline comparison relative to the Transformer", "[results][collector]") {
  const Collected* c = shared_collect();
  const ReportTable& t = find_table(c->report, "baselines");
  REQUIRE(t.rows.size() == 3);
  CHECK(t.rows[0].key == "transformer");
  CHECK(t.rows[1].key == "mamba");
  CHECK(t.rows[2].key == "base");
  CHECK(t.rows[2].base);
  CHECK(find_row(t, "mamba").status == "1 completed, 1 pending");
  CHECK(cell(t, "transformer", "decode_speed_vs_reference_pct").reference);
  CHECK(cell(t, "base", "decode_speed_vs_reference_pct").mean == Approx(110));
  CHECK(cell(t, "base", "train_speed_vs_reference_pct").mean == Approx(-47.5));
  CHECK(cell(t, "base", "memory_vs_reference_pct").mean == Approx(-40));
  CHECK(cell(t, "mamba", "decode_speed_vs_reference_pct").mean == Approx(150));
  CHECK(cell(t, "mamba", "memory_vs_reference_pct").mean == Approx(-60));
  CHECK(cell(t, "base", "bleu").best);
  CHECK(cell(t, "mamba", "peak_memory_mb").best);
  CHECK(cell(t, "transformer", "params").mean == Approx(3e6));
  // Entity consistency is a column since some stores have it; the pure
  // Mamba's stores do not.
  CHECK(cell(t, "base", "entity_consistency").mean == Approx(60));
  CHECK(cell(t, "transformer", "entity_consistency").mean == Approx(50));
  CHECK(cell(t, "base", "entity_consistency").best);
  CHECK(cell(t, "mamba", "entity_consistency").n == 0);
  const std::string md = table_markdown(t);
  CHECK(md.find("Entity consistency (%)") != std::string::npos);
  CHECK(md.find("+110.0%") != std::string::npos);
  CHECK(md.find("\u221240.0%") != std::string::npos);
  CHECK(md.find("+150.0%") != std::string::npos);
  CHECK(md.find("ref.") != std::string::npos);
  CHECK(md.find("3.00M") != std::string::npos);

  // Paired bootstrap against the Transformer of the same seed, on the stores'
  // segment statistics: the base hybrid (a tenth of its translations garbled
  // against half) differs for both seeds, the pure Mamba (one translation
  // more garbled) does not; the Transformer itself has no p. The pure Mamba
  // translated passages of two sentences and the Transformer single ones:
  // their test pairs the Mamba's sentence_segments with the Transformer's
  // segments.
  CHECK(md.find("BLEU p vs Transformer") != std::string::npos);
  // The pure Mamba translated passages: BLEU by sentence is a column, the
  // BLEU of its sentences' translations (the others' stores hold their BLEU
  // over sentences too).
  CHECK(md.find("BLEU by sentence") != std::string::npos);
  Results mamba;
  mamba.garbled_every = 2;
  mamba.garbled = {1};
  const ReferenceStreams refs{test_references()};
  CHECK(cell(t, "mamba", "sentence_bleu").mean == Approx(corpus_bleu(test_translations(mamba), refs).score));
  Results transformer;
  transformer.garbled_every = 2;
  CHECK(cell(t, "transformer", "sentence_bleu").mean == Approx(corpus_bleu(test_translations(transformer), refs).score));
  CHECK(cell(t, "transformer", "sentence_bleu").n == 2);
  // chrF by sentence beside chrF, from the stores' segment statistics (the
  // pure Mamba's sentence_segments, the Transformer's segments).
  CHECK(md.find("chrF by sentence") != std::string::npos);
  CHECK(cell(t, "mamba", "sentence_chrf").mean == Approx(corpus_chrf(test_translations(mamba), refs).score));
  CHECK(cell(t, "transformer", "sentence_chrf").mean ==
        Approx(corpus_chrf(test_translations(transformer), refs).score));
  for (const char* col : {"bleu_p_vs_reference", "chrf_p_vs_reference"}) {
    INFO(col);
    CHECK(cell(t, "base", col).n == 2);
    CHECK(cell(t, "base", col).mean < 0.01);
    CHECK(cell(t, "mamba", col).n == 1);
    CHECK(cell(t, "mamba", col).mean > 0.05);
    CHECK_FALSE(cell(t, "transformer", col).has_value());
    CHECK_FALSE(cell(t, "base", col).best);
  }
  CHECK(t.caption.find("paired bootstrap") != std::string::npos);
}

TEST_CASE("segment statistics: a table and back, same references, paired significance", "[results][collector]") {
  Results better, worse;
  better.garbled_every = 10;
  worse.garbled_every = 2;
  auto stats = [](const Results& r, std::vector<std::string> refs) {
    const std::vector<std::string> hyps = test_translations(r);
    const ReferenceStreams streams{refs};
    return segment_table(bleu_corpus_segment_stats(hyps, streams), chrf_corpus_segment_stats(hyps, streams),
                         ChrfOptions{});
  };
  const core::ResultTable tb = stats(better, test_references()), tw = stats(worse, test_references());
  REQUIRE(tb.rows.size() == 120);
  REQUIRE(tb.columns.size() == 10 + 18);
  const SegmentStats b = segment_stats(tb), w = segment_stats(tw);
  CHECK(b.chrf_char_order == 6);
  CHECK(b.chrf_word_order == 0);
  // Summed back, the statistics give the corpus scores of the texts.
  const ReferenceStreams refs{test_references()};
  CHECK(bleu_from_stats(sum_bleu_stats(b.bleu)).score ==
        Approx(corpus_bleu(test_translations(better), refs).score).epsilon(1e-12));
  CHECK(chrf_from_stats(sum_chrf_stats(w.chrf)).score ==
        Approx(corpus_chrf(test_translations(worse), refs).score).epsilon(1e-12));
  CHECK(b.same_references(w));
  // Other references (one sentence changed): not the same segments.
  std::vector<std::string> changed = test_references();
  changed[7] = "something else entirely .";
  CHECK_FALSE(b.same_references(segment_stats(stats(better, changed))));
  const PairedSignificance s = paired_significance(w, b);
  CHECK(s.bleu_p < 0.01);
  CHECK(s.chrf_p < 0.01);
  CHECK(s.bleu_delta > 10);
  // A table that is not one of segment statistics.
  core::ResultTable bad = tb;
  bad.columns[3] = "bleu_match_9";
  CHECK_THROWS_AS(segment_stats(bad), InputError);
  CHECK_THROWS_AS(segment_table(b.bleu, std::vector<ChrfStats>(3), ChrfOptions{}), InputError);
}

TEST_CASE("paired_segments: passages against single sentences are paired sentence by sentence",
          "[results][collector]") {
  Results better, worse;
  better.garbled_every = 10;
  worse.garbled_every = 2;
  const std::vector<std::string> refs = test_references();
  core::StoreSnapshot sentences, passages, passages_too, other;
  sentences.tables["test/segments"] = segments_table(test_translations(worse), refs);
  passages.tables["test/segments"] = segments_table(in_twos(test_translations(better)), in_twos(refs));
  passages.tables["test/sentence_segments"] = segments_table(test_translations(better), refs);
  passages_too.tables = passages.tables;
  std::vector<std::string> changed = refs;
  changed[7] = "something else entirely .";
  other.tables["test/segments"] = segments_table(test_translations(worse), changed);

  const StoreSegments by_sentences = store_segments(sentences, "test"), by_passages = store_segments(passages, "test");

  // Each store's own segments where they are the same ones.
  std::optional<PairedSegments> same = paired_segments(by_passages, store_segments(passages_too, "test"));
  REQUIRE(same);
  CHECK_FALSE(same->by_sentence);
  CHECK(same->baseline.bleu.size() == 60);
  // Passages against sentences: by sentence, 120 of them, both ways round.
  for (bool swap : {false, true}) {
    INFO("swap " << swap);
    std::optional<PairedSegments> p =
        swap ? paired_segments(by_passages, by_sentences) : paired_segments(by_sentences, by_passages);
    REQUIRE(p);
    CHECK(p->by_sentence);
    CHECK(p->baseline.bleu.size() == 120);
    CHECK(p->system.bleu.size() == 120);
  }
  const PairedSegments worse_better = *paired_segments(by_sentences, by_passages);
  const PairedSignificance s = paired_significance(worse_better.baseline, worse_better.system);
  CHECK(s.bleu_p < 0.01);
  CHECK(s.bleu_delta > 10);
  // Other references, another test set, a store without segments: no pairing.
  CHECK_FALSE(paired_segments(store_segments(other, "test"), by_passages));
  CHECK_FALSE(paired_segments(store_segments(sentences, "valid"), store_segments(passages, "valid")));
  CHECK_FALSE(paired_segments(store_segments(core::StoreSnapshot{}, "test"), by_passages));
  // store_segments: by sentence, the sentence table where there is one, else the own segments.
  CHECK(by_passages.own->bleu.size() == 60);
  CHECK(by_passages.by_sentence->bleu.size() == 120);
  CHECK(by_sentences.by_sentence->bleu.size() == 120);
  CHECK_FALSE(store_segments(core::StoreSnapshot{}, "test").own);
  CHECK_FALSE(store_segments(core::StoreSnapshot{}, "test").by_sentence);
  // A malformed sentence table is named.
  core::StoreSnapshot bad = passages;
  bad.tables["test/sentence_segments"].columns[3] = "bleu_match_9";
  CHECK_THROWS_WITH(store_segments(bad, "test"), Catch::StartsWith("/results/test/sentence_segments: "));

  // Segment COMET scores come with the statistics of the same segments and
  // are tested on the same resamples: each sentence 0.9, a garbled one 0.3.
  auto comet_of = [&refs](const Results& r) {
    const std::vector<std::string> hyps = test_translations(r);
    std::vector<double> v;
    for (size_t i = 0; i < hyps.size(); ++i) v.push_back(hyps[i] == refs[i] ? 0.9 : 0.3);
    return v;
  };
  const std::vector<double> worse_comet = comet_of(worse), better_comet = comet_of(better);
  std::vector<double> passage_comet;
  for (size_t i = 0; i + 1 < better_comet.size(); i += 2) passage_comet.push_back((better_comet[i] + better_comet[i + 1]) / 2);
  sentences.tables["test/comet_segments"] = comet_segment_table(worse_comet);
  passages.tables["test/comet_segments"] = comet_segment_table(passage_comet);
  passages.tables["test/sentence_comet_segments"] = comet_segment_table(better_comet);
  const StoreSegments with_comet = store_segments(passages, "test");
  CHECK(with_comet.own->comet == passage_comet);
  CHECK(with_comet.by_sentence->comet == better_comet);
  CHECK(store_segments(sentences, "test").by_sentence->comet == worse_comet);  // its own segments are sentences
  const PairedSegments comet_pair = *paired_segments(store_segments(sentences, "test"), with_comet);
  const PairedSignificance sc = paired_significance(comet_pair.baseline, comet_pair.system);
  CHECK(sc.comet_p < 0.01);
  CHECK(sc.comet_delta == Approx((108 * 0.9 + 12 * 0.3) / 120 - 0.6));
  CHECK(sc.bleu_p == s.bleu_p);  // the same resamples as without COMET
  // The same scores: p = 1; a side without segment scores: no test (NaN).
  CHECK(paired_significance(comet_pair.system, comet_pair.system).comet_p == 1);
  CHECK(std::isnan(paired_significance(worse_better.baseline, worse_better.system).comet_p));
  // Scores of other segments than the statistics' are left out; a table that
  // is not one of scores is named.
  core::StoreSnapshot miscounted = passages;
  miscounted.tables["test/comet_segments"] = comet_segment_table(better_comet);
  CHECK(store_segments(miscounted, "test").own->comet.empty());
  CHECK(store_segments(miscounted, "test").by_sentence->comet == better_comet);
  core::StoreSnapshot not_scores = passages;
  not_scores.tables["test/comet_segments"].columns = {"score"};
  CHECK_THROWS_WITH(store_segments(not_scores, "test"),
                    Catch::StartsWith("/results/test/comet_segments: not a table of segment COMET scores"));
}

TEST_CASE("collector: length, contrastive and entity breakdowns", "[results][collector]") {
  const Collected* c = shared_collect();
  const ReportTable& len = find_table(c->report, "length_bleu");
  REQUIRE(len.columns.size() == 3);
  CHECK(len.columns[0].key == "1-16");
  CHECK(len.columns[2].key == "33+");
  // base: 33+ has a value for seed 1 only (seed 2's table lacks the row).
  CHECK(cell(len, "base", "1-16").mean == Approx(36));
  CHECK(cell(len, "base", "33+").n == 1);
  CHECK(cell(len, "base", "33+").mean == Approx(20));
  CHECK(cell(len, "transformer", "33+").mean == Approx(18));
  CHECK(cell(len, "base", "1-16").best);
  CHECK(cell(len, "base", "33+").best);
  const ReportTable& pron = find_table(c->report, "contrastive_pronoun");
  CHECK(cell(pron, "base", "er").mean == Approx(85));
  CHECK(cell(pron, "base", "es").n == 0);  // NaN in every store
  const ReportTable& dist = find_table(c->report, "contrastive_distance");
  CHECK(dist.columns.size() == 5);
  CHECK(cell(dist, "transformer", ">3").mean == Approx(50));
  const ReportTable& ent = find_table(c->report, "entities_frequency");
  CHECK(cell(ent, "mamba", "unseen").mean == Approx(30));
  // Entity consistency: the base hybrid's and the Transformer's stores have it
  // (both seeds), the pure Mamba's are from before it.
  const ReportTable& cons = find_table(c->report, "entities_consistency");
  CHECK(cell(cons, "base", "unseen").mean == Approx(40));
  CHECK(cell(cons, "base", "unseen").n == 2);
  CHECK(cell(cons, "transformer", "16+").mean == Approx(60));
  CHECK(cell(cons, "mamba", "unseen").n == 0);
  CHECK(find_table(c->report, "extrapolation_bleu").columns.size() == 3);
}

TEST_CASE("collector: report.md shows status, failures and links", "[results][collector]") {
  const Collected* c = shared_collect();
  const std::string md = slurp(c->out / "report.md");
  CHECK(md.find("# Sweep `abl`") == 0);
  CHECK(md.find("| 7 | 1 | 1 | 0 | 1 | 1 | 1 | 12 |") != std::string::npos);
  CHECK(md.find("**Partial results:**") != std::string::npos);
  CHECK(md.find("CUDA out of memory at step 7") != std::string::npos);
  CHECK(md.find("no store yet") != std::string::npos);
  CHECK(md.find("step 50 of 100") != std::string::npos);
  CHECK(md.find("Unreadable files") != std::string::npos);
  CHECK(md.find("](plots/quality_vs_speed.svg)") != std::string::npos);
  CHECK(md.find("](tables/baselines.csv)") != std::string::npos);
  // Sections in order: status, baselines, ablations, length, document-level, plots, points.
  size_t a = md.find("## Baseline comparison"), b = md.find("## Ablations"), l = md.find("## Length sensitivity"),
         d = md.find("## Document-level"), p = md.find("## Plots"), q = md.find("## Points not completed");
  CHECK(a < b);
  CHECK(b < l);
  CHECK(l < d);
  CHECK(d < p);
  CHECK(p < q);
  CHECK(q != std::string::npos);
}

TEST_CASE("collector: CSV reads back with the same numbers", "[results][collector]") {
  const Collected* c = shared_collect();
  auto rows = parse_csv(slurp(c->out / "tables" / "baselines.csv"));
  REQUIRE(rows.size() == 4);
  const auto& header = rows[0];
  auto col = [&](const std::string& name) {
    auto it = std::find(header.begin(), header.end(), name);
    REQUIRE(it != header.end());
    return static_cast<size_t>(it - header.begin());
  };
  for (auto& r : rows) REQUIRE(r.size() == header.size());
  CHECK(header[0] == "model");
  CHECK(rows[3][col("model")] == "base");
  CHECK(std::stod(rows[3][col("bleu")]) == Approx(31));
  CHECK(std::stod(rows[3][col("bleu_std")]) == Approx(std::sqrt(2.0)));
  CHECK(rows[3][col("bleu_n")] == "2");
  CHECK(rows[3][col("bleu_best")] == "true");
  CHECK(std::stod(rows[3][col("decode_speed_vs_reference_pct")]) == Approx(110));
  CHECK(rows[2][col("status")] == "1 completed, 1 pending");
  CHECK(rows[2][col("bleu_std")] == "");  // one seed: no std, an empty field (NaN in pandas)

  auto points = parse_csv(slurp(c->out / "tables" / "points.csv"));
  REQUIRE(points.size() == 13);
  int failed = 0, missing = 0;
  for (auto& r : points) {
    failed += r[4] == "failed";
    missing += r[4] == "missing";
  }
  CHECK(failed == 1);
  CHECK(missing == 1);
}

TEST_CASE("collector: JSON reads back", "[results][collector]") {
  const Collected* c = shared_collect();
  const auto rec = read_json_file((c->out / "tables" / "ablation_model.attention_ratio.json").string());
  REQUIRE(rec.is_array());
  REQUIRE(rec.size() == 2);
  CHECK(rec[1].at("model.attention_ratio").get<std::string>() == "0.125");
  CHECK(rec[1].at("bleu").get<double>() == Approx(31));
  CHECK(rec[1].at("bleu_n").get<std::int64_t>() == 2);
  CHECK(rec[1].at("bleu_best").get<bool>());
  CHECK(rec[std::size_t{0}].at("entity_recall").is_null());
  CHECK(rec[std::size_t{0}].at("status").get<std::string>() == "1 completed, 1 running");

  const auto s = read_json_file((c->out / "summary.json").string());
  CHECK(s.at("counts").at("failed").get<std::int64_t>() == 1);
  CHECK(s.at("counts").at("unreadable").get<std::int64_t>() == 1);
  CHECK(s.at("points").size() == 12);
  CHECK(s.at("tables").at("baselines").at("rows")[2].at("memory_vs_reference_pct").get<double>() == Approx(-40));
  CHECK(s.at("axes")[std::size_t{0}].at("key").get<std::string>() == "model.attention_ratio");
}

TEST_CASE("collector: summary.h5 holds the aggregated numbers", "[results][collector]") {
  const Collected* c = shared_collect();
  h5::File f = h5::File::open((c->out / "summary.h5").string());
  h5::Group root = f.root();
  CHECK(root.attr_string("format") == "mambamt-summary");
  CHECK(root.attr_int("partial") == 1);
  CHECK(root.group("status").attr_int("missing") == 1);
  CHECK(root.group("points").dataset("state").read_strings().size() == 12);
  CHECK(root.group("points").dataset("axis_values").shape() == std::vector<uint64_t>{12, 2});
  h5::Group t = root.group("tables").group("ablation_model.attention_ratio");
  std::vector<std::string> cols = t.attr_strings("columns");
  std::vector<std::string> rows = t.attr_strings("rows");
  REQUIRE(rows == std::vector<std::string>{"0.25", "0.125"});
  const size_t bleu = static_cast<size_t>(std::find(cols.begin(), cols.end(), "bleu") - cols.begin());
  REQUIRE(bleu < cols.size());
  auto mean = t.dataset("mean").read_doubles();
  auto sd = t.dataset("std").read_doubles();
  auto n = t.dataset("n").read_ints();
  auto best = t.dataset("best").read_ints();
  CHECK(mean[cols.size() + bleu] == Approx(31));
  CHECK(sd[cols.size() + bleu] == Approx(std::sqrt(2.0)));
  CHECK(std::isnan(sd[bleu]));
  CHECK(n[cols.size() + bleu] == 2);
  CHECK(best[cols.size() + bleu] == 1);
  CHECK(t.dataset("row_status").read_strings()[0] == "1 completed, 1 running");
  // The plotted curves: validation loss of the base, both seeds (step 100: 3.0 and 3.2).
  h5::Dataset vl = root.group("curves").group("valid_loss").dataset("hybrid");
  auto v = vl.read_doubles();
  REQUIRE(vl.shape() == std::vector<uint64_t>{10, 4});
  CHECK(v[9 * 4 + 0] == 100);
  CHECK(v[9 * 4 + 1] == Approx(3.1));
  CHECK(v[9 * 4 + 3] == 2);
  CHECK(root.group("curves").group("memory_by_length").has_dataset("transformer_train_memory_mb"));
}

TEST_CASE("collector: LaTeX uses booktabs and is balanced", "[results][collector]") {
  const Collected* c = shared_collect();
  const std::string tex = slurp(c->out / "tables.tex");
  CHECK(tex.find("\\usepackage{booktabs}") != std::string::npos);
  CHECK(count_of(tex, "\\begin{tabular}") == c->report.tables.size());
  CHECK(count_of(tex, "\\toprule") == c->report.tables.size());
  CHECK(count_of(tex, "\\midrule") == c->report.tables.size());
  CHECK(count_of(tex, "\\bottomrule") == c->report.tables.size());
  int depth = 0, lowest = 0;
  for (size_t i = 0; i < tex.size(); ++i) {
    if (tex[i] == '\\') {
      ++i;  // escaped character
      continue;
    }
    if (tex[i] == '{') ++depth;
    if (tex[i] == '}') lowest = std::min(lowest, --depth);
  }
  CHECK(lowest == 0);
  CHECK(depth == 0);
  CHECK(tex.find("\u00b1") == std::string::npos);  // $\pm$ instead
  CHECK(tex.find("\u2013") == std::string::npos);  // -- instead
  CHECK(tex.find("model.d\\_state") != std::string::npos);
  CHECK(tex.find("\\textbf{31.00 $\\pm$ 1.41}") != std::string::npos);
  CHECK(tex.find("$-$40.0\\%") != std::string::npos);
  // Every row has as many cells as the header.
  std::istringstream lines(tex);
  std::string line;
  size_t columns = 0;
  while (std::getline(lines, line)) {
    if (line.rfind("\\begin{tabular}{", 0) == 0) columns = line.size() - std::string("\\begin{tabular}{}").size();
    if (line.size() > 3 && line.substr(line.size() - 3) == " \\\\") {
      size_t amps = 0;
      for (size_t i = 0; i < line.size(); ++i)
        if (line[i] == '&' && (i == 0 || line[i - 1] != '\\')) ++amps;
      CHECK(amps + 1 == columns);
    }
  }
  // scripts/setup.sh installs pdflatex and booktabs (texlive-latex-recommended).
  REQUIRE(std::system("command -v pdflatex >/dev/null 2>&1") == 0);
  TempDir build;  // pdflatex's aux files stay out of the shared output
  fs::copy_file(c->out / "tables.tex", build.path() / "tables.tex");
  const std::string cmd = "cd '" + build.path().string() +
                          "' && pdflatex -interaction=nonstopmode -halt-on-error tables.tex >/dev/null 2>&1";
  CHECK(std::system(cmd.c_str()) == 0);
  CHECK(fs::exists(build.path() / "tables.pdf"));
}

TEST_CASE("collector: every plot renders to a PNG that is not blank", "[results][collector]") {
  const Collected* c = shared_collect();
  std::vector<fs::path> svgs;
  for (auto& e : fs::directory_iterator(c->out / "plots"))
    if (e.path().extension() == ".svg") svgs.push_back(e.path());
  std::sort(svgs.begin(), svgs.end());
  std::vector<std::string> names;
  for (auto& p : svgs) names.push_back(p.filename().string());
  CHECK(names == std::vector<std::string>{"ablation_model.attention_ratio.svg", "ablation_model.d_state.svg",
                                          "memory_by_length.svg", "quality_by_length.svg", "quality_vs_speed.svg",
                                          "valid_loss.svg", "valid_loss_model.attention_ratio.svg",
                                          "valid_loss_model.d_state.svg"});
  const std::string scatter = slurp(c->out / "plots" / "quality_vs_speed.svg");
  CHECK(scatter.find("pareto") != std::string::npos);
  const std::string vl = slurp(c->out / "plots" / "valid_loss.svg");
  CHECK(vl.find("(partial)") != std::string::npos);  // mamba: one seed still pending
  REQUIRE(have_rsvg_convert());  // librsvg2-bin, installed by scripts/setup.sh
  TempDir pngs;
  for (auto& svg : svgs) {
    INFO(svg.filename().string());
    const std::string text = slurp(svg);
    REQUIRE(xml_problem(text) == "");
    const fs::path png = pngs.path() / fs::path(svg).filename().replace_extension(".png");
    REQUIRE(render_png(svg.string(), png.string()) == 0);
    const PngHeader h = read_png_header(png.string());
    REQUIRE(h.valid);
    CHECK(h.width >= 400);
    CHECK(h.height >= 300);
    if (auto img = decode_png(png.string())) {
      const double drawn = double(img->count_non_white()) / (double(img->width) * img->height);
      CHECK(drawn > 0.01);
      CHECK(drawn < 0.95);
    }
  }
  if (const char* keep = std::getenv("MAMBAMT_COLLECTOR_KEEP")) {
    fs::create_directories(fs::path(keep) / "plots");
    for (auto& e : fs::directory_iterator(pngs.path()))
      fs::copy_file(e.path(), fs::path(keep) / "plots" / e.path().filename(), fs::copy_options::overwrite_existing);
  }
}

TEST_CASE("collector: attention and occlusion heatmaps of each model, side by side in report.md",
          "[results][collector]") {
  const Collected* c = shared_collect();
  const std::string md = slurp(c->out / "report.md");
  const size_t at = md.find("## Where the models look in the source");
  REQUIRE(at != std::string::npos);
  CHECK(md.find("## Plots") < at);
  CHECK(at < md.find("## Points not completed"));
  // The base hybrid: three sentences with both maps; mamba: two, occlusion only;
  // the transformer stored none.
  CHECK(count_of(md, "](plots/explain/base_") == 6);
  CHECK(count_of(md, "](plots/explain/mamba_") == 2);
  CHECK(count_of(md, "plots/explain/transformer") == 0);
  CHECK(md.find("![attention](plots/explain/base_1_attention.svg) | ![occlusion](plots/explain/base_1_occlusion.svg)") !=
        std::string::npos);
  CHECK(md.find("_no attention over the source_ | ![occlusion](plots/explain/mamba_2_occlusion.svg)") !=
        std::string::npos);
  CHECK(md.find("Sentence 1: `Ta ul pa ul <&>` \u2192 `Zorek ul`") != std::string::npos);
  std::vector<fs::path> svgs;
  for (auto& e : fs::directory_iterator(c->out / "plots" / "explain")) svgs.push_back(e.path());
  std::sort(svgs.begin(), svgs.end());
  std::vector<std::string> names;
  for (auto& p : svgs) names.push_back(p.filename().string());
  CHECK(names == std::vector<std::string>{"base_1_attention.svg", "base_1_occlusion.svg", "base_2_attention.svg",
                                          "base_2_occlusion.svg", "base_3_attention.svg", "base_3_occlusion.svg",
                                          "mamba_1_occlusion.svg", "mamba_2_occlusion.svg"});
  for (auto& f : names) CHECK(std::count(c->report.files.begin(), c->report.files.end(),
                                         (c->out / "plots" / "explain" / f).string()) == 1);
  const std::string occ = slurp(c->out / "plots" / "explain" / "base_1_occlusion.svg");
  CHECK(count_of(occ, "class=\"cell\"") == 24);
  CHECK(occ.find(">\u2581&lt;&amp;&gt;<") != std::string::npos);
  CHECK(occ.find("hybrid (base): occlusion importance") != std::string::npos);
  REQUIRE(have_rsvg_convert());
  TempDir pngs;
  for (auto& svg : svgs) {
    INFO(svg.filename().string());
    REQUIRE(xml_problem(slurp(svg)) == "");
    const fs::path png = pngs.path() / fs::path(svg).filename().replace_extension(".png");
    REQUIRE(render_png(svg.string(), png.string()) == 0);
    const PngHeader h = read_png_header(png.string());
    REQUIRE(h.valid);
    CHECK(h.width >= 150);
    CHECK(h.height >= 150);
    if (auto img = decode_png(png.string())) {
      CHECK(img->count_color(svg::viridis(1.0), 20) > 50);  // the diagonal's maxima
      const double drawn = double(img->count_non_white()) / (double(img->width) * img->height);
      CHECK(drawn > 0.05);
    }
  }
}

TEST_CASE("collector: without sweep.h5 the points are what the stores say", "[results][collector]") {
  auto c = run_collect(false, true, {"md"});
  const auto& n = c->report.counts;
  CHECK(n.at("total") == 11);  // 10 readable stores + the unreadable one; the point without a store is unknown
  CHECK(n.at("unreadable") == 1);
  CHECK(n.at("missing") == 0);
  const ReportTable& ratio = find_table(c->report, "ablation_model.attention_ratio");
  CHECK(cell(ratio, "0.125", "bleu").mean == Approx(31));
  CHECK(find_row(ratio, "0.25").status == "1 completed, 1 running");
  const ReportTable& t = find_table(c->report, "baselines");
  CHECK(cell(t, "base", "decode_speed_vs_reference_pct").mean == Approx(110));
  CHECK(slurp(c->out / "report.md").find("no sweep.h5") != std::string::npos);
}

TEST_CASE("collector: without sweep.h5 and sweep.toml the axes come from the configs", "[results][collector]") {
  auto c = run_collect(false, false, {"md"});
  std::vector<std::string> ablations;
  for (auto& t : c->report.tables)
    if (t.name.rfind("ablation_", 0) == 0) ablations.push_back(t.name);
  CHECK(ablations == std::vector<std::string>{"ablation_model.attention_ratio", "ablation_model.d_state"});
  const ReportTable& ratio = find_table(c->report, "ablation_model.attention_ratio");
  // No base known: the other axis is held at its first value (d_state 32).
  CHECK(cell(ratio, "0.125", "bleu").mean == Approx(29));
  const ReportTable& t = find_table(c->report, "baselines");
  CHECK(t.rows[0].key == "transformer");
}

TEST_CASE("collector: bad input", "[results][collector]") {
  CHECK(parse_formats("md, csv,json") == std::vector<std::string>{"md", "csv", "json"});
  CHECK_THROWS_AS(parse_formats("md,xls"), UsageError);
  CHECK_THROWS_WITH(parse_formats("md,xls"), Catch::Contains("xls"));
  TempDir dir;
  std::ostringstream log;
  CollectOptions o;
  o.run_dir = (dir.path() / "nope").string();
  CHECK_THROWS_AS(collect(o, log), InputError);
  o.run_dir = dir.path().string();
  CHECK_THROWS_WITH(collect(o, log), Catch::Contains("not a run directory"));
  // A sweep file that is not one is reported, and the stores are used.
  FakeSweep f = make_sweep(dir.path() / "x", false, true);
  std::ofstream(f.run / "sweep.h5") << "garbage";
  o.run_dir = f.run.string();
  o.out_dir = (dir.path() / "out").string();
  CollectReport r = collect(o, log);
  CHECK(r.out_dir == o.out_dir);
  CHECK(r.counts.at("total") == 11);
  bool named = false;
  for (auto& p : r.problems) named = named || p.find("sweep.h5") != std::string::npos;
  CHECK(named);
}

TEST_CASE("collector: a test set scored on different texts is reported", "[results][collector]") {
  TempDir dir;
  FakeSweep f = make_sweep(dir.path());
  // Every completed store records the test text it was scored on; one of them another text.
  const std::vector<std::string> completed = f.completed_ids();
  REQUIRE(completed.size() == 7);
  auto record = [&](const std::string& id, const std::string& fingerprint) {
    core::ExperimentStore store = core::ExperimentStore::open((f.run / "exp" / id / "store.h5").string());
    store.set_text("data.test.test", fingerprint + " (12 documents, 120 sentences)");
    store.commit();
  };
  for (const std::string& id : completed) record(id, "00000000000000aa");
  std::ostringstream log;
  CollectOptions o;
  o.run_dir = f.run.string();
  o.out_dir = (dir.path() / "same").string();
  CHECK(collect(o, log).problems.size() == 1);  // the unreadable store only
  record(completed[3], "00000000000000bb");
  o.out_dir = (dir.path() / "different").string();
  const CollectReport r = collect(o, log);
  REQUIRE(r.problems.size() == 2);
  const std::string& p = r.problems[1];
  // The experiments of each text, in the sweep's order, three named at most.
  CHECK_THAT(p, Catch::StartsWith((f.run / "exp").string() +
                                  ": test set test was scored on different texts, its scores do not compare: "
                                  "fingerprint 00000000000000aa by 6 experiment(s) ("));
  CHECK_THAT(p, Catch::Contains(", ...); fingerprint 00000000000000bb by 1 experiment(s) (" + completed[3] + ")"));
  CHECK_THAT(core::read_text((dir.path() / "different" / "report.md").string()), Catch::Contains("scored on different texts"));

  // COMET by two models: reported alike; by one model (or none named), not.
  record(completed[3], "00000000000000aa");
  auto comet_by = [&](const std::string& id, const std::string& model) {
    core::ExperimentStore store = core::ExperimentStore::open((f.run / "exp" / id / "store.h5").string());
    store.set_text("comet", "scored by comet-score (" + model + ") on the GPU, segment by segment");
    store.commit();
  };
  for (const std::string& id : completed) comet_by(id, "Unbabel/wmt22-comet-da");
  o.out_dir = (dir.path() / "one_model").string();
  CHECK(collect(o, log).problems.size() == 1);
  comet_by(completed[5], "its default model");
  o.out_dir = (dir.path() / "two_models").string();
  const CollectReport models = collect(o, log);
  REQUIRE(models.problems.size() == 2);
  CHECK_THAT(models.problems[1],
             Catch::StartsWith((f.run / "exp").string() +
                               ": COMET was scored with different models (eval.comet_model pins one), its scores do "
                               "not compare: Unbabel/wmt22-comet-da by 6 experiment(s) (") &&
                 Catch::EndsWith(", ...); its default model by 1 experiment(s) (" + completed[5] + ")"));
  // A model path holding ")" is named whole.
  comet_by(completed[5], "/models/comet (wmt22)/checkpoints/model.ckpt");
  o.out_dir = (dir.path() / "model_path").string();
  const CollectReport path = collect(o, log);
  REQUIRE(path.problems.size() == 2);
  CHECK_THAT(path.problems[1], Catch::Contains("not compare: /models/comet (wmt22)/checkpoints/model.ckpt by 1 "
                                               "experiment(s) (" + completed[5] + "); Unbabel/wmt22-comet-da by 6"));
}

TEST_CASE("collector: TER is a column and report.md prints the metrics' signatures", "[results][collector]") {
  TempDir dir;
  FakeSweep f = make_sweep(dir.path());
  const std::vector<std::string> completed = f.completed_ids();
  REQUIRE(completed.size() == 7);
  const std::string bleu = "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:mambamt-1.0/sacrebleu-2.6";
  const std::string ter = "nrefs:1|case:lc|tok:tercom|norm:no|punct:yes|asian:no|version:mambamt-1.0/sacrebleu-2.6";
  auto sign = [&](const std::string& id, const std::string& bleu_signature) {
    core::ExperimentStore store = core::ExperimentStore::open((f.run / "exp" / id / "store.h5").string());
    store.set_scalar("test/ter", 50);
    store.set_text("signature.test.bleu", bleu_signature);
    store.set_text("signature.test.ter", ter);
    store.commit();
  };
  CollectOptions o;
  o.run_dir = f.run.string();
  o.formats = {"md", "csv"};
  std::ostringstream log;
  // Stores without them (evaluated before version 7): no TER column, no signatures.
  o.out_dir = (dir.path() / "none").string();
  collect(o, log);
  CHECK(slurp(dir.path() / "none" / "report.md").find("## Signatures") == std::string::npos);
  CHECK(slurp(dir.path() / "none" / "tables" / "baselines.csv").find("TER") == std::string::npos);

  for (const std::string& id : completed) sign(id, bleu);
  sign(completed[2], "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:mambamt-0.9/sacrebleu-2.6");
  o.out_dir = (dir.path() / "signed").string();
  const CollectReport r = collect(o, log);
  const std::string md = slurp(dir.path() / "signed" / "report.md");
  // Under the tables, before the plots; a signature that differs is counted.
  const size_t at = md.find("## Signatures\n\nThe scores of test set `test`");
  REQUIRE(at != std::string::npos);
  CHECK(at > md.find("## Document-level"));
  CHECK(at < md.find("## Plots"));
  CHECK_THAT(md, Catch::Contains("- BLEU: `nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:mambamt-0.9/sacrebleu-2.6` "
                                 "(1 experiment); `" + bleu + "` (6 experiments)\n"));
  CHECK_THAT(md, Catch::Contains("- TER: `" + ter + "`\n"));
  CHECK(md.find("- chrF:") == std::string::npos);  // no store has one
  // TER is a column of the baseline table, lower is better.
  const ReportTable& t = find_table(r, "baselines");
  bool has_ter = false;
  for (const auto& c : t.columns) has_ter = has_ter || c.key == "ter";
  CHECK(has_ter);
  CHECK(cell(t, "base", "ter").mean == Approx(50));
}

TEST_CASE("collector: the attention axes are labelled by the attention layers as built", "[results][collector]") {
  TempDir dir;
  FakeSweep f = make_sweep(dir.path());
  auto built = [&](const std::string& ratio, int64_t seed, const std::string& attention) {
    core::ExperimentStore store = core::ExperimentStore::open(f.store_of("", {ratio, "64"}, seed));
    store.set_text("model.attention", attention);
    store.commit();
  };
  // 1:7 of 12 layers builds 2 (1:5); 1:3 builds 3 of 12, as asked.
  built("0.125", 1, "2/12 (1:5)");
  built("0.125", 2, "2/12 (1:5)");
  built("0.25", 1, "3/12 (1:3)");
  CollectOptions o;
  o.run_dir = f.run.string();
  o.out_dir = (dir.path() / "out").string();
  o.formats = {"md", "csv"};
  std::ostringstream log;
  const CollectReport r = collect(o, log);
  const ReportTable& ratio = find_table(r, "ablation_model.attention_ratio");
  CHECK(find_row(ratio, "0.125").label == "0.125 (1:7) \u2192 2/12 (1:5)");
  CHECK(find_row(ratio, "0.25").label == "0.25 (1:3) \u2192 3/12 (1:3)");
  // The p-values' reference and the other ablations' captions name it too.
  std::string p_title;
  for (const auto& c : ratio.columns)
    if (c.key == "bleu_p_vs_base") p_title = c.title;
  CHECK(p_title == "BLEU p vs 0.125 (1:7) \u2192 2/12 (1:5)");
  CHECK_THAT(find_table(r, "ablation_model.d_state").caption,
             Catch::Contains("with model.attention_ratio = 0.125 (1:7) \u2192 2/12 (1:5)"));
  // Everywhere the collector writes it: report.md, the CSV and the ablation's bar chart.
  const fs::path out = dir.path() / "out";
  CHECK_THAT(slurp(out / "report.md"), Catch::Contains("| 0.125 (1:7) \u2192 2/12 (1:5) (base) |"));
  CHECK_THAT(slurp(out / "tables" / "ablation_model.attention_ratio.csv"),
             Catch::Contains(",0.125 (1:7) \u2192 2/12 (1:5),"));
  bool plotted = false;
  for (const auto& e : fs::directory_iterator(out / "plots")) {
    const std::string svg = slurp(e.path());
    if (svg.find("Ablation: model.attention_ratio") != std::string::npos)
      plotted = svg.find("2/12 (1:5)") != std::string::npos && svg.find("3/12 (1:3)") != std::string::npos;
  }
  CHECK(plotted);
  // Without the stores' text (none started yet, or older stores): the requested ratio alone.
  const ReportTable& before = find_table(shared_collect()->report, "ablation_model.attention_ratio");
  CHECK(find_row(before, "0.125").label == "0.125 (1:7)");
}

TEST_CASE("report tables: summaries, best marks and formats", "[results][collector]") {
  ReportCell s = summarize({1, 2, 3, kNaN});
  CHECK(s.n == 3);
  CHECK(s.mean == Approx(2));
  CHECK(s.std == Approx(1));
  CHECK(summarize({}).n == 0);
  CHECK(std::isnan(summarize({5}).std));

  ReportTable t;
  t.name = "t";
  t.row_title = "x";
  auto column = [](const char* key, const char* title, int decimals, Better better) {
    ReportColumn c;
    c.key = key;
    c.title = title;
    c.decimals = decimals;
    c.better = better;
    return c;
  };
  t.columns = {column("a", "A", 1, Better::kHigher), column("b", "B", 1, Better::kLower),
               column("c", "C, \"q\"", 0, Better::kNone)};
  t.rows.push_back({"1", "one", "2 completed", false, {summarize({1, 3}), summarize({5}), summarize({7})}});
  t.rows.push_back({"2", "two|pipe", "missing", false, {summarize({4}), summarize({kNaN}), summarize({})}});
  mark_best(t);
  CHECK(t.rows[1].cells[0].best);
  CHECK_FALSE(t.rows[0].cells[0].best);
  CHECK_FALSE(t.rows[0].cells[1].best);  // only one row has a value
  CHECK_FALSE(t.rows[0].cells[2].best);  // no direction
  {
    // Every row the same: none is the best; two of three tied at the top: both.
    ReportTable tied = t;
    tied.rows.push_back(tied.rows[1]);
    tied.rows[0].cells[0] = tied.rows[1].cells[0];
    mark_best(tied);
    for (const auto& row : tied.rows) CHECK_FALSE(row.cells[0].best);
    tied.rows[2].cells[0] = summarize({2});
    mark_best(tied);
    CHECK(tied.rows[0].cells[0].best);
    CHECK(tied.rows[1].cells[0].best);
    CHECK_FALSE(tied.rows[2].cells[0].best);
  }
  const std::string md = table_markdown(t);
  CHECK(md.find("two\\|pipe") != std::string::npos);
  CHECK(md.find("**4.0** (n=1)") != std::string::npos);
  auto rows = parse_csv(table_csv(t));
  REQUIRE(rows.size() == 3);
  CHECK(rows[0][0] == "x");
  CHECK(std::find(rows[0].begin(), rows[0].end(), "C, \"q\"") == rows[0].end());  // keys, not titles
  CHECK(rows[2][1] == "two|pipe");
  CHECK(rows[2][4] == "4");
  CHECK(shortest_number(0.1) == "0.1");
  CHECK(shortest_number(31) == "31");
  CHECK(latex_escape("a_b & 5% #1 \u2013 \u00b1") == "a\\_b \\& 5\\% \\#1 -- $\\pm$");
  const nlohmann::ordered_json j = table_records(t);
  CHECK(j[1].at("b").is_null());
  CHECK(j[std::size_t{0}].at("a_std").get<double>() == Approx(std::sqrt(2.0)));
}

TEST_CASE("report tables: the brief Markdown a paper prints", "[results][collector]") {
  auto column = [](const char* key, const char* title, Better better, const char* tests = "") {
    ReportColumn c;
    c.key = key;
    c.title = title;
    c.decimals = key[0] == 'p' ? 3 : 1;
    c.better = better;
    c.tests = tests;
    return c;
  };
  ReportTable t;
  t.row_title = "model";
  t.columns = {column("bleu", "BLEU", Better::kHigher), column("p_bleu", "BLEU p", Better::kNone, "bleu"),
               column("chrf", "chrF", Better::kHigher), column("p_chrf", "chrF p", Better::kNone, "chrf"),
               column("extra", "Extra", Better::kNone)};
  auto p = [](double v) { return summarize({v}); };
  t.rows.push_back({"a", "a", "2 completed", false, {summarize({30, 32}), {}, summarize({50, 52}), {}, p(1)}});
  t.rows.push_back({"b", "b", "2 completed", true, {summarize({20, 22}), p(0.004), summarize({49, 51}), p(0.03), p(2)}});
  t.rows.push_back({"c", "c", "2 completed", false, {summarize({30.5, 30.5}), p(0.2), summarize({40, 40}), p(0.009), p(3)}});
  mark_best(t);
  const std::string md = table_markdown_brief(t, {"bleu", "chrf"});
  // Only the chosen columns; no status column where every row is completed alike.
  CHECK_THAT(md, Catch::StartsWith("| model | BLEU | chrF |\n|---|---:|---:|\n"));
  CHECK(md.find("Extra") == std::string::npos);
  CHECK(md.find("p |") == std::string::npos);
  // Marks from the p-values (p < 0.01: double dagger, p < 0.05: dagger), seeds once.
  CHECK_THAT(md, Catch::Contains("| b (base) | 21.0 \u00b1 1.4\u2021 | 50.0 \u00b1 1.4\u2020 |"));
  CHECK_THAT(md, Catch::Contains("| c | 30.5 \u00b1 0.0 | 40.0 \u00b1 0.0\u2021 |"));
  CHECK_THAT(md, Catch::Contains("| a | **31.0 \u00b1 1.4** | **51.0 \u00b1 1.4** |"));
  CHECK(md.find("(n=") == std::string::npos);
  CHECK_THAT(md, Catch::EndsWith("\n2 seeds per cell; \u2020 p < 0.05, \u2021 p < 0.01 in the caption's paired test "
                                 "(the largest p over the seeds).\n"));
  // A row completed otherwise brings the status column; seeds that differ, the (n=k).
  t.rows[2].status = "1 completed, 1 failed";
  t.rows[2].cells[0] = summarize({31});
  const std::string mixed = table_markdown_brief(t, {"bleu", "chrf"});
  CHECK_THAT(mixed, Catch::StartsWith("| model | status | BLEU | chrF |\n|---|---|---:|---:|\n"));
  CHECK_THAT(mixed, Catch::Contains("| c | 1 completed, 1 failed | 31.0 (n=1) | 40.0 \u00b1 0.0\u2021 (n=2) |"));
  CHECK_THAT(mixed, Catch::EndsWith("\n\u2020 p < 0.05, \u2021 p < 0.01 in the caption's paired test (the largest p "
                                    "over the seeds).\n"));
}

TEST_CASE("collector: the device a store's speed and memory were measured on", "[results][collector]") {
  core::StoreSnapshot cpu, gpu, unknown;
  cpu.system = {{"device", "cpu"}, {"cpu", "AMD EPYC 7B13 64-Core Processor"}};
  CHECK(detail::device_label(cpu) == "AMD EPYC 7B13");
  cpu.system["cpu"] = "Intel(R) Xeon(R) Platinum 8480C CPU @ 2.00GHz";
  CHECK(detail::device_label(cpu) == "Intel Xeon Platinum 8480C");
  gpu.system = {{"device", "cuda:0"}, {"cpu", "AMD EPYC 7B13 64-Core Processor"}, {"gpu", "NVIDIA H100 80GB HBM3"}};
  CHECK(detail::device_label(gpu) == "NVIDIA H100 80GB HBM3");
  gpu.system.erase("gpu");  // a store from before the GPU's name was recorded
  CHECK(detail::device_label(gpu) == "GPU");
  CHECK(detail::device_label(unknown).empty());
}

TEST_CASE("collector: report.md's baseline and ablation tables are at most 10 columns, their devices named",
          "[results][collector]") {
  const Collected* c = shared_collect();
  const std::string md = slurp(c->out / "report.md");
  // Every table row of the baseline and ablation sections.
  const size_t begin = md.find("## Baseline comparison"), end = md.find("## Length sensitivity");
  REQUIRE(begin != std::string::npos);
  REQUIRE(end != std::string::npos);
  std::istringstream in(md.substr(begin, end - begin));
  int tables = 0;
  bool in_table = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("|", 0) != 0) {
      in_table = false;
      continue;
    }
    if (!in_table) ++tables;
    in_table = true;
    INFO(line);
    // A cell's "\|" escapes a pipe.
    const auto pipes = std::count(line.begin(), line.end(), '|') -
                       static_cast<long>(line.size() < 2 ? 0 : [&] {
                         long n = 0;
                         for (size_t i = 1; i < line.size(); ++i) n += line[i] == '|' && line[i - 1] == '\\';
                         return n;
                       }());
    CHECK(pipes - 1 <= 10);
  }
  CHECK(tables >= 3);  // the baselines and two ablations
  // The full tables keep every column.
  const std::string full = slurp(c->out / "tables.md");
  CHECK(full.find("BLEU p vs Transformer") != std::string::npos);
  CHECK(md.find("BLEU p vs Transformer") == std::string::npos);
}

TEST_CASE("collector: without a Transformer the baseline table has no columns relative to one",
          "[results][collector]") {
  TempDir dir;
  const fs::path run = dir.path() / "runs" / "solo";
  fs::create_directories(run);
  std::ofstream(run / "sweep.toml") << "[sweep]\nname = \"solo\"\n[grid]\nmodel.d_state = [32, 64]\n";
  write_sweep_file(run / "sweep.h5", "full",
                   {{"d1", "model.d_state=32", "", 1, {"32"}}, {"d2", "model.d_state=64", "", 1, {"64"}}},
                   {"model.d_state"}, {"64"});
  CollectOptions o;
  o.run_dir = run.string();
  std::ostringstream log;
  const CollectReport r = collect(o, log);
  const ReportTable& base = find_table(r, "baselines");
  CHECK_THAT(base.caption, Catch::StartsWith("No Transformer variant in this sweep"));
  REQUIRE_FALSE(base.columns.empty());
  for (const ReportColumn& c : base.columns) {
    INFO(c.key);
    CHECK(c.key.find("reference") == std::string::npos);
  }
  CHECK(std::any_of(base.columns.begin(), base.columns.end(), [](const ReportColumn& c) { return c.key == "bleu"; }));
}

TEST_CASE("collector: a one-factor sweep that has only started", "[results][collector]") {
  // sweep.toml and sweep.h5, no store yet: d_state's base value 64 is not among its grid
  // values, and one-factor points hold it there, so the attention table uses 64.
  TempDir dir;
  const fs::path run = dir.path() / "runs" / "ofat";
  fs::create_directories(run);
  std::ofstream(run / "sweep.toml") << "[sweep]\nname = \"ofat\"\ndesign = \"one_factor\"\n[grid]\n"
                                       "model.attention_ratio = [0.25, 0.125]\nmodel.d_state = [32, 128]\n"
                                       "[[variant]]\nname = \"transformer\"\nmodel.kind = \"transformer\"\n";
  write_sweep_file(run / "sweep.h5", "one_factor",
                   {{"a1", "model.attention_ratio=0.25", "", 1, {"0.25", "64"}},
                    {"a2", "model.attention_ratio=0.125", "", 1, {"0.125", "64"}},
                    {"d1", "model.d_state=32", "", 1, {"0.125", "32"}},
                    {"d2", "model.d_state=128", "", 1, {"0.125", "128"}},
                    {"t1", "transformer", "transformer", 1, {"0.125", "64"}}},
                   {"model.attention_ratio", "model.d_state"}, {"0.125", "64"});
  CollectOptions o;
  o.run_dir = run.string() + "/";
  o.formats = {"md", "csv", "tex", "json"};
  std::ostringstream log;
  CollectReport r = collect(o, log);
  CHECK(fs::path(r.out_dir) == dir.path() / "results" / "ofat");
  CHECK(r.counts.at("missing") == 5);
  CHECK(r.counts.at("completed") == 0);
  const ReportTable& ratio = find_table(r, "ablation_model.attention_ratio");
  REQUIRE(ratio.rows.size() == 2);
  CHECK(ratio.rows[0].status == "1 missing");
  CHECK(ratio.rows[1].status == "1 missing");
  // Grid order; d_state's base value goes in numeric order between the grid's values.
  CHECK(ratio.rows[0].key == "0.25");
  CHECK(ratio.rows[1].base);
  CHECK(ratio.caption.find("model.d_state = 64") != std::string::npos);
  const ReportTable& ds = find_table(r, "ablation_model.d_state");
  // The base value is a row too: the one-factor points hold every other axis there.
  REQUIRE(ds.rows.size() == 3);
  CHECK(ds.rows[0].status == "1 missing");
  CHECK(ds.rows[1].key == "64");
  CHECK(ds.rows[1].base);
  CHECK(ds.rows[2].key == "128");
  for (auto& row : ds.rows)
    for (auto& c : row.cells) CHECK_FALSE(c.has_value());
  const ReportTable& base = find_table(r, "baselines");
  REQUIRE(base.rows.size() == 2);
  CHECK(base.rows[0].key == "transformer");
  CHECK(base.rows[1].key == "base");
  const std::string md = slurp(fs::path(r.out_dir) / "report.md");
  CHECK(md.find("| 0 | 0 | 0 | 0 | 0 | 5 | 0 | 5 |") != std::string::npos);
  CHECK(md.find("No completed store has the results behind `length_bleu` yet") != std::string::npos);
  CHECK(fs::exists(fs::path(r.out_dir) / "plots" / "quality_vs_speed.svg"));
  auto rows = parse_csv(slurp(fs::path(r.out_dir) / "tables" / "ablation_model.d_state.csv"));
  REQUIRE(rows.size() == 4);
  CHECK(rows[1][4] == "");  // bleu: no value
}

TEST_CASE("collector: document-level models against their sentence-level twins", "[results][collector]") {
  // A document-level base hybrid and Transformer, each with a sentence-level
  // twin that differs only in document context, and a pure Mamba without one.
  // No sweep.h5: the points are the stores.
  const char* grid_text = R"([sweep]
name = "ctx"
seeds = [1, 2]

[base]
model.d_model = 64
model.n_heads = 4
data.context_sentences = 4
data.multi_resolution = true
train.max_steps = 100

[[variant]]
name = "transformer"
model.kind = "transformer"

[[variant]]
name = "transformer-sent"
model.kind = "transformer"
data.context_sentences = 0
data.multi_resolution = false

[[variant]]
name = "hybrid-sent"
data.context_sentences = 1
data.multi_resolution = false

[[variant]]
name = "mamba"
model.kind = "mamba"
)";
  TempDir dir;
  const fs::path run = dir.path() / "runs" / "ctx";
  fs::create_directories(run / "exp");
  std::ofstream(run / "sweep.toml") << grid_text;
  const core::GridConfig grid = core::parse_grid(grid_text, "sweep.toml");
  auto point_config = [&](const std::string& variant, int64_t seed) {
    std::vector<std::pair<std::string, std::string>> ov;
    for (auto& v : grid.variants)
      if (v.name == variant) ov = v.overrides;
    ov.emplace_back("train.seed", std::to_string(seed));
    return grid.point(ov);
  };
  // contrastive accuracy, BLEU, entity consistency (NaN: not written).
  auto add = [&](const std::string& variant, int64_t seed, double contrastive, double bleu, double consistency) {
    const core::ExperimentConfig c = point_config(variant, seed);
    Point p{c.id(), variant.empty() ? "base" : variant, variant, seed, {}};
    Results r;
    r.bleu = bleu;
    r.chrf = bleu + 20;
    r.contrastive = contrastive;
    r.recall = 0.5;
    r.decode = r.train = r.memory = r.params = 1;
    r.by_length = {bleu, bleu, bleu};  // and contrastive/by_distance: 0.9, 0.8, 0.7, 0.6 and contrastive - 0.3
    r.consistency = consistency;
    write_store(run, p, c, "completed", r);
  };
  add("", 1, 0.8, 30, 0.7);
  add("", 2, 0.9, 32, 0.8);
  add("hybrid-sent", 1, 0.6, 29, 0.5);  // seed 2 has no store
  add("transformer", 1, 0.7, 27, kNaN);
  add("transformer", 2, 0.7, 29, kNaN);
  add("transformer-sent", 1, 0.65, 28, kNaN);
  add("transformer-sent", 2, 0.55, 28, kNaN);
  add("mamba", 1, 0.6, 25, kNaN);
  // Per-example outcomes of 100 contrastive examples (antecedent distance i % 5)
  // for the paired tests: the base hybrid right on 9 in 10 against its twin's 1
  // in 2; the Transformer's twin right on one example fewer than it.
  auto outcomes = [&](const std::string& variant, int64_t seed, const std::function<bool(int)>& right,
                      const std::string& set) {
    core::ExperimentStore store =
        core::ExperimentStore::open((run / "exp" / point_config(variant, seed).id() / "store.h5").string());
    std::vector<std::string> rows;
    std::vector<double> values;
    for (int i = 0; i < 100; ++i) {
      rows.push_back(std::to_string(i));
      values.push_back(right(i) ? 1 : 0);
      values.push_back(i % 5);
    }
    store.set_table("contrastive/examples", table(rows, {"correct", "distance"}, values));
    store.set_text("data.contrastive", set);
    store.commit();
  };
  const std::string set = "00000000000000aa (100 examples)";
  for (int64_t seed : {1, 2}) {
    outcomes("", seed, [](int i) { return i % 10 != 0; }, set);
    outcomes("transformer", seed, [](int i) { return i % 2 == 0; }, set);
    outcomes("transformer-sent", seed, [](int i) { return i % 2 == 0 && i != 2; }, set);
  }
  outcomes("hybrid-sent", 1, [](int i) { return i % 2 == 0; }, set);
  // Entity consistency per document (40 documents, two repeated entities
  // each, both rendered) for its paired test: the base hybrid consistent on
  // both, its twin on one.
  auto entities = [&](const std::string& variant, int64_t seed, int consistent, const std::string& text) {
    write_entity_counts((run / "exp" / point_config(variant, seed).id() / "store.h5").string(), consistent, text);
  };
  const std::string text = "test 00000000000000cc (40 documents, 160 sentences), the first 160 sentences translated";
  entities("", 1, 2, text);
  entities("", 2, 2, text);
  entities("hybrid-sent", 1, 1, text);
  // Segment statistics: the base hybrid translated passages of two sentences
  // (a tenth of its sentences garbled), its twin single sentences (every other
  // one garbled): BLEU is tested sentence by sentence.
  // COMET too, by sentence.
  auto segments = [&](const std::string& variant, int64_t seed, int garbled_every, bool passages) {
    core::ExperimentStore store =
        core::ExperimentStore::open((run / "exp" / point_config(variant, seed).id() / "store.h5").string());
    Results r;
    r.garbled_every = garbled_every;
    r.passages = passages;
    r.comet_segments = true;
    write_segments(store, r);
    store.commit();
  };
  segments("", 1, 10, true);
  segments("", 2, 10, true);
  segments("hybrid-sent", 1, 2, false);

  CollectOptions o;
  o.run_dir = run.string();
  o.formats = {"md", "csv", "json"};
  std::ostringstream log;
  const CollectReport r = collect(o, log);
  const ReportTable& t = find_table(r, "document_context");
  REQUIRE(t.rows.size() == 2);  // the pure Mamba has no twin
  CHECK(find_row(t, "base").label == "hybrid vs hybrid-sent");  // the base hybrid
  CHECK(find_row(t, "transformer").label == "transformer vs transformer-sent");
  CHECK(find_row(t, "base").base);
  // Contrastive accuracy: the sides over their own seeds, the gain over the
  // seeds both have (seed 1 for the hybrid).
  CHECK(cell(t, "base", "contrastive_accuracy").mean == Approx(85));
  CHECK(cell(t, "base", "contrastive_accuracy_sentence_level").mean == Approx(60));
  CHECK(cell(t, "base", "contrastive_accuracy_sentence_level").n == 1);
  CHECK(cell(t, "base", "contrastive_accuracy_gain_pp").mean == Approx(20));
  CHECK(cell(t, "base", "contrastive_accuracy_gain_pp").n == 1);
  CHECK(cell(t, "transformer", "contrastive_accuracy_gain_pp").mean == Approx(10));
  CHECK(cell(t, "transformer", "contrastive_accuracy_gain_pp").std == Approx(std::sqrt(50.0)));
  CHECK(cell(t, "transformer", "contrastive_accuracy_gain_pp").n == 2);
  CHECK(cell(t, "base", "contrastive_accuracy_gain_pp").best);
  // Antecedents in an earlier sentence: distances 1, 2, 3 and >3 (10 examples
  // each), weighted: (0.8 + 0.7 + 0.6 + contrastive - 0.3) / 4.
  CHECK(cell(t, "base", "earlier_sentence_accuracy").mean == Approx(((1.8 + 0.8) / 4 + (1.8 + 0.9) / 4) / 2 * 100));
  CHECK(cell(t, "base", "earlier_sentence_accuracy_gain_pp").mean == Approx((1.8 + 0.8) / 4 * 100 - 60));
  // Paired tests of contrastive accuracy, seed by seed on the same examples.
  CHECK(cell(t, "base", "contrastive_accuracy_p").mean < 0.01);
  CHECK(cell(t, "base", "contrastive_accuracy_p").n == 1);
  CHECK(cell(t, "base", "earlier_sentence_accuracy_p").mean < 0.01);
  CHECK(cell(t, "transformer", "contrastive_accuracy_p").mean > 0.05);
  CHECK(cell(t, "transformer", "contrastive_accuracy_p").n == 2);
  CHECK(cell(t, "transformer", "earlier_sentence_accuracy_p").mean > 0.05);
  // BLEU by sentence where the stores have it (the hybrids: their
  // test/sentence_bleu, not the test/bleu of 30 and 29), else their own.
  Results tenth, half;
  tenth.garbled_every = 10;
  half.garbled_every = 2;
  const ReferenceStreams refs{test_references()};
  const double tenth_bleu = corpus_bleu(test_translations(tenth), refs).score;
  CHECK(cell(t, "base", "bleu").mean == Approx(tenth_bleu));
  CHECK(cell(t, "base", "bleu_gain").mean == Approx(tenth_bleu - corpus_bleu(test_translations(half), refs).score));
  CHECK(cell(t, "transformer", "bleu_gain").mean == Approx(0));
  CHECK(cell(t, "base", "bleu_p").mean < 0.01);
  CHECK(cell(t, "base", "bleu_p").n == 1);
  CHECK(cell(t, "transformer", "bleu_p").n == 0);  // no segment statistics
  // chrF by sentence, from the stores' segment statistics (not the test/chrf
  // of write_store), its gain not in percentage points.
  const double tenth_chrf = corpus_chrf(test_translations(tenth), refs).score;
  CHECK(cell(t, "base", "chrf").mean == Approx(tenth_chrf));
  CHECK(cell(t, "base", "chrf_sentence_level").mean == Approx(corpus_chrf(test_translations(half), refs).score));
  CHECK(cell(t, "base", "chrf_gain").mean == Approx(tenth_chrf - corpus_chrf(test_translations(half), refs).score));
  CHECK(cell(t, "base", "chrf_gain").mean > 0);
  CHECK(cell(t, "base", "chrf_p").mean < 0.01);
  CHECK(cell(t, "base", "chrf_p").n == 1);
  CHECK(cell(t, "transformer", "chrf_p").n == 0);
  // COMET by sentence (a tenth of the sentences garbled against half), its
  // gain not in percentage points, and its paired test sentence by sentence.
  CHECK(cell(t, "base", "comet").mean == Approx(0.84));
  CHECK(cell(t, "base", "comet_sentence_level").mean == Approx(0.6));
  CHECK(cell(t, "base", "comet_gain").mean == Approx(0.24));
  CHECK(cell(t, "base", "comet_p").mean < 0.01);
  CHECK(cell(t, "base", "comet_p").n == 1);
  CHECK(cell(t, "transformer", "comet_gain").n == 0);
  CHECK(cell(t, "transformer", "comet_p").n == 0);
  CHECK_THAT(t.caption, Catch::Contains("of BLEU, chrF and COMET (the mean of its segment scores, where both have "
                                        "them) sentence by sentence"));
  // The baseline table's COMET by sentence beside COMET (a model translated passages).
  const ReportTable& baselines = find_table(r, "baselines");
  CHECK(cell(baselines, "base", "sentence_comet").mean == Approx(0.84));
  CHECK(cell(baselines, "hybrid-sent", "sentence_comet").mean == Approx(0.6));
  // Entity consistency: a column since the hybrids' stores have it.
  CHECK(cell(t, "base", "entity_consistency_gain_pp").mean == Approx(20));
  CHECK(cell(t, "transformer", "entity_consistency_gain_pp").n == 0);
  CHECK(cell(t, "base", "entity_consistency_p").mean < 0.01);
  CHECK(cell(t, "base", "entity_consistency_p").n == 1);
  CHECK(cell(t, "transformer", "entity_consistency_p").n == 0);

  const std::string md = core::read_text((fs::path(r.out_dir) / "report.md").string());
  const size_t section = md.find("## Document-level phenomena");
  const size_t table = md.find("### Document context against sentence level");
  REQUIRE(section != std::string::npos);
  CHECK(section < table);
  CHECK(table < md.find("### Contrastive accuracy by pronoun"));
  CHECK(fs::exists(fs::path(r.out_dir) / "tables" / "document_context.csv"));

  // Outcomes on another contrastive set are not compared.
  outcomes("hybrid-sent", 1, [](int i) { return i % 2 == 0; }, "00000000000000bb (100 examples)");
  o.out_dir = (dir.path() / "other_set").string();
  const CollectReport other = collect(o, log);
  CHECK(cell(find_table(other, "document_context"), "base", "contrastive_accuracy_p").n == 0);
  CHECK(cell(find_table(other, "document_context"), "transformer", "contrastive_accuracy_p").n == 2);
  CHECK(cell(find_table(other, "document_context"), "base", "entity_consistency_p").n == 1);
  // Entity counts over other sentences are not compared either.
  entities("hybrid-sent", 1, 1, "test 00000000000000cc (40 documents, 160 sentences), the first 80 sentences translated");
  o.out_dir = (dir.path() / "other_sentences").string();
  CHECK(cell(find_table(collect(o, log), "document_context"), "base", "entity_consistency_p").n == 0);

  // chrF by sentence from the segment statistics of a single-sentence model
  // (the Transformer of seed 1, every other sentence garbled), but only in
  // stores evaluated since passages were scored by sentence (version 5): an
  // older store's segments may be passages, and its own chrF (27 + 20) is
  // taken instead. The Transformer's twin has no segment statistics (48).
  for (const int64_t version : {core::kEvaluationVersion, int64_t{4}}) {
    INFO("evaluation version " << version);
    segments("transformer", 1, 2, false);
    core::ExperimentStore store =
        core::ExperimentStore::open((run / "exp" / point_config("transformer", 1).id() / "store.h5").string());
    store.set_scalar("evaluation/version", static_cast<double>(version));
    store.commit();
    o.out_dir = (dir.path() / ("transformer_segments_" + std::to_string(version))).string();
    const ReportTable context = find_table(collect(o, log), "document_context");
    const double seed_1 = version >= 5 ? corpus_chrf(test_translations(half), refs).score : 47;
    CHECK(cell(context, "transformer", "chrf").mean == Approx((seed_1 + 49) / 2));
    CHECK(cell(context, "transformer", "chrf_gain").mean == Approx((seed_1 - 48 + 49 - 48) / 2));
  }

  // Without its sentence-level twin a model has no row; without any, there is no table.
  fs::remove_all(run / "exp" / point_config("hybrid-sent", 1).id());
  o.out_dir = (dir.path() / "one_twin").string();
  const CollectReport r2 = collect(o, log);
  REQUIRE(find_table(r2, "document_context").rows.size() == 1);
  CHECK(find_table(r2, "document_context").rows[0].key == "transformer");
  for (int64_t seed : {1, 2}) fs::remove_all(run / "exp" / point_config("transformer-sent", seed).id());
  o.out_dir = (dir.path() / "no_twin").string();
  for (auto& tab : collect(o, log).tables) CHECK(tab.name != "document_context");
}

TEST_CASE("collector: stores of points a changed grid no longer has stay out of the counts and tables",
          "[results][collector]") {
  TempDir dir;
  FakeSweep f = make_sweep(dir.path());
  // A Transformer of the grid before a change (--allow-grid-change; another
  // max_steps): its store is still there, sweep.h5 no longer lists it.
  const core::GridConfig grid = core::parse_grid(kGrid, "sweep.toml");
  std::vector<std::pair<std::string, std::string>> ov;
  for (auto& v : grid.variants)
    if (v.name == "transformer") ov = v.overrides;
  ov.emplace_back("train.seed", "1");
  ov.emplace_back("train.max_steps", "50");
  const core::ExperimentConfig c = grid.point(ov);
  Results r;
  r.bleu = 99;
  r.chrf = 99;
  write_store(f.run, Point{c.id(), "transformer", "transformer", 1, {"0.125", "64"}}, c, "completed", r);
  {
    // A length bucket no store of the grid has: not a column of the length table.
    core::ExperimentStore store = core::ExperimentStore::open((f.run / "exp" / c.id() / "store.h5").string());
    store.set_table("test/by_length", table({"1-16", "999+"}, {"bleu", "chrf", "n", "mean_src_len"},
                                            {99, 99, 5, 10, 99, 99, 5, 1000}));
    store.commit();
  }
  CollectOptions o;
  o.run_dir = f.run.string();
  std::ostringstream log;
  const CollectReport report = collect(o, log);
  CHECK(report.counts.at("outside_grid") == 1);
  CHECK(report.counts.at("total") == 12);
  CHECK(report.counts.at("completed") == 7);
  // Not pooled as another seed of the Transformer: BLEU 27 and 29 only.
  const ReportTable& t = find_table(report, "baselines");
  CHECK(cell(t, "transformer", "bleu").mean == Approx(28));
  CHECK(cell(t, "transformer", "bleu").n == 2);
  for (const ReportColumn& col : find_table(report, "length_bleu").columns) CHECK(col.key != "999+");
  CHECK(cell(find_table(report, "length_bleu"), "transformer", "1-16").n == 2);
  CHECK_THAT(core::read_text((fs::path(report.out_dir) / "report.md").string()),
             Catch::Contains("**Stores outside the grid:** 1 store(s)"));
  CHECK_THAT(log.str(), Catch::Contains("(and 1 store(s) outside the grid, left out)"));
}

TEST_CASE("collector: stores without a seal are counted, with the command that seals them", "[results][collector]") {
  TempDir dir;
  FakeSweep f = make_sweep(dir.path());
  CollectOptions o;
  o.run_dir = f.run.string();
  const std::string report_md = (f.root / "results" / "abl" / "report.md").string();  // the default place
  std::ostringstream sealed_log;
  CHECK(collect(o, sealed_log).counts.at("unsealed") == 0);
  CHECK(sealed_log.str().find("without a seal") == std::string::npos);
  CHECK(core::read_text(report_md).find("without a seal") == std::string::npos);

  // One store as h5py (or a mambamt from before the seal) writes it.
  const std::string store = f.store_of("transformer", {}, 1);
  const std::string bytes = core::read_text(store);
  std::ofstream(store, std::ios::binary | std::ios::trunc) << bytes.substr(core::h5::kSealBytes);
  REQUIRE_FALSE(core::h5::has_seal(store));
  std::ostringstream log;
  const CollectReport report = collect(o, log);
  CHECK(report.counts.at("unsealed") == 1);
  CHECK(report.counts.at("completed") == 7);  // read as before
  CHECK(cell(find_table(report, "baselines"), "transformer", "bleu").n == 2);
  const std::string advice = "1 store(s) without a seal (written by h5py or an older mambamt), so damage to them is "
                             "not caught: `mambamt store seal " + f.run.string() + "` seals them";
  CHECK_THAT(log.str(), Catch::Contains("collect: " + advice + "\n"));
  CHECK_THAT(core::read_text(report_md), Catch::Contains("**Stores without a seal:** " + advice + "."));
  CHECK(core::h5::File::open((fs::path(report.out_dir) / "summary.h5").string())
            .root()
            .group("status")
            .attr_int("unsealed") == 1);

  // Sealed again, the advice is gone.
  core::h5::reseal(store);
  std::ostringstream after;
  CHECK(collect(o, after).counts.at("unsealed") == 0);
  CHECK(after.str().find("without a seal") == std::string::npos);
}

TEST_CASE("collector: gated cross-attention's gates, and what eval.gate_skip skipped", "[results][collector]") {
  TempDir dir;
  FakeSweep f = make_sweep(dir.path());
  // Gate statistics in the base hybrid's two stores (two gated layers each).
  auto base_store = [&](int64_t seed) {
    for (const Point& p : f.points)
      if (p.variant.empty() && p.axis_values == std::vector<std::string>{"0.125", "64"} && p.seed == seed)
        return (f.run / "exp" / p.id / "store.h5").string();
    FAIL("no base point of seed " << seed);
    return std::string();
  };
  auto write_gates = [&](int64_t seed, std::vector<double> layers, double threshold) {
    // layers: mean, below_0.1, skipped, n of each layer in turn
    core::ExperimentStore store = core::ExperimentStore::open(base_store(seed));
    store.set_table("gates/by_layer", table({"decoder.1.cross", "decoder.3.cross"}, {"mean", "below_0.1", "skipped", "n"},
                                            layers));
    double skipped = 0, n = 0;
    for (size_t r = 0; r < 2; ++r) {
      skipped += layers[r * 4 + 2] * layers[r * 4 + 3];
      n += layers[r * 4 + 3];
    }
    store.set_scalar("gates/skipped", skipped / n);
    store.set_scalar("gates/translations_skipped", skipped / n / 2);
    store.set_scalar("gates/skip_threshold", threshold);
    store.commit();
  };
  CollectOptions o;
  o.run_dir = f.run.string();
  o.out_dir = (dir.path() / "out").string();
  std::ostringstream log;

  // Gates measured, nothing skipped: the gates table, no skipped column elsewhere.
  write_gates(1, {0.4, 0.2, 0, 100, 0.6, 0.1, 0, 300}, 0);
  write_gates(2, {0.5, 0.3, 0, 100, 0.7, 0.1, 0, 100}, 0);
  CollectReport report = collect(o, log);
  const ReportTable* gates = &find_table(report, "cross_attention_gates");
  REQUIRE(gates->rows.size() == 1);  // the only configuration with gated cross-attention
  CHECK(cell(*gates, "base", "mean_gate").mean == Approx((0.55 + 0.6) / 2));  // layers pooled by n, then seeds
  CHECK(cell(*gates, "base", "mean_gate").n == 2);
  CHECK(cell(*gates, "base", "below_0.1").mean == Approx((12.5 + 20) / 2));
  CHECK(cell(*gates, "base", "skipped").mean == 0);
  for (const ReportColumn& c : find_table(report, "baselines").columns) CHECK(c.key != "cross_attention_skipped");
  CHECK(!fs::exists(fs::path(o.out_dir) / "plots" / "quality_vs_skipped.svg"));

  // eval.gate_skip = 0.1 skipped those tokens: a column of the other tables.
  write_gates(1, {0.4, 0.2, 0.2, 100, 0.6, 0.1, 0.1, 300}, 0.1);
  write_gates(2, {0.5, 0.3, 0.3, 100, 0.7, 0.1, 0.1, 100}, 0.1);
  report = collect(o, log);
  gates = &find_table(report, "cross_attention_gates");
  CHECK(cell(*gates, "base", "skipped").mean == Approx((12.5 + 20) / 2));
  CHECK(cell(*gates, "base", "gate_skip").mean == Approx(0.1));
  CHECK(cell(*gates, "base", "translations_skipped").mean == Approx((12.5 + 20) / 4));
  const ReportTable& base = find_table(report, "baselines");
  CHECK(cell(base, "base", "cross_attention_skipped").mean == Approx((12.5 + 20) / 2));
  CHECK(cell(base, "transformer", "cross_attention_skipped").n == 0);
  CHECK(slurp(fs::path(o.out_dir) / "report.md").find("Gated cross-attention") != std::string::npos);
  // BLEU against the share skipped: the gated configuration only, at its mean over the seeds.
  const std::string plot = slurp(fs::path(o.out_dir) / "plots" / "quality_vs_skipped.svg");
  CHECK(xml_problem(plot) == "");
  CHECK(plot.find("BLEU against cross-attention skipped") != std::string::npos);
  CHECK(plot.find("cross-attention skipped (% of target tokens)") != std::string::npos);
  CHECK(plot.find("transformer") == std::string::npos);
  CHECK(slurp(fs::path(o.out_dir) / "report.md").find("](plots/quality_vs_skipped.svg)") != std::string::npos);
}

TEST_CASE("collector: entity consistency tested against the Transformer and against an axis's base value",
          "[results][collector]") {
  TempDir dir;
  FakeSweep f = make_sweep(dir.path());
  CollectOptions o;
  o.run_dir = f.run.string();
  o.out_dir = (dir.path() / "none").string();
  std::ostringstream log;
  // No store keeps the counts: no such columns.
  CollectReport report = collect(o, log);
  for (const ReportColumn& c : find_table(report, "baselines").columns)
    CHECK(c.key != "entity_consistency_p_vs_reference");

  const std::string text = "test 00000000000000cc (40 documents, 160 sentences), the first 160 sentences translated";
  for (int64_t seed : {1, 2}) {
    write_entity_counts(f.store_of("", {"0.125", "64"}, seed), 2, text);  // the base hybrid: always consistent
    write_entity_counts(f.store_of("transformer", {}, seed), 1, text);    // the Transformer: half the time
  }
  write_entity_counts(f.store_of("", {"0.125", "32"}, 1), 2, text, 1);  // d_state 32: one entity less than the base
  o.out_dir = (dir.path() / "counts").string();
  report = collect(o, log);
  const ReportTable& base = find_table(report, "baselines");
  CHECK(cell(base, "base", "entity_consistency_p_vs_reference").mean < 0.01);
  CHECK(cell(base, "base", "entity_consistency_p_vs_reference").n == 2);
  CHECK(cell(base, "transformer", "entity_consistency_p_vs_reference").n == 0);
  CHECK(cell(base, "mamba", "entity_consistency_p_vs_reference").n == 0);  // no counts
  const ReportTable& d_state = find_table(report, "ablation_model.d_state");
  CHECK(cell(d_state, "32", "entity_consistency_p_vs_base").n == 1);
  CHECK(cell(d_state, "32", "entity_consistency_p_vs_base").mean > 0.05);
  CHECK(cell(d_state, "64", "entity_consistency_p_vs_base").n == 0);
  CHECK_THAT(d_state.caption, Catch::Contains("and of entity consistency (documents resampled)"));
  // The p column follows its metric.
  for (const ReportTable* t : {&base, &d_state})
    for (size_t c = 0; c + 1 < t->columns.size(); ++c)
      if (t->columns[c + 1].key.rfind("entity_consistency_p", 0) == 0) CHECK(t->columns[c].key == "entity_consistency");

  // d_state 32 renders no repeated entity: no consistency, so no p-value
  // either (not one against a consistency of 0).
  write_entity_counts(f.store_of("", {"0.125", "32"}, 1), 0, text, 0, 0);
  o.out_dir = (dir.path() / "none_rendered").string();
  report = collect(o, log);
  const ReportTable& none = find_table(report, "ablation_model.d_state");
  CHECK(cell(none, "32", "entity_consistency_p_vs_base").n == 0);
}

TEST_CASE("collector: COMET tested against the Transformer and against an axis's base value", "[results][collector]") {
  TempDir dir;
  FakeSweep f = make_sweep(dir.path());
  CollectOptions o;
  o.run_dir = f.run.string();
  o.out_dir = (dir.path() / "scalars").string();
  std::ostringstream log;
  // COMET scalars without segment scores: a COMET column, no test.
  CollectReport report = collect(o, log);
  for (const ReportColumn& c : find_table(report, "baselines").columns) CHECK(c.key != "comet_p_vs_reference");

  // Segment scores (0.9 a sentence, 0.3 a garbled one) of the sentences each
  // store's statistics hold: the base hybrid garbles a tenth, the Transformer
  // half, attention ratio 0.25 a third.
  auto comet = [&](const std::string& store, int garbled_every) {
    core::ExperimentStore s = core::ExperimentStore::open(store);
    Results r;
    r.garbled_every = garbled_every;
    r.comet_segments = true;
    write_segments(s, r);
    s.commit();
  };
  for (int64_t seed : {1, 2}) {
    comet(f.store_of("", {"0.125", "64"}, seed), 10);
    comet(f.store_of("transformer", {}, seed), 2);
  }
  comet(f.store_of("", {"0.25", "64"}, 1), 3);
  o.out_dir = (dir.path() / "segments").string();
  report = collect(o, log);
  const ReportTable& base = find_table(report, "baselines");
  CHECK(cell(base, "base", "comet").mean == Approx(0.84));
  CHECK(cell(base, "base", "comet_p_vs_reference").mean < 0.01);
  CHECK(cell(base, "base", "comet_p_vs_reference").n == 2);
  CHECK(cell(base, "transformer", "comet_p_vs_reference").n == 0);
  CHECK(cell(base, "mamba", "comet_p_vs_reference").n == 0);  // no segment scores
  CHECK_THAT(base.caption, Catch::Contains("and of COMET (the mean of its segment scores) on the same segments"));
  const ReportTable& ratio = find_table(report, "ablation_model.attention_ratio");
  CHECK(cell(ratio, "0.25", "comet_p_vs_base").mean < 0.01);
  CHECK(cell(ratio, "0.25", "comet_p_vs_base").n == 1);
  CHECK(cell(ratio, "0.125", "comet_p_vs_base").n == 0);
  // The p column follows its metric.
  for (const ReportTable* t : {&base, &ratio})
    for (size_t c = 0; c + 1 < t->columns.size(); ++c)
      if (t->columns[c + 1].key.rfind("comet_p", 0) == 0) CHECK(t->columns[c].key == "comet");
}

TEST_CASE("collector: the alignment error rate, as a column and by layer", "[results][collector]") {
  TempDir dir;
  FakeSweep f = make_sweep(dir.path());
  // by_layer: the aer of each layer, the last row all layers; alignment/aer (the reported layer) here the best.
  auto write_alignment = [&](const std::string& path, const std::vector<std::string>& layers, std::vector<double> aer) {
    core::ExperimentStore store = core::ExperimentStore::open(path);
    store.set_table("alignment/by_layer", table(layers, {"aer", "sentences"}, [&] {
                      std::vector<double> v;
                      for (double a : aer) v.insert(v.end(), {a, 40});
                      return v;
                    }()));
    store.set_scalar("alignment/aer", *std::min_element(aer.begin(), aer.end() - 1));
    store.set_scalar("alignment/aer_all_layers", aer.back());
    store.set_scalar("alignment/occlusion_aer", aer.back() + 0.1);
    store.commit();
  };
  CollectOptions o;
  o.run_dir = f.run.string();
  o.out_dir = (dir.path() / "out").string();
  std::ostringstream log;
  // Stores without alignment results: no column, no table.
  CollectReport report = collect(o, log);
  for (const ReportColumn& c : find_table(report, "baselines").columns) CHECK(c.key != "alignment_aer");
  for (const ReportTable& t : report.tables) CHECK(t.name != "alignment_by_layer");

  const std::vector<std::string> hybrid_layers = {"decoder.1.cross", "decoder.3.cross", "all layers"};
  write_alignment(f.store_of("", {"0.125", "64"}, 1), hybrid_layers, {0.5, 0.3, 0.4});
  write_alignment(f.store_of("", {"0.125", "64"}, 2), hybrid_layers, {0.6, 0.5, 0.5});
  const std::vector<std::string> transformer_layers = {"decoder.0.cross", "decoder.1.cross", "all layers"};
  write_alignment(f.store_of("transformer", {}, 1), transformer_layers, {0.7, 0.6, 0.65});
  write_alignment(f.store_of("transformer", {}, 2), transformer_layers, {0.8, 0.6, 0.7});
  report = collect(o, log);
  const ReportTable& base = find_table(report, "baselines");
  CHECK(cell(base, "base", "alignment_aer").mean == Approx(40));  // (30 + 50) / 2, in percent
  CHECK(cell(base, "base", "alignment_aer").n == 2);
  CHECK(cell(base, "transformer", "alignment_aer").mean == Approx(60));
  CHECK(cell(base, "mamba", "alignment_aer").n == 0);  // no attention over the source
  // Occlusion: every kind that has it (here, the two that wrote it).
  CHECK(cell(base, "base", "occlusion_aer").mean == Approx(55));  // (40 + 50) / 2 + 10
  CHECK(cell(base, "transformer", "occlusion_aer").mean == Approx(77.5));
  // Lower is better.
  CHECK(cell(base, "base", "alignment_aer").best);
  CHECK_FALSE(cell(base, "transformer", "alignment_aer").best);
  // The ablation tables get the column too.
  CHECK(cell(find_table(report, "ablation_model.attention_ratio"), "0.125", "alignment_aer").mean == Approx(40));

  // A store evaluated before version 3 holds the best layer's AER as
  // alignment/aer: left out of the AER cells (not averaged with the held-out
  // choice of the other seed), its occlusion AER, unchanged, still counted.
  {
    core::ExperimentStore store = core::ExperimentStore::open(f.store_of("transformer", {}, 2));
    store.set_scalar("evaluation/version", 2);
    store.commit();
  }
  {
    std::ostringstream older_log;
    const CollectReport older = collect(o, older_log);
    const ReportTable& b = find_table(older, "baselines");
    CHECK(cell(b, "transformer", "alignment_aer").n == 1);
    CHECK(cell(b, "transformer", "alignment_aer").mean == Approx(60));
    CHECK(cell(b, "transformer", "occlusion_aer").n == 2);
    CHECK_THAT(older_log.str(), Catch::Contains("1 completed store(s) evaluated by an older mambamt"));
    CHECK_THAT(slurp(fs::path(o.out_dir) / "report.md"), Catch::Contains("**Evaluated by an older mambamt:** 1"));
  }
  {
    core::ExperimentStore store = core::ExperimentStore::open(f.store_of("transformer", {}, 2));
    store.set_scalar("evaluation/version", static_cast<double>(core::kEvaluationVersion));
    store.commit();
  }

  const ReportTable& layers = find_table(report, "alignment_by_layer");
  std::vector<std::string> keys;
  for (const ReportColumn& c : layers.columns) keys.push_back(c.key);
  CHECK(keys == std::vector<std::string>{"decoder.0.cross", "decoder.1.cross", "decoder.3.cross", "all layers"});
  CHECK(cell(layers, "base", "decoder.3.cross").mean == Approx(40));
  CHECK(cell(layers, "base", "decoder.0.cross").n == 0);
  CHECK(cell(layers, "transformer", "decoder.1.cross").mean == Approx(60));
  CHECK(cell(layers, "transformer", "decoder.0.cross").mean == Approx(75));
  CHECK(cell(layers, "base", "decoder.1.cross").best);  // 55 < 60
  CHECK(slurp(fs::path(o.out_dir) / "report.md").find("Alignment error rate by layer") != std::string::npos);
  // No per-sentence counts yet: no AER p columns.
  for (const ReportColumn& c : base.columns) CHECK(c.key != "alignment_aer_p_vs_reference");

  // Per-sentence counts (evaluation version 4): the paired test of AER, the
  // base hybrid (7-9 of 10 links right) against the Transformer (3-5).
  auto write_sentences = [&](const std::string& path, int64_t hits, int shift = 0) {
    std::vector<std::string> rows;
    std::vector<double> v;
    for (int i = 0; i < 50; ++i) {
      rows.push_back("0:" + std::to_string(i));
      const double h = static_cast<double>(hits + (i + shift) % 3);
      v.insert(v.end(), {10, 10, h, h});
    }
    core::ExperimentStore store = core::ExperimentStore::open(path);
    store.set_table("alignment/sentences", table(rows, {"predicted", "sure", "sure_hits", "possible_hits"}, v));
    store.set_text("data.alignment", "test 0123456789abcdef (5 documents, 50 sentences), gold links fedcba9876543210");
    store.commit();
  };
  for (int64_t seed : {1, 2}) {
    write_sentences(f.store_of("", {"0.125", "64"}, seed), 7);
    write_sentences(f.store_of("transformer", {}, seed), 3);
  }
  // As good as the base on the whole, sentence by sentence other counts.
  write_sentences(f.store_of("", {"0.25", "64"}, 1), 7, 1);
  const CollectReport tested = collect(o, log);
  const ReportTable& tb = find_table(tested, "baselines");
  std::vector<std::string> tb_keys;
  for (const ReportColumn& c : tb.columns) tb_keys.push_back(c.key);
  const auto aer_col = std::find(tb_keys.begin(), tb_keys.end(), "alignment_aer");
  REQUIRE(aer_col != tb_keys.end());
  REQUIRE(aer_col + 1 != tb_keys.end());
  CHECK(*(aer_col + 1) == "alignment_aer_p_vs_reference");  // the p column follows its metric
  CHECK(cell(tb, "base", "alignment_aer_p_vs_reference").n == 2);
  CHECK(cell(tb, "base", "alignment_aer_p_vs_reference").mean < 0.01);
  CHECK(cell(tb, "transformer", "alignment_aer_p_vs_reference").n == 0);
  CHECK(cell(tb, "mamba", "alignment_aer_p_vs_reference").n == 0);
  CHECK_THAT(tb.caption, Catch::Contains("and of AER (sentences resampled) where both were scored on the same ones"));
  const ReportTable& ratio = find_table(tested, "ablation_model.attention_ratio");
  CHECK(cell(ratio, "0.25", "alignment_aer_p_vs_base").n == 1);  // seed 2 has no counts
  CHECK(cell(ratio, "0.25", "alignment_aer_p_vs_base").mean > 0.1);
  CHECK(cell(ratio, "0.125", "alignment_aer_p_vs_base").n == 0);  // the base row itself
}
