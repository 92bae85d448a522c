#include "bench/decode_bench.h"

#include "bench/bench.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

#include "core/autocast.h"
#include "core/device.h"
#include "core/error.h"
#include "models/detail/linear.h"
#include "models/graph.h"
#include "models/registry.h"
#include "models/search.h"

namespace mambamt::bench {

const char* const kDecodeBenchHelp =
    "Greedy decoding of the hybrid (1:7, attention middle+end, cross-attention every 4 layers), the pure "
    "Mamba and the Transformer of one size preset (equal parameter counts, 32k vocabulary), source 128 "
    "tokens, batch 1 and 16, target lengths 256, 1024 and 4096: tokens/s, time per token at the end against "
    "the start of the output, decoder-state memory (KV cache against Mamba states), as ratios to the "
    "Transformer, next to the ratios predicted by the bytes each step reads (decoder weights once, every "
    "cache and state of every sequence) at the copy bandwidth measured while that length decodes (the median of "
    "128 MiB copies timed before and between its turns, printed as GB/s: a shared machine's bandwidth moves "
    "during a run), and ('roof') the same "
    "prediction with the weights' part of each step no shorter than its multiply-adds (2 x batch x weights) at "
    "the rate of the steps' own weight product, measured in the same run for each batch against a weight held "
    "in cache: with 16 rows a step's weight products can be bound by arithmetic, not by reading the weights. "
    "Each row is printed "
    "as soon as it is measured. Step times are the median of a window of W steps (after 2 warm-up steps) "
    "at the start, the middle and the end of each output; the nine windows of a length (three models, three "
    "places) decode in turns of 4 steps each, so that other jobs on the machine slow them alike. Tokens/s "
    "over the output is B / ((start + 4 middle + end) / 6) (Simpson's rule; a step's cost is linear in its "
    "position). Shortcut: the start window is decoded from the encoded source, but the middle and end "
    "windows start from the state a teacher-forced prefill of random target tokens leaves at that position "
    "(TranslationModel::prefill: the real KV caches and Mamba states that stepping through those tokens "
    "leaves, rows prefilled in groups to bound memory); a step costs the same whichever tokens led there. "
    "--full decodes every token instead (the three models in turns of 4 steps; tokens/s over all steps, the "
    "window estimate printed beside it). Options: --quick (tiny preset, lengths 64,256, batch 1,4), --preset "
    "tiny|small|base|medium|large (small), --batch LIST, --lengths LIST (each >= 16), --src N (128), --window "
    "W (32, at most a quarter of the shortest length), --full, --threads N (LibTorch's default), --device "
    "cpu|cuda|auto (auto: the GPU when one is visible, as bench train; on a GPU the copy bandwidth is a "
    "device-to-device copy, the weight product is cuBLAS's in float32 without TF32, and every step is timed to "
    "its end on the device), --graphs (a GPU only: every model's steps replayed from CUDA graphs, models/graph.h; "
    "static states, so full attention reads a span of its KV cache, at most 64 columns or an eighth more than it "
    "needs (models::static_span; the predictions count the span); a graph is recorded for each span when "
    "decoding first reaches it), --bf16 (everything under bf16 autocast, as evaluation on a GPU runs: the weights "
    "are read as autocast's cached bf16 copies, so the predictions count 2 bytes per weight, and the weight "
    "product's rate is measured under autocast too).";

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Multiply-adds per second (2 flops each) of the decode steps' own weight
// product (models::detail::linear: a matrix-vector product for one row, the
// packed small-batch kernel for 2-256) at `b` rows against an n x d weight of
// about 1 MiB, which stays in the caches: the rate of a step's weight products
// where reading the weights does not bound them. Best of 15 rounds of 20: the
// peak, which other jobs on a shared machine can only lower. On a GPU
// (cuBLAS, float32) the 20 products of a round are queued back to back and the
// weight is about 16 MiB, still inside the L2 cache: a 1 MiB product is too
// short to time its arithmetic rather than its launch.
double multiply_add_rate(int64_t b, int64_t d, const torch::Device& device) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(5);
  const int64_t bytes = device.is_cuda() ? (1 << 24) : (1 << 20);
  const int64_t n = std::max<int64_t>(256, (bytes / 4 / d + 15) / 16 * 16);
  // A weight as the models' are (a leaf that requires grad): under --bf16
  // autocast casts it once and keeps the copy, as it does theirs.
  const torch::Tensor w = torch::randn({n, d}).to(device).requires_grad_(true), x = torch::randn({b, d}).to(device);
  models::detail::linear(x, w);  // packs w once
  finish_queued(device);
  double best = 1e300;
  for (int r = 0; r < 15; ++r) {
    const auto t0 = Clock::now();
    for (int i = 0; i < 20; ++i) models::detail::linear(x, w);
    finish_queued(device);
    best = std::min(best, since(t0) / 20);
  }
  return 2.0 * static_cast<double>(b * n * d) / best;
}

// The copy bandwidth while a length's windows decode: a 128 MiB CopyLoop
// (four times this CPU's L3) run before the first turn and after every turn,
// the median of those samples used for that length's predictions (one figure
// from the start of a two-minute run was off by up to 2x for most of its
// rows: the Transformer decoded 1.7x faster than it allowed). A copy between
// turns costs a few per cent of a turn at batch 16; the decoding steps
// themselves evict the caches at every turn already.
class CopyProbe {
 public:
  explicit CopyProbe(const torch::Device& device) : copy_(device, 128LL << 20) {}
  void sample() { samples_.push_back(copy_.sample()); }
  // Bytes read + written per second: the median of the samples since clear().
  double median() const {
    std::vector<double> s = samples_;
    std::sort(s.begin(), s.end());
    const size_t n = s.size();
    return n == 0 ? std::nan("") : n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
  }
  void clear() { samples_.clear(); }

 private:
  CopyLoop copy_;
  std::vector<double> samples_;
};

// Bytes of the decoder weights a step reads: float32 parameters, or under
// --bf16 their bf16 copies (autocast casts each weight once and keeps the copy).
double weight_bytes_of(const models::TranslationModel& m, bool bf16) {
  return (bf16 ? 2.0 : 4.0) * static_cast<double>(m.decoder_parameter_count());
}

// Bytes one step reads in the memory-bound model: the decoder weights once, the
// KV caches and cross K/V read, the Mamba (and other recurrent) states read and written.
double step_bytes(const models::StateBytes& sb, double weight_bytes) {
  return weight_bytes + static_cast<double>(sb.kv_cache + sb.cross_kv + 2 * (sb.mamba + sb.recurrent));
}

// --graphs: a static step's full-attention layers read `span` columns of
// their KV caches, filled or not (models/graph.h): the state's bytes with
// those columns counted.
models::StateBytes with_spans(models::StateBytes sb, const models::InferenceState& st) {
  for (const models::LayerState& l : st.layers) {
    const models::KvCache& c = l.self;
    if (!c.k.defined() || c.window > 0 || c.length >= c.capacity()) continue;
    const int64_t per_column =
        (c.k.nbytes() + c.v.nbytes() + c.valid.nbytes()) / static_cast<int64_t>(c.capacity());
    sb.kv_cache += per_column * (models::static_span(c.length, c.capacity()) - c.filled());
  }
  return sb;
}

// Wall time and modelled bytes of consecutive decoding steps.
struct Trace {
  std::vector<double> step_s, bytes;
  std::map<int64_t, models::StateBytes> state_at;  // state after n steps of the trace (marks)
};

// One model being decoded: its state, the tokens it feeds next, its trace.
struct Decoding {
  models::TranslationModel* model = nullptr;
  models::InferenceState state;
  torch::Tensor tokens;  // (B) fed by the next step
  double weight_bytes = 0;
  Trace trace;
  // --graphs: the steps replayed from CUDA graphs (made once the Decoding no
  // longer moves: it refers to `state`).
  std::unique_ptr<models::StepGraphs> graphs;
};

// --graphs: every decoding's steps from CUDA graphs, once `ds` is complete.
void use_graphs(std::vector<Decoding>& ds) {
  for (Decoding& d : ds) d.graphs = std::make_unique<models::StepGraphs>(*d.model, d.state);
}

// `n` greedy steps (eos masked, so every row runs to the end) of every model
// in turns of `turn` steps each, so that the other jobs of a shared machine
// load all models alike and their ratios hold. The states after `marks` steps
// go to state_at; after each turn `reached(t)` is told how many steps every
// model has made.
void decode_in_turns(std::vector<Decoding>& ds, int64_t n, int64_t turn, const std::vector<int64_t>& marks = {},
                     const std::function<void(int64_t)>& reached = {}) {
  torch::NoGradGuard no_grad;
  for (int64_t t0 = 0; t0 < n; t0 += turn) {
    const int64_t t1 = std::min(n, t0 + turn);
    for (Decoding& d : ds) {
      const int64_t eos = d.model->context().ids.eos;
      for (int64_t t = t0; t < t1; ++t) {
        const models::StateBytes sb = d.state.bytes();
        d.trace.bytes.push_back(step_bytes(d.graphs ? with_spans(sb, d.state) : sb, d.weight_bytes));
        const auto start = Clock::now();
        torch::Tensor logits = d.graphs ? d.graphs->step(d.tokens) : d.model->step(d.state, d.tokens);
        logits.select(1, eos).fill_(-std::numeric_limits<float>::infinity());
        d.tokens = models::greedy_tokens(logits);
        finish_queued(d.tokens.device());
        d.trace.step_s.push_back(since(start));
        if (std::find(marks.begin(), marks.end(), t + 1) != marks.end()) d.trace.state_at[t + 1] = d.state.bytes();
      }
    }
    if (reached) reached(t1);
  }
}

// One window of steps: the median step time (robust to the other jobs on a
// shared machine) and the mean bytes a step reads.
struct Window {
  double step_s = 0, bytes = 0;
};

Window window(const Trace& tr, int64_t from, int64_t n) {
  std::vector<double> s(tr.step_s.begin() + from, tr.step_s.begin() + from + n);
  std::sort(s.begin(), s.end());
  Window w;
  w.step_s = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
  for (int64_t t = from; t < from + n; ++t) w.bytes += tr.bytes[t];
  w.bytes /= static_cast<double>(n);
  return w;
}

// Simpson's rule over the output from the start, middle and end windows: the
// mean of a quantity that is linear (or quadratic) in the position.
double simpson(double start, double mid, double end) { return (start + 4 * mid + end) / 6; }

// The state of every row after `pos` target tokens (bos and random tokens),
// prefilled in groups of rows whose attention scores (B,H,L,L) stay under ~256 MiB.
models::InferenceState state_at(models::TranslationModel& m, const torch::Tensor& src, const torch::Tensor& mask,
                                int64_t pos, int64_t reserve) {
  torch::NoGradGuard no_grad;
  const int64_t b = src.size(0), vocab = m.vocab_size();
  torch::manual_seed(3 + pos);
  torch::Tensor prefix = torch::randint(5, vocab, {b, pos}, torch::kLong);
  prefix.select(1, 0).fill_(m.context().ids.bos);
  prefix = prefix.to(src.device());
  const double cols = static_cast<double>(src.size(1) + pos);
  const double per_row = static_cast<double>(m.config().n_heads) * cols * cols * 4.0;
  const int64_t group = std::clamp<int64_t>(static_cast<int64_t>((256.0 * (1 << 20)) / per_row), 1, b);
  std::vector<models::InferenceState> parts;
  for (int64_t r = 0; r < b; r += group) {
    const int64_t n = std::min(group, b - r);
    parts.push_back(m.prefill(src.narrow(0, r, n), mask.narrow(0, r, n), prefix.narrow(0, r, n), reserve));
  }
  return parts.size() == 1 ? std::move(parts.front()) : models::InferenceState::cat(parts);
}

// What one model measured at one target length.
struct Result {
  Window start, mid, end;
  double tok_s = 0, pred_tok_s = 0;  // over the whole output
  double roof_tok_s = 0;             // the prediction with the weight products' multiply-adds (roofline)
  double window_tok_s = 0;           // --full: the window estimate, beside the all-steps figure
  models::StateBytes state;          // after the last token
  double setup_s = 0;                // encode / prefill time spent on the row
  double bandwidth = 0;              // copy bandwidth the predictions use (CopyProbe), bytes/s
};

std::string mb(int64_t bytes) { return fmt("%.1f", static_cast<double>(bytes) / (1 << 20)); }

struct Printer {
  std::ostream& out;
  bool full;
  void header() const {
    out << "model        target   tok/s  pred tok/s | x transf  pred  meas/pred | roof tok/s  roof  meas/roof | "
           "ms/token start     mid     end  end/start  pred |  KV MB  Mamba MB  cross MB  state x transf | setup s | "
           "GB/s"
        << (full ? "  window tok/s" : "") << "\n";
    out.flush();
  }
  void row(const std::string& kind, int64_t len, int64_t b, const Result& r, const Result& base) const {
    const double ratio = r.tok_s / base.tok_s, pred = r.pred_tok_s / base.pred_tok_s;
    const double roof = r.roof_tok_s / base.roof_tok_s;
    const double start_ms = r.start.step_s / static_cast<double>(b) * 1e3;
    const double mid_ms = r.mid.step_s / static_cast<double>(b) * 1e3;
    const double end_ms = r.end.step_s / static_cast<double>(b) * 1e3;
    const int64_t dec = r.state.decoder_state();
    const std::string state_x =
        dec > 0 ? fmt("%.2f", static_cast<double>(base.state.decoder_state()) / static_cast<double>(dec)) : "-";
    char line[512];
    std::snprintf(line, sizeof line,
                  "%-12s %6lld %7.0f %11.0f | %8.2f %5.2f %10.2f | %10.0f %5.2f %10.2f | %14.3f %7.3f %7.3f %10.2f "
                  "%5.2f | %6s %9s %9s %15s | %7.1f | %4.1f",
                  kind.c_str(), static_cast<long long>(len), r.tok_s, r.pred_tok_s, ratio, pred, ratio / pred,
                  r.roof_tok_s, roof, ratio / roof, start_ms, mid_ms, end_ms, end_ms / start_ms,
                  r.end.bytes / r.start.bytes,
                  mb(r.state.kv_cache).c_str(), mb(r.state.mamba).c_str(), mb(r.state.cross_kv).c_str(),
                  state_x.c_str(), r.setup_s, r.bandwidth / 1e9);
    out << line;
    if (full) out << fmt(" %13.0f", r.window_tok_s);
    out << "\n";
    out.flush();
  }
};

}  // namespace

int run_decode_bench(const std::vector<std::string>& args, std::ostream& out) {
  std::string preset = "small";
  std::vector<int64_t> batches{1, 16}, lengths{256, 1024, 4096};
  int64_t src_len = 128, threads = 0, window_steps = 32;
  bool full = false, graphs = false, bf16 = false;
  std::string device_name = "auto";
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--quick") {
      preset = "tiny", batches = {1, 4}, lengths = {64, 256};
    } else if (args[i] == "--preset" && i + 1 < args.size()) {
      preset = args[++i];
    } else if (args[i] == "--batch") {
      batches = parse_list(args, i, "bench decode", "--batch");
    } else if (args[i] == "--lengths") {
      lengths = parse_list(args, i, "bench decode", "--lengths");
    } else if (args[i] == "--src") {
      src_len = parse_list(args, i, "bench decode", "--src").at(0);
    } else if (args[i] == "--threads") {
      threads = parse_list(args, i, "bench decode", "--threads").at(0);
    } else if (args[i] == "--window") {
      window_steps = parse_list(args, i, "bench decode", "--window").at(0);
    } else if (args[i] == "--full") {
      full = true;
    } else if (args[i] == "--graphs") {
      graphs = true;
    } else if (args[i] == "--bf16") {
      bf16 = true;
    } else if (args[i] == "--device" && i + 1 < args.size()) {
      device_name = args[++i];
      if (device_name != "cpu" && device_name != "cuda" && device_name != "auto")
        throw UsageError("bench decode: --device must be cpu, cuda or auto, not '" + device_name + "'");
    } else {
      throw UsageError("bench decode: unknown argument '" + args[i] + "'");
    }
  }
  std::sort(lengths.begin(), lengths.end());
  lengths.erase(std::unique(lengths.begin(), lengths.end()), lengths.end());
  if (lengths.front() < 16) throw UsageError("bench decode: --lengths: every length must be at least 16");
  // Two warm-up steps before each window; every window fits in a quarter of the shortest output.
  const int64_t warm = 2, w = std::min(window_steps, lengths.front() / 4);
  // Steps each model makes before the next one takes its turn.
  const int64_t turn = 4;
  // Set explicitly even at the default: it also caps OpenMP (which OpenBLAS
  // uses) to the same count; left at its default, OpenBLAS ran one thread per
  // core, and on a busy machine its spinning threads made a gemv 10x slower.
  torch::set_num_threads(static_cast<int>(threads > 0 ? threads : torch::get_num_threads()));
  const int64_t vocab = 32000, max_len = lengths.back();
  const auto t_begin = Clock::now();
  const torch::Device device = core::select_device(device_name);
  if (graphs && !device.is_cuda())
    throw UsageError("bench decode: --graphs replays steps from CUDA graphs: it needs a GPU (device " + device.str() +
                     ")");

  // The baseline first: every ratio is against it.
  const std::vector<std::string> kinds{"transformer", "hybrid", "mamba"};
  std::vector<models::ModelPtr> ms;
  for (const std::string& kind : kinds) {
    ms.push_back(preset_model(kind, preset, vocab, "bench decode"));
    ms.back()->eval();
    ms.back()->to(device);
  }
  const std::string load = load_average();
  const double bw_start = copy_bandwidth(device);
  CopyProbe probe(device);
  // --bf16: everything after this in one autocast region, as evaluation on a
  // GPU runs (train::AutocastGuard).
  std::optional<core::Bf16Autocast> region;
  if (bf16) region.emplace(device.type());
  out << "decode benchmark: greedy, preset " << preset << ", source " << src_len << " tokens, vocabulary " << vocab
      << ", LibTorch threads " << torch::get_num_threads() << ", load average " << load << "\n";
  out << "device: " << device.str() << "\n";
  for (size_t k = 0; k < kinds.size(); ++k)
    out << "  " << kinds[k] << ": " << fmt("%.1f", ms[k]->parameter_count() / 1e6) << "M parameters, "
        << fmt("%.1f", ms[k]->decoder_parameter_count() / 1e6) << "M read per step\n";
  out << "copy bandwidth: " << fmt("%.2f", bw_start / 1e9)
      << " GB/s at the start (read + written, 256 MiB copies, best of 5); the predictions of each length use the "
         "median of 128 MiB copies timed before and between its turns (column GB/s)\n";
  if (device.is_cuda() && !graphs)
    out << "on a GPU a step is hundreds of kernel launches queued by this thread: where a step's bytes take "
           "microseconds the launches, not the bytes, set its time (--graphs replays them from CUDA graphs)\n";
  if (graphs)
    out << "steps replayed from CUDA graphs (--graphs): full attention reads a span of its KV cache (at most 64 "
           "columns or an eighth more than it needs; the predictions count it), one graph per span, recorded when "
           "decoding first reaches it\n";
  out << (bf16 ? "precision: bf16 autocast (--bf16, as evaluation on a GPU): weights read as their cached bf16 "
                 "copies, 2 bytes each; states in the dtypes the steps leave them\n"
               : "precision: float32\n");
  out << "predicted = the bytes each step reads at that bandwidth (decoder weights once; KV caches and cross K/V "
         "read; Mamba states read and written)\n";
  out << "roof = the same with the weights' part of a step no shorter than its multiply-adds (2 x batch x weights "
         "read, flops) at the rate of the steps' weight product measured for each batch and model width\n";
  if (full)
    out << "method: every token decoded (--full), the three models in turns of " << turn
        << " steps; tok/s over all steps; ms/token = median of " << w << " steps after the first " << warm
        << ", in the middle and at the end\n";
  else
    out << "method: windows of " << w << " steps (median, after " << warm
        << " warm-up steps) at the start, middle and end of each output, the nine windows of a length decoded "
           "in turns of "
        << turn << " steps; middle and end reached by a teacher-forced prefill of random tokens; tok/s = B / "
                   "Simpson(start, middle, end)\n";
  out.flush();

  const Printer print{out, full};
  for (int64_t b : batches) {
    const auto t_batch = Clock::now();
    torch::manual_seed(2);
    torch::Tensor src = torch::randint(5, vocab, {b, src_len}, torch::kLong);
    src.select(1, src_len - 1).fill_(ms[0]->context().ids.eos);
    src = src.to(device);
    const torch::Tensor mask = torch::ones(src.sizes(), torch::TensorOptions().dtype(torch::kBool).device(device));
    // The multiply-add rate of each model's weight product at this batch
    // (measured once per model width).
    std::map<int64_t, double> rate_at;
    std::vector<double> rate;
    for (const models::ModelPtr& m : ms) {
      const int64_t d = m->config().d_model;
      if (!rate_at.count(d)) rate_at[d] = multiply_add_rate(b, d, device);
      rate.push_back(rate_at[d]);
    }
    out << "\nbatch " << b << "\n";
    out << "multiply-adds of the weight product (a " << (device.is_cuda() ? "16" : "1")
        << " MiB weight held in cache):";
    for (size_t k = 0; k < kinds.size(); ++k)
      out << (k ? ", " : " ") << kinds[k] << " " << fmt("%.1f", rate[k] / 1e9) << " GFLOP/s";
    out << "\n";
    print.header();
    // results[k][len]
    std::vector<std::map<int64_t, Result>> results(kinds.size());
    // The roofline time of `steps` steps of model k reading `bytes` in all:
    // each step's weights take the longer of reading them and their
    // multiply-adds; the caches and states are read (and written) at bw.
    auto roof_s = [&](size_t k, double bytes, double steps, double bw) {
      const double wb = weight_bytes_of(*ms[k], bf16);  // one multiply-add per weight and row
      const double weights = static_cast<double>(ms[k]->decoder_parameter_count());
      const double per_step = std::max(wb / bw, 2.0 * static_cast<double>(b) * weights / rate[k]);
      return steps * per_step + (bytes - steps * wb) / bw;
    };
    auto finish = [&](Result& r, size_t k, int64_t len, const Trace* all, double bw) {
      r.bandwidth = bw;
      const double mean_s = simpson(r.start.step_s, r.mid.step_s, r.end.step_s);
      const double mean_bytes = simpson(r.start.bytes, r.mid.bytes, r.end.bytes);
      r.window_tok_s = static_cast<double>(b) / mean_s;
      r.tok_s = r.window_tok_s;
      r.pred_tok_s = static_cast<double>(b) / (mean_bytes / bw);
      r.roof_tok_s = static_cast<double>(b) / roof_s(k, mean_bytes, 1, bw);
      if (all) {
        // Every step of the output: its real tokens/s and bytes.
        double s = 0, bytes = 0;
        for (int64_t t = 0; t < len; ++t) s += all->step_s[t], bytes += all->bytes[t];
        r.tok_s = static_cast<double>(b * len) / s;
        r.pred_tok_s = static_cast<double>(b * len) / (bytes / bw);
        r.roof_tok_s = static_cast<double>(b * len) / roof_s(k, bytes, static_cast<double>(len), bw);
      }
    };
    auto decoding = [&](size_t k) {
      Decoding d;
      d.model = ms[k].get();
      d.weight_bytes = weight_bytes_of(*d.model, bf16);
      return d;
    };
    if (full) {
      std::vector<Decoding> ds;
      std::vector<double> setup;
      for (size_t k = 0; k < kinds.size(); ++k) {
        ds.push_back(decoding(k));
        const auto t0 = Clock::now();
        ds.back().state = ms[k]->start(src, mask, max_len);
        finish_queued(device);
        setup.push_back(since(t0));
        ds.back().tokens = torch::full({b}, ms[k]->context().ids.bos, torch::kLong).to(device);
      }
      if (graphs) use_graphs(ds);
      size_t next = 0;  // the next length to print
      probe.clear();
      probe.sample();
      decode_in_turns(ds, max_len, turn, lengths, [&](int64_t done) {
        probe.sample();
        for (; next < lengths.size() && lengths[next] <= done; ++next) {
          const int64_t len = lengths[next];
          for (size_t k = 0; k < kinds.size(); ++k) {
            const Trace& tr = ds[k].trace;
            Result r;
            r.start = window(tr, warm, w);
            r.mid = window(tr, len / 2 - w / 2, w);
            r.end = window(tr, len - w, w);
            r.state = tr.state_at.at(len);
            r.setup_s = setup[k];
            finish(r, k, len, &tr, probe.median());
            results[k][len] = r;
            print.row(kinds[k], len, b, r, results[0].at(len));
          }
        }
      });
    } else {
      for (int64_t len : lengths) {
        // Every model at the start, middle and end of the output, all nine
        // decoding in turns: the ratios between models and between the ends of
        // one output are measured under the same load.
        std::vector<Result> rs(kinds.size());
        std::vector<Decoding> ds;
        const std::vector<int64_t> froms{warm, len / 2 - w / 2, len - w};  // first timed step of each window
        for (size_t k = 0; k < kinds.size(); ++k)
          for (int64_t from : froms) {
            ds.push_back(decoding(k));
            Decoding& d = ds.back();
            const auto t0 = Clock::now();
            if (from == warm) {
              d.state = ms[k]->start(src, mask, warm + w);
              d.tokens = torch::full({b}, ms[k]->context().ids.bos, torch::kLong).to(device);
            } else {
              d.state = state_at(*ms[k], src, mask, from - warm, len);
              torch::manual_seed(4 + from);
              d.tokens = torch::randint(5, vocab, {b}, torch::kLong).to(device);
            }
            finish_queued(device);
            rs[k].setup_s += since(t0);
          }
        if (graphs) use_graphs(ds);
        probe.clear();
        probe.sample();
        decode_in_turns(ds, warm + w, turn, {}, [&](int64_t) { probe.sample(); });
        for (size_t k = 0; k < kinds.size(); ++k) {
          Result& r = rs[k];
          r.start = window(ds[3 * k].trace, warm, w);
          r.mid = window(ds[3 * k + 1].trace, warm, w);
          r.end = window(ds[3 * k + 2].trace, warm, w);
          r.state = ds[3 * k + 2].state.bytes();  // after the output's last token
          finish(r, k, len, nullptr, probe.median());
          results[k][len] = r;
          print.row(kinds[k], len, b, r, results[0].at(len));
        }
      }
    }
    out << "batch " << b << " done in " << fmt("%.1f", since(t_batch)) << " s\n";
    out.flush();
  }
  out << "total " << fmt("%.1f", since(t_begin)) << " s\n";
  out.flush();
  return 0;
}

}  // namespace mambamt::bench
