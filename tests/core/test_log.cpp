// The experiment log: lines carry rank and experiment id, and an experiment's
// file takes only the lines of the thread running it.
#include <spdlog/spdlog.h>

#include <catch2/catch.hpp>
#include <thread>

#include "core/log.h"
#include "test_util.h"

using namespace mambamt::core;

TEST_CASE("an experiment's log file holds its own thread's lines with rank and id", "[core][log]") {
  TempDir tmp;
  const std::string file = tmp.path("log.txt");
  log::set_rank(3);
  {
    log::ExperimentLog exp("4f0c2a9b1d7e", file);
    spdlog::info("step 1 of the experiment");
    // Another thread of the process (as rank 0's coordinator) logs meanwhile.
    std::thread other([] { spdlog::info("coordinator line"); });
    other.join();
    spdlog::info("step 2 of the experiment");
  }
  spdlog::info("after the experiment");
  log::set_rank(0);
  const std::string text = read_text(file);
  INFO(text);
  CHECK(text.find("[info] [rank 3] [exp 4f0c2a9b1d7e] step 1 of the experiment\n") != std::string::npos);
  CHECK(text.find("[info] [rank 3] [exp 4f0c2a9b1d7e] step 2 of the experiment\n") != std::string::npos);
  CHECK(text.find("coordinator line") == std::string::npos);
  CHECK(text.find("after the experiment") == std::string::npos);
}
