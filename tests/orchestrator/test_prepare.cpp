// `mambamt prepare GRID`: each data setup of a grid prepared once in the run
// directory, found again by a second run and by the experiments' own
// preparation, and bad data files reported per setup with file and line.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include "core/config.h"
#include "orchestrator/grid.h"
#include "orchestrator/prepare.h"
#include "orchestrator/rundir.h"
#include "test_util.h"
#include "train/prepare.h"

using namespace mambamt;
using namespace mambamt::orchestrator;
namespace fs = std::filesystem;

namespace {

// A tiny synthetic-corpus grid in `dir`: two tokenizer sizes x CAT-N 1 and 3
// (2 data setups of 2 points each: CAT-N is applied while training, so it
// changes no prepared data) and a variant whose config is invalid.
std::string synthetic_grid(const std::string& dir) {
  return R"([sweep]
name = "prep"
output_dir = ")" +
         dir + R"("

[base]
model.kind = "hybrid"
model.preset = "tiny"
model.dec_layers = 2
data.corpus = "synthetic"
data.synthetic.train_docs = 20
data.synthetic.valid_docs = 3
data.synthetic.test_docs = 3
data.synthetic.vocab_size = 30
data.synthetic.entities = 10

[grid]
data.vocab_size = [100, 120]
data.cat_n = [1, 3]

[[variant]]
name = "too few decoder layers"
model.cross_attn_every = 4
)";
}

}  // namespace

TEST_CASE("prepare makes each data setup of a grid once, and a second run and the experiments find it",
          "[orchestrator]") {
  TempDir tmp;
  ExpandedGrid g = expand_grid(core::parse_grid(synthetic_grid(tmp.dir()), "prep.toml"));
  REQUIRE(g.points.size() == 5);
  std::vector<std::string> seen;
  PrepareSummary s = prepare_grid(g, [&](const DataSetup& d, size_t i, size_t n) {
    CHECK(n == 2);
    seen.push_back(std::to_string(i) + (d.error.empty() ? "" : " " + d.error));
  });
  CHECK(seen == std::vector<std::string>({"0", "1"}));
  CHECK(s.run_dir == tmp.dir() + "/prep");
  REQUIRE(s.setups.size() == 2);
  CHECK(s.failed() == 0);
  REQUIRE(s.invalid_points.size() == 1);
  CHECK_THAT(s.invalid_points[0], Catch::StartsWith("too few decoder layers: ") && Catch::Contains("cross_attn_every"));
  for (const DataSetup& d : s.setups) {
    INFO(d.key);
    CHECK(d.points.size() == 2);
    CHECK_FALSE(d.tokenizer_found);  // two vocabulary sizes: two tokenizers
    CHECK(fs::exists(d.tokenizer_dir + "/spm.model"));
    CHECK(fs::exists(d.corpus_dir + "/manifest.txt"));
    CHECK(d.train_examples > 0);
    CHECK(d.valid_examples > 0);
    REQUIRE(d.tests.size() == 1);
    CHECK(d.tests[0].first == "test");
    CHECK(d.tests[0].second > 0);
    REQUIRE(d.contrastive.size() == 1);
    CHECK(d.contrastive[0].first == "synthetic");
  }
  CHECK(s.setups[0].corpus_found == false);
  CHECK(s.setups[1].corpus_found == true);  // one corpus, two tokenizers of it
  CHECK(s.setups[0].corpus_dir == s.setups[1].corpus_dir);
  CHECK(s.setups[0].tokenizer_dir != s.setups[1].tokenizer_dir);
  CHECK(s.setups[0].vocab_size == 100);
  CHECK(s.setups[1].vocab_size == 120);
  const std::string text = describe_setup(s.setups[0], 0, 2);
  CHECK_THAT(text, Catch::StartsWith("data setup 1/2 (2 points: "));
  CHECK_THAT(text, Catch::Contains("(trained, vocabulary 100)") && Catch::Contains("(generated)"));
  // Only the shared data: no frozen grid, sweep file or store.
  CHECK_FALSE(fs::exists(s.run_dir + "/sweep.toml"));
  CHECK_FALSE(fs::exists(s.run_dir + "/sweep.h5"));
  CHECK_FALSE(fs::exists(s.run_dir + "/exp"));

  // Again: everything found, nothing rewritten.
  const auto written = fs::last_write_time(s.setups[0].tokenizer_dir + "/spm.model");
  PrepareSummary again = prepare_grid(g);
  REQUIRE(again.setups.size() == 2);
  for (const DataSetup& d : again.setups) {
    CHECK(d.tokenizer_found);
    CHECK(d.corpus_found);
    CHECK(d.error.empty());
  }
  CHECK_THAT(describe_setup(again.setups[0], 0, 2), Catch::Contains("(found, vocabulary 100)"));
  // An experiment of the sweep (its shared directory is the run directory)
  // uses them as they are.
  const core::ExperimentConfig& first = *g.points[0].config;
  train::PreparedData d = train::prepare_data(first, s.run_dir);
  CHECK(d.tokenizer_dir == s.setups[0].tokenizer_dir);
  CHECK(fs::last_write_time(s.setups[0].tokenizer_dir + "/spm.model") == written);
}

TEST_CASE("prepare reports a bad data file with its file and line, prepares the other setups, and exits 1",
          "[orchestrator]") {
  TempDir tmp;
  std::string good;
  for (int i = 0; i < 40; ++i)
    good += "die katze " + std::to_string(i) + " sitzt\tthe cat " + std::to_string(i) + " sits\td" +
            std::to_string(i / 4) + "\n";
  write_text(tmp.path("good.tsv"), good);
  write_text(tmp.path("bad.tsv"), "eins\tone\tA\nzwei ohne tab\ndrei\tthree\tA\n");
  const std::string grid = R"([sweep]
name = "files"
output_dir = ")" + tmp.dir() + R"("

[base]
model.kind = "transformer"
model.preset = "tiny"
data.corpus = "tsv"
data.vocab_size = 60
data.train = ")" + tmp.path("good.tsv") + R"("
data.valid = ")" + tmp.path("good.tsv") + R"("

[[variant]]
name = "bad test set"
data.test = [")" + tmp.path("bad.tsv") + R"("]

[[variant]]
name = "missing contrastive set"
data.contrastive = [")" + tmp.path("missing.tsv") + R"("]
)";
  write_text(tmp.path("files.toml"), grid);
  PrepareSummary s = prepare_grid(expand_grid(core::load_grid(tmp.path("files.toml"))));
  REQUIRE(s.setups.size() == 3);
  CHECK(s.failed() == 2);
  CHECK(s.setups[0].error.empty());
  CHECK(s.setups[0].corpus_dir.empty());  // read from files, nothing generated
  CHECK(s.setups[0].train_examples > 0);
  CHECK(s.setups[1].points == std::vector<std::string>({"bad test set"}));
  CHECK_THAT(s.setups[1].error, Catch::Contains(tmp.path("bad.tsv") + ":2"));
  CHECK_THAT(s.setups[2].error, Catch::Contains(tmp.path("missing.tsv")));
  CHECK_THAT(describe_setup(s.setups[1], 1, 3), Catch::Contains("  error: " + tmp.path("bad.tsv") + ":2"));

  // The command: the same, exit code 1; an experiment file is a usage error.
  CommandResult r = run_shell(mambamt_binary() + " prepare " + tmp.path("files.toml"));
  INFO(r.output);
  CHECK(r.code == 1);
  CHECK_THAT(r.output, Catch::Contains("prepare files (" + tmp.path("files.toml") + "): 3 points"));
  CHECK_THAT(r.output, Catch::Contains("data setup 1/3 (1 point: ") && Catch::Contains("(found, vocabulary 60)"));
  CHECK_THAT(r.output, Catch::Contains("1 of 3 data setups prepared; 2 failed"));
  write_text(tmp.path("one.toml"), "[model]\nkind = \"transformer\"\n");
  CommandResult one = run_shell(mambamt_binary() + " prepare " + tmp.path("one.toml"));
  CHECK(one.code == 2);
  CHECK_THAT(one.output, Catch::Contains("is an experiment, not a grid"));
}
