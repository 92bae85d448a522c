// Layer plans, the model-kind registry, presets and their parameter counts.
#include <catch2/catch.hpp>

#include <set>
#include <sstream>

#include "core/error.h"
#include "model_helpers.h"
#include "models/plan.h"
#include "models/registry.h"

using namespace mambamt;
using namespace mambamt::models;
using namespace mambamt::models::test;

using Ix = std::vector<int64_t>;

TEST_CASE("attention placement", "[models][plan]") {
  CHECK(attention_layers(16, 0.125, "middle_end") == Ix{8, 15});
  CHECK(attention_layers(12, 0.125, "middle_end") == Ix{6, 11});
  CHECK(attention_layers(24, 0.125, "middle_end") == Ix{5, 12, 23});
  CHECK(attention_layers(16, 0.25, "middle_end") == Ix{3, 8, 11, 15});
  CHECK(attention_layers(6, 0.125, "middle_end") == Ix{3});
  CHECK(attention_layers(16, 0.0625, "middle_end") == Ix{8});
  CHECK(attention_layers(16, 0.25, "uniform") == Ix{3, 7, 11, 15});
  CHECK(attention_layers(16, 0.125, "uniform") == Ix{7, 15});
  CHECK(attention_layers(16, 0.125, "every_n") == Ix{7, 15});
  CHECK(attention_layers(16, 0.25, "every_n") == Ix{3, 7, 11, 15});
  CHECK(attention_layers(16, 0.125, "first") == Ix{0, 1});
  CHECK(attention_layers(16, 0.0, "middle_end").empty());
  CHECK(attention_layers(4, 1.0, "middle_end") == Ix{0, 1, 2, 3});
  CHECK_THROWS_AS(attention_layers(8, 0.25, "sideways"), InputError);
}

TEST_CASE("cross-attention every k decoder layers and at the last", "[models][plan]") {
  CHECK(cross_attention_layers(16, 4) == Ix{3, 7, 11, 15});
  CHECK(cross_attention_layers(6, 4) == Ix{3, 5});
  CHECK(cross_attention_layers(3, 1) == Ix{0, 1, 2});
  CHECK(cross_attention_layers(8, 8) == Ix{7});
}

TEST_CASE("plans from the config", "[models][plan]") {
  SECTION("hybrid 16+16 at 1:7 middle_end, cross-attention every 4") {
    Plan p = make_plan(tiny_config("hybrid", "enc_layers = 16\ndec_layers = 16\n"));
    REQUIRE(p.encoder.size() == 16);
    REQUIRE(p.decoder.size() == 16);
    CHECK_FALSE(p.decoder_only);
    for (int64_t i = 0; i < 16; ++i) {
      const bool att = i == 8 || i == 15;
      CHECK(p.encoder[i] == LayerSpec{att ? "attention" : "bimamba", false, att});
      CHECK(p.decoder[i] == LayerSpec{att ? "attention" : "mamba", (i + 1) % 4 == 0, att});
    }
  }
  SECTION("sliding-window attention layers and Mamba MLPs") {
    Plan p = make_plan(tiny_config("hybrid", "attn_window = 16\nmamba_mlp = true\n"));
    CHECK(p.decoder[2].mixer == "local_attention");
    CHECK(p.decoder[0] == LayerSpec{"mamba", false, true});
  }
  SECTION("explicit plans override") {
    Plan p = make_plan(tiny_config("hybrid", "enc_plan = [\"attention\", \"bimamba\"]\n"
                                             "dec_plan = [\"mamba\", \"attention+cross\", \"mamba+cross\"]\n"));
    CHECK(p.encoder == std::vector<LayerSpec>{{"attention", false, true}, {"bimamba", false, false}});
    CHECK(p.decoder == std::vector<LayerSpec>{{"mamba", false, false}, {"attention", true, true}, {"mamba", true, false}});
  }
  SECTION("transformer: attention, cross-attention and an MLP everywhere") {
    Plan p = make_plan(tiny_config("transformer"));
    for (auto& s : p.encoder) CHECK(s == LayerSpec{"attention", false, true});
    for (auto& s : p.decoder) CHECK(s == LayerSpec{"attention", true, true});
  }
  SECTION("mamba: decoder-only, no attention") {
    Plan p = make_plan(tiny_config("mamba", "dec_layers = 5\n"));
    CHECK(p.decoder_only);
    CHECK(p.encoder.empty());
    REQUIRE(p.decoder.size() == 5);
    for (auto& s : p.decoder) CHECK(s == LayerSpec{"mamba", false, false});
  }
  SECTION("decoder_only: Mamba-MHA's two attention layers at N/2 and N-1") {
    Plan p = make_plan(tiny_config("decoder_only", "dec_layers = 24\nattention_ratio = 0.0833\n"));
    std::vector<int64_t> att;
    for (size_t i = 0; i < p.decoder.size(); ++i)
      if (p.decoder[i].mixer == "attention") att.push_back(static_cast<int64_t>(i));
    CHECK(att == Ix{12, 23});
  }
  SECTION("local attention without a window is an error naming the key") {
    core::ModelConfig c = tiny_config("hybrid", "dec_plan = [\"local_attention+cross\"]\n");
    try {
      make_plan(c);
      FAIL("no error");
    } catch (const InputError& e) {
      CHECK_THAT(e.what(), Catch::Contains("model.attn_window"));
    }
  }
}

TEST_CASE("the attention layers as built, and a ratio the plan does not build", "[models][plan]") {
  auto both = [](const std::string& kind, const std::string& lines) {
    const core::ModelConfig c = tiny_config(kind, lines);
    const Plan p = make_plan(c);
    return std::make_pair(attention_label(c, p), attention_ratio_warning(c, p));
  };
  // 1:7 of 12 layers is 2 of 12 (1:5): built and warned about.
  auto [label, warning] = both("hybrid", "enc_layers = 12\ndec_layers = 12\nattention_ratio = 0.125\n");
  CHECK(label == "2/12 (1:5)");
  CHECK(warning == "model.attention_ratio = 0.125 (1:7) builds 2/12 (1:5) in the encoder (12 layers, placement "
                   "middle_end); stacks of a multiple of 8 layers build it exactly");
  // 1:15 of 12: 1 of 12 (1:11).
  CHECK(both("hybrid", "enc_layers = 12\ndec_layers = 12\nattention_ratio = 0.0625\n").first == "1/12 (1:11)");
  // Of 16 layers every ratio of the shipped grid is exact.
  for (const char* r : {"0.25", "0.125", "0.0625"}) {
    INFO(r);
    auto [l16, w16] = both("hybrid", std::string("enc_layers = 16\ndec_layers = 16\nattention_ratio = ") + r + "\n");
    CHECK(w16.empty());
    CHECK(l16 == (std::string(r) == "0.25" ? "4/16 (1:3)" : std::string(r) == "0.125" ? "2/16 (1:7)" : "1/16 (1:15)"));
  }
  // Stacks that differ are named apart; the decoder's plan alone is warned about when only it differs.
  auto [mixed, mixed_warning] = both("hybrid", "enc_layers = 12\ndec_layers = 16\nattention_ratio = 0.25\n");
  CHECK(mixed == "enc 3/12 (1:3), dec 4/16 (1:3)");
  CHECK(mixed_warning.empty());
  auto [decoder_only, decoder_warning] = both("decoder_only", "dec_layers = 10\nattention_ratio = 0.25\n");
  CHECK(decoder_only == "3/10 (3:7)");
  CHECK_THAT(decoder_warning, Catch::Contains("(1:3) builds 3/10 (3:7) in the stack (10 layers"));
  // A ratio written with four digits counts as what it rounds (2 of 24 for 0.0833).
  CHECK(both("decoder_only", "dec_layers = 24\nattention_ratio = 0.0833\n").second.empty());
  // Explicit plans and kinds that do not read the ratio: labels only.
  CHECK(both("hybrid", "enc_plan = [\"attention\", \"bimamba\", \"bimamba\"]\n"
                       "dec_plan = [\"mamba\", \"attention+cross\", \"mamba+cross\"]\n") ==
        std::make_pair(std::string("1/3 (1:2)"), std::string()));
  CHECK(both("transformer", "enc_layers = 2\ndec_layers = 2\n") ==
        std::make_pair(std::string("2/2 (attention only)"), std::string()));
  CHECK(both("mamba", "dec_layers = 5\n") == std::make_pair(std::string("0/5 (no attention)"), std::string()));
  CHECK(both("rnnsearch", "").first.empty());
  // plan reports print both.
  const std::string report = plan_report(tiny_config("hybrid", "enc_layers = 12\ndec_layers = 12\n"), 100);
  CHECK_THAT(report, Catch::Contains("placement middle_end; built 2/12 (1:5)\nwarning: model.attention_ratio = 0.125"));
}

TEST_CASE("the registry has exactly the kinds model.kind allows", "[models][registry]") {
  // core's message for a wrong kind lists the allowed values.
  std::string msg;
  try {
    core::parse_experiment("[model]\nkind = \"zzz\"\n", "k.toml");
  } catch (const InputError& e) {
    msg = e.what();
  }
  const std::string lead = "must be one of ";
  auto at = msg.find(lead);
  REQUIRE(at != std::string::npos);
  std::string list = msg.substr(at + lead.size());
  list = list.substr(0, list.find(" ("));
  std::set<std::string> allowed;
  std::stringstream ss(list);
  for (std::string item; std::getline(ss, item, ',');) {
    item.erase(0, item.find_first_not_of(' '));
    allowed.insert(item);
  }
  std::set<std::string> registered;
  for (const ModelKind& k : model_kinds()) registered.insert(k.name);
  CHECK(registered == allowed);
  for (const std::string& kind : registered) {
    ModelPtr m = tiny_model(tiny_config(kind));
    CHECK(m->kind() == kind);
    CHECK(m->parameter_count() == count_parameters(m->config(), kVocab));
  }
}

TEST_CASE("plan reports count what the models hold", "[models][plan]") {
  for (const std::string& extra :
       {std::string(""), std::string("tie_embeddings = false\n"), std::string("dense_connections = 2\nmamba_version = 1\n"),
        std::string("cross_attn = \"gated\"\nmamba_mlp = true\n")}) {
    core::ModelConfig c = tiny_config("hybrid", extra);
    ModelPtr m = tiny_model(c);
    CHECK(count_parameters(c, kVocab) == m->parameter_count());
    std::string r = plan_report(c, kVocab);
    CHECK_THAT(r, Catch::Contains("encoder: 3 layers"));
    CHECK_THAT(r, Catch::Contains("decoder: 4 layers"));
    CHECK_THAT(r, Catch::Contains("total: "));
  }
  std::string r = plan_report(tiny_config("hybrid", "enc_layers = 16\ndec_layers = 16\n"), 32000);
  CHECK_THAT(r, Catch::Contains("   8  attention+mlp"));
  CHECK_THAT(r, Catch::Contains("   3  mamba+cross"));
  CHECK_THAT(r, Catch::Contains("(2 attention, 14 bimamba)"));
}

TEST_CASE("counts remembered across a grid's models are each model's own count", "[models][plan]") {
  // count_parameters remembers each layer's count for the rest of the
  // process: models that differ only in their plans share the counts, and
  // every field that changes a layer's width must give it a count of its own.
  // Every kind and variant here is counted after the ones before it.
  std::vector<std::pair<std::string, std::string>> variants;
  for (const KindVariant& v : model_variants()) variants.push_back({v.kind, v.extra});
  for (const char* extra :
       {"attention_ratio = 0.25\n", "attention_ratio = 0.25\nattention_placement = \"first\"\n",
        "cross_attn_every = 1\n", "enc_layers = 5\ndec_layers = 7\n", "d_state = 16\n", "d_ff = 40\n",
        "mlp = \"relu\"\n", "expand = 1\n", "headdim = 8\n", "ngroups = 2\nheaddim = 8\n", "d_conv = 3\n",
        "n_heads = 4\n", "mamba_version = 1\n", "mamba_version = 1\nd_state = 4\n", "mamba_mlp = true\n",
        "cross_attn = \"gated\"\n", "cross_attn = \"local\"\n", "attn_window = 8\n", "dense_connections = 1\n",
        "d_model = 48\nheaddim = 24\n", "dropout = 0.3\ninit_std = 0.5\nrope_base = 500.0\n"})
    for (const std::string kind : {"hybrid", "decoder_only", "mamba", "transformer"}) variants.push_back({kind, extra});
  std::set<int64_t> counts;
  int64_t counted = 0;
  for (const auto& [kind, extra] : variants) {
    INFO(kind << ": " << extra);
    core::ModelConfig c;
    try {
      c = tiny_config(kind, extra);
    } catch (const InputError&) {
      CHECK(kind != "hybrid");  // a field the other kinds do not have (mamba has no attention)
      continue;
    }
    const ModelPtr m = tiny_model(c);
    ++counted;
    CHECK(count_parameters(c, kVocab) == m->parameter_count());
    counts.insert(m->parameter_count());
  }
  CHECK(counted >= 70);
  CHECK(counts.size() >= 40);  // the variants change counts
}

TEST_CASE("presets hit their parameter counts (32k vocabulary)", "[models][plan][preset]") {
  // Targets of the research plan for the hybrid; baselines of matching size.
  const std::vector<std::pair<std::string, double>> targets = {
      {"small", 25e6}, {"base", 77e6}, {"medium", 200e6}, {"large", 400e6}};
  for (const std::string kind : {"hybrid", "transformer", "mamba", "decoder_only"}) {
    for (const auto& [preset, target] : targets) {
      core::ModelConfig c =
          core::parse_experiment("[model]\nkind = \"" + kind + "\"\npreset = \"" + preset + "\"\n", "p.toml").model;
      const double n = static_cast<double>(count_parameters(c, 32000));
      INFO(kind << " " << preset << ": " << n / 1e6 << "M, target " << target / 1e6 << "M");
      CHECK(std::abs(n - target) / target <= 0.15);
    }
  }
}
