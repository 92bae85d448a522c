#pragma once
// Layer plans: the list of layer kinds of each stack, derived once from the
// config (attention_ratio, attention_placement, cross_attn_every, cross_attn,
// attn_window, mamba_mlp) or taken from an explicit enc_plan / dec_plan.
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "core/config.h"

namespace mambamt::models {

// One layer: a sequence mixer, then optionally cross-attention, then optionally an MLP.
struct LayerSpec {
  // Mixer kind, a name of the mixer registry (models/stack.h): "bimamba",
  // "mamba", "attention" (bidirectional in the encoder, causal in decoders),
  // "local_attention" (sliding window of model.attn_window tokens),
  // "retention" (retnet). rnnsearch's plan only describes its layers
  // ("bigru", "gru"): it is not built from stacks (models/rnnsearch.h).
  std::string mixer;
  bool cross = false;  // cross-attention to the encoder output after the mixer
  bool mlp = false;    // an MLP after the mixer (and the cross-attention)

  // "mamba", "attention+cross+mlp", ... (what plan reports print).
  std::string name() const;
  bool operator==(const LayerSpec& o) const { return mixer == o.mixer && cross == o.cross && mlp == o.mlp; }
};

std::ostream& operator<<(std::ostream& out, const LayerSpec& spec);  // its name()

struct Plan {
  bool decoder_only = false;      // mamba / decoder_only / retnet: one stack over source + target
  std::vector<LayerSpec> encoder;  // empty for decoder-only kinds
  std::vector<LayerSpec> decoder;  // the decoder, or the single stack of decoder-only kinds
};

// The indices (ascending) of the attention layers of a stack of n layers.
// count = max(1, round(n * ratio)) for ratio > 0 (0 for ratio 0), then by placement:
//   middle_end: n/2 and n-1 first; further ones at the midpoint of the largest
//               gap left (earliest on ties), so they spread over the stack;
//   uniform:    round((i+1) * n / count) - 1 for i < count (evenly spaced, ending at n-1);
//   every_n:    n-1, n-1-k, n-1-2k, ... >= 0 with k = round(1/ratio) (count ignored);
//   first:      0 .. count-1.
// Throws InputError for an unknown placement.
std::vector<int64_t> attention_layers(int64_t n, double ratio, const std::string& placement);

// Decoder layers followed by cross-attention: every k-th layer (k-1, 2k-1, ...) and the last.
std::vector<int64_t> cross_attention_layers(int64_t n, int64_t every);

// The plan of a validated config. Throws InputError naming the model key when
// the config asks for something the models cannot build.
Plan make_plan(const core::ModelConfig& config);

// The attention layers as built, for labels: "2/12 (1:5)" (attention layers
// of the stack : the others, reduced), "0/12 (no attention)", "6/6 (attention
// only)"; with an encoder and a decoder that differ, "enc 2/12 (1:5), dec 1/6
// (1:5)". Counts self-attention mixers (attention, local_attention) only; ""
// for rnnsearch, whose plan only describes its recurrent layers.
std::string attention_label(const core::ModelConfig& config, const Plan& plan);

// Where model.attention_ratio asks for a ratio the plan does not build (a
// hybrid or decoder_only stack whose layer count times the ratio is not a
// whole number, an every_n step that does not divide it): one sentence naming
// the requested and the built ratio and what would build it exactly; "" when
// they agree or the kind does not read the ratio.
std::string attention_ratio_warning(const core::ModelConfig& config, const Plan& plan);

// The printable plan (what `mambamt plan CONFIG` shows): kind, sizes, one line
// per layer with its parameters, the embeddings, and the totals (all, and
// without embeddings). Builds each layer on its own to count, so memory stays
// at one layer. vocab_size sizes the embeddings.
std::string plan_report(const core::ModelConfig& config, int64_t vocab_size);

// Parameters of the model of `config` (what plan_report's total says). Each
// layer is built once per process to be counted; later models with the same
// layers reuse the counts.
int64_t count_parameters(const core::ModelConfig& config, int64_t vocab_size);

}  // namespace mambamt::models
