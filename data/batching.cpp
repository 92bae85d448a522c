#include "data/batching.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "data/detail/rng.h"

namespace mambamt::data {

namespace {

constexpr uint64_t kPlanStream = 0x706c616e;  // "plan"

struct Lengths {
  int64_t s = 0, t = 0;  // padded dimensions this example needs (enc-dec: S, T; dec-only: L, 0)
};

Lengths lengths(const Example& e, const BatchingOptions& o) {
  const int64_t prefix = o.source_prefix >= 0 ? 1 : 0;
  if (o.layout == Layout::kDecoderOnly) {
    return {static_cast<int64_t>(e.src.size() + e.tgt.size()) + 2 + prefix, 0};
  }
  return {e.src_len() + prefix, e.tgt_len()};
}

int64_t cost(int64_t b, int64_t s, int64_t t) { return b * std::max(s, t); }

}  // namespace

int64_t batch_cost(const std::vector<Example>& examples, const BatchIndices& batch, const BatchingOptions& o) {
  int64_t s = 0, t = 0;
  for (int64_t i : batch) {
    const Lengths l = lengths(examples[static_cast<size_t>(i)], o);
    s = std::max(s, l.s);
    t = std::max(t, l.t);
  }
  return cost(static_cast<int64_t>(batch.size()), s, t);
}

std::vector<BatchIndices> plan_batches(const std::vector<Example>& examples, const BatchingOptions& o,
                                       uint64_t seed, BatchPlanStats* stats) {
  if (o.max_tokens < 1) throw InputError("data.max_tokens must be >= 1");
  const size_t n = examples.size();
  std::vector<Lengths> len(n);
  for (size_t i = 0; i < n; ++i) len[i] = lengths(examples[i], o);
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  detail::Rng rng(detail::mix_seed({seed, kPlanStream}));
  if (o.shuffle) rng.shuffle(order);
  // Sorting by the padded length and then the source length keeps both sides
  // of a batch close in length; the prior shuffle randomises ties.
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    const auto& la = len[static_cast<size_t>(a)];
    const auto& lb = len[static_cast<size_t>(b)];
    const int64_t ka = std::max(la.s, la.t), kb = std::max(lb.s, lb.t);
    if (ka != kb) return ka < kb;
    return la.s < lb.s;
  });

  BatchPlanStats st;
  std::vector<BatchIndices> batches;
  BatchIndices cur;
  int64_t cur_s = 0, cur_t = 0;
  auto close = [&]() {
    if (cur.empty()) return;
    batches.push_back(std::move(cur));
    cur.clear();
    cur_s = cur_t = 0;
  };
  for (int64_t i : order) {
    const Lengths& l = len[static_cast<size_t>(i)];
    if (cost(1, l.s, l.t) > o.max_tokens) {
      switch (o.oversize) {
        case Oversize::kThrow:
          throw InputError("data: an example of " + std::to_string(std::max(l.s, l.t)) +
                           " tokens does not fit the batch budget max_tokens = " + std::to_string(o.max_tokens) +
                           " (raise max_tokens or lower max_example_tokens)");
        case Oversize::kSkip:
          ++st.skipped;
          continue;
        case Oversize::kSingleton:
          close();
          batches.push_back({i});
          continue;
      }
    }
    const int64_t s = std::max(cur_s, l.s), t = std::max(cur_t, l.t);
    const int64_t b = static_cast<int64_t>(cur.size()) + 1;
    if (!cur.empty() && (cost(b, s, t) > o.max_tokens || (o.max_batch_size > 0 && b > o.max_batch_size))) {
      close();
      cur_s = l.s;
      cur_t = l.t;
    } else {
      cur_s = s;
      cur_t = t;
    }
    cur.push_back(i);
  }
  close();
  if (o.shuffle) rng.shuffle(batches);

  const BatchPlanStats counted = batch_stats(examples, batches, o);
  st.real_tokens = counted.real_tokens;
  st.padded_tokens = counted.padded_tokens;
  st.examples = counted.examples;
  st.batches = static_cast<int64_t>(batches.size());
  if (stats) *stats = st;
  return batches;
}

BatchPlanStats batch_stats(const std::vector<Example>& examples, const std::vector<BatchIndices>& batches,
                           const BatchingOptions& o) {
  BatchPlanStats st;
  for (const auto& batch : batches) {
    int64_t s = 0, t = 0;
    for (int64_t i : batch) {
      const Lengths l = lengths(examples[static_cast<size_t>(i)], o);
      st.real_tokens += l.s + l.t;
      s = std::max(s, l.s);
      t = std::max(t, l.t);
    }
    st.padded_tokens += static_cast<int64_t>(batch.size()) * (s + t);
    st.examples += static_cast<int64_t>(batch.size());
  }
  st.batches = static_cast<int64_t>(batches.size());
  return st;
}

double Batch::padding_fraction() const {
  if (!src.defined() || size() == 0) return 0.0;
  const double total = static_cast<double>(src.numel() + tgt_out.numel());
  return 1.0 - static_cast<double>(src_tokens + tgt_tokens) / total;
}

Batch collate(const std::vector<Example>& examples, const BatchIndices& batch, const SpecialIds& ids,
              const BatchingOptions& o) {
  const int64_t b = static_cast<int64_t>(batch.size());
  const int64_t prefix = o.source_prefix >= 0 ? 1 : 0;
  int64_t S = 1, T = 1;
  for (int64_t i : batch) {
    const Example& e = examples.at(static_cast<size_t>(i));
    S = std::max(S, e.src_len() + prefix);
    T = std::max(T, e.tgt_len());
  }
  Batch out;
  out.src = torch::empty({b, S}, torch::kLong);
  out.src_mask = torch::empty({b, S}, torch::kBool);
  out.tgt_in = torch::empty({b, T}, torch::kLong);
  out.tgt_out = torch::empty({b, T}, torch::kLong);
  out.tgt_mask = torch::empty({b, T}, torch::kBool);
  int64_t* src = out.src.data_ptr<int64_t>();
  bool* src_mask = out.src_mask.data_ptr<bool>();
  int64_t* tin = out.tgt_in.data_ptr<int64_t>();
  int64_t* tout = out.tgt_out.data_ptr<int64_t>();
  bool* tmask = out.tgt_mask.data_ptr<bool>();
  out.example_ids.assign(batch.begin(), batch.end());
  for (int64_t r = 0; r < b; ++r) {
    const Example& e = examples[static_cast<size_t>(batch[static_cast<size_t>(r)])];
    int64_t* srow = src + r * S;
    bool* smrow = src_mask + r * S;
    int64_t k = 0;
    if (prefix) srow[k++] = o.source_prefix;
    for (int32_t id : e.src) srow[k++] = id;
    srow[k++] = ids.eos;
    out.src_tokens += k;
    std::fill(smrow, smrow + k, true);
    std::fill(smrow + k, smrow + S, false);
    std::fill(srow + k, srow + S, ids.pad);

    const int64_t m = static_cast<int64_t>(e.tgt.size());
    int64_t* irow = tin + r * T;
    int64_t* orow = tout + r * T;
    bool* tmrow = tmask + r * T;
    irow[0] = ids.bos;
    for (int64_t j = 0; j < m; ++j) {
      irow[j + 1] = e.tgt[static_cast<size_t>(j)];
      orow[j] = e.tgt[static_cast<size_t>(j)];
    }
    orow[m] = ids.eos;
    std::fill(irow + m + 1, irow + T, ids.pad);
    std::fill(orow + m + 1, orow + T, ids.pad);
    std::fill(tmrow, tmrow + m + 1, true);
    std::fill(tmrow + m + 1, tmrow + T, false);
    out.tgt_tokens += m + 1;
  }
  return out;
}

PackedBatch pack_decoder_only(const std::vector<Example>& examples, const BatchIndices& batch,
                              const SpecialIds& ids, const BatchingOptions& o) {
  const int64_t b = static_cast<int64_t>(batch.size());
  const int64_t prefix = o.source_prefix >= 0 ? 1 : 0;
  const int32_t boundary = o.boundary >= 0 ? o.boundary : ids.eos;
  int64_t L = 1;
  for (int64_t i : batch) {
    const Example& e = examples.at(static_cast<size_t>(i));
    L = std::max(L, static_cast<int64_t>(e.src.size() + e.tgt.size()) + 2 + prefix);
  }
  PackedBatch out;
  out.input = torch::empty({b, L}, torch::kLong);
  out.target = torch::empty({b, L}, torch::kLong);
  out.mask = torch::zeros({b, L}, torch::kBool);
  out.loss_mask = torch::zeros({b, L}, torch::kBool);
  out.src_len = torch::empty({b}, torch::kLong);
  int64_t* in = out.input.data_ptr<int64_t>();
  int64_t* tg = out.target.data_ptr<int64_t>();
  bool* mask = out.mask.data_ptr<bool>();
  bool* loss = out.loss_mask.data_ptr<bool>();
  int64_t* src_len = out.src_len.data_ptr<int64_t>();
  out.example_ids.assign(batch.begin(), batch.end());
  std::vector<int64_t> seq;
  for (int64_t r = 0; r < b; ++r) {
    const Example& e = examples[static_cast<size_t>(batch[static_cast<size_t>(r)])];
    seq.clear();
    seq.push_back(ids.bos);
    if (prefix) seq.push_back(o.source_prefix);
    seq.insert(seq.end(), e.src.begin(), e.src.end());
    seq.push_back(boundary);
    const int64_t first_target = static_cast<int64_t>(seq.size());  // index in seq of t_1 (or of eos)
    seq.insert(seq.end(), e.tgt.begin(), e.tgt.end());
    seq.push_back(ids.eos);
    const int64_t n = static_cast<int64_t>(seq.size()) - 1;  // positions used
    src_len[r] = first_target;
    for (int64_t j = 0; j < L; ++j) {
      const bool real = j < n;
      in[r * L + j] = real ? seq[static_cast<size_t>(j)] : ids.pad;
      tg[r * L + j] = real ? seq[static_cast<size_t>(j) + 1] : ids.pad;
      mask[r * L + j] = real;
      loss[r * L + j] = real && j + 1 >= first_target;
    }
  }
  return out;
}

}  // namespace mambamt::data
