#pragma once
// Benchmarks run by `mambamt bench <name>`. Each one measures its baseline in
// the same run and prints ratios against it; none is a test.
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

namespace mambamt::bench {

struct Benchmark {
  std::string name;  // the word after `mambamt bench`
  std::string help;  // one paragraph: what it measures and its options
  // args: the arguments after the name (e.g. {"--quick"}); returns the exit code.
  std::function<int(const std::vector<std::string>& args, std::ostream& out)> run;
};

// The value of option args[i] (i advances past it): positive integers
// separated by commas; a UsageError naming `who` ("bench decode") and the option otherwise.
std::vector<int64_t> parse_list(const std::vector<std::string>& args, size_t& i, const std::string& who,
                                const std::string& option);

// Every benchmark, in the order `mambamt bench --help` lists them.
const std::vector<Benchmark>& all();

}  // namespace mambamt::bench
