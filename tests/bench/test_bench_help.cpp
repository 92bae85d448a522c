// `mambamt bench NAME --help` describes each benchmark, as `mambamt bench
// --help` promises, and starts nothing.
#include <catch2/catch.hpp>

#include <string>

#include "test_util.h"


TEST_CASE("every benchmark answers --help with its usage and options", "[bench]") {
  for (const std::string name : {"data", "decode", "gates", "kernels", "orchestrator", "prefixes", "train"}) {
    CAPTURE(name);
    for (const std::string flag : {"--help", "-h"}) {
      CommandResult r = run_shell(mambamt_binary() + " bench " + name + " " + flag);
      CHECK(r.code == 0);
      CHECK(r.output.rfind("usage: mambamt bench " + name + " [OPTIONS]\n", 0) == 0);
      CHECK(r.output.find("Options:") != std::string::npos);
    }
  }
  CommandResult r = run_shell(mambamt_binary() + " bench nonesuch --help");
  CHECK(r.code == 2);
  CHECK(r.output.find("unknown benchmark \"nonesuch\"") != std::string::npos);
}
