#pragma once
// Where a translation looks in its source (`mambamt explain`, and the few maps
// evaluation stores for the collector's report):
//
//   attention   the softmax weights of every layer whose attention sees the
//               source (cross-attention of hybrid / transformer, the
//               self-attention layers of decoder-only kinds over the source
//               part), from a teacher-forced pass over the model's own
//               translation: (layers, heads, T, S).
//   occlusion   for any kind, Mamba included (which has no attention weights):
//               each source token in turn is replaced by the pad id and masked,
//               and the relative change of the decoder's final hidden state of
//               every target token is measured,
//                   importance(t, j) = ||h_t(source j occluded) - h_t|| / ||h_t||,
//               (T, S) — the implicit-attention maps of the Edinburgh thesis.
//
// T rows are the target positions t_1 .. t_m eos (row t is the position that
// predicts that token), S columns the source tokens s_1 .. s_n eos; both maps
// are drawn the same way (results/plot.h heatmaps: source across, target down)
// so they compare side by side.
#include <torch/torch.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/store.h"
#include "data/tokenizer.h"
#include "models/model.h"
#include "results/alignment.h"
#include "results/plot.h"
#include "train/prepare.h"

namespace mambamt::train {

struct LoadedExperiment;

// One source sentence (or passage) with the translation being explained; ids
// without eos (source) and without bos/eos (target).
struct SentencePair {
  std::vector<int32_t> src;
  std::vector<int32_t> tgt;
};

// The attention of a translation over its source.
struct AttentionMaps {
  std::vector<std::string> layers;  // one name per layer ("decoder.3.cross", ...)
  torch::Tensor weights;            // (L,H,T,S) float32 on the CPU; undefined when L = 0
  bool empty() const { return layers.empty(); }
  // Mean over heads of one layer, or over layers and heads (layer < 0): (T,S).
  torch::Tensor mean(int64_t layer = -1) const;
};

// Teacher-forced attention maps of `pair` (TranslationModel::source_attention
// in eval mode, batch of one). Empty for kinds without attention over the source.
AttentionMaps attention_maps(models::TranslationModel& model, const SentencePair& pair, const data::SpecialIds& ids,
                             const torch::Device& device);

// Occlusion importance (T,S) float32 on the CPU, as above: every source token
// (the eos included) occluded once, in batches of at most `batch` occluded copies.
torch::Tensor occlusion_importance(models::TranslationModel& model, const SentencePair& pair,
                                   const data::SpecialIds& ids, const torch::Device& device, int64_t batch = 64);

// How well a model's attention aligns the words of a test set's sentences
// (results/alignment.h): every example teacher-forced on its reference, the
// attention of each layer (mean over its heads), and of all layers together,
// read as word alignments of the sentences the example translates (context
// sentences of a window count as outside the sentence) and scored against
// the set's gold alignments.
struct AttentionAlignment {
  std::vector<std::string> layers;                 // as AttentionMaps::layers
  std::vector<results::AlignmentCounts> by_layer;  // one per layer
  results::AlignmentCounts all_layers;             // the mean over layers and heads
  // Every scored sentence, in the order scored, with its counts per layer.
  struct Sentence {
    int32_t document = 0, sentence = 0;
    int half = 0;  // 0 even, 1 odd index among the set's sentences
    std::vector<results::AlignmentCounts> by_layer;
  };
  std::vector<Sentence> sentences;
  // by_layer of the sentences of even and of odd index (results::held_out_layer).
  std::array<std::vector<results::AlignmentCounts>, 2> halves() const;
  // Sentences left out: their tokens do not split into the words of their
  // text (data::token_words).
  int64_t skipped = 0;
  bool empty() const { return layers.empty(); }
};

// Empty when the set has no gold alignments or the model no attention over
// the source.
AttentionAlignment attention_alignment(models::TranslationModel& model, const TestSet& set,
                                       const data::Tokenizer& tokenizer, const torch::Device& device);

// The same read from occlusion importance (occlusion_importance: for every
// kind, pure Mamba included), each target token aligned to the source token
// whose occlusion changes its decoder state most: one forward pass per source
// token of each example, so `max_sentences` > 0 stops after the example that
// reaches that many sentences scored. `skipped` receives the sentences left
// out. Zero counts when the set has no gold alignments.
results::AlignmentCounts occlusion_alignment(models::TranslationModel& model, const TestSet& set,
                                             const data::Tokenizer& tokenizer, const torch::Device& device,
                                             int64_t max_sentences = 0, int64_t* skipped = nullptr);

enum class ExplainMethod { kAttention, kOcclusion, kBoth };

// Parses "attention", "occlusion" or "both"; throws UsageError otherwise.
ExplainMethod parse_explain_method(const std::string& text);

// One explained sentence.
struct Explanation {
  SentencePair pair;
  std::string source;       // text
  std::string translation;  // text of pair.tgt
  std::vector<std::string> source_tokens;  // sentencepiece pieces of s_1 .. s_n, then "</s>"
  std::vector<std::string> target_tokens;  // pieces of t_1 .. t_m, then "</s>"
  AttentionMaps attention;  // empty when not asked for or the model has none
  torch::Tensor occlusion;  // (T,S); undefined when not asked for
};

// Translates `sources` (ids without eos) with the experiment's beam search and
// explains each translation. `attention` is ignored for models without
// attention over the source (the maps stay empty).
std::vector<Explanation> explain_sources(models::TranslationModel& model, const core::ExperimentConfig& config,
                                         const data::Tokenizer& tokenizer,
                                         const std::vector<std::vector<int32_t>>& sources, const torch::Device& device,
                                         bool attention, bool occlusion);

// The heatmaps of an explanation. attention_heatmap: one layer (or the mean over
// layers when layer < 0), one head (or the mean over heads when head < 0).
results::Heatmap attention_heatmap(const Explanation& e, int64_t layer = -1, int64_t head = -1);
results::Heatmap occlusion_heatmap(const Explanation& e);

// The maps evaluation writes into the store (docs/STORE.md): for explanation k,
// results/explain/<k>/occlusion and, when there are attention maps,
// results/explain/<k>/attention (mean over layers and heads); rows = target
// tokens, columns = source tokens.
void store_explanations(core::ExperimentStore& store, const std::vector<Explanation>& explanations);

// The first `count` examples of `sources` that are at most `max_tokens` long
// (evaluation explains a few short test sentences); indices into sources.
std::vector<size_t> pick_short(const std::vector<std::vector<int32_t>>& sources, size_t count, size_t max_tokens);

// `mambamt explain`: lines of text (one sentence or passage each, " <sep> "
// between the sentences of a passage) -> SVG heatmaps and index.md in out_dir.
struct ExplainOptions {
  std::string out_dir;
  ExplainMethod method = ExplainMethod::kBoth;
  bool heads = false;  // also one heatmap per layer and head
};

struct ExplainResult {
  std::vector<std::string> files;  // every file written, index.md last
  std::vector<std::string> notes;  // what was left out and why (e.g. no attention layers)
};

// Throws InputError when the method asks for attention and the model has no
// attention layer over the source, before translating anything.
ExplainResult explain_lines(const LoadedExperiment& exp, const std::vector<std::string>& lines,
                            const ExplainOptions& options);

}  // namespace mambamt::train
