#pragma once
// The experiment schema: every config field, once. Each entry is
//   X(name, C++ type, default, check, "documentation")
// and expands into the struct members (core/config.h), the parser, the
// validator, the canonical serialisation and `mambamt config doc`.
// Checks: any(), at_least(x), range(lo, hi), one_of({...}), each_one_of({...}),
// each_at_least(x). Adding a field is one line here, plus its name in
// fields_hashed_when_set (core/config.cpp) so that existing experiment ids
// stay as they are.

// clang-format off
#define MAMBAMT_MODEL_FIELDS(X) \
  X(kind, std::string, "hybrid", one_of({"hybrid", "transformer", "mamba", "decoder_only", "retnet", "rnnsearch"}), \
    "Model kind: hybrid (Bi-Mamba/attention encoder, Mamba/attention decoder with cross-attention), transformer (encoder-decoder baseline), mamba (decoder-only over `source <sep> target`, no attention), decoder_only (the same framing with attention layers: Transformer++, Mamba-MHA, Mamba-Local), retnet (the same framing with multi-scale retention + MLP in every layer: RetNet), rnnsearch (Bahdanau et al. 2015: bidirectional GRU encoder, GRU decoder with additive attention and a maxout output; d_model = embedding size, d_ff = GRU and alignment hidden size, enc_layers = stacked bidirectional GRU layers, one decoder GRU).") \
  X(preset, std::string, "none", one_of({"none", "tiny", "small", "base", "medium", "large"}), \
    "Size preset: sets d_model, layer counts, heads, d_ff and d_state for the kind (tiny is for tests and the demo). Keys set explicitly override the preset.") \
  X(d_model, int64_t, 384, range(8, 65536), "Model width (rnnsearch: word embedding size, also its maxout output width).") \
  X(enc_layers, int64_t, 6, range(0, 1024), "Encoder layers (encoder-decoder kinds; rnnsearch: stacked bidirectional GRU layers, 1 in the paper).") \
  X(dec_layers, int64_t, 6, range(1, 1024), "Decoder layers (all the layers of decoder-only kinds; rnnsearch has one decoder GRU: 1, set when not given).") \
  X(n_heads, int64_t, 6, range(1, 1024), "Attention heads (retnet: retention heads, each with decay 1 - 2^(-5-h)); d_model must be divisible by it. Unused by rnnsearch.") \
  X(d_ff, int64_t, 1536, range(1, 1 << 20), "Hidden width of the MLPs (rnnsearch: hidden units of every GRU and of the alignment model).") \
  X(mlp, std::string, "swiglu", one_of({"swiglu", "relu"}), "MLP type of attention layers (and of Mamba layers when mamba_mlp is set).") \
  X(mamba_mlp, bool, false, any(), "Add an MLP after every Mamba block (off: Mamba-2 replaces both attention and MLP, as in the research plan).") \
  X(attention_ratio, double, 0.125, range(0.0, 1.0), \
    "Fraction of attention layers in hybrid stacks: 0 = none, 0.25 = 1:3, 0.125 = 1:7, 0.0625 = 1:15. A stack of N layers gets max(1, round(N x ratio)); `mambamt plan` and `config check` warn where that is not the ratio asked (1:7 is exact for N a multiple of 8). Ignored by transformer.") \
  X(attention_placement, std::string, "middle_end", one_of({"middle_end", "uniform", "every_n", "first"}), \
    "Where hybrid attention layers go: middle_end (layers N/2 and N-1, then spread), uniform (evenly spaced), every_n (every round(1/ratio)-th layer, ending at N-1), first (the first layers).") \
  X(cross_attn_every, int64_t, 4, range(1, 1024), "Decoder cross-attention after every k-th decoder layer (k <= dec_layers); the last layer always has one.") \
  X(cross_attn, std::string, "full", one_of({"full", "gated", "local"}), "Cross-attention type: full, gated (a learned sigmoid gate on its output) or local (a window around the aligned source position).") \
  X(cross_attn_window, int64_t, 64, range(1, 1 << 20), "Source window (tokens) of local cross-attention.") \
  X(attn_window, int64_t, 0, range(0, 1 << 20), "Sliding window of self-attention layers in tokens (0 = full attention); Mamba-Local uses it.") \
  X(enc_plan, std::vector<std::string>, {}, each_one_of({"bimamba", "mamba", "attention", "local_attention"}), \
    "Explicit encoder layer list overriding attention_ratio/placement, e.g. [\"bimamba\", \"attention\", ...]; its length sets enc_layers.") \
  X(dec_plan, std::vector<std::string>, {}, \
    each_one_of({"mamba", "attention", "local_attention", "mamba+cross", "attention+cross", "local_attention+cross"}), \
    "Explicit decoder layer list; `+cross` adds cross-attention after the layer. Its length sets dec_layers.") \
  X(mamba_version, int64_t, 2, range(1, 2), "Mamba block: 2 (SSD) or 1 (selective scan).") \
  X(d_state, int64_t, 64, range(1, 1024), "SSM state size N.") \
  X(d_conv, int64_t, 4, range(2, 4), "Causal convolution width of Mamba blocks.") \
  X(expand, int64_t, 2, range(1, 8), "Mamba inner width = expand * d_model.") \
  X(headdim, int64_t, 64, range(1, 4096), "Mamba-2 head dimension P; expand * d_model must be divisible by it.") \
  X(ngroups, int64_t, 1, range(1, 1024), "Mamba-2 B/C groups G.") \
  X(chunk_size, int64_t, 64, range(1, 4096), "SSD chunk length of the CUDA kernel.") \
  X(dense_connections, int64_t, 0, range(0, 64), "DenseMamba hidden connections from the m previous layers (0 = off).") \
  X(dropout, double, 0.1, range(0.0, 0.95), "Dropout on residual branches and embeddings.") \
  X(attn_dropout, double, 0.0, range(0.0, 0.95), "Dropout on attention weights.") \
  X(tie_embeddings, bool, true, any(), "Share source, target and output embeddings.") \
  X(norm_eps, double, 1e-5, range(1e-12, 1e-1), "RMSNorm epsilon.") \
  X(rope_base, double, 10000.0, range(1.0, 1e9), "RoPE base of attention layers.") \
  X(init, std::string, "standard", one_of({"standard", "normal"}), \
    "Weight initialisation: standard (as PyTorch's nn.Transformer and fairseq: Xavier-uniform weight matrices, zero biases, embeddings N(0, d_model^-1/2) looked up times sqrt(d_model); Mamba projections as mamba-ssm, U(+-1/sqrt(fan_in)), the output projection divided by sqrt of the stack's residual branches) or normal (N(0, init_std) for every weight matrix and embedding, no embedding scale: the scheme of runs made before this key existed, which learns much more slowly: docs/LEARNING.md).") \
  X(init_std, double, 0.02, range(1e-6, 1.0), "Standard deviation of the weights with model.init = normal (an error with the standard scheme).")

#define MAMBAMT_SYNTHETIC_FIELDS(X) \
  X(seed, int64_t, 1234, any(), "Generator seed (the corpus is a pure function of these fields).") \
  X(train_docs, int64_t, 2000, range(1, 100000000), "Training documents.") \
  X(valid_docs, int64_t, 100, range(1, 10000000), "Validation documents.") \
  X(test_docs, int64_t, 100, range(1, 10000000), "Test documents.") \
  X(min_sentences, int64_t, 3, range(1, 10000), "Fewest sentences per document.") \
  X(max_sentences, int64_t, 8, range(1, 10000), "Most sentences per document.") \
  X(vocab_size, int64_t, 300, range(20, 1000000), "Content words per language.") \
  X(entities, int64_t, 200, range(1, 1000000), "Distinct named entities.")

#define MAMBAMT_DATA_FIELDS(X) \
  X(corpus, std::string, "synthetic", one_of({"synthetic", "iwslt", "parallel", "tsv"}), \
    "Corpus format: synthetic (the embedded document-level generator, [data.synthetic]), iwslt (IWSLT14/17 as distributed), parallel (one sentence per line, blank line between documents or a .docids file), tsv (src<TAB>tgt[<TAB>doc_id]).") \
  X(src_lang, std::string, "src", any(), "Source language code (file suffixes of iwslt/parallel).") \
  X(tgt_lang, std::string, "tgt", any(), "Target language code.") \
  X(train, std::string, "", any(), "Training data: a directory (iwslt), a path prefix (parallel: PREFIX.src_lang), or a file (tsv). Unused for synthetic.") \
  X(valid, std::string, "", any(), "Validation data, like train.") \
  X(test, std::vector<std::string>, {}, any(), "Test sets, like train; synthetic adds its own.") \
  X(contrastive, std::vector<std::string>, {}, any(), "ContraPro-format contrastive sets; synthetic adds its own.") \
  X(tokenizer, std::string, "bpe", one_of({"bpe", "unigram"}), "sentencepiece model type.") \
  X(vocab_size, int64_t, 1000, range(16, 1000000), "Joint vocabulary size, special tokens included.") \
  X(tokenizer_dir, std::string, "", any(), "Use this trained tokenizer instead of training one (sweeps set it to runs/<sweep>/tokenizer).") \
  X(context_sentences, int64_t, 0, range(0, 1000), "Document-level training: examples are windows of up to this many consecutive sentences joined by <sep> (0 = single sentences).") \
  X(context_side, std::string, "both", one_of({"both", "source"}), \
    "With context_sentences > 1: both = the window is translated whole (source and target sentences joined by <sep>); source = every sentence is an example whose source holds up to context_sentences - 1 preceding source sentences as context and whose target is that sentence alone.") \
  X(multi_resolution, bool, false, any(), \
    "With context_sentences > 1 and context_side = both: every document is split into windows of each size from 1 to context_sentences (so every sentence is trained on alone, and in windows of every size), instead of windows of context_sentences only: the multi-resolution training of document-to-document models.") \
  X(sentence_steps, int64_t, 0, range(0, 1000000000), \
    "Two-stage document-level training in one run: the first N updates train on single sentences, the later ones on the examples of context_sentences (windows, or source-side context); 0 = those from the start. Needs context_sentences > 1.") \
  X(max_example_tokens, int64_t, 512, range(4, 1 << 20), "Token budget of one example (windows stop before exceeding it; longer sentences are dropped from training).") \
  X(cat_n, int64_t, 1, range(1, 1000), "CAT-N: each training sample is kept with probability 1 - cat_prob, else N random samples are concatenated (1 = off).") \
  X(cat_prob, double, 0.5, range(0.0, 1.0), "Probability that a sample is replaced by a CAT-N concatenation.") \
  X(max_tokens, int64_t, 4096, range(16, 1 << 24), "Tokens per batch per rank, padding included.") \
  X(valid_passages, int64_t, 10, range(1, 1000), "Validation passages have 1 to this many sentences (with context_side = source, validation examples are made like the training ones).") \
  X(max_valid_examples, int64_t, 0, range(0, 100000000), "Cap on validation examples (0 = all).")

#define MAMBAMT_TRAIN_FIELDS(X) \
  X(seed, int64_t, 1, any(), "Seed of initialisation, dropout and sampling.") \
  X(device, std::string, "auto", one_of({"auto", "cpu", "cuda"}), "auto = the GPU of the local rank when there is one, else CPU. `mambamt train --device` overrides it for one run.") \
  X(threads, int64_t, 0, range(0, 1024), "CPU threads (0 = OMP_NUM_THREADS when set, else the cores available to this rank).") \
  X(lr, double, 5e-4, range(0.0, 10.0), "Peak learning rate.") \
  X(min_lr, double, 1e-5, range(0.0, 10.0), "Floor of the cosine schedule.") \
  X(schedule, std::string, "inverse_sqrt", one_of({"inverse_sqrt", "cosine", "constant"}), "Learning-rate schedule after linear warmup.") \
  X(warmup_steps, int64_t, 1000, range(0, 100000000), "Linear warmup steps.") \
  X(beta1, double, 0.9, range(0.0, 0.999999), "AdamW beta1.") \
  X(beta2, double, 0.98, range(0.0, 0.999999), "AdamW beta2.") \
  X(eps, double, 1e-8, range(1e-12, 1.0), "AdamW epsilon.") \
  X(weight_decay, double, 0.01, range(0.0, 10.0), "AdamW weight decay (never on norms, biases, A_log, D, dt_bias).") \
  X(label_smoothing, double, 0.1, range(0.0, 0.99), "Label smoothing of the cross-entropy.") \
  X(gate_penalty, double, 0.0, range(0.0, 100.0), \
    "Gated cross-attention (model.cross_attn = gated) only: adds gate_penalty times the mean gate (over the gated layers and the target tokens) to the training loss, so that gates close where the source is not needed and eval.gate_skip skips more. The train_loss metric stays the cross-entropy; gate_mean is logged beside it. 0 = off.") \
  X(gate_penalty_warmup, int64_t, 0, range(0, 100000000), \
    "Updates over which train.gate_penalty ramps up linearly: update s adds gate_penalty * min(1, s / gate_penalty_warmup), so the gates learn where the source helps before the penalty closes them. 0 = the full penalty from the first update.") \
  X(clip_norm, double, 1.0, range(0.0, 1e9), "Gradient norm clipping (0 = off).") \
  X(accum_steps, int64_t, 1, range(1, 100000), "Gradient accumulation steps per update.") \
  X(max_steps, int64_t, 10000, range(1, 1000000000), "Stop after this many updates.") \
  X(max_epochs, int64_t, 0, range(0, 1000000), "Stop after this many epochs (0 = no limit).") \
  X(patience, int64_t, 0, range(0, 100000), "Stop after this many validations without improvement (0 = off).") \
  X(valid_metric, std::string, "loss", one_of({"loss", "bleu", "chrf"}), "Validation metric for the best checkpoint and patience.") \
  X(validate_every, int64_t, 500, range(1, 100000000), "Validate every N updates.") \
  X(checkpoint_every, int64_t, 500, range(1, 100000000), "Checkpoint every N updates.") \
  X(keep_checkpoints, int64_t, 2, range(1, 1000), "Keep the last K checkpoints (the best is kept too).") \
  X(log_every, int64_t, 20, range(1, 100000000), "Record metrics every N updates (flushed to the store at the same time).") \
  X(activation_checkpointing, bool, false, any(), "Recompute layer activations in the backward pass.") \
  X(precision, std::string, "auto", one_of({"auto", "fp32", "bf16"}), "auto = bf16 autocast with fp32 master weights on CUDA, fp32 on CPU.")

#define MAMBAMT_EVAL_FIELDS(X) \
  X(beam_size, int64_t, 4, range(1, 256), "Beam size (1 = greedy).") \
  X(length_penalty, double, 1.0, range(0.0, 10.0), "Beam scores are divided by length^length_penalty.") \
  X(max_len_a, double, 1.5, range(0.0, 100.0), "Maximum output length = max_len_a * source length + max_len_b.") \
  X(max_len_b, int64_t, 10, range(0, 100000), "See max_len_a.") \
  X(doc_decode, std::string, "passages", one_of({"passages", "sentences"}), \
    "Test sets of a model trained on windows (context_sentences > 1, context_side = both): passages = each window is translated whole (BLEU over windows); sentences = the documents are translated one sentence at a time, each after up to context_sentences - 1 preceding source sentences with the model's own translations of them forced as the target prefix (BLEU over single sentences). Other models translate their test examples whole either way.") \
  X(nbest, int64_t, 1, range(1, 256), "Hypotheses kept per input (<= beam_size): above 1, evaluation writes the n-best list of each test set to hyp/<set>.nbest.txt and `mambamt translate` prints as many per line (its --nbest overrides this). Not with doc_decode = sentences on windows, which continues from the best translation only.") \
  X(batch_tokens, int64_t, 4096, range(16, 1 << 24), "Source tokens per decoding batch.") \
  X(bleu_tokenize, std::string, "13a", one_of({"13a", "intl", "none"}), "sacreBLEU tokenizer.") \
  X(lowercase, bool, false, any(), "Case-insensitive BLEU.") \
  X(bootstrap_samples, int64_t, 1000, range(0, 1000000), "Bootstrap resamples for confidence intervals (0 = off).") \
  X(length_buckets, std::vector<int64_t>, std::vector<int64_t>({16, 32, 64, 128, 256, 512}), each_at_least(1), \
    "Upper edges (source tokens) of the length buckets; a last bucket takes the rest.") \
  X(contrastive, bool, true, any(), "Score the contrastive sets.") \
  X(entity_recall, bool, true, any(), "Named-entity recall and consistency across a document, by training frequency.") \
  X(extrapolation, bool, true, any(), "Score the 2x/4x length-extrapolation passages.") \
  X(alignment, bool, true, any(), "Alignment error rate (AER) of the attention over the source (each layer's, and all layers' together) on the references of the first test set with gold word alignments: the synthetic corpus's test.align, or <set>.align next to a test file (Pharaoh format, data/alignment.h), e.g. a gold-aligned set added to data.test. Also read from occlusion, for every kind (pure Mamba, which has no attention, gets that one only). Sets without gold alignments have none.") \
  X(comet, std::string, "auto", one_of({"auto", "off"}), "COMET via Unbabel's `comet-score` command on PATH (auto = when present): the system score and every segment's (results/<set>/comet_segments: the collector's paired test of COMET), by sentence too for passages.") \
  X(comet_model, std::string, "", any(), "The COMET model comet-score loads (its --model, e.g. Unbabel/wmt22-comet-da; a name or a checkpoint path): pins what the scores of a sweep mean, whatever version of COMET a node has. Empty = comet-score's default model.") \
  X(average_last, int64_t, 0, range(0, 100), "Average the parameters of the last k checkpoints before evaluating (0 = off; at most train.keep_checkpoints).") \
  X(max_examples, int64_t, 0, range(0, 100000000), "Cap on test sentences per test set (0 = all): the first N in document order, whether translated alone or in windows; also the most passages per length-extrapolation set.") \
  X(gate_skip, double, 0.0, range(0.0, 1.0), \
    "Gated cross-attention (model.cross_attn = gated) only: in evaluation and `mambamt translate`, a target token's cross-attention whose gate is below this value is skipped: its output counts as zero, and on the CPU a decode step reads no source K/V for such rows (and computes nothing when every row is closed). 0 = never. Evaluation stores the gates' statistics on the test references either way (gates/*). Training does not read it: points that differ in it train once.")

#define MAMBAMT_SWEEP_FIELDS(X) \
  X(name, std::string, "", any(), "Sweep name; the run directory is output_dir/name (default: the grid file's stem).") \
  X(output_dir, std::string, "runs", any(), "Parent of the run directory, relative to the working directory.") \
  X(seeds, std::vector<int64_t>, std::vector<int64_t>({1}), any(), "Every grid point and variant runs once per seed (sets train.seed).") \
  X(retries, int64_t, 2, range(0, 1000), "Further attempts of a failed experiment, each resuming from its last checkpoint.") \
  X(ranks_per_experiment, int64_t, 1, range(1, 4096), "Ranks that train one experiment data-parallel.") \
  X(heartbeat_seconds, double, 10.0, range(0.1, 86400.0), "Workers report this often while they train.") \
  X(heartbeat_timeout, double, 300.0, range(1.0, 864000.0), "A worker silent this long is declared lost and its experiment interrupted.") \
  X(checkpoint_signal, std::string, "USR2", one_of({"USR1", "USR2", "TERM", "INT", "HUP"}), "Signal that makes every worker checkpoint and exit (NCCL can swallow USR1).") \
  X(max_requeues, int64_t, 5, range(0, 1000), "Cap on Slurm requeues of the sweep job.") \
  X(order, std::string, "cost", one_of({"cost", "grid"}), "Dispatch order: cost (most expensive first) or grid order.") \
  X(share_training, bool, true, any(), "Points that differ only in [eval] fields training does not read (beam_size, length_penalty, nbest, ...: see ExperimentConfig::training_id) train once: the others wait while it trains (in this job or another working on the same run directory), then evaluate its checkpoints (hard-linked into their own ckpt/) with its training metrics copied into their stores.") \
  X(design, std::string, "cartesian", one_of({"cartesian", "one_factor"}), \
    "How [grid] axes combine: cartesian (every combination) or one_factor (each axis varied alone, the others at the base's value: the ablation-table design).")
// clang-format on
