#include "models/model.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "models/detail/linear.h"

namespace mambamt::models {
namespace {

torch::Tensor embed_drop(const torch::Tensor& x, double p, bool training) {
  return p > 0 && training ? torch::dropout(x, p, true) : x;
}

int64_t numel_of(const std::vector<torch::Tensor>& ps) {
  int64_t n = 0;
  for (const auto& p : ps) n += p.numel();
  return n;
}

// Switches weight recording on for a set of attention modules for one scope;
// off again (and the weights dropped) at its end, whatever happens.
template <typename Module>
class RecordGuard {
 public:
  explicit RecordGuard(std::vector<Module*> modules) : modules_(std::move(modules)) {
    for (Module* m : modules_) {
      m->record = true;
      m->last_weights = torch::Tensor();
    }
  }
  ~RecordGuard() {
    for (Module* m : modules_) {
      m->record = false;
      m->last_weights = torch::Tensor();
    }
  }
  RecordGuard(const RecordGuard&) = delete;
  RecordGuard& operator=(const RecordGuard&) = delete;

 private:
  std::vector<Module*> modules_;
};

// The mask of a source that source_attention() can report in src's own columns.
torch::Tensor right_padded_mask(const torch::Tensor& src, const torch::Tensor& src_mask) {
  torch::Tensor mask = bool_mask(src_mask, src);
  torch::Tensor prefix = torch::arange(mask.size(1), src.options().dtype(torch::kLong)).unsqueeze(0) <
                         mask.sum(1, /*keepdim=*/true);
  TORCH_CHECK(torch::equal(prefix, mask), "source_attention: src must be right-padded (data::collate's layout)");
  return mask;
}

}  // namespace

torch::Tensor TranslationModel::final_hidden(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&,
                                             const torch::Tensor&) {
  throw Error("model kind `" + kind() + "` does not expose its decoder's final hidden states (final_hidden)");
}

SeqInfo SeqInfo::from_mask(const torch::Tensor& mask, int64_t batch, int64_t length, const torch::Device& device) {
  SeqInfo s;
  auto lopts = torch::TensorOptions().dtype(torch::kLong).device(device);
  if (!mask.defined()) {
    s.positions = torch::arange(length, lopts).unsqueeze(0).expand({batch, length});
    s.lengths = torch::full({batch}, length, lopts);
    s.right_padded = true;
    return s;
  }
  s.mask = mask.to(torch::kBool);
  s.positions = (s.mask.to(torch::kLong).cumsum(1) - 1).clamp_min(0);
  s.lengths = s.mask.sum(1);
  torch::Tensor prefix = torch::arange(length, lopts).unsqueeze(0) < s.lengths.unsqueeze(1);
  s.right_padded = torch::equal(prefix, s.mask);
  return s;
}

std::pair<torch::Tensor, torch::Tensor> align_padding(const torch::Tensor& ids, const torch::Tensor& mask, bool left) {
  const int64_t l = ids.size(1);
  torch::Tensor t = torch::arange(l, ids.options().dtype(torch::kLong)).unsqueeze(0);
  torch::Tensor len = mask.sum(1, /*keepdim=*/true);
  torch::Tensor aligned = left ? t >= (l - len) : t < len;
  if (torch::equal(aligned, mask)) return {ids, mask};
  // Real tokens sort before (right padding) or after (left padding) the padding, in order.
  torch::Tensor key = left ? torch::where(mask, t + l, t) : torch::where(mask, t, t + l);
  torch::Tensor order = std::get<1>(key.sort(/*dim=*/1));
  return {ids.gather(1, order), mask.gather(1, order)};
}

torch::Tensor bool_mask(const torch::Tensor& mask, const torch::Tensor& ids) {
  if (!mask.defined()) return torch::ones(ids.sizes(), ids.options().dtype(torch::kBool));
  TORCH_CHECK(mask.sizes() == ids.sizes(), "mask ", mask.sizes(), " does not match ids ", ids.sizes());
  return mask.to(torch::kBool);
}

void check_ids(const torch::Tensor& ids, const char* what) {
  TORCH_CHECK(ids.defined() && ids.dim() == 2, what, " must be (B,L) token ids, got ",
              ids.defined() ? ids.sizes() : torch::IntArrayRef{});
  TORCH_CHECK(!ids.is_floating_point(), what, " must be integer token ids");
}

TranslationModel::TranslationModel(std::string kind, core::ModelConfig config, ModelContext context, Plan plan)
    : kind_(std::move(kind)),
      config_(std::move(config)),
      context_(context),
      plan_(std::move(plan)),
      init_(WeightInit::from_config(config_.init, config_.init_std)),
      embed_scale_(embedding_scale(init_, config_.d_model)) {}

torch::Tensor TranslationModel::lookup(torch::nn::Embedding& table, const torch::Tensor& ids) {
  torch::Tensor x = table(ids);
  return embed_scale_ == 1.0 ? x : x * embed_scale_;
}

int64_t TranslationModel::parameter_count() const { return numel_of(parameters()); }

namespace {
void check_prefix(const torch::Tensor& src, const torch::Tensor& prefix, const torch::Tensor& lengths) {
  check_ids(prefix, "prefix");
  TORCH_CHECK(prefix.size(0) == src.size(0) && prefix.size(1) >= 1, "prefill: prefix must be (B,T) with B = ",
              src.size(0), " and T >= 1, got ", prefix.sizes());
  if (!lengths.defined()) return;
  TORCH_CHECK(lengths.dim() == 1 && lengths.size(0) == prefix.size(0) && !lengths.is_floating_point(),
              "prefill: lengths must be (B) integers with B = ", prefix.size(0), ", got ", lengths.sizes());
  TORCH_CHECK(lengths.ge(0).logical_and(lengths.le(prefix.size(1))).all().item<bool>(),
              "prefill: every length must be in [0, ", prefix.size(1), "], got ", lengths);
}

// Row b's prefix in its last lengths[b] columns (left padding: the causal
// stacks' states then end at every row's own last token); with lengths
// undefined, prefix as it is and no mask.
std::pair<torch::Tensor, torch::Tensor> left_aligned(const torch::Tensor& prefix, const torch::Tensor& lengths) {
  torch::Tensor ids = prefix.to(torch::kLong);
  if (!lengths.defined()) return {ids, torch::Tensor()};
  torch::Tensor t = torch::arange(prefix.size(1), ids.options()).unsqueeze(0);
  return align_padding(ids, t < lengths.to(ids.device(), torch::kLong).unsqueeze(1), /*left=*/true);
}

// What a stack's step is told about the state's next token.
StepInfo step_info(const InferenceState& st) {
  StepInfo info{st.position};
  info.column = st.column;
  info.span = st.span;
  return info;
}

// After a step: the next position (in place for a static state).
void advance(InferenceState& st) {
  if (st.is_static()) {
    st.position.add_(1);
    st.column.add_(1);
  } else {
    st.position = st.position + 1;
  }
}
}  // namespace

InferenceState TranslationModel::prefill(const torch::Tensor& src, const torch::Tensor& src_mask,
                                         const torch::Tensor& prefix, int64_t reserve, const torch::Tensor& lengths) {
  torch::NoGradGuard no_grad;
  check_prefix(src, prefix, lengths);
  TORCH_CHECK(!lengths.defined() || lengths.eq(prefix.size(1)).all().item<bool>(), "prefill: model kind `", kind(),
              "` steps through a prefix and takes no rows of different lengths (prefills_ragged() is false)");
  InferenceState st = start(src, src_mask, std::max(reserve, prefix.size(1)));
  for (int64_t t = 0; t < prefix.size(1); ++t) step(st, prefix.select(1, t));
  return st;
}

StackOptions stack_options(const core::ModelConfig& c, const std::vector<LayerSpec>& layers, bool causal) {
  const WeightInit init = WeightInit::from_config(c.init, c.init_std);
  // Residual branches of the stack (mamba-ssm's n_layer times branches per
  // layer): the Mamba output projections start scaled by 1/sqrt of it.
  int64_t branches = 0;
  for (const LayerSpec& s : layers) branches += 1 + (s.cross ? 1 : 0) + (s.mlp ? 1 : 0);
  StackOptions o(c.d_model);
  o.layers = layers;
  o.causal = causal;
  o.attention =
      AttentionOptions(c.d_model, c.n_heads).rope_base(c.rope_base).attn_dropout(c.attn_dropout).init(init);
  o.local_attention_window = c.attn_window;
  o.mamba = MambaOptions(c.d_model)
                .version(c.mamba_version)
                .d_state(c.d_state)
                .d_conv(c.d_conv)
                .expand(c.expand)
                .headdim(c.headdim)
                .ngroups(c.ngroups)
                .chunk_size(c.chunk_size)
                .norm_eps(c.norm_eps)
                .init(init)
                .out_scale(1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(branches, 1))));
  o.mlp = MlpOptions(c.d_model, c.d_ff).kind(mlp_kind(c.mlp)).init(init);
  o.cross = CrossAttentionOptions(c.d_model, c.n_heads)
                .kind(cross_attention_kind(c.cross_attn))
                .window(c.cross_attn_window)
                .attn_dropout(c.attn_dropout)
                .init(init);
  o.dense_connections = c.dense_connections;
  o.dropout = c.dropout;
  o.norm_eps = c.norm_eps;
  o.init = init;
  return o;
}

namespace {
torch::nn::Embedding make_embedding(const core::ModelConfig& c, int64_t vocab, const WeightInit& init) {
  torch::nn::Embedding e(torch::nn::EmbeddingOptions(vocab, c.d_model));
  init_embedding(e->weight, init);
  return e;
}
// An untied output matrix starts as a tied one would: logits of unit scale.
torch::nn::Linear make_output(const core::ModelConfig& c, int64_t vocab, const WeightInit& init) {
  torch::nn::Linear l(torch::nn::LinearOptions(c.d_model, vocab).bias(false));
  init_embedding(l->weight, init);
  return l;
}
}  // namespace

// ------------------------------------------------------------------ encoder-decoder

EncoderDecoderModel::EncoderDecoderModel(const std::string& kind, const core::ModelConfig& config,
                                         const ModelContext& context, const Plan& plan)
    : TranslationModel(kind, config, context, plan), dropout_(config.dropout) {
  TORCH_CHECK(!plan.decoder_only && !plan.encoder.empty(), "EncoderDecoderModel needs an encoder plan");
  if (config.tie_embeddings) {
    src_embed = register_module("embed", make_embedding(config, context.vocab_size, weight_init()));
    tgt_embed = src_embed;
  } else {
    src_embed = register_module("src_embed", make_embedding(config, context.vocab_size, weight_init()));
    tgt_embed = register_module("tgt_embed", make_embedding(config, context.vocab_size, weight_init()));
    out_proj = register_module("out_proj", make_output(config, context.vocab_size, weight_init()));
  }
  encoder = register_module("encoder", Stack(stack_options(config, plan.encoder, /*causal=*/false)));
  decoder = register_module("decoder", Stack(stack_options(config, plan.decoder, /*causal=*/true)));
}

torch::Tensor EncoderDecoderModel::logits(const torch::Tensor& h) {
  return detail::linear(h, out_proj ? out_proj->weight : tgt_embed->weight);
}

Memory EncoderDecoderModel::encode(const torch::Tensor& src, const torch::Tensor& src_mask) {
  check_ids(src, "src");
  auto [ids, mask] = align_padding(src, bool_mask(src_mask, src), /*left=*/false);
  SeqInfo info = SeqInfo::from_mask(mask, ids.size(0), ids.size(1), ids.device());
  torch::Tensor x = embed_drop(lookup(src_embed, ids), dropout_, is_training());
  return Memory{encoder(x, info), mask};
}

torch::Tensor EncoderDecoderModel::final_hidden(const torch::Tensor& src, const torch::Tensor& src_mask,
                                                const torch::Tensor& tgt_in, const torch::Tensor& tgt_mask) {
  check_ids(tgt_in, "tgt_in");
  TORCH_CHECK(src.size(0) == tgt_in.size(0), "src has ", src.size(0), " rows but tgt_in has ", tgt_in.size(0));
  Memory m = encode(src, src_mask);
  torch::Tensor tmask = bool_mask(tgt_mask, tgt_in);
  SeqInfo info = SeqInfo::from_mask(tmask, tgt_in.size(0), tgt_in.size(1), tgt_in.device());
  return decoder(embed_drop(lookup(tgt_embed, tgt_in), dropout_, is_training()), info, &m);
}

torch::Tensor EncoderDecoderModel::forward(const torch::Tensor& src, const torch::Tensor& src_mask,
                                           const torch::Tensor& tgt_in, const torch::Tensor& tgt_mask) {
  return logits(final_hidden(src, src_mask, tgt_in, tgt_mask));
}

bool EncoderDecoderModel::has_source_attention() const {
  for (const Layer& l : decoder->layers)
    if (l->cross) return true;
  return false;
}

std::vector<SourceAttention> EncoderDecoderModel::source_attention(const torch::Tensor& src,
                                                                   const torch::Tensor& src_mask,
                                                                   const torch::Tensor& tgt_in,
                                                                   const torch::Tensor& tgt_mask) {
  torch::NoGradGuard no_grad;
  check_ids(src, "src");
  const torch::Tensor mask = right_padded_mask(src, src_mask);
  std::vector<CrossAttentionImpl*> modules;
  std::vector<std::string> names;
  for (size_t i = 0; i < decoder->layers.size(); ++i)
    if (decoder->layers[i]->cross) {
      modules.push_back(decoder->layers[i]->cross.get());
      names.push_back("decoder." + std::to_string(i) + ".cross");
    }
  std::vector<SourceAttention> out;
  if (modules.empty()) return out;
  RecordGuard<CrossAttentionImpl> record(modules);
  final_hidden(src, mask, tgt_in, tgt_mask);
  // The encoder keeps right-padded sources as they are, so its columns are src's;
  // the softmax already gave the padding columns weight 0.
  for (size_t k = 0; k < modules.size(); ++k) out.push_back({names[k], modules[k]->last_weights.to(torch::kFloat)});
  return out;
}

InferenceState EncoderDecoderModel::start(const torch::Tensor& src, const torch::Tensor& src_mask, int64_t reserve) {
  torch::NoGradGuard no_grad;
  Memory m = encode(src, src_mask);
  InferenceState st;
  const int64_t b = src.size(0);
  st.layers = decoder->init_states(b, reserve, m.enc.options(), &m);
  st.position = torch::zeros({b}, src.options().dtype(torch::kLong));
  st.src_len = m.mask.sum(1);
  return st;
}

InferenceState EncoderDecoderModel::prefill(const torch::Tensor& src, const torch::Tensor& src_mask,
                                            const torch::Tensor& prefix, int64_t reserve,
                                            const torch::Tensor& lengths) {
  torch::NoGradGuard no_grad;
  check_prefix(src, prefix, lengths);
  Memory m = encode(src, src_mask);
  InferenceState st;
  const int64_t b = src.size(0), t = prefix.size(1);
  st.layers = decoder->init_states(b, std::max(reserve, t), m.enc.options(), &m);
  // The decoder's teacher-forced pass with states: attention layers append the
  // prefix's K/V to their caches (padding columns marked invalid), Mamba layers
  // leave their conv and SSM states. Positions count each row's own tokens.
  auto [ids, mask] = left_aligned(prefix, lengths);
  SeqInfo info = SeqInfo::from_mask(mask, b, t, prefix.device());
  decoder(lookup(tgt_embed, ids), info, &m, &st.layers);
  st.position = lengths.defined() ? lengths.to(src.device(), torch::kLong).clone()
                                  : torch::full({b}, t, src.options().dtype(torch::kLong));
  st.src_len = m.mask.sum(1);
  return st;
}

torch::Tensor EncoderDecoderModel::step(InferenceState& st, const torch::Tensor& tokens) {
  torch::NoGradGuard no_grad;
  TORCH_CHECK(tokens.dim() == 1 && tokens.size(0) == st.batch_size(), "step: tokens must be (B) with B = ",
              st.batch_size());
  torch::Tensor h = decoder->step(lookup(tgt_embed, tokens), step_info(st), st.layers);
  advance(st);
  return logits(h);
}

int64_t EncoderDecoderModel::decoder_parameter_count() const {
  return numel_of(decoder->parameters()) + (out_proj ? out_proj->weight.numel() : tgt_embed->weight.numel());
}

// ------------------------------------------------------------------ decoder-only

DecoderOnlyModel::DecoderOnlyModel(const std::string& kind, const core::ModelConfig& config,
                                   const ModelContext& context, const Plan& plan)
    : TranslationModel(kind, config, context, plan), dropout_(config.dropout) {
  TORCH_CHECK(plan.decoder_only && plan.encoder.empty(), "DecoderOnlyModel needs a decoder-only plan");
  embed = register_module("embed", make_embedding(config, context.vocab_size, weight_init()));
  if (!config.tie_embeddings) out_proj = register_module("out_proj", make_output(config, context.vocab_size, weight_init()));
  decoder = register_module("decoder", Stack(stack_options(config, plan.decoder, /*causal=*/true)));
}

torch::Tensor DecoderOnlyModel::logits(const torch::Tensor& h) {
  return detail::linear(h, out_proj ? out_proj->weight : embed->weight);
}

DecoderOnlyModel::Prompt DecoderOnlyModel::prompt(const torch::Tensor& src, const torch::Tensor& src_mask) const {
  check_ids(src, "src");
  auto [ids, mask] = align_padding(src, bool_mask(src_mask, src), /*left=*/true);
  if (context().boundary >= 0) {
    ids = torch::cat({ids, torch::full({ids.size(0), 1}, context().boundary, ids.options())}, 1);
    mask = torch::cat({mask, torch::ones({mask.size(0), 1}, mask.options())}, 1);
  }
  return Prompt{ids, mask, mask.sum(1)};
}

torch::Tensor DecoderOnlyModel::final_hidden(const torch::Tensor& src, const torch::Tensor& src_mask,
                                             const torch::Tensor& tgt_in, const torch::Tensor& tgt_mask) {
  check_ids(tgt_in, "tgt_in");
  TORCH_CHECK(src.size(0) == tgt_in.size(0), "src has ", src.size(0), " rows but tgt_in has ", tgt_in.size(0));
  Prompt p = prompt(src, src_mask);
  const int64_t s = p.ids.size(1), t = tgt_in.size(1);
  torch::Tensor ids = torch::cat({p.ids, tgt_in.to(p.ids.scalar_type())}, 1);
  torch::Tensor mask = torch::cat({p.mask, bool_mask(tgt_mask, tgt_in)}, 1);
  SeqInfo info = SeqInfo::from_mask(mask, ids.size(0), ids.size(1), ids.device());
  torch::Tensor h = decoder(embed_drop(lookup(embed, ids), dropout_, is_training()), info);
  return h.narrow(1, s, t);
}

torch::Tensor DecoderOnlyModel::forward(const torch::Tensor& src, const torch::Tensor& src_mask,
                                        const torch::Tensor& tgt_in, const torch::Tensor& tgt_mask) {
  return logits(final_hidden(src, src_mask, tgt_in, tgt_mask));
}

namespace {
std::vector<std::pair<size_t, AttentionImpl*>> attention_mixers(const Stack& stack) {
  std::vector<std::pair<size_t, AttentionImpl*>> out;
  for (size_t i = 0; i < stack->layers.size(); ++i)
    if (auto* a = dynamic_cast<AttentionImpl*>(stack->layers[i]->mixer.get())) out.emplace_back(i, a);
  return out;
}
}  // namespace

bool DecoderOnlyModel::has_source_attention() const { return !attention_mixers(decoder).empty(); }

std::vector<SourceAttention> DecoderOnlyModel::source_attention(const torch::Tensor& src, const torch::Tensor& src_mask,
                                                                const torch::Tensor& tgt_in,
                                                                const torch::Tensor& tgt_mask) {
  torch::NoGradGuard no_grad;
  check_ids(src, "src");
  const torch::Tensor mask = right_padded_mask(src, src_mask);
  auto mixers = attention_mixers(decoder);
  std::vector<SourceAttention> out;
  if (mixers.empty()) return out;
  std::vector<AttentionImpl*> modules;
  for (auto& [i, a] : mixers) modules.push_back(a);
  RecordGuard<AttentionImpl> record(modules);
  final_hidden(src, mask, tgt_in, tgt_mask);
  // The packed row is [pad ...] s_1 .. s_n eos [boundary] bos t_1 .. : the
  // source of row b ends `nb` columns before the prompt's end.
  const int64_t b = src.size(0), s = src.size(1), t = tgt_in.size(1);
  const int64_t prompt_len = s + (context().boundary >= 0 ? 1 : 0);
  const int64_t source_end = s;  // exclusive: the boundary (if any) follows
  torch::Tensor len = mask.sum(1, /*keepdim=*/true);                                // (B,1)
  torch::Tensor j = torch::arange(s, src.options().dtype(torch::kLong)).unsqueeze(0);  // (1,S)
  torch::Tensor col = (source_end - len + j).clamp_min(0);                           // (B,S) packed column of source j
  const torch::Tensor keep = mask.to(torch::kFloat).view({b, 1, 1, s});
  for (size_t k = 0; k < modules.size(); ++k) {
    torch::Tensor w = modules[k]->last_weights.to(torch::kFloat);  // (B,H,L,L)
    const int64_t h = w.size(1);
    w = w.narrow(2, prompt_len, t);                                                  // target queries (B,H,T,L)
    w = w.gather(3, col.view({b, 1, 1, s}).expand({b, h, t, s})) * keep;            // (B,H,T,S)
    torch::Tensor total = w.sum(-1, /*keepdim=*/true);
    w = torch::where(total > 0, w / total.clamp_min(1e-30), torch::zeros_like(w));
    const std::string kind = modules[k]->options.window() > 0 ? "local_attention" : "attention";
    out.push_back({"decoder." + std::to_string(mixers[k].first) + "." + kind, w});
  }
  return out;
}

InferenceState DecoderOnlyModel::start(const torch::Tensor& src, const torch::Tensor& src_mask, int64_t reserve) {
  torch::NoGradGuard no_grad;
  Prompt p = prompt(src, src_mask);
  const int64_t b = p.ids.size(0);
  torch::Tensor x = lookup(embed, p.ids);
  InferenceState st;
  st.layers = decoder->init_states(b, p.ids.size(1) + reserve, x.options(), nullptr);
  SeqInfo info = SeqInfo::from_mask(p.mask, b, p.ids.size(1), p.ids.device());
  decoder(x, info, nullptr, &st.layers);  // prefill; the prompt's outputs are not needed
  st.position = p.lengths.clone();
  st.src_len = bool_mask(src_mask, src).sum(1);
  return st;
}

InferenceState DecoderOnlyModel::prefill(const torch::Tensor& src, const torch::Tensor& src_mask,
                                         const torch::Tensor& prefix, int64_t reserve, const torch::Tensor& lengths) {
  torch::NoGradGuard no_grad;
  check_prefix(src, prefix, lengths);
  Prompt p = prompt(src, src_mask);
  const int64_t b = p.ids.size(0), t = prefix.size(1);
  // The prompt and the prefix in one causal pass: [pad ...] s_1 .. eos [boundary] bos t_1 ..
  // A ragged prefix's padding moves to the front too, so no row has a gap.
  torch::Tensor ids = torch::cat({p.ids, prefix.to(p.ids.scalar_type())}, 1);
  torch::Tensor tail = torch::ones({b, t}, p.mask.options());
  if (lengths.defined())
    tail = torch::arange(t, p.lengths.options()).unsqueeze(0) < lengths.to(p.lengths.device()).unsqueeze(1);
  torch::Tensor mask = torch::cat({p.mask, tail}, 1);
  if (lengths.defined()) std::tie(ids, mask) = align_padding(ids, mask, /*left=*/true);
  torch::Tensor x = lookup(embed, ids);
  InferenceState st;
  st.layers = decoder->init_states(b, p.ids.size(1) + std::max(reserve, t), x.options(), nullptr);
  SeqInfo info = SeqInfo::from_mask(mask, b, ids.size(1), ids.device());
  decoder(x, info, nullptr, &st.layers);
  st.position = p.lengths + (lengths.defined() ? lengths.to(p.lengths.device(), torch::kLong)
                                               : torch::full_like(p.lengths, t));
  st.src_len = bool_mask(src_mask, src).sum(1);
  return st;
}

torch::Tensor DecoderOnlyModel::step(InferenceState& st, const torch::Tensor& tokens) {
  torch::NoGradGuard no_grad;
  TORCH_CHECK(tokens.dim() == 1 && tokens.size(0) == st.batch_size(), "step: tokens must be (B) with B = ",
              st.batch_size());
  torch::Tensor h = decoder->step(lookup(embed, tokens), step_info(st), st.layers);
  advance(st);
  return logits(h);
}

int64_t DecoderOnlyModel::decoder_parameter_count() const {
  return numel_of(decoder->parameters()) + (out_proj ? out_proj->weight.numel() : embed->weight.numel());
}

}  // namespace mambamt::models
