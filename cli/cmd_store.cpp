// `mambamt store show DIR`: a readable summary of one experiment store.
#include <algorithm>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "cli/commands.h"
#include "core/checkpoint.h"
#include "core/error.h"
#include "core/store.h"

namespace fs = std::filesystem;

namespace mambamt::cli {

namespace {

std::string format_time(double t) {
  if (t <= 0) return "-";
  std::time_t s = static_cast<std::time_t>(t);
  std::tm tm{};
  localtime_r(&s, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

std::string number(double v) {
  if (std::isnan(v)) return "n/a";
  std::ostringstream os;
  double a = std::fabs(v);
  if (a != 0 && (a >= 1e6 || a < 1e-3))
    os << std::setprecision(4) << std::scientific << v;
  else
    os << std::setprecision(6) << v;
  return os.str();
}

std::string size_text(uintmax_t bytes) {
  std::ostringstream os;
  if (bytes >= (1u << 20))
    os << std::fixed << std::setprecision(1) << bytes / double(1u << 20) << " MiB";
  else
    os << std::fixed << std::setprecision(1) << bytes / 1024.0 << " KiB";
  return os.str();
}

}  // namespace

Command store_show_command() {
  CommandSpec spec;
  spec.name = "store show";
  spec.summary = "summarise an experiment store: status, metrics, results, checkpoints";
  spec.positionals = {"DIR"};
  spec.options = {{"--config", "", "also print the experiment's canonical config"}};
  spec.description = "DIR is an experiment directory (runs/<sweep>/exp/<id>) or its store.h5.";
  return {spec, [](const ParsedArgs& a) {
            std::string dir = a.positional[0];
            std::string path = dir;
            if (fs::is_directory(dir)) {
              path = (fs::path(dir) / "store.h5").string();
            } else {
              dir = fs::path(dir).parent_path().string();
            }
            core::StoreSnapshot s = core::ExperimentStore::read(path);
            auto& st = s.status;
            std::cout << "store       " << path << "\n"
                      << "experiment  " << s.experiment_id << (s.name.empty() ? "" : "  (" + s.name + ")") << "\n"
                      << "sweep       " << (s.sweep.empty() ? "-" : s.sweep) << "\n"
                      << "state       " << core::to_string(st.state) << ", attempt " << st.attempts << ", step "
                      << st.step << "/" << st.total_steps << "\n"
                      << "host        " << (st.host.empty() ? "-" : st.host) << (st.pid ? " pid " + std::to_string(st.pid) : "")
                      << (st.job_id.empty() ? "" : " job " + st.job_id) << "\n"
                      << "times       created " << format_time(st.created) << ", started " << format_time(st.started)
                      << ", updated " << format_time(st.updated) << ", finished " << format_time(st.finished) << "\n";
            if (!st.last_error.empty()) std::cout << "last error  " << st.last_error << "\n";

            std::cout << "\nmetrics (" << s.metrics.size() << ")\n";
            for (auto& [name, pts] : s.metrics) {
              std::cout << "  " << std::left << std::setw(20) << name << std::right << std::setw(7) << pts.size()
                        << " points";
              if (!pts.empty()) {
                double lo = pts[0].value, hi = pts[0].value;
                for (auto& p : pts) lo = std::min(lo, p.value), hi = std::max(hi, p.value);
                std::cout << "  last " << number(pts.back().value) << " @ step " << pts.back().step << "  min "
                          << number(lo) << "  max " << number(hi);
              }
              std::cout << "\n";
            }
            if (!s.scalars.empty() || !s.tables.empty() || !s.texts.empty()) {
              std::cout << "\nresults\n";
              for (auto& [name, v] : s.scalars) std::cout << "  " << std::left << std::setw(34) << name << number(v) << "\n";
              for (auto& [name, t] : s.tables) {
                std::cout << "  " << name << " (" << t.rows.size() << " x " << t.columns.size() << ")";
                auto ends = [&name](const std::string& tail) {
                  return name.size() > tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
                };
                const bool comet = ends("comet_segments"), segments = !comet && ends("segments"),
                           examples = ends("/examples"), sentences = name == "alignment/sentences";
                if (comet || segments || examples || sentences || t.rows.size() > 20) {
                  std::cout << (comet       ? ": per-segment COMET scores (mambamt compare uses them)\n"
                                : segments  ? ": per-segment statistics (mambamt compare uses them)\n"
                                : examples  ? ": per-example outcomes (the collector's paired tests use them)\n"
                                : sentences ? ": per-sentence alignment counts (the paired tests of AER use them)\n"
                                            : ": not shown (more than 20 rows)\n");
                  continue;
                }
                std::cout << "\n";
                int label = 12;  // the row labels' column: as wide as the longest
                for (auto& r : t.rows) label = std::max(label, static_cast<int>(r.size()) + 1);
                std::cout << "    " << std::setw(label) << "";
                for (auto& c : t.columns) std::cout << std::right << std::setw(12) << c;
                std::cout << "\n";
                for (size_t r = 0; r < t.rows.size(); ++r) {
                  std::cout << "    " << std::left << std::setw(label) << t.rows[r];
                  for (size_t c = 0; c < t.columns.size(); ++c) std::cout << std::right << std::setw(12) << number(t.at(r, c));
                  std::cout << "\n";
                }
              }
              for (auto& [name, v] : s.texts) std::cout << "  " << std::left << std::setw(34) << name << v << "\n";
            }
            core::CheckpointDir ckpt((fs::path(dir) / "ckpt").string());
            auto steps = ckpt.steps();
            std::cout << "\ncheckpoints (" << steps.size() << ")\n";
            for (auto step : steps)
              std::cout << "  step " << std::setw(8) << step << "  " << size_text(fs::file_size(ckpt.path_for_step(step)))
                        << "  " << ckpt.path_for_step(step) << "\n";
            if (fs::exists(ckpt.best_path()))
              std::cout << "  best           " << size_text(fs::file_size(ckpt.best_path())) << "  " << ckpt.best_path() << "\n";
            if (!s.system.empty()) {
              std::cout << "\nsystem\n";
              for (auto& [k, v] : s.system) std::cout << "  " << std::left << std::setw(16) << k << v << "\n";
            }
            if (a.has("--config")) std::cout << "\nconfig\n" << s.config;
            return 0;
          }};
}

}  // namespace mambamt::cli
