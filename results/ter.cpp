#include "results/ter.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <unordered_map>

#include "core/error.h"
#include "results/detail/rewrite.h"
#include "results/unicode.h"

namespace mambamt::results {
namespace {

// ---- Tercom tokenizer -------------------------------------------------------

using detail::is_13a_punct;
using detail::is_digit;
using detail::is_period_or_comma;
using detail::join_words;
using detail::pad_chars;
using detail::remove_chars;
using detail::replace_all;
using detail::Spaces;
using detail::sub_pair;

bool not_digit(char32_t c) { return !is_digit(c); }

bool is_asian_punct(char32_t c) {
  return c == 0x3001 || c == 0x3002 || (c >= 0x3008 && c <= 0x3011) ||
         (c >= 0x3014 && c <= 0x301F) || (c >= 0xFF61 && c <= 0xFF65) || c == 0x30FB;
}
bool is_full_width_punct(char32_t c) {
  switch (c) {
    case 0xFF0E: case 0xFF0C: case 0xFF1F: case 0xFF1A: case 0xFF1B: case 0xFF01: case 0xFF02:
    case 0xFF08: case 0xFF09:
      return true;
    default:
      return false;
  }
}

std::u32string normalize_general_and_western(std::u32string s) {
  replace_all(s, U"\n-", U"");
  replace_all(s, U"\n", U" ");
  replace_all(s, U"&quot;", U"\"");
  replace_all(s, U"&amp;", U"&");
  replace_all(s, U"&lt;", U"<");
  replace_all(s, U"&gt;", U">");
  s = U" " + s + U" ";
  s = pad_chars(s, is_13a_punct);
  replace_all(s, U"'s ", U" 's ");
  // "'s$" cannot match: the string ends with the padding space.
  s = sub_pair(s, not_digit, is_period_or_comma, Spaces::kAfter);
  s = sub_pair(s, is_period_or_comma, not_digit, Spaces::kBefore);
  s = sub_pair(s, is_digit, [](char32_t c) { return c == U'-'; }, Spaces::kAfter);
  return s;
}

std::u32string normalize_asian(std::u32string_view s) {
  std::u32string out = pad_chars(s, [](char32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||  // CJK ideographs
           (c >= 0x31C0 && c <= 0x31EF) || (c >= 0x2E80 && c <= 0x2EFF) ||  // strokes, radicals
           (c >= 0x3300 && c <= 0x33FF) || (c >= 0xF900 && c <= 0xFAFF) ||  // compatibility
           (c >= 0xFE30 && c <= 0xFE4F) || (c >= 0x3200 && c <= 0x3F22);    // (sacreBLEU's range)
  });
  // Tercom's kana rules anchor at the start of the whole string, which always
  // holds the padding space here, so they never apply.
  out = pad_chars(out, is_asian_punct);
  return pad_chars(out, is_full_width_punct);
}

std::u32string tercom_tokenize(std::u32string s, const TerOptions& options) {
  if (s.empty()) return s;
  if (!options.case_sensitive) s = to_lower(s);
  if (options.normalized) {
    s = normalize_general_and_western(std::move(s));
    if (options.asian_support) s = normalize_asian(s);
  }
  if (options.no_punct) {
    s = remove_chars(s, [](char32_t c) {
      return c == U'.' || c == U',' || c == U'?' || c == U':' || c == U';' || c == U'!' ||
             c == U'"' || c == U'(' || c == U')';
    });
    if (options.asian_support) {
      s = remove_chars(s, [](char32_t c) { return is_asian_punct(c) || is_full_width_punct(c); });
    }
  }
  return join_words(s);
}

// ---- Edit distance with shifts ---------------------------------------------

constexpr int kMaxShiftSize = 10;
constexpr int kMaxShiftDist = 50;
constexpr int kBeamWidth = 25;
constexpr int kMaxShiftCandidates = 1000;
constexpr std::int64_t kInfinity = 10000000000000000LL;  // sacreBLEU's int(1e16)

enum Op : char { kOpIns = 'i', kOpDel = 'd', kOpNop = ' ', kOpSub = 's', kOpUndef = 'x' };

struct Cell {
  std::int64_t cost;
  char op;
};

// The beam-limited Levenshtein distance of sacreBLEU's BeamEditDistance between
// hypothesis word ids (rows) and reference word ids (columns). Only cells near the
// length-scaled diagonal are computed; the others stay at infinity.
class BeamEditDistance {
 public:
  BeamEditDistance(const std::vector<int>& ref, std::size_t hyp_len) : ref_(ref), n_ref_(ref.size()) {
    // Every hypothesis scored here is a permutation of the first, so the ratio is fixed.
    length_ratio_ = hyp_len ? static_cast<double>(n_ref_) / static_cast<double>(hyp_len) : 1.0;
    beam_width_ = kBeamWidth < length_ratio_ / 2
                      ? static_cast<int>(std::ceil(length_ratio_ / 2 + kBeamWidth))
                      : kBeamWidth;
  }

  // Full matrix (rows 0..hyp.size()), needed for the trace.
  std::vector<std::vector<Cell>> matrix(const std::vector<int>& hyp) const {
    std::vector<std::vector<Cell>> dist(hyp.size() + 1);
    dist[0] = initial_row();
    for (std::size_t i = 1; i <= hyp.size(); ++i) {
      dist[i].assign(n_ref_ + 1, Cell{kInfinity, kOpUndef});
      fill_row(hyp, i, dist[i - 1], dist[i]);
    }
    return dist;
  }

  // Distance of `hyp`, whose first `same_rows` rows equal those of `base`.
  std::int64_t distance_from(const std::vector<int>& hyp, const std::vector<std::vector<Cell>>& base,
                             std::size_t same_rows) const {
    if (same_rows >= hyp.size()) return base[hyp.size()][n_ref_].cost;
    std::vector<Cell> prev = base[same_rows];
    std::vector<Cell> row(n_ref_ + 1);
    for (std::size_t i = same_rows + 1; i <= hyp.size(); ++i) {
      std::fill(row.begin(), row.end(), Cell{kInfinity, kOpUndef});
      fill_row(hyp, i, prev, row);
      std::swap(prev, row);
    }
    return prev[n_ref_].cost;
  }

  // Edit operations turning the hypothesis into the reference, first to last.
  std::string trace(const std::vector<std::vector<Cell>>& dist) const {
    std::string ops;
    std::size_t i = dist.size() - 1, j = n_ref_;
    while (i > 0 || j > 0) {
      char op = dist[i][j].op;
      ops.push_back(op);
      if (op == kOpSub || op == kOpNop) {
        --i, --j;
      } else if (op == kOpIns) {
        --j;
      } else if (op == kOpDel) {
        --i;
      } else {
        throw Error("TER: edit distance trace reached an uncomputed cell");
      }
    }
    std::reverse(ops.begin(), ops.end());
    return ops;
  }

 private:
  std::vector<Cell> initial_row() const {
    std::vector<Cell> row(n_ref_ + 1);
    for (std::size_t j = 0; j <= n_ref_; ++j) row[j] = {static_cast<std::int64_t>(j), kOpIns};
    return row;
  }

  void fill_row(const std::vector<int>& hyp, std::size_t i, const std::vector<Cell>& prev,
                std::vector<Cell>& row) const {
    const long pseudo_diag = static_cast<long>(std::floor(static_cast<double>(i) * length_ratio_));
    long min_j = std::max(0L, pseudo_diag - beam_width_);
    long max_j = std::min(static_cast<long>(n_ref_) + 1, pseudo_diag + beam_width_);
    if (i == hyp.size()) max_j = static_cast<long>(n_ref_) + 1;
    for (long j = min_j; j < max_j; ++j) {
      if (j == 0) {
        row[0] = {prev[0].cost + 1, kOpDel};
        continue;
      }
      const bool same = hyp[i - 1] == ref_[j - 1];
      // Tercom prefers no-op/substitution, then (because the trace is flipped
      // later) deletion, then insertion; a later option must be strictly cheaper.
      const Cell options[3] = {{prev[j - 1].cost + (same ? 0 : 1), same ? kOpNop : kOpSub},
                               {prev[j].cost + 1, kOpDel},
                               {row[j - 1].cost + 1, kOpIns}};
      for (const Cell& c : options) {
        if (row[j].cost > c.cost) row[j] = c;
      }
    }
  }

  const std::vector<int>& ref_;
  std::size_t n_ref_;
  double length_ratio_ = 1;
  long beam_width_ = kBeamWidth;
};

// words[start, start+length) moved to before position `target` (sacreBLEU's
// _perform_shift, including its slice clamping).
std::vector<int> perform_shift(const std::vector<int>& words, int start, int length, int target) {
  const int n = static_cast<int>(words.size());
  auto slice = [&](std::vector<int>& out, int from, int to) {
    from = std::clamp(from, 0, n);
    to = std::clamp(to, 0, n);
    for (int k = from; k < to; ++k) out.push_back(words[k]);
  };
  std::vector<int> out;
  out.reserve(words.size());
  if (target < start) {
    slice(out, 0, target);
    slice(out, start, start + length);
    slice(out, target, start);
    slice(out, start + length, n);
  } else if (target > start + length) {
    slice(out, 0, start);
    slice(out, start + length, target);
    slice(out, start, start + length);
    slice(out, target, n);
  } else {
    slice(out, 0, start);
    slice(out, start + length, length + target);
    slice(out, start, start + length);
    slice(out, length + target, n);
  }
  return out;
}

struct ShiftResult {
  std::int64_t delta = 0;
  std::vector<int> words;
};

// One round of sacreBLEU's _shift: the best shift by (edit distance gain,
// length, earliest start, earliest target).
ShiftResult best_shift(const std::vector<int>& hyp, const std::vector<int>& ref,
                       const BeamEditDistance& ed, int& checked_candidates) {
  const auto base = ed.matrix(hyp);
  const std::int64_t pre_score = base.back().back().cost;
  // Alignment from the flipped trace (rewriting the reference into the hypothesis).
  std::vector<int> align(ref.size(), -1);
  std::vector<int> hyp_err, ref_err;
  int pos_hyp = -1, pos_ref = -1;
  for (char op : ed.trace(base)) {
    if (op == kOpNop || op == kOpSub) {
      ++pos_hyp, ++pos_ref;
      align[pos_ref] = pos_hyp;
      hyp_err.push_back(op == kOpSub);
      ref_err.push_back(op == kOpSub);
    } else if (op == kOpDel) {  // flipped: an insertion of a hypothesis word
      ++pos_hyp;
      hyp_err.push_back(1);
    } else {                    // flipped: a deletion of a reference word
      ++pos_ref;
      align[pos_ref] = pos_hyp;
      ref_err.push_back(1);
    }
  }

  bool have_best = false;
  std::int64_t best_delta = 0;
  int best_length = 0, best_start = 0, best_idx = 0;
  std::vector<int> best_words;
  const int n_h = static_cast<int>(hyp.size()), n_r = static_cast<int>(ref.size());
  for (int start_h = 0; start_h < n_h; ++start_h) {
    for (int start_r = 0; start_r < n_r; ++start_r) {
      if (std::abs(start_r - start_h) > kMaxShiftDist) continue;
      int length = 0;
      while (length < kMaxShiftSize && hyp[start_h + length] == ref[start_r + length]) {
        ++length;
        // The shift must move wrong hypothesis words onto wrong reference words,
        // and not into itself.
        bool useful = false;
        for (int k = start_h; k < start_h + length; ++k) useful |= hyp_err[k] != 0;
        bool target_wrong = false;
        for (int k = start_r; k < start_r + length; ++k) target_wrong |= ref_err[k] != 0;
        const bool inside = start_h <= align[start_r] && align[start_r] < start_h + length;
        if (useful && target_wrong && !inside) {
          int prev_idx = -1;
          for (int offset = -1; offset < length; ++offset) {
            int idx;
            if (start_r + offset == -1) {
              idx = 0;
            } else if (start_r + offset < n_r) {
              idx = align[start_r + offset] + 1;  // insert before, unlike Tercom's after
            } else {
              break;
            }
            if (idx == prev_idx) continue;
            prev_idx = idx;
            std::vector<int> shifted = perform_shift(hyp, start_h, length, idx);
            const std::size_t same_rows = static_cast<std::size_t>(std::min(start_h, idx));
            const std::int64_t delta = pre_score - ed.distance_from(shifted, base, same_rows);
            ++checked_candidates;
            // Python's tuple order: (delta, length, -start_h, -idx) strictly greater.
            bool better = !have_best;
            if (!better) {
              if (delta != best_delta) better = delta > best_delta;
              else if (length != best_length) better = length > best_length;
              else if (start_h != best_start) better = start_h < best_start;
              else better = idx < best_idx;
            }
            if (better) {
              have_best = true;
              best_delta = delta, best_length = length, best_start = start_h, best_idx = idx;
              best_words = std::move(shifted);
            }
          }
          if (checked_candidates >= kMaxShiftCandidates) goto done;
        }
        if (n_h == start_h + length || n_r == start_r + length) break;
      }
    }
  }
done:
  if (!have_best) return {0, hyp};
  return {best_delta, std::move(best_words)};
}

std::vector<std::string> ter_words(std::string_view sentence, const TerOptions& options) {
  std::u32string s = decode_utf8(sentence);
  s = std::u32string(rstrip(s));
  std::vector<std::string> out;
  for (const auto& w : split_whitespace(tercom_tokenize(std::move(s), options))) {
    out.push_back(encode_utf8(w));
  }
  return out;
}

}  // namespace

std::string ter_tokenize(std::string_view sentence, const TerOptions& options) {
  return encode_utf8(tercom_tokenize(decode_utf8(sentence), options));
}

std::int64_t translation_edit_rate(const std::vector<std::string>& hypothesis_words,
                                   const std::vector<std::string>& reference_words) {
  if (reference_words.empty()) return static_cast<std::int64_t>(hypothesis_words.size());
  std::unordered_map<std::string, int> ids;
  auto to_ids = [&](const std::vector<std::string>& words) {
    std::vector<int> out;
    out.reserve(words.size());
    for (const auto& w : words) out.push_back(ids.emplace(w, static_cast<int>(ids.size())).first->second);
    return out;
  };
  const std::vector<int> ref = to_ids(reference_words);
  std::vector<int> hyp = to_ids(hypothesis_words);
  BeamEditDistance ed(ref, hyp.size());
  std::int64_t shifts = 0;
  int checked = 0;
  while (true) {
    ShiftResult r = best_shift(hyp, ref, ed, checked);
    if (checked >= kMaxShiftCandidates) break;  // the last round's shift is dropped, as in sacreBLEU
    if (r.delta <= 0) break;
    ++shifts;
    hyp = std::move(r.words);
  }
  return shifts + ed.matrix(hyp).back().back().cost;
}

TerStats& TerStats::operator+=(const TerStats& other) {
  num_edits += other.num_edits;
  ref_length += other.ref_length;
  return *this;
}

std::string TerScore::format(int width) const {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", width, score);
  return std::string("TER = ") + buf;
}

TerScore ter_from_stats(const TerStats& stats) {
  TerScore out;
  out.num_edits = stats.num_edits;
  out.ref_length = stats.ref_length;
  double rate;
  if (stats.ref_length > 0) rate = stats.num_edits / stats.ref_length;
  else if (stats.num_edits > 0) rate = 1.0;  // empty references, non-empty hypothesis
  else rate = 0.0;                           // both empty
  out.score = 100 * rate;
  return out;
}

TerStats ter_segment_stats(std::string_view hypothesis, const std::vector<std::string>& references,
                           const TerOptions& options) {
  if (references.empty()) throw InputError("TER: a segment needs at least one reference");
  const auto hyp = ter_words(hypothesis, options);
  std::int64_t best = kInfinity;
  double ref_lengths = 0;
  for (const auto& ref : references) {
    const auto ref_words = ter_words(ref, options);
    best = std::min(best, translation_edit_rate(hyp, ref_words));
    ref_lengths += static_cast<double>(ref_words.size());
  }
  return {static_cast<double>(best), ref_lengths / static_cast<double>(references.size())};
}

std::vector<TerStats> ter_corpus_segment_stats(const std::vector<std::string>& hypotheses,
                                               const ReferenceStreams& references,
                                               const TerOptions& options) {
  check_reference_streams("TER", hypotheses.size(), references);
  std::vector<TerStats> out;
  out.reserve(hypotheses.size());
  for (std::size_t i = 0; i < hypotheses.size(); ++i) {
    out.push_back(ter_segment_stats(hypotheses[i], segment_references(references, i), options));
  }
  return out;
}

TerScore corpus_ter(const std::vector<std::string>& hypotheses, const ReferenceStreams& references,
                    const TerOptions& options) {
  TerStats total;
  for (const auto& s : ter_corpus_segment_stats(hypotheses, references, options)) total += s;
  return ter_from_stats(total);
}

TerScore sentence_ter(std::string_view hypothesis, const std::vector<std::string>& references,
                      const TerOptions& options) {
  return ter_from_stats(ter_segment_stats(hypothesis, references, options));
}

std::string ter_signature(const TerOptions& options, int num_references) {
  return "nrefs:" + std::to_string(num_references) + "|case:" + (options.case_sensitive ? "mixed" : "lc") +
         "|tok:tercom|norm:" + (options.normalized ? "yes" : "no") + "|punct:" + (options.no_punct ? "no" : "yes") +
         "|asian:" + (options.asian_support ? "yes" : "no");
}

}  // namespace mambamt::results
