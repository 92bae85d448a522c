// `mambamt store show DIR`: a readable summary of one experiment store.
// `mambamt store seal PATH`: seal HDF5 files written without a seal.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>

#include "cli/commands.h"
#include "core/checkpoint.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/hdf5.h"
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
            core::h5::set_unsealed_reads_in_child(true);  // never under MPI: it may fork
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

Command store_seal_command() {
  CommandSpec spec;
  spec.name = "store seal";
  spec.summary = "seal HDF5 files written without a seal (h5py, older mambamt) so damage to them is caught";
  spec.positionals = {"PATH"};
  spec.options = {
      {"--check", "", "only report each file's seal; write nothing"},
      {"--force", "", "also seal files whose seal does not hold (changed since they were sealed), that were never "
                      "sealed, or whose user block is another program's (that block is dropped): they are sealed "
                      "as they are now"},
      {"--timeout", "S", "seconds a file's copy may take before HDF5 is judged to loop on a damaged file "
                         "(default 30, and 1 more per 10 MB)"},
  };
  spec.description =
      "PATH is an .h5 file or a directory: every .h5 file below it (a run directory, an experiment directory).\n"
      "mambamt seals every HDF5 file it writes and checks the seal before it reads one, so a file damaged on\n"
      "disk is an error naming it; a file without a seal is read unchecked, and HDF5 can crash or loop on it\n"
      "once it is damaged (docs/STORE.md). This command rewrites each file without a seal as a sealed copy\n"
      "(every object read through HDF5, so a file it cannot read is left alone) and renames it over the file;\n"
      "hard links stay hard links, inside the file too. Files sealed already are checked (read whole) and not\n"
      "touched. Run it while no sweep writes under PATH (a file a writer replaces while it is copied is left\n"
      "as the writer left it). Each file is copied in a child process: a damaged file HDF5 crashes or loops\n"
      "on is left alone with a message. Exit status 0 when every file ends sealed, 1 otherwise.";
  return {spec, [](const ParsedArgs& a) {
            const bool check = a.has("--check"), force = a.has("--force");
            if (check && force) throw UsageError("store seal: --check writes nothing, so --force has no use with it");
            const double timeout = a.get_double("--timeout", -1);
            if (a.has("--timeout") && timeout <= 0) throw UsageError("--timeout: seconds > 0, not " + a.get("--timeout"));
            const std::string root = a.positional[0];
            std::error_code ec;
            const fs::file_status top = fs::status(root, ec);
            if (!fs::exists(top)) throw InputError(root + ": no such file or directory");
            // The files, grouped by inode: the hard links of one file are sealed once.
            std::map<std::pair<dev_t, ino_t>, std::vector<std::string>> files;
            auto add = [&files](const std::string& path) {
              struct stat st {};
              if (::stat(path.c_str(), &st) != 0) throw InputError(path + ": cannot stat: " + std::strerror(errno));
              files[{st.st_dev, st.st_ino}].push_back(path);
            };
            if (fs::is_directory(top)) {
              const fs::recursive_directory_iterator end;
              for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != end; it.increment(ec)) {
                const auto& e = *it;
                if (e.path().extension() == ".h5" && e.symlink_status().type() == fs::file_type::regular)
                  add(e.path().string());
              }
              if (ec) throw InputError(root + ": cannot list: " + ec.message());
            } else {
              add(fs::canonical(root).string());  // a link's target
            }
            std::vector<std::pair<std::vector<std::string>, std::pair<dev_t, ino_t>>> groups;  // by first name
            for (auto& [id, paths] : files) {
              std::sort(paths.begin(), paths.end());
              groups.push_back({paths, id});
            }
            std::sort(groups.begin(), groups.end());

            size_t holds = 0, now = 0, left = 0, links = 0;
            for (const auto& [paths, id] : groups) {
              const std::string& path = paths.front();
              const std::string also =
                  paths.size() > 1 ? " (and its " + std::to_string(paths.size() - 1) + " other hard link(s))" : "";
              core::h5::SealCheck seal;
              try {
                seal = core::h5::check_seal(path);
              } catch (const InputError& e) {
                std::cout << path << also << ": left alone: " << core::h5::after_file(path, e.what()) << "\n";
                ++left;
                continue;
              }
              using core::h5::SealState;
              if (seal.state == SealState::holds) {
                ++holds;
                continue;
              }
              const std::string what = seal.state == SealState::none ? "no seal" : seal.why;
              if (check) {
                std::cout << path << also << ": " << what << "\n";
                ++left;
                continue;
              }
              if (seal.state == SealState::not_hdf5 || (seal.state != SealState::none && !force)) {
                std::cout << path << also << ": left alone: " << what
                          << (seal.state == SealState::not_hdf5 ? "" : "; --force seals it as it is now") << "\n";
                ++left;
                continue;
              }
              std::error_code size_ec;
              const uint64_t size = fs::file_size(path, size_ec), bytes = size_ec ? 0 : size;
              const std::string failed =
                  core::h5::reseal_in_child(path, timeout > 0 ? timeout : core::h5::child_read_timeout(bytes));
              if (!failed.empty()) {
                std::cout << path << also << ": left alone: " << failed << "\n";
                ++left;
                continue;
              }
              // The other names of the old file name the sealed one now.
              for (size_t i = 1; i < paths.size(); ++i) {
                struct stat st {};
                std::string why;
                if (::stat(paths[i].c_str(), &st) != 0 || st.st_dev != id.first || st.st_ino != id.second) {
                  why = "it is another file now";
                } else {
                  try {
                    core::replace_file_atomic(paths[i], [&path](const std::string& tmp) {
                      if (::link(path.c_str(), tmp.c_str()) != 0) throw Error(std::strerror(errno));
                    });
                  } catch (const Error& e) {
                    why = e.what();
                  }
                }
                if (!why.empty()) {
                  std::cout << paths[i] << ": left alone: not made a link to the sealed " << path << ": " << why
                            << "\n";
                  ++left;
                  continue;
                }
                ++links;
              }
              std::cout << path << also
                        << (seal.state == SealState::none ? ": sealed (it had no seal)"
                                                          : ": sealed as it is now (" + what + ")")
                        << "\n";
              ++now;
            }
            const size_t total = holds + now + left;
            std::cout << "store seal " << root << ": " << total << " file(s), " << holds << " sealed already, ";
            if (check)
              std::cout << left << " not (listed above)\n";
            else
              std::cout << now << " sealed now" << (links ? " (" + std::to_string(links) + " more hard links)" : "")
                        << ", " << left << " left alone\n";
            return left == 0 ? 0 : 1;
          }};
}

}  // namespace mambamt::cli
