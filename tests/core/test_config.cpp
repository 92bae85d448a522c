#include <catch2/catch.hpp>

#include "core/config.h"
#include "core/error.h"
#include "test_util.h"

using mambamt::InputError;
using namespace mambamt::core;

namespace {

// The message of the InputError that parsing `text` throws ("" if none).
std::string error_of(const std::string& text, const std::string& source = "x.toml") {
  try {
    parse_experiment(text, source);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

std::string grid_error_of(const std::string& text) {
  try {
    parse_grid(text, "g.toml");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("an empty experiment is all defaults", "[core][config]") {
  ExperimentConfig c = parse_experiment("", "empty.toml");
  CHECK(c == ExperimentConfig{});
  CHECK(c.model.kind == "hybrid");
  CHECK(c.model.attention_ratio == 0.125);
  CHECK(c.eval.length_buckets == std::vector<int64_t>({16, 32, 64, 128, 256, 512}));
}

TEST_CASE("parse -> canonical -> parse is the identity with the same id", "[core][config]") {
  const char* text = R"(
[model]
kind = "hybrid"
d_model = 128
n_heads = 4
dec_layers = 8
cross_attn_every = 2
attention_placement = "uniform"
dropout = 0.3
[data]
cat_n = 5
test = ["a", "b"]
[data.synthetic]
train_docs = 77
[train]
lr = 3e-4
max_steps = 123
[eval]
length_buckets = [10, 20]
)";
  ExperimentConfig a = parse_experiment(text, "a.toml");
  CHECK(a.model.d_model == 128);
  CHECK(a.data.synthetic.train_docs == 77);
  CHECK(a.data.test == std::vector<std::string>({"a", "b"}));
  std::string canon = a.canonical();
  ExperimentConfig b = parse_experiment(canon, "canonical.toml");
  CHECK(a == b);
  CHECK(b.canonical() == canon);
  CHECK(a.id() == b.id());
  CHECK(a.id().size() == 12);
  // Every key is in the canonical text.
  for (auto& key : experiment_keys()) {
    std::string leaf = key.substr(key.rfind('.') + 1);
    CHECK(canon.find("\n" + leaf + " = ") != std::string::npos);
  }
}

TEST_CASE("the id ignores key order and explicit defaults and sees every value", "[core][config]") {
  auto id1 = parse_experiment("[model]\nd_state = 32\nd_model = 128\nn_heads = 4\n", "a").id();
  auto id2 = parse_experiment("[model]\nd_model = 128\nn_heads = 4\nd_state = 32\nkind = \"hybrid\"\n", "b").id();
  CHECK(id1 == id2);
  auto id3 = parse_experiment("[model]\nd_model = 128\nn_heads = 4\nd_state = 64\n", "c").id();
  CHECK(id1 != id3);
  auto id4 = parse_experiment("[model]\nd_state = 32\nd_model = 128\nn_heads = 4\n[train]\nseed = 2\n", "d").id();
  CHECK(id1 != id4);
  // Float spelling does not matter, the value does.
  CHECK(parse_experiment("[train]\nlr = 0.0003\n", "e").id() == parse_experiment("[train]\nlr = 3e-4\n", "f").id());
}

TEST_CASE("presets set sizes and explicit keys win", "[core][config]") {
  auto c = parse_experiment("[model]\npreset = \"base\"\n", "p.toml");
  CHECK(c.model.d_model == 512);
  CHECK(c.model.enc_layers == 12);
  auto t = parse_experiment("[model]\nkind = \"transformer\"\npreset = \"base\"\n", "p.toml");
  CHECK(t.model.d_model == 512);
  CHECK(t.model.enc_layers == 6);
  CHECK(t.model.d_ff == 2048);
  auto o = parse_experiment("[model]\npreset = \"base\"\nd_model = 256\n", "p.toml");
  CHECK(o.model.d_model == 256);
  CHECK(o.model.enc_layers == 12);
  auto tiny = parse_experiment("[model]\nkind = \"mamba\"\npreset = \"tiny\"\n", "p.toml");
  CHECK(tiny.model.d_model == 64);
}

TEST_CASE("explicit plans set the layer counts", "[core][config]") {
  auto c = parse_experiment(
      "[model]\nenc_plan = [\"bimamba\", \"attention\", \"bimamba\"]\n"
      "dec_plan = [\"mamba\", \"attention+cross\"]\n",
      "p.toml");
  CHECK(c.model.enc_layers == 3);
  CHECK(c.model.dec_layers == 2);
}

TEST_CASE("config errors name file, line, column and key", "[core][config]") {
  SECTION("out of range") {
    CHECK(error_of("[model]\n\nattention_ratio = 1.5\n", "configs/x.toml") ==
          "configs/x.toml:3:1: model.attention_ratio = 1.5: must be in [0, 1]");
  }
  SECTION("wrong type") {
    CHECK(error_of("[model]\nd_state = \"big\"\n") == "x.toml:2:1: model.d_state = \"big\": expected an integer");
    CHECK(error_of("[model]\ntie_embeddings = 1\n") == "x.toml:2:1: model.tie_embeddings = 1: expected true or false");
    CHECK(error_of("[data]\ntest = [\"a\", 3]\n") == "x.toml:2:1: data.test = [\"a\", 3]: element 1: expected a string");
  }
  SECTION("unknown key with a near miss") {
    CHECK(error_of("[model]\nd_sate = 3\n") == "x.toml:2:1: unknown key model.d_sate (did you mean model.d_state?)");
    CHECK(error_of("[train]\nd_state = 3\n") == "x.toml:2:1: unknown key train.d_state (did you mean model.d_state?)");
    CHECK(error_of("[train]\nzzzz = 3\n") == "x.toml:2:1: unknown key train.zzzz");
  }
  SECTION("unknown section and keys outside sections") {
    CHECK(error_of("[modle]\nd_state = 3\n") == "x.toml:1:1: unknown section [modle] (did you mean model?)");
    CHECK(error_of("d_state = 3\n") == "x.toml:1:1: unknown key d_state (did you mean model.d_state?)");
    CHECK(error_of("[model.extra]\nx = 1\n") == "x.toml:1:1: unknown key model.extra");
  }
  SECTION("a string out of its choices") {
    CHECK(error_of("[model]\nkind = \"hybird\"\n") ==
          "x.toml:2:1: model.kind = \"hybird\": must be one of hybrid, transformer, mamba, decoder_only, retnet, rnnsearch "
          "(did you mean \"hybrid\"?)");
    CHECK(error_of("[model]\ndec_plan = [\"mamba\", \"atention+cross\"]\n").find(
              "x.toml:2:1: model.dec_plan = [\"mamba\", \"atention+cross\"]: must be one of") == 0);
  }
  SECTION("invalid TOML") {
    std::string e = error_of("[model]\nd_state = = 3\n");
    CHECK(e.find("x.toml:2:") == 0);
    CHECK(e.find("invalid TOML") != std::string::npos);
  }
  SECTION("inconsistent combinations name the key that was set") {
    CHECK(error_of("[model]\ndec_layers = 2\ncross_attn_every = 4\n") ==
          "x.toml:3:1: model.cross_attn_every = 4 exceeds model.dec_layers = 2: the decoder would have no "
          "cross-attention");
    CHECK(error_of("[model]\nd_model = 100\nn_heads = 3\n") ==
          "x.toml:3:1: model.d_model = 100 is not divisible by model.n_heads = 3");
    CHECK(error_of("[model]\nn_heads = 4\nd_model = 100\nheaddim = 64\n") ==
          "x.toml:4:1: model.expand * model.d_model = 200 is not divisible by model.headdim = 64");
    CHECK(error_of("[data.synthetic]\nmin_sentences = 9\n") ==
          "x.toml:2:1: data.synthetic.min_sentences = 9 exceeds data.synthetic.max_sentences = 8");
    CHECK(error_of("[eval]\nbeam_size = 2\nnbest = 3\n") == "x.toml:3:1: eval.nbest = 3 exceeds eval.beam_size = 2");
    // Averaging more checkpoints than training keeps (the default keeps 2).
    CHECK(error_of("[eval]\naverage_last = 5\n") ==
          "x.toml:2:1: eval.average_last = 5 averages more checkpoints than train.keep_checkpoints = 2 keeps: set "
          "train.keep_checkpoints = 5 or more");
    CHECK(error_of("[train]\nkeep_checkpoints = 3\n[eval]\naverage_last = 4\n").rfind("x.toml:4:1: eval.average_last = 4", 0) == 0);
    CHECK(error_of("[train]\nkeep_checkpoints = 5\n[eval]\naverage_last = 5\n").empty());
    CHECK(error_of("[data]\ncontext_sentences = 3\n[eval]\nbeam_size = 4\nnbest = 2\ndoc_decode = \"sentences\"\n") ==
          "x.toml:5:1: eval.nbest = 2 with eval.doc_decode = \"sentences\": a document translated sentence by sentence "
          "continues from its best translation only, so it has no n-best lists (use eval.doc_decode = \"passages\" or "
          "nbest = 1)");
    // On sentences (no windows) doc_decode changes nothing: n-best lists are fine.
    CHECK(error_of("[eval]\nbeam_size = 4\nnbest = 2\ndoc_decode = \"sentences\"\n").empty());
    CHECK(error_of("[data]\ncontext_sentences = 3\ncontext_side = \"source\"\ncat_n = 5\n") ==
          "x.toml:4:1: data.cat_n = 5 with data.context_side = \"source\": CAT-N needs context on both sides");
    CHECK(error_of("[data]\ncontext_side = \"left\"\n").find("x.toml:2:1: data.context_side") == 0);
    CHECK(error_of("[data]\nmulti_resolution = true\n") ==
          "x.toml:2:1: data.multi_resolution needs windows: data.context_sentences > 1 and data.context_side = \"both\"");
    CHECK(error_of("[data]\ncontext_sentences = 4\ncontext_side = \"source\"\nmulti_resolution = true\n")
              .find("x.toml:4:1: data.multi_resolution needs windows") == 0);
    CHECK(error_of("[eval]\ndoc_decode = \"sentence\"\n").find("x.toml:2:1: eval.doc_decode") == 0);
    CHECK(error_of("[data]\nsentence_steps = 100\n") ==
          "x.toml:2:1: data.sentence_steps = 100 needs document-level examples to move on to: data.context_sentences > 1");
    CHECK(error_of("[eval]\nlength_buckets = [4, 4]\n") ==
          "x.toml:2:1: eval.length_buckets must be strictly increasing");
    CHECK(error_of("[model]\nkind = \"mamba\"\nenc_plan = [\"bimamba\"]\n") ==
          "x.toml:3:1: model.enc_plan: kind mamba is decoder-only and has no encoder");
    CHECK(error_of("[model]\nenc_layers = 2\nenc_plan = [\"bimamba\"]\n") ==
          "x.toml:3:1: model.enc_plan has 1 layers but model.enc_layers = 2");
    CHECK(error_of("[model]\ndec_plan = [\"mamba\"]\n") ==
          "x.toml:2:1: model.dec_plan has no `+cross` layer: the decoder would not see the source");
    CHECK(error_of("[model]\nkind = \"mamba\"\nattention_ratio = 0.25\n") ==
          "x.toml:3:1: model.attention_ratio = 0.25: kind mamba has no attention (use decoder_only)");
    CHECK(error_of("[data]\ncorpus = \"tsv\"\n") == "x.toml:2:1: data.train is required for corpus tsv");
  }
  SECTION("a preset that does not exist for the kind") {
    CHECK(error_of("[model]\npreset = \"huge\"\n").find("x.toml:2:1: model.preset = \"huge\": must be one of") == 0);
  }
}

TEST_CASE("load_experiment reports a missing file and a directory, and refuses a grid", "[core][config]") {
  CHECK_THROWS_WITH(load_experiment("/nonexistent/e.toml"),
                    "/nonexistent/e.toml: cannot open file: No such file or directory");
  // A directory opens as a file on Linux and reads as empty: an empty config
  // is every default, which would train the default model.
  CHECK_THROWS_WITH(load_experiment("/tmp"), "/tmp: is a directory, not a file");
  CHECK_THROWS_AS(parse_experiment("[sweep]\nname = \"a\"\n", "g.toml"), InputError);
}

TEST_CASE("grid files: axes, variants, excludes and points", "[core][config]") {
  const char* text = R"([sweep]
name = "abl"
seeds = [1, 2]

[base]
model.d_model = 128
model.n_heads = 4
train.max_steps = 10

[grid]
"model.attention_ratio" = [0.25, 0.125]
model.d_state = [16, 32]

[[variant]]
name = "transformer"
model.kind = "transformer"

[[exclude]]
model.d_state = 32
model.attention_ratio = 0.25
)";
  GridConfig g = parse_grid(text, "g.toml");
  CHECK(g.sweep.name == "abl");
  CHECK(g.sweep.seeds == std::vector<int64_t>({1, 2}));
  REQUIRE(g.axes.size() == 2);
  CHECK(g.axes[0].key == "model.attention_ratio");
  CHECK(g.axes[0].values == std::vector<std::string>({"0.25", "0.125"}));
  CHECK(g.axes[1].key == "model.d_state");
  CHECK(g.axes[1].value_places[1].line == 12);
  REQUIRE(g.variants.size() == 1);
  CHECK(g.variants[0].name == "transformer");
  REQUIRE(g.excludes.size() == 1);
  CHECK(g.excludes[0].match.size() == 2);

  ExperimentConfig p = g.point({{"model.d_state", "32"}, {"train.seed", "2"}});
  CHECK(p.model.d_state == 32);
  CHECK(p.model.d_model == 128);
  CHECK(p.train.seed == 2);
  CHECK(p.train.max_steps == 10);
  CHECK(p.id() == parse_experiment(p.canonical(), "c").id());
  ExperimentConfig v = g.point(g.variants[0].overrides, g.variants[0].override_places);
  CHECK(v.model.kind == "transformer");
}

TEST_CASE("grid errors name the grid line", "[core][config]") {
  CHECK(grid_error_of("[sweep]\nname = \"a\"\n[grid]\nmodel.d_sate = [1, 2]\n") ==
        "g.toml:4:1: unknown key model.d_sate (did you mean model.d_state?)");
  CHECK(grid_error_of("[sweep]\nname = \"a\"\n[grid]\nmodel.d_state = [16, \"x\"]\n") ==
        "g.toml:4:22: model.d_state = \"x\": expected an integer");
  CHECK(grid_error_of("[sweep]\nname = \"a\"\n[grid]\nmodel.d_state = 16\n") ==
        "g.toml:4:1: grid.model.d_state must be a non-empty list of values (a grid axis)");
  CHECK(grid_error_of("[sweep]\nnmae = \"a\"\n") == "g.toml:2:1: unknown key sweep.nmae (did you mean sweep.name?)");
  CHECK(grid_error_of("[sweep]\nname = \"a\"\n[gird]\n") == "g.toml:3:1: unknown section [gird] in a grid file (did you mean [grid]?)");
  CHECK(grid_error_of("[sweep]\nname = \"a\"\n[[variant]]\nmodel.kind = \"mamba\"\n") ==
        "g.toml:3:1: [[variant]] needs a name");
  CHECK(grid_error_of("[sweep]\nname = \"a b\"\n").find("sweep.name = \"a b\"") != std::string::npos);

  // A combination that is invalid only as a whole fails when the point is built,
  // naming the grid line of the value.
  GridConfig g = parse_grid("[sweep]\nname = \"a\"\n[base]\nmodel.dec_layers = 2\n[grid]\nmodel.cross_attn_every = [1, 4]\n",
                            "g.toml");
  CHECK_NOTHROW(g.point({{"model.cross_attn_every", "1"}}, {g.axes[0].value_places[0]}));
  CHECK_THROWS_WITH(g.point({{"model.cross_attn_every", "4"}}, {g.axes[0].value_places[1]}),
                    "g.toml:6:30: model.cross_attn_every = 4 exceeds model.dec_layers = 2: the decoder would have "
                    "no cross-attention");
}

TEST_CASE("the config reference documents every key", "[core][config]") {
  std::string md = config_reference_markdown();
  for (auto& key : experiment_keys()) CHECK(md.find("`" + key + "`") != std::string::npos);
  CHECK(md.find("`sweep.retries`") != std::string::npos);
}

TEST_CASE("docs/config.md is the current output of `mambamt config doc`", "[core][config]") {
  // Regenerate with: build/bin/mambamt config doc > docs/config.md
  CHECK(::read_text(source_dir() + "/docs/config.md") == config_reference_markdown());
}

TEST_CASE("short_hash is stable and spreads", "[core][config]") {
  CHECK(short_hash("abc") == short_hash("abc"));
  CHECK(short_hash("abc") != short_hash("abd"));
  CHECK(short_hash("abc", 8).size() == 8);
}

TEST_CASE("config_value_text gives canonical values by dotted key", "[core][config]") {
  auto c = parse_experiment("[model]\nd_state = 32\nattention_placement = \"uniform\"\n[train]\nlr = 3e-4\n", "v");
  CHECK(config_value_text(c, "model.d_state") == "32");
  CHECK(config_value_text(c, "model.attention_placement") == "\"uniform\"");
  CHECK(config_value_text(c, "train.lr") == "3e-04");
  CHECK(config_value_text(c, "data.synthetic.train_docs") == "2000");
  CHECK(config_value_text(c, "eval.length_buckets") == "[16, 32, 64, 128, 256, 512]");
  CHECK_THROWS(config_value_text(c, "model.nope"));
}

TEST_CASE("the canonical form of every kind and preset reads back", "[core][config]") {
  for (const char* kind : {"hybrid", "transformer", "mamba", "decoder_only", "retnet", "rnnsearch"})
    for (const char* preset : {"none", "tiny", "small", "base", "medium", "large"}) {
      INFO(kind << " " << preset);
      auto c = parse_experiment(std::string("[model]\nkind = \"") + kind + "\"\npreset = \"" + preset + "\"\n", "k.toml");
      ExperimentConfig back = parse_experiment(c.canonical(), "canonical.toml");
      CHECK(back == c);
      CHECK(back.id() == c.id());
    }
  CHECK(parse_experiment("[model]\nkind = \"mamba\"\n", "m").model.attention_ratio == 0.0);
}

TEST_CASE("experiment ids stay what they were when fields are added", "[core][config]") {
  // Ids name run directories' experiments, stores and checkpoints: a new
  // config field must not change them (fields_hashed_when_set in
  // core/config.cpp). These were handed out before the field eval.gate_skip.
  CHECK(ExperimentConfig{}.id() == "ce95fefc0ab5");
  CHECK(ExperimentConfig{}.training_id() == "fd39f7e808db");
  CHECK(load_experiment(source_dir() + "/configs/experiments/tiny.toml").id() == "5273d623d876");
  CHECK(load_experiment(source_dir() + "/configs/experiments/hybrid_doc.toml").id() == "1b56ee071f3f");
  CHECK(load_experiment(source_dir() + "/configs/experiments/hybrid_sent.toml").id() == "48b575ef5a0c");
  // A late field at its default, written or not, leaves the id; set, it changes it.
  ExperimentConfig skip = parse_experiment("[eval]\ngate_skip = 0.0\n", "a.toml");
  CHECK(skip.id() == "ce95fefc0ab5");
  CHECK(skip.canonical().find("gate_skip = 0") != std::string::npos);
  skip.model.cross_attn = "gated";
  const std::string gated = skip.id();
  skip.eval.gate_skip = 0.1;
  CHECK(skip.id() != gated);
  // Only gated cross-attention has a gate to skip by.
  CHECK(error_of("[eval]\ngate_skip = 0.1\n") ==
        "x.toml:2:1: eval.gate_skip = 0.1 needs gated cross-attention (model.cross_attn = \"gated\" in kind hybrid or "
        "transformer); this is kind hybrid with cross_attn = \"full\"");
  CHECK_THAT(error_of("[model]\nkind = \"mamba\"\ncross_attn = \"gated\"\n[eval]\ngate_skip = 0.1\n"),
             Catch::Contains("this is kind mamba"));
  CHECK(error_of("[model]\ncross_attn = \"gated\"\n[eval]\ngate_skip = 0.1\n").empty());
  CHECK(error_of("[train]\ngate_penalty = 0.5\n") ==
        "x.toml:2:1: train.gate_penalty = 0.5 needs gated cross-attention (model.cross_attn = \"gated\" in kind "
        "hybrid or transformer); this is kind hybrid with cross_attn = \"full\"");
  CHECK(parse_experiment("[train]\ngate_penalty = 0.0\n", "b.toml").id() == "ce95fefc0ab5");
  CHECK(parse_experiment("[train]\ngate_penalty_warmup = 0\n", "b.toml").id() == "ce95fefc0ab5");
  CHECK(error_of("[model]\ncross_attn = \"gated\"\n[train]\ngate_penalty_warmup = 100\n") ==
        "x.toml:4:1: train.gate_penalty_warmup = 100 ramps up train.gate_penalty, which is 0 (off)");
  CHECK(error_of("[model]\ncross_attn = \"gated\"\n[train]\ngate_penalty = 1.0\ngate_penalty_warmup = 100\n").empty());
  // It is an evaluation setting: the training stays the same.
  ExperimentConfig open = skip;
  open.eval.gate_skip = 0;
  CHECK(skip.training_id() == open.training_id());
  // eval.comet_model likewise: no id change at its default, an evaluation setting.
  CHECK(parse_experiment("[eval]\ncomet_model = \"\"\n", "c.toml").id() == "ce95fefc0ab5");
  const ExperimentConfig pinned = parse_experiment("[eval]\ncomet_model = \"Unbabel/wmt22-comet-da\"\n", "c.toml");
  CHECK(pinned.eval.comet_model == "Unbabel/wmt22-comet-da");
  CHECK(pinned.id() != "ce95fefc0ab5");
  CHECK(pinned.training_id() == ExperimentConfig{}.training_id());
}

TEST_CASE("model.init: the standard scheme by default, init_std only with the normal one", "[core][config]") {
  CHECK(ExperimentConfig{}.model.init == "standard");
  // A late field: written at its default, the id stays; the normal scheme is another experiment.
  CHECK(parse_experiment("[model]\ninit = \"standard\"\n", "i.toml").id() == "ce95fefc0ab5");
  const ExperimentConfig normal = parse_experiment("[model]\ninit = \"normal\"\ninit_std = 0.05\n", "i.toml");
  CHECK(normal.model.init_std == 0.05);
  CHECK(normal.id() != "ce95fefc0ab5");
  CHECK(normal.training_id() != ExperimentConfig{}.training_id());
  CHECK(parse_experiment(normal.canonical(), "c.toml") == normal);
  // A deviation the standard scheme would not read is an error naming its place.
  CHECK(error_of("[model]\nd_model = 64\ninit_std = 0.05\n") ==
        "x.toml:3:1: model.init_std = 0.05: the standard initialisation (model.init = \"standard\", the default) "
        "sets its own scales; init_std is the deviation of model.init = \"normal\"");
  CHECK_THAT(error_of("[model]\ninit = \"xavier\"\n"), Catch::Contains("model.init"));
  // The canonical form writes init_std at its default: it reads back.
  const ExperimentConfig standard = parse_experiment("[model]\ninit = \"standard\"\n", "s.toml");
  CHECK(standard.canonical().find("init_std = 0.02") != std::string::npos);
  CHECK(parse_experiment(standard.canonical(), "c.toml") == standard);
}
