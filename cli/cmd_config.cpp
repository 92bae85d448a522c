// `mambamt config check FILE`, `mambamt config doc` and --version.
#include <mpi.h>
#include <torch/torch.h>

#include <cstdlib>
#include <iostream>
#include <sstream>

#include "cli/commands.h"
#include "core/config.h"
#include "core/device.h"
#include "core/version.h"
#include "kernels/isa.h"
#include "models/plan.h"
#include "orchestrator/grid.h"

namespace mambamt::cli {

std::string version_text() {
  std::ostringstream out;
  out << "mambamt " << core::version() << " (git " << core::git_revision() << ")\n";
  out << "LibTorch " << TORCH_VERSION << ", CUDA " << (core::torch_has_cuda() ? "built in" : "not built in");
  int gpus = core::cuda_device_count();
  out << ", " << gpus << " GPU" << (gpus == 1 ? "" : "s") << " visible\n";
  const std::string blas = core::blas_core();
  const char* forced = std::getenv("OPENBLAS_CORETYPE");
  out << "BLAS: " << (blas.empty() ? "not OpenBLAS" : "OpenBLAS, " + blas + " kernels")
      << (forced && !blas.empty() ? std::string(" (OPENBLAS_CORETYPE=") + forced + ")" : "") << "\n";
  const char* isa = std::getenv("MAMBAMT_CPU_KERNELS");
  out << "CPU kernels: " << kernels::cpu_isa()
      << (isa ? std::string(" (MAMBAMT_CPU_KERNELS=") + isa + ")" : "") << "\n";
  char mpi[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
  int len = 0;
  // One of the few MPI calls allowed before MPI_Init.
  MPI_Get_library_version(mpi, &len);
  std::string lib(mpi, static_cast<size_t>(len));
  lib = lib.substr(0, lib.find_first_of(",\n"));
  out << "MPI: " << lib << " (MPI " << MPI_VERSION << "." << MPI_SUBVERSION << ")\n";
  return out.str();
}

Command config_check_command() {
  CommandSpec spec;
  spec.name = "config check";
  spec.summary = "validate an experiment or grid file and print it resolved, with ids";
  spec.positionals = {"FILE"};
  spec.description =
      "An experiment file prints its canonical form (every field, defaults filled, keys sorted)\n"
      "and its experiment id. A grid file prints its sweep settings, axes and variants and the\n"
      "resolved base experiment. Errors name the file, line, column and key; exit code 1.";
  return {spec, [](const ParsedArgs& a) {
            const std::string& file = a.positional[0];
            std::string text = core::read_text(file);
            if (core::is_grid_text(text)) {
              core::GridConfig g = core::parse_grid(text, file);
              std::cout << "# grid " << file << ": sweep \"" << g.sweep.name << "\", design " << g.sweep.design
                        << ", " << g.sweep.seeds.size() << " seed(s)\n";
              for (auto& ax : g.axes) {
                std::cout << "# axis " << ax.key << " =";
                for (auto& v : ax.values) std::cout << " " << v;
                std::cout << "\n";
              }
              for (auto& v : g.variants) {
                std::cout << "# variant " << v.name << ":";
                for (auto& [k, val] : v.overrides) std::cout << " " << k << "=" << val;
                std::cout << "\n";
              }
              core::ExperimentConfig base = g.point({});
              std::cout << "# base experiment " << base.id() << "\n" << base.canonical();
              for (const std::string& w : orchestrator::attention_warnings(orchestrator::expand_grid(g)))
                std::cout << "# " << w << "\n";
              std::cout << "# ok: run `mambamt sweep " << file << " --dry-run` to list the points\n";
            } else {
              core::ExperimentConfig c = core::parse_experiment(text, file);
              std::cout << "# experiment " << c.id() << " (" << file << ")\n" << c.canonical();
              const std::string warning = models::attention_ratio_warning(c.model, models::make_plan(c.model));
              if (!warning.empty()) std::cout << "# warning: " << warning << "\n";
            }
            return 0;
          }};
}

Command config_doc_command() {
  CommandSpec spec;
  spec.name = "config doc";
  spec.summary = "print the reference of every config field (docs/config.md)";
  return {spec, [](const ParsedArgs&) {
            std::cout << core::config_reference_markdown();
            return 0;
          }};
}

}  // namespace mambamt::cli
