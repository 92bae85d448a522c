// `mambamt status`, `collect` and `plan`: reading sweeps and configs.
#include <iostream>
#include <map>

#include "cli/commands.h"
#include "core/config.h"
#include "core/error.h"
#include "models/plan.h"
#include "orchestrator/grid.h"
#include "orchestrator/status.h"
#include "results/collector.h"

namespace mambamt::cli {

Command status_command() {
  CommandSpec spec;
  spec.name = "status";
  spec.summary = "a sweep's progress: counts by state, one line per experiment, ETA";
  spec.positionals = {"RUN_DIR"};
  spec.description = "Reads only; works while the sweep runs. RUN_DIR is runs/<sweep>.";
  return {spec, [](const ParsedArgs& a) {
            std::cout << orchestrator::status_report(a.positional[0]);
            return 0;
          }};
}

Command collect_command() {
  CommandSpec spec;
  spec.name = "collect";
  spec.summary = "the tables, plots and report of a sweep from its stores";
  spec.positionals = {"RUN_DIR"};
  spec.options = {
      {"--format", "LIST", "table formats besides report.md: any of md,csv,tex,json (default md)"},
      {"--out", "DIR", "output directory (default: results/<sweep> beside runs/)"},
      {"--test-set", "NAME", "test set whose scores fill the tables (default: test, or the first found)"},
      {"--no-plots", "", "skip the SVG plots"},
  };
  spec.description =
      "Works on a running sweep too (partial results are marked). Writes one ablation table per\n"
      "grid axis, the baseline comparison (speed and memory relative to the Transformer),\n"
      "length-sensitivity and contrastive tables, SVG plots, summary.h5 and report.md. BLEU and chrF\n"
      "differences are tested by paired bootstrap resampling, seed by seed on the stores' segment\n"
      "statistics: each model against the Transformer, each ablation row against the axis's base\n"
      "value. Unreadable stores, and test sets scored on different texts, are reported by path.";
  return {spec, [](const ParsedArgs& a) {
            results::CollectOptions opt;
            opt.run_dir = a.positional[0];
            if (a.has("--format")) opt.formats = results::parse_formats(a.get("--format"));
            opt.out_dir = a.get("--out");
            opt.test_set = a.get("--test-set");
            opt.plots = !a.has("--no-plots");
            results::CollectReport r = results::collect(opt, std::cerr);
            std::cout << "report: " << r.out_dir << "/report.md (" << r.files.size() << " files"
                      << (r.partial ? ", partial: not every point is completed" : "") << ")\n";
            return 0;
          }};
}

Command plan_command() {
  CommandSpec spec;
  spec.name = "plan";
  spec.summary = "the layer plan of an experiment (or of every model of a grid) with parameters";
  spec.positionals = {"CONFIG"};
  spec.description =
      "For an experiment: one line per layer with its parameters, and the totals. For a grid: the\n"
      "parameters of every point's model, then the plan of the base experiment.";
  return {spec, [](const ParsedArgs& a) {
            const std::string& file = a.positional[0];
            std::string text = core::read_text(file);
            if (!core::is_grid_text(text)) {
              core::ExperimentConfig c = core::parse_experiment(text, file);
              std::cout << models::plan_report(c.model, c.data.vocab_size);
              return 0;
            }
            orchestrator::ExpandedGrid g = orchestrator::expand_grid(core::parse_grid(text, file));
            std::map<std::string, int64_t> counted;  // model canonical -> parameters
            std::cout << "parameters per point (vocabulary from data.vocab_size):\n";
            for (auto& p : g.points) {
              if (!p.valid()) {
                std::cout << "  " << p.id << "  invalid  " << p.name << "\n";
                continue;
              }
              core::ExperimentConfig model_only;
              model_only.model = p.config->model;
              std::string key = model_only.canonical() + std::to_string(p.config->data.vocab_size);
              if (!counted.count(key)) counted[key] = models::count_parameters(p.config->model, p.config->data.vocab_size);
              std::cout << "  " << p.id << "  " << counted[key] << "  " << p.name << "\n";
            }
            core::ExperimentConfig base = g.grid.point({});
            std::cout << "\nbase experiment " << base.id() << ":\n" << models::plan_report(base.model, base.data.vocab_size);
            return 0;
          }};
}

}  // namespace mambamt::cli
