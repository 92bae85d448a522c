#include "models/registry.h"

#include "core/error.h"
#include "models/rnnsearch.h"

namespace mambamt::models {
namespace {

ModelPtr encoder_decoder(const core::ModelConfig& c, const ModelContext& ctx) {
  return std::make_shared<EncoderDecoderModel>(c.kind, c, ctx, make_plan(c));
}

ModelPtr decoder_only(const core::ModelConfig& c, const ModelContext& ctx) {
  return std::make_shared<DecoderOnlyModel>(c.kind, c, ctx, make_plan(c));
}

ModelPtr rnnsearch(const core::ModelConfig& c, const ModelContext& ctx) {
  return std::make_shared<RnnSearchModel>(c, ctx, make_plan(c));
}

}  // namespace

const std::vector<ModelKind>& model_kinds() {
  static const std::vector<ModelKind> kinds = {
      {"hybrid", "Bi-Mamba/attention encoder, Mamba/attention decoder with cross-attention", encoder_decoder,
       nullptr, nullptr},
      {"transformer", "encoder-decoder Transformer baseline (attention + MLP in every layer)", encoder_decoder,
       nullptr, nullptr},
      {"mamba", "decoder-only Mamba over source <boundary> target, no attention", decoder_only, nullptr, nullptr},
      {"decoder_only", "decoder-only over source <boundary> target with attention layers (Transformer++, "
                       "Mamba-MHA, Mamba-Local)",
       decoder_only, nullptr, nullptr},
      {"retnet", "decoder-only RetNet over source <boundary> target (multi-scale retention + MLP in every layer)",
       decoder_only, nullptr, nullptr},
      {"rnnsearch", "RNNsearch: bidirectional GRU encoder, GRU decoder with additive attention and maxout output",
       rnnsearch, rnnsearch_parameter_count, rnnsearch_plan_report},
  };
  return kinds;
}

ModelPtr build_model(const core::ModelConfig& config, const ModelContext& context) {
  if (context.vocab_size < 1) throw InputError("vocabulary size must be positive, got " + std::to_string(context.vocab_size));
  for (const ModelKind& k : model_kinds())
    if (k.name == config.kind) return k.build(config, context);
  std::string known;
  for (const ModelKind& k : model_kinds()) known += (known.empty() ? "" : ", ") + k.name;
  throw InputError("model.kind = \"" + config.kind + "\": unknown model kind (known: " + known + ")");
}

ModelPtr build_model(const core::ModelConfig& config, int64_t vocab_size) {
  ModelContext ctx;
  ctx.vocab_size = vocab_size;
  return build_model(config, ctx);
}

}  // namespace mambamt::models
