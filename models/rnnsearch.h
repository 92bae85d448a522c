#pragma once
// RNNsearch (Bahdanau, Cho & Bengio 2015, "Neural Machine Translation by
// Jointly Learning to Align and Translate"; its appendix A): the
// attention-based recurrent encoder-decoder baseline, kind `rnnsearch`.
//
// Sizes from the config:
//   m = d_model     word embeddings (paper 620) and the maxout output width l
//                   (paper 500; l = m lets the output matrix share the target
//                   embedding table)
//   n = d_ff        GRU hidden units of each encoder direction and of the
//                   decoder, and the alignment model's hidden units n'
//                   (paper 1000 both)
//   enc_layers      stacked bidirectional GRU layers (paper 1); a layer above
//                   the first reads the annotations of the one below
//   dec_layers      1 (one decoder GRU; the config checks it)
//   tie_embeddings  one table for source and target embeddings and the output
//                   matrix W_o; untied (the paper's choice) three tables
// n_heads and the Mamba and attention keys are unused.
//
// GRUs have the paper's form (reset gate before U):
//   z = sigmoid(W_z x + U_z h),  r = sigmoid(W_r x + U_r h)
//   h' = (1 - z) .* h + z .* tanh(W x + U (r .* h))
// Encoder: a forward and a backward GRU over each source; annotations
//   h_j = [fwd_j ; bwd_j]   (B,S,2n)
// Decoder, target position i with input y_{i-1} (bos, t_1, ...):
//   s_0      = tanh(W_s bwd_1)
//   e_ij     = v_a^T tanh(W_a s_{i-1} + U_a h_j)
//   alpha_ij = softmax over the real source tokens j of e_ij
//   c_i      = sum_j alpha_ij h_j
//   t~_i     = U_o s_{i-1} + V_o E y_{i-1} + C_o c_i         (2l)
//   t_i      = max(t~_i[2k], t~_i[2k+1]), k < l               (maxout, pool 2)
//   logits_i = W_o t_i
//   s_i      = GRU(s_{i-1}, [E y_{i-1} ; c_i])                (state for position i+1)
// The deep output reads s_{i-1} as in the paper's appendix A.2.2.
//
// Padding: the source is moved to right padding, and the encoder loops keep
// a row's hidden state at its padded positions (so the backward scan starts
// from zero at the row's last real token); attention gives padding weight 0;
// the decoder keeps its state at padded target positions. A row's logits are
// therefore the same alone and inside a padded batch.
// Dropout (model.dropout) on the embeddings and on t_i, in training only.
//
// Incremental decoding keeps one LayerState: recurrent = s_{i-1} (B,n),
// cross.v = the annotations (B,S,2n), cross.k = their key projection U_a h_j
// (B,S,n'), cross.mask (B,S) and cross.src_len (B); InferenceState::reorder
// reorders all of them.
#include <torch/torch.h>

#include <cstdint>
#include <string>

#include "core/config.h"
#include "models/model.h"

namespace mambamt::models {

// One GRU in the paper's form: `input` projects x to the z, r and candidate
// blocks (3n, with bias); `recur_gates` is [U_z; U_r] (2n x n), `recur_cand`
// is U (n x n), both orthogonal per n x n block at initialisation.
class GruImpl : public torch::nn::Module {
 public:
  GruImpl(int64_t input_size, int64_t hidden_size, const WeightInit& init);
  // The input part of the gates: x (..., input) -> (..., 3n).
  torch::Tensor project(const torch::Tensor& x);
  // One step: xp (B,3n) (project()'s output plus any further input terms),
  // h (B,n) -> h' (B,n) in h's dtype.
  torch::Tensor cell(const torch::Tensor& xp, const torch::Tensor& h);

  int64_t hidden;
  torch::nn::Linear input{nullptr}, recur_gates{nullptr}, recur_cand{nullptr};
};
TORCH_MODULE(Gru);

// A forward and a backward GRU over the same input.
class BiGruImpl : public torch::nn::Module {
 public:
  BiGruImpl(int64_t input_size, int64_t hidden_size, const WeightInit& init);
  // x (B,S,in) with mask (B,S) right-padded -> (B,S,2n) [forward ; backward].
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask);
  Gru fwd{nullptr}, bwd{nullptr};
};
TORCH_MODULE(BiGru);

class RnnSearchModel : public TranslationModel {
 public:
  RnnSearchModel(const core::ModelConfig& config, const ModelContext& context, const Plan& plan);

  torch::Tensor forward(const torch::Tensor& src, const torch::Tensor& src_mask, const torch::Tensor& tgt_in,
                        const torch::Tensor& tgt_mask) override;
  InferenceState start(const torch::Tensor& src, const torch::Tensor& src_mask, int64_t reserve = 64) override;
  torch::Tensor step(InferenceState& state, const torch::Tensor& tokens) override;
  // The decoder GRU (with its context input), W_a and v_a, the deep output
  // and W_o: what one step reads besides one embedding row (U_a h_j and W_s
  // are applied once per source).
  int64_t decoder_parameter_count() const override;

  // Analyses (train/explain.h): final_hidden() is t_i, the maxout output
  // (B,T,m) that W_o turns into the logits (no dropout in eval mode);
  // source_attention() is the alignment below as one layer
  // "decoder.attention" with one head: (B,1,T,S).
  torch::Tensor final_hidden(const torch::Tensor& src, const torch::Tensor& src_mask, const torch::Tensor& tgt_in,
                             const torch::Tensor& tgt_mask) override;
  bool has_source_attention() const override { return true; }
  std::vector<SourceAttention> source_attention(const torch::Tensor& src, const torch::Tensor& src_mask,
                                                const torch::Tensor& tgt_in, const torch::Tensor& tgt_mask) override;

  // The alignment (the paper's alpha, what its Figure 3 plots) of a
  // teacher-forced pass: (B,T,S) float32, detached, computed without
  // gradients (call it in eval mode). weights[b][t][j] is the weight target
  // position t (the step that predicts tgt_out[t], fed tgt_in[t]) gives source
  // column j of `src` as passed (any padding): 0 at padding, each row summing
  // to 1 over the row's real source tokens. Rows past a target's length repeat
  // the last real position's state and are meaningless.
  torch::Tensor attention_weights(const torch::Tensor& src, const torch::Tensor& src_mask,
                                  const torch::Tensor& tgt_in, const torch::Tensor& tgt_mask);

  // The encoder's output for a source batch (padding moved to the right).
  struct Encoded {
    torch::Tensor annotations;  // (B,S,2n)
    torch::Tensor mask;         // (B,S) bool, right-padded
    torch::Tensor keys;         // (B,S,n') U_a annotations
    torch::Tensor init;         // (B,n) s_0
  };
  Encoded encode(const torch::Tensor& src, const torch::Tensor& src_mask);

  torch::nn::Embedding src_embed{nullptr}, tgt_embed{nullptr};  // the same module when tied
  torch::nn::Linear out_proj{nullptr};                          // W_o, untied only
  torch::nn::ModuleList encoder{nullptr};                       // enc_layers BiGru
  torch::nn::Linear init_state{nullptr};                        // W_s (n -> n, bias)
  Gru decoder{nullptr};                                         // input E y_{i-1}
  torch::nn::Linear dec_context{nullptr};                       // c_i -> 3n: the GRU's C, C_z, C_r
  torch::nn::Linear att_query{nullptr}, att_key{nullptr}, att_score{nullptr};  // W_a (bias), U_a, v_a
  torch::nn::Linear out_state{nullptr}, out_embed{nullptr}, out_context{nullptr};  // U_o (bias), V_o, C_o

 private:
  // alpha (B,S) of the states s (B,n) over the annotations' keys.
  torch::Tensor align(const torch::Tensor& s, const torch::Tensor& keys, const torch::Tensor& mask);
  // t_i (..., m) of s_{i-1} (..., n), E y_{i-1} (..., m), c_i (..., 2n), and its logits.
  torch::Tensor deep_output(const torch::Tensor& s, const torch::Tensor& emb, const torch::Tensor& ctx);
  torch::Tensor logits(const torch::Tensor& t);
  // Teacher forcing over an encoded source: t_i (B,T,m); alphas (B,T,S) when asked.
  torch::Tensor decode(const Encoded& e, const torch::Tensor& tgt_in, const torch::Tensor& tgt_mask,
                       torch::Tensor* alphas);
  torch::Tensor drop(const torch::Tensor& x);
  double dropout_;
};

// Parameters of the rnnsearch model of `config` (counted, not built), and the
// printable plan of `mambamt plan` (the registry's count and report hooks).
int64_t rnnsearch_parameter_count(const core::ModelConfig& config, int64_t vocab_size);
std::string rnnsearch_plan_report(const core::ModelConfig& config, int64_t vocab_size);

}  // namespace mambamt::models
