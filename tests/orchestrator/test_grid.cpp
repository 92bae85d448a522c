#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <iomanip>
#include <sstream>
#include <set>

#include "core/config.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/hdf5.h"
#include "core/store.h"
#include "orchestrator/claim.h"
#include "orchestrator/grid.h"
#include "orchestrator/rundir.h"
#include "orchestrator/status.h"
#include "orchestrator/sweep.h"
#include "test_util.h"

using namespace mambamt;
using namespace mambamt::orchestrator;
namespace fs = std::filesystem;

namespace {

const char* kGrid = R"([sweep]
name = "g"
seeds = [1, 2]

[base]
model.d_model = 64
model.n_heads = 2
model.headdim = 16

[grid]
model.attention_ratio = [0.25, 0.125]
model.d_state = [16, 32, 64]

[[variant]]
name = "transformer"
model.kind = "transformer"

[[exclude]]
model.attention_ratio = 0.25
model.d_state = 64
)";

// kGrid expanded, its run directory prepared under `dir` with its sweep record.
struct GridRun {
  ExpandedGrid g;
  RunDirectory dir;
  explicit GridRun(const std::string& dir_path)
      : g(expand(dir_path)), dir(prepare_run_directory(g, false)) {
    write_sweep_record(dir.sweep_file(), sweep_record_for(g));
  }
  static ExpandedGrid expand(const std::string& dir_path) {
    std::string text = std::string(kGrid);
    text.replace(text.find("[base]"), 6, "output_dir = \"" + dir_path + "\"\n\n[base]");
    return expand_grid(core::parse_grid(text, "g.toml"));
  }
};

}  // namespace

TEST_CASE("a cartesian grid expands to the product times seeds, plus variants, minus excludes", "[orchestrator]") {
  ExpandedGrid g = expand_grid(core::parse_grid(kGrid, "g.toml"));
  // (2 x 3 - 1 excluded) x 2 seeds + 1 variant x 2 seeds.
  REQUIRE(g.points.size() == 12);
  CHECK(g.axis_keys == std::vector<std::string>({"model.attention_ratio", "model.d_state"}));
  CHECK(g.base_values == std::vector<std::string>({"0.125", "64"}));
  std::set<std::string> ids;
  for (auto& p : g.points) {
    CHECK(p.valid());
    CHECK(p.id == p.config->id());
    CHECK(p.config->train.seed == p.seed);
    ids.insert(p.id);
    CHECK_FALSE((p.config->model.attention_ratio == 0.25 && p.config->model.d_state == 64));
  }
  CHECK(ids.size() == 12);
  CHECK(g.points[0].name == "model.attention_ratio=0.25 model.d_state=16");
  CHECK(g.points[0].axis_values == std::vector<std::string>({"0.25", "16"}));
  CHECK(g.points.back().variant == "transformer");
  CHECK(g.points.back().config->model.kind == "transformer");
  // Expansion is deterministic: the same grid gives the same ids in the same order.
  ExpandedGrid again = expand_grid(core::parse_grid(kGrid, "other-name.toml"));
  for (size_t i = 0; i < g.points.size(); ++i) CHECK(again.points[i].id == g.points[i].id);
}

TEST_CASE("one_factor varies each axis alone around the base", "[orchestrator]") {
  std::string text = kGrid;
  text.replace(text.find("seeds = [1, 2]"), 14, "seeds = [1]\ndesign = \"one_factor\"");
  text = text.substr(0, text.find("[[exclude]]"));
  ExpandedGrid g = expand_grid(core::parse_grid(text, "g.toml"));
  // base (0.125, 64) + ratio 0.25 + d_state 16, 32 + the variant.
  REQUIRE(g.points.size() == 5);
  CHECK(g.points[0].name == "base");
  CHECK(g.points[0].axis_values == std::vector<std::string>({"0.125", "64"}));
  CHECK(g.points[1].name == "model.attention_ratio=0.25");
  CHECK(g.points[2].name == "model.d_state=16");
  CHECK(g.points[3].name == "model.d_state=32");
}

TEST_CASE("an invalid combination becomes a failed point with a stable id", "[orchestrator]") {
  const char* text = R"([sweep]
name = "bad"
[base]
model.d_model = 64
model.n_heads = 2
model.headdim = 16
model.dec_layers = 2
[grid]
model.cross_attn_every = [1, 4]
)";
  ExpandedGrid g = expand_grid(core::parse_grid(text, "bad.toml"));
  REQUIRE(g.points.size() == 2);
  CHECK(g.points[0].valid());
  CHECK_FALSE(g.points[1].valid());
  CHECK(g.points[1].id.size() == 12);
  CHECK(g.points[1].id[0] == 'x');
  CHECK(g.points[1].error == "bad.toml:9:30: model.cross_attn_every = 4 exceeds model.dec_layers = 2: the decoder "
                             "would have no cross-attention");
  CHECK(expand_grid(core::parse_grid(text, "bad.toml")).points[1].id == g.points[1].id);
}

TEST_CASE("points that resolve to the same experiment run once", "[orchestrator]") {
  const char* text = R"([sweep]
name = "dup"
[base]
model.d_state = 32
[grid]
model.d_state = [32, 64]
[[variant]]
name = "same-as-base"
model.d_state = 32
)";
  ExpandedGrid g = expand_grid(core::parse_grid(text, "dup.toml"));
  CHECK(g.points.size() == 2);
  REQUIRE(g.duplicates.size() == 1);
  CHECK(g.duplicates[0].find("same-as-base") == 0);
}

TEST_CASE("the dry run shows which points share a training and counts its cost once", "[orchestrator]") {
  TempDir tmp;
  const std::string text = "[sweep]\nname = \"beams\"\noutput_dir = \"" + tmp.path("runs") +
                           "\"\n[base]\nmodel.d_state = 32\n[grid]\neval.beam_size = [1, 4]\nmodel.d_state = [16, 32]\n";
  ExpandedGrid g = expand_grid(core::parse_grid(text, "beams.toml"));
  REQUIRE(g.points.size() == 4);
  const std::string shared = dry_run_listing(g, 1, false);
  INFO(shared);
  size_t lines = 0;
  for (size_t at = shared.find("trains once with "); at != std::string::npos; at = shared.find("trains once with ", at + 1))
    ++lines;
  CHECK(lines == 2);
  CHECK_THAT(shared, Catch::Contains("4 of 4 points to run; 2 training(s), estimated total "));
  // The total counts each training once: the two trainings' costs.
  double cost = 0;
  std::set<std::string> trainings;
  for (auto& p : g.points)
    if (trainings.insert(p.config->training_id()).second) cost += p.cost;
  std::ostringstream total;
  total << std::setprecision(3) << cost;
  CHECK_THAT(shared, Catch::Contains("estimated total " + total.str() + " PFLOP"));
  // Without sharing every point trains.
  ExpandedGrid alone = expand_grid(core::parse_grid(text, "beams.toml"));
  alone.grid.sweep.share_training = false;
  const std::string apart = dry_run_listing(alone, 1, false);
  CHECK(apart.find("trains once with") == std::string::npos);
  CHECK_THAT(apart, Catch::Contains("4 of 4 points to run; 4 training(s)"));
}

TEST_CASE("the dry run states the attention layers as built and warns of ratios it cannot build", "[orchestrator]") {
  TempDir tmp;
  const std::string text = "[sweep]\nname = \"ratios\"\noutput_dir = \"" + tmp.path("runs") +
                           "\"\n[base]\nmodel.kind = \"hybrid\"\nmodel.preset = \"tiny\"\nmodel.enc_layers = 12\n"
                           "model.dec_layers = 12\nmodel.attention_ratio = 0.25\n"
                           "[grid]\nmodel.attention_ratio = [0.25, 0.125]\n";
  ExpandedGrid g = expand_grid(core::parse_grid(text, "ratios.toml"));
  REQUIRE(g.points.size() == 2);
  CHECK(g.points[0].attention == "3/12 (1:3)");
  CHECK(g.points[0].attention_warning.empty());
  CHECK(g.points[1].attention == "2/12 (1:5)");
  const std::string listing = dry_run_listing(g, 1, false);
  INFO(listing);
  CHECK_THAT(listing, Catch::Contains("model.attention_ratio=0.125  attention 2/12 (1:5)\n"));
  CHECK_THAT(listing, Catch::Contains("model.attention_ratio=0.25  attention 3/12 (1:3)\n"));
  CHECK_THAT(listing, Catch::Contains("\nwarning: model.attention_ratio = 0.125 (1:7) builds 2/12 (1:5) in the encoder "
                                      "(12 layers, placement middle_end); stacks of a multiple of 8 layers build it "
                                      "exactly (1 point: model.attention_ratio=0.125)\n"));
  CHECK(attention_warnings(g).size() == 1);
}

TEST_CASE("cost estimates order bigger models first", "[orchestrator]") {
  auto small = core::parse_experiment("[model]\npreset = \"tiny\"\n", "a");
  auto big = core::parse_experiment("[model]\npreset = \"base\"\n", "b");
  CHECK(estimate_cost_pflop(big) > 10 * estimate_cost_pflop(small));
  CHECK(estimate_cost_pflop(small) > 0);
}

TEST_CASE("claims are exclusive, refreshed, released and taken over when stale", "[orchestrator]") {
  TempDir tmp;
  std::string dir = tmp.path("exp/a");
  ClaimOwner me = this_process("", 0);
  auto g1 = try_claim(dir, me, 60);
  REQUIRE(g1);
  CHECK(*try_claim(dir, me, 60) == *g1);  // ours already
  // Another live owner on another host: not ours, not stale.
  ClaimOwner other = me;
  other.host = "elsewhere";
  other.pid = 1;
  CHECK_FALSE(try_claim(dir, other, 60).has_value());
  CHECK(refresh_claim(dir, *g1));
  // After the timeout the other owner takes it over (generation + 1), and we
  // notice that we lost it.
  auto g2 = try_claim(dir, other, -1);
  REQUIRE(g2);
  CHECK(*g2 == *g1 + 1);
  CHECK_FALSE(refresh_claim(dir, *g1));
  release_claim(dir, *g1);  // not ours any more: no effect
  CHECK(current_claim(dir)->generation == *g2);
  release_claim(dir, *g2);
  CHECK_FALSE(current_claim(dir).has_value());

  // A claim of a dead process on this host is stale at once.
  write_text(dir + "/claim.7", "host " + me.host + "\npid 999999\njob \nrestart 0\ntime 0\n");
  auto c = current_claim(dir);
  REQUIRE(c);
  CHECK(claim_is_stale(*c, me, 1e9));
  CHECK(*try_claim(dir, me, 1e9) == 8);
  // So is a claim of a killed process its parent has not reaped yet (a
  // zombie), and not that of a live one.
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  REQUIRE(child > 0);
  ClaimInfo zombie{9, me, 0.0, ""};
  zombie.owner.pid = child;
  bool stale = false;
  for (int i = 0; i < 100 && !stale; ++i) {  // until the child has exited
    stale = claim_is_stale(zombie, me, 1e9);
    if (!stale) ::usleep(10000);
  }
  CHECK(stale);
  CHECK(::kill(child, 0) == 0);  // still there, unreaped
  ::waitpid(child, nullptr, 0);
  ClaimInfo live{9, me, 0.0, ""};
  live.owner.pid = ::getppid();
  CHECK_FALSE(claim_is_stale(live, me, 1e9));
  // The same Slurm job after a requeue: the old claim is stale at once.
  ClaimOwner job = this_process("4242", 0);
  ClaimInfo old{3, job, 0.0, ""};
  old.owner.host = "node9";
  CHECK(claim_is_stale(old, this_process("4242", 1), 1e9));
  CHECK_FALSE(claim_is_stale(old, this_process("4243", 1), 1e9));
}

TEST_CASE("a run directory refuses a changed grid unless told", "[orchestrator]") {
  TempDir tmp;
  std::string text = std::string(kGrid);
  text.replace(text.find("[base]"), 6, "output_dir = \"" + tmp.dir() + "\"\n\n[base]");
  ExpandedGrid g = expand_grid(core::parse_grid(text, "g.toml"));
  RunDirectory dir = prepare_run_directory(g, false);
  CHECK(dir.root() == tmp.dir() + "/g");
  CHECK(read_text(dir.frozen_grid()) == text);
  CHECK_NOTHROW(prepare_run_directory(g, false));
  // A comment changes nothing.
  std::string commented = text + "# a comment\n";
  CHECK_NOTHROW(prepare_run_directory(expand_grid(core::parse_grid(commented, "g.toml")), false));
  // A new axis value adds points: refused, then allowed.
  std::string more = commented;
  more.replace(more.find("[16, 32, 64]"), 12, "[16, 32, 64, 128]");
  ExpandedGrid g2 = expand_grid(core::parse_grid(more, "g.toml"));
  // The dry run says so before the sweep refuses it; not for the frozen grid's own points.
  CHECK_THAT(dry_run_listing(g2, 1, false),
             Catch::Contains("\ng.toml: the grid differs from the one this sweep was started with (" +
                             dir.frozen_grid() + "); new points: ") &&
                 Catch::Contains("; the sweep refuses it without --allow-grid-change\n"));
  CHECK(grid_change(expand_grid(core::parse_grid(commented, "g.toml"))).empty());
  CHECK(dry_run_listing(g, 1, false).find("differs") == std::string::npos);
  try {
    prepare_run_directory(g2, false);
    FAIL("a changed grid was accepted");
  } catch (const InputError& e) {
    std::string m = e.what();
    CHECK(m.find("g.toml: the grid differs from the one this sweep was started with") == 0);
    CHECK(m.find("new points: ") != std::string::npos);
    CHECK(m.find("--allow-grid-change") != std::string::npos);
  }
  CHECK(read_text(dir.frozen_grid()) == commented);
  CHECK_NOTHROW(prepare_run_directory(g2, true));
  CHECK(read_text(dir.frozen_grid()) == more);
  CHECK(fs::exists(dir.frozen_grid() + ".1"));
}

TEST_CASE("the sweep file round-trips its points", "[orchestrator]") {
  TempDir tmp;
  ExpandedGrid g = expand_grid(core::parse_grid(kGrid, "g.toml"));
  SweepRecord r = sweep_record_for(g);
  r.job_ids = {"11", "12"};
  r.requeues = 1;
  write_sweep_record(tmp.path("sweep.h5"), r);
  auto back = read_sweep_record(tmp.path("sweep.h5"));
  REQUIRE(back);
  CHECK(back->ids == r.ids);
  CHECK(back->names == r.names);
  CHECK(back->seeds == r.seeds);
  CHECK(back->axes == r.axes);
  CHECK(back->axis_values == r.axis_values);
  CHECK(back->base_values == r.base_values);
  CHECK(back->job_ids == r.job_ids);
  update_sweep_record(tmp.path("sweep.h5"), r, [](SweepRecord& x) {
    x.job_ids.push_back("13");
    x.state = "interrupted";
  });
  back = read_sweep_record(tmp.path("sweep.h5"));
  CHECK(back->job_ids == std::vector<std::string>({"11", "12", "13"}));
  CHECK(back->state == "interrupted");
  CHECK_FALSE(fs::exists(tmp.path("sweep.h5.lock")));

  // A damaged sweep file is kept aside, not overwritten, and written again
  // from the grid (its history starts again).
  const std::string damaged = read_text(tmp.path("sweep.h5")).substr(0, 1500);
  write_text(tmp.path("sweep.h5"), damaged);
  CHECK_THROWS_AS(read_sweep_record(tmp.path("sweep.h5")), InputError);
  update_sweep_record(tmp.path("sweep.h5"), r, [](SweepRecord& x) { x.job_ids.push_back("14"); });
  CHECK(read_text(tmp.path("sweep.h5.unreadable")) == damaged);
  back = read_sweep_record(tmp.path("sweep.h5"));
  REQUIRE(back);
  CHECK(back->ids == r.ids);
  CHECK(back->job_ids == std::vector<std::string>({"11", "12", "14"}));
}

TEST_CASE("point states follow the stores and status reports them", "[orchestrator]") {
  TempDir tmp;
  GridRun run(tmp.dir());
  const ExpandedGrid& g = run.g;
  const RunDirectory& dir = run.dir;
  auto make = [&](size_t i, core::RunState state, int64_t attempts) {
    fs::create_directories(dir.exp_dir(g.points[i].id));
    auto st = core::ExperimentStore::create(dir.store_path(g.points[i].id), {g.points[i].id, g.points[i].name, "g", ""});
    core::StoreStatus s = st.status();
    s.state = state;
    s.attempts = attempts;
    s.last_error = state == core::RunState::failed ? "diverged at step 7 (loss=nan)" : "";
    st.set_status(s);
    st.commit();
  };
  make(0, core::RunState::completed, 1);
  make(1, core::RunState::failed, 1);
  make(2, core::RunState::failed, 3);
  make(3, core::RunState::interrupted, 1);
  CHECK(point_state(dir, g.points[0], 2, false).need == Need::done);
  CHECK(point_state(dir, g.points[1], 2, false).need == Need::run);
  CHECK(point_state(dir, g.points[2], 2, false).need == Need::failed_final);
  CHECK(point_state(dir, g.points[2], 2, true).need == Need::run);
  CHECK(point_state(dir, g.points[3], 2, false).need == Need::run);
  CHECK(point_state(dir, g.points[4], 2, false).need == Need::run);
  write_text(dir.store_path(g.points[5].id), "garbage");
  PointState bad = point_state(dir, g.points[5], 2, false);
  CHECK(bad.need == Need::failed_final);
  CHECK(bad.unreadable.find("not an HDF5 file") != std::string::npos);
  // A completed store with one byte changed on disk: its seal does not hold,
  // so it is unreadable too and left alone, not run again over it.
  make(6, core::RunState::completed, 1);
  std::string bytes = read_text(dir.store_path(g.points[6].id));
  bytes[bytes.size() / 2] ^= 0x04;
  write_text(dir.store_path(g.points[6].id), bytes);
  PointState changed = point_state(dir, g.points[6], 2, false);
  CHECK(changed.need == Need::failed_final);
  CHECK(changed.unreadable.find(dir.store_path(g.points[6].id) + ": damaged: its bytes changed") != std::string::npos);
  CHECK(read_text(dir.store_path(g.points[6].id)) == bytes);

  std::string report = status_report(dir.root());
  INFO(report);
  CHECK(report.find("12 experiments:") != std::string::npos);
  CHECK(report.find("1 completed") != std::string::npos);
  CHECK(report.find("2 failed") != std::string::npos);
  CHECK(report.find("1 interrupted") != std::string::npos);
  CHECK(report.find("2 unreadable") != std::string::npos);
  CHECK(report.find("6 pending") != std::string::npos);
  CHECK(report.find("model.attention_ratio=0.25 model.d_state=16  seed 2") != std::string::npos);
  CHECK(report.find("error: diverged at step 7 (loss=nan)") != std::string::npos);
  CHECK(report.find("without a seal") == std::string::npos);
  // A store without its seal (as h5py writes one) reads, and status says how to seal it.
  write_text(dir.store_path(g.points[1].id), read_text(dir.store_path(g.points[1].id)).substr(core::h5::kSealBytes));
  const std::string legacy = status_report(dir.root());
  INFO(legacy);
  CHECK(legacy.find("2 failed") != std::string::npos);
  CHECK_THAT(legacy, Catch::Contains("\n1 store(s) without a seal (written by h5py or an older mambamt), so damage to "
                                     "them is not caught: `mambamt store seal " + dir.root() + "` seals them\n"));
  // A damaged sweep file: reported, and the experiments found under exp/.
  write_text(dir.sweep_file(), "damaged");
  const std::string damaged = status_report(dir.root());
  INFO(damaged);
  CHECK_THAT(damaged, Catch::Contains(dir.sweep_file() + ": not an HDF5 file (experiments listed from exp/)"));
  CHECK_THAT(damaged, Catch::Contains("error: diverged at step 7 (loss=nan)"));
  CHECK(read_text(dir.sweep_file()) == "damaged");  // status only reads
  CHECK_THROWS_WITH(status_report(tmp.path("nope")), Catch::Contains("no such run directory"));
  // A directory that holds no sweep is not reported as an empty one.
  std::filesystem::create_directories(tmp.path("empty"));
  CHECK_THROWS_WITH(status_report(tmp.path("empty")), Catch::Contains("not a run directory"));
}

TEST_CASE("status's ETA: the running experiments' remaining steps at their own pace, the mean completed time per "
          "experiment left, over the running ones",
          "[orchestrator]") {
  TempDir tmp;
  GridRun run(tmp.dir());
  const ExpandedGrid& g = run.g;
  const RunDirectory& dir = run.dir;
  const size_t n = g.points.size();
  REQUIRE(n == 12);
  auto make = [&](size_t i, core::RunState state, double started, double finished, int64_t step) {
    const std::string path = dir.store_path(g.points[i].id);
    fs::create_directories(dir.exp_dir(g.points[i].id));
    auto st = fs::exists(path) ? core::ExperimentStore::open(path)
                               : core::ExperimentStore::create(path, {g.points[i].id, g.points[i].name, "g", ""});
    core::StoreStatus s = st.status();
    s.state = state;
    s.attempts = 1;
    s.started = started;
    s.finished = finished;
    s.step = step;
    s.total_steps = 100;
    st.set_status(s);
    st.commit();
  };
  // Nothing completed yet: no mean, so no ETA.
  const double now = core::unix_time();
  make(0, core::RunState::running, now - 300, 0, 75);
  std::string report = status_report(dir.root());
  INFO(report);
  CHECK_THAT(report, Catch::Contains("\nETA - at the current parallelism (1 running, no experiment finished yet)\n"));

  // Completed in 100 s and 300 s: 200 s each for the 9 left to start (8
  // without a store, 1 interrupted); the running one has done 75 of its 100
  // steps in 300 s, so 100 s to go. One running: (100 + 9 * 200) / 1 s.
  make(1, core::RunState::completed, 1000, 1100, 100);
  make(2, core::RunState::completed, 2000, 2300, 100);
  make(3, core::RunState::interrupted, 3000, 0, 40);
  report = status_report(dir.root());
  INFO(report);
  CHECK_THAT(report, Catch::Contains("\nETA 31m40s at the current parallelism (1 running, mean 3m20s per experiment)\n"));

  // A second one running (50 of 100 steps in 100 s: 100 s to go) leaves 8 to
  // start, at two at a time: (100 + 100 + 8 * 200) / 2 s.
  make(4, core::RunState::running, core::unix_time() - 100, 0, 50);
  report = status_report(dir.root());
  INFO(report);
  CHECK_THAT(report, Catch::Contains("\nETA 15m00s at the current parallelism (2 running, mean 3m20s per experiment)\n"));

  // Nothing left: no ETA line.
  for (size_t i = 0; i < n; ++i) make(i, core::RunState::completed, 1000, 1100, 100);
  report = status_report(dir.root());
  INFO(report);
  CHECK(report.find("ETA") == std::string::npos);
  CHECK_THAT(report, Catch::Contains("12 experiments: 12 completed"));
}

TEST_CASE("configs/demo.toml expands into its 8 points, every one valid, one axis at a time", "[orchestrator][grid]") {
  // The README's main job runs this grid: a change that breaks one of its
  // points should fail here, not in the demo.
  const ExpandedGrid e = expand_grid(core::load_grid(source_dir() + "/configs/demo.toml"));
  CHECK(e.grid.sweep.name == "demo");
  CHECK(e.axis_keys ==
        std::vector<std::string>{"model.attention_ratio", "model.cross_attn_every", "model.d_state", "data.cat_n"});
  REQUIRE(e.points.size() == 8);
  CHECK(e.duplicates.empty());
  std::set<std::string> ids, variants;
  for (const GridPoint& p : e.points) {
    INFO(p.name << ": " << p.error);
    REQUIRE(p.valid());
    CHECK(p.cost > 0);
    ids.insert(p.id);
    if (!p.variant.empty()) variants.insert(p.variant);
    // One factor at a time: a grid point changes at most one axis from the base.
    if (p.variant.empty()) {
      int changed = 0;
      for (size_t a = 0; a < e.axis_keys.size(); ++a) changed += p.axis_values[a] != e.base_values[a] ? 1 : 0;
      CHECK(changed <= 1);
    }
  }
  CHECK(ids.size() == 8);
  CHECK(variants == std::set<std::string>{"transformer", "mamba", "hybrid-sent"});
  // The sentence-level twin trains on single sentences, every other hybrid on windows of 2.
  for (const GridPoint& p : e.points)
    CHECK(p.config->data.context_sentences == (p.variant == "hybrid-sent" ? 0 : 2));
}
