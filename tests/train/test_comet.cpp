// COMET through the `comet-score` command (train::comet_score): the system
// score and every segment's read from its output and nothing else, its
// device, and the notes when it is missing, fails or prints no segments. The
// command is the stand-in of tests/train/comet (same command line and output
// as COMET 2.x; see the script).
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>

#include "test_util.h"
#include "train/evaluate.h"

using namespace mambamt;
namespace fs = std::filesystem;

namespace {

const std::vector<std::string> kSources = {"ta kuga pa", "ul pa", "en nuvi"};
const std::vector<std::string> kHypotheses = {"ro haukpis Rameo", "hen unim", "un bael sasloe"};
const std::vector<std::string> kReferences = {"ro haukpis Rameo dor", "hen unim lathit", "un bael"};

}  // namespace

TEST_CASE("comet_score reads every segment's score and the system score, not the logs on stderr", "[train]") {
  TempDir tmp;
  ScopedEnv path("PATH", path_with_comet_standin().c_str());
  ScopedEnv log("COMET_STANDIN_LOG", tmp.path("calls.txt").c_str());
  const std::string work = tmp.path("hyp/.comet");
  const train::CometScores cpu = train::comet_score(kSources, kHypotheses, kReferences, work, false);
  INFO(cpu.note);
  // Each reference's words held by the translation: 3/4, 2/3, 2/2 (printed to 4 decimals).
  REQUIRE(cpu.segments.size() == 3);
  CHECK(cpu.segments[0] == Approx(0.75));
  CHECK(cpu.segments[1] == Approx(0.6667));
  CHECK(cpu.segments[2] == Approx(1.0));
  CHECK(cpu.system == Approx(0.8056));
  CHECK(cpu.note.empty());
  CHECK_FALSE(fs::exists(work));  // its files are removed
  // On the GPU when the experiment evaluates on one.
  const train::CometScores gpu = train::comet_score(kSources, kHypotheses, kReferences, work, true);
  CHECK(gpu.system == Approx(cpu.system));
  const std::string calls = read_text(tmp.path("calls.txt"));
  CHECK_THAT(calls, Catch::Contains(" --gpus 0\n") && Catch::EndsWith(" --gpus 1\n"));
  CHECK(calls.find("--only_system") == std::string::npos);  // segment scores wanted
  CHECK(calls.find("--model") == std::string::npos);        // its default model
  // eval.comet_model pins the model.
  const train::CometScores pinned =
      train::comet_score(kSources, kHypotheses, kReferences, work, false, "Unbabel/wmt22-comet-da");
  CHECK(pinned.system == Approx(cpu.system));
  CHECK_THAT(read_text(tmp.path("calls.txt")), Catch::EndsWith(" --model Unbabel/wmt22-comet-da --gpus 0\n"));
}

TEST_CASE("comet_score without segment scores, failing or missing: the system score alone, or NaN and why",
          "[train]") {
  TempDir tmp;
  const std::string work = tmp.path(".comet");
  {
    ScopedEnv path("PATH", path_with_comet_standin().c_str());
    ScopedEnv only("COMET_STANDIN_SYSTEM_ONLY", "1");
    const train::CometScores s = train::comet_score(kSources, kHypotheses, kReferences, work, false);
    CHECK(s.system == Approx(0.8056));
    CHECK(s.segments.empty());
  }
  {
    ScopedEnv path("PATH", path_with_comet_standin().c_str());
    ScopedEnv fail("COMET_STANDIN_FAIL", "1");
    const train::CometScores s = train::comet_score(kSources, kHypotheses, kReferences, work, false);
    CHECK(std::isnan(s.system));
    CHECK(s.segments.empty());
    CHECK_THAT(s.note, Catch::StartsWith("comet-score failed: ") && Catch::Contains("Max retries exceeded"));
    CHECK_FALSE(fs::exists(work));
  }
  {
    // Line counts that differ: the command fails, and says so.
    ScopedEnv path("PATH", path_with_comet_standin().c_str());
    const train::CometScores s = train::comet_score(kSources, {"one"}, kReferences, work, false);
    CHECK(std::isnan(s.system));
    CHECK_THAT(s.note, Catch::Contains("3 sources, 1 translations, 3 references"));
  }
  {
    fs::create_directories(tmp.path("empty"));
    ScopedEnv path("PATH", tmp.path("empty").c_str());
    const train::CometScores s = train::comet_score(kSources, kHypotheses, kReferences, work, false);
    CHECK(std::isnan(s.system));
    CHECK(s.note == "comet-score not found on PATH: COMET skipped");
  }
}
