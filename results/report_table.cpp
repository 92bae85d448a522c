#include "results/report_table.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

namespace mambamt::results {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  std::string s = buf;
  if (s == "-0" || s.rfind("-0.", 0) == 0) {
    // "-0.00" for a tiny negative value reads as a sign error; drop the sign.
    bool all_zero = s.find_first_not_of("-0.") == std::string::npos;
    if (all_zero) s.erase(0, 1);
  }
  return s;
}

// "+12.3%" / "−4.5%" (U+2212 minus) / "0.0%".
std::string relative_text(double pct, int decimals, bool unicode_minus) {
  std::string body = fixed(std::fabs(pct), decimals);
  bool zero = body.find_first_not_of("0.") == std::string::npos;
  if (zero) return body + "%";
  if (pct > 0) return "+" + body + "%";
  return (unicode_minus ? "\u2212" : "-") + body + "%";
}

std::string md_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += "\\|";
    else if (c == '\n') out += ' ';
    else out += c;
  }
  return out;
}

std::string number_or_empty(double v) { return std::isfinite(v) ? shortest_number(v) : std::string(); }

nlohmann::ordered_json number_or_null(double v) {
  return std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json();
}

}  // namespace

ReportCell summarize(const std::vector<double>& values) {
  ReportCell c;
  double sum = 0;
  for (double v : values)
    if (std::isfinite(v)) {
      sum += v;
      ++c.n;
    }
  if (c.n == 0) return c;
  c.mean = sum / double(c.n);
  if (c.n >= 2) {
    double ss = 0;
    for (double v : values)
      if (std::isfinite(v)) ss += (v - c.mean) * (v - c.mean);
    c.std = std::sqrt(ss / double(c.n - 1));
  }
  return c;
}

void mark_best(ReportTable& table) {
  for (size_t c = 0; c < table.columns.size(); ++c) {
    const ReportColumn& col = table.columns[c];
    for (auto& row : table.rows) row.cells.at(c).best = false;
    if (col.better == Better::kNone || col.relative) continue;
    double best = kNaN, worst = kNaN;
    int with_value = 0;
    for (auto& row : table.rows) {
      const ReportCell& cell = row.cells.at(c);
      if (!cell.has_value() || !std::isfinite(cell.mean)) continue;
      ++with_value;
      if (!std::isfinite(best) || (col.better == Better::kHigher ? cell.mean > best : cell.mean < best)) best = cell.mean;
      if (!std::isfinite(worst) || (col.better == Better::kHigher ? cell.mean < worst : cell.mean > worst))
        worst = cell.mean;
    }
    // One value, or every row the same (e.g. 0% recall of unseen entities
    // everywhere): no row is better than another.
    if (with_value < 2 || best == worst) continue;
    for (auto& row : table.rows) {
      ReportCell& cell = row.cells.at(c);
      if (cell.has_value() && cell.mean == best) cell.best = true;
    }
  }
}

std::string format_value(const ReportColumn& column, const ReportCell& cell) {
  if (column.relative) {
    if (cell.reference) return "ref.";
    if (!std::isfinite(cell.mean)) return kMissingText;
    return relative_text(cell.mean, column.decimals, true);
  }
  if (!cell.has_value() || !std::isfinite(cell.mean)) return kMissingText;
  std::string s = fixed(cell.mean * column.display_scale, column.decimals) + column.suffix;
  if (std::isfinite(cell.std)) s += " \u00b1 " + fixed(cell.std * column.display_scale, column.decimals);
  return s;
}

std::string shortest_number(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buf[64];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, value);
    if (std::strtod(buf, nullptr) == value) break;
  }
  return buf;
}

std::string csv_field(std::string_view text) {
  if (text.find_first_of(",\"\n\r") == std::string_view::npos) return std::string(text);
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string latex_escape(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    switch (c) {
      case '\\': out += "\\textbackslash{}"; break;
      case '&': case '%': case '$': case '#': case '_': case '{': case '}':
        out += '\\';
        out += c;
        break;
      case '~': out += "\\textasciitilde{}"; break;
      case '^': out += "\\textasciicircum{}"; break;
      case '<': out += "\\textless{}"; break;
      case '>': out += "\\textgreater{}"; break;
      case '"': out += "''"; break;
      default:
        if (text.substr(i, 3) == "\u2013") {
          out += "--";
          i += 2;
        } else if (text.substr(i, 3) == "\u2212") {
          out += "$-$";
          i += 2;
        } else if (text.substr(i, 2) == "\u00b1") {
          out += "$\\pm$";
          i += 1;
        } else {
          out += c;
        }
    }
  }
  return out;
}

std::string table_markdown(const ReportTable& table) {
  std::ostringstream out;
  out << "| " << md_escape(table.row_title) << " | status |";
  for (auto& col : table.columns) out << " " << md_escape(col.title) << " |";
  out << "\n|---|---|";
  for (size_t i = 0; i < table.columns.size(); ++i) out << "---:|";
  out << "\n";
  for (auto& row : table.rows) {
    out << "| " << md_escape(row.label) << (row.base ? " (base)" : "") << " | " << md_escape(row.status) << " |";
    for (size_t c = 0; c < table.columns.size(); ++c) {
      const ReportColumn& col = table.columns[c];
      const ReportCell& cell = row.cells.at(c);
      std::string v = format_value(col, cell);
      if (cell.best) v = "**" + v + "**";
      if (!col.relative && cell.has_value()) v += " (n=" + std::to_string(cell.n) + ")";
      out << " " << v << " |";
    }
    out << "\n";
  }
  return out.str();
}

std::string table_markdown_brief(const ReportTable& table, const std::vector<std::string>& keys) {
  std::vector<size_t> shown;
  for (size_t c = 0; c < table.columns.size(); ++c)
    if (std::find(keys.begin(), keys.end(), table.columns[c].key) != keys.end()) shown.push_back(c);
  // The p-value column testing each shown column, if any.
  std::vector<long> p_of(table.columns.size(), -1);
  for (size_t c = 0; c < table.columns.size(); ++c)
    for (size_t q = 0; q < table.columns.size(); ++q)
      if (!table.columns[q].tests.empty() && table.columns[q].tests == table.columns[c].key)
        p_of[c] = static_cast<long>(q);
  // Seeds once for the table where every shown value has the same count.
  std::set<std::int64_t> counts;
  bool marks = false;
  for (const ReportRow& row : table.rows)
    for (size_t c : shown) {
      if (!table.columns[c].relative && row.cells.at(c).has_value()) counts.insert(row.cells.at(c).n);
      marks = marks || p_of[c] >= 0;
    }
  const bool same_n = counts.size() <= 1;
  bool status = false;
  for (const ReportRow& row : table.rows)
    status = status || row.status != table.rows.front().status || row.status.find(" completed") == std::string::npos ||
             row.status.find(',') != std::string::npos;

  std::ostringstream out;
  out << "| " << md_escape(table.row_title) << " |" << (status ? " status |" : "");
  for (size_t c : shown) out << " " << md_escape(table.columns[c].title) << " |";
  out << "\n|---|" << (status ? "---|" : "");
  for (size_t i = 0; i < shown.size(); ++i) out << "---:|";
  out << "\n";
  for (const ReportRow& row : table.rows) {
    out << "| " << md_escape(row.label) << (row.base ? " (base)" : "") << " |";
    if (status) out << " " << md_escape(row.status) << " |";
    for (size_t c : shown) {
      const ReportColumn& col = table.columns[c];
      const ReportCell& cell = row.cells.at(c);
      std::string v = format_value(col, cell);
      if (cell.best) v = "**" + v + "**";
      if (p_of[c] >= 0) {
        const ReportCell& p = row.cells.at(static_cast<size_t>(p_of[c]));
        if (p.has_value() && std::isfinite(p.mean) && p.mean < 0.05) v += p.mean < 0.01 ? "\u2021" : "\u2020";
      }
      if (!same_n && !col.relative && cell.has_value()) v += " (n=" + std::to_string(cell.n) + ")";
      out << " " << v << " |";
    }
    out << "\n";
  }
  std::string legend;
  if (same_n && !counts.empty())
    legend = std::to_string(*counts.begin()) + (*counts.begin() == 1 ? " seed" : " seeds") + " per cell";
  if (marks)
    legend += (legend.empty() ? "" : "; ") +
              std::string("\u2020 p < 0.05, \u2021 p < 0.01 in the caption's paired test (the largest p over the seeds)");
  if (!legend.empty()) out << "\n" << legend << ".\n";
  return out.str();
}

std::string table_csv(const ReportTable& table) {
  std::ostringstream out;
  out << csv_field(table.row_title.empty() ? "row" : table.row_title) << ",label,status,base";
  for (auto& col : table.columns) {
    out << "," << csv_field(col.key);
    if (!col.relative)
      out << "," << csv_field(col.key + "_std") << "," << csv_field(col.key + "_n") << ","
          << csv_field(col.key + "_best");
  }
  out << "\n";
  for (auto& row : table.rows) {
    out << csv_field(row.key) << "," << csv_field(row.label) << "," << csv_field(row.status) << ","
        << (row.base ? "true" : "false");
    for (size_t c = 0; c < table.columns.size(); ++c) {
      const ReportCell& cell = row.cells.at(c);
      out << "," << number_or_empty(cell.reference ? 0.0 : cell.mean);
      if (!table.columns[c].relative)
        out << "," << number_or_empty(cell.std) << "," << cell.n << "," << (cell.best ? "true" : "false");
    }
    out << "\n";
  }
  return out.str();
}

nlohmann::ordered_json table_records(const ReportTable& table) {
  nlohmann::ordered_json records = nlohmann::ordered_json::array();
  for (auto& row : table.rows) {
    nlohmann::ordered_json r = nlohmann::ordered_json::object();
    r[table.row_title.empty() ? "row" : table.row_title] = row.key;
    r["label"] = row.label;
    r["status"] = row.status;
    r["base"] = row.base;
    for (size_t c = 0; c < table.columns.size(); ++c) {
      const ReportColumn& col = table.columns[c];
      const ReportCell& cell = row.cells.at(c);
      r[col.key] = number_or_null(cell.reference ? 0.0 : cell.mean);
      if (!col.relative) {
        r[col.key + "_std"] = number_or_null(cell.std);
        r[col.key + "_n"] = cell.n;
        r[col.key + "_best"] = cell.best;
      }
    }
    records.push_back(std::move(r));
  }
  return records;
}

std::string table_latex(const ReportTable& table) {
  // \label takes no escapes: letters, digits and '-' only.
  std::string label;
  for (char c : table.name) label += std::isalnum(static_cast<unsigned char>(c)) ? c : '-';
  std::ostringstream out;
  out << "\\begin{table}[htbp]\n\\centering\n\\caption{" << latex_escape(table.caption.empty() ? table.title : table.caption)
      << "}\n\\label{tab:" << label << "}\n";
  // Wide ablation tables are scaled to the text width rather than overflowing.
  out << "\\resizebox{\\ifdim\\width>\\linewidth\\linewidth\\else\\width\\fi}{!}{%\n";
  out << "\\begin{tabular}{ll";
  for (size_t i = 0; i < table.columns.size(); ++i) out << "r";
  out << "}\n\\toprule\n" << latex_escape(table.row_title) << " & Status";
  for (auto& col : table.columns) out << " & " << latex_escape(col.title);
  out << " \\\\\n\\midrule\n";
  for (auto& row : table.rows) {
    out << latex_escape(row.label) << (row.base ? " (base)" : "") << " & " << latex_escape(row.status);
    for (size_t c = 0; c < table.columns.size(); ++c) {
      const ReportColumn& col = table.columns[c];
      const ReportCell& cell = row.cells.at(c);
      std::string v = latex_escape(format_value(col, cell));
      if (cell.best) v = "\\textbf{" + v + "}";
      if (!col.relative && cell.has_value()) v += "\\,{\\scriptsize(" + std::to_string(cell.n) + ")}";
      out << " & " << v;
    }
    out << " \\\\\n";
  }
  out << "\\bottomrule\n\\end{tabular}}\n\\end{table}\n";
  return out.str();
}

}  // namespace mambamt::results
