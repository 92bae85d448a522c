// Attention and occlusion maps (train/explain.h) and `mambamt explain`:
// occlusion finds the source token a model copies (a model trained here on a
// name-copying task, hybrid and pure Mamba), attention rows sum to 1, the
// heatmaps render, and the command end to end on a tiny trained experiment
// (its files, index.md, the pure-Mamba error for --method attention).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>
#include <random>
#include <set>

#include "core/config.h"
#include "core/error.h"
#include "core/store.h"
#include "models/registry.h"
#include "models/search.h"
#include "data/alignment.h"
#include "data/synthetic.h"
#include "train/experiment.h"
#include "train/explain.h"
#include "train_helpers.h"

using namespace mambamt;
namespace fs = std::filesystem;

namespace {

// The copying task: a source of 3-7 filler words (ids 15..24) with one name
// (ids 5..14) somewhere among them; the target is the name, copied verbatim.
// Like the entities of the synthetic corpus, the name is the one source token
// the output reproduces; the fillers are unrelated to it.
constexpr int32_t kFirstName = 5, kNames = 10, kFirstFiller = 15, kFillers = 10, kVocab = 25;

struct CopyExample {
  std::vector<int32_t> src;
  int32_t name = 0;
  size_t at = 0;  // the name's position in src
};

CopyExample copy_example(std::mt19937& rng) {
  CopyExample e;
  const int n = 3 + static_cast<int>(rng() % 5);
  for (int i = 0; i < n; ++i) e.src.push_back(kFirstFiller + static_cast<int32_t>(rng() % kFillers));
  e.name = kFirstName + static_cast<int32_t>(rng() % kNames);
  e.at = rng() % (e.src.size() + 1);
  e.src.insert(e.src.begin() + static_cast<std::ptrdiff_t>(e.at), e.name);
  return e;
}

// Trains `model` on the copying task with Adam (teacher forcing, batch 32).
void train_copy(models::TranslationModel& model, int steps, uint32_t seed) {
  std::mt19937 rng(seed);
  torch::optim::Adam opt(model.parameters(), torch::optim::AdamOptions(3e-3));
  model.train();
  const data::SpecialIds ids;
  for (int step = 0; step < steps; ++step) {
    const int64_t b = 32;
    std::vector<CopyExample> batch;
    int64_t s = 0;
    for (int64_t i = 0; i < b; ++i) {
      batch.push_back(copy_example(rng));
      s = std::max<int64_t>(s, static_cast<int64_t>(batch.back().src.size()) + 1);
    }
    torch::Tensor src = torch::full({b, s}, ids.pad, torch::kLong), mask = torch::zeros({b, s}, torch::kBool);
    torch::Tensor tgt_in = torch::full({b, 2}, ids.bos, torch::kLong), tgt_out = torch::full({b, 2}, ids.eos, torch::kLong);
    for (int64_t i = 0; i < b; ++i) {
      const auto& e = batch[static_cast<size_t>(i)];
      for (size_t j = 0; j < e.src.size(); ++j) src[i][static_cast<int64_t>(j)] = e.src[j];
      src[i][static_cast<int64_t>(e.src.size())] = ids.eos;
      mask[i].narrow(0, 0, static_cast<int64_t>(e.src.size()) + 1).fill_(true);
      tgt_in[i][1] = e.name;
      tgt_out[i][0] = e.name;
    }
    torch::Tensor tgt_mask = torch::ones({b, 2}, torch::kBool);
    torch::Tensor logits = model.forward(src, mask, tgt_in, tgt_mask);
    torch::Tensor loss = torch::nn::functional::cross_entropy(logits.view({-1, logits.size(-1)}), tgt_out.view(-1));
    opt.zero_grad();
    loss.backward();
    opt.step();
  }
  model.eval();
}

models::ModelPtr copy_model(const std::string& kind, const std::string& extra) {
  std::string text = "[model]\nkind = \"" + kind + "\"\nd_model = 32\nn_heads = 2\nd_ff = 64\nd_state = 8\n"
                     "headdim = 16\ndropout = 0.0\n" + extra;
  torch::manual_seed(11);
  return models::build_model(core::parse_experiment(text, "copy.toml").model, kVocab);
}

// Share of held-out examples where the model's greedy output is the name, and
// where the name's column of the first target row has the largest occlusion
// importance; the mean ratio of that importance to the largest filler's.
struct CopyCheck {
  double accuracy = 0, name_is_max = 0, mean_ratio = 0;
};

CopyCheck check_copy(models::TranslationModel& model, int n, uint32_t seed) {
  std::mt19937 rng(seed);
  const data::SpecialIds ids;
  CopyCheck r;
  for (int i = 0; i < n; ++i) {
    CopyExample e = copy_example(rng);
    train::SentencePair pair{e.src, {e.name}};
    // Greedy: is the first generated token the name?
    std::vector<int64_t> s(e.src.begin(), e.src.end());
    s.push_back(ids.eos);
    torch::Tensor src = torch::tensor(s).view({1, -1});
    models::SearchOptions so;
    so.beam_size = 1;
    auto hyp = models::greedy_search(model, src, torch::ones_like(src, torch::kBool), so);
    if (!hyp[0].tokens.empty() && hyp[0].tokens[0] == e.name) r.accuracy += 1;
    torch::Tensor occ = train::occlusion_importance(model, pair, ids, torch::kCPU, /*batch=*/3);
    REQUIRE(occ.sizes() == torch::IntArrayRef({2, static_cast<int64_t>(e.src.size()) + 1}));
    CHECK(occ.ge(0).all().item<bool>());
    torch::Tensor row = occ[0];
    const double name = row[static_cast<int64_t>(e.at)].item<double>();
    double filler = 0;
    for (size_t j = 0; j < e.src.size(); ++j)
      if (j != e.at) filler = std::max(filler, row[static_cast<int64_t>(j)].item<double>());
    if (name > filler) r.name_is_max += 1;
    r.mean_ratio += name / std::max(filler, 1e-9);
  }
  r.accuracy /= n;
  r.name_is_max /= n;
  r.mean_ratio /= n;
  return r;
}

}  // namespace

TEST_CASE("occlusion: the source name a model copies matters more than the unrelated words around it", "[slow]") {
  struct Kind {
    const char* kind;
    const char* extra;
    int steps;
  };
  for (const Kind& k : {Kind{"hybrid", "enc_layers = 2\ndec_layers = 2\ncross_attn_every = 1\n", 150},
                        Kind{"mamba", "dec_layers = 2\n", 250}}) {
    INFO(k.kind);
    models::ModelPtr m = copy_model(k.kind, k.extra);
    train_copy(*m, k.steps, 5);
    CopyCheck r = check_copy(*m, 40, 99);
    INFO("accuracy " << r.accuracy << ", name the most important " << r.name_is_max << ", mean ratio "
                     << r.mean_ratio);
    REQUIRE(r.accuracy >= 0.9);  // the model has learnt to copy the name
    CHECK(r.name_is_max >= 0.9);
    CHECK(r.mean_ratio > 2.0);
    if (m->has_source_attention()) {
      // The cross-attention of the row that emits the name: rows sum to 1.
      std::mt19937 rng(3);
      CopyExample e = copy_example(rng);
      train::AttentionMaps a = train::attention_maps(*m, {e.src, {e.name}}, data::SpecialIds{}, torch::kCPU);
      REQUIRE(a.layers == std::vector<std::string>{"decoder.0.cross", "decoder.1.cross"});
      REQUIRE(a.weights.sizes() == torch::IntArrayRef({2, 2, 2, static_cast<int64_t>(e.src.size()) + 1}));
      CHECK((a.weights.sum(-1) - 1).abs().max().item<double>() < 1e-5);
      CHECK((a.mean().sum(-1) - 1).abs().max().item<double>() < 1e-5);
    }
  }
}

TEST_CASE("attention maps are empty for a pure Mamba model and occlusion of an untrained model is finite") {
  models::ModelPtr m = copy_model("mamba", "dec_layers = 2\n");
  m->eval();
  train::SentencePair pair{{15, 16, 7, 17}, {7, 20}};
  CHECK(train::attention_maps(*m, pair, data::SpecialIds{}, torch::kCPU).empty());
  torch::Tensor occ = train::occlusion_importance(*m, pair, data::SpecialIds{}, torch::kCPU);
  REQUIRE(occ.sizes() == torch::IntArrayRef({3, 5}));
  CHECK(torch::isfinite(occ).all().item<bool>());
  CHECK(occ.gt(0).all().item<bool>());
  // Batching the occluded copies changes nothing.
  CHECK(torch::allclose(occ, train::occlusion_importance(*m, pair, data::SpecialIds{}, torch::kCPU, 2), 1e-5, 1e-6));
  CHECK_THROWS_AS(train::parse_explain_method("gradients"), UsageError);
}

TEST_CASE("mambamt explain on tiny trained experiments: heatmaps, index.md, and no attention for pure Mamba",
          "[slow]") {
  TempDir tmp;
  auto train_tiny = [&](const std::string& name, std::vector<std::pair<std::string, std::string>> ov) {
    ov.emplace_back("train.max_steps", "4");
    train::RunOptions o;
    o.exp_dir = tmp.path(name);
    o.skip_evaluation = true;
    o.shared_dir = tmp.path("shared");
    REQUIRE(train::run_experiment(train_test::tiny_config(ov), o).state == core::RunState::completed);
    return o.exp_dir;
  };
  const std::string hybrid = train_tiny("hybrid", {});
  write_text(tmp.path("in.txt"), "ta ul pa en ta\n\nen ta ul <sep> pa ta\n");
  const std::string out = tmp.path("maps");
  CommandResult r = run_shell(mambamt_binary() + " explain --store " + hybrid + " --out " + out + " --heads < " +
                              tmp.path("in.txt"));
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.output, Catch::Contains("line 2 is empty"));
  for (const char* f : {"001_attention.svg", "001_occlusion.svg", "003_attention.svg", "003_occlusion.svg",
                        "index.md"}) {
    INFO(f);
    CHECK(fs::exists(fs::path(out) / f));
  }
  CHECK_FALSE(fs::exists(fs::path(out) / "002_occlusion.svg"));
  std::vector<std::string> heads;
  for (auto& e : fs::directory_iterator(out))
    if (e.path().filename().string().rfind("001_attention_decoder.", 0) == 0) heads.push_back(e.path().filename().string());
  CHECK(heads.size() >= 2);  // one per layer and head (2 heads)
  const std::string index = read_text(out + "/index.md");
  CHECK_THAT(index, Catch::Contains("](001_attention.svg)") && Catch::Contains("](001_occlusion.svg)") &&
                        Catch::Contains("## 3") && Catch::Contains("head 1"));
  const std::string svg = read_text(out + "/001_occlusion.svg");
  CHECK_THAT(svg, Catch::Contains("&lt;/s&gt;") && Catch::Contains("class=\"cell"));
  // Every heatmap renders.
  REQUIRE(run_shell("command -v rsvg-convert").code == 0);  // librsvg2-bin, installed by scripts/setup.sh
  for (auto& e : fs::directory_iterator(out)) {
    if (e.path().extension() != ".svg") continue;
    INFO(e.path().string());
    const std::string png = tmp.path("png/" + e.path().stem().string() + ".png");
    fs::create_directories(tmp.path("png"));
    CHECK(run_shell("rsvg-convert -o " + png + " " + e.path().string()).code == 0);
    CHECK(fs::file_size(png) > 1000);
  }

  // A pure Mamba model: no attention weights to draw.
  const std::string mamba = train_tiny("mamba", {{"model.kind", "\"mamba\""}});
  CommandResult bad = run_shell("echo 'ta ul pa' | " + mambamt_binary() + " explain --store " + mamba +
                                " --method attention --out " + tmp.path("m1"));
  CHECK(bad.code == 1);
  CHECK_THAT(bad.output, Catch::Contains("`mamba`") && Catch::Contains("no attention layer over the source") &&
                             Catch::Contains("--method occlusion"));
  CHECK_FALSE(fs::exists(tmp.path("m1")));
  CommandResult both = run_shell("echo 'ta ul pa' | " + mambamt_binary() + " explain --store " + mamba + " --out " +
                                 tmp.path("m2"));
  INFO(both.output);
  CHECK(both.code == 0);
  CHECK(fs::exists(tmp.path("m2/001_occlusion.svg")));
  CHECK_FALSE(fs::exists(tmp.path("m2/001_attention.svg")));
  CHECK_THAT(read_text(tmp.path("m2/index.md")), Catch::Contains("occlusion maps only"));
  CommandResult usage = run_shell(mambamt_binary() + " explain --store " + mamba + " --method saliency < /dev/null");
  CHECK(usage.code == 2);
  CHECK(run_shell(mambamt_binary() + " explain < /dev/null").code == 2);
}

TEST_CASE("alignment error rate: a Transformer trained on the synthetic corpus aligns its words far better than "
          "untrained, pure Mamba has none, and windows score their sentences once",
          "[slow]") {
  TempDir tmp;
  // Only the parts that matter here: no contrastive, entity or extrapolation
  // sets. `ov` comes last, so it may override these.
  auto evaluated = [&](const std::string& name, const std::vector<std::pair<std::string, std::string>>& ov) {
    std::vector<std::pair<std::string, std::string>> all = {{"data.synthetic.train_docs", "300"},
                                                            {"data.synthetic.test_docs", "15"},
                                                            {"eval.max_examples", "40"},
                                                            {"eval.contrastive", "false"},
                                                            {"eval.entity_recall", "false"},
                                                            {"eval.extrapolation", "false"},
                                                            {"eval.bootstrap_samples", "0"},
                                                            {"train.validate_every", "400"},
                                                            {"train.checkpoint_every", "400"}};
    all.insert(all.end(), ov.begin(), ov.end());
    train::RunOptions o;
    o.exp_dir = tmp.path(name);
    o.shared_dir = tmp.path("shared");
    REQUIRE(train::run_experiment(train_test::tiny_config(all), o).state == core::RunState::completed);
    return core::ExperimentStore::read(o.exp_dir + "/store.h5");
  };
  const std::vector<std::pair<std::string, std::string>> transformer = {
      {"model.kind", "\"transformer\""}, {"data.context_sentences", "1"}, {"train.lr", "2e-3"},
      {"train.warmup_steps", "100"}};
  auto with = [](std::vector<std::pair<std::string, std::string>> ov, const std::string& k, const std::string& v) {
    ov.emplace_back(k, v);
    return ov;
  };
  const core::StoreSnapshot trained = evaluated("trained", with(transformer, "train.max_steps", "600"));
  const core::StoreSnapshot untrained = evaluated("untrained", with(transformer, "train.max_steps", "4"));
  for (const core::StoreSnapshot* s : {&trained, &untrained}) {
    REQUIRE(s->tables.count("alignment/by_layer"));
    const core::ResultTable& t = s->tables.at("alignment/by_layer");
    CHECK(t.columns == std::vector<std::string>{"aer", "precision", "recall", "links", "gold_links", "sentences"});
    // One row per decoder layer's cross-attention, all layers together, the
    // layer chosen on the other half of the sentences, occlusion.
    CHECK(t.rows ==
          std::vector<std::string>{"decoder.0.cross", "decoder.1.cross", "all layers", "held-out layer", "occlusion"});
    double best = 1;
    for (size_t r = 0; r < t.rows.size(); ++r) {
      INFO(t.rows[r]);
      CHECK(t.at(r, 0) >= 0);
      CHECK(t.at(r, 0) <= 1);
      CHECK(t.at(r, 5) == 40);  // every scored test sentence
      CHECK(t.at(r, 4) > 40 * 4);
      if (r < 2) best = std::min(best, t.at(r, 0));
    }
    CHECK(s->scalars.at("alignment/aer_best_layer") == best);
    CHECK(s->scalars.at("alignment/aer_all_layers") == t.at(2, 0));
    CHECK(s->scalars.at("alignment/aer") == t.at(3, 0));
    // Its gold links are those of the whole set, each sentence scored at one
    // of the two layers. Its AER need not lie between the two layers' AERs
    // over the whole set: each half takes the layer best on the other half,
    // which may be the worse (or the better) one on its own half, and a ratio
    // of sums over halves can then fall outside the range of the whole-set
    // ratios (seen with the standard init: 0.7957 against 0.7925 and lower).
    CHECK(t.at(3, 4) == t.at(0, 4));
    CHECK(s->scalars.at("alignment/occlusion_aer") == t.at(4, 0));
    // Each sentence's counts at the layer chosen for its half: the units of
    // the paired test, summing to the held-out row.
    const std::optional<results::AlignmentOutcomes> o = results::alignment_outcomes(*s);
    REQUIRE(o);
    CHECK(o->sentences.size() == 40);
    CHECK(o->sentences.front() == "0:0");
    CHECK(std::set<std::string>(o->sentences.begin(), o->sentences.end()).size() == 40);
    results::AlignmentCounts sum;
    for (const results::AlignmentCounts& n : o->counts) sum.add(n);
    CHECK(sum.sentences == 40);
    CHECK(sum.predicted == t.at(3, 3));
    CHECK(sum.sure == t.at(3, 4));
    CHECK(sum.aer() == Approx(t.at(3, 0)));
    CHECK_THAT(o->set, Catch::StartsWith("test ") && Catch::Contains(" documents, ") &&
                           Catch::Contains(" sentences), gold links "));
    CHECK_THAT(s->texts.at("alignment"), Catch::StartsWith("held-out layer: decoder.") &&
                                             Catch::Contains("; best layer decoder.") &&
                                             Catch::Contains("40 sentences of test against ") &&
                                             Catch::Contains("/test.align"));
  }
  INFO("trained AER " << trained.scalars.at("alignment/aer") << ", untrained " << untrained.scalars.at("alignment/aer")
                      << "; by occlusion " << trained.scalars.at("alignment/occlusion_aer") << ", untrained "
                      << untrained.scalars.at("alignment/occlusion_aer"));
  CHECK(untrained.scalars.at("alignment/aer") > 0.7);
  CHECK(trained.scalars.at("alignment/aer") < untrained.scalars.at("alignment/aer") - 0.1);
  CHECK(trained.scalars.at("alignment/occlusion_aer") < untrained.scalars.at("alignment/occlusion_aer") - 0.1);

  // Windows of two sentences: each sentence is scored once, inside its window.
  const core::StoreSnapshot windows = evaluated("windows", {{"train.max_steps", "4"}});
  REQUIRE(windows.tables.count("alignment/by_layer"));
  const core::ResultTable& w = windows.tables.at("alignment/by_layer");
  for (size_t r = 0; r < w.rows.size(); ++r) CHECK(w.at(r, 5) == 40);

  // One scored sentence: no layer can be chosen on the other half. The
  // reported AER is NaN and the note says why; the other rows score it.
  const core::StoreSnapshot one = evaluated("one", {{"train.max_steps", "4"}, {"eval.max_examples", "1"}});
  REQUIRE(one.tables.count("alignment/by_layer"));
  const core::ResultTable& o1 = one.tables.at("alignment/by_layer");
  for (size_t r = 0; r < o1.rows.size(); ++r) {
    INFO(o1.rows[r]);
    CHECK(o1.at(r, 5) == (o1.rows[r] == "held-out layer" ? 0 : 1));
  }
  CHECK(std::isnan(one.scalars.at("alignment/aer")));
  CHECK(std::isfinite(one.scalars.at("alignment/aer_best_layer")));
  CHECK_FALSE(results::alignment_outcomes(one));
  CHECK_THAT(one.texts.at("alignment"),
             Catch::StartsWith("held-out layer: none (every scored sentence is in one half") &&
                 Catch::Contains("1 sentences of test against "));

  // Pure Mamba: no attention over the source, its alignment by occlusion only.
  const core::StoreSnapshot mamba = evaluated("mamba", {{"model.kind", "\"mamba\""}, {"train.max_steps", "4"}});
  REQUIRE(mamba.tables.count("alignment/by_layer"));
  CHECK(mamba.tables.at("alignment/by_layer").rows == std::vector<std::string>{"occlusion"});
  CHECK(mamba.tables.at("alignment/by_layer").at(0, 5) == 40);
  CHECK(mamba.scalars.count("alignment/aer") == 0);
  CHECK(std::isfinite(mamba.scalars.at("alignment/occlusion_aer")));
  CHECK_THAT(mamba.texts.at("alignment"), Catch::StartsWith("no attention over the source: occlusion only; 40 sentences"));

  // The first test set that has gold alignments is the one scored: here the
  // second of data.test (the synthetic corpus's files read as TSV files).
  {
    data::SyntheticOptions so;
    so.train_docs = 300;
    so.test_docs = 15;
    so.min_sentences = 3;
    so.max_sentences = 5;
    so.vocab_size = 30;
    so.entities = 10;
    so.valid_docs = 4;
    const data::SyntheticCorpus gold = data::generate_synthetic(so);
    data::write_tsv(gold.test, tmp.path("sets/gold.tsv"));
    data::write_alignments(gold.test_alignments, tmp.path("sets/gold.align"));
    data::write_tsv(gold.test, tmp.path("sets/plain.tsv"));
    data::write_tsv(gold.train, tmp.path("sets/train.tsv"));
    data::write_tsv(gold.valid, tmp.path("sets/valid.tsv"));
    const core::StoreSnapshot second = evaluated(
        "second", {{"train.max_steps", "4"},
                   {"data.corpus", "\"tsv\""},
                   {"data.train", "\"" + tmp.path("sets/train.tsv") + "\""},
                   {"data.valid", "\"" + tmp.path("sets/valid.tsv") + "\""},
                   {"data.test", "[\"" + tmp.path("sets/plain.tsv") + "\", \"" + tmp.path("sets/gold.tsv") + "\"]"}});
    CHECK(second.scalars.count("plain/bleu") == 1);
    CHECK_THAT(second.texts.at("alignment"),
               Catch::Contains("40 sentences of gold against " + tmp.path("sets/gold.align")));
  }

  // eval.alignment = false: none at all.
  const core::StoreSnapshot off = evaluated("off", {{"train.max_steps", "4"}, {"eval.alignment", "false"}});
  CHECK(off.tables.count("alignment/by_layer") == 0);
  CHECK(off.texts.count("alignment") == 0);
}

TEST_CASE("the two halves of an attention alignment sum each sentence's counts into its half") {
  auto counts = [](int64_t hits) {
    results::AlignmentCounts n;
    n.predicted = n.sure = 10;
    n.sure_hits = n.possible_hits = hits;
    n.sentences = 1;
    return n;
  };
  train::AttentionAlignment a;
  a.layers = {"decoder.1.cross", "decoder.3.cross"};
  a.sentences = {{0, 0, 0, {counts(3), counts(9)}}, {0, 1, 1, {counts(8), counts(2)}}, {1, 0, 0, {counts(4), counts(4)}}};
  const auto halves = a.halves();
  CHECK(halves[0][0].sure_hits == 7);
  CHECK(halves[0][1].sure_hits == 13);
  CHECK(halves[0][1].sentences == 2);
  CHECK(halves[1][0].sure_hits == 8);
  CHECK(halves[1][1].sure_hits == 2);
  // Each half at the other's best layer: the even sentences at decoder.1.cross
  // (8 of 10 on the odd one), the odd at decoder.3.cross (13 of 20 on the even).
  const results::HeldOutLayer held = results::held_out_layer(halves);
  CHECK(held.chosen == std::array<int64_t, 2>{0, 1});
  CHECK(held.counts.sure_hits == 7 + 2);
  CHECK(held.counts.sentences == 3);
}
