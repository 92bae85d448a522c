#pragma once
// The builders of every subcommand, one per cli/cmd_*.cpp; cli/commands.cpp
// lists them in `mambamt --help` order.
#include <vector>

#include "cli/args.h"

namespace mambamt::train {
struct LoadedExperiment;
enum class Weights;
}

namespace mambamt::cli {

Command config_check_command();
Command config_doc_command();
Command store_show_command();
Command store_seal_command();
Command bench_command();
Command train_command();
Command eval_command();
Command translate_command();
Command explain_command();
Command sweep_command();
Command prepare_command();
Command status_command();
Command collect_command();
Command compare_command();
Command plan_command();

// The options of the commands that load a trained experiment (translate,
// explain): --store DIR, --weights W, --device DEV.
std::vector<OptionSpec> trained_experiment_options();

// The experiment those options name, loaded (train::load_experiment); no
// --store, or a --weights other than default, best or latest, is a UsageError.
train::LoadedExperiment load_trained_experiment(const ParsedArgs& args);

// The value of --weights (translate, explain, eval): default, best or latest;
// anything else is a UsageError.
train::Weights weights_value(const std::string& w);

// `mambamt --version` text: version, git revision, LibTorch, CUDA and MPI.
std::string version_text();

}  // namespace mambamt::cli
