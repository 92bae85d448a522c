#include "models/rnnsearch.h"

#include <iomanip>
#include <limits>
#include <sstream>

#include "models/detail/linear.h"
#include "models/detail/report.h"

namespace mambamt::models {
namespace {

using detail::millions;
using detail::with_commas;

torch::nn::Linear make_linear(int64_t in, int64_t out, bool bias, const WeightInit& init) {
  torch::nn::Linear l(torch::nn::LinearOptions(in, out).bias(bias));
  init_linear(l, init);
  return l;
}

torch::nn::Embedding make_embedding(int64_t vocab, int64_t dim, const WeightInit& init) {
  torch::nn::Embedding e(torch::nn::EmbeddingOptions(vocab, dim));
  init_embedding(e->weight, init);
  return e;
}

// Orthogonal n x n blocks stacked in w (k*n, n), as the paper initialises U, U_z, U_r.
void orthogonal_blocks(const torch::Tensor& w) {
  torch::NoGradGuard no_grad;
  const int64_t n = w.size(1);
  for (int64_t r = 0; r < w.size(0); r += n) {
    torch::Tensor block = torch::empty({n, n});
    torch::nn::init::orthogonal_(block);
    w.narrow(0, r, n).copy_(block);
  }
}

// Columns of each row in the order align_padding(left=false) puts them:
// aligned[:, j] = original[:, order[:, j]].
torch::Tensor right_padding_order(const torch::Tensor& mask) {
  const int64_t l = mask.size(1);
  torch::Tensor t = torch::arange(l, mask.options().dtype(torch::kLong)).unsqueeze(0);
  return std::get<1>(torch::where(mask, t, t + l).sort(/*dim=*/1));
}

// ---- counting (rnnsearch_parameter_count and the report share it)

struct Counts {
  std::vector<int64_t> encoder;  // per BiGru layer
  int64_t init = 0, gru = 0, attention = 0, deep_output = 0, embeddings = 0;
  int64_t decoder() const { return init + gru + attention + deep_output; }
  int64_t total() const {
    int64_t t = decoder() + embeddings;
    for (int64_t e : encoder) t += e;
    return t;
  }
};

int64_t gru_count(int64_t in, int64_t n) { return 3 * n * in + 3 * n + 3 * n * n; }

Counts count(const core::ModelConfig& c, int64_t vocab) {
  const int64_t m = c.d_model, n = c.d_ff, a = c.d_ff, l = c.d_model;
  Counts k;
  for (int64_t i = 0; i < c.enc_layers; ++i) k.encoder.push_back(2 * gru_count(i == 0 ? m : 2 * n, n));
  k.init = n * n + n;
  k.gru = gru_count(m, n) + 2 * n * 3 * n;
  k.attention = n * a + a + 2 * n * a + a;
  k.deep_output = n * 2 * l + 2 * l + m * 2 * l + 2 * n * 2 * l;
  k.embeddings = (c.tie_embeddings ? 1 : 3) * vocab * m;
  return k;
}

}  // namespace

// ------------------------------------------------------------------ GRU

GruImpl::GruImpl(int64_t input_size, int64_t hidden_size, const WeightInit& init) : hidden(hidden_size) {
  input = register_module("input", make_linear(input_size, 3 * hidden_size, true, init));
  recur_gates = register_module("recur_gates", make_linear(hidden_size, 2 * hidden_size, false, init));
  recur_cand = register_module("recur_cand", make_linear(hidden_size, hidden_size, false, init));
  orthogonal_blocks(recur_gates->weight);
  orthogonal_blocks(recur_cand->weight);
}

torch::Tensor GruImpl::project(const torch::Tensor& x) { return detail::linear(x, input); }

torch::Tensor GruImpl::cell(const torch::Tensor& xp, const torch::Tensor& h) {
  torch::Tensor zr = torch::sigmoid(xp.narrow(-1, 0, 2 * hidden) + detail::linear(h, recur_gates));
  torch::Tensor z = zr.narrow(-1, 0, hidden), r = zr.narrow(-1, hidden, hidden);
  torch::Tensor cand = torch::tanh(xp.narrow(-1, 2 * hidden, hidden) + detail::linear(r * h, recur_cand));
  return (h + z * (cand - h)).to(h.scalar_type());
}

BiGruImpl::BiGruImpl(int64_t input_size, int64_t hidden_size, const WeightInit& init) {
  fwd = register_module("fwd", Gru(input_size, hidden_size, init));
  bwd = register_module("bwd", Gru(input_size, hidden_size, init));
}

torch::Tensor BiGruImpl::forward(const torch::Tensor& x, const torch::Tensor& mask) {
  // Both directions advance in one loop (step t is forward position t and
  // backward position S-1-t), their recurrent products batched, which halves
  // the operations of the sequential part. Each direction is exactly
  // GruImpl::cell (same operations, batched).
  const int64_t b = x.size(0), s = x.size(1), n = fwd->hidden;
  torch::Tensor xp = torch::stack({fwd->project(x), bwd->project(x).flip(1)});    // (2,B,S,3n)
  torch::Tensor real = torch::stack({mask, mask.flip(1)}).unsqueeze(-1);          // (2,B,S,1)
  torch::Tensor u_gates = torch::stack({fwd->recur_gates->weight, bwd->recur_gates->weight}).transpose(1, 2);  // (2,n,2n)
  torch::Tensor u_cand = torch::stack({fwd->recur_cand->weight, bwd->recur_cand->weight}).transpose(1, 2);     // (2,n,n)
  torch::Tensor h = torch::zeros({2, b, n}, x.options());
  std::vector<torch::Tensor> out(static_cast<size_t>(s));
  for (int64_t t = 0; t < s; ++t) {
    torch::Tensor xt = xp.select(2, t);  // (2,B,3n)
    torch::Tensor zr = torch::sigmoid(xt.narrow(-1, 0, 2 * n) + torch::bmm(h, u_gates));
    torch::Tensor z = zr.narrow(-1, 0, n), r = zr.narrow(-1, n, n);
    torch::Tensor cand = torch::tanh(xt.narrow(-1, 2 * n, n) + torch::bmm(r * h, u_cand));
    h = torch::where(real.select(2, t), (h + z * (cand - h)).to(h.scalar_type()), h);
    out[static_cast<size_t>(t)] = h;
  }
  torch::Tensor all = torch::stack(out, 2);  // (2,B,S,n)
  return torch::cat({all[0], all[1].flip(1)}, -1);
}

// ------------------------------------------------------------------ model

RnnSearchModel::RnnSearchModel(const core::ModelConfig& c, const ModelContext& ctx, const Plan& plan)
    : TranslationModel("rnnsearch", c, ctx, plan), dropout_(c.dropout) {
  TORCH_CHECK(c.enc_layers >= 1, "rnnsearch needs at least one encoder layer");
  const int64_t m = c.d_model, n = c.d_ff, a = c.d_ff, l = c.d_model, v = ctx.vocab_size;
  const WeightInit init = WeightInit::from_config(c.init, c.init_std);
  if (c.tie_embeddings) {
    src_embed = register_module("embed", make_embedding(v, m, init));
    tgt_embed = src_embed;
  } else {
    src_embed = register_module("src_embed", make_embedding(v, m, init));
    tgt_embed = register_module("tgt_embed", make_embedding(v, m, init));
    out_proj = register_module("out_proj", make_linear(l, v, false, init));
  }
  encoder = register_module("encoder", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.enc_layers; ++i) encoder->push_back(BiGru(i == 0 ? m : 2 * n, n, init));
  init_state = register_module("init_state", make_linear(n, n, true, init));
  decoder = register_module("decoder", Gru(m, n, init));
  dec_context = register_module("dec_context", make_linear(2 * n, 3 * n, false, init));
  att_query = register_module("att_query", make_linear(n, a, true, init));
  att_key = register_module("att_key", make_linear(2 * n, a, false, init));
  att_score = register_module("att_score", make_linear(a, 1, false, init));
  out_state = register_module("out_state", make_linear(n, 2 * l, true, init));
  out_embed = register_module("out_embed", make_linear(m, 2 * l, false, init));
  out_context = register_module("out_context", make_linear(2 * n, 2 * l, false, init));
}

torch::Tensor RnnSearchModel::drop(const torch::Tensor& x) {
  return dropout_ > 0 && is_training() ? torch::dropout(x, dropout_, true) : x;
}

RnnSearchModel::Encoded RnnSearchModel::encode(const torch::Tensor& src, const torch::Tensor& src_mask) {
  check_ids(src, "src");
  auto [ids, mask] = align_padding(src, bool_mask(src_mask, src), /*left=*/false);
  torch::Tensor x = drop(lookup(src_embed, ids));
  torch::Tensor bwd_first;
  const int64_t n = config().d_ff;
  for (const auto& layer : *encoder) {
    x = layer->as<BiGruImpl>()->forward(x, mask);
    bwd_first = x.select(1, 0).narrow(-1, n, n);  // the backward state at each row's first token
  }
  Encoded e;
  e.annotations = x;
  e.mask = mask;
  e.keys = detail::linear(x, att_key);
  // s_0 in the annotations' dtype (float32 under bf16 autocast, like the encoder states).
  e.init = torch::tanh(detail::linear(bwd_first, init_state)).to(x.scalar_type());
  return e;
}

torch::Tensor RnnSearchModel::align(const torch::Tensor& s, const torch::Tensor& keys, const torch::Tensor& mask) {
  torch::Tensor hidden = torch::tanh(keys + detail::linear(s, att_query).unsqueeze(1));  // (B,S,n')
  torch::Tensor e = torch::matmul(hidden, att_score->weight.squeeze(0));                  // (B,S)
  // Softmax in float32 at least; padding gets the lowest finite score (weight 0).
  if (e.scalar_type() != torch::kDouble) e = e.to(torch::kFloat);
  e = e.masked_fill(mask.logical_not(), std::numeric_limits<float>::lowest());
  return torch::softmax(e, -1);
}

torch::Tensor RnnSearchModel::deep_output(const torch::Tensor& s, const torch::Tensor& emb, const torch::Tensor& ctx) {
  torch::Tensor t = detail::linear(s, out_state) + detail::linear(emb, out_embed) + detail::linear(ctx, out_context);
  std::vector<int64_t> pooled(t.sizes().begin(), t.sizes().end());
  pooled.back() /= 2;
  pooled.push_back(2);
  return drop(std::get<0>(t.view(pooled).max(-1)));  // maxout over adjacent pairs: (..., l)
}

torch::Tensor RnnSearchModel::logits(const torch::Tensor& t) {
  return detail::linear(t, out_proj ? out_proj->weight : tgt_embed->weight);
}

torch::Tensor RnnSearchModel::decode(const Encoded& e, const torch::Tensor& tgt_in, const torch::Tensor& tgt_mask,
                                     torch::Tensor* alphas) {
  check_ids(tgt_in, "tgt_in");
  TORCH_CHECK(e.annotations.size(0) == tgt_in.size(0), "src has ", e.annotations.size(0), " rows but tgt_in has ",
              tgt_in.size(0));
  const int64_t t_len = tgt_in.size(1);
  torch::Tensor real = bool_mask(tgt_mask, tgt_in).unsqueeze(-1);  // (B,T,1)
  torch::Tensor emb = drop(lookup(tgt_embed, tgt_in));  // (B,T,m)
  torch::Tensor xp = decoder->project(emb);                         // (B,T,3n)
  std::vector<torch::Tensor> states, contexts, weights;
  torch::Tensor s = e.init;
  for (int64_t t = 0; t < t_len; ++t) {
    torch::Tensor alpha = align(s, e.keys, e.mask);                                                   // (B,S)
    torch::Tensor c = torch::matmul(alpha.to(e.annotations.scalar_type()).unsqueeze(1), e.annotations).squeeze(1);
    states.push_back(s);
    contexts.push_back(c);
    if (alphas) weights.push_back(alpha);
    if (t + 1 < t_len)  // the last state would only feed a position past the target
      s = torch::where(real.select(1, t), decoder->cell(xp.select(1, t) + detail::linear(c, dec_context), s), s);
  }
  if (alphas) *alphas = torch::stack(weights, 1);
  return deep_output(torch::stack(states, 1), emb, torch::stack(contexts, 1));
}

torch::Tensor RnnSearchModel::forward(const torch::Tensor& src, const torch::Tensor& src_mask,
                                      const torch::Tensor& tgt_in, const torch::Tensor& tgt_mask) {
  return logits(decode(encode(src, src_mask), tgt_in, tgt_mask, nullptr));
}

torch::Tensor RnnSearchModel::final_hidden(const torch::Tensor& src, const torch::Tensor& src_mask,
                                           const torch::Tensor& tgt_in, const torch::Tensor& tgt_mask) {
  return decode(encode(src, src_mask), tgt_in, tgt_mask, nullptr);
}

std::vector<SourceAttention> RnnSearchModel::source_attention(const torch::Tensor& src, const torch::Tensor& src_mask,
                                                              const torch::Tensor& tgt_in,
                                                              const torch::Tensor& tgt_mask) {
  return {SourceAttention{"decoder.attention", attention_weights(src, src_mask, tgt_in, tgt_mask).unsqueeze(1)}};
}

torch::Tensor RnnSearchModel::attention_weights(const torch::Tensor& src, const torch::Tensor& src_mask,
                                                const torch::Tensor& tgt_in, const torch::Tensor& tgt_mask) {
  torch::NoGradGuard no_grad;
  torch::Tensor alpha;
  decode(encode(src, src_mask), tgt_in, tgt_mask, &alpha);  // (B,T,S) over the right-padded columns
  alpha = alpha.to(torch::kFloat);
  torch::Tensor order = right_padding_order(bool_mask(src_mask, src));  // (B,S)
  return torch::zeros_like(alpha).scatter_(2, order.unsqueeze(1).expand_as(alpha), alpha);
}

InferenceState RnnSearchModel::start(const torch::Tensor& src, const torch::Tensor& src_mask, int64_t /*reserve*/) {
  torch::NoGradGuard no_grad;
  Encoded e = encode(src, src_mask);
  InferenceState st;
  st.layers.resize(1);
  LayerState& l = st.layers[0];
  l.recurrent = e.init;
  l.cross.k = e.keys;
  l.cross.v = e.annotations;
  l.cross.mask = e.mask;
  l.cross.src_len = e.mask.sum(1);
  st.position = torch::zeros({src.size(0)}, src.options().dtype(torch::kLong));
  st.src_len = l.cross.src_len.clone();
  return st;
}

torch::Tensor RnnSearchModel::step(InferenceState& st, const torch::Tensor& tokens) {
  torch::NoGradGuard no_grad;
  TORCH_CHECK(tokens.dim() == 1 && tokens.size(0) == st.batch_size(), "step: tokens must be (B) with B = ",
              st.batch_size());
  LayerState& l = st.layers.at(0);
  torch::Tensor emb = lookup(tgt_embed, tokens);  // (B,m)
  torch::Tensor s = l.recurrent;
  torch::Tensor alpha = align(s, l.cross.k, l.cross.mask);
  torch::Tensor c = torch::matmul(alpha.to(l.cross.v.scalar_type()).unsqueeze(1), l.cross.v).squeeze(1);
  torch::Tensor out = logits(deep_output(s, emb, c));
  l.recurrent = decoder->cell(decoder->project(emb) + detail::linear(c, dec_context), s);
  st.position = st.position + 1;
  return out;
}

int64_t RnnSearchModel::decoder_parameter_count() const {
  const Counts k = count(config(), vocab_size());
  return k.gru + k.attention - att_key->weight.numel() + k.deep_output + vocab_size() * config().d_model;
}

// ------------------------------------------------------------------ counting and the report

int64_t rnnsearch_parameter_count(const core::ModelConfig& config, int64_t vocab_size) {
  return count(config, vocab_size).total();
}

std::string rnnsearch_plan_report(const core::ModelConfig& c, int64_t vocab_size) {
  const Counts k = count(c, vocab_size);
  const int64_t m = c.d_model, n = c.d_ff;
  std::ostringstream out;
  auto line = [&](const std::string& name, int64_t v) {
    out << "       " << std::left << std::setw(34) << name << std::right << std::setw(14) << with_commas(v) << "\n";
  };
  out << "model: kind rnnsearch" << (c.preset != "none" ? ", preset " + c.preset : std::string())
      << " (Bahdanau et al. 2015), embeddings " << m << ", GRU hidden " << n << " (d_ff), alignment model " << n
      << ", maxout " << m << " (pool 2)\n";
  int64_t enc = 0;
  for (int64_t e : k.encoder) enc += e;
  out << "encoder: " << c.enc_layers << " bidirectional GRU layer" << (c.enc_layers == 1 ? "" : "s")
      << " (annotations " << 2 * n << "), " << with_commas(enc) << " parameters\n";
  for (size_t i = 0; i < k.encoder.size(); ++i)
    out << "  " << std::setw(3) << i << "  " << std::left << std::setw(34) << "bigru" << std::right << std::setw(14)
        << with_commas(k.encoder[i]) << "\n";
  out << "decoder: one GRU with additive attention over the annotations, " << with_commas(k.decoder())
      << " parameters\n";
  line("initial state W_s", k.init);
  line("gru (input: embedding + context)", k.gru);
  line("attention W_a, U_a, v_a", k.attention);
  line("maxout deep output U_o, V_o, C_o", k.deep_output);
  out << "embeddings: " << vocab_size << " x " << m << " = " << with_commas(vocab_size * m)
      << (c.tie_embeddings ? " (shared by source, target and output)" : " per table, untied (source, target, output)")
      << ", " << with_commas(k.embeddings) << " in all\n";
  out << "total: " << with_commas(k.total()) << " parameters (" << millions(k.total()) << "), "
      << with_commas(k.total() - k.embeddings) << " without embeddings\n";
  return out.str();
}

}  // namespace mambamt::models
