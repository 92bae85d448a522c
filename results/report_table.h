#pragma once
// The collector's result tables: one model (rows of cells holding mean ± std
// over seeds with the number of values, columns that say which direction is
// better) rendered to Markdown, CSV, LaTeX (booktabs) and JSON, so every format
// shows the same numbers.
//
// Missing values: a cell without a value renders as "–" in Markdown, "--" (an
// en dash) in LaTeX, an empty field in CSV and null in JSON (pandas reads both
// as NaN). Why a row has no values is in its status ("failed", "running", ...).
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace mambamt::results {

// Which direction of a column is better (the best value is marked).
enum class Better { kNone, kHigher, kLower };

struct ReportColumn {
  // Machine name, used for CSV/JSON/HDF5 column names: "bleu", "decode_tokens_per_s".
  std::string key;
  // Header in Markdown and LaTeX: "BLEU", "Decode tok/s".
  std::string title;
  // Digits after the decimal point in the text formats (CSV and JSON keep every digit).
  int decimals = 2;
  Better better = Better::kNone;
  // A percentage change against a reference row, rendered "+12.3%" / "−4.5%";
  // no std, no n, never marked best.
  bool relative = false;
  // The text formats show mean * display_scale followed by suffix (parameters in
  // millions: 1e-6 and "M"); CSV, JSON and HDF5 keep the unscaled number.
  double display_scale = 1;
  std::string suffix;
  // A p-value column: the key of the metric column whose difference it tests
  // (table_markdown_brief marks that column's cells instead of showing it).
  std::string tests;
};

struct ReportCell {
  double mean = std::numeric_limits<double>::quiet_NaN();
  // Sample standard deviation (n - 1 in the denominator); NaN when n < 2.
  double std = std::numeric_limits<double>::quiet_NaN();
  std::int64_t n = 0;      // finite values aggregated (one per seed)
  bool best = false;       // best of its column (see mark_best)
  bool reference = false;  // relative columns: this row is the reference itself

  bool has_value() const { return n > 0; }
};

struct ReportRow {
  std::string key;     // machine label: the axis value as TOML text, or the model name
  std::string label;   // shown in the text formats
  std::string status;  // state of the row's points: "2 completed", "1 completed, 1 failed", "missing"
  bool base = false;   // the base point of the sweep
  std::vector<ReportCell> cells;  // one per column
};

struct ReportTable {
  std::string name;       // file stem and HDF5 group name: "ablation_model.d_state"
  std::string title;      // section heading
  std::string caption;    // one sentence under the heading / LaTeX caption
  std::string row_title;  // header of the label column and CSV key column: "model.d_state", "model"
  std::vector<ReportColumn> columns;
  std::vector<ReportRow> rows;
};

// Mean, sample std and count of the finite values (NaNs are skipped).
ReportCell summarize(const std::vector<double>& values);

// Marks the best cell of every column with a direction: the highest (or lowest)
// mean among the rows with a value; ties are all marked. Columns with fewer than
// two rows holding a value mark nothing.
void mark_best(ReportTable& table);

// The number of a cell as text ("31.00 ± 1.41", "+12.3%", "–"), without the n.
std::string format_value(const ReportColumn& column, const ReportCell& cell);

// Renderers. Markdown: a pipe table with a status column, "**best**" and "(n=k)"
// in every cell with a value. CSV: RFC 4180, one line per row, columns
// row_title, label, status, base, then per metric column `key`, `key_std`,
// `key_n`, `key_best` (relative columns: `key` only). JSON: the same records as
// an array of objects. LaTeX: a table environment with booktabs rules (needs
// \usepackage{booktabs,graphicx} in the document).
std::string table_markdown(const ReportTable& table);
std::string table_csv(const ReportTable& table);
nlohmann::ordered_json table_records(const ReportTable& table);
std::string table_latex(const ReportTable& table);

// The table as a paper prints it (report.md's main tables): the label, the
// columns of `keys` in the table's order, and a status column only where some
// row is not completed like the others. A metric's cell carries "†" where
// its p-value column (ReportColumn::tests) says p < 0.05 and "‡" where
// p < 0.01; when every shown cell holds the same number of seeds, the cells
// drop their "(n=k)". A legend line under the table says both.
std::string table_markdown_brief(const ReportTable& table, const std::vector<std::string>& keys);

// Escapes text for LaTeX (specials, backslash, ~ and ^; "–" becomes --).
std::string latex_escape(std::string_view text);
// Quotes a CSV field when it needs it.
std::string csv_field(std::string_view text);
// Shortest text that reads back to the same double ("0.1", "31", "1e-05").
std::string shortest_number(double value);

// What a missing value looks like in Markdown.
inline constexpr const char* kMissingText = "\u2013";

}  // namespace mambamt::results
