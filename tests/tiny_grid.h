#pragma once
// The [base] table of the sweeps the [mpi] and [slurm] tests run with the real
// binary: a tiny hybrid on a tiny synthetic corpus that trains in seconds,
// with a short evaluation, as dotted keys (valid in a grid's [base] table and
// at the top level of an experiment file).
#include <string>

inline std::string tiny_base(int max_steps, int checkpoint_every, int log_every = 1,
                             int validate_every = 1000) {
  return R"(model.preset = "tiny"
model.d_model = 32
model.n_heads = 2
model.d_ff = 64
model.d_state = 8
model.headdim = 16
data.vocab_size = 120
data.context_sentences = 1
data.max_example_tokens = 64
data.max_tokens = 256
data.valid_passages = 2
data.max_valid_examples = 8
data.synthetic.train_docs = 24
data.synthetic.valid_docs = 2
data.synthetic.test_docs = 2
data.synthetic.min_sentences = 3
data.synthetic.max_sentences = 4
data.synthetic.vocab_size = 30
data.synthetic.entities = 10
train.lr = 3e-3
train.warmup_steps = 2
)" + std::string("train.log_every = ") +
         std::to_string(log_every) + "\ntrain.validate_every = " + std::to_string(validate_every) +
         "\ntrain.max_steps = " + std::to_string(max_steps) +
         "\ntrain.checkpoint_every = " + std::to_string(checkpoint_every) + R"(
eval.beam_size = 1
eval.bootstrap_samples = 0
eval.max_examples = 4
eval.extrapolation = false
)";
}
