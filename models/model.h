#pragma once
// The one interface of every model kind. The runtime trains, validates and
// decodes through it and never cares whether the kind is an encoder-decoder or
// a decoder-only model over `source <boundary> target`.
//
// Batches are the data folder's encoder-decoder layout (data::collate):
//   src      (B,S) int64  s_1 .. s_n eos, padded (on the right) with pad
//   src_mask (B,S) bool   true at real tokens
//   tgt_in   (B,T) int64  bos t_1 .. t_m, padded on the right
//   tgt_mask (B,T) bool   true at real tokens
// forward() returns logits (B,T,V) predicting tgt_out = t_1 .. t_m eos.
// Decoder-only kinds pack each row internally as
//   [pad ...] s_1 .. s_n eos [boundary] bos t_1 .. t_m [pad ...]
// with the source left-padded, so every row's target starts in the same column
// and batched decoding continues all rows together; positions count real tokens
// only, so padding never changes a row's result.
//
// Decoding:
//   InferenceState st = model->start(src, src_mask);       // encode / prefill
//   torch::Tensor logits = model->step(st, bos_column);     // (B,V) for t_1
//   ... step(st, next_tokens) ...                           // one token per row
//   st.reorder(index);                                      // beam search
// step-by-step logits equal forward()'s logits at the same positions (fp32, to
// 1e-4 relative) for every kind; models/search.h builds greedy and beam search,
// forced-decoding scores on top of it.
//
// Analyses (train/explain.h: attention heatmaps and occlusion importance):
//   final_hidden(src, src_mask, tgt_in, tgt_mask)      (B,T,D) decoder output before the output projection
//   source_attention(src, src_mask, tgt_in, tgt_mask)  per attention layer (B,H,T,S) weights over the source
// Kinds without attention over the source keep source_attention()'s default
// (empty) and has_source_attention() false; occlusion only needs final_hidden().
#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/config.h"
#include "models/init.h"
#include "models/plan.h"
#include "models/stack.h"
#include "models/state.h"

namespace mambamt::models {

// Special token ids (the data folder's fixed ids: data/tokenizer.h SpecialIds).
struct TokenIds {
  int64_t pad = 0;
  int64_t unk = 1;
  int64_t bos = 2;
  int64_t eos = 3;
  int64_t sep = 4;
};

// What a model kind is built from besides the config.
struct ModelContext {
  int64_t vocab_size = 32000;  // the joint vocabulary, special tokens included
  TokenIds ids;
  // Decoder-only kinds: a token put between the source (which ends with eos)
  // and the target (which starts with bos); -1 = none, the source's eos and the
  // target's bos mark the boundary (as data::pack_decoder_only's default).
  int64_t boundary = -1;
};

// The attention weights of one layer over the source (source_attention()).
struct SourceAttention {
  std::string layer;      // "decoder.3.cross" (cross-attention), "decoder.5.attention" (decoder-only self-attention)
  torch::Tensor weights;  // (B,H,T,S) float32, on the model's device
};

class TranslationModel : public torch::nn::Module {
 public:
  // Teacher forcing: logits (B,T,V) of the target positions (dtype of the
  // parameters; float32 in training on CPU). Dropout is active in train().
  virtual torch::Tensor forward(const torch::Tensor& src, const torch::Tensor& src_mask, const torch::Tensor& tgt_in,
                                const torch::Tensor& tgt_mask) = 0;

  // Incremental decoding, inference only (no gradients; call eval() first or
  // use models/search.h, which does). start() encodes the source (or prefills
  // the decoder-only prompt) and returns the state of B rows, positioned before
  // the first target token; `reserve` is the number of target tokens expected
  // (KV caches are allocated for it and grow beyond it).
  virtual InferenceState start(const torch::Tensor& src, const torch::Tensor& src_mask, int64_t reserve = 64) = 0;
  // Feeds tokens (B) int64, one per row (bos first), and returns the logits
  // (B,V) of the next token. The state advances by one position in every row.
  virtual torch::Tensor step(InferenceState& state, const torch::Tensor& tokens) = 0;
  // start() and then the target prefix (B,T) int64, T >= 1 (bos t_1 ..
  // t_{T-1}), fed as one teacher-forced pass: the state that T step() calls
  // with prefix's columns would leave (positioned before token T+1; the logits
  // of the prefix are not computed). With `lengths` (B) int64, row b's prefix
  // is its first lengths[b] tokens (0 <= lengths[b] <= T; the rest of the row
  // is padding and ignored): the state of every row is the one its own
  // lengths[b] steps would leave, ready for its token lengths[b] + 1, even
  // though the rows then step together. `reserve` counts the target tokens
  // expected in all, the prefix included. The default steps through the
  // prefix and takes no ragged lengths (prefills_ragged() false); the
  // encoder-decoder and decoder-only kinds prefill in parallel, ragged too
  // (what `bench decode` uses to reach a long output position without
  // decoding it, and search.h for forced target prefixes).
  virtual InferenceState prefill(const torch::Tensor& src, const torch::Tensor& src_mask, const torch::Tensor& prefix,
                                 int64_t reserve = 64, const torch::Tensor& lengths = {});
  // Whether prefill() takes prefixes of different lengths in one batch.
  virtual bool prefills_ragged() const { return false; }
  // Whether step() honours a static state (InferenceState::make_static:
  // tensors changed in place, shapes kept; what a CUDA graph of the step
  // needs, models/graph.h). True for the encoder-decoder and decoder-only kinds.
  virtual bool steps_statically() const { return false; }

  // Teacher forcing like forward(), but the decoder's final hidden states
  // (B,T,D) at the target positions: after the decoder's final norm, before
  // the output projection (forward() is their logits). The default throws
  // Error naming the kind; every kind that supports occlusion implements it.
  virtual torch::Tensor final_hidden(const torch::Tensor& src, const torch::Tensor& src_mask,
                                     const torch::Tensor& tgt_in, const torch::Tensor& tgt_mask);

  // Whether source_attention() returns anything for this model (false for
  // kinds and plans without an attention layer that sees the source).
  virtual bool has_source_attention() const { return false; }

  // A teacher-forced pass (no gradients; call it in eval mode) recording the
  // attention of every target position over the source, one entry per layer
  // whose attention sees the source, in layer order. src must be right-padded
  // (data::collate's layout); weights[b][h][t][j] is the weight that target
  // position t (the query predicting tgt_out[t]) gives source column j of
  // src: 0 at padding, each row summing to 1 over the real source tokens.
  // Decoder-only kinds renormalise their self-attention over the source part
  // of the sequence (a row whose window does not reach the source is all 0).
  // Default: empty (no attention over the source).
  virtual std::vector<SourceAttention> source_attention(const torch::Tensor& src, const torch::Tensor& src_mask,
                                                        const torch::Tensor& tgt_in, const torch::Tensor& tgt_mask) {
    return {};
  }

  // The kind ("hybrid", ...), the config it was built from, and the plan.
  const std::string& kind() const { return kind_; }
  const core::ModelConfig& config() const { return config_; }
  const ModelContext& context() const { return context_; }
  const Plan& plan() const { return plan_; }
  int64_t vocab_size() const { return context_.vocab_size; }
  int64_t parameter_count() const;
  // Parameters read by one decoding step: the decoder's (output projection
  // included), not the encoder's (what `bench decode` predicts speed from).
  virtual int64_t decoder_parameter_count() const = 0;

 protected:
  TranslationModel(std::string kind, core::ModelConfig config, ModelContext context, Plan plan);
  // The weights' initialisation (model.init, model.init_std).
  const WeightInit& weight_init() const { return init_; }
  // An embedding lookup (B,L) -> (B,L,D) at the scale of the init scheme
  // (times sqrt(d_model) for the standard one: models/init.h).
  torch::Tensor lookup(torch::nn::Embedding& table, const torch::Tensor& ids);

 private:
  std::string kind_;
  core::ModelConfig config_;
  ModelContext context_;
  Plan plan_;
  WeightInit init_;         // from config_
  double embed_scale_ = 1.0;  // embedding_scale(init_, d_model)
};

using ModelPtr = std::shared_ptr<TranslationModel>;

// The typed options of a stack from the config (what every kind builds on).
StackOptions stack_options(const core::ModelConfig& config, const std::vector<LayerSpec>& layers, bool causal);

// Encoder-decoder kinds (hybrid, transformer): an encoder stack, a decoder
// stack with cross-attention, shared (tie_embeddings) or separate source,
// target and output embeddings.
class EncoderDecoderModel : public TranslationModel {
 public:
  EncoderDecoderModel(const std::string& kind, const core::ModelConfig& config, const ModelContext& context,
                      const Plan& plan);
  torch::Tensor forward(const torch::Tensor& src, const torch::Tensor& src_mask, const torch::Tensor& tgt_in,
                        const torch::Tensor& tgt_mask) override;
  InferenceState start(const torch::Tensor& src, const torch::Tensor& src_mask, int64_t reserve = 64) override;
  torch::Tensor step(InferenceState& state, const torch::Tensor& tokens) override;
  InferenceState prefill(const torch::Tensor& src, const torch::Tensor& src_mask, const torch::Tensor& prefix,
                         int64_t reserve = 64, const torch::Tensor& lengths = {}) override;
  bool prefills_ragged() const override { return true; }
  bool steps_statically() const override { return true; }
  int64_t decoder_parameter_count() const override;
  torch::Tensor final_hidden(const torch::Tensor& src, const torch::Tensor& src_mask, const torch::Tensor& tgt_in,
                             const torch::Tensor& tgt_mask) override;
  bool has_source_attention() const override;  // any decoder layer with cross-attention
  std::vector<SourceAttention> source_attention(const torch::Tensor& src, const torch::Tensor& src_mask,
                                                const torch::Tensor& tgt_in, const torch::Tensor& tgt_mask) override;

  // The encoder output (B,S,D) with its mask, padding moved to the end of each row.
  Memory encode(const torch::Tensor& src, const torch::Tensor& src_mask);

  torch::nn::Embedding src_embed{nullptr}, tgt_embed{nullptr};  // the same module when tied
  torch::nn::Linear out_proj{nullptr};                          // untied only
  Stack encoder{nullptr}, decoder{nullptr};

 private:
  torch::Tensor logits(const torch::Tensor& h);
  double dropout_;
};

// Decoder-only kinds (mamba, decoder_only): one causal stack over
// source [boundary] target.
class DecoderOnlyModel : public TranslationModel {
 public:
  DecoderOnlyModel(const std::string& kind, const core::ModelConfig& config, const ModelContext& context,
                   const Plan& plan);
  torch::Tensor forward(const torch::Tensor& src, const torch::Tensor& src_mask, const torch::Tensor& tgt_in,
                        const torch::Tensor& tgt_mask) override;
  InferenceState start(const torch::Tensor& src, const torch::Tensor& src_mask, int64_t reserve = 64) override;
  torch::Tensor step(InferenceState& state, const torch::Tensor& tokens) override;
  InferenceState prefill(const torch::Tensor& src, const torch::Tensor& src_mask, const torch::Tensor& prefix,
                         int64_t reserve = 64, const torch::Tensor& lengths = {}) override;
  bool prefills_ragged() const override { return true; }
  bool steps_statically() const override { return true; }
  int64_t decoder_parameter_count() const override;
  torch::Tensor final_hidden(const torch::Tensor& src, const torch::Tensor& src_mask, const torch::Tensor& tgt_in,
                             const torch::Tensor& tgt_mask) override;
  bool has_source_attention() const override;  // any attention or local_attention layer
  std::vector<SourceAttention> source_attention(const torch::Tensor& src, const torch::Tensor& src_mask,
                                                const torch::Tensor& tgt_in, const torch::Tensor& tgt_mask) override;

  torch::nn::Embedding embed{nullptr};
  torch::nn::Linear out_proj{nullptr};  // untied only
  Stack decoder{nullptr};

 private:
  // The prompt: the source left-padded (+ boundary), its mask and positions.
  struct Prompt {
    torch::Tensor ids, mask, lengths;
  };
  Prompt prompt(const torch::Tensor& src, const torch::Tensor& src_mask) const;
  torch::Tensor logits(const torch::Tensor& h);
  double dropout_;
};

// Moves each row's real tokens to the front (right padding) or to the back
// (left padding), keeping their order: ids (B,L), mask (B,L) -> both reordered.
std::pair<torch::Tensor, torch::Tensor> align_padding(const torch::Tensor& ids, const torch::Tensor& mask,
                                                      bool left);

// The kinds' checks of their token inputs: `ids` must be (B,L) integer ids
// (`what` names them in the error); an undefined mask is all true, another
// must match ids' shape and becomes bool.
void check_ids(const torch::Tensor& ids, const char* what);
torch::Tensor bool_mask(const torch::Tensor& mask, const torch::Tensor& ids);

}  // namespace mambamt::models
