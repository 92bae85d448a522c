// The command-line contract (DESIGN.md, Contracts): every subcommand has
// --help, exit 0 only on success and 2 for usage errors, which name the word
// at fault; the argument parser itself (cli/args.h), including the options
// that take several files (eval --test, --contrastive).
#include <catch2/catch.hpp>

#include <regex>
#include <set>
#include <string>
#include <vector>

#include "cli/args.h"
#include "core/error.h"
#include "test_util.h"

using namespace mambamt;

namespace {

// The commands `mambamt --help` lists: the words before the summary of each
// line under "commands:" (two spaces or more separate them).
std::vector<std::string> listed_commands(const std::string& help) {
  std::vector<std::string> out;
  std::istringstream in(help);
  std::string line;
  bool in_list = false;
  while (std::getline(in, line)) {
    if (line == "commands:") {
      in_list = true;
      continue;
    }
    if (!in_list) continue;
    if (line.empty()) break;
    std::smatch m;
    if (std::regex_match(line, m, std::regex("  (\\S+(?: \\S+)?)  +\\S.*"))) out.push_back(m[1].str());
  }
  return out;
}

cli::ParsedArgs parse(const cli::CommandSpec& spec, const std::vector<std::string>& words) {
  bool help = false;
  cli::ParsedArgs a = cli::parse_args(spec, words, help);
  CHECK_FALSE(help);
  return a;
}

cli::CommandSpec eval_like() {
  cli::CommandSpec spec;
  spec.name = "eval";
  spec.optional_positionals = {"MORE"};
  spec.options = {{"--store", "DIR", ""}, {"--test", "FILE...", ""}, {"--quick", "", ""}};
  return spec;
}

}  // namespace

TEST_CASE("every command answers --help with exit 0 and an unknown option with exit 2 naming it", "[cli]") {
  CommandResult top = run_shell(mambamt_binary() + " --help");
  INFO(top.output);
  REQUIRE(top.code == 0);
  const std::vector<std::string> names = listed_commands(top.output);
  const std::set<std::string> listed(names.begin(), names.end());
  // The subcommands DESIGN.md's CLI contract names are all there.
  for (const char* c : {"sweep", "train", "status", "collect", "translate", "eval", "explain", "plan", "prepare",
                        "config check", "store show", "bench"})
    CHECK(listed.count(c) == 1);

  for (const std::string& name : names) {
    INFO("mambamt " << name);
    CommandResult help = run_shell(mambamt_binary() + " " + name + " --help");
    INFO(help.output);
    CHECK(help.code == 0);
    CHECK(help.output.rfind("usage: mambamt " + name, 0) == 0);
    CHECK(help.output.find("--help, -h") != std::string::npos);

    CommandResult bad = run_shell(mambamt_binary() + " " + name + " --nonesuch");
    INFO(bad.output);
    CHECK(bad.code == 2);
    CHECK(bad.output.rfind("mambamt: error: unknown option --nonesuch for `mambamt " + name + "`", 0) == 0);
  }

  CommandResult unknown = run_shell(mambamt_binary() + " nonesuch");
  CHECK(unknown.code == 2);
  CHECK(unknown.output.rfind("mambamt: error: unknown command \"nonesuch\"", 0) == 0);
  CHECK(run_shell(mambamt_binary()).code == 2);
  CHECK(run_shell(mambamt_binary() + " config").code == 2);
  CHECK(run_shell(mambamt_binary() + " config --help").code == 0);
}

TEST_CASE("eval takes several files after --test and says which value is wrong", "[cli]") {
  CommandResult none = run_shell(mambamt_binary() + " eval --store x --test --weights best");
  INFO(none.output);
  CHECK(none.code == 2);
  CHECK(none.output.rfind("mambamt: error: --test needs at least one FILE", 0) == 0);

  CommandResult threads = run_shell(mambamt_binary() + " eval --store x --threads two");
  INFO(threads.output);
  CHECK(threads.code == 2);
  CHECK(threads.output.rfind("mambamt: error: --threads two: expected an integer", 0) == 0);

  CommandResult weights = run_shell(mambamt_binary() + " eval --store x --test a b --weights newest");
  INFO(weights.output);
  CHECK(weights.code == 2);
  CHECK(weights.output.rfind("mambamt: error: --weights newest: use default, best or latest", 0) == 0);

  // Parsed, then refused for want of a store: an error (1) naming the directory.
  TempDir tmp;
  CommandResult missing = run_shell(mambamt_binary() + " eval --store " + tmp.path("nothing") + " --test a b");
  INFO(missing.output);
  CHECK(missing.code == 1);
  CHECK(missing.output.find(tmp.path("nothing") + ": no experiment store") != std::string::npos);
}

TEST_CASE("the argument parser: list options, repeats, inline values and --", "[cli]") {
  const cli::CommandSpec spec = eval_like();
  SECTION("a list option takes the words up to the next option, and a repeat adds to it") {
    cli::ParsedArgs a = parse(spec, {"--test", "a.txt", "b.txt", "--quick", "--test=c.txt", "d.txt", "--store", "s"});
    CHECK(a.get_list("--test") == std::vector<std::string>{"a.txt", "b.txt", "c.txt", "d.txt"});
    CHECK(a.get("--store") == "s");
    CHECK(a.has("--quick"));
    CHECK(a.has("--test"));
    CHECK(a.positional.empty());
  }
  SECTION("not given, it is empty") {
    cli::ParsedArgs a = parse(spec, {"--store", "s"});
    CHECK_FALSE(a.has("--test"));
    CHECK(a.get_list("--test").empty());
  }
  SECTION("after --, words are positionals even when they start with -") {
    cli::ParsedArgs a = parse(spec, {"--test", "a.txt", "--", "-b.txt"});
    CHECK(a.get_list("--test") == std::vector<std::string>{"a.txt"});
    CHECK(a.positional == std::vector<std::string>{"-b.txt"});
  }
  SECTION("usage errors name the option") {
    bool help = false;
    auto message = [&](const std::vector<std::string>& words) {
      try {
        cli::parse_args(spec, words, help);
      } catch (const UsageError& e) {
        return std::string(e.what());
      }
      return std::string("no error");
    };
    CHECK(message({"--test"}) == "--test needs at least one FILE");
    CHECK(message({"--test", "--quick"}) == "--test needs at least one FILE");
    CHECK(message({"--test="}) == "--test needs at least one FILE");
    CHECK(message({"--store"}) == "--store needs a value (DIR)");
    CHECK(message({"--quick=1"}) == "--quick takes no value");
    CHECK(message({"--nonesuch"}) == "unknown option --nonesuch for `mambamt eval`");
    CHECK(message({"x", "y"}) == "unexpected argument \"y\"");
  }
  SECTION("--help anywhere asks for the help") {
    bool help = false;
    cli::parse_args(spec, {"--test", "a", "--help"}, help);
    CHECK(help);
  }
  CHECK(cli::usage_text(spec).rfind("usage: mambamt eval [MORE] [options]\n", 0) == 0);
  CHECK(cli::usage_text(spec).find("  --test FILE...") != std::string::npos);
}

TEST_CASE("config check: a resolved config checks again to the same id, and a bad value is named by file and line",
          "[cli]") {
  TempDir tmp;
  const std::string file = source_dir() + "/configs/experiments/tiny.toml";
  CommandResult first = run_shell(mambamt_binary() + " config check " + file);
  INFO(first.output);
  REQUIRE(first.code == 0);
  std::smatch id;
  REQUIRE(std::regex_search(first.output, id, std::regex("# experiment ([0-9a-f]{12}) ")));

  // The resolved text is itself a valid experiment with the same id: every
  // default was written out, nothing that changes the point was left out.
  write_text(tmp.path("resolved.toml"), first.output);
  CommandResult again = run_shell(mambamt_binary() + " config check " + tmp.path("resolved.toml"));
  INFO(again.output);
  REQUIRE(again.code == 0);
  CHECK(again.output.find("# experiment " + id[1].str() + " ") != std::string::npos);

  write_text(tmp.path("bad.toml"), "[model]\nkind = \"hybrid\"\nd_state = \"large\"\n");
  for (const char* cmd : {"config check", "plan"}) {
    CommandResult bad = run_shell(mambamt_binary() + " " + cmd + " " + tmp.path("bad.toml"));
    INFO(bad.output);
    CHECK(bad.code == 1);
    CHECK(bad.output.rfind("mambamt: error: " + tmp.path("bad.toml") + ":3:", 0) == 0);
    CHECK(bad.output.find("model.d_state") != std::string::npos);
  }
}
