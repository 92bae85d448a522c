// Data-parallel training: 2 ranks (mpirun, `mambamt train --data-parallel`)
// equal 1 rank accumulating over the same global batch.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>

#include "core/store.h"
#include "data/sampler.h"
#include "train/prepare.h"
#include "train_helpers.h"

using namespace mambamt;
namespace fs = std::filesystem;

namespace {

// The global batch order of the first epochs for 1 and for 2 ranks.
bool same_plans(const core::ExperimentConfig& c, const train::PreparedData& p, int64_t epochs) {
  data::CatNOptions cat{c.data.cat_n, c.data.cat_prob, c.data.max_example_tokens};
  data::BatchingOptions b;
  b.max_tokens = c.data.max_tokens;
  b.oversize = data::Oversize::kSkip;
  const int32_t sep = p.tokenizer->specials().sep;
  for (int64_t e = 0; e < epochs; ++e) {
    auto one = data::plan_epoch(p.train_examples, cat, b, sep, static_cast<uint64_t>(c.train.seed), e, 1);
    auto two = data::plan_epoch(p.train_examples, cat, b, sep, static_cast<uint64_t>(c.train.seed), e, 2);
    if (one.batches != two.batches) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("2 data-parallel ranks equal 1 rank with accumulation over the same global batch", "[mpi]") {
  // openmpi-bin, installed by scripts/setup.sh.
  REQUIRE(std::system("command -v mpirun >/dev/null 2>&1") == 0);
  TempDir tmp;
  // No dropout (the ranks draw different dropout masks), and a token budget
  // whose batch count is even, so the 2-rank plan is the 1-rank plan.
  std::vector<std::pair<std::string, std::string>> base{{"model.dropout", "0.0"}, {"train.max_steps", "8"},
                                                        {"train.validate_every", "4"}};
  const std::string shared = tmp.path("shared");
  int64_t budget = 0;
  for (int64_t t = 256; t <= 512 && budget == 0; t += 8) {
    auto over = base;
    over.push_back({"data.max_tokens", std::to_string(t)});
    core::ExperimentConfig c = train_test::tiny_config(over);
    train::PreparedData p = train::prepare_data(c, shared, false);
    if (same_plans(c, p, 2)) budget = t;
  }
  REQUIRE(budget > 0);
  base.push_back({"data.max_tokens", std::to_string(budget)});
  auto one = base, two = base;
  one.push_back({"train.accum_steps", "2"});
  const std::string cfg1 = train_test::write_config(tmp.dir(), "one", one);
  const std::string cfg2 = train_test::write_config(tmp.dir(), "two", two);

  const std::string bin = mambamt_binary();
  CommandResult r1 = run_shell(bin + " train " + cfg1 + " --out " + tmp.path("one") + " --shared " + shared + " --no-eval");
  INFO(r1.output);
  REQUIRE(r1.code == 0);
  CommandResult r2 = run_shell(
      "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 "
      "mpirun --oversubscribe -np 2 " +
      bin + " train " + cfg2 + " --out " + tmp.path("two") + " --shared " + shared + " --no-eval --data-parallel");
  INFO(r2.output);
  REQUIRE(r2.code == 0);

  auto p1 = train_test::final_parameters(tmp.path("one"));
  auto p2 = train_test::final_parameters(tmp.path("two"));
  // fp32 sums in another order: equal to rounding.
  CHECK(train_test::compare_parameters(p1, p2, 1e-4, 1e-6) == "");
  auto s1 = core::ExperimentStore::read(tmp.path("one") + "/store.h5");
  auto s2 = core::ExperimentStore::read(tmp.path("two") + "/store.h5");
  REQUIRE(s1.metrics["train_loss"].size() == s2.metrics["train_loss"].size());
  for (size_t i = 0; i < s1.metrics["train_loss"].size(); ++i)
    CHECK(s1.metrics["train_loss"][i].value == Approx(s2.metrics["train_loss"][i].value).epsilon(1e-5));
  REQUIRE(!s1.metrics["valid_loss"].empty());
  CHECK(s1.metrics["valid_loss"].back().value == Approx(s2.metrics["valid_loss"].back().value).epsilon(1e-4));
  // Only rank 0 wrote: one store, one set of checkpoints.
  CHECK(s2.status.state == core::RunState::completed);
}
