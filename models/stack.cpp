#include "models/stack.h"

#include "core/error.h"
#include "models/retnet.h"

namespace mambamt::models {

// ------------------------------------------------------------------ mixer registry

const std::vector<MixerKind>& mixer_kinds() {
  // One entry per layer kind plans may name.
  static const std::vector<MixerKind> kinds = {
      {"bimamba", "bidirectional Mamba (encoder): forward scan + scan of each row reversed within its length",
       [](const StackOptions& o) -> MixerPtr { return std::make_shared<BiMambaImpl>(o.mamba); }},
      {"mamba", "causal Mamba-2 (SSD) or Mamba-1 (selective scan) by mamba_version",
       [](const StackOptions& o) -> MixerPtr { return std::make_shared<MambaImpl>(o.mamba); }},
      {"attention", "multi-head self-attention with RoPE (causal in decoders, bidirectional in encoders)",
       [](const StackOptions& o) -> MixerPtr {
         AttentionOptions a = o.attention;
         a.causal(o.causal).window(0);
         return std::make_shared<AttentionImpl>(a);
       }},
      {"local_attention", "sliding-window self-attention with RoPE (model.attn_window tokens)",
       [](const StackOptions& o) -> MixerPtr {
         AttentionOptions a = o.attention;
         a.causal(o.causal).window(o.local_attention_window);
         return std::make_shared<AttentionImpl>(a);
       }},
      {"retention", "RetNet multi-scale retention (causal; decay 1 - 2^(-5-h) per head, rotation, group norm, "
                    "swish gate; models/retnet.h)",
       [](const StackOptions& o) -> MixerPtr {
         return std::make_shared<RetentionImpl>(RetentionOptions(o.d_model, o.attention.n_heads())
                                                    .rope_base(o.attention.rope_base())
                                                    .norm_eps(o.norm_eps)
                                                    .init(o.init));
       }},
  };
  return kinds;
}

MixerPtr build_mixer(const std::string& name, const StackOptions& options) {
  for (const MixerKind& k : mixer_kinds())
    if (k.name == name) return k.build(options);
  std::string known;
  for (const MixerKind& k : mixer_kinds()) known += (known.empty() ? "" : ", ") + k.name;
  throw Error("unknown layer kind `" + name + "` (known: " + known + ")");
}

// ------------------------------------------------------------------ layer

LayerImpl::LayerImpl(const LayerSpec& s, const StackOptions& o) : spec(s), dropout(o.dropout) {
  auto norm = [&] { return RMSNorm(RMSNormOptions(o.d_model).eps(o.norm_eps)); };
  mix_norm = register_module("mix_norm", norm());
  mixer = register_module("mixer", build_mixer(s.mixer, o));
  if (o.causal && !mixer->causal())
    throw Error("layer kind `" + s.mixer + "` is bidirectional and cannot be used in a decoder");
  if (s.cross) {
    cross_norm = register_module("cross_norm", norm());
    cross = register_module("cross", CrossAttention(o.cross));
  }
  if (s.mlp) {
    mlp_norm = register_module("mlp_norm", norm());
    mlp = register_module("mlp", Mlp(o.mlp));
  }
}

torch::Tensor LayerImpl::drop(const torch::Tensor& x) {
  return dropout > 0 && is_training() ? torch::dropout(x, dropout, true) : x;
}

torch::Tensor LayerImpl::forward(const torch::Tensor& x_in, const SeqInfo& info, const Memory* memory,
                                 LayerState* state) {
  torch::Tensor x = x_in + drop(mixer->forward(mix_norm(x_in), info, state));
  if (cross) {
    TORCH_CHECK(memory, "a cross-attention layer needs the source memory");
    CrossKv kv = cross->memory(memory->enc, memory->mask);
    x = x + drop(cross(cross_norm(x), info.positions, kv));
    if (state) state->cross = kv;
  }
  if (mlp) x = x + drop(mlp(mlp_norm(x)));
  return x;
}

torch::Tensor LayerImpl::step(const torch::Tensor& x_in, const StepInfo& info, LayerState& state) {
  torch::Tensor x = x_in + mixer->step(mix_norm(x_in), info, state);
  if (cross) x = x + cross(cross_norm(x).unsqueeze(1), info.position.unsqueeze(1), state.cross).squeeze(1);
  if (mlp) x = x + mlp(mlp_norm(x));
  return x;
}

void LayerImpl::init_state(LayerState& state, int64_t batch, int64_t reserve, const torch::TensorOptions& options,
                           const Memory* memory) {
  mixer->init_state(state, batch, reserve, options);
  if (cross) {
    TORCH_CHECK(memory, "a cross-attention layer needs the source memory");
    state.cross = cross->memory(memory->enc, memory->mask);
  }
}

// ------------------------------------------------------------------ stack

StackImpl::StackImpl(const StackOptions& o) : options(o) {
  layer_list = register_module("layers", torch::nn::ModuleList());
  for (const LayerSpec& s : o.layers) {
    Layer l(s, o);
    layer_list->push_back(l);
    layers.push_back(l);
  }
  if (o.dense_connections > 0 && o.layers.size() > 1) {
    auto dense = register_module("dense", torch::nn::ModuleList());
    for (size_t i = 1; i < o.layers.size(); ++i) {
      torch::nn::Linear t(torch::nn::LinearOptions(o.d_model, o.d_model).bias(false));
      torch::nn::Linear g(torch::nn::LinearOptions(o.d_model, o.d_model).bias(false));
      init_linear(t, o.init);
      init_linear(g, o.init);
      auto pair = torch::nn::ModuleList();
      pair->push_back(t);
      pair->push_back(g);
      dense->push_back(pair);
      dense_t.push_back(t);
      dense_g.push_back(g);
    }
  }
  final_norm = register_module("final_norm", RMSNorm(RMSNormOptions(o.d_model).eps(o.norm_eps)));
}

torch::Tensor StackImpl::dense_input(size_t i, const std::vector<torch::Tensor>& hidden) {
  torch::Tensor x = hidden[i];
  if (dense_t.empty() || i == 0) return x;
  const size_t m = static_cast<size_t>(options.dense_connections);
  const size_t from = i > m ? i - m : 0;
  for (size_t j = from; j < i; ++j)
    x = x + torch::sigmoid(dense_g[i - 1](hidden[j])) * dense_t[i - 1](hidden[j]);
  return x;
}

torch::Tensor StackImpl::forward(const torch::Tensor& x, const SeqInfo& info, const Memory* memory,
                                 std::vector<LayerState>* states) {
  TORCH_CHECK(!states || states->size() == layers.size(), "Stack: one state per layer expected");
  std::vector<torch::Tensor> hidden{x};
  for (size_t i = 0; i < layers.size(); ++i) {
    torch::Tensor in = dense_input(i, hidden);
    hidden.push_back(layers[i]->forward(in, info, memory, states ? &(*states)[i] : nullptr));
  }
  return final_norm(hidden.back());
}

torch::Tensor StackImpl::step(const torch::Tensor& x, const StepInfo& info, std::vector<LayerState>& states) {
  TORCH_CHECK(states.size() == layers.size(), "Stack: one state per layer expected");
  std::vector<torch::Tensor> hidden{x};
  for (size_t i = 0; i < layers.size(); ++i) {
    torch::Tensor in = dense_input(i, hidden);
    hidden.push_back(layers[i]->step(in, info, states[i]));
  }
  return final_norm(hidden.back());
}

std::vector<LayerState> StackImpl::init_states(int64_t batch, int64_t reserve, const torch::TensorOptions& options,
                                               const Memory* memory) {
  std::vector<LayerState> states(layers.size());
  for (size_t i = 0; i < layers.size(); ++i) layers[i]->init_state(states[i], batch, reserve, options, memory);
  return states;
}

}  // namespace mambamt::models
