// `mambamt bench NAME [ARGS...]`: the benchmarks of bench/.
#include <iostream>

#include "bench/bench.h"
#include "cli/commands.h"
#include "core/error.h"

namespace mambamt::cli {

Command bench_command() {
  CommandSpec spec;
  spec.name = "bench";
  spec.summary = "run a benchmark (kernels, data, decode, gates, learn, prefixes, train, orchestrator) against its baseline";
  spec.positionals = {"NAME"};
  spec.rest = true;
  std::string desc =
      "Each benchmark measures its baseline in the same run and prints ratios against it.\n"
      "Arguments after NAME go to the benchmark (`mambamt bench NAME --help`).\n\nbenchmarks:\n";
  for (auto& b : bench::all()) desc += "  " + b.name + ": " + b.help + "\n";
  spec.description = desc;
  return {spec, [](const ParsedArgs& a) {
            const std::string& name = a.positional[0];
            for (auto& b : bench::all()) {
              if (b.name != name) continue;
              for (auto& arg : a.rest)
                if (arg == "--help" || arg == "-h") {
                  std::cout << "usage: mambamt bench " << b.name << " [OPTIONS]\n\n" << b.help << "\n";
                  return 0;
                }
              return b.run(a.rest, std::cout);
            }
            std::string known;
            for (auto& b : bench::all()) known += (known.empty() ? "" : ", ") + b.name;
            throw UsageError("unknown benchmark \"" + name + "\" (available: " + (known.empty() ? "none" : known) + ")");
          }};
}

}  // namespace mambamt::cli
