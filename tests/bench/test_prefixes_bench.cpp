// `mambamt bench prefixes --quick`: a row per model with sane values, the
// prefilled search agreeing with the stepped one. The timings themselves are
// not asserted (tests never assert on wall-clock time).
#include <catch2/catch.hpp>

#include <regex>
#include <sstream>
#include <string>

#include "bench/prefixes_bench.h"
#include "core/error.h"

TEST_CASE("bench prefixes prints a row per model, the two searches agreeing", "[bench]") {
  std::ostringstream os;
  REQUIRE(mambamt::bench::run_prefixes_bench({"--quick", "--threads", "1", "--rounds", "1"}, os) == 0);
  const std::string out = os.str();
  INFO(out);
  std::smatch m;
  REQUIRE(std::regex_search(out, m, std::regex("prefixes 4\\.\\.24 tokens \\(drawn: ([0-9]+)\\.\\.([0-9]+)\\)")));
  const int shortest = std::stoi(m[1].str()), longest = std::stoi(m[2].str());
  CHECK(shortest >= 4);
  CHECK(longest <= 24);
  CHECK(shortest < longest);  // the seed draws different lengths
  for (const std::string model : {"transformer", "hybrid", "mamba"}) {
    // model, steps stepped/prefilled, stepped s, prefilled s, tok/s a/b, speedup, same
    const std::regex row("\n" + model +
                         " +([0-9]+)/([0-9]+) +([0-9.]+) +([0-9.]+) +([0-9]+)/ *([0-9]+) +([0-9.]+)x +(yes|NO)\n");
    REQUIRE(std::regex_search(out, m, row));
    CHECK(std::stoi(m[1].str()) == longest - shortest + 6);
    CHECK(std::stoi(m[2].str()) == 6);  // every kind here prefills ragged prefixes: only the output is stepped
    CHECK(std::stod(m[3].str()) > 0);
    CHECK(std::stod(m[4].str()) > 0);
    CHECK(std::stod(m[7].str()) > 0);
    CHECK(m[8].str() == "yes");
  }
}

TEST_CASE("bench prefixes rejects bad arguments", "[bench]") {
  std::ostringstream out;
  CHECK_THROWS_AS(mambamt::bench::run_prefixes_bench({"--prefixes", "9,3"}, out), mambamt::UsageError);
  CHECK_THROWS_AS(mambamt::bench::run_prefixes_bench({"--prefixes", "9"}, out), mambamt::UsageError);
  CHECK_THROWS_AS(mambamt::bench::run_prefixes_bench({"--beam", "0"}, out), mambamt::UsageError);
  CHECK_THROWS_AS(mambamt::bench::run_prefixes_bench({"--nope"}, out), mambamt::UsageError);
  CHECK(out.str().empty());
}
