// `mambamt bench orchestrator --quick` through the built binary: it re-launches
// itself under mpirun, runs every simulated experiment and prints its lines
// with plausible values. The timing targets are not asserted (tests never
// assert on wall-clock time).
#include <catch2/catch.hpp>

#include <regex>
#include <string>

#include "test_util.h"

namespace {

// The first number after `label` on the line that starts with `  <key>`.
double number_after(const std::string& output, const std::string& key, const std::string& label) {
  std::smatch m;
  const std::regex line("\n  " + key + " +([^\n]*)");
  REQUIRE(std::regex_search(output, m, line));
  const std::string text = m[1].str();
  const size_t at = text.find(label);
  INFO("line: " << text << "; label: " << label);
  REQUIRE(at != std::string::npos);
  return std::stod(text.substr(at + label.size()));
}

}  // namespace

TEST_CASE("bench orchestrator --quick runs every simulated experiment and reports its lines", "[mpi]") {
  // Outside the test's own environment a launcher's variables would stop the re-launch.
  CommandResult r = run_shell("env -u OMPI_COMM_WORLD_SIZE -u PMIX_RANK -u PMI_RANK -u PMI_SIZE -u "
                              "MAMBAMT_BENCH_RELAUNCHED " + mambamt_binary() + " bench orchestrator --quick");
  INFO(r.output);
  REQUIRE(r.code == 0);
  const std::string& out = r.output;
  CHECK(out.find("mambamt bench orchestrator: 40 simulated experiments of 100 ms on 4 ranks") != std::string::npos);
  CHECK(out.find("\n  experiments  40 of 40 completed, 40 dispatched, 0 failed, 0 lost ranks\n") != std::string::npos);
  CHECK(out.find(", 40 dispatches:") != std::string::npos);

  const double rtt50 = number_after(out, "baseline", "p50 "), rtt99 = number_after(out, "baseline", "p99 ");
  CHECK(rtt50 > 0);
  CHECK(rtt50 <= rtt99);
  const double d50 = number_after(out, "dispatch", "p50 "), d99 = number_after(out, "dispatch", "p99 "),
               dmax = number_after(out, "dispatch", "max ");
  CHECK(d50 >= 0);
  CHECK(d50 <= d99);
  CHECK(d99 <= dmax);
  CHECK(number_after(out, "ratio", "p50 ") >= 0);

  const double busy = number_after(out, "utilisation", "busy / rank time ");
  const double slept = number_after(out, "utilisation", "experiment time / rank time ");
  CHECK(busy > 0);
  CHECK(busy <= 1);
  CHECK(slept > 0);
  CHECK(slept <= 1);

  // 40 x 100 ms on 4 ranks: at least 1 s of sleeping per rank.
  CHECK(number_after(out, "wall", "ideal 40 x 100 ms / 4 = ") == Approx(1.0));
  CHECK(number_after(out, "wall", "") >= 1.0);
  CHECK(std::regex_search(out, std::regex("\n  targets      dispatch p99 < 20 ms: (met|MISSED) \\([0-9.]+ ms\\); "
                                          "utilisation >= 90%: (met|MISSED) \\([0-9.]+%\\)\n")));
}

TEST_CASE("bench orchestrator rejects a bad argument before starting MPI", "[bench]") {
  CommandResult r = run_shell(mambamt_binary() + " bench orchestrator --ranks 1");
  CHECK(r.code == 2);
  CHECK(r.output.find("--ranks must be an integer >= 2") != std::string::npos);
  r = run_shell(mambamt_binary() + " bench orchestrator --bogus");
  CHECK(r.code == 2);
  CHECK(r.output.find("unknown argument '--bogus'") != std::string::npos);
}
