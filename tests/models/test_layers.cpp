// Layers on their own: the Bi-Mamba encoder block in both scan directions,
// RMSNorm, RoPE, the sliding-window cache, checkpoint averaging, the decode
// step's CPU fast paths, attention in blocks of queries.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "model_helpers.h"
#include "models/average.h"
#include "models/detail/decode_cpu.h"
#include "models/layers.h"
#include "models/mamba.h"
#include "models/search.h"

using namespace mambamt;
using namespace mambamt::models;
using namespace mambamt::models::test;

namespace {

// x (B,L,D) right-padded to lengths; positions beyond are garbage that must not matter.
SeqInfo info_for(const std::vector<int64_t>& lengths, int64_t l) {
  torch::Tensor mask = torch::zeros({static_cast<int64_t>(lengths.size()), l}, torch::kBool);
  for (size_t b = 0; b < lengths.size(); ++b) mask[static_cast<int64_t>(b)].narrow(0, 0, lengths[b]).fill_(true);
  return SeqInfo::from_mask(mask, mask.size(0), l, torch::kCPU);
}

// Random conv and SSM states in `a`, and the same in `b`.
void randomize_twin(MambaState& a, MambaState& b) {
  a.conv.normal_();
  a.ssm.normal_();
  b.conv = a.conv.clone();
  b.ssm = a.ssm.clone();
}

}  // namespace

TEST_CASE("reverse_index reverses each row within its length", "[models][layers]") {
  torch::Tensor idx = reverse_index(torch::tensor(std::vector<int64_t>{3, 5, 0}), 5);
  CHECK(torch::equal(idx[0], torch::tensor(std::vector<int64_t>{2, 1, 0, 3, 4})));
  CHECK(torch::equal(idx[1], torch::tensor(std::vector<int64_t>{4, 3, 2, 1, 0})));
  CHECK(torch::equal(idx[2], torch::tensor(std::vector<int64_t>{0, 1, 2, 3, 4})));
}

TEST_CASE("Bi-Mamba: padding changes neither scan direction", "[models][layers][invariant]") {
  for (int64_t version : {2, 1}) {
    SECTION("Mamba-" + std::to_string(version)) {
      torch::manual_seed(1);
      BiMamba bi(MambaOptions(16).version(version).d_state(4).headdim(8).init(WeightInit::normal(0.2)));
      const std::vector<int64_t> lengths{6, 2, 4};
      torch::Tensor x = torch::randn({3, 6, 16});
      torch::Tensor padded = x.clone();
      padded[1].narrow(0, 2, 4).fill_(100.0);  // loud garbage in the padding
      padded[2].narrow(0, 4, 2).fill_(-50.0);
      torch::NoGradGuard no_grad;
      torch::Tensor y = bi->forward(padded, info_for(lengths, 6), nullptr);
      for (int64_t b = 0; b < 3; ++b) {
        torch::Tensor alone = bi->forward(x[b].narrow(0, 0, lengths[b]).unsqueeze(0), info_for({lengths[b]}, lengths[b]),
                                          nullptr);
        INFO("row " << b);
        CHECK(rel_err(y[b].narrow(0, 0, lengths[b]), alone[0]) <= 1e-5);
      }
      // The backward scan makes the first output depend on the last real token,
      // the forward scan makes the last output depend on the first.
      torch::Tensor x2 = x.clone();
      x2[0][5] += 1.0;
      torch::Tensor y2 = bi->forward(x2, info_for(lengths, 6), nullptr);
      CHECK((y2[0][0] - y[0][0]).abs().max().item<double>() > 1e-6);
      torch::Tensor x3 = x.clone();
      x3[0][0] += 1.0;
      torch::Tensor y3 = bi->forward(x3, info_for(lengths, 6), nullptr);
      CHECK((y3[0][5] - y[0][5]).abs().max().item<double>() > 1e-6);
    }
  }
}

TEST_CASE("causal Mamba: prefill state continues like the whole sequence", "[models][layers]") {
  // d_state 16: the fused steps of both versions; 4: Mamba-1 takes the kernels' steps.
  for (int64_t version : {2, 1})
    for (int64_t d_state : {4, 16})
      SECTION("Mamba-" + std::to_string(version) + " d_state " + std::to_string(d_state)) {
        torch::manual_seed(2);
        Mamba m(MambaOptions(16).version(version).d_state(d_state).headdim(8).init(WeightInit::normal(0.2)));
        torch::NoGradGuard no_grad;
        // A skip D other than its initial ones, which the steps must carry too.
        int skips = 0;
        for (auto& p : m->named_parameters()) {
          const std::string& name = p.key();
          if (name == "D" || (name.size() > 2 && name.compare(name.size() - 2, 2, ".D") == 0)) {
            p.value().uniform_(-1.5, 1.5);
            ++skips;
          }
        }
        REQUIRE(skips == 1);
        torch::Tensor x = torch::randn({2, 7, 16});
        torch::Tensor full = m->forward(x, SeqInfo::from_mask({}, 2, 7, torch::kCPU), nullptr);
        LayerState st;
        m->init_state(st, 2, 0, x.options());
        m->forward(x.narrow(1, 0, 4), SeqInfo::from_mask({}, 2, 4, torch::kCPU), &st);
        for (int64_t t = 4; t < 7; ++t) {
          torch::Tensor y = m->step(x.select(1, t), StepInfo{torch::full({2}, t, torch::kLong)}, st);
          CHECK(rel_err(y, full.select(1, t)) <= 1e-5);
        }
      }
}

TEST_CASE("RMSNorm and RoPE", "[models][layers]") {
  RMSNorm n(RMSNormOptions(4).eps(0.0));
  torch::Tensor y = n->forward(torch::tensor({1.0f, -1.0f, 1.0f, -1.0f}).view({1, 4}));
  CHECK(rel_err(y, torch::tensor({1.0f, -1.0f, 1.0f, -1.0f}).view({1, 4})) < 1e-6);
  // RoPE: scores depend on the distance between positions only.
  torch::manual_seed(3);
  torch::Tensor q = torch::randn({8}), k = torch::randn({8});
  auto score = [&](int64_t pq, int64_t pk) {
    auto tq = rope_tables(torch::tensor({pq}), 8, 10000.0, torch::kFloat);
    auto tk = rope_tables(torch::tensor({pk}), 8, 10000.0, torch::kFloat);
    return (apply_rope(q.view({1, 8}), tq.first, tq.second) * apply_rope(k.view({1, 8}), tk.first, tk.second))
        .sum()
        .item<double>();
  };
  CHECK(score(5, 2) == Approx(score(103, 100)).epsilon(1e-4));
  CHECK(score(0, 0) == Approx((q * k).sum().item<double>()).epsilon(1e-5));
  // The float32 tables (a loop on the CPU) are the float64 ones rounded, for
  // positions of any shape, up to long ones.
  torch::Tensor pos = torch::tensor(std::vector<int64_t>{0, 1, 7, 4095, 100000, 3000000}).view({2, 3});
  for (int64_t dim : {2, 8, 64}) {
    auto f = rope_tables(pos, dim, 10000.0, torch::kFloat);
    auto d = rope_tables(pos, dim, 10000.0, torch::kDouble);
    INFO("dim " << dim);
    CHECK(f.first.sizes() == torch::IntArrayRef({2, 3, dim / 2}));
    CHECK(f.first.scalar_type() == torch::kFloat);
    CHECK(d.first.scalar_type() == torch::kDouble);
    CHECK((f.first.to(torch::kDouble) - d.first).abs().max().item<double>() <= 1e-7);
    CHECK((f.second.to(torch::kDouble) - d.second).abs().max().item<double>() <= 1e-7);
    CHECK(f.first[1][2][dim / 2 - 1].item<double>() != 1.0);  // the slowest frequency turns too
  }
}

TEST_CASE("sliding-window attention keeps only the window in its cache", "[models][layers]") {
  torch::manual_seed(4);
  Attention att(AttentionOptions(16, 2).window(3).init(WeightInit::normal(0.3)));
  att->eval();
  torch::NoGradGuard no_grad;
  torch::Tensor x = torch::randn({2, 10, 16});
  torch::Tensor full = att->forward(x, SeqInfo::from_mask({}, 2, 10, torch::kCPU), nullptr);
  LayerState st;
  att->init_state(st, 2, 100, x.options());
  CHECK(st.self.capacity() == 3);
  for (int64_t t = 0; t < 10; ++t) {
    torch::Tensor y = att->step(x.select(1, t), StepInfo{torch::full({2}, t, torch::kLong)}, st);
    CHECK(rel_err(y, full.select(1, t)) <= 1e-5);
  }
  CHECK(st.self.capacity() == 3);
  CHECK(st.self.length == 10);
}

TEST_CASE("causal attention steps continue a prefill in both cache kinds and dtypes", "[models][layers]") {
  // float32 takes the fused rotate-and-append on the CPU, float64 LibTorch's
  // ops; the full cache grows past its reserve, the ring wraps.
  for (auto dtype : {torch::kFloat, torch::kDouble})
    for (int64_t window : {0, 3}) {
      INFO("dtype " << dtype << ", window " << window);
      torch::manual_seed(6);
      Attention att(AttentionOptions(16, 2).window(window).init(WeightInit::normal(0.3)));
      att->to(dtype);
      att->eval();
      torch::NoGradGuard no_grad;
      torch::Tensor x = torch::randn({2, 20, 16}, dtype);
      torch::Tensor full = att->forward(x, SeqInfo::from_mask({}, 2, 20, torch::kCPU), nullptr);
      LayerState st;
      att->init_state(st, 2, 2, x.options());  // 16 columns at least
      att->forward(x.narrow(1, 0, 4), SeqInfo::from_mask({}, 2, 4, torch::kCPU), &st);
      for (int64_t t = 4; t < 20; ++t) {
        torch::Tensor y = att->step(x.select(1, t), StepInfo{torch::full({2}, t, torch::kLong)}, st);
        CHECK(rel_err(y, full.select(1, t)) <= 1e-5);
      }
      CHECK(st.self.length == 20);
      CHECK(st.self.capacity() == (window ? 3 : 32));
    }
}

TEST_CASE("checkpoint averaging", "[models][average]") {
  ModelPtr a = tiny_model(tiny_config("hybrid"));
  torch::manual_seed(99);
  ModelPtr b = build_model(a->config(), kVocab);
  TensorMap ma = named_tensors(*a), mb = named_tensors(*b);
  REQUIRE(ma.count("embed.weight"));
  REQUIRE(ma.count("decoder.layers.3.cross.q.weight"));
  TensorMap avg = average_tensors({ma, mb});
  for (const auto& [name, t] : avg) {
    INFO(name);
    CHECK(rel_err(t, (ma.at(name) + mb.at(name)) / 2) <= 1e-6);
  }
  // Loading the average into a model, then reading it back.
  torch::manual_seed(5);
  ModelPtr c = build_model(a->config(), kVocab);
  load_named_tensors(*c, avg);
  for (const auto& [name, t] : named_tensors(*c)) CHECK(torch::equal(t, avg.at(name)));

  TensorMap missing = ma;
  missing.erase("embed.weight");
  CHECK_THROWS_AS(average_tensors({ma, missing}), Error);
  CHECK_THROWS_AS(load_named_tensors(*c, missing), Error);
  TensorMap wrong = ma;
  wrong["embed.weight"] = torch::zeros({2, 2});
  CHECK_THROWS_WITH(load_named_tensors(*c, wrong), Catch::Contains("embed.weight"));
  CHECK_THROWS_AS(average_tensors({}), Error);
}

TEST_CASE("decode fast paths equal the LibTorch ops they replace", "[models][layers]") {
  torch::NoGradGuard no_grad;
  torch::manual_seed(12);
  SECTION("attention of one query over a KV cache") {
    // Without it the step keeps models::attend.
    if (models::detail::attend_cached_available()) {
      // AVX-512 passes up to head dim 128 (one to eight vectors, the last one
      // masked), the AVX2 ones above it; the AVX2 passes (this test under
      // MAMBAMT_CPU_KERNELS=avx2, or on a CPU without AVX-512) in vectors of 8
      // with a masked tail, in chunks of 64 (128, 136) and blocks of 4 columns
      // with a scalar remainder (29) or none (32); the softmax over whole
      // vectors of 16 columns, a masked tail, or both.
      for (int64_t dh : {5, 16, 44, 64, 128, 136})
      for (int64_t n : {1, 29, 32}) {
        const int64_t b = 3, h = 2, cap = 37;
        torch::Tensor q = torch::randn({b, h, 1, dh}), k = torch::randn({b, h, cap, dh});
        torch::Tensor v = torch::randn({b, h, cap, dh});
        // The cache's unused capacity may hold anything: it must not be read.
        k.narrow(2, n, cap - n).fill_(std::numeric_limits<float>::quiet_NaN());
        v.narrow(2, n, cap - n).fill_(std::numeric_limits<float>::quiet_NaN());
        torch::Tensor valid = torch::rand({b, cap}).gt(0.3);
        valid[2].zero_();  // a row without a valid column: uniform weights, as attend
        torch::Tensor want = attend(q, k.narrow(2, 0, n), v.narrow(2, 0, n), valid.narrow(1, 0, n).view({b, 1, 1, n}),
                                    0.0, false);
        torch::Tensor got = models::detail::attend_cached(q, k, v, valid, n);
        INFO("head dim " << dh << ", columns " << n);
        CHECK(rel_err(got, want.view({b, h, dh})) <= 1e-5);
      }
    }
  }
  SECTION("search's row-wise log-softmax and max") {
    // One column, a masked vector tail, whole vectors, a vocabulary.
    for (int64_t v : {1, 17, 48, 32000}) {
      torch::Tensor x = torch::randn({5, v}) * 4;
      x[1][v - 1] = -std::numeric_limits<float>::infinity();  // a banned token
      x[2][v - 1] = 100;  // the largest in the last column (a masked tail for 1 and 17)
      INFO("columns " << v);
      CHECK(torch::allclose(models::detail::log_softmax_rows(x), torch::log_softmax(x, 1), 1e-5, 1e-5, true));
      auto [values, indices] = models::detail::max_rows(x);
      auto [want_values, want_indices] = x.max(1);
      CHECK(torch::equal(values, want_values));
      CHECK(torch::equal(indices, want_indices));
    }
    // Ties go to the first column; NaN as LibTorch orders it.
    torch::Tensor t = torch::zeros({2, 40});
    t[0][7] = 3, t[0][30] = 3, t[1][21] = 5, t[1][36] = 5;
    CHECK(torch::equal(std::get<1>(models::detail::max_rows(t)), torch::tensor({7, 21})));
    CHECK(torch::equal(models::greedy_tokens(t), torch::tensor({7, 21})));
    t[1][3] = std::numeric_limits<float>::quiet_NaN();
    auto [nan_values, nan_indices] = models::detail::max_rows(t);
    CHECK(std::isnan(nan_values[1].item<float>()));
    CHECK(torch::equal(nan_indices, std::get<1>(t.max(1))));
    // Other layouts take LibTorch's ops.
    torch::Tensor wide = torch::randn({40, 6}).t();
    CHECK(torch::allclose(models::detail::log_softmax_rows(wide), torch::log_softmax(wide, 1)));
    CHECK(torch::equal(std::get<1>(models::detail::max_rows(wide)), std::get<1>(wide.max(1))));
  }
  SECTION("beam search's candidates") {
    // As (lp.double() + scores).view({A, k*V}).topk(n, 1): the same sums in
    // the same order, each index pointing at its sum, no index twice, ties
    // by index.
    auto check = [](const torch::Tensor& lp, const std::vector<double>& scores, int64_t k, int64_t n) {
      const int64_t a = lp.size(0) / k, v = lp.size(1);
      torch::Tensor sums =
          (lp.to(torch::kDouble) + torch::tensor(scores, torch::kDouble).view({a * k, 1})).reshape({a, k * v});
      auto [want, unused] = sums.topk(n, 1);
      auto [got, got_ix] = models::detail::beam_topk(lp, scores, k, n);
      CHECK(torch::equal(got, want));
      CHECK(torch::equal(sums.gather(1, got_ix), got));
      for (int64_t s = 0; s < a; ++s) CHECK(std::get<0>(torch::_unique(got_ix[s])).size(0) == n);
      // Among equal sums the lower flat index comes first.
      for (int64_t s = 0; s < a; ++s)
        for (int64_t c = 0; c + 1 < n; ++c)
          if (got[s][c].item<double>() == got[s][c + 1].item<double>())
            CHECK(got_ix[s][c].item<int64_t>() < got_ix[s][c + 1].item<int64_t>());
    };
    for (int64_t k : {1, 3, 5})
      for (int64_t v : {2, 7, 33, 32000}) {
        const int64_t a = 4, n = std::min(2 * k, k * v);
        INFO("beam " << k << ", vocabulary " << v);
        torch::Tensor lp = torch::log_softmax(torch::randn({a * k, v}) * 3, 1);
        lp[1][v - 1] = -std::numeric_limits<float>::infinity();  // a banned eos
        lp[2].fill_(lp[2][0].item<float>());                       // a row of ties
        std::vector<double> scores(static_cast<size_t>(a * k));
        for (auto& x : scores) x = -torch::rand({1}).item<double>() * 10;
        scores[0] = 0.0;
        if (k > 1) scores[1] = -std::numeric_limits<double>::infinity();  // a dead beam
        check(lp, scores, k, n);
      }
    // A row holding NaN, and another layout, take LibTorch's ops.
    torch::Tensor lp = torch::randn({6, 40});
    lp[4][9] = std::numeric_limits<float>::quiet_NaN();
    std::vector<double> scores(6, 0.0);
    auto [nan_sc, nan_ix] = models::detail::beam_topk(lp, scores, 3, 6);
    CHECK(torch::equal(nan_ix, std::get<1>(lp.to(torch::kDouble).view({2, 120}).topk(6, 1))));
    check(torch::randn({40, 6}).t(), scores, 3, 6);
  }
  SECTION("RMSNorm") {
    // The inference path (no gradients, float32 on CPU) against the LibTorch
    // expression: widths below one vector, with a tail, and over the blocks
    // of 4 vectors.
    for (int64_t dim : {1, 5, 16, 44, 64, 100, 352, 384, 768}) {
      RMSNorm n{RMSNormOptions(dim)};
      torch::NoGradGuard no_grad;
      n->weight.uniform_(0.5, 1.5);
      torch::Tensor x = torch::randn({3, 7, dim});
      torch::Tensor fast = n->forward(x);
      torch::Tensor ref = x * torch::rsqrt(x.pow(2).mean(-1, true) + n->options.eps()) * n->weight;
      INFO("dim " << dim);
      CHECK(rel_err(fast, ref) <= 1e-6);
    }
  }
  SECTION("a Mamba-2 mixer's step in one pass") {
    // Without it the step keeps the kernels' steps.
    if (models::detail::mamba2_step_available()) {
      // Against SsdCore::step (causal_conv1d_step, ssd_step, RMSNorm) over
      // several steps from a random state: state sizes below one vector, with
      // a masked tail, in blocks of 32 and one more of 16; groups; conv widths
      // 2-4; dt below and above softplus's linear threshold.
      struct Case { int64_t d_state, headdim, ngroups, d_conv, batch; };
      for (const Case& k : std::vector<Case>{{8, 16, 1, 4, 3}, {24, 16, 2, 3, 5}, {48, 32, 1, 2, 1},
                                             {64, 64, 1, 4, 4}, {16, 8, 4, 4, 2}}) {
        SsdCore core(MambaOptions(64).d_state(k.d_state).headdim(k.headdim).ngroups(k.ngroups).d_conv(k.d_conv));
        core->A_log.uniform_(-1.0, 1.5);
        core->D.normal_();
        core->dt_bias.normal_();
        core->conv_bias.normal_();
        core->norm->weight.uniform_(0.5, 1.5);
        const int64_t di = core->options.d_inner(), c = core->options.conv_dim_v2(), h = core->options.nheads();
        MambaState fused, ref;
        core->init_state(fused, k.batch, torch::TensorOptions());
        randomize_twin(fused, ref);
        for (int step = 0; step < 3; ++step) {
          // A wider buffer, so rows have a stride beyond their width.
          torch::Tensor zxbcdt = torch::randn({k.batch, di + c + h + 3}).narrow(1, 0, di + c + h);
          zxbcdt.narrow(1, di + c, h)[0][0] = 25.0;  // softplus(dt) = dt
          torch::Tensor got = core->step_fused(zxbcdt, fused);
          torch::Tensor want =
              core->step(zxbcdt.narrow(1, di, c), zxbcdt.narrow(1, di + c, h), zxbcdt.narrow(1, 0, di), ref);
          INFO("d_state " << k.d_state << ", headdim " << k.headdim << ", groups " << k.ngroups << ", conv "
                          << k.d_conv << ", step " << step);
          REQUIRE(got.defined());
          CHECK(rel_err(got, want) <= 1e-5);
          CHECK(rel_err(fused.conv, ref.conv) <= 1e-6);
          CHECK(rel_err(fused.ssm, ref.ssm) <= 1e-5);
        }
      }
      // Many rows on 2 threads.
      SsdCore core(MambaOptions(32).d_state(16).headdim(16));
      const int64_t di = core->options.d_inner(), c = core->options.conv_dim_v2(), h = core->options.nheads();
      MambaState fused, ref;
      core->init_state(fused, 33, torch::TensorOptions());
      core->init_state(ref, 33, torch::TensorOptions());
      torch::Tensor zxbcdt = torch::randn({33, di + c + h});
      const int saved = torch::get_num_threads();
      torch::set_num_threads(2);
      torch::Tensor got = core->step_fused(zxbcdt, fused);
      torch::set_num_threads(saved);
      torch::Tensor want =
          core->step(zxbcdt.narrow(1, di, c), zxbcdt.narrow(1, di + c, h), zxbcdt.narrow(1, 0, di), ref);
      CHECK(rel_err(got, want) <= 1e-5);
      CHECK(rel_err(fused.ssm, ref.ssm) <= 1e-5);
      // It takes the states a prefill leaves (the usual start of a decode), and
      // they go on as stepping would have left them.
      {
        torch::Tensor xBC = torch::randn({3, 6, c}), dt = torch::randn({3, 6, h}), z = torch::randn({3, 6, di});
        MambaState pre, stepped;
        core->forward(xBC, dt, z, torch::Tensor(), &pre);
        core->init_state(stepped, 3, torch::TensorOptions());
        for (int64_t t = 0; t < 6; ++t) core->step(xBC.select(1, t), dt.select(1, t), z.select(1, t), stepped);
        torch::Tensor next = torch::randn({3, di + c + h});
        torch::Tensor from_prefill = core->step_fused(next, pre);
        REQUIRE(from_prefill.defined());
        CHECK(rel_err(from_prefill, core->step(next.narrow(1, di, c), next.narrow(1, di + c, h), next.narrow(1, 0, di),
                                               stepped)) <= 1e-4);
      }
      // With gradients, or in float64, the fused pass declines.
      MambaState d;
      core->init_state(d, 2, torch::TensorOptions());
      {
        torch::AutoGradMode grad(true);
        CHECK_FALSE(core->step_fused(torch::randn({2, di + c + h}), d).defined());
      }
      core->init_state(d, 2, torch::TensorOptions().dtype(torch::kDouble));
      CHECK_FALSE(core->step_fused(torch::randn({2, di + c + h}, torch::kDouble), d).defined());
      // Nor does it write through a state that is not contiguous.
      core->init_state(d, 2, torch::TensorOptions());
      d.conv = torch::zeros({2, d.conv.size(2), d.conv.size(1)}).transpose(1, 2);
      CHECK_FALSE(core->step_fused(torch::randn({2, di + c + h}), d).defined());
    }
  }
  SECTION("a Mamba-1 mixer's step in one pass") {
    // Without it the step keeps the kernels' steps.
    if (models::detail::mamba1_step_available(16)) {
      // Against SelectiveCore::step (causal_conv1d_step, x_proj, dt_proj,
      // selective_scan_step) over several steps from a random state: state
      // sizes of one to four vectors, inner widths with and without a vector
      // tail, dt ranks below and above one vector, conv widths 2-4.
      struct Case { int64_t d_model, d_state, d_conv, dt_rank, batch; };
      for (const Case& k :
           std::vector<Case>{{64, 16, 4, 0, 3}, {40, 32, 3, 20, 5}, {48, 64, 2, 3, 1}, {24, 48, 4, 0, 2}}) {
        SelectiveCore core(MambaOptions(k.d_model).version(1).d_state(k.d_state).d_conv(k.d_conv).dt_rank(k.dt_rank));
        core->A_log.add_(torch::randn_like(core->A_log) * 0.3);
        core->D.normal_();
        core->dt_proj->bias.normal_();
        core->conv_bias.normal_();
        const int64_t di = core->options.d_inner();
        MambaState fused, ref;
        core->init_state(fused, k.batch, torch::TensorOptions());
        randomize_twin(fused, ref);
        for (int step = 0; step < 3; ++step) {
          // The fused step keeps -exp(A_log) from its first call; an in-place
          // change of A_log (an optimizer step, a checkpoint load) must reach it.
          if (step == 2) {
            torch::NoGradGuard no_grad;
            core->A_log.mul_(0.5);
          }
          torch::Tensor xz = torch::randn({k.batch, 2 * di + 5}).narrow(1, 0, 2 * di);
          torch::Tensor got = core->step_fused(xz, fused);
          torch::Tensor want = core->step(xz.narrow(1, di, di), xz.narrow(1, 0, di), ref);
          INFO("d_model " << k.d_model << ", d_state " << k.d_state << ", conv " << k.d_conv << ", dt rank "
                          << core->options.rank() << ", step " << step);
          REQUIRE(got.defined());
          CHECK(rel_err(got, want) <= 1e-5);
          CHECK(rel_err(fused.conv, ref.conv) <= 1e-6);
          CHECK(rel_err(fused.ssm, ref.ssm) <= 1e-5);
        }
      }
      // Many rows on 2 threads.
      SelectiveCore core(MambaOptions(32).version(1).d_state(16));
      const int64_t di = core->options.d_inner();
      MambaState fused, ref;
      core->init_state(fused, 33, torch::TensorOptions());
      core->init_state(ref, 33, torch::TensorOptions());
      torch::Tensor xz = torch::randn({33, 2 * di});
      const int saved = torch::get_num_threads();
      torch::set_num_threads(2);
      torch::Tensor got = core->step_fused(xz, fused);
      torch::set_num_threads(saved);
      torch::Tensor want = core->step(xz.narrow(1, di, di), xz.narrow(1, 0, di), ref);
      CHECK(rel_err(got, want) <= 1e-5);
      CHECK(rel_err(fused.ssm, ref.ssm) <= 1e-5);
      // It takes the states a prefill leaves.
      {
        torch::Tensor x = torch::randn({3, 6, di}), z = torch::randn({3, 6, di});
        MambaState pre, stepped;
        core->forward(x, z, torch::Tensor(), &pre);
        core->init_state(stepped, 3, torch::TensorOptions());
        for (int64_t t = 0; t < 6; ++t) core->step(x.select(1, t), z.select(1, t), stepped);
        torch::Tensor next = torch::randn({3, 2 * di});
        torch::Tensor from_prefill = core->step_fused(next, pre);
        REQUIRE(from_prefill.defined());
        CHECK(rel_err(from_prefill, core->step(next.narrow(1, di, di), next.narrow(1, 0, di), stepped)) <= 1e-4);
      }
      // With gradients, or a state size that is not whole vectors, the fused
      // pass declines.
      MambaState d;
      core->init_state(d, 2, torch::TensorOptions());
      {
        torch::AutoGradMode grad(true);
        CHECK_FALSE(core->step_fused(torch::randn({2, 2 * di}), d).defined());
      }
      SelectiveCore odd(MambaOptions(32).version(1).d_state(8));
      odd->init_state(d, 2, torch::TensorOptions());
      CHECK_FALSE(odd->step_fused(torch::randn({2, 2 * di}), d).defined());
    }
  }
  SECTION("an attention step's rotary embedding and cache append") {
    // Head dims of one pair and of several vectors; the column written is
    // the last one of the cache, the first, one inside.
    for (int64_t dh : {2, 64})
      for (int64_t col : {0, 3, 6}) {
        const int64_t b = 3, h = 2, cap = 7;
        torch::Tensor qkv = torch::randn({b, 3 * h * dh});
        auto tables = rope_tables(torch::tensor(std::vector<int64_t>{0, 5, 123}), dh, 10000.0, torch::kFloat);
        torch::Tensor k = torch::full({b, h, cap, dh}, std::numeric_limits<float>::quiet_NaN());
        torch::Tensor v = k.clone();
        torch::Tensor valid = torch::zeros({b, cap}, torch::kBool);
        torch::Tensor q = models::detail::rotate_append(qkv, tables.first, tables.second, k, v, valid, col);
        INFO("head dim " << dh << ", column " << col);
        REQUIRE(q.defined());
        torch::Tensor parts = qkv.view({b, 3, h, dh});
        torch::Tensor c = tables.first.view({b, 1, dh / 2}), s = tables.second.view({b, 1, dh / 2});
        CHECK(q.sizes() == torch::IntArrayRef({b, h, dh}));
        CHECK(rel_err(q, apply_rope(parts.select(1, 0), c, s)) <= 1e-6);
        CHECK(rel_err(k.select(2, col), apply_rope(parts.select(1, 1), c, s)) <= 1e-6);
        CHECK(torch::equal(v.select(2, col), parts.select(1, 2)));
        CHECK(valid.select(1, col).all().item<bool>());
        // Nothing else is written.
        CHECK(valid.sum().item<int64_t>() == b);
        CHECK(k.isnan().sum().item<int64_t>() == b * h * (cap - 1) * dh);
        CHECK(v.isnan().sum().item<int64_t>() == b * h * (cap - 1) * dh);
      }
    // It declines what it does not cover: a column past the cache, an odd
    // head dim, a strided input, gradients.
    torch::Tensor k = torch::zeros({2, 1, 4, 4}), v = torch::zeros({2, 1, 4, 4});
    torch::Tensor valid = torch::zeros({2, 4}, torch::kBool), cs = torch::ones({2, 2}), sn = torch::zeros({2, 2});
    torch::Tensor qkv = torch::randn({2, 12});
    CHECK(models::detail::rotate_append(qkv, cs, sn, k, v, valid, 3).defined());
    CHECK_FALSE(models::detail::rotate_append(qkv, cs, sn, k, v, valid, 4).defined());
    CHECK_FALSE(models::detail::rotate_append(torch::randn({2, 24}).narrow(1, 0, 12), cs, sn, k, v, valid, 0)
                    .defined());
    torch::Tensor k3 = torch::zeros({2, 1, 4, 3}), v3 = torch::zeros({2, 1, 4, 3});
    CHECK_FALSE(models::detail::rotate_append(torch::randn({2, 9}), torch::ones({2, 1}), torch::zeros({2, 1}), k3, v3,
                                              valid, 0)
                    .defined());
    torch::AutoGradMode grad(true);
    CHECK_FALSE(models::detail::rotate_append(qkv, cs, sn, k, v, valid, 0).defined());
  }
  SECTION("SwiGLU's gate in place") {
    // Without it the MLP keeps silu and mul.
    if (models::detail::small_batch_linear_available()) {
      // A step's rows (one chunk), and a prefill's (B, L, F) over several
      // chunks of 32K values, the last one partial.
      for (auto shape : {std::vector<int64_t>{5, 1}, {5, 16}, {5, 37}, {5, 1408}, {3, 100, 1408}}) {
        torch::Tensor up = torch::randn(shape) * 3, gate = torch::randn(shape) * 3;
        gate.view(-1)[0] = -100;  // silu's far tails
        gate.view(-1)[1] = 100;
        torch::Tensor want = torch::silu(gate) * up;
        INFO("shape " << up.sizes());
        REQUIRE(models::detail::mul_silu_inplace(up, gate));
        CHECK(rel_err(up, want) <= 1e-6);
      }
      torch::Tensor up = torch::randn({4, 6});
      CHECK_FALSE(models::detail::mul_silu_inplace(up, torch::randn({4, 5})));
      CHECK_FALSE(models::detail::mul_silu_inplace(up, torch::randn({6, 4}).t()));
      torch::AutoGradMode grad(true);
      CHECK_FALSE(models::detail::mul_silu_inplace(up, torch::randn({4, 6})));
    }
  }
  SECTION("x W^T for a few rows") {
    // Without it linear keeps torch::mm.
    if (models::detail::small_batch_linear_available()) {
      // Every row count of a greedy batch (one pass of up to 16 rows) and some
      // of beam search's batch x beam (passes of 16 and the rest), outputs
      // within one panel of 16, filling it, and over several with a partial
      // last one; inputs shorter and longer than the prefetch distance.
      for (int64_t b : {2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 31, 32, 33, 40, 63, 64, 80, 255, 256})
        for (int64_t n : {1, 13, 16, 48, 100})
          for (int64_t kd : {35, 200}) {
            torch::Tensor x = torch::randn({b, kd}), w = torch::randn({n, kd});
            INFO("rows " << b << ", outputs " << n << ", inputs " << kd);
            CHECK(rel_err(models::detail::small_batch_linear(x, w), torch::mm(x, w.t())) <= 1e-5);
          }
      // Enough panels for several tasks, on 2 threads.
      const int saved = torch::get_num_threads();
      torch::set_num_threads(2);
      torch::Tensor x = torch::randn({16, 35}), w = torch::randn({300, 35});
      const double err = rel_err(models::detail::small_batch_linear(x, w), torch::mm(x, w.t()));
      torch::set_num_threads(saved);
      CHECK(err <= 1e-5);
      // The packed copy follows the weight: an in-place update (as an
      // optimizer step or a checkpoint load) and new storage are both seen.
      torch::Tensor before = models::detail::small_batch_linear(x, w);
      w.mul_(-2.0).add_(0.5);
      CHECK(rel_err(models::detail::small_batch_linear(x, w), torch::mm(x, w.t())) <= 1e-5);
      CHECK(rel_err(models::detail::small_batch_linear(x, w), before) > 0.5);
      w.set_data(torch::randn({300, 35}));
      CHECK(rel_err(models::detail::small_batch_linear(x, w), torch::mm(x, w.t())) <= 1e-5);
      // Weights that die and new ones that may take their place.
      for (int i = 0; i < 20; ++i) {
        torch::Tensor t = torch::randn({50, 35});
        CHECK(rel_err(models::detail::small_batch_linear(x, t), torch::mm(x, t.t())) <= 1e-5);
      }
    }
  }
}

namespace {

// Softmax attention written out: the reference of attend's blocks of queries.
torch::Tensor reference_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                  const torch::Tensor& allowed) {
  torch::Tensor s = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(q.size(-1)));
  if (allowed.defined()) s = s.masked_fill(allowed.logical_not(), std::numeric_limits<float>::lowest());
  return torch::matmul(torch::softmax(s, -1), v);
}

struct AttentionGrads {
  torch::Tensor out, dq, dk, dv;
};

// Outputs and the gradients of sum(out * g) with respect to q, k and v.
template <class F>
AttentionGrads attention_grads(const torch::Tensor& q0, const torch::Tensor& k0, const torch::Tensor& v0,
                               const torch::Tensor& g, F&& f) {
  torch::Tensor q = q0.clone().requires_grad_(true), k = k0.clone().requires_grad_(true),
                v = v0.clone().requires_grad_(true);
  torch::Tensor out = f(q, k, v);
  (out * g).sum().backward();
  return {out.detach(), q.grad(), k.grad(), v.grad()};
}

double max_rel(const torch::Tensor& got, const torch::Tensor& want) {
  return (got - want).abs().max().item<double>() / std::max(want.abs().max().item<double>(), 1e-300);
}

}  // namespace

TEST_CASE("attention in blocks of queries: the outputs and gradients of the whole softmax", "[models][layers]") {
  torch::manual_seed(7);
  const auto f64 = torch::TensorOptions().dtype(torch::kDouble);
  const int64_t b = 2, h = 3, dh = 5;
  SECTION("cross-attention over padded keys, every block size") {
    const int64_t lq = 11, lk = 13;
    torch::Tensor q = torch::randn({b, h, lq, dh}, f64), k = torch::randn({b, h, lk, dh}, f64);
    torch::Tensor v = torch::randn({b, h, lk, 7}, f64), g = torch::randn({b, h, lq, 7}, f64);
    torch::Tensor valid = torch::ones({b, lk}, torch::kBool);
    valid[1].narrow(0, 9, 4).fill_(false);
    torch::Tensor allowed = valid.view({b, 1, 1, lk});
    const AttentionGrads want =
        attention_grads(q, k, v, g, [&](auto& q_, auto& k_, auto& v_) { return reference_attention(q_, k_, v_, allowed); });
    for (int64_t block : {1, 4, 11, 20}) {
      INFO("block " << block);
      const AttentionGrads got =
          attention_grads(q, k, v, g, [&](auto& q_, auto& k_, auto& v_) { return attend_blocks(q_, k_, v_, allowed, block); });
      CHECK(max_rel(got.out, want.out) < 1e-12);
      CHECK(max_rel(got.dq, want.dq) < 1e-12);
      CHECK(max_rel(got.dk, want.dk) < 1e-12);
      CHECK(max_rel(got.dv, want.dv) < 1e-12);
      // The padded keys get no gradient.
      CHECK(got.dk[1].narrow(1, 9, 4).abs().max().item<double>() == 0.0);
    }
  }
  SECTION("causal self-attention with a query that may see no key, and without a mask") {
    const int64_t l = 10;
    torch::Tensor q = torch::randn({b, h, l, dh}, f64), k = torch::randn({b, h, l, dh}, f64);
    torch::Tensor v = torch::randn({b, h, l, dh}, f64), g = torch::randn({b, h, l, dh}, f64);
    torch::Tensor allowed = torch::ones({l, l}, torch::kBool).tril().view({1, 1, l, l}).repeat({b, 1, 1, 1});
    allowed[0][0][6].fill_(false);  // uniform weights there, as attend gives them
    for (const torch::Tensor& mask : {allowed, torch::Tensor()}) {
      INFO((mask.defined() ? "causal" : "no mask"));
      // attend below its block threshold: the weights of the whole layer at once.
      REQUIRE(attend_query_block(q, k) == 0);
      const AttentionGrads want =
          attention_grads(q, k, v, g, [&](auto& q_, auto& k_, auto& v_) { return attend(q_, k_, v_, mask, 0.0, true); });
      const AttentionGrads got =
          attention_grads(q, k, v, g, [&](auto& q_, auto& k_, auto& v_) { return attend_blocks(q_, k_, v_, mask, 3); });
      CHECK(max_rel(got.out, want.out) < 1e-12);
      CHECK(max_rel(got.dq, want.dq) < 1e-12);
      CHECK(max_rel(got.dk, want.dk) < 1e-12);
      CHECK(max_rel(got.dv, want.dv) < 1e-12);
    }
  }
  SECTION("float32 within float32's rounding") {
    torch::Tensor q = torch::randn({b, h, 9, dh}), k = torch::randn({b, h, 9, dh}), v = torch::randn({b, h, 9, dh});
    torch::Tensor g = torch::randn({b, h, 9, dh});
    const AttentionGrads want = attention_grads(q.to(torch::kDouble), k.to(torch::kDouble), v.to(torch::kDouble),
                                                g.to(torch::kDouble), [&](auto& q_, auto& k_, auto& v_) {
                                                  return reference_attention(q_, k_, v_, torch::Tensor());
                                                });
    const AttentionGrads got =
        attention_grads(q, k, v, g, [&](auto& q_, auto& k_, auto& v_) { return attend_blocks(q_, k_, v_, {}, 2); });
    CHECK(max_rel(got.out.to(torch::kDouble), want.out) < 1e-5);
    CHECK(max_rel(got.dq.to(torch::kDouble), want.dq) < 1e-5);
    CHECK(max_rel(got.dk.to(torch::kDouble), want.dk) < 1e-5);
    CHECK(max_rel(got.dv.to(torch::kDouble), want.dv) < 1e-5);
  }
}

TEST_CASE("attend works in blocks of queries above 64M weights, on the CPU, without weights or dropout",
          "[models][layers]") {
  // Only the shapes matter to the choice (expanded: no memory behind them).
  auto shaped = [](int64_t b, int64_t h, int64_t l, torch::ScalarType t = torch::kFloat) {
    return torch::empty({1, 1, 1, 8}, torch::TensorOptions().dtype(t)).expand({b, h, l, 8});
  };
  CHECK(attend_query_block(shaped(1, 4, 8192), shaped(1, 4, 8192)) == (int64_t{1} << 24) / (4 * 8192));
  CHECK(attend_query_block(shaped(1, 4, 8192, torch::kDouble), shaped(1, 4, 8192, torch::kDouble)) == 512);
  CHECK(attend_query_block(shaped(1, 4, 2048), shaped(1, 4, 2048)) == 0);              // 16.8M weights
  CHECK(attend_query_block(shaped(16, 4, 1), shaped(16, 4, 1 << 20)) == 0);            // a decode step
  CHECK(attend_query_block(shaped(1, 4, 8192, torch::kBFloat16), shaped(1, 4, 8192, torch::kBFloat16)) == 0);
  CHECK(attend_query_block(shaped(1, 1, 1 << 26), shaped(1, 1, 1 << 26)) == 1);        // a block of one query at least

  // 8200 x 8200 weights of one head (67.2M): two blocks, of 2046 queries and
  // the rest, against the whole softmax.
  torch::manual_seed(8);
  const int64_t l = 8200, dh = 4;
  torch::Tensor q = torch::randn({1, 1, l, dh}), k = torch::randn({1, 1, l, dh});
  torch::Tensor v = torch::randn({1, 1, l, dh}), g = torch::randn({1, 1, l, dh});
  REQUIRE(attend_query_block(q, k) == (int64_t{1} << 24) / l);
  torch::Tensor allowed = torch::ones({l, l}, torch::kBool).tril().view({1, 1, l, l});
  const AttentionGrads want =
      attention_grads(q, k, v, g, [&](auto& q_, auto& k_, auto& v_) { return reference_attention(q_, k_, v_, allowed); });
  const AttentionGrads got =
      attention_grads(q, k, v, g, [&](auto& q_, auto& k_, auto& v_) { return attend(q_, k_, v_, allowed, 0.0, true); });
  CHECK(max_rel(got.out, want.out) < 1e-5);
  CHECK(max_rel(got.dq, want.dq) < 1e-5);
  CHECK(max_rel(got.dk, want.dk) < 1e-5);
  CHECK(max_rel(got.dv, want.dv) < 1e-5);
  // It took the blocks: their autograd node made the output.
  auto run = [&](torch::Tensor* weights, double dropout) {
    return attend(q.clone().requires_grad_(true), k, v, allowed, dropout, true, weights);
  };
  auto made_by = [](const torch::Tensor& out) { return out.grad_fn() ? out.grad_fn()->name() : std::string("none"); };
  CHECK_THAT(made_by(run(nullptr, 0.0)), Catch::Contains("BlockedAttention"));
  CHECK_THAT(made_by(run(nullptr, 0.1)), !Catch::Contains("BlockedAttention"));  // dropout on the weights
  // Asked for the weights, attend computes them all at once and gives them.
  torch::Tensor weights;
  torch::Tensor out = run(&weights, 0.0);
  CHECK_THAT(made_by(out), !Catch::Contains("BlockedAttention"));
  CHECK(weights.sizes() == torch::IntArrayRef({1, 1, l, l}));
  CHECK(max_rel(out.detach(), want.out) < 1e-5);
}
