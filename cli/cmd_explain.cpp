// `mambamt explain`: attention heatmaps and occlusion importance of a trained
// experiment's translations (train/explain.h).
#include <spdlog/spdlog.h>

#include <filesystem>
#include <iostream>

#include "cli/commands.h"
#include "core/error.h"
#include "train/explain.h"
#include "train/translate.h"

namespace fs = std::filesystem;

namespace mambamt::cli {

Command explain_command() {
  CommandSpec spec;
  spec.name = "explain";
  spec.summary = "heatmaps of where a trained experiment's translations look in the source";
  spec.options = trained_experiment_options();
  spec.options.insert(spec.options.begin() + 1,
                      {{"--out", "DIR", "where the SVG heatmaps and index.md go (default DIR/explain)"},
                       {"--method", "M", "attention, occlusion or both (default both)"},
                       {"--heads", "", "also one attention heatmap per layer and head"}});
  spec.description =
      "Reads sentences on stdin, one per line (\" <sep> \" separates the sentences of a passage), translates\n"
      "them with the experiment's beam search and draws, per line N, NNN_attention.svg and/or\n"
      "NNN_occlusion.svg (source tokens across, translation tokens down) and index.md showing them side\n"
      "by side. attention: the softmax weights over the source of the cross-attention layers (hybrid,\n"
      "transformer) or of the self-attention layers over the source part (decoder-only kinds), from a\n"
      "teacher-forced pass over the translation, averaged over layers and heads. occlusion: each source\n"
      "token replaced by padding in turn; a cell is the relative change ||h(occluded) - h|| / ||h|| of the\n"
      "decoder's final hidden state at that target token (works for every kind, pure Mamba included).\n"
      "--method attention on a model without attention over the source is an error; with both, such a\n"
      "model gets occlusion maps only.";
  return {spec, [](const ParsedArgs& a) {
            const std::string dir = a.get("--store");
            if (dir.empty()) throw UsageError("--store DIR is required");
            train::ExplainOptions o;
            o.method = train::parse_explain_method(a.get("--method", "both"));
            o.heads = a.has("--heads");
            o.out_dir = a.get("--out", (fs::path(dir) / "explain").string());
            train::LoadedExperiment exp = load_trained_experiment(a);
            if (o.method == train::ExplainMethod::kAttention && !exp.model->has_source_attention())
              throw InputError("model kind `" + exp.model->kind() + "` of " + dir +
                               " has no attention layer over the source, so there are no attention weights to "
                               "draw: use --method occlusion");
            spdlog::info("explaining with {} ({})", dir, exp.weights);
            std::vector<std::string> lines;
            for (std::string line; std::getline(std::cin, line);) lines.push_back(line);
            train::ExplainResult r = train::explain_lines(exp, lines, o);
            for (auto& n : r.notes) std::cerr << "mambamt explain: " << n << "\n";
            std::cout << "wrote " << r.files.size() << " files; index: " << r.files.back() << "\n";
            return 0;
          }};
}

}  // namespace mambamt::cli
