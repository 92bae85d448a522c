// `mambamt bench kernels` at one small shape: a row per op and pass with sane
// values, (a) agreeing with (b) and (c), the floor from the measured copy
// bandwidth; and its usage errors. Timings themselves are not asserted.
// LibTorch before Catch: both define CHECK, and Catch's must win.
#include <torch/torch.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "bench/kernels_bench.h"
#include "core/error.h"

namespace {

// The cells of the table row of `op` and `pass` after the pass: eleven numbers
// ("-" is NaN), then the notes, which may hold "|" themselves.
std::vector<std::string> cells(const std::string& out, const std::string& op, const std::string& pass) {
  std::smatch m;
  const std::regex line("\n\\| " + op + " \\| [^|]+ \\| " + std::regex_replace(pass, std::regex("\\+"), "\\+") +
                        " \\|([^\n]*)");
  REQUIRE(std::regex_search(out, m, line));
  std::vector<std::string> v;
  std::string rest = m[1].str();
  for (int i = 0; i < 11; ++i) {
    const size_t bar = rest.find('|');
    if (bar == std::string::npos) break;
    v.push_back(std::regex_replace(rest.substr(0, bar), std::regex("^ +| +$"), ""));
    rest = rest.substr(bar + 1);
  }
  v.push_back(rest);
  return v;
}

double number(const std::string& cell) {
  if (cell == "-") return NAN;
  return std::stod(std::regex_replace(cell, std::regex("[x%]$"), ""));
}

}  // namespace

TEST_CASE("bench kernels prints a row per op and pass with sane values", "[bench]") {
  std::ostringstream out;
  REQUIRE(mambamt::bench::run_kernels_bench(
              {"--quick", "--lengths", "64", "--dstates", "16", "--repeat", "1", "--threads", "1"}, out) == 0);
  const std::string text = out.str();
  INFO(text);
  CHECK(text.find(torch::cuda::is_available() ? "\ndevice: cuda:0 (CUDA kernels)" : "\ndevice: cpu (CPU kernels: ") !=
        std::string::npos);
  std::smatch bw;
  REQUIRE(std::regex_search(text, bw, std::regex("\ncopy bandwidth at the start: ([0-9.]+) GB/s")));
  CHECK(std::stod(bw[1].str()) > 0);
  // Only the asked-for shape.
  CHECK(text.find("L=256") == std::string::npos);
  CHECK(text.find("\ntotal ") != std::string::npos);
  for (const std::string op : {"ssd", "mamba1"})
    for (const std::string pass : {"fwd", "fwd+bwd"}) {
      INFO(op << " " << pass);
      // (a) ms, (b) ms, (c) ms, b/a, c/a, (a) GFLOP/s, sgemm GFLOP/s, % sgemm, copy GB/s, floor ms, a/floor, notes
      const std::vector<std::string> c = cells(text, op, pass);
      REQUIRE(c.size() == 12);
      const double a = number(c[0]), b = number(c[1]), cc = number(c[2]), floor = number(c[9]);
      CHECK(number(c[8]) > 0);
      CHECK(a > 0);
      CHECK(cc > 0);  // the step-by-step reference runs at L = 64
      CHECK(std::isnan(b) == (op == "mamba1"));  // (b) exists for SSD only
      CHECK(floor > 0);
      // The printed ratios are those of the printed times (rounded).
      CHECK(number(c[10]) == Approx(a / floor).epsilon(0.1).margin(0.1));
      CHECK(number(c[4]) == Approx(cc / a).epsilon(0.1).margin(0.1));
      CHECK(number(c[5]) > 0);
      CHECK(number(c[6]) > 0);
      if (pass == "fwd") {
        // The kernel agrees with the other form in the note.
        std::smatch m;
        REQUIRE(std::regex_search(c[11], m, std::regex("max\\|a-[bc]\\|/max\\|[bc]\\| ([0-9.e+-]+)")));
        CHECK(std::stod(m[1].str()) < 1e-4);
      }
    }
  // The forward+backward floor moves the inputs three times and the output twice,
  // the forward once each: between 2x and 3x the forward's bytes (floor x the
  // row's bandwidth; the rows' bandwidths differ, printed to 0.1 GB/s).
  auto bytes = [&](const std::string& pass) {
    const std::vector<std::string> c = cells(text, "ssd", pass);
    return number(c[9]) * number(c[8]);
  };
  const double f = bytes("fwd"), fb = bytes("fwd+bwd");
  CHECK(fb > 2 * f * 0.9);
  CHECK(fb < 3 * f * 1.1);
}

TEST_CASE("bench kernels --headdims measures SSD at other head widths, with H = 1024 / P", "[bench]") {
  std::ostringstream out;
  REQUIRE(mambamt::bench::run_kernels_bench({"--quick", "--lengths", "64", "--dstates", "16", "--headdims", "16,256",
                                             "--repeat", "1", "--threads", "1"},
                                            out) == 0);
  const std::string text = out.str();
  INFO(text);
  for (const std::string P : {"16", "256"}) {
    const std::string row = "\n| ssd | L=64 N=16 P=" + P + " | fwd | ";
    REQUIRE(text.find(row) != std::string::npos);
    // The row's kernel agrees with the chunked LibTorch form at this width.
    const std::string note = text.substr(text.find(row), text.find('\n', text.find(row) + 1) - text.find(row));
    std::smatch m;
    REQUIRE(std::regex_search(note, m, std::regex("max\\|a-b\\|/max\\|b\\| ([0-9.e+-]+)")));
    CHECK(std::stod(m[1].str()) < 1e-4);
    CHECK(text.find("\n| ssd | L=64 N=16 P=" + P + " | fwd+bwd | ") != std::string::npos);
  }
  CHECK(text.find("P=64") == std::string::npos);  // only the asked-for widths
  CHECK(text.find("\n| mamba1 | L=64 D=1024 N=16 | fwd | ") != std::string::npos);
}

TEST_CASE("bench kernels rejects bad arguments, naming them", "[bench]") {
  using mambamt::UsageError;
  auto run = [](const std::vector<std::string>& args) {
    std::ostringstream out;
    return mambamt::bench::run_kernels_bench(args, out);
  };
  CHECK_THROWS_WITH(run({"--device", "gpu"}), Catch::Contains("--device must be cpu, cuda or auto, not 'gpu'"));
  CHECK_THROWS_AS(run({"--device"}), UsageError);
  CHECK_THROWS_WITH(run({"--lengths", "64,0"}), Catch::Contains("--lengths takes positive integers"));
  CHECK_THROWS_WITH(run({"--dstates", "x"}), Catch::Contains("--dstates takes positive integers"));
  CHECK_THROWS_WITH(run({"--repeat", "0"}), Catch::Contains("--repeat must be a positive integer"));
  CHECK_THROWS_WITH(run({"--headdims", "48"}), Catch::Contains("--headdims takes divisors of 1024") &&
                                                  Catch::Contains("not 48"));
  CHECK_THROWS_WITH(run({"--fast"}), Catch::Contains("unknown argument '--fast'"));
  if (!torch::cuda::is_available())
    CHECK_THROWS_WITH(run({"--device", "cuda", "--lengths", "64"}), Catch::Contains("no GPU is visible"));
}
