#include "train/explain.h"

#include <array>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <sstream>

#include "core/error.h"
#include "core/fs.h"
#include "data/alignment.h"
#include "models/search.h"
#include "results/svg.h"
#include "train/decode.h"
#include "train/trainer.h"
#include "train/translate.h"

namespace fs = std::filesystem;

namespace mambamt::train {

namespace {

// The batch of one of a pair: src = s_1 .. s_n eos, tgt_in = bos t_1 .. t_m.
struct OneBatch {
  torch::Tensor src, src_mask, tgt_in, tgt_mask;
};

OneBatch one_batch(const SentencePair& pair, const data::SpecialIds& ids, const torch::Device& device) {
  std::vector<int64_t> src(pair.src.begin(), pair.src.end());
  src.push_back(ids.eos);
  std::vector<int64_t> tgt{ids.bos};
  tgt.insert(tgt.end(), pair.tgt.begin(), pair.tgt.end());
  auto lopts = torch::TensorOptions().dtype(torch::kLong);
  OneBatch b;
  b.src = torch::tensor(src, lopts).view({1, -1}).to(device);
  b.tgt_in = torch::tensor(tgt, lopts).view({1, -1}).to(device);
  b.src_mask = torch::ones_like(b.src, b.src.options().dtype(torch::kBool));
  b.tgt_mask = torch::ones_like(b.tgt_in, b.tgt_in.options().dtype(torch::kBool));
  return b;
}

std::vector<std::vector<double>> to_rows(const torch::Tensor& m) {
  torch::Tensor c = m.to(torch::kCPU, torch::kDouble).contiguous();
  auto a = c.accessor<double, 2>();
  std::vector<std::vector<double>> rows(static_cast<size_t>(c.size(0)));
  for (int64_t t = 0; t < c.size(0); ++t)
    for (int64_t j = 0; j < c.size(1); ++j) rows[static_cast<size_t>(t)].push_back(a[t][j]);
  return rows;
}

core::ResultTable table_of(const Explanation& e, const torch::Tensor& m) {
  core::ResultTable t;
  t.rows = e.target_tokens;
  t.columns = e.source_tokens;
  torch::Tensor c = m.to(torch::kCPU, torch::kDouble).contiguous();
  t.values.assign(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
  return t;
}

std::vector<std::string> pieces(const data::Tokenizer& tok, const std::vector<int32_t>& ids) {
  std::vector<std::string> out;
  for (int32_t id : ids) out.push_back(tok.piece(id));
  out.push_back(tok.piece(tok.specials().eos));
  return out;
}

// Sentences of a passage joined by " <sep> " (what `mambamt translate` reads).
std::string passage_text(const data::Tokenizer& tok, const std::vector<int32_t>& ids) {
  std::string out;
  bool first = true;
  for (auto& s : tok.decode_sentences(ids)) {
    out += (first ? "" : " <sep> ") + s;
    first = false;
  }
  return out;
}

std::string md_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|' || c == '*' || c == '_' || c == '`' || c == '[' || c == ']' || c == '<' || c == '>' || c == '\\')
      out += '\\';
    out += c == '\n' ? ' ' : c;
  }
  return out;
}

std::string numbered(size_t n) {
  std::ostringstream s;
  s << std::setw(3) << std::setfill('0') << n;
  return s.str();
}

// [begin, end) of each part of `ids` between separators.
std::vector<std::pair<size_t, size_t>> parts_between(const std::vector<int32_t>& ids, int32_t sep) {
  std::vector<std::pair<size_t, size_t>> out;
  size_t begin = 0;
  for (size_t i = 0; i <= ids.size(); ++i) {
    if (i == ids.size() || ids[i] == sep) {
      out.emplace_back(begin, i);
      begin = i + 1;
    }
  }
  return out;
}

// One sentence of an example to score: the word of each map row and column
// (-1 outside the sentence) and its gold links.
struct ScoredSentence {
  std::vector<int32_t> tgt_word, src_word;
  std::vector<results::Link> sure, possible;
  int32_t document = 0, sentence = 0;  // where it is in the set
  int half = 0;                         // the parity of its index among the set's sentences
};

// The index of each document's first sentence among the sentences of `set`.
std::vector<int64_t> first_sentences(const TestSet& set) {
  std::vector<int64_t> first;
  int64_t n = 0;
  for (const data::Document& d : set.corpus.documents) {
    first.push_back(n);
    n += static_cast<int64_t>(d.sentences.size());
  }
  return first;
}

// The sentences of `ex` that have gold alignments and tokens that split into
// their words (the others are counted in `skipped`).
std::vector<ScoredSentence> scored_sentences(const data::Example& ex, const TestSet& set, const data::Tokenizer& tok,
                                             const std::vector<int64_t>& first, int64_t& skipped) {
  const int32_t sep = tok.specials().sep;
  std::vector<std::pair<int32_t, int32_t>> sentences;  // (document, sentence) in example order
  for (const data::Span& span : ex.spans)
    for (int32_t k = 0; k < span.count; ++k) sentences.emplace_back(span.doc, span.first + k);
  const auto src_parts = parts_between(ex.src, sep), tgt_parts = parts_between(ex.tgt, sep);
  const size_t context = static_cast<size_t>(ex.context);
  if (src_parts.size() != sentences.size() || tgt_parts.size() + context != sentences.size()) {
    skipped += static_cast<int64_t>(sentences.size() - std::min(context, sentences.size()));
    return {};
  }
  const size_t rows = ex.tgt.size() + 1, cols = ex.src.size() + 1;
  std::vector<ScoredSentence> out;
  for (size_t k = context; k < sentences.size(); ++k) {
    const auto [d, i] = sentences[k];
    const data::SentencePair& pair = set.corpus.documents[static_cast<size_t>(d)].sentences[static_cast<size_t>(i)];
    const auto [s0, s1] = src_parts[k];
    const auto [t0, t1] = tgt_parts[k - context];
    const int64_t src_words = data::word_count(pair.src), tgt_words = data::word_count(pair.tgt);
    if (src_words == 0 || tgt_words == 0) continue;
    const auto sw = data::token_words(tok, {ex.src.begin() + s0, ex.src.begin() + s1}, src_words);
    const auto tw = data::token_words(tok, {ex.tgt.begin() + t0, ex.tgt.begin() + t1}, tgt_words);
    if (sw.empty() || tw.empty()) {
      ++skipped;
      continue;
    }
    ScoredSentence sc;
    sc.src_word.assign(cols, -1);
    sc.tgt_word.assign(rows, -1);
    for (size_t j = s0; j < s1; ++j) sc.src_word[j] = sw[j - s0];
    // Row p is the position that predicts target token p.
    for (size_t p = t0; p < t1; ++p) sc.tgt_word[p] = tw[p - t0];
    for (const data::WordLink& l : set.alignments[static_cast<size_t>(d)][static_cast<size_t>(i)])
      (l.sure ? sc.sure : sc.possible).emplace_back(l.src, l.tgt);
    sc.document = d;
    sc.sentence = i;
    sc.half = static_cast<int>((first[static_cast<size_t>(d)] + i) % 2);
    out.push_back(std::move(sc));
  }
  return out;
}

// Scores each sentence of one example on one (T,S) float map.
std::vector<results::AlignmentCounts> score_map(const torch::Tensor& map,
                                                const std::vector<ScoredSentence>& sentences) {
  const torch::Tensor m = map.to(torch::kCPU, torch::kFloat).contiguous();
  std::vector<results::AlignmentCounts> n;
  for (const ScoredSentence& sc : sentences)
    n.push_back(results::score_alignment(
        results::argmax_alignment(m.data_ptr<float>(), m.size(0), m.size(1), sc.tgt_word, sc.src_word), sc.sure,
        sc.possible));
  return n;
}

}  // namespace

AttentionAlignment attention_alignment(models::TranslationModel& model, const TestSet& set,
                                       const data::Tokenizer& tok, const torch::Device& device) {
  AttentionAlignment out;
  if (set.alignments.empty() || !model.has_source_attention()) return out;
  const std::vector<int64_t> first = first_sentences(set);
  for (const data::Example& ex : set.examples) {
    const std::vector<ScoredSentence> scored = scored_sentences(ex, set, tok, first, out.skipped);
    if (scored.empty()) continue;
    const AttentionMaps maps = attention_maps(model, SentencePair{ex.src, ex.tgt}, tok.specials(), device);
    if (maps.empty()) return AttentionAlignment{};
    if (out.layers.empty()) {
      out.layers = maps.layers;
      out.by_layer.resize(maps.layers.size());
    }
    const torch::Tensor per_layer = maps.weights.mean(1);  // (L,T,S)
    const size_t first_new = out.sentences.size();
    for (const ScoredSentence& sc : scored) {
      out.sentences.push_back({sc.document, sc.sentence, sc.half, {}});
      out.sentences.back().by_layer.resize(out.by_layer.size());
    }
    for (size_t l = 0; l < out.by_layer.size(); ++l) {
      const auto n = score_map(per_layer[static_cast<int64_t>(l)], scored);
      for (size_t k = 0; k < n.size(); ++k) {
        out.by_layer[l].add(n[k]);
        out.sentences[first_new + k].by_layer[l] = n[k];
      }
    }
    for (const results::AlignmentCounts& n : score_map(per_layer.mean(0), scored)) out.all_layers.add(n);
  }
  return out;
}

std::array<std::vector<results::AlignmentCounts>, 2> AttentionAlignment::halves() const {
  std::array<std::vector<results::AlignmentCounts>, 2> out;
  for (auto& h : out) h.resize(layers.size());
  for (const Sentence& s : sentences)
    for (size_t l = 0; l < layers.size(); ++l) out[static_cast<size_t>(s.half)][l].add(s.by_layer[l]);
  return out;
}

results::AlignmentCounts occlusion_alignment(models::TranslationModel& model, const TestSet& set,
                                             const data::Tokenizer& tok, const torch::Device& device,
                                             int64_t max_sentences, int64_t* skipped) {
  results::AlignmentCounts out;
  int64_t left_out = 0;
  if (!set.alignments.empty()) {
    const std::vector<int64_t> first = first_sentences(set);
    for (const data::Example& ex : set.examples) {
      if (max_sentences > 0 && out.sentences >= max_sentences) break;
      const std::vector<ScoredSentence> scored = scored_sentences(ex, set, tok, first, left_out);
      if (scored.empty()) continue;
      for (const results::AlignmentCounts& n :
           score_map(occlusion_importance(model, SentencePair{ex.src, ex.tgt}, tok.specials(), device), scored))
        out.add(n);
    }
  }
  if (skipped) *skipped = left_out;
  return out;
}

torch::Tensor AttentionMaps::mean(int64_t layer) const {
  TORCH_CHECK(weights.defined(), "AttentionMaps::mean: no attention maps");
  if (layer < 0) return weights.mean(std::vector<int64_t>{0, 1});
  TORCH_CHECK(layer < weights.size(0), "AttentionMaps::mean: layer ", layer, " of ", weights.size(0));
  return weights[layer].mean(0);
}

AttentionMaps attention_maps(models::TranslationModel& model, const SentencePair& pair, const data::SpecialIds& ids,
                             const torch::Device& device) {
  AttentionMaps out;
  if (!model.has_source_attention()) return out;
  torch::NoGradGuard no_grad;
  models::EvalModeGuard eval_mode(model);
  OneBatch b = one_batch(pair, ids, device);
  std::vector<models::SourceAttention> maps = model.source_attention(b.src, b.src_mask, b.tgt_in, b.tgt_mask);
  if (maps.empty()) return out;
  std::vector<torch::Tensor> w;
  bool same_heads = true;
  for (auto& m : maps) {
    TORCH_CHECK(m.weights.dim() == 4 && m.weights.size(0) == 1 && m.weights.size(2) == b.tgt_in.size(1) &&
                    m.weights.size(3) == b.src.size(1),
                "source_attention of layer ", m.layer, ": expected (1,H,", b.tgt_in.size(1), ",", b.src.size(1),
                "), got ", m.weights.sizes());
    out.layers.push_back(m.layer);
    w.push_back(m.weights[0].to(torch::kCPU, torch::kFloat));
    same_heads = same_heads && w.back().size(0) == w.front().size(0);
  }
  // Layers with different head counts (mixed kinds) keep their head means only.
  if (!same_heads)
    for (auto& x : w) x = x.mean(0, /*keepdim=*/true);
  out.weights = torch::stack(w);
  return out;
}

torch::Tensor occlusion_importance(models::TranslationModel& model, const SentencePair& pair,
                                   const data::SpecialIds& ids, const torch::Device& device, int64_t batch) {
  torch::NoGradGuard no_grad;
  models::EvalModeGuard eval_mode(model);
  OneBatch b = one_batch(pair, ids, device);
  const int64_t s = b.src.size(1), t = b.tgt_in.size(1);
  torch::Tensor base = model.final_hidden(b.src, b.src_mask, b.tgt_in, b.tgt_mask).to(torch::kFloat);  // (1,T,D)
  torch::Tensor base_norm = base.norm(2, -1).clamp_min(1e-12);                                         // (1,T)
  torch::Tensor out = torch::zeros({t, s}, torch::kFloat);
  batch = std::max<int64_t>(1, batch);
  for (int64_t j0 = 0; j0 < s; j0 += batch) {
    const int64_t n = std::min(batch, s - j0);
    // Row r occludes source column j0 + r: the pad id, masked (the model sees
    // the source without that token).
    torch::Tensor src = b.src.repeat({n, 1}), mask = b.src_mask.repeat({n, 1});
    auto lopts = torch::TensorOptions().dtype(torch::kLong).device(device);
    torch::Tensor rows = torch::arange(n, lopts), cols = torch::arange(j0, j0 + n, lopts);
    src.index_put_({rows, cols}, ids.pad);
    mask.index_put_({rows, cols}, false);
    torch::Tensor h = model.final_hidden(src, mask, b.tgt_in.expand({n, t}), b.tgt_mask.expand({n, t}))
                          .to(torch::kFloat);                           // (n,T,D)
    torch::Tensor rel = (h - base).norm(2, -1) / base_norm;            // (n,T)
    out.narrow(1, j0, n).copy_(rel.t().to(torch::kCPU));
  }
  return out;
}

ExplainMethod parse_explain_method(const std::string& text) {
  if (text == "attention") return ExplainMethod::kAttention;
  if (text == "occlusion") return ExplainMethod::kOcclusion;
  if (text == "both") return ExplainMethod::kBoth;
  throw UsageError("--method " + text + ": use attention, occlusion or both");
}

std::vector<Explanation> explain_sources(models::TranslationModel& model, const core::ExperimentConfig& c,
                                         const data::Tokenizer& tok, const std::vector<std::vector<int32_t>>& sources,
                                         const torch::Device& device, bool attention, bool occlusion) {
  std::vector<data::Example> examples(sources.size());
  for (size_t i = 0; i < sources.size(); ++i) examples[i].src = sources[i];
  const auto hyps = translate_examples(model, examples, tok.specials(), search_options(c.eval, c.eval.beam_size),
                                       c.eval.batch_tokens, device, use_bf16(c.train, device));
  std::vector<Explanation> out;
  for (size_t i = 0; i < sources.size(); ++i) {
    Explanation e;
    e.pair.src = sources[i];
    e.pair.tgt.assign(hyps[i].begin(), hyps[i].end());
    e.source = passage_text(tok, e.pair.src);
    e.translation = hypothesis_text(tok, hyps[i]);
    e.source_tokens = pieces(tok, e.pair.src);
    e.target_tokens = pieces(tok, e.pair.tgt);
    if (attention) e.attention = attention_maps(model, e.pair, tok.specials(), device);
    if (occlusion) e.occlusion = occlusion_importance(model, e.pair, tok.specials(), device);
    out.push_back(std::move(e));
  }
  return out;
}

namespace {

results::Heatmap token_heatmap(const Explanation& e, const torch::Tensor& values, const std::string& title,
                               const std::string& colorbar) {
  results::Heatmap hm;
  hm.layout.title = title;
  hm.x_labels = e.source_tokens;
  hm.y_labels = e.target_tokens;
  hm.values = to_rows(values);
  hm.x_axis_label = "source";
  hm.y_axis_label = "translation";
  hm.colorbar_label = colorbar;
  hm.min = 0.0;
  return hm;
}

}  // namespace

results::Heatmap attention_heatmap(const Explanation& e, int64_t layer, int64_t head) {
  const AttentionMaps& a = e.attention;
  if (a.empty()) throw InputError("no attention maps to draw");
  torch::Tensor m;
  std::string what;
  if (layer < 0) {
    m = head < 0 ? a.mean() : a.weights.select(1, head).mean(0);
    what = a.layers.size() == 1 ? a.layers[0] : "mean of " + std::to_string(a.layers.size()) + " layers";
  } else {
    m = head < 0 ? a.mean(layer) : a.weights[layer][head];
    what = a.layers.at(static_cast<size_t>(layer));
  }
  what += head < 0 ? (a.weights.size(1) > 1 ? ", mean of " + std::to_string(a.weights.size(1)) + " heads" : "")
                   : ", head " + std::to_string(head);
  return token_heatmap(e, m, "Attention (" + what + ")", "attention weight");
}

results::Heatmap occlusion_heatmap(const Explanation& e) {
  if (!e.occlusion.defined()) throw InputError("no occlusion map to draw");
  return token_heatmap(e, e.occlusion, "Occlusion importance",
                       "\u2016h(occluded) \u2212 h\u2016 / \u2016h\u2016");
}

void store_explanations(core::ExperimentStore& store, const std::vector<Explanation>& explanations) {
  for (size_t k = 0; k < explanations.size(); ++k) {
    const Explanation& e = explanations[k];
    const std::string prefix = "explain/" + std::to_string(k) + "/";
    if (e.occlusion.defined()) store.set_table(prefix + "occlusion", table_of(e, e.occlusion));
    if (!e.attention.empty()) store.set_table(prefix + "attention", table_of(e, e.attention.mean()));
  }
}

std::vector<size_t> pick_short(const std::vector<std::vector<int32_t>>& sources, size_t count, size_t max_tokens) {
  std::vector<size_t> out;
  for (size_t i = 0; i < sources.size() && out.size() < count; ++i)
    if (!sources[i].empty() && sources[i].size() + 1 <= max_tokens) out.push_back(i);
  return out;
}

ExplainResult explain_lines(const LoadedExperiment& exp, const std::vector<std::string>& lines,
                            const ExplainOptions& o) {
  models::TranslationModel& model = *exp.model;
  const bool has_attention = model.has_source_attention();
  const bool want_attention = o.method != ExplainMethod::kOcclusion;
  const bool want_occlusion = o.method != ExplainMethod::kAttention;
  if (o.method == ExplainMethod::kAttention && !has_attention)
    throw InputError("model kind `" + model.kind() + "` of " + exp.exp_dir +
                     " has no attention layer over the source, so there are no attention weights to draw: use "
                     "--method occlusion");
  ExplainResult result;
  if (want_attention && !has_attention)
    result.notes.push_back("model kind `" + model.kind() +
                           "` has no attention layer over the source: occlusion maps only");
  if (o.out_dir.empty()) throw UsageError("explain: no output directory");

  const data::Tokenizer& tok = *exp.tokenizer;
  std::vector<std::vector<int32_t>> sources;
  std::vector<size_t> line_of;
  for (size_t i = 0; i < lines.size(); ++i) {
    std::vector<int32_t> src;
    size_t start = 0;
    bool first = true;
    while (true) {
      const size_t at = lines[i].find("<sep>", start);
      if (!first) src.push_back(tok.specials().sep);
      tok.encode_append(lines[i].substr(start, at == std::string::npos ? std::string::npos : at - start), src);
      first = false;
      if (at == std::string::npos) break;
      start = at + 5;
    }
    if (src.empty()) {
      result.notes.push_back("line " + std::to_string(i + 1) + " is empty: skipped");
      continue;
    }
    sources.push_back(std::move(src));
    line_of.push_back(i + 1);
  }
  std::vector<Explanation> ex =
      explain_sources(model, exp.config, tok, sources, exp.device, want_attention && has_attention, want_occlusion);

  core::make_dirs(o.out_dir);
  auto write = [&](const std::string& name, const results::Heatmap& hm) {
    const std::string path = (fs::path(o.out_dir) / name).string();
    results::svg::write_file(path, results::render_heatmap(hm));
    result.files.push_back(path);
    return name;
  };
  std::ostringstream md;
  md << "# Source attention and occlusion maps\n\n"
     << "Experiment `" << exp.exp_dir << "` (model kind `" << model.kind() << "`, parameters from `" << exp.weights
     << "`), translated with beam size " << exp.config.eval.beam_size << ".\n\n"
     << "Rows are the tokens of the translation (the eos last), columns the source tokens. "
     << "**Attention**: the softmax weights of the layers that attend to the source, from a teacher-forced pass "
        "over the translation, averaged over layers and heads; each row sums to 1"
     << (model.plan().decoder_only ? " (decoder-only: renormalised over the source part of the sequence)" : "")
     << ". **Occlusion**: each source token in turn replaced by padding (masked); a cell is the relative change "
        "\u2016h(occluded) \u2212 h\u2016 / \u2016h\u2016 of the decoder's final hidden state at that target "
        "position.\n\n";
  if (want_attention && has_attention && !ex.empty())
    md << "Attention layers: " << [&] {
      std::string s;
      for (auto& l : ex.front().attention.layers) s += (s.empty() ? "`" : ", `") + l + "`";
      return s;
    }() << ".\n\n";
  for (auto& n : result.notes) md << "- " << md_escape(n) << "\n";
  if (!result.notes.empty()) md << "\n";
  for (size_t k = 0; k < ex.size(); ++k) {
    const Explanation& e = ex[k];
    const std::string num = numbered(line_of[k]);
    md << "## " << line_of[k] << "\n\n"
       << "- source: " << md_escape(e.source) << "\n"
       << "- translation: " << md_escape(e.translation) << "\n\n";
    std::vector<std::pair<std::string, std::string>> cells;  // (heading, file)
    if (!e.attention.empty()) cells.emplace_back("attention", write(num + "_attention.svg", attention_heatmap(e)));
    if (e.occlusion.defined()) cells.emplace_back("occlusion", write(num + "_occlusion.svg", occlusion_heatmap(e)));
    md << "|";
    for (auto& c : cells) md << " " << c.first << " |";
    md << "\n|";
    for (size_t i = 0; i < cells.size(); ++i) md << "---|";
    md << "\n|";
    for (auto& c : cells) md << " ![" << c.first << " " << line_of[k] << "](" << c.second << ") |";
    md << "\n\n";
    if (o.heads && !e.attention.empty()) {
      md << "Per layer and head:";
      for (int64_t l = 0; l < static_cast<int64_t>(e.attention.layers.size()); ++l)
        for (int64_t h = 0; h < e.attention.weights.size(1); ++h) {
          const std::string name = num + "_attention_" + e.attention.layers[static_cast<size_t>(l)] + "_h" +
                                   std::to_string(h) + ".svg";
          write(name, attention_heatmap(e, l, h));
          md << " [" << e.attention.layers[static_cast<size_t>(l)] << " head " << h << "](" << name << ")";
        }
      md << "\n\n";
    }
  }
  if (ex.empty()) md << "_No non-empty input line._\n";
  const std::string index = (fs::path(o.out_dir) / "index.md").string();
  core::write_file_atomic(index, md.str());
  result.files.push_back(index);
  return result;
}

}  // namespace mambamt::train
