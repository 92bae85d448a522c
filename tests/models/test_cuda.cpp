// The models on a GPU: the same weights give the CPU's logits and gradients,
// and the model invariants (incremental decoding equals teacher forcing, beam
// size 1 equals greedy) hold there too. Skipped cleanly without a GPU.
#include <catch2/catch.hpp>

#include <optional>

#include "model_helpers.h"
#include "models/graph.h"
#include "models/layers.h"
#include "models/search.h"

using namespace mambamt;
using namespace mambamt::models;
using namespace mambamt::models::test;

namespace {

bool have_gpu() {
  if (torch::cuda::is_available()) return true;
  WARN("no CUDA device: model tests on the GPU skipped");
  return false;
}

struct GpuVariant {
  std::string name, kind, extra;
  // cuDNN runs the GRUs of rnnsearch with TF32 products unless told otherwise
  // (LibTorch's default), which rounds to about 1e-3.
  double tol = 1e-4;
};

std::vector<GpuVariant> gpu_variants() {
  return {
      {"hybrid default (1:7 middle_end, cross every 4)", "hybrid", ""},
      {"hybrid Mamba-1, 1:3 uniform, gated cross every 2", "hybrid",
       "mamba_version = 1\nattention_ratio = 0.25\nattention_placement = \"uniform\"\ncross_attn_every = 2\n"
       "cross_attn = \"gated\"\n"},
      {"hybrid local self- and cross-attention, ngroups 2", "hybrid",
       "enc_plan = [\"bimamba\", \"local_attention\", \"attention\"]\n"
       "dec_plan = [\"local_attention\", \"mamba+cross\", \"attention\", \"mamba+cross\"]\n"
       "attn_window = 3\ncross_attn = \"local\"\ncross_attn_window = 4\nngroups = 2\n"},
      {"transformer", "transformer", ""},
      {"mamba (decoder-only)", "mamba", ""},
      {"decoder_only Mamba-MHA", "decoder_only", "attention_ratio = 0.25\n"},
      {"retnet", "retnet", ""},
      {"rnnsearch", "rnnsearch", "", 3e-3},
  };
}

TestBatch to_gpu(const TestBatch& b) {
  TestBatch g = b;
  for (torch::Tensor* t : {&g.src, &g.src_mask, &g.tgt_in, &g.tgt_out, &g.tgt_mask}) *t = t->to(torch::kCUDA);
  return g;
}

torch::Tensor loss_of(TranslationModel& m, const TestBatch& b) {
  torch::Tensor logits = m.forward(b.src, b.src_mask, b.tgt_in, b.tgt_mask);
  return torch::nn::functional::cross_entropy(logits.index({b.tgt_mask}), b.tgt_out.index({b.tgt_mask}));
}

}  // namespace

TEST_CASE("on a GPU the models give the CPU's logits and gradients, and decode step by step to them",
          "[models][cuda]") {
  if (!have_gpu()) return;
  const TestBatch cpu_batch = make_batch({5, 3, 7}, {6, 9, 2});
  const TestBatch batch = to_gpu(cpu_batch);
  for (const GpuVariant& v : gpu_variants()) {
    SECTION(v.name) {
      const core::ModelConfig config = tiny_config(v.kind, v.extra);
      ModelPtr cpu = tiny_model(config), gpu = tiny_model(config);  // the same seed: the same weights
      gpu->to(torch::kCUDA);
      {
        torch::NoGradGuard no_grad;
        torch::Tensor forced = gpu->forward(batch.src, batch.src_mask, batch.tgt_in, batch.tgt_mask);
        REQUIRE(forced.device().is_cuda());
        torch::Tensor forced_cpu =
            cpu->forward(cpu_batch.src, cpu_batch.src_mask, cpu_batch.tgt_in, cpu_batch.tgt_mask);
        const torch::Tensor real = cpu_batch.tgt_mask;
        CHECK(rel_err(forced.cpu().index({real}), forced_cpu.index({real})) <= v.tol);
        // Incremental decoding on the GPU (a small reserve: the KV caches grow).
        InferenceState st = gpu->start(batch.src, batch.src_mask, /*reserve=*/2);
        for (int64_t t = 0; t < batch.tgt_in.size(1); ++t) {
          torch::Tensor step = gpu->step(st, batch.tgt_in.select(1, t));
          REQUIRE(step.device().is_cuda());
          const torch::Tensor at = real.select(1, t);
          INFO("position " << t);
          CHECK(rel_err(step.cpu().index({at}), forced.select(1, t).cpu().index({at})) <= v.tol);
        }
      }
      cpu->train();
      gpu->train();
      loss_of(*cpu, cpu_batch).backward();
      loss_of(*gpu, batch).backward();
      const auto cpu_params = cpu->named_parameters();
      int64_t checked = 0;
      for (const auto& p : gpu->named_parameters()) {
        INFO(p.key());
        REQUIRE(p.value().grad().defined());
        const torch::Tensor want = cpu_params[p.key()].grad();
        // Gradients sum over every position in another order on the GPU.
        CHECK(rel_err(p.value().grad().cpu(), want) <= std::max(10 * v.tol, 1e-3));
        ++checked;
      }
      CHECK(checked > 10);
    }
  }
}

// Evaluation on a GPU decodes under bf16 autocast (train::AutocastGuard): the
// hybrids' evaluation failed there once ("causal_conv1d_step: state has dtype
// Float, expected BFloat16"), while teacher forcing and training ran.
TEST_CASE("on a GPU under bf16 autocast step-by-step decoding follows teacher forcing", "[models][cuda]") {
  if (!have_gpu()) return;
  const TestBatch batch = to_gpu(make_batch({5, 3, 7}, {6, 9, 2}));
  for (const GpuVariant& v : gpu_variants()) {
    SECTION(v.name) {
      ModelPtr m = tiny_model(tiny_config(v.kind, v.extra));
      m->to(torch::kCUDA);
      torch::NoGradGuard no_grad;
      const core::Bf16Autocast autocast(c10::DeviceType::CUDA);
      torch::Tensor forced = m->forward(batch.src, batch.src_mask, batch.tgt_in, batch.tgt_mask).to(torch::kFloat);
      InferenceState st = m->start(batch.src, batch.src_mask, /*reserve=*/2);
      const torch::Tensor real = batch.tgt_mask.cpu();
      for (int64_t t = 0; t < batch.tgt_in.size(1); ++t) {
        torch::Tensor step = m->step(st, batch.tgt_in.select(1, t)).to(torch::kFloat).cpu();
        const torch::Tensor at = real.select(1, t);
        INFO("position " << t);
        CHECK(rel_err(step.index({at}), forced.select(1, t).cpu().index({at})) <= bf16_decode_tolerance(v.kind));
      }
    }
  }
}

TEST_CASE("on a GPU beam search with beam size 1 equals greedy search", "[models][search][cuda]") {
  if (!have_gpu()) return;
  const int64_t vocab = 8;
  const TestBatch batch = to_gpu(make_batch({4, 7, 2, 5}, {2, 2, 2, 2}, vocab, 21));
  for (const std::string kind : {"hybrid", "transformer", "mamba", "decoder_only"}) {
    SECTION(kind) {
      ModelPtr m = tiny_model(tiny_config(kind), vocab);
      m->to(torch::kCUDA);
      check_beam_one_is_greedy(*m, batch);
    }
  }
}

// models/graph.h: each step replayed from a CUDA graph gives the logits of the
// usual step on the same tokens, across a span change (64, then the rest of
// the cache), a reorder of the same batch (in place: the graphs stay) and one
// that grows the batch (new tensors: recorded again).
TEST_CASE("on a GPU decoding steps replayed from CUDA graphs give the usual steps' logits", "[models][cuda]") {
  if (!have_gpu()) return;
  REQUIRE(StepGraphs::available());
  const TestBatch batch = to_gpu(make_batch({9, 20}, {80, 45}, kVocab, 8));
  const torch::Tensor order = torch::tensor({1, 0}, torch::kLong).to(torch::kCUDA);
  const torch::Tensor grow = torch::tensor({0, 1, 1}, torch::kLong).to(torch::kCUDA);
  for (const bool autocast : {false, true})
  for (const KindVariant& v : static_step_variants()) {
    if (autocast && v.kind != "hybrid" && v.kind != "mamba") continue;
    SECTION(v.name + (autocast ? " under bf16 autocast" : "")) {
      ModelPtr m = tiny_model(tiny_config(v.kind, v.extra));
      m->to(torch::kCUDA);
      torch::NoGradGuard no_grad;
      std::optional<core::Bf16Autocast> region;
      if (autocast) region.emplace(c10::DeviceType::CUDA);
      InferenceState usual = m->start(batch.src, batch.src_mask, /*reserve=*/80);
      InferenceState graphed = m->start(batch.src, batch.src_mask, /*reserve=*/80);
      StepGraphs graphs(*m, graphed);
      double worst = 0;
      torch::Tensor rows = torch::arange(2, torch::kLong).to(torch::kCUDA);  // batch row of each state row
      for (int64_t t = 0; t < batch.tgt_in.size(1); ++t) {
        for (const auto& [at, index] : {std::make_pair(40, order), std::make_pair(50, grow)})
          if (t == at) {
            usual.reorder(index);
            graphed.reorder(index);
            rows = rows.index_select(0, index);
          }
        const torch::Tensor tokens = batch.tgt_in.select(1, t).index_select(0, rows);
        const torch::Tensor want = m->step(usual, tokens).to(torch::kFloat).cpu();
        const torch::Tensor got = graphs.step(tokens).to(torch::kFloat).cpu();
        worst = std::max(worst, rel_err(got, want));
      }
      CHECK(worst <= (autocast ? bf16_decode_tolerance(v.kind) : 1e-4));
      CHECK(torch::equal(graphed.position.cpu(), usual.position.cpu()));
      // One recording per span, and the span in use recorded again after the batch grew.
      CHECK(graphs.recordings() == (full_attention(graphed) ? 3 : 2));
    }
  }
}

// SearchOptions::cuda_graphs (MAMBAMT_CUDA_GRAPHS in evaluation): greedy and
// beam search with every step replayed from CUDA graphs (beam reorders in
// place, no compaction) find the usual hypotheses.
TEST_CASE("on a GPU searches replayed from CUDA graphs find the usual hypotheses", "[models][search][cuda]") {
  if (!have_gpu()) return;
  const TestBatch batch = to_gpu(make_batch({5, 3, 7}, {2, 2, 2}));
  const Prefixes prefixes = {{7, 9}, {}, {11}};
  for (const KindVariant& v : static_step_variants()) {
    SECTION(v.name) {
      ModelPtr m = tiny_model(tiny_config(v.kind, v.extra));
      m->to(torch::kCUDA);
      for (const int64_t beam : {1, 3})
        for (const bool with_prefixes : {false, true}) {
          INFO("beam " << beam << (with_prefixes ? ", prefixes" : ""));
          SearchOptions o;
          o.beam_size = beam;
          o.nbest = beam;
          o.max_len_a = 1.0;
          o.max_len_b = 4;
          SearchOptions g = o;
          g.cuda_graphs = true;
          check_same_translations(*m, batch.src, batch.src_mask, o, g, with_prefixes ? prefixes : Prefixes{}, 1e-4);
        }
    }
  }
}

// Gated cross-attention skipping (eval.gate_skip) on a GPU masks the gate
// instead of reading it on the host, so CUDA graphs can record it: teacher
// forcing gives the CPU's skipping logits, and step-by-step decoding, usual
// and replayed from CUDA graphs, gives those.
TEST_CASE("on a GPU gated cross-attention skips as on the CPU, in steps replayed from CUDA graphs too",
          "[models][gates][cuda]") {
  if (!have_gpu()) return;
  REQUIRE(StepGraphs::available());
  const TestBatch cpu_batch = make_batch({5, 3, 7}, {6, 9, 2});
  const TestBatch batch = to_gpu(cpu_batch);
  for (const char* kind : {"hybrid", "transformer"}) {
    SECTION(kind) {
      const core::ModelConfig config = tiny_config(kind, "cross_attn = \"gated\"\ncross_attn_every = 1\n");
      ModelPtr cpu = tiny_model(config), gpu = tiny_model(config);  // the same seed: the same weights
      {
        // Gates spread over (0, 1) instead of all near 0.5, the same on both.
        torch::NoGradGuard no_grad;
        const auto on_cpu = gated_cross_attention(*cpu), on_gpu = gated_cross_attention(*gpu);
        REQUIRE(on_cpu.size() == on_gpu.size());
        for (size_t i = 0; i < on_cpu.size(); ++i) {
          on_cpu[i]->gate->weight.normal_(0.0, 0.5);
          on_gpu[i]->gate->weight.copy_(on_cpu[i]->gate->weight);
        }
      }
      cpu->eval();
      gpu->eval();
      gpu->to(torch::kCUDA);
      torch::NoGradGuard no_grad;
      const torch::Tensor real = cpu_batch.tgt_mask;
      const torch::Tensor open = cpu->forward(cpu_batch.src, cpu_batch.src_mask, cpu_batch.tgt_in, cpu_batch.tgt_mask);
      set_gate_skip(*cpu, 0.5);
      set_gate_skip(*gpu, 0.5);
      const torch::Tensor forced = cpu->forward(cpu_batch.src, cpu_batch.src_mask, cpu_batch.tgt_in, cpu_batch.tgt_mask);
      REQUIRE(rel_err(forced.index({real}), open.index({real})) > 1e-3);  // skipping changed something
      const torch::Tensor forced_gpu = gpu->forward(batch.src, batch.src_mask, batch.tgt_in, batch.tgt_mask);
      CHECK(rel_err(forced_gpu.cpu().index({real}), forced.index({real})) <= 1e-4);
      InferenceState usual = gpu->start(batch.src, batch.src_mask, /*reserve=*/16);
      InferenceState graphed = gpu->start(batch.src, batch.src_mask, /*reserve=*/16);
      StepGraphs graphs(*gpu, graphed);
      double worst_usual = 0, worst_graphed = 0;
      for (int64_t t = 0; t < batch.tgt_in.size(1); ++t) {
        const torch::Tensor tokens = batch.tgt_in.select(1, t);
        const torch::Tensor at = real.select(1, t);
        const torch::Tensor want = forced.select(1, t).index({at});
        worst_usual = std::max(worst_usual, rel_err(gpu->step(usual, tokens).cpu().index({at}), want));
        worst_graphed = std::max(worst_graphed, rel_err(graphs.step(tokens).cpu().index({at}), want));
      }
      CHECK(worst_usual <= 1e-4);
      CHECK(worst_graphed <= 1e-4);
      CHECK(graphs.recordings() >= 1);
    }
  }
}
