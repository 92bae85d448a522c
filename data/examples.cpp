#include "data/examples.h"

#include <algorithm>

#include "core/error.h"
#include "data/detail/rng.h"

namespace mambamt::data {

namespace {

constexpr uint64_t kCatNStream = 0x6361746e;       // "catn"
constexpr uint64_t kValidStream = 0x76616c6964;    // "valid"

void append(std::vector<int32_t>& out, const std::vector<int32_t>& part, int32_t sep) {
  if (!out.empty()) out.push_back(sep);
  out.insert(out.end(), part.begin(), part.end());
}

// Appends the sentences [first, first + count) of document d to an example.
void add_span(Example& e, const TokenizedCorpus& c, int32_t d, int32_t first, int32_t count, int32_t sep) {
  const auto& sents = c.documents[static_cast<size_t>(d)].sentences;
  for (int32_t i = first; i < first + count; ++i) {
    append(e.src, sents[static_cast<size_t>(i)].src, sep);
    append(e.tgt, sents[static_cast<size_t>(i)].tgt, sep);
  }
  if (!e.spans.empty() && e.spans.back().doc == d && e.spans.back().first + e.spans.back().count == first) {
    e.spans.back().count += count;
  } else {
    e.spans.push_back(Span{d, first, count});
  }
}

// The sentences of `e` past its context, source or target side.
std::vector<std::string> span_sentences(const Corpus& corpus, const Example& e, bool source) {
  std::vector<std::string> out;
  int32_t skip = e.context;
  for (const auto& s : e.spans) {
    const auto& doc = corpus.documents.at(static_cast<size_t>(s.doc));
    for (int32_t i = s.first; i < s.first + s.count; ++i) {
      if (skip > 0) {
        --skip;
        continue;
      }
      const auto& p = doc.sentences.at(static_cast<size_t>(i));
      out.push_back(source ? p.src : p.tgt);
    }
  }
  return out;
}

std::string span_text(const Corpus& corpus, const Example& e, const std::string& sep, bool source) {
  std::string out;
  bool first = true;
  for (const std::string& s : span_sentences(corpus, e, source)) {
    if (!first) out += sep;
    first = false;
    out += s;
  }
  return out;
}

}  // namespace

int64_t TokenizedCorpus::num_sentences() const {
  int64_t n = 0;
  for (const auto& d : documents) n += static_cast<int64_t>(d.sentences.size());
  return n;
}

int64_t TokenizedCorpus::num_tokens() const {
  int64_t n = 0;
  for (const auto& d : documents)
    for (const auto& s : d.sentences) n += static_cast<int64_t>(s.src.size() + s.tgt.size());
  return n;
}

int64_t Example::sentences() const {
  int64_t n = 0;
  for (const auto& s : spans) n += s.count;
  return n;
}

TokenizedCorpus tokenize(const Corpus& corpus, const Tokenizer& tokenizer) {
  TokenizedCorpus out;
  out.documents.resize(corpus.documents.size());
  for (size_t d = 0; d < corpus.documents.size(); ++d) {
    const auto& doc = corpus.documents[d];
    auto& td = out.documents[d];
    td.sentences.resize(doc.sentences.size());
    for (size_t i = 0; i < doc.sentences.size(); ++i) {
      tokenizer.encode_append(doc.sentences[i].src, td.sentences[i].src);
      tokenizer.encode_append(doc.sentences[i].tgt, td.sentences[i].tgt);
    }
  }
  return out;
}

std::vector<Example> make_examples(const TokenizedCorpus& corpus, const ExampleOptions& o, int32_t sep_id,
                                   ExampleStats* stats) {
  if (o.max_tokens < 2) throw InputError("data.max_example_tokens must be >= 2");
  if (o.context_sentences < 0 || o.stride < 0) throw InputError("data: context_sentences and stride must be >= 0");
  const int64_t window = std::max<int64_t>(1, o.context_sentences);
  ExampleStats st;
  std::vector<Example> out;
  for (size_t d = 0; d < corpus.documents.size(); ++d) {
    const auto& sents = corpus.documents[d].sentences;
    const int64_t n = static_cast<int64_t>(sents.size());
    auto fits = [&](const TokenizedSentence& s) {
      return static_cast<int64_t>(s.src.size()) + 1 <= o.max_tokens &&
             static_cast<int64_t>(s.tgt.size()) + 1 <= o.max_tokens;
    };
    for (int64_t i = 0; i < n; ++i) st.dropped_sentences += fits(sents[static_cast<size_t>(i)]) ? 0 : 1;
    if (o.source_context) {
      for (int64_t i = 0; i < n; ++i) {
        const auto& cur = sents[static_cast<size_t>(i)];
        if (!fits(cur)) continue;
        // Reach back while the source stays within the budget. A context
        // sentence only needs its source to fit: its target is not used.
        int64_t src_len = static_cast<int64_t>(cur.src.size()) + 1;
        int64_t first = i;
        while (first > 0 && i - first + 1 < window) {
          const int64_t ns = src_len + 1 + static_cast<int64_t>(sents[static_cast<size_t>(first - 1)].src.size());
          if (ns > o.max_tokens) break;
          src_len = ns;
          --first;
        }
        Example e;
        e.src.reserve(static_cast<size_t>(src_len));
        for (int64_t k = first; k <= i; ++k) append(e.src, sents[static_cast<size_t>(k)].src, sep_id);
        e.tgt = cur.tgt;
        e.spans.push_back(Span{static_cast<int32_t>(d), static_cast<int32_t>(first), static_cast<int32_t>(i - first + 1)});
        e.context = static_cast<int32_t>(i - first);
        out.push_back(std::move(e));
      }
      continue;
    }
    const int64_t smallest = o.multi_resolution ? 1 : window;
    for (int64_t size = smallest; size <= window; ++size) {
      int64_t start = 0;
      while (start < n) {
        if (!fits(sents[static_cast<size_t>(start)])) {
          ++start;
          continue;
        }
        // Grow the window while it stays within the budget.
        int64_t src_len = static_cast<int64_t>(sents[static_cast<size_t>(start)].src.size()) + 1;
        int64_t tgt_len = static_cast<int64_t>(sents[static_cast<size_t>(start)].tgt.size()) + 1;
        int64_t end = start + 1;
        while (end < n && end - start < size) {
          const auto& s = sents[static_cast<size_t>(end)];
          const int64_t ns = src_len + 1 + static_cast<int64_t>(s.src.size());
          const int64_t nt = tgt_len + 1 + static_cast<int64_t>(s.tgt.size());
          if (ns > o.max_tokens || nt > o.max_tokens) break;
          src_len = ns;
          tgt_len = nt;
          ++end;
        }
        Example e;
        e.src.reserve(static_cast<size_t>(src_len));
        e.tgt.reserve(static_cast<size_t>(tgt_len));
        add_span(e, corpus, static_cast<int32_t>(d), static_cast<int32_t>(start), static_cast<int32_t>(end - start),
                 sep_id);
        out.push_back(std::move(e));
        // A sliding window that reaches the end of the document ends it: the
        // later windows would be parts of this one.
        if (!o.multi_resolution && o.stride > 0 && end >= n) break;
        start = o.stride > 0 && !o.multi_resolution ? start + o.stride : end;
      }
    }
  }
  st.examples = static_cast<int64_t>(out.size());
  if (stats) *stats = st;
  return out;
}

std::vector<Example> apply_cat_n(const std::vector<Example>& base, const CatNOptions& o, int32_t sep_id,
                                 uint64_t seed, int64_t epoch, CatNStats* stats) {
  if (o.n < 1) throw InputError("data.cat_n must be >= 1");
  if (!(o.prob >= 0 && o.prob <= 1)) throw InputError("data.cat_prob must be in [0, 1]");
  CatNStats st;
  st.examples = static_cast<int64_t>(base.size());
  if (o.n == 1 || o.prob == 0 || base.empty()) {
    if (stats) *stats = st;
    return base;
  }
  detail::Rng rng(detail::mix_seed({seed, kCatNStream, static_cast<uint64_t>(epoch)}));
  std::vector<Example> out;
  out.reserve(base.size());
  for (const Example& b : base) {
    if (!rng.bernoulli(o.prob)) {
      out.push_back(b);
      continue;
    }
    ++st.concatenated;
    Example e = b;
    int64_t src_len = e.src_len(), tgt_len = e.tgt_len();
    bool cut = false;
    for (int64_t k = 1; k < o.n; ++k) {
      const Example& p = base[rng.below(base.size())];
      // Keep drawing (the draws stay the same whether or not a part fits, so
      // the stream of random numbers does not depend on the budget).
      if (cut) continue;
      const int64_t ns = src_len + 1 + static_cast<int64_t>(p.src.size());
      const int64_t nt = tgt_len + 1 + static_cast<int64_t>(p.tgt.size());
      if (ns > o.max_tokens || nt > o.max_tokens) {
        cut = true;
        continue;
      }
      src_len = ns;
      tgt_len = nt;
      e.src.push_back(sep_id);
      e.src.insert(e.src.end(), p.src.begin(), p.src.end());
      e.tgt.push_back(sep_id);
      e.tgt.insert(e.tgt.end(), p.tgt.begin(), p.tgt.end());
      e.spans.insert(e.spans.end(), p.spans.begin(), p.spans.end());
    }
    st.truncated += cut ? 1 : 0;
    out.push_back(std::move(e));
  }
  if (stats) *stats = st;
  return out;
}

std::vector<Example> validation_passages(const TokenizedCorpus& corpus, int64_t max_sentences, int32_t sep_id,
                                         uint64_t seed) {
  if (max_sentences < 1) throw InputError("data.valid_passages must be >= 1");
  detail::Rng rng(detail::mix_seed({seed, kValidStream}));
  std::vector<Example> out;
  for (size_t d = 0; d < corpus.documents.size(); ++d) {
    const int64_t n = static_cast<int64_t>(corpus.documents[d].sentences.size());
    int64_t i = 0;
    while (i < n) {
      const int64_t len = std::min<int64_t>(rng.between(1, max_sentences), n - i);
      Example e;
      add_span(e, corpus, static_cast<int32_t>(d), static_cast<int32_t>(i), static_cast<int32_t>(len), sep_id);
      out.push_back(std::move(e));
      i += len;
    }
  }
  return out;
}

std::vector<Example> extrapolation_passages(const TokenizedCorpus& corpus, int64_t min_src_len, int32_t sep_id,
                                            int64_t max_passages) {
  std::vector<Example> out;
  Example cur;
  for (size_t d = 0; d < corpus.documents.size(); ++d) {
    const auto& sents = corpus.documents[d].sentences;
    for (size_t i = 0; i < sents.size(); ++i) {
      add_span(cur, corpus, static_cast<int32_t>(d), static_cast<int32_t>(i), 1, sep_id);
      if (cur.src_len() >= min_src_len) {
        out.push_back(std::move(cur));
        cur = Example{};
        if (max_passages > 0 && static_cast<int64_t>(out.size()) >= max_passages) return out;
      }
    }
  }
  return out;
}

int64_t longest_source(const std::vector<Example>& examples) {
  int64_t m = 0;
  for (const auto& e : examples) m = std::max(m, e.src_len());
  return m;
}

std::string source_text(const Corpus& corpus, const Example& e, const std::string& sep) {
  return span_text(corpus, e, sep, true);
}

std::string target_text(const Corpus& corpus, const Example& e, const std::string& sep) {
  return span_text(corpus, e, sep, false);
}

std::vector<std::string> source_sentences(const Corpus& corpus, const Example& e) {
  return span_sentences(corpus, e, true);
}

std::vector<std::string> target_sentences(const Corpus& corpus, const Example& e) {
  return span_sentences(corpus, e, false);
}

}  // namespace mambamt::data
