#include "models/plan.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <map>
#include <mutex>
#include <numeric>
#include <set>
#include <sstream>

#include "core/error.h"
#include "models/detail/report.h"
#include "models/model.h"
#include "models/registry.h"
#include "models/stack.h"

namespace mambamt::models {

std::string LayerSpec::name() const {
  std::string s = mixer;
  if (cross) s += "+cross";
  if (mlp) s += "+mlp";
  return s;
}

std::ostream& operator<<(std::ostream& out, const LayerSpec& spec) { return out << spec.name(); }

std::vector<int64_t> attention_layers(int64_t n, double ratio, const std::string& placement) {
  if (n <= 0 || ratio <= 0) return {};
  std::set<int64_t> pos;
  if (placement == "every_n") {
    const int64_t k = std::max<int64_t>(1, std::llround(1.0 / ratio));
    for (int64_t i = n - 1; i >= 0; i -= k) pos.insert(i);
    return {pos.begin(), pos.end()};
  }
  const int64_t count = std::min<int64_t>(n, std::max<int64_t>(1, std::llround(static_cast<double>(n) * ratio)));
  if (placement == "middle_end") {
    pos.insert(n / 2);
    if (count > 1) pos.insert(n - 1);
    while (static_cast<int64_t>(pos.size()) < count) {
      // The midpoint of the largest gap (earliest on ties), with -1 as the left
      // edge; n-1 is taken, so the gaps cover the stack and one has room.
      int64_t best_a = -1, best_len = 0, a = -1;
      for (int64_t p : pos) {
        if (p - a > best_len) best_len = p - a, best_a = a;
        a = p;
      }
      pos.insert(best_a + best_len / 2);
    }
  } else if (placement == "uniform") {
    for (int64_t i = 0; i < count; ++i)
      pos.insert(std::llround(static_cast<double>(i + 1) * static_cast<double>(n) / static_cast<double>(count)) - 1);
  } else if (placement == "first") {
    for (int64_t i = 0; i < count; ++i) pos.insert(i);
  } else {
    throw InputError("model.attention_placement = \"" + placement +
                     "\": expected middle_end, uniform, every_n or first");
  }
  return {pos.begin(), pos.end()};
}

std::vector<int64_t> cross_attention_layers(int64_t n, int64_t every) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < n; ++i)
    if ((every > 0 && (i + 1) % every == 0) || i == n - 1) out.push_back(i);
  return out;
}

namespace {

bool is_attention(const std::string& mixer) { return mixer == "attention" || mixer == "local_attention"; }

// Kinds whose layers include Mamba blocks (what the Mamba keys configure).
bool has_mamba(const std::string& kind) { return kind == "hybrid" || kind == "mamba" || kind == "decoder_only"; }

// The layers of a derived (not explicit) stack: attention at the placement, `other` elsewhere.
std::vector<LayerSpec> derived(const core::ModelConfig& c, int64_t n, const std::string& other) {
  std::vector<LayerSpec> out(static_cast<size_t>(n));
  std::set<int64_t> att;
  for (int64_t i : attention_layers(n, c.attention_ratio, c.attention_placement)) att.insert(i);
  for (int64_t i = 0; i < n; ++i) {
    LayerSpec& s = out[static_cast<size_t>(i)];
    s.mixer = att.count(i) ? (c.attn_window > 0 ? "local_attention" : "attention") : other;
    s.mlp = is_attention(s.mixer) || c.mamba_mlp;
  }
  return out;
}

// The layers of an explicit list ("mamba", "attention+cross", ...).
std::vector<LayerSpec> explicit_plan(const core::ModelConfig& c, const std::vector<std::string>& names) {
  std::vector<LayerSpec> out;
  for (const std::string& n : names) {
    LayerSpec s;
    const auto plus = n.find("+cross");
    s.mixer = plus == std::string::npos ? n : n.substr(0, plus);
    s.cross = plus != std::string::npos;
    s.mlp = is_attention(s.mixer) || c.mamba_mlp;
    out.push_back(s);
  }
  return out;
}

void check_plan(const core::ModelConfig& c, const Plan& p) {
  const int64_t cs = c.chunk_size;
  if (has_mamba(c.kind) && c.mamba_version == 2 && (cs < 16 || cs > 256 || (cs & (cs - 1)) != 0))
    throw InputError("model.chunk_size = " + std::to_string(cs) + ": the SSD kernel needs a power of two in 16..256");
  for (const auto* stack : {&p.encoder, &p.decoder})
    for (const LayerSpec& s : *stack)
      if (s.mixer == "local_attention" && c.attn_window <= 0)
        throw InputError("model.attn_window = 0: layer kind local_attention needs a window (set model.attn_window)");
}

}  // namespace

Plan make_plan(const core::ModelConfig& c) {
  Plan p;
  if (c.kind == "transformer") {
    for (int64_t i = 0; i < c.enc_layers; ++i) p.encoder.push_back(LayerSpec{"attention", false, true});
    for (int64_t i = 0; i < c.dec_layers; ++i) p.decoder.push_back(LayerSpec{"attention", true, true});
  } else if (c.kind == "hybrid") {
    p.encoder = c.enc_plan.empty() ? derived(c, c.enc_layers, "bimamba") : explicit_plan(c, c.enc_plan);
    if (c.dec_plan.empty()) {
      p.decoder = derived(c, c.dec_layers, "mamba");
      for (int64_t i : cross_attention_layers(c.dec_layers, c.cross_attn_every))
        p.decoder[static_cast<size_t>(i)].cross = true;
    } else {
      p.decoder = explicit_plan(c, c.dec_plan);
    }
  } else if (c.kind == "mamba") {
    p.decoder_only = true;
    if (c.dec_plan.empty()) {
      core::ModelConfig none = c;
      none.attention_ratio = 0;
      p.decoder = derived(none, c.dec_layers, "mamba");
    } else {
      p.decoder = explicit_plan(c, c.dec_plan);
    }
  } else if (c.kind == "decoder_only") {
    p.decoder_only = true;
    p.decoder = c.dec_plan.empty() ? derived(c, c.dec_layers, "mamba") : explicit_plan(c, c.dec_plan);
  } else if (c.kind == "retnet") {
    p.decoder_only = true;
    for (int64_t i = 0; i < c.dec_layers; ++i) p.decoder.push_back(LayerSpec{"retention", false, true});
  } else if (c.kind == "rnnsearch") {
    // Descriptive only: rnnsearch is not built from stacks (models/rnnsearch.h).
    for (int64_t i = 0; i < c.enc_layers; ++i) p.encoder.push_back(LayerSpec{"bigru", false, false});
    p.decoder.push_back(LayerSpec{"gru", true, false});
  } else {
    throw InputError("model.kind = \"" + c.kind + "\": no layer plan for this kind");
  }
  check_plan(c, p);
  return p;
}

// ------------------------------------------------------------------ counting and the report

namespace {

using detail::millions;
using detail::with_commas;

int64_t numel_of(const torch::nn::Module& m) {
  int64_t n = 0;
  for (const auto& p : m.parameters()) n += p.numel();
  return n;
}

struct StackCount {
  std::vector<int64_t> layers;  // per layer, its dense connections included
  int64_t final_norm = 0;
  int64_t total() const {
    int64_t t = final_norm;
    for (int64_t l : layers) t += l;
    return t;
  }
};

// What a layer's count depends on besides its spec and the stack's
// direction: the model config with the fields that only shape the plan, or
// change no count, at their defaults (stack_options reads the rest).
std::string layer_count_key(const core::ModelConfig& c) {
  const core::ModelConfig d;
  core::ExperimentConfig e;
  e.model = c;
  core::ModelConfig& m = e.model;
  m.kind = d.kind;
  m.enc_layers = d.enc_layers;
  m.dec_layers = d.dec_layers;
  m.attention_ratio = d.attention_ratio;
  m.attention_placement = d.attention_placement;
  m.cross_attn_every = d.cross_attn_every;
  m.enc_plan = d.enc_plan;
  m.dec_plan = d.dec_plan;
  m.chunk_size = d.chunk_size;
  m.dropout = d.dropout;
  m.attn_dropout = d.attn_dropout;
  m.rope_base = d.rope_base;
  m.init = d.init;
  m.init_std = d.init_std;
  return e.canonical();
}

// Counts by building each distinct layer once (memory stays at one layer).
// Building initialises the weights, which is most of the time, and a grid's
// models share most of their layers (its axes move the plan, not the
// layers), so each layer is counted once per process.
StackCount count_stack(const StackOptions& o, const std::string& config_key) {
  static std::mutex mutex;
  static std::map<std::string, int64_t> counted;  // config key, direction, layer -> parameters
  torch::NoGradGuard no_grad;
  StackCount sc;
  const int64_t dense = o.dense_connections > 0 ? 2 * o.d_model * o.d_model : 0;
  for (size_t i = 0; i < o.layers.size(); ++i) {
    const std::string key = config_key + (o.causal ? "\ncausal " : "\nbidirectional ") + o.layers[i].name();
    int64_t n = -1;
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (auto it = counted.find(key); it != counted.end()) n = it->second;
    }
    if (n < 0) {
      n = numel_of(LayerImpl(o.layers[i], o));
      std::lock_guard<std::mutex> lock(mutex);
      counted.emplace(key, n);
    }
    sc.layers.push_back(n + (i > 0 ? dense : 0));
  }
  sc.final_norm = o.d_model;
  return sc;
}

struct ModelCount {
  Plan plan;
  StackCount encoder, decoder;
  int64_t embeddings = 0;  // every embedding and output matrix
  int64_t total() const { return encoder.total() + decoder.total() + embeddings; }
};

ModelCount count_model(const core::ModelConfig& c, int64_t vocab) {
  ModelCount m;
  m.plan = make_plan(c);
  const std::string key = layer_count_key(c);
  if (!m.plan.encoder.empty()) m.encoder = count_stack(stack_options(c, m.plan.encoder, false), key);
  m.decoder = count_stack(stack_options(c, m.plan.decoder, true), key);
  const int64_t table = vocab * c.d_model;
  const int64_t tables = c.tie_embeddings ? 1 : (m.plan.decoder_only ? 2 : 3);
  m.embeddings = tables * table;
  return m;
}

void stack_lines(std::ostringstream& out, const char* name, const std::vector<LayerSpec>& specs,
                 const StackCount& sc) {
  std::map<std::string, int> kinds;
  for (const auto& s : specs) kinds[s.mixer]++;
  out << name << ": " << specs.size() << " layers (";
  bool first = true;
  for (auto& [k, n] : kinds) {
    out << (first ? "" : ", ") << n << " " << k;
    first = false;
  }
  out << "), " << with_commas(sc.total()) << " parameters\n";
  for (size_t i = 0; i < specs.size(); ++i)
    out << "  " << std::setw(3) << i << "  " << std::left << std::setw(28) << specs[i].name() << std::right
        << std::setw(14) << with_commas(sc.layers[i]) << "\n";
  out << "       " << std::left << std::setw(28) << "final norm" << std::right << std::setw(14)
      << with_commas(sc.final_norm) << "\n";
}

// The registered kind of a config, when it counts and reports itself.
const ModelKind* self_counting(const std::string& kind) {
  for (const ModelKind& k : model_kinds())
    if (k.name == kind && k.count && k.report) return &k;
  return nullptr;
}

}  // namespace

int64_t count_parameters(const core::ModelConfig& config, int64_t vocab_size) {
  const ModelKind* k = self_counting(config.kind);
  return k ? k->count(config, vocab_size) : count_model(config, vocab_size).total();
}

namespace {

int64_t attention_count(const std::vector<LayerSpec>& stack) {
  return std::count_if(stack.begin(), stack.end(), [](const LayerSpec& s) { return is_attention(s.mixer); });
}

// "2/12 (1:5)" for a stack.
std::string stack_attention(const std::vector<LayerSpec>& stack) {
  const int64_t n = static_cast<int64_t>(stack.size()), a = attention_count(stack);
  std::string out = std::to_string(a) + "/" + std::to_string(n);
  if (a == 0) return out + " (no attention)";
  if (a == n) return out + " (attention only)";
  const int64_t g = std::gcd(a, n - a);
  return out + " (" + std::to_string(a / g) + ":" + std::to_string((n - a) / g) + ")";
}

// The ratio text of a requested model.attention_ratio: "0.125 (1:7)".
std::string requested_ratio(double r) {
  std::ostringstream out;
  out << r;
  const double others = 1 / r - 1;
  if (r > 0 && r < 1 && std::fabs(others - std::round(others)) < 1e-6) out << " (1:" << std::llround(others) << ")";
  return out.str();
}

}  // namespace

std::string attention_label(const core::ModelConfig& c, const Plan& plan) {
  if (c.kind == "rnnsearch") return "";
  const std::string dec = stack_attention(plan.decoder);
  if (plan.encoder.empty()) return dec;
  const std::string enc = stack_attention(plan.encoder);
  return enc == dec ? dec : "enc " + enc + ", dec " + dec;
}

std::string attention_ratio_warning(const core::ModelConfig& c, const Plan& plan) {
  if (c.kind != "hybrid" && c.kind != "decoder_only") return "";
  const double r = c.attention_ratio;
  std::string out;
  auto check = [&](const char* which, const std::vector<LayerSpec>& stack, bool derived) {
    if (!derived || stack.empty() || !out.empty()) return;
    const int64_t n = static_cast<int64_t>(stack.size()), a = attention_count(stack);
    // Ratios written with a few digits (0.0833 for 1:11) count as what they round.
    if (std::fabs(static_cast<double>(a) / static_cast<double>(n) - r) < 1e-3) return;
    // The layer counts this ratio builds exactly.
    std::string exact;
    const double per = 1 / r;
    if (r > 0 && std::fabs(per - std::round(per)) < 1e-6) {
      const int64_t k = std::llround(per);
      exact = "; stacks of a multiple of " + std::to_string(k) + " layers build it exactly";
    }
    out = "model.attention_ratio = " + requested_ratio(r) + " builds " + stack_attention(stack) + " in the " + which +
          " (" + std::to_string(n) + " layers, placement " + c.attention_placement + ")" + exact;
  };
  check("encoder", plan.encoder, c.kind == "hybrid" && c.enc_plan.empty());
  check(c.kind == "hybrid" ? "decoder" : "stack", plan.decoder, c.dec_plan.empty());
  return out;
}

std::string plan_report(const core::ModelConfig& c, int64_t vocab_size) {
  if (const ModelKind* k = self_counting(c.kind)) return k->report(c, vocab_size);
  ModelCount m = count_model(c, vocab_size);
  std::ostringstream out;
  out << "model: kind " << c.kind << (c.preset != "none" ? ", preset " + c.preset : std::string()) << ", d_model "
      << c.d_model << ", " << c.n_heads << " heads, d_ff " << c.d_ff << " (" << c.mlp << ")";
  if (has_mamba(c.kind))
    out << ", Mamba-" << c.mamba_version << " (d_state " << c.d_state << ", expand " << c.expand << ", d_conv "
        << c.d_conv << (c.mamba_version == 2 ? ", headdim " + std::to_string(c.headdim) + ", ngroups " +
                                                   std::to_string(c.ngroups)
                                             : std::string())
        << ")";
  out << "\n";
  if (c.kind == "hybrid" || c.kind == "decoder_only") {
    out << "attention: ratio " << c.attention_ratio << ", placement " << c.attention_placement
        << (c.attn_window > 0 ? ", window " + std::to_string(c.attn_window) : std::string()) << "; built "
        << attention_label(c, m.plan) << "\n";
    const std::string warning = attention_ratio_warning(c, m.plan);
    if (!warning.empty()) out << "warning: " << warning << "\n";
  }
  if (!m.plan.decoder_only)
    out << "cross-attention: " << c.cross_attn << (c.kind == "hybrid" ? ", every " + std::to_string(c.cross_attn_every) + " decoder layers" : std::string(", every decoder layer"))
        << "\n";
  if (c.dense_connections > 0) out << "dense hidden connections: " << c.dense_connections << " previous layers\n";
  if (c.kind == "retnet")
    out << "retention: " << c.n_heads << " heads, key width " << c.d_model / c.n_heads << ", value width "
        << 2 * c.d_model / c.n_heads << ", decays 1 - 2^(-5-h)\n";
  if (m.plan.decoder_only) out << "decoder-only over source <boundary> target\n";
  if (!m.plan.encoder.empty()) stack_lines(out, "encoder", m.plan.encoder, m.encoder);
  stack_lines(out, m.plan.decoder_only ? "stack" : "decoder", m.plan.decoder, m.decoder);
  out << "embeddings: " << vocab_size << " x " << c.d_model << " = " << with_commas(vocab_size * c.d_model)
      << (c.tie_embeddings ? " (shared by source, target and output)" : " per table, untied") << ", "
      << with_commas(m.embeddings) << " in all\n";
  out << "total: " << with_commas(m.total()) << " parameters (" << millions(m.total()) << "), "
      << with_commas(m.total() - m.embeddings) << " without embeddings\n";
  return out.str();
}

}  // namespace mambamt::models
