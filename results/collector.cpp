// The collector's tables: one ablation table per grid axis, the baseline
// comparison with speed and memory relative to the Transformer and the
// significance of the quality differences to it, and the
// breakdowns (quality by source length, length extrapolation, contrastive
// accuracy by pronoun and by antecedent distance, entity recall by frequency).
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>

#include "core/error.h"
#include "results/alignment.h"
#include "results/collector.h"
#include "results/detail/collector_model.h"
#include "results/contrastive.h"
#include "results/entities.h"
#include "results/segments.h"

namespace mambamt::results {
namespace {

using detail::PointGroup;
using detail::SweepView;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// A per-experiment number: where it is in the store and how it is shown.
struct MetricDef {
  std::string key;
  std::string title;
  std::string path;   // results/<path>
  double scale = 1;   // applied when aggregating (fractions -> percent)
  int decimals = 2;
  Better better = Better::kHigher;
  double display_scale = 1;
  std::string suffix;
  // Where set, the number computed from the store instead of read at `path`.
  std::function<double(const core::StoreSnapshot&)> value = nullptr;
};

// The evaluation version from which a model that translated passages has
// <set>/sentence_segments (core/store.h): in stores since, a model without
// them translated single sentences.
constexpr std::int64_t kSentenceSegmentsSince = 5;

// chrF over test set `set`'s sentences, from the store's segment statistics
// (chrF sums them over the segments, as BLEU does): those of the sentences of
// a model that translated passages, else its own segments where those are
// sentences. NaN for stores evaluated before passages were scored by
// sentence, and where a table is not one of segment statistics.
double sentence_chrf(const core::StoreSnapshot& store, const std::string& set) {
  if (!store.tables.count(set + "/sentence_segments") && core::evaluation_version(store) < kSentenceSegmentsSince)
    return kNaN;
  try {
    const StoreSegments segments = store_segments(store, set);
    if (!segments.by_sentence || segments.by_sentence->chrf.empty()) return kNaN;
    const ChrfOptions options = segments.by_sentence->chrf_options();
    return chrf_from_stats(sum_chrf_stats(segments.by_sentence->chrf, options), options).score;
  } catch (const InputError&) {
    return kNaN;
  }
}

// A metric's values over a group's completed stores.
std::vector<double> metric_values(const PointGroup& g, const MetricDef& m) {
  if (!m.value) return detail::scalar_values(g, m.path, m.scale);
  std::vector<double> out;
  for (const core::StoreSnapshot* s : g.completed()) out.push_back(m.value(*s) * m.scale);
  return out;
}

std::vector<MetricDef> metric_defs(const SweepData& sweep, const std::string& set, bool with_params_first) {
  // COMET and entity consistency (stores since 2026-11-27) are columns only
  // when some store has a value for them.
  auto any_store = [&sweep](const std::function<bool(const core::StoreSnapshot&)>& has) {
    return std::any_of(sweep.points.begin(), sweep.points.end(), [&](const SweepPoint& p) {
      return p.store && !detail::outside_grid(sweep, p) && has(*p.store);
    });
  };
  auto any_value = [&any_store](const std::string& key) {
    return any_store([&key](const core::StoreSnapshot& s) {
      auto it = s.scalars.find(key);
      return it != s.scalars.end() && std::isfinite(it->second) && core::result_current(s, key);
    });
  };
  const bool comet = any_value(set + "/comet");
  const MetricDef params{"params", "Params", "efficiency/params", 1, 2, Better::kNone, 1e-6, "M"};
  std::vector<MetricDef> defs;
  if (with_params_first) defs.push_back(params);
  defs.push_back({"bleu", "BLEU", set + "/bleu", 1, 2, Better::kHigher, 1, ""});
  // Where some model translated passages, BLEU and chrF over the sentences as
  // well: the BLEU and chrF columns' segments are passages for it and
  // sentences for others.
  const bool passages =
      any_store([&set](const core::StoreSnapshot& s) { return s.tables.count(set + "/sentence_segments") > 0; });
  if (passages && any_value(set + "/sentence_bleu"))
    defs.push_back({"sentence_bleu", "BLEU by sentence", set + "/sentence_bleu", 1, 2, Better::kHigher, 1, ""});
  defs.push_back({"chrf", "chrF", set + "/chrf", 1, 2, Better::kHigher, 1, ""});
  if (passages) {
    MetricDef by_sentence{"sentence_chrf", "chrF by sentence", "", 1, 2, Better::kHigher, 1, ""};
    by_sentence.value = [set](const core::StoreSnapshot& s) { return sentence_chrf(s, set); };
    defs.push_back(by_sentence);
  }
  // TER (stores since evaluation version 7).
  if (any_value(set + "/ter")) defs.push_back({"ter", "TER", set + "/ter", 1, 2, Better::kLower, 1, ""});
  if (comet) defs.push_back({"comet", "COMET", set + "/comet", 1, 4, Better::kHigher, 1, ""});
  if (comet && passages && any_value(set + "/sentence_comet"))
    defs.push_back({"sentence_comet", "COMET by sentence", set + "/sentence_comet", 1, 4, Better::kHigher, 1, ""});
  defs.push_back({"contrastive_accuracy", "Contrastive acc. (%)", "contrastive/accuracy", 100, 1, Better::kHigher, 1, ""});
  defs.push_back({"entity_recall", "Entity recall (%)", "entities/recall", 100, 1, Better::kHigher, 1, ""});
  if (any_value("entities/consistency"))
    defs.push_back({"entity_consistency", "Entity consistency (%)", "entities/consistency", 100, 1, Better::kHigher,
                    1, ""});
  // Alignment error rate of the attention over the source (stores since
  // 2026-11-27 with gold alignments; blank for kinds without such attention):
  // the layer chosen on the other half of the sentences.
  if (any_value("alignment/aer"))
    defs.push_back({"alignment_aer", "AER (%)", "alignment/aer", 100, 1, Better::kLower, 1, ""});
  // The same read from occlusion, for every kind (pure Mamba included).
  if (any_value("alignment/occlusion_aer"))
    defs.push_back({"occlusion_aer", "Occlusion AER (%)", "alignment/occlusion_aer", 100, 1, Better::kLower, 1, ""});
  // Gated cross-attention skipping (eval.gate_skip): the share of its work skipped.
  const bool skipping = std::any_of(sweep.points.begin(), sweep.points.end(), [&sweep](const SweepPoint& p) {
    if (!p.store || detail::outside_grid(sweep, p)) return false;
    auto it = p.store->scalars.find("gates/skipped");
    return it != p.store->scalars.end() && it->second > 0;
  });
  if (skipping)
    defs.push_back({"cross_attention_skipped", "Cross-attn skipped (%)", "gates/skipped", 100, 1, Better::kNone, 1, ""});
  // Speed and memory name the device they were measured on.
  const std::string device = detail::efficiency_device(sweep);
  const std::string on = device.empty() ? "" : " (" + device + ")";
  defs.push_back({"decode_tokens_per_s", "Decode tok/s" + on, "efficiency/decode_tokens_per_s", 1, 0, Better::kHigher,
                  1, ""});
  defs.push_back({"train_tokens_per_s", "Train tok/s" + on, "efficiency/train_tokens_per_s", 1, 0, Better::kHigher, 1,
                  ""});
  defs.push_back({"peak_memory_mb", device.empty() ? "Peak memory (MiB)" : "Peak memory (MiB, " + device + ")",
                  "efficiency/peak_memory_mb", 1, 0, Better::kLower, 1, ""});
  if (!with_params_first) defs.push_back(params);
  return defs;
}

ReportColumn make_column(const std::string& key, const std::string& title, int decimals, Better better,
                         bool relative = false) {
  ReportColumn c;
  c.key = key;
  c.title = title;
  c.decimals = decimals;
  c.better = better;
  c.relative = relative;
  return c;
}

// A column of p-values of the paired test of metric column `tests`.
ReportColumn p_column(const std::string& key, const std::string& title, const std::string& tests) {
  ReportColumn c = make_column(key, title, 3, Better::kNone);
  c.tests = tests;
  return c;
}

ReportColumn column_of(const MetricDef& m) {
  ReportColumn c;
  c.key = m.key;
  c.title = m.title;
  c.decimals = m.decimals;
  c.better = m.better;
  c.display_scale = m.display_scale;
  c.suffix = m.suffix;
  return c;
}

std::int64_t expected_seeds(const SweepData& sweep) {
  // With sweep.h5 every expected point is listed; without it only sweep.toml knows the seeds.
  return sweep.has_sweep_file ? 0 : sweep.seeds_per_point;
}

ReportRow metric_row(const SweepData& sweep, const PointGroup* g, const std::string& key, const std::string& label,
                     const std::vector<MetricDef>& defs) {
  ReportRow row;
  row.key = key;
  row.label = label;
  row.status = g ? g->status(expected_seeds(sweep)) : "not in the grid";
  row.base = g && g->base;
  for (auto& m : defs) row.cells.push_back(g ? summarize(metric_values(*g, m)) : ReportCell{});
  return row;
}

// Where the captions' BLEU and chrF tests pair two experiments.
const std::string kSameSegments =
    " of the same seed on the same segments (by sentence where one translated passages and the other single "
    "sentences)";

// The store of a completed point (null otherwise).
const core::StoreSnapshot* completed_store(const SweepPoint& p) {
  return p.store && p.state == "completed" ? &*p.store : nullptr;
}

// The test set's segment statistics of a completed point (null without a
// store, or with tables that are not ours: no test for that point).
std::optional<StoreSegments> segments_of(const SweepPoint& p, const std::string& set) {
  if (!completed_store(p)) return std::nullopt;
  try {
    return store_segments(*p.store, set);
  } catch (const InputError&) {
    return std::nullopt;
  }
}

// A cell of p-values over seed pairs: the largest (n = the pairs), so that a
// difference is called significant only where it is for every seed.
ReportCell largest_p(const std::vector<double>& ps) {
  ReportCell c;
  if (ps.empty()) return c;
  c.mean = *std::max_element(ps.begin(), ps.end());
  c.n = static_cast<std::int64_t>(ps.size());
  return c;
}

// For each point of `system` with an outcome (`outcome`: a point -> an
// optional), the point of `baseline` of the same seed: `pair(baseline's
// outcome, system's)` when that one has an outcome too. The paired tests below
// run seed by seed through it; each cell holds the largest p over the seed
// pairs (n = the pairs), so a difference is called significant only where it
// is for every seed.
template <class Outcome, class Pair>
void seed_pairs(const PointGroup& system, const PointGroup& baseline, const Outcome& outcome, const Pair& pair) {
  for (const SweepPoint* p : system.points) {
    const auto sys = outcome(*p);
    if (!sys) continue;
    for (const SweepPoint* q : baseline.points) {
      if (q->seed != p->seed) continue;
      if (const auto base = outcome(*q)) pair(*base, *sys);
      break;
    }
  }
}

// Paired bootstrap p-values (BLEU, chrF, and COMET where both have segment
// scores) of a model against the reference, on the test set's segments when
// both hold the same ones, else sentence by sentence when those are the same
// (results::paired_segments: passages against single sentences).
struct SignificanceCells {
  ReportCell bleu, chrf, comet;
};
SignificanceCells significance_cells(const PointGroup& g, const PointGroup& reference, const std::string& set) {
  std::vector<double> bleu, chrf, comet;
  seed_pairs(
      g, reference, [&set](const SweepPoint& p) { return segments_of(p, set); },
      [&](const StoreSegments& base, const StoreSegments& sys) {
        const std::optional<PairedSegments> paired = paired_segments(base, sys);
        if (!paired || paired->system.bleu.empty()) return;
        const PairedSignificance s = paired_significance(paired->baseline, paired->system);
        bleu.push_back(s.bleu_p);
        chrf.push_back(s.chrf_p);
        if (std::isfinite(s.comet_p)) comet.push_back(s.comet_p);
      });
  return {largest_p(bleu), largest_p(chrf), largest_p(comet)};
}

// The largest p of a paired test over the completed seed pairs of `system`
// and `baseline` whose stores both keep the test's units (`outcomes`: a store
// -> an optional) of the same text (`comparable`). A pair the test leaves
// undefined (NaN: e.g. a system that renders no repeated entity has no
// consistency to test) adds nothing.
template <class Outcomes, class Comparable, class Test>
ReportCell store_pairs_p(const PointGroup& system, const PointGroup& baseline, Outcomes outcomes,
                         Comparable comparable, Test test) {
  std::vector<double> ps;
  seed_pairs(
      system, baseline,
      [&outcomes](const SweepPoint& p) -> decltype(outcomes(*p.store)) {
        if (!completed_store(p)) return std::nullopt;
        return outcomes(*p.store);
      },
      [&](const auto& base, const auto& sys) {
        if (!comparable(base, sys)) return;
        const double p = test(base, sys);
        if (std::isfinite(p)) ps.push_back(p);
      });
  return largest_p(ps);
}

// Whether some store of the grid (outside-grid ones aside) has the table.
bool any_table(const SweepData& sweep, const std::string& table) {
  return std::any_of(sweep.points.begin(), sweep.points.end(), [&sweep, &table](const SweepPoint& p) {
    return p.store && !detail::outside_grid(sweep, p) && p.store->tables.count(table) > 0;
  });
}

// Paired bootstrap p-value of entity consistency (documents resampled) of
// `system` against `baseline`, where both translated the same sentences.
ReportCell consistency_significance(const PointGroup& system, const PointGroup& baseline) {
  return store_pairs_p(
      system, baseline, [](const core::StoreSnapshot& s) { return entity_consistency_outcomes(s); },
      [](const EntityConsistencyOutcomes& b, const EntityConsistencyOutcomes& s) {
        return b.set == s.set && b.documents == s.documents;
      },
      [](const EntityConsistencyOutcomes& b, const EntityConsistencyOutcomes& s) {
        return paired_consistency_p(b, s);
      });
}

// Whether some store of the grid keeps per-document entity counts (the paired
// test of entity consistency needs them; stores since 2026-11-27).
bool any_consistency_counts(const SweepData& sweep) { return any_table(sweep, "entities/by_document"); }

// Paired bootstrap p-value of the alignment error rate (sentences resampled)
// of `system` against `baseline`, where both were scored on the same sentences.
ReportCell alignment_significance(const PointGroup& system, const PointGroup& baseline) {
  return store_pairs_p(
      system, baseline, [](const core::StoreSnapshot& s) { return alignment_outcomes(s); },
      [](const AlignmentOutcomes& b, const AlignmentOutcomes& s) {
        return b.set == s.set && b.sentences == s.sentences;
      },
      [](const AlignmentOutcomes& b, const AlignmentOutcomes& s) { return paired_aer_p(b, s); });
}

// Whether some store of the grid keeps per-sentence alignment counts (the
// paired test of AER needs them; evaluation version 4 on).
bool any_alignment_counts(const SweepData& sweep) { return any_table(sweep, "alignment/sentences"); }

// Whether some store of the grid keeps segment COMET scores of test set `set`
// (the paired test of COMET needs them; evaluation version 6 on, where
// comet-score ran).
bool any_comet_segments(const SweepData& sweep, const std::string& set) {
  return any_table(sweep, set + "/comet_segments");
}

// The caption's account of the paired tests besides BLEU and chrF.
std::string other_tests_caption(const SweepData& sweep, const std::string& set) {
  std::string s;
  if (any_comet_segments(sweep, set))
    s += ", and of COMET (the mean of its segment scores) on the same segments where both were scored by COMET";
  if (any_consistency_counts(sweep))
    s += ", and of entity consistency (documents resampled) where both translated the same sentences";
  if (any_alignment_counts(sweep)) s += ", and of AER (sentences resampled) where both were scored on the same ones";
  return s;
}

ReportTable ablation_table(const SweepView& view, size_t k) {
  const SweepData& sweep = *view.sweep;
  const SweepAxis& axis = sweep.axes[k];
  const auto rows = view.axis_rows(k);
  // The row the others are tested against: the axis at its target (base) value.
  const PointGroup* target = nullptr;
  for (auto& [value, g] : rows)
    if (value == axis.target) target = g;
  ReportTable t;
  t.name = "ablation_" + detail::file_stem(axis.key);
  t.title = "Ablation: " + axis.key;
  std::string others;
  for (size_t j = 0; j < sweep.axes.size(); ++j) {
    if (j == k) continue;
    others += (others.empty() ? "" : ", ") + sweep.axes[j].key + " = " +
              detail::axis_label(sweep.axes[j].key, sweep.axes[j].target, view.base);
  }
  const std::string target_label = detail::axis_label(axis.key, axis.target, target);
  t.caption = axis.key + " varied" + (others.empty() ? "" : " with " + others) + "; test set " + view.test_set +
              "; mean \u00b1 std over seeds (n)" +
              (target ? "; p: paired bootstrap resampling (sacreBLEU's test, 1000 resamples) of BLEU and chrF against " +
                            axis.key + " = " + target_label +
                            kSameSegments + other_tests_caption(sweep, view.test_set) +
                            ", the largest p over the seeds (n)"
                      : std::string());
  t.row_title = axis.key;
  auto defs = metric_defs(sweep, view.test_set, false);
  // The p-values follow the metric they test.
  // per column: index into defs, or -1 (BLEU p), -2 (chrF p), -3 (entity consistency p), -4 (AER p), -5 (COMET p)
  std::vector<int> metric_of;
  const bool consistency_test = target && any_consistency_counts(sweep);
  const bool alignment_test = target && any_alignment_counts(sweep);
  const bool comet_test = target && any_comet_segments(sweep, view.test_set);
  for (size_t m = 0; m < defs.size(); ++m) {
    t.columns.push_back(column_of(defs[m]));
    metric_of.push_back(static_cast<int>(m));
    if (target && (defs[m].key == "bleu" || defs[m].key == "chrf")) {
      const bool bleu = defs[m].key == "bleu";
      t.columns.push_back(p_column(bleu ? "bleu_p_vs_base" : "chrf_p_vs_base",
                                   std::string(bleu ? "BLEU" : "chrF") + " p vs " + target_label, defs[m].key));
      metric_of.push_back(bleu ? -1 : -2);
    }
    if (comet_test && defs[m].key == "comet") {
      t.columns.push_back(p_column("comet_p_vs_base", "COMET p vs " + target_label, "comet"));
      metric_of.push_back(-5);
    }
    if (consistency_test && defs[m].key == "entity_consistency") {
      t.columns.push_back(
          p_column("entity_consistency_p_vs_base", "Consistency p vs " + target_label, "entity_consistency"));
      metric_of.push_back(-3);
    }
    if (alignment_test && defs[m].key == "alignment_aer") {
      t.columns.push_back(p_column("alignment_aer_p_vs_base", "AER p vs " + target_label, "alignment_aer"));
      metric_of.push_back(-4);
    }
  }
  for (auto& [value, g] : rows) {
    ReportRow full = metric_row(sweep, g, value, detail::axis_label(axis.key, value, g), defs);
    SignificanceCells p;
    ReportCell consistency_p, alignment_p;
    if (g && target && g != target) p = significance_cells(*g, *target, view.test_set);
    if (g && consistency_test && g != target) consistency_p = consistency_significance(*g, *target);
    if (g && alignment_test && g != target) alignment_p = alignment_significance(*g, *target);
    ReportRow row = full;
    row.cells.clear();
    for (int m : metric_of)
      row.cells.push_back(m >= 0    ? full.cells[static_cast<size_t>(m)]
                          : m == -1 ? p.bleu
                          : m == -2 ? p.chrf
                          : m == -3 ? consistency_p
                          : m == -4 ? alignment_p
                                    : p.comet);
    t.rows.push_back(std::move(row));
  }
  mark_best(t);
  return t;
}

ReportTable baseline_table(const SweepView& view) {
  const SweepData& sweep = *view.sweep;
  ReportTable t;
  t.name = "baselines";
  t.title = "Baseline comparison";
  t.caption = view.reference
                  ? "Speed and memory relative to " + view.reference->label + "; test set " + view.test_set +
                        "; mean \u00b1 std over seeds (n); p: paired bootstrap resampling (sacreBLEU's test, 1000 "
                        "resamples) of BLEU and chrF against " + view.reference->label +
                        kSameSegments + other_tests_caption(sweep, view.test_set) +
                        ", the largest p over the seeds (n)"
                  : "No Transformer variant in this sweep: no relative speed, memory or significance; test set " +
                        view.test_set;
  t.row_title = "model";
  auto defs = metric_defs(sweep, view.test_set, true);
  // Columns that compare with the reference follow their metric: the
  // significance of BLEU and chrF, the relative speed and memory.
  struct Rel {
    std::string of;
    ReportColumn column;
  };
  std::vector<Rel> rels = {
      {"bleu", p_column("bleu_p_vs_reference", "BLEU p vs Transformer", "bleu")},
      {"chrf", p_column("chrf_p_vs_reference", "chrF p vs Transformer", "chrf")},
      {"comet", p_column("comet_p_vs_reference", "COMET p vs Transformer", "comet")},
      {"entity_consistency",
       p_column("entity_consistency_p_vs_reference", "Consistency p vs Transformer", "entity_consistency")},
      {"alignment_aer", p_column("alignment_aer_p_vs_reference", "AER p vs Transformer", "alignment_aer")},
      {"decode_tokens_per_s", make_column("decode_speed_vs_reference_pct", "Decode speed vs Transformer", 1, Better::kNone, true)},
      {"train_tokens_per_s", make_column("train_speed_vs_reference_pct", "Train speed vs Transformer", 1, Better::kNone, true)},
      {"peak_memory_mb", make_column("memory_vs_reference_pct", "Memory vs Transformer", 1, Better::kNone, true)},
  };
  std::vector<int> source_of;  // column -> metric index (-1: a metric column itself)
  std::vector<int> rel_of;     // column -> metric index it compares (-1: none)
  for (size_t i = 0; i < defs.size(); ++i) {
    t.columns.push_back(column_of(defs[i]));
    source_of.push_back(static_cast<int>(i));
    rel_of.push_back(-1);
    // Without a Transformer in the sweep there is nothing to compare with.
    for (auto& r : rels)
      if (view.reference && r.of == defs[i].key && (r.of != "entity_consistency" || any_consistency_counts(sweep)) &&
          (r.of != "alignment_aer" || any_alignment_counts(sweep)) &&
          (r.of != "comet" || any_comet_segments(sweep, view.test_set))) {
        t.columns.push_back(r.column);
        source_of.push_back(-1);
        rel_of.push_back(static_cast<int>(i));
      }
  }
  std::vector<ReportCell> reference;
  if (view.reference)
    for (auto& m : defs) reference.push_back(summarize(metric_values(*view.reference, m)));
  for (const PointGroup* g : view.models) {
    ReportRow row;
    row.key = g->key;
    row.label = g->label;
    row.status = g->status(expected_seeds(sweep));
    row.base = g->base;
    std::vector<ReportCell> cells;
    for (auto& m : defs) cells.push_back(summarize(metric_values(*g, m)));
    SignificanceCells p;
    if (view.reference && view.reference != g) p = significance_cells(*g, *view.reference, view.test_set);
    for (size_t c = 0; c < t.columns.size(); ++c) {
      if (source_of[c] >= 0) {
        row.cells.push_back(cells[static_cast<size_t>(source_of[c])]);
        continue;
      }
      const std::string& key = t.columns[c].key;
      if (key == "bleu_p_vs_reference" || key == "chrf_p_vs_reference" || key == "comet_p_vs_reference") {
        row.cells.push_back(key == "bleu_p_vs_reference" ? p.bleu : key == "chrf_p_vs_reference" ? p.chrf : p.comet);
        continue;
      }
      if (t.columns[c].key == "entity_consistency_p_vs_reference") {
        row.cells.push_back(view.reference && view.reference != g ? consistency_significance(*g, *view.reference)
                                                                  : ReportCell{});
        continue;
      }
      if (t.columns[c].key == "alignment_aer_p_vs_reference") {
        row.cells.push_back(view.reference && view.reference != g ? alignment_significance(*g, *view.reference)
                                                                  : ReportCell{});
        continue;
      }
      ReportCell rel;
      const size_t m = static_cast<size_t>(rel_of[c]);
      if (view.reference == g) {
        rel.reference = true;
        rel.mean = 0;
      } else if (view.reference && cells[m].has_value() && reference[m].has_value() && reference[m].mean != 0) {
        rel.mean = (cells[m].mean / reference[m].mean - 1) * 100;
      }
      row.cells.push_back(rel);
    }
    t.rows.push_back(std::move(row));
  }
  mark_best(t);
  return t;
}

// Rows of a breakdown table: one per model, with the rows of the axis
// `axis_key` when the grid has it (CAT-N for the length tables: CAT-N is there
// for length generalisation; cross_attn_every for the alignment table).
std::vector<const PointGroup*> breakdown_rows(const SweepView& view, const std::string& axis_key) {
  std::vector<const PointGroup*> rows = view.models;
  if (axis_key.empty()) return rows;
  for (size_t k = 0; k < view.sweep->axes.size(); ++k) {
    if (view.sweep->axes[k].key != axis_key) continue;
    for (auto& [value, g] : view.axis_rows(k))
      if (g && std::find(rows.begin(), rows.end(), g) == rows.end()) rows.push_back(g);
  }
  return rows;
}

// Rows = models (and the values of the grid axis `axis_key`, when the grid
// has it), columns = the row labels of results/<path> (length buckets,
// pronouns, ...).
std::optional<ReportTable> breakdown_table(const SweepView& view, const std::string& name, const std::string& title,
                                           const std::string& caption, const std::string& path,
                                           const std::string& column, double scale, int decimals,
                                           const std::string& axis_key, Better better = Better::kHigher) {
  std::vector<std::string> labels = detail::table_row_labels(*view.sweep, path);
  if (labels.empty()) return std::nullopt;
  ReportTable t;
  t.name = name;
  t.title = title;
  t.caption = caption + "; mean \u00b1 std over seeds (n)";
  t.row_title = "model";
  for (auto& l : labels) t.columns.push_back(make_column(l, l, decimals, better));
  for (const PointGroup* g : breakdown_rows(view, axis_key)) {
    ReportRow row;
    row.key = g->key;
    row.label = g->label;
    row.status = g->status(expected_seeds(*view.sweep));
    row.base = g->base;
    for (auto& l : labels) row.cells.push_back(summarize(detail::table_values(*g, path, l, column, scale)));
    t.rows.push_back(std::move(row));
  }
  mark_best(t);
  return t;
}

// The mean of `column` of results/<table> over its rows weighted by their
// column "n" (rows named `skip_row` left out); NaN without.
double weighted_mean(const core::StoreSnapshot& s, const std::string& table, const std::string& column,
                     const std::string& skip_row = "") {
  auto it = s.tables.find(table);
  if (it == s.tables.end()) return kNaN;
  const core::ResultTable& t = it->second;
  auto c = std::find(t.columns.begin(), t.columns.end(), column);
  auto n = std::find(t.columns.begin(), t.columns.end(), "n");
  if (c == t.columns.end() || n == t.columns.end() || t.values.size() != t.rows.size() * t.columns.size()) return kNaN;
  double sum = 0, total = 0;
  for (size_t r = 0; r < t.rows.size(); ++r) {
    if (!skip_row.empty() && t.rows[r] == skip_row) continue;
    const double v = t.at(r, static_cast<size_t>(c - t.columns.begin()));
    const double k = t.at(r, static_cast<size_t>(n - t.columns.begin()));
    if (!std::isfinite(v) || !std::isfinite(k) || k <= 0) continue;
    sum += v * k;
    total += k;
  }
  return total > 0 ? sum / total : kNaN;
}

// Accuracy (0-1) over the contrastive examples whose antecedent is in an
// earlier sentence (every row of contrastive/by_distance but "0"), NaN without.
double earlier_sentence_accuracy(const core::StoreSnapshot& s) {
  return weighted_mean(s, "contrastive/by_distance", "accuracy", "0");
}

// Paired bootstrap p-values of contrastive accuracy (all examples, and those
// whose antecedent is in an earlier sentence) of `system` against `baseline`
// on the same set.
std::pair<ReportCell, ReportCell> contrastive_significance(const PointGroup& system, const PointGroup& baseline) {
  std::vector<double> all, earlier;
  seed_pairs(
      system, baseline,
      [](const SweepPoint& p) -> std::optional<ContrastiveOutcomes> {
        if (!p.store || p.state != "completed") return std::nullopt;
        return contrastive_outcomes(*p.store);
      },
      [&](const ContrastiveOutcomes& base, const ContrastiveOutcomes& sys) {
        if (base.set != sys.set || base.correct.size() != sys.correct.size()) return;
        const ContrastiveComparison c = compare_contrastive(base, sys);
        all.push_back(c.p);
        if (c.earlier > 0) earlier.push_back(c.p_earlier);
      });
  return {largest_p(all), largest_p(earlier)};
}

// Document context against its absence: every document-level configuration of
// the sweep (data.context_sentences > 1) beside the sentence-level one
// (<= 1) that differs from it only in the fields of document context
// (kDocumentContextKeys), with the gain seed by seed. Null when the sweep has
// no such pair with a completed store.
std::optional<ReportTable> document_context_table(const SweepView& view) {
  struct Config {
    const PointGroup* group;
    const std::string* config;
    std::int64_t context;
  };
  std::vector<Config> configs;
  for (const PointGroup& g : view.groups)
    for (const SweepPoint* p : g.points)
      if (!p->context_free_config.empty()) {
        configs.push_back({&g, &p->context_free_config, p->context_sentences});
        break;
      }
  std::vector<std::pair<const PointGroup*, const PointGroup*>> pairs;  // (document level, sentence level)
  for (const Config& d : configs) {
    if (d.context <= 1) continue;
    for (const Config& s : configs)
      if (s.context <= 1 && *s.config == *d.config) {
        pairs.emplace_back(d.group, s.group);
        break;
      }
  }
  if (pairs.empty()) return std::nullopt;

  struct Metric {
    std::string key, title;
    int decimals;
    std::function<double(const core::StoreSnapshot&)> value;
    bool sides;  // document- and sentence-level columns before the gain
    int test;    // a p column after the gain: 1 all contrastive examples, 2 earlier-sentence ones, 3 entity
                 // consistency, 4 BLEU, 5 COMET, 6 chrF; 0 none
  };
  auto scalar = [](std::string path, double scale) {
    return [path, scale](const core::StoreSnapshot& s) {
      auto it = s.scalars.find(path);
      return it == s.scalars.end() || !core::result_current(s, path) ? kNaN : it->second * scale;
    };
  };
  // A score by sentence: the document-level model's passages split into
  // their sentences, as the tests pair them (stores from before that was
  // kept: their own segments').
  auto by_sentence = [&view, scalar](const std::string& metric) {
    return [&view, scalar, metric](const core::StoreSnapshot& s) {
      const double v = scalar(view.test_set + "/sentence_" + metric, 1)(s);
      return std::isfinite(v) ? v : scalar(view.test_set + "/" + metric, 1)(s);
    };
  };
  std::vector<Metric> metrics = {
      {"contrastive_accuracy", "Contrastive acc. (%)", 1, scalar("contrastive/accuracy", 100), true, 1},
      {"earlier_sentence_accuracy", "Antecedent in an earlier sentence (%)", 1,
       [](const core::StoreSnapshot& s) { return earlier_sentence_accuracy(s) * 100; }, true, 2},
      {"bleu", "BLEU", 2, by_sentence("bleu"), true, 4},
      {"chrf", "chrF", 2,
       [&view, scalar](const core::StoreSnapshot& s) {
         const double v = sentence_chrf(s, view.test_set);
         return std::isfinite(v) ? v : scalar(view.test_set + "/chrf", 1)(s);
       },
       true, 6},
  };
  bool comet = false;
  for (auto& [d, s] : pairs)
    for (const PointGroup* g : {d, s})
      for (const core::StoreSnapshot* st : g->completed()) comet = comet || std::isfinite(by_sentence("comet")(*st));
  if (comet) metrics.push_back({"comet", "COMET", 4, by_sentence("comet"), true, 5});
  bool consistency = false;
  for (auto& [d, s] : pairs)
    for (const PointGroup* g : {d, s})
      for (const core::StoreSnapshot* st : g->completed())
        consistency = consistency || std::isfinite(scalar("entities/consistency", 1)(*st));
  if (consistency)
    metrics.push_back({"entity_consistency", "Entity consistency", 1, scalar("entities/consistency", 100), false, 3});

  ReportTable t;
  t.name = "document_context";
  t.title = "Document context against sentence level";
  t.caption = "Each document-level model (data.context_sentences > 1) against the model of the sweep that differs "
              "from it only in document context (data.context_sentences <= 1; data.context_side, "
              "data.multi_resolution, data.sentence_steps and eval.doc_decode aside); gains seed by seed (document "
              "level minus sentence level, pp for percentages); contrastive accuracy over all examples and over "
              "those whose antecedent is in an earlier sentence; " +
              std::string(comet ? "BLEU, chrF and COMET" : "BLEU and chrF") +
              " on test set " + view.test_set +
              " by sentence (a model's translated passages split into their sentences; over each model's own test "
              "examples for stores evaluated before that was kept); "
              "mean \u00b1 std over seeds (n); p: paired bootstrap resampling (1000 resamples) of the contrastive "
              "accuracy against the sentence-level model of the same seed on the same examples, of " +
              (comet ? "BLEU, chrF and COMET (the mean of its segment scores, where both have them)"
                     : "BLEU and chrF") +
              " sentence by sentence where both were scored on the same sentences, and of entity consistency "
              "(documents resampled) where both translated the same sentences, the largest p over the seeds (n)";
  t.row_title = "model";
  for (const Metric& m : metrics) {
    if (m.sides) {
      t.columns.push_back(make_column(m.key, m.title, m.decimals, Better::kHigher));
      t.columns.push_back(make_column(m.key + "_sentence_level", "sentence level", m.decimals, Better::kNone));
    }
    const bool pp = m.key != "bleu" && m.key != "chrf" && m.key != "comet";  // gains of percentages
    t.columns.push_back(make_column(m.key + (pp ? "_gain_pp" : "_gain"),
                                    m.sides ? std::string("gain") + (pp ? " (pp)" : "")
                                            : m.title + " gain (pp)",
                                    m.decimals, Better::kHigher));
    if (m.test) t.columns.push_back(make_column(m.key + "_p", "p", 3, Better::kNone));
  }
  const std::int64_t seeds = expected_seeds(*view.sweep);
  for (auto& [d, s] : pairs) {
    ReportRow row;
    row.key = d->key;
    row.label = d->label + " vs " + s->label;
    row.status = d->status(seeds) + "; " + s->label + ": " + s->status(seeds);
    row.base = d->base;
    const std::pair<ReportCell, ReportCell> p = contrastive_significance(*d, *s);
    const ReportCell consistency_p = consistency ? consistency_significance(*d, *s) : ReportCell{};
    const SignificanceCells scores_p = significance_cells(*d, *s, view.test_set);
    for (const Metric& m : metrics) {
      std::vector<double> doc, sent, gain;
      for (const SweepPoint* p : d->points) {
        if (!p->store || p->state != "completed") continue;
        const double v = m.value(*p->store);
        doc.push_back(v);
        for (const SweepPoint* q : s->points)
          if (q->seed == p->seed && q->store && q->state == "completed") gain.push_back(v - m.value(*q->store));
      }
      for (const SweepPoint* q : s->points)
        if (q->store && q->state == "completed") sent.push_back(m.value(*q->store));
      if (m.sides) {
        row.cells.push_back(summarize(doc));
        row.cells.push_back(summarize(sent));
      }
      row.cells.push_back(summarize(gain));
      if (m.test)
        row.cells.push_back(m.test == 1   ? p.first
                            : m.test == 2 ? p.second
                            : m.test == 3 ? consistency_p
                            : m.test == 4 ? scores_p.bleu
                            : m.test == 5 ? scores_p.comet
                                          : scores_p.chrf);
    }
    t.rows.push_back(std::move(row));
  }
  mark_best(t);
  return t;
}

// A column of results/gates/by_layer over every gated layer's tokens together
// (weighted by the layers' n): the mean gate or a share; NaN without.
double pooled_gates(const core::StoreSnapshot& s, const std::string& column) {
  return weighted_mean(s, "gates/by_layer", column);
}

// Rows = the configurations with gated cross-attention; columns = how its
// gates are spread over the test references (every gated layer together).
std::optional<ReportTable> gates_table(const SweepView& view) {
  std::vector<const PointGroup*> groups;
  std::vector<std::string> below;  // the below_<t> columns of the first store
  for (const PointGroup& g : view.groups)
    for (const core::StoreSnapshot* st : g.completed()) {
      auto it = st->tables.find("gates/by_layer");
      if (it == st->tables.end()) continue;
      if (below.empty())
        for (const std::string& c : it->second.columns)
          if (c.rfind("below_", 0) == 0) below.push_back(c);
      groups.push_back(&g);
      break;
    }
  if (groups.empty()) return std::nullopt;
  ReportTable t;
  t.name = "cross_attention_gates";
  t.title = "Gated cross-attention";
  t.caption = "The gates of gated cross-attention in a teacher-forced pass over the references of test set " +
              view.test_set +
              ", every gated layer's target tokens together: the mean gate, the share of tokens whose gate is below "
              "each value (%), and the share skipped by the experiment's eval.gate_skip (%: its cross-attention output "
              "counted as zero, the source not read), on the references and along the model's own translations; "
              "mean \u00b1 std over seeds (n)";
  t.row_title = "model";
  t.columns.push_back(make_column("mean_gate", "Mean gate", 3, Better::kNone));
  for (const std::string& c : below) t.columns.push_back(make_column(c, "< " + c.substr(6) + " (%)", 1, Better::kNone));
  t.columns.push_back(make_column("skipped", "Skipped (%)", 1, Better::kNone));
  t.columns.push_back(make_column("translations_skipped", "Skipped in translations (%)", 1, Better::kNone));
  t.columns.push_back(make_column("gate_skip", "eval.gate_skip", 2, Better::kNone));
  for (const PointGroup* g : groups) {
    ReportRow row;
    row.key = g->key;
    row.label = g->label;
    row.status = g->status(expected_seeds(*view.sweep));
    row.base = g->base;
    auto over_seeds = [&](const std::function<double(const core::StoreSnapshot&)>& value) {
      std::vector<double> v;
      for (const core::StoreSnapshot* st : g->completed()) v.push_back(value(*st));
      return summarize(v);
    };
    row.cells.push_back(over_seeds([](const core::StoreSnapshot& s) { return pooled_gates(s, "mean"); }));
    for (const std::string& c : below)
      row.cells.push_back(over_seeds([&c](const core::StoreSnapshot& s) { return 100 * pooled_gates(s, c); }));
    row.cells.push_back(over_seeds([](const core::StoreSnapshot& s) { return 100 * pooled_gates(s, "skipped"); }));
    row.cells.push_back(over_seeds([](const core::StoreSnapshot& s) {
      auto it = s.scalars.find("gates/translations_skipped");
      return it == s.scalars.end() ? kNaN : 100 * it->second;
    }));
    row.cells.push_back(over_seeds([](const core::StoreSnapshot& s) {
      auto it = s.scalars.find("gates/skip_threshold");
      return it == s.scalars.end() ? kNaN : it->second;
    }));
    t.rows.push_back(std::move(row));
  }
  return t;
}

}  // namespace

std::vector<ReportTable> build_tables(const SweepData& sweep, const std::string& test_set_in) {
  const std::string set = detail::choose_test_set(sweep, test_set_in);
  SweepView view = detail::make_view(sweep, set);
  std::vector<ReportTable> tables;
  tables.push_back(baseline_table(view));
  for (size_t k = 0; k < sweep.axes.size(); ++k) tables.push_back(ablation_table(view, k));
  auto add = [&](std::optional<ReportTable> t) {
    if (t) tables.push_back(std::move(*t));
  };
  add(breakdown_table(view, "length_bleu", "BLEU by source length", "BLEU by source-length bucket (tokens), test set " + set,
                      set + "/by_length", "bleu", 1, 2, "data.cat_n"));
  add(breakdown_table(view, "length_chrf", "chrF by source length", "chrF by source-length bucket (tokens), test set " + set,
                      set + "/by_length", "chrf", 1, 2, "data.cat_n"));
  add(breakdown_table(view, "extrapolation_bleu", "Length extrapolation",
                      "BLEU on passages 1x, 2x and 4x the training length", "extrapolation/by_length", "bleu", 1, 2,
                      "data.cat_n"));
  add(document_context_table(view));
  add(breakdown_table(view, "contrastive_pronoun", "Contrastive accuracy by pronoun",
                      "Contrastive accuracy (%) by pronoun", "contrastive/by_pronoun", "accuracy", 100, 1, ""));
  add(breakdown_table(view, "contrastive_distance", "Contrastive accuracy by antecedent distance",
                      "Contrastive accuracy (%) by antecedent distance (sentences)", "contrastive/by_distance",
                      "accuracy", 100, 1, ""));
  add(breakdown_table(view, "entities_frequency", "Entity recall by training frequency",
                      "Named-entity recall (%) by training-set frequency", "entities/by_frequency", "recall", 100, 1,
                      ""));
  if (detail::any_table_column(sweep, "entities/by_frequency", "consistency"))
    add(breakdown_table(view, "entities_consistency", "Entity consistency by training frequency",
                        "Named entities repeated in a document and rendered there, rendered at every mention (%), "
                        "by training-set frequency",
                        "entities/by_frequency", "consistency", 100, 1, ""));
  add(gates_table(view));
  add(breakdown_table(view, "alignment_by_layer", "Alignment error rate by layer",
                      "Alignment error rate (%, lower is better) of each layer's attention over the source (mean over "
                      "its heads; all layers: their mean; held-out layer: each half of the sentences at the layer best on the "
                      "other half), and of occlusion, teacher-forced on the references "
                      "of the first test set with gold word alignments",
                      "alignment/by_layer", "aer", 100, 1, "model.cross_attn_every", Better::kLower));
  return tables;
}

}  // namespace mambamt::results
