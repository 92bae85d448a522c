#include "results/segments.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace mambamt::results {
namespace {

constexpr int kBleuOrder = 4;

std::vector<std::string> column_names(int char_order, int word_order) {
  std::vector<std::string> c = {"bleu_sys_len", "bleu_ref_len"};
  for (int n = 1; n <= kBleuOrder; ++n) c.push_back("bleu_match_" + std::to_string(n));
  for (int n = 1; n <= kBleuOrder; ++n) c.push_back("bleu_total_" + std::to_string(n));
  for (int w = 0; w < 2; ++w)
    for (int k = 1; k <= (w ? word_order : char_order); ++k)
      for (const char* f : {"hyp", "ref", "match"})
        c.push_back(std::string("chrf_") + (w ? "w" : "c") + std::to_string(k) + "_" + f);
  return c;
}

// The highest order k with a column chrf_<prefix><k>_hyp.
int orders_in(const std::vector<std::string>& columns, const std::string& prefix) {
  int k = 0;
  while (std::find(columns.begin(), columns.end(), "chrf_" + prefix + std::to_string(k + 1) + "_hyp") != columns.end())
    ++k;
  return k;
}

}  // namespace

ChrfOptions SegmentStats::chrf_options() const {
  ChrfOptions o;
  o.char_order = chrf_char_order;
  o.word_order = chrf_word_order;
  return o;
}

bool SegmentStats::same_references(const SegmentStats& other) const {
  if (bleu.size() != other.bleu.size() || chrf.size() != other.chrf.size() || bleu.size() != chrf.size() ||
      chrf_char_order != other.chrf_char_order || chrf_word_order != other.chrf_word_order)
    return false;
  for (size_t i = 0; i < bleu.size(); ++i) {
    if (bleu[i].ref_len != other.bleu[i].ref_len) return false;
    const auto &a = chrf[i].orders, &b = other.chrf[i].orders;
    if (a.size() != b.size()) return false;
    for (size_t k = 0; k < a.size(); ++k)
      if (a[k].ref != b[k].ref) return false;
  }
  return true;
}

core::ResultTable segment_table(const std::vector<BleuStats>& bleu, const std::vector<ChrfStats>& chrf,
                                const ChrfOptions& chrf_options) {
  if (bleu.size() != chrf.size())
    throw InputError("segment statistics: " + std::to_string(bleu.size()) + " BLEU segments but " +
                     std::to_string(chrf.size()) + " chrF segments");
  const size_t orders = static_cast<size_t>(chrf_options.char_order + chrf_options.word_order);
  core::ResultTable t;
  t.columns = column_names(chrf_options.char_order, chrf_options.word_order);
  t.values.reserve(bleu.size() * t.columns.size());
  for (size_t i = 0; i < bleu.size(); ++i) {
    const BleuStats& b = bleu[i];
    if (b.counts.size() != kBleuOrder || b.totals.size() != kBleuOrder || chrf[i].orders.size() != orders)
      throw InputError("segment statistics: segment " + std::to_string(i) + " has other n-gram orders than " +
                       std::to_string(kBleuOrder) + " (BLEU) and " + std::to_string(orders) + " (chrF)");
    t.rows.push_back(std::to_string(i));
    t.values.push_back(static_cast<double>(b.sys_len));
    t.values.push_back(static_cast<double>(b.ref_len));
    for (int64_t v : b.counts) t.values.push_back(static_cast<double>(v));
    for (int64_t v : b.totals) t.values.push_back(static_cast<double>(v));
    for (const ChrfOrderStats& o : chrf[i].orders)
      for (int64_t v : {o.hyp, o.ref, o.match}) t.values.push_back(static_cast<double>(v));
  }
  return t;
}

SegmentStats segment_stats(const core::ResultTable& table) {
  SegmentStats s;
  s.chrf_char_order = orders_in(table.columns, "c");
  s.chrf_word_order = orders_in(table.columns, "w");
  const std::vector<std::string> want = column_names(s.chrf_char_order, s.chrf_word_order);
  if (table.columns != want || s.chrf_char_order == 0)
    throw InputError("segment statistics: the table's columns are not those of BLEU at orders 1-" +
                     std::to_string(kBleuOrder) + " and chrF (bleu_sys_len, ..., chrf_c1_hyp, ...)");
  if (table.values.size() != table.rows.size() * table.columns.size())
    throw InputError("segment statistics: " + std::to_string(table.values.size()) + " values for " +
                     std::to_string(table.rows.size()) + " rows of " + std::to_string(table.columns.size()));
  const size_t orders = static_cast<size_t>(s.chrf_char_order + s.chrf_word_order);
  for (size_t r = 0; r < table.rows.size(); ++r) {
    size_t c = 0;
    auto next = [&] { return static_cast<int64_t>(table.at(r, c++)); };
    BleuStats b;
    b.sys_len = next();
    b.ref_len = next();
    for (int n = 0; n < kBleuOrder; ++n) b.counts.push_back(next());
    for (int n = 0; n < kBleuOrder; ++n) b.totals.push_back(next());
    ChrfStats ch;
    for (size_t k = 0; k < orders; ++k) {
      ChrfOrderStats o;
      o.hyp = next();
      o.ref = next();
      o.match = next();
      ch.orders.push_back(o);
    }
    s.bleu.push_back(std::move(b));
    s.chrf.push_back(std::move(ch));
  }
  return s;
}

PairedSignificance paired_significance(const SegmentStats& baseline, const SegmentStats& system,
                                       const BootstrapOptions& options) {
  PairedSignificance out;
  const BleuOptions bo;
  const ChrfOptions co = baseline.chrf_options();
  const PairedBootstrapResult b = paired_bootstrap_bleu(baseline.bleu, system.bleu, bo, options);
  const PairedBootstrapResult c = paired_bootstrap_chrf(baseline.chrf, system.chrf, co, options);
  out.bleu_p = b.p_value;
  out.chrf_p = c.p_value;
  out.bleu_delta = b.system.score - b.baseline.score;
  out.chrf_delta = c.system.score - c.baseline.score;
  if (!baseline.comet.empty() && baseline.comet.size() == system.comet.size()) {
    auto mean_of = [](const std::vector<double>& scores) {
      return [&scores](const std::vector<std::size_t>& segments) {
        double sum = 0;
        for (std::size_t i : segments) sum += scores[i];
        return segments.empty() ? 0.0 : sum / static_cast<double>(segments.size());
      };
    };
    const PairedBootstrapResult m =
        paired_bootstrap(baseline.comet.size(), mean_of(baseline.comet), mean_of(system.comet), options);
    out.comet_p = m.p_value;
    out.comet_delta = m.system.score - m.baseline.score;
  }
  return out;
}

core::ResultTable comet_segment_table(const std::vector<double>& scores) {
  core::ResultTable t;
  t.columns = {"comet"};
  for (size_t i = 0; i < scores.size(); ++i) t.rows.push_back(std::to_string(i));
  t.values = scores;
  return t;
}

std::vector<double> comet_scores(const core::ResultTable& table) {
  if (table.columns != std::vector<std::string>{"comet"})
    throw InputError("not a table of segment COMET scores (columns other than `comet`)");
  if (table.values.size() != table.rows.size())
    throw InputError("a table of segment COMET scores with " + std::to_string(table.rows.size()) + " rows and " +
                     std::to_string(table.values.size()) + " values");
  return table.values;
}

namespace {

// The table `name` of `store` as segment statistics; null when it has none.
std::optional<SegmentStats> segment_table_of(const core::StoreSnapshot& store, const std::string& name) {
  auto it = store.tables.find(name);
  if (it == store.tables.end()) return std::nullopt;
  try {
    return segment_stats(it->second);
  } catch (const InputError& e) {
    throw InputError("/results/" + name + ": " + e.what());
  }
}

}  // namespace

StoreSegments store_segments(const core::StoreSnapshot& store, const std::string& set) {
  StoreSegments out;
  out.own = segment_table_of(store, set + "/segments");
  out.by_sentence = segment_table_of(store, set + "/sentence_segments");
  // Segment COMET scores beside the statistics of the same segments.
  auto add_comet = [&store](std::optional<SegmentStats>& stats, const std::string& name) {
    auto it = store.tables.find(name);
    if (!stats || it == store.tables.end()) return;
    try {
      stats->comet = comet_scores(it->second);
    } catch (const InputError& e) {
      throw InputError("/results/" + name + ": " + e.what());
    }
    if (stats->comet.size() != stats->bleu.size()) stats->comet.clear();
  };
  add_comet(out.own, set + "/comet_segments");
  add_comet(out.by_sentence, set + "/sentence_comet_segments");
  if (!out.by_sentence) out.by_sentence = out.own;
  return out;
}

std::optional<PairedSegments> paired_segments(const StoreSegments& baseline, const StoreSegments& system) {
  const auto& b = baseline.own;
  const auto& s = system.own;
  if (b && s && b->same_references(*s)) return PairedSegments{*b, *s, false};
  const auto& bs = baseline.by_sentence;
  const auto& ss = system.by_sentence;
  if (bs && ss && bs->same_references(*ss)) return PairedSegments{*bs, *ss, true};
  return std::nullopt;
}

}  // namespace mambamt::results
