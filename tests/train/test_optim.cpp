// AdamW, parameter groups, schedules, gradient norm/clipping and the
// label-smoothed loss against hand computations.
#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <cmath>

#include "models/registry.h"
#include "train/loss.h"
#include "train/optim.h"
#include "train_helpers.h"

using namespace mambamt;

TEST_CASE("learning-rate schedules: linear warmup then inverse sqrt, cosine or constant") {
  core::TrainConfig t;
  t.lr = 1e-3;
  t.min_lr = 1e-5;
  t.warmup_steps = 100;
  t.max_steps = 1100;
  t.schedule = "inverse_sqrt";
  CHECK(train::learning_rate(t, 1) == Approx(1e-5));
  CHECK(train::learning_rate(t, 50) == Approx(5e-4));
  CHECK(train::learning_rate(t, 100) == Approx(1e-3));
  CHECK(train::learning_rate(t, 400) == Approx(1e-3 * std::sqrt(100.0 / 400.0)));
  CHECK(train::learning_rate(t, 10000) == Approx(1e-4));
  t.schedule = "cosine";
  CHECK(train::learning_rate(t, 100) == Approx(1e-3));
  CHECK(train::learning_rate(t, 600) == Approx(1e-5 + (1e-3 - 1e-5) * 0.5));  // half way: cos(pi/2) = 0
  CHECK(train::learning_rate(t, 1100) == Approx(1e-5));
  CHECK(train::learning_rate(t, 5000) == Approx(1e-5));  // past max_steps: the floor
  CHECK(train::learning_rate(t, 350) == Approx(1e-5 + (1e-3 - 1e-5) * 0.5 * (1 + std::cos(3.14159265358979323846 * 0.25))));
  t.schedule = "constant";
  CHECK(train::learning_rate(t, 5000) == Approx(1e-3));
  t.warmup_steps = 0;
  t.schedule = "inverse_sqrt";
  CHECK(train::learning_rate(t, 4) == Approx(5e-4));
}

TEST_CASE("the gate penalty ramps up linearly over train.gate_penalty_warmup") {
  core::TrainConfig t;
  t.gate_penalty = 2.0;
  CHECK(train::gate_penalty_at(t, 1) == 2.0);
  t.gate_penalty_warmup = 100;
  CHECK(train::gate_penalty_at(t, 1) == Approx(0.02));
  CHECK(train::gate_penalty_at(t, 50) == Approx(1.0));
  CHECK(train::gate_penalty_at(t, 100) == 2.0);
  CHECK(train::gate_penalty_at(t, 5000) == 2.0);
  t.gate_penalty = 0;
  CHECK(train::gate_penalty_at(t, 50) == 0);
}

TEST_CASE("weight decay skips norms, biases, A_log, D and dt_bias of a hybrid model") {
  core::ExperimentConfig c = train_test::tiny_config();
  models::ModelPtr m = models::build_model(c.model, 100);
  train::NamedParameters named;
  for (auto& p : m->named_parameters()) named.emplace_back(p.key(), p.value());
  train::AdamW opt(named, {});
  auto decay = opt.decay_names(), no_decay = opt.no_decay_names();
  REQUIRE(!decay.empty());
  REQUIRE(!no_decay.empty());
  auto leaf = [](const std::string& n) { return n.substr(n.rfind('.') + 1); };
  int ssm = 0, norms = 0;
  for (auto& n : no_decay) {
    const std::string l = leaf(n);
    if (l == "A_log" || l == "D" || l == "dt_bias") ++ssm;
    if (n.find("norm") != std::string::npos) ++norms;
  }
  CHECK(ssm > 0);
  CHECK(norms > 0);
  for (auto& n : decay) {
    INFO(n);
    const std::string l = leaf(n);
    CHECK(l != "A_log");
    CHECK(l != "D");
    CHECK(l != "dt_bias");
    CHECK(l != "bias");
    CHECK(n.find("norm") == std::string::npos);
  }
  // Names the rule must get right whatever the model looks like.
  CHECK_FALSE(train::uses_weight_decay("decoder.layers.0.mixer.A_log", torch::zeros({4, 8})));  // Mamba-1: 2-D
  CHECK_FALSE(train::uses_weight_decay("decoder.layers.0.mix_norm.weight", torch::zeros({4, 8})));
  CHECK_FALSE(train::uses_weight_decay("x.conv_bias", torch::zeros({4})));
  CHECK(train::uses_weight_decay("decoder.layers.0.mixer.in_proj.weight", torch::zeros({4, 8})));
  CHECK(train::uses_weight_decay("src_embed.weight", torch::zeros({4, 8})));
}

TEST_CASE("AdamW matches a hand computation, with and without weight decay") {
  torch::Tensor w = torch::tensor({1.0f, -2.0f}, torch::requires_grad());  // 1-D: no decay
  torch::Tensor m = torch::tensor({{0.5f, 0.25f}}, torch::requires_grad());  // 2-D "weight": decay
  train::AdamWOptions o;
  o.beta1 = 0.9;
  o.beta2 = 0.99;
  o.eps = 1e-8;
  o.weight_decay = 0.1;
  train::AdamW opt({{"w", w}, {"layer.weight", m}}, o);
  const double lr = 0.01;
  std::vector<double> wv{1.0, -2.0}, mv{0.5, 0.25}, m1(4, 0), v1(4, 0);
  const std::vector<double> g_w{0.3, -0.6}, g_m{0.2, 0.1};
  for (int t = 1; t <= 3; ++t) {
    w.mutable_grad() = torch::tensor({0.3f, -0.6f});
    m.mutable_grad() = torch::tensor({{0.2f, 0.1f}});
    opt.step(lr);
    for (int i = 0; i < 4; ++i) {
      const double g = i < 2 ? g_w[i] : g_m[i - 2];
      double& p = i < 2 ? wv[i] : mv[i - 2];
      m1[i] = 0.9 * m1[i] + 0.1 * g;
      v1[i] = 0.99 * v1[i] + 0.01 * g * g;
      if (i >= 2) p *= 1 - lr * 0.1;
      const double mh = m1[i] / (1 - std::pow(0.9, t)), vh = v1[i] / (1 - std::pow(0.99, t));
      p -= lr * mh / (std::sqrt(vh) + 1e-8);
    }
  }
  CHECK(opt.steps() == 3);
  CHECK(w[0].item<double>() == Approx(wv[0]).epsilon(1e-6));
  CHECK(w[1].item<double>() == Approx(wv[1]).epsilon(1e-6));
  CHECK(m[0][0].item<double>() == Approx(mv[0]).epsilon(1e-6));
  CHECK(m[0][1].item<double>() == Approx(mv[1]).epsilon(1e-6));

  // The state goes through a checkpoint and comes back bitwise.
  core::Checkpoint c;
  opt.save(c);
  torch::Tensor w2 = w.detach().clone().requires_grad_(), m2 = m.detach().clone().requires_grad_();
  train::AdamW opt2({{"w", w2}, {"layer.weight", m2}}, o);
  opt2.load(c);
  CHECK(opt2.steps() == 3);
  w.mutable_grad() = torch::tensor({0.1f, 0.1f});
  m.mutable_grad() = torch::tensor({{0.1f, 0.1f}});
  w2.mutable_grad() = torch::tensor({0.1f, 0.1f});
  m2.mutable_grad() = torch::tensor({{0.1f, 0.1f}});
  opt.step(lr);
  opt2.step(lr);
  CHECK(torch::equal(w, w2));
  CHECK(torch::equal(m, m2));
  core::Checkpoint broken = c;
  broken.tensors.erase("optim/exp_avg/w");
  CHECK_THROWS_WITH(opt2.load(broken), Catch::Contains("optim/exp_avg/w"));
}

TEST_CASE("gradient norm and clipping") {
  torch::Tensor a = torch::zeros({2}, torch::requires_grad()), b = torch::zeros({1}, torch::requires_grad());
  a.mutable_grad() = torch::tensor({3.0f, 0.0f});
  b.mutable_grad() = torch::tensor({4.0f});
  const double n = train::gradient_norm({a, b});
  CHECK(n == Approx(5.0));
  CHECK(train::clip_gradients({a, b}, n, 10.0) == 1.0);
  CHECK(a.grad()[0].item<float>() == 3.0f);
  const double f = train::clip_gradients({a, b}, n, 1.0);
  CHECK(f == Approx(1.0 / (5.0 + 1e-6)));
  CHECK(train::gradient_norm({a, b}) == Approx(1.0).epsilon(1e-5));
  b.mutable_grad() = torch::tensor({std::nanf("")});
  CHECK(std::isnan(train::gradient_norm({a, b})));
}

TEST_CASE("label-smoothed cross-entropy matches a hand computation and ignores padding") {
  // One row of three positions, vocabulary 3; the last position is padding.
  torch::Tensor logits = torch::tensor({{{1.0f, 2.0f, 0.5f}, {0.0f, 0.0f, 3.0f}, {9.0f, -9.0f, 4.0f}}});
  torch::Tensor target = torch::tensor({{1L, 2L, 0L}});
  torch::Tensor mask = torch::tensor({{true, true, false}});
  const double eps = 0.1;
  double want = 0, want_nll = 0;
  const double rows[2][3] = {{1.0, 2.0, 0.5}, {0.0, 0.0, 3.0}};
  const int y[2] = {1, 2};
  for (int r = 0; r < 2; ++r) {
    double lse = 0;
    for (double v : rows[r]) lse += std::exp(v);
    lse = std::log(lse);
    double smooth = 0;
    for (double v : rows[r]) smooth += lse - v;
    const double nll = lse - rows[r][y[r]];
    want_nll += nll;
    want += (1 - eps) * nll + eps / 3.0 * smooth;
  }
  train::LossSums s = train::label_smoothed_loss(logits, target, mask, eps);
  CHECK(s.tokens == 2);
  CHECK(s.loss.item<double>() == Approx(want).epsilon(1e-6));
  CHECK(s.nll.item<double>() == Approx(want_nll).epsilon(1e-6));
  // Without smoothing the loss is the negative log-likelihood.
  train::LossSums s0 = train::label_smoothed_loss(logits, target, mask, 0.0);
  CHECK(s0.loss.item<double>() == Approx(want_nll).epsilon(1e-6));
  // Changing the padded position changes nothing.
  torch::Tensor other = logits.clone();
  other[0][2] = torch::tensor({-50.0f, 50.0f, 0.0f});
  CHECK(train::label_smoothed_loss(other, target, mask, eps).loss.item<double>() == Approx(want).epsilon(1e-6));
}
