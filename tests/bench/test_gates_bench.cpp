// `mambamt bench gates --quick`: a layer row per source length and closed
// share, with the bytes' prediction, and a model row per source length. The
// timings themselves are not asserted (tests never assert on wall-clock time).
#include <catch2/catch.hpp>

#include <regex>
#include <sstream>
#include <string>

#include "bench/gates_bench.h"
#include "core/error.h"

TEST_CASE("bench gates prints the layer's and the model's rows", "[bench]") {
  std::ostringstream os;
  REQUIRE(mambamt::bench::run_gates_bench({"--quick", "--threads", "1", "--rounds", "1"}, os) == 0);
  const std::string out = os.str();
  INFO(out);
  std::smatch m;
  for (const std::string source : {"32", "64"}) {
    for (const std::string closed : {"0", "50", "100"}) {
      // source, closed %, off us, skip us, ratio, bytes ratio
      const std::regex row("\n +" + source + " +" + closed + "% +([0-9.]+) +([0-9.]+) +([0-9.]+)x +([0-9.]+)x\n");
      REQUIRE(std::regex_search(out, m, row));
      CHECK(std::stod(m[1].str()) > 0);
      CHECK(std::stod(m[2].str()) > 0);
      const double bytes = std::stod(m[4].str());
      if (closed == "0") CHECK(bytes == 1.0);  // skipping on, nothing closed: the same bytes
      if (closed == "50") CHECK((bytes > 0.5 && bytes < 1.0));  // the weights are read either way
      if (closed == "100") CHECK(bytes == 0.0);  // the gate's weights only
    }
    // source, open tok/s, closed tok/s, speedup
    REQUIRE(std::regex_search(out, m, std::regex("\n +" + source + " +([0-9]+) +([0-9]+) +([0-9.]+)x\n")));
    CHECK(std::stod(m[1].str()) > 0);
    CHECK(std::stod(m[2].str()) > 0);
  }
}

TEST_CASE("bench gates rejects bad arguments", "[bench]") {
  std::ostringstream out;
  CHECK_THROWS_AS(mambamt::bench::run_gates_bench({"--src", "0"}, out), mambamt::UsageError);
  CHECK_THROWS_AS(mambamt::bench::run_gates_bench({"--preset", "huge"}, out), mambamt::UsageError);
  CHECK_THROWS_AS(mambamt::bench::run_gates_bench({"--nope"}, out), mambamt::UsageError);
  CHECK(out.str().empty());
}
