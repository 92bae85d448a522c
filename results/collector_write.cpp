// collect(): loads the sweep, builds the tables, draws the plots and writes
// report.md, summary.h5 and the requested table formats.
#include <algorithm>
#include <cmath>
#include <ctime>
#include <map>
#include <filesystem>
#include <sstream>

#include "core/error.h"
#include "core/fs.h"
#include "core/hdf5.h"
#include "results/collector.h"
#include "results/detail/collector_model.h"
#include "results/json.h"

namespace fs = std::filesystem;

namespace mambamt::results {
namespace {

using Json = nlohmann::ordered_json;

namespace h5 = core::h5;
using detail::PlotFile;
using detail::SweepView;

const std::vector<std::string> kFormats = {"md", "csv", "tex", "json"};

bool wants(const CollectOptions& o, const std::string& format) {
  return std::find(o.formats.begin(), o.formats.end(), format) != o.formats.end();
}

std::string default_out_dir(const std::string& run_dir, const std::string& sweep_name) {
  fs::path p = fs::path(run_dir).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();  // "runs/abl/"
  const fs::path runs_parent = p.parent_path().parent_path();
  return (runs_parent / "results" / sweep_name).string();
}

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", &tm);
  return buf;
}

std::string counts_line(const std::map<std::string, std::int64_t>& counts) {
  std::string s;
  for (const char* state : detail::kStates) {
    if (!s.empty()) s += " \u00b7 ";
    s += std::string(state) + " " + std::to_string(counts.at(state));
  }
  s += " \u00b7 total " + std::to_string(counts.at("total"));
  if (counts.at("outside_grid") > 0)
    s += " (and " + std::to_string(counts.at("outside_grid")) + " store(s) outside the grid, left out)";
  if (counts.at("older_evaluation") > 0)
    s += "; " + std::to_string(counts.at("older_evaluation")) +
         " completed store(s) evaluated by an older mambamt (`mambamt sweep GRID --reevaluate` adds the newer "
         "results)";
  return s;
}

std::string md_cell(std::string s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += "\\|";
    else if (c == '\n' || c == '\r') out += ' ';
    else out += c;
  }
  return out;
}

// Why a point is not (yet) part of the numbers.
std::string point_detail(const SweepPoint& p) {
  if (p.state == "running" && p.store)
    return "step " + std::to_string(p.store->status.step) + " of " + std::to_string(p.store->status.total_steps);
  if (p.state == "missing") return "no store yet";
  if (!p.error.empty()) return p.error;
  return "";
}

std::string axis_text(const SweepData& sweep, const SweepPoint& p) {
  std::string s;
  for (size_t k = 0; k < sweep.axes.size() && k < p.axis_values.size(); ++k) {
    if (!s.empty()) s += " ";
    s += sweep.axes[k].key + "=" + (p.axis_values[k].empty() ? "?" : p.axis_values[k]);
  }
  return s;
}

// ---- summary.h5 -------------------------------------------------------------

h5::Handle vlen_string_type() {
  h5::Handle t(H5Tcopy(H5T_C_S1));
  H5Tset_size(t.get(), H5T_VARIABLE);
  H5Tset_cset(t.get(), H5T_CSET_UTF8);
  return t;
}

void write_string_matrix(h5::Group& g, const std::string& name, const std::vector<std::string>& values, size_t rows,
                         size_t cols) {
  h5::Handle t = vlen_string_type();
  std::vector<const char*> ptrs;
  for (auto& v : values) ptrs.push_back(v.c_str());
  g.write_raw(name, t.get(), {rows, cols}, ptrs.data());
}

void write_int_matrix(h5::Group& g, const std::string& name, const std::vector<std::int64_t>& values, size_t rows,
                      size_t cols) {
  g.write_raw(name, H5T_NATIVE_INT64, {rows, cols}, values.data());
}

void write_summary_h5(const std::string& path, const SweepData& sweep, const std::string& test_set,
                      const std::map<std::string, std::int64_t>& counts, const std::vector<ReportTable>& tables,
                      const SweepView& view) {
  core::replace_file_atomic(path, [&](const std::string& tmp) {
    h5::File f = h5::File::create(tmp, true);
    h5::Group root = f.root();
    root.set_attr("format", "mambamt-summary");
    root.set_attr("format_version", int64_t{1});
    root.set_attr("sweep", sweep.name);
    root.set_attr("run_dir", sweep.run_dir);
    root.set_attr("sweep_state", sweep.state);
    root.set_attr("design", sweep.design);
    root.set_attr("test_set", test_set);
    root.set_attr("points_source", std::string(sweep.has_sweep_file ? "sweep.h5" : "stores"));
    root.set_attr("created", core::unix_time());
    root.set_attr("partial", int64_t{counts.at("completed") < counts.at("total") ? 1 : 0});

    h5::Group status = root.create_group("status");
    for (auto& [state, n] : counts) status.set_attr(state, n);

    h5::Group points = root.create_group("points");
    std::vector<std::string> ids, names, variants, states, errors, stores, values;
    std::vector<std::int64_t> seeds, in_grid;
    for (auto& p : sweep.points) {
      ids.push_back(p.id);
      names.push_back(p.name);
      variants.push_back(p.variant);
      states.push_back(p.state);
      errors.push_back(p.error);
      stores.push_back(p.store_path);
      seeds.push_back(p.seed);
      in_grid.push_back(p.in_grid ? 1 : 0);
      for (size_t k = 0; k < sweep.axes.size(); ++k) values.push_back(k < p.axis_values.size() ? p.axis_values[k] : "");
    }
    std::vector<std::string> axis_keys, axis_base, axis_target;
    for (auto& a : sweep.axes) {
      axis_keys.push_back(a.key);
      axis_base.push_back(a.base);
      axis_target.push_back(a.target);
    }
    points.write_strings("id", ids);
    points.write_strings("name", names);
    points.write_strings("variant", variants);
    points.write_strings("state", states);
    points.write_strings("error", errors);
    points.write_strings("store", stores);
    points.write_ints("seed", seeds);
    points.write_ints("in_grid", in_grid);
    write_string_matrix(points, "axis_values", values, sweep.points.size(), sweep.axes.size());
    points.set_attr("axes", axis_keys);
    points.set_attr("base_values", axis_base);
    points.set_attr("target_values", axis_target);
    root.write_strings("problems", sweep.problems);

    // Every table: mean, std, n, best as rows x columns matrices.
    h5::Group tg = root.create_group("tables");
    for (auto& t : tables) {
      h5::Group g = tg.create_group(t.name);
      g.set_attr("title", t.title);
      g.set_attr("caption", t.caption);
      g.set_attr("row_title", t.row_title);
      std::vector<std::string> rows, labels, row_status, columns, titles;
      std::vector<std::int64_t> base, relative;
      for (auto& r : t.rows) {
        rows.push_back(r.key);
        labels.push_back(r.label);
        row_status.push_back(r.status);
        base.push_back(r.base ? 1 : 0);
      }
      for (auto& c : t.columns) {
        columns.push_back(c.key);
        titles.push_back(c.title);
        relative.push_back(c.relative ? 1 : 0);
      }
      g.set_attr("rows", rows);
      g.set_attr("columns", columns);
      g.write_strings("row_labels", labels);
      g.write_strings("row_status", row_status);
      g.write_ints("row_base", base);
      g.write_strings("column_titles", titles);
      g.write_ints("column_relative", relative);
      const size_t nr = t.rows.size(), nc = t.columns.size();
      std::vector<double> mean, sd;
      std::vector<std::int64_t> n, best;
      for (auto& r : t.rows)
        for (auto& c : r.cells) {
          mean.push_back(c.mean);
          sd.push_back(c.std);
          n.push_back(c.n);
          best.push_back(c.best ? 1 : 0);
        }
      g.write_doubles("mean", mean, {nr, nc});
      g.write_doubles("std", sd, {nr, nc});
      write_int_matrix(g, "n", n, nr, nc);
      write_int_matrix(g, "best", best, nr, nc);
    }

    // The plotted series: validation loss per configuration, memory by length per model.
    h5::Group curves = root.create_group("curves");
    auto write_curve = [](h5::Group& parent, const std::string& name, const detail::Curve& c, const char* x_name) {
      if (c.x.empty()) return;
      std::vector<double> m;
      for (size_t i = 0; i < c.x.size(); ++i) {
        m.push_back(c.x[i]);
        m.push_back(c.mean[i]);
        m.push_back(c.std[i]);
        m.push_back(static_cast<double>(c.n[i]));
      }
      h5::Dataset d = parent.write_doubles(detail::file_stem(name), m, {c.x.size(), 4});
      d.set_attr("columns", std::vector<std::string>{x_name, "mean", "std", "n"});
      d.set_attr("label", name);
    };
    h5::Group vl = curves.create_group("valid_loss");
    for (auto& g : view.groups) write_curve(vl, g.label, detail::metric_curve(g, "valid_loss"), "step");
    h5::Group mem = curves.create_group("memory_by_length");
    for (auto* g : view.models) {
      write_curve(mem, g->label + " train_memory_mb", detail::memory_curve(*g, "train_memory_mb"), "length");
      write_curve(mem, g->label + " decode_state_mb", detail::memory_curve(*g, "decode_state_mb"), "length");
    }
    f.close();
  });
}

// ---- JSON -------------------------------------------------------------------

Json summary_json(const SweepData& sweep, const std::string& test_set,
                  const std::map<std::string, std::int64_t>& counts, const std::vector<ReportTable>& tables) {
  Json j = Json::object();
  j["format"] = "mambamt-summary";
  j["sweep"] = sweep.name;
  j["run_dir"] = sweep.run_dir;
  j["sweep_state"] = sweep.state;
  j["design"] = sweep.design;
  j["test_set"] = test_set;
  j["partial"] = counts.at("completed") < counts.at("total");
  Json c = Json::object();
  for (auto& [state, n] : counts) c[state] = n;
  j["counts"] = c;
  Json problems = Json::array();
  for (auto& p : sweep.problems) problems.push_back(p);
  j["problems"] = problems;
  Json axes = Json::array();
  for (auto& a : sweep.axes) {
    Json ja = Json::object();
    ja["key"] = a.key;
    Json vals = Json::array();
    for (auto& v : a.values) vals.push_back(v);
    ja["values"] = vals;
    ja["base"] = a.base;
    ja["target"] = a.target;
    axes.push_back(ja);
  }
  j["axes"] = axes;
  Json points = Json::array();
  for (auto& p : sweep.points) {
    Json jp = Json::object();
    jp["id"] = p.id;
    jp["name"] = p.name;
    jp["variant"] = p.variant;
    jp["seed"] = p.seed;
    jp["state"] = p.state;
    for (size_t k = 0; k < sweep.axes.size() && k < p.axis_values.size(); ++k) jp[sweep.axes[k].key] = p.axis_values[k];
    jp["error"] = p.error;
    jp["store"] = p.store_path;
    points.push_back(jp);
  }
  j["points"] = points;
  Json jt = Json::object();
  for (auto& t : tables) {
    Json one = Json::object();
    one["title"] = t.title;
    one["caption"] = t.caption;
    one["row_title"] = t.row_title;
    Json cols = Json::array();
    for (auto& col : t.columns) {
      Json jc = Json::object();
      jc["key"] = col.key;
      jc["title"] = col.title;
      jc["better"] = col.better == Better::kHigher ? "higher" : col.better == Better::kLower ? "lower" : "none";
      jc["relative"] = col.relative;
      cols.push_back(jc);
    }
    one["columns"] = cols;
    one["rows"] = table_records(t);
    jt[t.name] = one;
  }
  j["tables"] = jt;
  return j;
}

// ---- CSV of the points --------------------------------------------------------

std::string points_csv(const SweepData& sweep) {
  std::ostringstream out;
  out << "id,name,variant,seed,state,in_grid";
  for (auto& a : sweep.axes) out << "," << csv_field(a.key);
  out << ",detail,store,device\n";
  for (auto& p : sweep.points) {
    out << csv_field(p.id) << "," << csv_field(p.name) << "," << csv_field(p.variant) << "," << p.seed << ","
        << p.state << "," << (p.in_grid ? "true" : "false");
    for (size_t k = 0; k < sweep.axes.size(); ++k)
      out << "," << csv_field(k < p.axis_values.size() ? p.axis_values[k] : "");
    out << "," << csv_field(point_detail(p)) << "," << csv_field(p.store_path) << ","
        << csv_field(p.store ? detail::device_label(*p.store) : "") << "\n";
  }
  return out.str();
}

// ---- LaTeX document -----------------------------------------------------------

std::string latex_document(const SweepData& sweep, const std::map<std::string, std::int64_t>& counts,
                           const std::vector<ReportTable>& tables) {
  std::ostringstream out;
  out << "% Generated by mambamt collect. Compile with pdflatex.\n"
         "\\documentclass[10pt]{article}\n"
         "\\usepackage[T1]{fontenc}\n"
         "\\usepackage[utf8]{inputenc}\n"
         "\\usepackage[landscape,margin=1.5cm]{geometry}\n"
         "\\usepackage{booktabs}\n"
         "\\usepackage{graphicx}\n"
         "\\begin{document}\n"
      << "\\section*{Sweep " << latex_escape(sweep.name) << "}\n"
      << latex_escape(counts_line(counts)) << "\n\n"
      << "Cells: mean $\\pm$ std over seeds, (n) seeds with a value; bold: best of the column; -- no value.\n\n";
  for (auto& t : tables) out << table_latex(t) << "\n";
  out << "\\end{document}\n";
  return out.str();
}

// ---- report.md ------------------------------------------------------------------

// sacreBLEU's signatures of the test set's scores (the stores' texts
// signature.<set>.<metric>), as papers print them under their tables; a
// signature that differs between completed stores is listed with each count.
std::string signatures_markdown(const SweepData& sweep, const std::string& set) {
  const std::vector<std::pair<std::string, std::string>> metrics = {
      {"bleu", "BLEU"}, {"chrf", "chrF"}, {"chrfpp", "chrF++"}, {"ter", "TER"}};
  std::ostringstream md;
  for (const auto& [key, title] : metrics) {
    std::map<std::string, int> signatures;
    for (const SweepPoint& p : sweep.points) {
      if (!p.store || p.state != "completed" || detail::outside_grid(sweep, p)) continue;
      auto it = p.store->texts.find("signature." + set + "." + key);
      if (it != p.store->texts.end()) ++signatures[it->second];
    }
    if (signatures.empty()) continue;
    md << "- " << title << ": ";
    bool first = true;
    for (const auto& [signature, n] : signatures) {
      md << (first ? "" : "; ") << "`" << signature << "`";
      if (signatures.size() > 1) md << " (" << n << " experiment" << (n == 1 ? "" : "s") << ")";
      first = false;
    }
    md << "\n";
  }
  const std::string list = md.str();
  if (list.empty()) return "";
  return "## Signatures\n\nThe scores of test set `" + set + "` (sacreBLEU's signature of each metric):\n\n" + list +
         "\n";
}

std::string report_markdown(const SweepData& sweep, const std::string& test_set,
                            const std::map<std::string, std::int64_t>& counts, const std::vector<ReportTable>& tables,
                            const std::vector<PlotFile>& plots, const std::vector<std::string>& table_files,
                            const std::vector<detail::ExplainPlot>& explain) {
  std::ostringstream md;
  md << "# Sweep `" << sweep.name << "`\n\n";
  md << "Collected " << utc_now() << " from `" << sweep.run_dir << "`"
     << (sweep.has_sweep_file ? " (points from sweep.h5" + (sweep.state.empty() ? "" : ", sweep " + sweep.state) + ")"
                              : " (no sweep.h5: points are the stores found)")
     << "; test set `" << test_set << "`.\n\n";
  md << "| completed | running | pending | interrupted | failed | missing | unreadable | total |\n"
        "|---:|---:|---:|---:|---:|---:|---:|---:|\n|";
  for (const char* s : detail::kStates) md << " " << counts.at(s) << " |";
  md << " " << counts.at("total") << " |\n\n";
  if (counts.at("completed") < counts.at("total"))
    md << "**Partial results:** " << counts.at("completed") << " of " << counts.at("total")
       << " points completed; the numbers below use the completed points only, and each row's status says what "
          "is still out.\n\n";
  if (counts.at("outside_grid") > 0)
    md << "**Stores outside the grid:** " << counts.at("outside_grid")
       << " store(s) of points the grid no longer has (it was changed with --allow-grid-change) are left out of "
          "the counts and tables; tables/points.csv lists them with in_grid = false.\n\n";
  if (counts.at("older_evaluation") > 0)
    md << "**Evaluated by an older mambamt:** " << counts.at("older_evaluation")
       << " completed store(s) lack results this version's evaluation writes or hold results it computes "
          "otherwise (their cells are empty); `mambamt sweep GRID --reevaluate` evaluates them again.\n\n";
  if (counts.at("unsealed") > 0)
    md << "**Stores without a seal:** " << core::h5::unsealed_advice(counts.at("unsealed"), sweep.run_dir) << ".\n\n";
  if (!sweep.problems.empty()) {
    md << "**Unreadable files (skipped):**\n\n";
    for (auto& p : sweep.problems) md << "- `" << md_cell(p) << "`\n";
    md << "\n";
  }
  md << "Cells: mean \u00b1 std over seeds, (n=k) seeds with a value; **bold**: best of the column; "
     << kMissingText << ": no value. The baseline and ablation tables show the columns a paper prints"
     << (table_files.empty() ? "" : "; the table files under Files hold every column") << ".\n\n";

  auto section = [&](const ReportTable& t, const char* level) {
    md << level << " " << t.title << "\n\n" << t.caption << ".\n\n" << table_markdown(t) << "\n";
  };
  // The main tables as a paper prints them; the rest of their columns are in tables.md and tables/.
  const std::vector<std::string> paper_columns = {"params",       "bleu", "chrf", "comet", "contrastive_accuracy",
                                                  "decode_tokens_per_s", "train_tokens_per_s", "peak_memory_mb"};
  auto brief_section = [&](const ReportTable& t, const char* level) {
    md << level << " " << t.title << "\n\n" << t.caption << ".\n\n" << table_markdown_brief(t, paper_columns) << "\n";
  };
  auto starts = [](const std::string& s, const char* p) { return s.rfind(p, 0) == 0; };
  for (auto& t : tables)
    if (t.name == "baselines") brief_section(t, "##");
  bool heading = false;
  for (auto& t : tables)
    if (starts(t.name, "ablation_")) {
      if (!heading) md << "## Ablations\n\nEach table varies one axis; the other axes stay at the base point.\n\n";
      heading = true;
      brief_section(t, "###");
    }
  heading = false;
  for (auto& t : tables)
    if (starts(t.name, "length_") || starts(t.name, "extrapolation_")) {
      if (!heading) md << "## Length sensitivity\n\n";
      heading = true;
      section(t, "###");
    }
  heading = false;
  for (auto& t : tables)
    if (starts(t.name, "document_") || starts(t.name, "contrastive_") || starts(t.name, "entities_")) {
      if (!heading) md << "## Document-level phenomena\n\n";
      heading = true;
      section(t, "###");
    }
  for (auto& t : tables)
    if (t.name == "cross_attention_gates" || t.name == "alignment_by_layer") section(t, "##");
  for (const char* what : {"length_bleu", "contrastive_pronoun", "entities_frequency"}) {
    bool found = false;
    for (auto& t : tables) found = found || t.name == what;
    if (!found) md << "_No completed store has the results behind `" << what << "` yet._\n\n";
  }

  md << signatures_markdown(sweep, test_set);

  if (!plots.empty()) {
    md << "## Plots\n\n";
    for (auto& p : plots) md << "### " << p.title << "\n\n![" << p.title << "](" << p.file << ")\n\n";
  }

  if (!explain.empty()) {
    md << "## Where the models look in the source\n\n"
       << "The first short test sentences of each model's first completed seed, translated by the model. "
          "Rows: the translation's tokens; columns: the source tokens. **Attention**: softmax weights over the "
          "source, averaged over the attention layers and heads (teacher-forced over the translation). "
          "**Occlusion**: each source token replaced by padding in turn; a cell is the relative change "
          "\u2016h(occluded) \u2212 h\u2016 / \u2016h\u2016 of the decoder's final hidden state "
          "(available for every kind, pure Mamba included).\n\n";
    std::string model;
    for (auto& e : explain) {
      if (e.model != model) {
        model = e.model;
        md << "### " << md_cell(model) << "\n\n";
      }
      md << "Sentence " << e.index + 1 << ": `" << md_cell(e.source) << "` \u2192 `" << md_cell(e.translation)
         << "`\n\n| attention | occlusion |\n|---|---|\n| "
         << (e.attention.empty() ? std::string("_no attention over the source_")
                                 : "![attention](" + e.attention + ")")
         << " | "
         << (e.occlusion.empty() ? std::string("_not stored_") : "![occlusion](" + e.occlusion + ")") << " |\n\n";
    }
  }

  std::vector<const SweepPoint*> open;
  for (auto& p : sweep.points)
    if (p.state != "completed") open.push_back(&p);
  if (!open.empty()) {
    md << "## Points not completed\n\n| id | label | seed | state | detail |\n|---|---|---:|---|---|\n";
    for (auto* p : open)
      md << "| `" << p->id << "` | " << md_cell(p->name.empty() ? axis_text(sweep, *p) : p->name) << " | " << p->seed
         << " | " << p->state << " | " << md_cell(point_detail(*p)) << " |\n";
    md << "\n";
  }
  md << "## All points\n\n| id | label | variant | seed | axes | state |\n|---|---|---|---:|---|---|\n";
  for (auto& p : sweep.points)
    md << "| `" << p.id << "` | " << md_cell(p.name) << " | " << md_cell(p.variant) << " | " << p.seed << " | "
       << md_cell(axis_text(sweep, p)) << " | " << p.state << " |\n";
  md << "\n## Files\n\n- [summary.h5](summary.h5): every aggregated number\n";
  for (auto& f : table_files) md << "- [" << f << "](" << f << ")\n";
  return md.str();
}

}  // namespace

std::vector<std::string> parse_formats(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
    if (b == std::string::npos) continue;
    item = item.substr(b, e - b + 1);
    if (std::find(kFormats.begin(), kFormats.end(), item) == kFormats.end())
      throw UsageError("--format: unknown format '" + item + "' (use md, csv, tex, json)");
    if (std::find(out.begin(), out.end(), item) == out.end()) out.push_back(item);
  }
  if (out.empty()) throw UsageError("--format: no format given (use md, csv, tex, json)");
  return out;
}

CollectReport collect(const CollectOptions& options, std::ostream& log) {
  for (auto& f : options.formats)
    if (std::find(kFormats.begin(), kFormats.end(), f) == kFormats.end())
      throw UsageError("unknown format '" + f + "' (use md, csv, tex, json)");
  SweepData sweep = load_sweep(options.run_dir, log);
  const std::string test_set = detail::choose_test_set(sweep, options.test_set);
  std::vector<ReportTable> tables = build_tables(sweep, test_set);
  SweepView view = detail::make_view(sweep, test_set);

  CollectReport report;
  report.out_dir = options.out_dir.empty() ? default_out_dir(sweep.run_dir, sweep.name) : options.out_dir;
  report.counts = state_counts(sweep);
  report.problems = sweep.problems;
  report.partial = report.counts.at("completed") < report.counts.at("total");
  const fs::path out(report.out_dir);
  core::make_dirs(out.string());
  auto put = [&](const std::string& rel, const std::string& text) {
    core::make_dirs((out / rel).parent_path().string());
    core::write_file_atomic((out / rel).string(), text);
    report.files.push_back((out / rel).string());
  };

  std::vector<PlotFile> plots;
  std::vector<detail::ExplainPlot> explain;
  if (options.plots) {
    plots = detail::write_plots(view, tables, out.string(), log);
    for (auto& p : plots) report.files.push_back((out / p.file).string());
    explain = detail::write_explain_plots(view, out.string(), log);
    for (auto& e : explain)
      for (const std::string* f : {&e.attention, &e.occlusion})
        if (!f->empty()) report.files.push_back((out / *f).string());
  }

  std::vector<std::string> table_files;
  if (wants(options, "md")) {
    std::ostringstream md;
    md << "# Tables of sweep `" << sweep.name << "`\n\n" << counts_line(report.counts) << "\n\n";
    for (auto& t : tables) md << "## " << t.title << "\n\n" << t.caption << ".\n\n" << table_markdown(t) << "\n";
    put("tables.md", md.str());
    table_files.push_back("tables.md");
  }
  if (wants(options, "csv")) {
    for (auto& t : tables) {
      put("tables/" + detail::file_stem(t.name) + ".csv", table_csv(t));
      table_files.push_back("tables/" + detail::file_stem(t.name) + ".csv");
    }
    put("tables/points.csv", points_csv(sweep));
    table_files.push_back("tables/points.csv");
  }
  if (wants(options, "tex")) {
    for (auto& t : tables) {
      put("tables/" + detail::file_stem(t.name) + ".tex", table_latex(t));
      table_files.push_back("tables/" + detail::file_stem(t.name) + ".tex");
    }
    put("tables.tex", latex_document(sweep, report.counts, tables));
    table_files.push_back("tables.tex");
  }
  if (wants(options, "json")) {
    for (auto& t : tables) {
      put("tables/" + detail::file_stem(t.name) + ".json", dump_json(table_records(t)) + "\n");
      table_files.push_back("tables/" + detail::file_stem(t.name) + ".json");
    }
    put("summary.json", dump_json(summary_json(sweep, test_set, report.counts, tables)) + "\n");
    table_files.push_back("summary.json");
  }

  write_summary_h5((out / "summary.h5").string(), sweep, test_set, report.counts, tables, view);
  report.files.push_back((out / "summary.h5").string());
  put("report.md", report_markdown(sweep, test_set, report.counts, tables, plots, table_files, explain));

  log << "collect: " << counts_line(report.counts) << "\n";
  if (report.counts.at("unsealed") > 0)
    log << "collect: " << core::h5::unsealed_advice(report.counts.at("unsealed"), sweep.run_dir) << "\n";
  log << "collect: wrote " << report.files.size() << " files to " << report.out_dir << "\n";
  report.tables = std::move(tables);
  return report;
}

}  // namespace mambamt::results
