// `mambamt bench decode` on the tiny preset with short outputs, windowed and
// --full: every model's row at every length, with sane values. The timings
// themselves are not asserted (tests never assert on wall-clock time).
// LibTorch before Catch: both define CHECK, and Catch's must win.
#include <torch/torch.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "bench/decode_bench.h"
#include "core/error.h"

namespace {

// The numbers of the row of `model` at `target` (the "|" separators dropped).
std::vector<double> row(const std::string& out, const std::string& model, int target) {
  std::smatch m;
  const std::regex line("\n" + model + " +" + std::to_string(target) + " ([^\n]*)");
  REQUIRE(std::regex_search(out, m, line));
  std::istringstream in(std::regex_replace(m[1].str(), std::regex("\\|"), " "));
  std::vector<double> v;
  std::string word;
  while (in >> word) v.push_back(word == "-" ? NAN : std::stod(word));
  return v;
}

std::string run(const std::vector<std::string>& args) {
  std::ostringstream out;
  REQUIRE(mambamt::bench::run_decode_bench(args, out) == 0);
  return out.str();
}

}  // namespace

TEST_CASE("bench decode prints a row per model and length with sane values", "[bench]") {
  for (const bool full : {false, true}) {
    SECTION(full ? "--full" : "windows") {
      std::vector<std::string> args{"--quick", "--batch", "2", "--lengths", "24,48", "--threads", "1"};
      if (full) args.push_back("--full");
      const std::string out = run(args);
      INFO(out);
      CHECK(out.find(full ? "method: every token decoded" : "method: windows of 6 steps") != std::string::npos);
      CHECK(out.find("\nbatch 2\n") != std::string::npos);
      // The default device is auto: the GPU when one is visible.
      CHECK(out.find(torch::cuda::is_available() ? "\ndevice: cuda:0\n" : "\ndevice: cpu\n") != std::string::npos);
      CHECK(std::regex_search(out, std::regex("multiply-adds of the weight product .*: transformer [0-9.]+ GFLOP/s, "
                                              "hybrid [0-9.]+ GFLOP/s, mamba [0-9.]+ GFLOP/s\n")));
      CHECK(out.find("\ntotal ") != std::string::npos);
      for (int target : {24, 48}) {
        // tok/s, pred, x transf, pred, meas/pred, roof tok/s, roof, meas/roof, start, mid, end, end/start, pred,
        // KV, Mamba, cross, state x, setup, GB/s
        const std::vector<double> t = row(out, "transformer", target);
        REQUIRE(t.size() == (full ? 20u : 19u));
        CHECK(t[2] == 1.0);
        CHECK(t[3] == 1.0);
        CHECK(t[6] == 1.0);
        CHECK(t[16] == 1.0);
        CHECK(t[14] == 0.0);  // no Mamba state
        for (const std::string model : {"transformer", "hybrid", "mamba"}) {
          const std::vector<double> r = row(out, model, target);
          REQUIRE(r.size() == t.size());
          for (int i : {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 16, 18}) CHECK(r[i] > 0);
          // Every model of a length is predicted at the same bandwidth, the one printed.
          CHECK(r[18] == t[18]);
          // The roofline adds the multiply-adds' bound to the bytes' one: never faster than the bytes allow.
          CHECK(r[5] <= r[1] * (1 + 1e-9));
          if (model == "mamba") CHECK(r[13] == 0.0);  // no KV cache
        }
      }
    }
  }
}

// --bf16: the whole benchmark in one bf16 autocast region, as evaluation on a
// GPU runs; the predictions count the weights' cached bf16 copies, 2 bytes
// each. The pure Mamba's step bytes (its weights, almost all of them; from
// each row's tok/s prediction and copy bandwidth) halve.
TEST_CASE("bench decode --bf16 runs under autocast and counts 2 bytes per weight", "[bench]") {
  const std::vector<std::string> args{"--quick", "--batch", "2", "--lengths", "24", "--threads", "1", "--device", "cpu"};
  std::vector<std::string> with = args;
  with.push_back("--bf16");
  const std::string f32 = run(args), bf = run(with);
  INFO(bf);
  CHECK(f32.find("\nprecision: float32\n") != std::string::npos);
  CHECK(bf.find("\nprecision: bf16 autocast") != std::string::npos);
  // Bytes a step reads: B x the row's bandwidth / its predicted tokens/s.
  auto step_bytes = [](const std::string& out) {
    const std::vector<double> r = row(out, "mamba", 24);
    return 2 * r.at(18) * 1e9 / r.at(1);
  };
  const double ratio = step_bytes(bf) / step_bytes(f32);
  CHECK(ratio > 0.45);
  CHECK(ratio < 0.55);
  for (const std::string model : {"transformer", "hybrid", "mamba"}) {
    const std::vector<double> r = row(bf, model, 24);
    for (int i : {0, 1, 2, 3, 5, 8, 9, 10}) CHECK(r.at(i) > 0);
  }
}

TEST_CASE("bench decode rejects bad arguments", "[bench]") {
  std::ostringstream out;
  CHECK_THROWS_AS(mambamt::bench::run_decode_bench({"--lengths", "8"}, out), mambamt::UsageError);
  CHECK_THROWS_AS(mambamt::bench::run_decode_bench({"--window", "0"}, out), mambamt::UsageError);
  CHECK_THROWS_AS(mambamt::bench::run_decode_bench({"--nope"}, out), mambamt::UsageError);
  CHECK_THROWS_AS(mambamt::bench::run_decode_bench({"--device", "gpu"}, out), mambamt::UsageError);
  CHECK_THROWS_AS(mambamt::bench::run_decode_bench({"--device"}, out), mambamt::UsageError);
  // CUDA graphs on the CPU: a usage error naming the device.
  CHECK_THROWS_WITH(mambamt::bench::run_decode_bench({"--quick", "--graphs", "--device", "cpu"}, out),
                    Catch::Matchers::Contains("it needs a GPU (device cpu)"));
  if (!torch::cuda::is_available())  // asking for a GPU where none is: an input error naming the device
    CHECK_THROWS_WITH(mambamt::bench::run_decode_bench({"--quick", "--device", "cuda"}, out),
                      Catch::Matchers::Contains("no GPU is visible"));
  CHECK(out.str().empty());
}
