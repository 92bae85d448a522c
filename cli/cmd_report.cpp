// `mambamt status`, `collect`, `compare` and `plan`: reading sweeps, stores and configs.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <numeric>
#include <optional>

#include "cli/commands.h"
#include "core/config.h"
#include "core/error.h"
#include "core/hdf5.h"
#include "models/plan.h"
#include "orchestrator/grid.h"
#include "orchestrator/status.h"
#include "core/store.h"
#include "results/alignment.h"
#include "results/collector.h"
#include "results/contrastive.h"
#include "results/entities.h"
#include "results/segments.h"

namespace mambamt::cli {

Command status_command() {
  CommandSpec spec;
  spec.name = "status";
  spec.summary = "a sweep's progress: counts by state, one line per experiment, ETA";
  spec.positionals = {"RUN_DIR"};
  spec.description = "Reads only; works while the sweep runs. RUN_DIR is runs/<sweep>.";
  return {spec, [](const ParsedArgs& a) {
            core::h5::set_unsealed_reads_in_child(true);  // never under MPI: it may fork
            std::cout << orchestrator::status_report(a.positional[0]);
            return 0;
          }};
}

namespace {

struct ComparedStore {
  std::string path;  // store.h5
  core::StoreSnapshot store;
};

ComparedStore read_compared(const std::string& where) {
  namespace fs = std::filesystem;
  ComparedStore c;
  c.path = fs::is_directory(where) ? (fs::path(where) / "store.h5").string() : where;
  if (!fs::exists(c.path)) throw InputError(where + ": no experiment store (store.h5) here");
  c.store = core::ExperimentStore::read(c.path);
  return c;
}

// The test set's segment statistics of a store; InputError naming the store
// and what to do when it has none, or the table that is not one.
results::StoreSegments compared_segments(const ComparedStore& c, const std::string& set) {
  results::StoreSegments out;
  try {
    out = results::store_segments(c.store, set);
  } catch (const InputError& e) {
    throw InputError(c.path + ":" + e.what());
  }
  if (!out.own) {
    std::string sets;
    for (auto& [name, table] : c.store.tables)
      if (name.size() > 9 && name.compare(name.size() - 9, 9, "/segments") == 0)
        sets += (sets.empty() ? "" : ", ") + name.substr(0, name.size() - 9);
    throw InputError(c.path + ": no segment statistics of test set " + set +
                     (sets.empty() ? " (evaluated before they were kept: mambamt eval --store DIR evaluates it again)"
                                   : " (it has: " + sets + "; --test-set NAME)"));
  }
  return out;
}

std::string label_of(const ComparedStore& c) {
  return c.store.experiment_id + (c.store.name.empty() ? "" : " (" + c.store.name + ")");
}

// BLEU and chrF of both (and COMET where both have segment scores) and
// sacreBLEU's paired bootstrap test on the test set's segments, or by
// sentence where one translated passages and the other single sentences
// (results::paired_segments); InputError naming the store when one has none,
// or when the two were scored against different references.
void print_bleu_chrf(const ComparedStore& base, const ComparedStore& sys, const std::string& set) {
  const results::StoreSegments base_segments = compared_segments(base, set), sys_segments = compared_segments(sys, set);
  const std::optional<results::PairedSegments> paired = results::paired_segments(base_segments, sys_segments);
  if (!paired)
    throw InputError(base.path + " and " + sys.path + ": test set " + set + " was scored against different "
                     "references (" + std::to_string(base_segments.own->bleu.size()) + " and " + std::to_string(sys_segments.own->bleu.size()) +
                     " segments, or other reference text): no paired test");
  const results::SegmentStats &b = paired->baseline, &s = paired->system;
  const results::PairedSignificance p = results::paired_significance(b, s);
  const results::ChrfOptions co = b.chrf_options();
  const double bleu_b = results::bleu_from_stats(results::sum_bleu_stats(b.bleu)).score;
  const double chrf_b = results::chrf_from_stats(results::sum_chrf_stats(b.chrf, co), co).score;
  char line[256];
  if (paired->by_sentence)
    std::cout << "test set " << set << ": " << b.bleu.size() << " sentences, the same references (" << base_segments.own->bleu.size()
              << " and " << sys_segments.own->bleu.size() << " segments: passages translated whole are scored by sentence); "
              << "paired bootstrap, 1000 resamples\n\n";
  else
    std::cout << "test set " << set << ": " << b.bleu.size() << " segments, the same references; paired "
              << "bootstrap, 1000 resamples\n\n";
  // COMET (the mean of the segment scores) where both were scored by it.
  const bool comet = std::isfinite(p.comet_p);
  const double comet_b = comet ? std::accumulate(b.comet.begin(), b.comet.end(), 0.0) / b.comet.size() : 0;
  auto comet_cell = [comet](const char* format, double v) {
    char cell[32] = "";
    if (comet) std::snprintf(cell, sizeof cell, format, v);
    return std::string(cell);
  };
  std::snprintf(line, sizeof line, "%-10s %8s %8s", "", "BLEU", "chrF");
  std::cout << line << (comet ? "    COMET" : "") << "  experiment\n";
  std::snprintf(line, sizeof line, "%-10s %8.2f %8.2f", "baseline", bleu_b, chrf_b);
  std::cout << line << comet_cell(" %8.4f", comet_b) << "  " << label_of(base) << "\n";
  std::snprintf(line, sizeof line, "%-10s %8.2f %8.2f", "system", bleu_b + p.bleu_delta, chrf_b + p.chrf_delta);
  std::cout << line << comet_cell(" %8.4f", comet_b + p.comet_delta) << "  " << label_of(sys) << "\n";
  std::snprintf(line, sizeof line, "%-10s %+8.2f %+8.2f", "difference", p.bleu_delta, p.chrf_delta);
  std::cout << line << comet_cell(" %+8.4f", p.comet_delta) << "\n";
  std::snprintf(line, sizeof line, "%-10s %8.4f %8.4f", "p-value", p.bleu_p, p.chrf_p);
  std::cout << line << comet_cell(" %8.4f", p.comet_p) << "\n";
}

// Contrastive accuracy of both, over all examples and over those whose
// antecedent is in an earlier sentence, with the paired test's p-values.
void print_contrastive(const results::ContrastiveComparison& c, const ComparedStore& base,
                       const ComparedStore& sys) {
  // The earlier-sentence column is "-" when no example has its antecedent in an earlier sentence.
  auto earlier = [&c](const char* format, double v) {
    char cell[32];
    if (c.earlier == 0) std::snprintf(cell, sizeof cell, "%10s", "-");
    else std::snprintf(cell, sizeof cell, format, v);
    return std::string(cell);
  };
  char line[256];
  std::cout << "contrastive set: " << c.examples << " examples (" << c.earlier
            << " with the antecedent in an earlier sentence), the same examples; paired bootstrap, 1000 resamples\n\n";
  std::snprintf(line, sizeof line, "%-10s %8s %10s  %s\n", "", "all %", "earlier %", "experiment");
  std::cout << line;
  std::snprintf(line, sizeof line, "%-10s %8.1f ", "baseline", 100 * c.baseline);
  std::cout << line << earlier("%10.1f", 100 * c.baseline_earlier) << "  " << label_of(base) << "\n";
  std::snprintf(line, sizeof line, "%-10s %8.1f ", "system", 100 * c.system);
  std::cout << line << earlier("%10.1f", 100 * c.system_earlier) << "  " << label_of(sys) << "\n";
  std::snprintf(line, sizeof line, "%-10s %+8.1f ", "difference", 100 * (c.system - c.baseline));
  std::cout << line << earlier("%+10.1f", 100 * (c.system_earlier - c.baseline_earlier)) << "\n";
  std::snprintf(line, sizeof line, "%-10s %8.4f ", "p-value", c.p);
  std::cout << line << earlier("%10.4f", c.p_earlier) << "\n";
}

// Entity consistency of both over the same documents, with the paired test's
// p-value (documents resampled); "-" for a system that rendered no repeated entity.
void print_consistency(const results::EntityConsistencyOutcomes& b, const results::EntityConsistencyOutcomes& s,
                       const ComparedStore& base, const ComparedStore& sys) {
  auto share = [](const results::EntityConsistencyOutcomes& o, int64_t* rendered_out = nullptr) {
    int64_t consistent = 0, rendered = 0;
    for (auto& c : o.cells) {
      consistent += c.consistent;
      rendered += c.rendered;
    }
    if (rendered_out) *rendered_out = rendered;
    return rendered > 0 ? static_cast<double>(consistent) / static_cast<double>(rendered) : -1.0;
  };
  auto cell = [](const char* format, double v) {
    char text[32];
    if (v < 0) std::snprintf(text, sizeof text, "%8s", "-");
    else std::snprintf(text, sizeof text, format, v);
    return std::string(text);
  };
  int64_t rb = 0, rs = 0;
  const double cb = share(b, &rb), cs = share(s, &rs);
  std::cout << "entity consistency: " << b.documents.size() << " documents, the same sentences (" << rb << " and "
            << rs << " repeated entities rendered); paired bootstrap over documents, 1000 resamples\n\n";
  char line[256];
  std::snprintf(line, sizeof line, "%-10s %8s  %s\n", "", "%", "experiment");
  std::cout << line;
  std::cout << "baseline   " << cell("%8.1f", 100 * cb) << "  " << label_of(base) << "\n";
  std::cout << "system     " << cell("%8.1f", 100 * cs) << "  " << label_of(sys) << "\n";
  if (cb >= 0 && cs >= 0) {
    std::snprintf(line, sizeof line, "%-10s %+8.1f\n", "difference", 100 * (cs - cb));
    std::cout << line;
  }
  const double p = results::paired_consistency_p(b, s);
  if (std::isfinite(p)) {
    std::snprintf(line, sizeof line, "%-10s %8.4f\n", "p-value", p);
    std::cout << line;
  } else {
    std::snprintf(line, sizeof line, "%-10s %8s  ", "p-value", "-");
    const char* why = rb == 0 && rs == 0 ? "neither experiment renders a repeated entity, so neither has a consistency"
                      : rb == 0 ? "the baseline renders no repeated entity, so it has no consistency to compare"
                                : "the system renders no repeated entity, so it has no consistency to compare";
    std::cout << line << "(no test: " << why << ")\n";
  }
}

void print_alignment(const results::AlignmentOutcomes& b, const results::AlignmentOutcomes& s,
                     const ComparedStore& base, const ComparedStore& sys) {
  auto aer = [](const results::AlignmentOutcomes& o) {
    results::AlignmentCounts n;
    for (const results::AlignmentCounts& c : o.counts) n.add(c);
    return n.aer();
  };
  const double ab = aer(b), as = aer(s);
  std::cout << "alignment error rate: " << b.sentences.size()
            << " sentences with gold alignments, each at the layer chosen on the other half; paired bootstrap over "
               "sentences, 1000 resamples\n\n";
  char line[256];
  std::snprintf(line, sizeof line, "%-10s %8s  %s\n", "", "AER %", "experiment");
  std::cout << line;
  std::snprintf(line, sizeof line, "%-10s %8.1f  ", "baseline", 100 * ab);
  std::cout << line << label_of(base) << "\n";
  std::snprintf(line, sizeof line, "%-10s %8.1f  ", "system", 100 * as);
  std::cout << line << label_of(sys) << "\n";
  std::snprintf(line, sizeof line, "%-10s %+8.1f\n", "difference", 100 * (as - ab));
  std::cout << line;
  std::snprintf(line, sizeof line, "%-10s %8.4f\n", "p-value", results::paired_aer_p(b, s));
  std::cout << line;
}

// Why the paired test of `what` does not run: a store lacks its per-unit
// outcomes (`kept`, e.g. "per-document counts"), or the two hold other text
// or other units of the same text.
template <class Outcome>
void print_no_test(const std::string& what, const std::optional<Outcome>& b, const std::optional<Outcome>& s,
                   const ComparedStore& base, const ComparedStore& sys, const std::string& kept,
                   const std::string& other) {
  if (!b || !s)
    std::cout << what << ": no paired test (" << (b ? sys.path : base.path) << " keeps no " << kept
              << "; mambamt eval --store DIR evaluates it again)\n";
  else if (b->set != s->set)
    std::cout << what << ": no paired test (" << other << ": " << b->set << " and " << s->set << ")\n";
  else
    std::cout << what << ": no paired test (" << other << ": other parts of " << b->set << ")\n";
}

}  // namespace

Command compare_command() {
  CommandSpec spec;
  spec.name = "compare";
  spec.summary =
      "paired significance test of two experiments' BLEU and chrF (COMET, contrastive accuracy, entity consistency, AER)";
  spec.positionals = {"BASELINE", "SYSTEM"};
  spec.options = {{"--test-set", "NAME", "the test set (default: test)"}};
  spec.description =
      "BASELINE and SYSTEM are experiment directories (or their store.h5) evaluated on the same test\n"
      "set. Runs sacreBLEU's paired bootstrap resampling (1000 resamples, seed 12345) on the\n"
      "per-segment statistics the evaluation keeps (results/<set>/segments) and prints both systems'\n"
      "BLEU and chrF, the differences and their p-values: how often resampled test sets show a\n"
      "difference at least as large from chance alone (below 0.05 is the usual threshold). A model that\n"
      "translated passages (windows of sentences) against one that translated single sentences is\n"
      "tested sentence by sentence: the evaluation also scores passages by sentence\n"
      "(results/<set>/sentence_segments, since evaluation version 5). Where both were scored by COMET\n"
      "segment by segment (results/<set>/comet_segments, <set>/sentence_comet_segments; evaluation\n"
      "version 6, where comet-score ran), their COMET (the mean of the segment scores) is tested on the\n"
      "same resamples. When both stores keep per-example outcomes of the same contrastive set\n"
      "(results/contrastive/examples), the same test of contrastive accuracy follows, over all examples\n"
      "and over those whose antecedent is in an earlier sentence (a document-level model against its\n"
      "sentence-level twin). When both keep per-document entity counts of the same translated sentences\n"
      "(results/entities/by_document), entity consistency is tested too, resampling documents (no test\n"
      "where one of them renders no repeated entity: it has no consistency), and when both keep\n"
      "per-sentence alignment counts of the same gold-aligned sentences (results/alignment/sentences),\n"
      "the alignment error rate, resampling sentences. A difference of exactly 0 has p = 1. Exit 1 when\n"
      "no test can run: a store has no segment statistics for the set (stores evaluated before they\n"
      "were kept: `mambamt eval --store DIR`) or the two were scored against different references, and\n"
      "there are no contrastive outcomes, entity counts or alignment counts of the same text to compare\n"
      "either.";
  return {spec, [](const ParsedArgs& a) {
            core::h5::set_unsealed_reads_in_child(true);  // never under MPI: it may fork
            const std::string set = a.get("--test-set", "test");
            const ComparedStore base = read_compared(a.positional[0]), sys = read_compared(a.positional[1]);
            const auto cb = results::contrastive_outcomes(base.store), cs = results::contrastive_outcomes(sys.store);
            const bool contrastive = cb && cs && cb->set == cs->set && cb->correct.size() == cs->correct.size();
            const auto eb = results::entity_consistency_outcomes(base.store),
                       es = results::entity_consistency_outcomes(sys.store);
            const bool entities = eb && es && eb->set == es->set && eb->documents == es->documents;
            const auto ab = results::alignment_outcomes(base.store), as = results::alignment_outcomes(sys.store);
            const bool alignment = ab && as && ab->set == as->set && ab->sentences == as->sentences;
            try {
              print_bleu_chrf(base, sys, set);
            } catch (const InputError& e) {
              // Without another test there is nothing to show: exit 1 with the reason.
              if (!contrastive && !entities && !alignment) throw;
              std::cout << "BLEU and chrF: " << e.what() << "\n";
            }
            std::cout << "\n";
            if (contrastive)
              print_contrastive(results::compare_contrastive(*cb, *cs), base, sys);
            else
              print_no_test("contrastive accuracy", cb, cs, base, sys, "per-example outcomes",
                            "other contrastive sets");
            std::cout << "\n";
            if (entities)
              print_consistency(*eb, *es, base, sys);
            else
              print_no_test("entity consistency", eb, es, base, sys, "per-document counts", "other text translated");
            // Models without attention over the source keep no alignment
            // counts: no line when neither store has them.
            if (alignment || ab || as) std::cout << "\n";
            if (alignment)
              print_alignment(*ab, *as, base, sys);
            else if (ab || as)
              print_no_test("alignment error rate", ab, as, base, sys, "per-sentence alignment counts",
                            "other sentences scored");
            return 0;
          }};
}

Command collect_command() {
  CommandSpec spec;
  spec.name = "collect";
  spec.summary = "the tables, plots and report of a sweep from its stores";
  spec.positionals = {"RUN_DIR"};
  spec.options = {
      {"--format", "LIST", "table formats besides report.md: any of md,csv,tex,json (default md)"},
      {"--out", "DIR", "output directory (default: results/<sweep> beside runs/)"},
      {"--test-set", "NAME", "test set whose scores fill the tables (default: test, or the first found)"},
      {"--no-plots", "", "skip the SVG plots"},
  };
  spec.description =
      "Works on a running sweep too (partial results are marked). Writes one ablation table per grid\n"
      "axis, the baseline comparison (speed and memory relative to the Transformer), length-sensitivity\n"
      "and contrastive tables, SVG plots, summary.h5 and report.md. BLEU and chrF differences (and\n"
      "COMET's, where the stores keep segment COMET scores) are tested by paired bootstrap resampling,\n"
      "seed by seed on the stores' segment statistics (by sentence where one model translated passages\n"
      "and the other single sentences): each model against the Transformer, each ablation row against\n"
      "the axis's base value; contrastive accuracy on the stores' per-example outcomes, and entity\n"
      "consistency on their per-document counts: each document-level model against its sentence-level\n"
      "twin (the document-context table, when the sweep has such twins). Entity consistency (documents\n"
      "resampled) and the alignment error rate (sentences resampled, on the stores' per-sentence\n"
      "counts) are tested against the Transformer and the base value too. Unreadable stores, test sets\n"
      "scored on different texts and COMET by different models are reported by path.";
  return {spec, [](const ParsedArgs& a) {
            core::h5::set_unsealed_reads_in_child(true);  // never under MPI: it may fork
            results::CollectOptions opt;
            opt.run_dir = a.positional[0];
            if (a.has("--format")) opt.formats = results::parse_formats(a.get("--format"));
            opt.out_dir = a.get("--out");
            opt.test_set = a.get("--test-set");
            opt.plots = !a.has("--no-plots");
            results::CollectReport r = results::collect(opt, std::cerr);
            std::cout << "report: " << r.out_dir << "/report.md (" << r.files.size() << " files"
                      << (r.partial ? ", partial: not every point is completed" : "") << ")\n";
            return 0;
          }};
}

Command plan_command() {
  CommandSpec spec;
  spec.name = "plan";
  spec.summary = "the layer plan of an experiment (or of every model of a grid) with parameters";
  spec.positionals = {"CONFIG"};
  spec.description =
      "For an experiment: one line per layer with its parameters, and the totals. For a grid: the\n"
      "parameters and attention layers as built of every point's model, then the plan of the base\n"
      "experiment. A model.attention_ratio that the stacks cannot build exactly is warned about.";
  return {spec, [](const ParsedArgs& a) {
            const std::string& file = a.positional[0];
            std::string text = core::read_text(file);
            if (!core::is_grid_text(text)) {
              core::ExperimentConfig c = core::parse_experiment(text, file);
              std::cout << models::plan_report(c.model, c.data.vocab_size);
              return 0;
            }
            orchestrator::ExpandedGrid g = orchestrator::expand_grid(core::parse_grid(text, file));
            std::cout << "parameters per point (vocabulary from data.vocab_size):\n";
            for (auto& p : g.points) {
              if (!p.valid()) {
                std::cout << "  " << p.id << "  invalid  " << p.name << "\n";
                continue;
              }
              std::cout << "  " << p.id << "  " << models::count_parameters(p.config->model, p.config->data.vocab_size)
                        << "  " << p.name << (p.attention.empty() ? "" : "  attention " + p.attention) << "\n";
            }
            for (const std::string& w : orchestrator::attention_warnings(g)) std::cout << w << "\n";
            core::ExperimentConfig base = g.grid.point({});
            std::cout << "\nbase experiment " << base.id() << ":\n" << models::plan_report(base.model, base.data.vocab_size);
            return 0;
          }};
}

}  // namespace mambamt::cli
