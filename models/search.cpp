#include "models/search.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include "models/detail/decode_cpu.h"
#include "models/graph.h"

namespace mambamt::models {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// Per-row maximum output lengths (eos included).
std::vector<int64_t> max_lengths(const torch::Tensor& src_len, const SearchOptions& o) {
  torch::Tensor l = src_len.to(torch::kCPU, torch::kLong);
  std::vector<int64_t> out(static_cast<size_t>(l.size(0)));
  for (int64_t i = 0; i < l.size(0); ++i) {
    int64_t m = static_cast<int64_t>(std::floor(o.max_len_a * static_cast<double>(l[i].item<int64_t>()))) + o.max_len_b;
    if (o.max_length > 0) m = std::min(m, o.max_length);
    out[static_cast<size_t>(i)] = std::max<int64_t>(1, m);
  }
  return out;
}

double normalise(double log_prob, int64_t length, double penalty) {
  return log_prob / std::pow(static_cast<double>(std::max<int64_t>(length, 1)), penalty);
}

// Log-probabilities (R,V) float32 of the step's logits; eos banned in the rows
// whose output position (0 = the first token after the forced prefix) is
// below min_length.
torch::Tensor step_log_probs(const torch::Tensor& logits, const std::vector<int64_t>& position, const SearchOptions& o,
                             int64_t eos) {
  torch::Tensor lp = detail::log_softmax_rows(logits.to(torch::kFloat));
  if (o.min_length <= 0) return lp;
  std::vector<int64_t> ban;
  for (size_t r = 0; r < position.size(); ++r)
    if (position[r] < o.min_length) ban.push_back(static_cast<int64_t>(r));
  if (ban.size() == position.size()) {
    lp.select(1, eos).fill_(-std::numeric_limits<float>::infinity());
  } else if (!ban.empty()) {
    torch::Tensor rows = torch::tensor(ban, torch::kLong).to(lp.device());
    lp.index_put_({rows, eos}, -std::numeric_limits<float>::infinity());
  }
  return lp;
}

void check_inputs(const torch::Tensor& src, const SearchOptions& o, const Prefixes& prefixes) {
  TORCH_CHECK(src.dim() == 2, "search: src must be (B,S)");
  TORCH_CHECK(o.beam_size >= 1, "search: beam_size must be >= 1");
  TORCH_CHECK(o.nbest >= 1 && o.nbest <= o.beam_size, "search: nbest must be in [1, beam_size]");
  TORCH_CHECK(prefixes.empty() || static_cast<int64_t>(prefixes.size()) == src.size(0), "search: ", prefixes.size(),
              " prefixes for ", src.size(0), " sources");
}

// Forced prefix length of each source (0 without prefixes).
std::vector<int64_t> prefix_lengths(const Prefixes& prefixes, int64_t b) {
  std::vector<int64_t> out(static_cast<size_t>(b), 0);
  for (size_t i = 0; i < prefixes.size(); ++i) out[i] = static_cast<int64_t>(prefixes[i].size());
  return out;
}

// The state at the first step of a search, the tokens fed there, and for
// each row the target index of that token (0 = bos, j = its prefix token j).
// Rows with a forced prefix go through TranslationModel::prefill: where the
// model kind prefills ragged prefixes (and options.prefill_prefixes), each
// row's whole prefix but its last token (bos and p_1 .. p_{n-1}), so every row
// starts at its prefix's last token; otherwise the part every row has (bos and
// the first common - 1 tokens, common the shortest prefix), and the search
// feeds the rest one step at a time. Without prefixes it is start() at bos.
struct SearchStart {
  InferenceState state;
  std::vector<int64_t> tokens;
  std::vector<int64_t> index;
};

SearchStart search_start(TranslationModel& model, const torch::Tensor& src, const torch::Tensor& mask,
                         const std::vector<int64_t>& max_len, const Prefixes& prefixes,
                         const std::vector<int64_t>& plen, int64_t bos, const SearchOptions& o) {
  const int64_t b = src.size(0);
  const int64_t common = plen.empty() ? 0 : *std::min_element(plen.begin(), plen.end());
  const int64_t longest = plen.empty() ? 0 : *std::max_element(plen.begin(), plen.end());
  const bool ragged = longest > common && o.prefill_prefixes && model.prefills_ragged();
  const int64_t fed_len = ragged ? longest : common;  // prefill columns
  // Target positions the state holds by the end: the prefill, then one per
  // step until the last row ends (rows step together).
  int64_t reserve = 1;
  for (size_t i = 0; i < max_len.size(); ++i)
    reserve = std::max(reserve, (ragged ? fed_len : plen[i]) + max_len[i]);
  SearchStart s;
  if (fed_len == 0) {
    s.state = model.start(src, mask, reserve);
    s.tokens.assign(static_cast<size_t>(b), bos);
    s.index.assign(static_cast<size_t>(b), 0);
    return s;
  }
  torch::Tensor fed = torch::full({b, fed_len}, bos, torch::kLong);  // padding: any token id
  std::vector<int64_t> lengths;
  auto fa = fed.accessor<int64_t, 2>();
  for (int64_t i = 0; i < b; ++i) {
    const auto& p = prefixes[static_cast<size_t>(i)];
    const int64_t n = ragged ? plen[static_cast<size_t>(i)] : common;  // tokens this row is fed in the prefill
    for (int64_t j = 1; j < n; ++j) fa[i][j] = p[static_cast<size_t>(j - 1)];
    s.tokens.push_back(n == 0 ? bos : p[static_cast<size_t>(n - 1)]);
    s.index.push_back(n);
    lengths.push_back(n);
  }
  s.state = model.prefill(src, mask, fed.to(src.device()), reserve,
                          ragged ? torch::tensor(lengths, torch::kLong).to(src.device()) : torch::Tensor());
  return s;
}

// How a search steps its state: the model's step, a static step, or a step
// replayed from CUDA graphs (SearchOptions::static_steps, cuda_graphs).
class Stepper {
 public:
  Stepper(TranslationModel& model, InferenceState& state, const SearchOptions& o)
      : model_(model), state_(state), compact_(o.compact) {
    if (!model.steps_statically()) return;
    if (o.cuda_graphs && state.position.is_cuda() && StepGraphs::available())
      graphs_ = std::make_unique<StepGraphs>(model, state);
    else if (o.static_steps)
      state.make_static();
    compact_ = o.compact && !graphs_;
  }
  // Whether the search drops finished rows (not with graphs: a smaller batch
  // would be recorded again).
  bool compact() const { return compact_; }
  torch::Tensor step(const torch::Tensor& tokens) {
    if (graphs_) return graphs_->step(tokens);
    if (state_.is_static()) state_.span = next_static_span(state_);
    return model_.step(state_, tokens);
  }

 private:
  TranslationModel& model_;
  InferenceState& state_;
  std::unique_ptr<StepGraphs> graphs_;
  bool compact_ = false;
};

}  // namespace

torch::Tensor greedy_tokens(const torch::Tensor& logits) { return std::get<1>(detail::max_rows(logits)); }

std::vector<Hypothesis> greedy_search(TranslationModel& model, const torch::Tensor& src, const torch::Tensor& src_mask,
                                      const SearchOptions& o, const Prefixes& prefixes) {
  check_inputs(src, o, prefixes);
  EvalModeGuard eval(model);
  torch::NoGradGuard no_grad;
  const TokenIds& ids = model.context().ids;
  const int64_t b = src.size(0);
  torch::Tensor mask = src_mask.defined() ? src_mask.to(torch::kBool) : src.ne(ids.pad);
  std::vector<int64_t> max_len = max_lengths(mask.sum(1), o);
  const std::vector<int64_t> plen = prefix_lengths(prefixes, b);

  SearchStart begin = search_start(model, src, mask, max_len, prefixes, plen, ids.bos, o);
  InferenceState& st = begin.state;
  Stepper stepper(model, st, o);
  const bool compact = stepper.compact();
  std::vector<Hypothesis> out(static_cast<size_t>(b));
  std::vector<int64_t> rows(static_cast<size_t>(b));  // source of each row of the state
  for (int64_t i = 0; i < b; ++i) rows[static_cast<size_t>(i)] = i;
  std::vector<char> live(static_cast<size_t>(b), 1);  // row still decoding (rows stay when !compact)
  torch::Tensor tokens = torch::tensor(begin.tokens, torch::kLong).to(src.device());
  std::vector<int64_t> position(static_cast<size_t>(b));

  // At step i, row r is fed the target token of index i + begin.index[source].
  auto target_index = [&](int64_t i, size_t src_id) { return i + begin.index[src_id]; };
  for (int64_t i = 0;; ++i) {
    for (size_t r = 0; r < rows.size(); ++r) {
      const size_t src_id = static_cast<size_t>(rows[r]);
      position[r] = target_index(i, src_id) - plen[src_id];
    }
    torch::Tensor lp = step_log_probs(stepper.step(tokens), position, o, ids.eos);
    auto best = detail::max_rows(lp);
    torch::Tensor best_lp = std::get<0>(best).to(torch::kCPU, torch::kDouble);
    torch::Tensor best_tok = std::get<1>(best).to(torch::kCPU, torch::kLong);
    auto lpa = best_lp.accessor<double, 1>();
    auto tka = best_tok.accessor<int64_t, 1>();
    std::vector<int64_t> next(rows.size());  // the token each row is fed next
    std::vector<int64_t> keep;  // live rows after this step
    for (size_t r = 0; r < rows.size(); ++r) {
      next[r] = tka[static_cast<int64_t>(r)];
      if (!live[r]) continue;
      const size_t src_id = static_cast<size_t>(rows[r]);
      const int64_t t = target_index(i, src_id);
      if (t < plen[src_id]) {  // still in the forced prefix
        next[r] = prefixes[src_id][static_cast<size_t>(t)];
        keep.push_back(static_cast<int64_t>(r));
        continue;
      }
      const int64_t length = t + 1 - plen[src_id];
      Hypothesis& h = out[src_id];
      const int64_t tok = next[r];
      h.log_prob += lpa[static_cast<int64_t>(r)];
      if (tok == ids.eos)
        h.finished = true;
      else
        h.tokens.push_back(tok);
      if (h.finished || length >= max_len[src_id]) {
        h.score = normalise(h.log_prob, length, o.length_penalty);
        live[r] = 0;
      } else {
        keep.push_back(static_cast<int64_t>(r));
      }
    }
    if (keep.empty()) break;
    if (compact && keep.size() != rows.size()) {
      torch::Tensor index = torch::tensor(keep, torch::kLong);
      st.reorder(index.to(src.device()));
      std::vector<int64_t> kept, kept_next;
      for (int64_t r : keep) {
        kept.push_back(rows[static_cast<size_t>(r)]);
        kept_next.push_back(next[static_cast<size_t>(r)]);
      }
      rows = std::move(kept);
      next = std::move(kept_next);
      live.assign(rows.size(), 1);
      position.resize(rows.size());
    }
    tokens = torch::tensor(next, torch::kLong).to(src.device());
  }
  return out;
}

std::vector<NBest> beam_search(TranslationModel& model, const torch::Tensor& src, const torch::Tensor& src_mask,
                               const SearchOptions& o, const Prefixes& prefixes) {
  check_inputs(src, o, prefixes);
  EvalModeGuard eval(model);
  torch::NoGradGuard no_grad;
  const TokenIds& ids = model.context().ids;
  const int64_t b = src.size(0), k = o.beam_size;
  torch::Tensor mask = src_mask.defined() ? src_mask.to(torch::kBool) : src.ne(ids.pad);
  std::vector<int64_t> max_len = max_lengths(mask.sum(1), o);
  const std::vector<int64_t> plen = prefix_lengths(prefixes, b);
  auto dev = src.device();

  SearchStart begin = search_start(model, src, mask, max_len, prefixes, plen, ids.bos, o);
  InferenceState& st = begin.state;
  st.reorder(torch::arange(b, torch::kLong).repeat_interleave(k).to(dev));  // row s*k + j: beam j of source s
  Stepper stepper(model, st, o);
  const bool compact = stepper.compact();

  std::vector<std::vector<Hypothesis>> finished(static_cast<size_t>(b));
  std::vector<char> source_done(static_cast<size_t>(b), 0);
  std::vector<int64_t> active(static_cast<size_t>(b));  // the sources still in the batch, in row order
  for (int64_t i = 0; i < b; ++i) active[static_cast<size_t>(i)] = i;
  // Beam scores (A*k): only beam 0 is live at the start.
  std::vector<double> scores(static_cast<size_t>(b * k), kNegInf);
  for (int64_t i = 0; i < b; ++i) scores[static_cast<size_t>(i * k)] = 0.0;
  std::vector<std::vector<int64_t>> hist(static_cast<size_t>(b * k));  // tokens of each row
  torch::Tensor tokens = torch::tensor(begin.tokens, torch::kLong).repeat_interleave(k).to(dev);

  // At step i, source s's rows are fed the target token of index i + begin.index[s].
  auto target_index = [&](int64_t i, int64_t src_id) { return i + begin.index[static_cast<size_t>(src_id)]; };
  for (int64_t i = 0; !active.empty(); ++i) {
    const int64_t a = static_cast<int64_t>(active.size());
    std::vector<int64_t> position(static_cast<size_t>(a * k));
    for (int64_t s = 0; s < a * k; ++s) {
      const int64_t src_id = active[static_cast<size_t>(s / k)];
      position[static_cast<size_t>(s)] = target_index(i, src_id) - plen[static_cast<size_t>(src_id)];
    }
    torch::Tensor lp = step_log_probs(stepper.step(tokens), position, o, ids.eos);  // (A*k, V)
    const int64_t v = lp.size(1);
    // The 2k best continuations of each source (CPU tensors, float64 sums).
    auto [top_sc, top_ix] = detail::beam_topk(lp, scores, k, std::min<int64_t>(2 * k, k * v));
    auto sca = top_sc.accessor<double, 2>();
    auto ixa = top_ix.accessor<int64_t, 2>();

    std::vector<int64_t> index;      // state rows of the next step
    std::vector<int64_t> next_tok;
    std::vector<double> next_scores;
    std::vector<std::vector<int64_t>> next_hist;
    std::vector<int64_t> next_active;
    for (int64_t s = 0; s < a; ++s) {
      const int64_t src_id = active[static_cast<size_t>(s)];
      auto& fin = finished[static_cast<size_t>(src_id)];
      if (source_done[static_cast<size_t>(src_id)]) {
        // Kept in the batch without compaction: dead rows ride along.
        next_active.push_back(src_id);
        for (int64_t j = 0; j < k; ++j) {
          index.push_back(s * k);
          next_tok.push_back(ids.eos);
          next_scores.push_back(kNegInf);
          next_hist.emplace_back();
        }
        continue;
      }
      const int64_t forced = plen[static_cast<size_t>(src_id)], t = target_index(i, src_id);
      if (t < forced) {
        // In the forced prefix: beam 0 is fed the next prefix token, unscored;
        // the other beams stay dead.
        next_active.push_back(src_id);
        for (int64_t j = 0; j < k; ++j) {
          index.push_back(s * k);
          next_tok.push_back(prefixes[static_cast<size_t>(src_id)][static_cast<size_t>(t)]);
          next_scores.push_back(j == 0 ? scores[static_cast<size_t>(s * k)] : kNegInf);
          next_hist.emplace_back();
        }
        continue;
      }
      const int64_t length = t + 1 - forced;  // output tokens, this one included
      std::vector<std::pair<int64_t, int64_t>> beams;  // (row, token)
      std::vector<double> beam_scores;
      for (int64_t j = 0; j < top_sc.size(1); ++j) {
        const double score = sca[s][j];
        if (score == kNegInf) break;
        const int64_t row = s * k + ixa[s][j] / v, tok = ixa[s][j] % v;
        if (tok == ids.eos) {
          // Only an eos among the top k ends a hypothesis (the others would not be in the beam).
          if (j < k && static_cast<int64_t>(fin.size()) < k) {
            Hypothesis h;
            h.tokens = hist[static_cast<size_t>(row)];
            h.log_prob = score;
            h.score = normalise(score, length, o.length_penalty);
            h.finished = true;
            fin.push_back(std::move(h));
          }
        } else if (static_cast<int64_t>(beams.size()) < k) {
          beams.emplace_back(row, tok);
          beam_scores.push_back(score);
        }
      }
      const bool at_max = length >= max_len[static_cast<size_t>(src_id)];
      if (at_max && static_cast<int64_t>(fin.size()) < k) {
        // Cut: the best open beams become (unfinished) hypotheses.
        for (size_t j = 0; j < beams.size() && static_cast<int64_t>(fin.size()) < k; ++j) {
          Hypothesis h;
          h.tokens = hist[static_cast<size_t>(beams[j].first)];
          h.tokens.push_back(beams[j].second);
          h.log_prob = beam_scores[j];
          h.score = normalise(beam_scores[j], length, o.length_penalty);
          fin.push_back(std::move(h));
        }
      }
      const bool done = at_max || static_cast<int64_t>(fin.size()) >= k || beams.empty();
      if (done) source_done[static_cast<size_t>(src_id)] = 1;
      if (done && compact) continue;
      next_active.push_back(src_id);
      for (int64_t j = 0; j < k; ++j) {
        // Fewer than k live continuations: fill with dead copies of the first.
        const bool live = !done && j < static_cast<int64_t>(beams.size());
        const auto& bt = live ? beams[static_cast<size_t>(j)] : (beams.empty() ? std::make_pair(s * k, ids.eos) : beams[0]);
        index.push_back(bt.first);
        next_tok.push_back(bt.second);
        next_scores.push_back(live ? beam_scores[static_cast<size_t>(j)] : kNegInf);
        std::vector<int64_t> h = hist[static_cast<size_t>(bt.first)];
        h.push_back(bt.second);
        next_hist.push_back(std::move(h));
      }
    }
    // Without compaction the batch keeps every source; stop when all are done.
    bool all_done = true;
    for (int64_t id : next_active)
      if (!source_done[static_cast<size_t>(id)]) all_done = false;
    if (next_active.empty() || all_done) break;
    const bool same_sources = static_cast<int64_t>(next_active.size()) == a;
    st.reorder(torch::tensor(index, torch::kLong).to(dev), same_sources);
    active = std::move(next_active);
    scores = std::move(next_scores);
    hist = std::move(next_hist);
    tokens = torch::tensor(next_tok, torch::kLong).to(dev);
  }

  std::vector<NBest> out(static_cast<size_t>(b));
  for (int64_t i = 0; i < b; ++i) {
    auto& fin = finished[static_cast<size_t>(i)];
    std::stable_sort(fin.begin(), fin.end(), [](const Hypothesis& x, const Hypothesis& y) { return x.score > y.score; });
    if (static_cast<int64_t>(fin.size()) > o.nbest) fin.resize(static_cast<size_t>(o.nbest));
    out[static_cast<size_t>(i)] = std::move(fin);
  }
  return out;
}

std::vector<NBest> translate(TranslationModel& model, const torch::Tensor& src, const torch::Tensor& src_mask,
                             const SearchOptions& o, const Prefixes& prefixes) {
  if (o.beam_size > 1) return beam_search(model, src, src_mask, o, prefixes);
  std::vector<NBest> out;
  for (Hypothesis& h : greedy_search(model, src, src_mask, o, prefixes)) out.push_back(NBest{std::move(h)});
  return out;
}

torch::Tensor token_log_probs(TranslationModel& model, const torch::Tensor& src, const torch::Tensor& src_mask,
                              const torch::Tensor& tgt_in, const torch::Tensor& tgt_out, const torch::Tensor& tgt_mask) {
  TORCH_CHECK(tgt_out.sizes() == tgt_in.sizes(), "forced decoding: tgt_out ", tgt_out.sizes(), " must match tgt_in ",
              tgt_in.sizes());
  EvalModeGuard eval(model);
  torch::NoGradGuard no_grad;
  torch::Tensor logits = model.forward(src, src_mask, tgt_in, tgt_mask);
  torch::Tensor lp = torch::log_softmax(logits.to(torch::kFloat), -1).gather(2, tgt_out.to(torch::kLong).unsqueeze(-1)).squeeze(-1);
  if (tgt_mask.defined()) lp = lp.masked_fill(tgt_mask.to(torch::kBool).logical_not(), 0.0);
  return lp;
}

torch::Tensor sequence_log_probs(TranslationModel& model, const torch::Tensor& src, const torch::Tensor& src_mask,
                                 const torch::Tensor& tgt_in, const torch::Tensor& tgt_out,
                                 const torch::Tensor& tgt_mask) {
  return token_log_probs(model, src, src_mask, tgt_in, tgt_out, tgt_mask).to(torch::kDouble).sum(1);
}

}  // namespace mambamt::models
