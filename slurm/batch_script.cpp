#include "slurm/batch_script.h"

#include <cctype>
#include <regex>
#include <sstream>

#include "core/error.h"
#include "core/signals.h"
#include "slurm/detail/text.h"
#include "slurm/requeue.h"

namespace mambamt::slurm {
namespace {

using detail::trim;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

// A line that makes bash do something (sbatch stops reading #SBATCH at the first one).
bool is_command(const std::string& line) {
  const std::string t = trim(line);
  return !t.empty() && t[0] != '#';
}

// Whether a (non-comment) line traps `sig`: "trap '...' USR2", or a trap with a
// variable signal inside a loop whose word list names it ("for s in USR1 USR2; do trap ... \"$s\"").
bool traps_signal(const std::vector<std::string>& lines, const std::string& sig) {
  const std::regex named("\\btrap\\b.*\\b(SIG)?" + sig + "\\b");
  const std::regex variable("\\btrap\\b.*\\$");
  const std::regex loop("\\bfor\\b.*\\bin\\b.*\\b(SIG)?" + sig + "\\b");
  bool loop_names_it = false, variable_trap = false;
  for (const auto& line : lines) {
    const std::string t = trim(line);
    if (t.empty() || t[0] == '#') continue;
    if (std::regex_search(t, named)) return true;
    loop_names_it = loop_names_it || std::regex_search(t, loop);
    variable_trap = variable_trap || std::regex_search(t, variable);
  }
  return loop_names_it && variable_trap;
}

}  // namespace

std::vector<Directive> parse_directives(const std::string& text, const std::string& prefix) {
  std::vector<Directive> out;
  const auto lines = lines_of(text);
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    if (line.compare(0, prefix.size(), prefix) != 0) continue;
    std::string rest = line.substr(prefix.size());
    if (rest.empty() || !std::isspace(static_cast<unsigned char>(rest[0]))) continue;
    if (const auto hash = rest.find(" #"); hash != std::string::npos) rest = rest.substr(0, hash);
    std::istringstream words(rest);
    std::string word;
    std::vector<std::string> tokens;
    while (words >> word) tokens.push_back(word);
    // SGE allows several options on one line ("#$ -cwd -V"); so does #SBATCH in practice.
    for (size_t k = 0; k < tokens.size(); ++k) {
      Directive d;
      d.line = static_cast<long>(i + 1);
      const std::string& t = tokens[k];
      if (const auto eq = t.find('='); t.rfind("--", 0) == 0 && eq != std::string::npos) {
        d.option = t.substr(0, eq);
        d.value = t.substr(eq + 1);
      } else {
        d.option = t;
        if (k + 1 < tokens.size() && tokens[k + 1][0] != '-') d.value = tokens[++k];
      }
      out.push_back(d);
    }
  }
  return out;
}

SignalOption parse_signal_option(const std::string& value) {
  static const std::regex re(R"(^(?:([RB]{1,2}):)?([A-Za-z0-9]+)(?:@([0-9]+))?$)");
  std::smatch m;
  if (!std::regex_match(value, m, re))
    throw InputError("--signal=" + value + ": expected [{R|B}:]<signal>[@<seconds>]");
  SignalOption s;
  s.batch_shell_only = m[1].matched && m[1].str().find('B') != std::string::npos;
  s.signal = m[2].str();
  if (s.signal.rfind("SIG", 0) == 0) s.signal = s.signal.substr(3);
  if (m[3].matched) s.lead_s = std::stoll(m[3].str());
  return s;
}

std::vector<std::string> check_sbatch_script(const std::string& text, const std::string& file) {
  std::vector<std::string> problems;
  auto problem = [&](long line, const std::string& what) { problems.push_back(located(file, line, 0, what)); };
  const auto lines = lines_of(text);
  if (lines.empty() || lines[0].rfind("#!", 0) != 0) problem(1, "no #! line: sbatch needs an interpreter line");

  long first_command = 0;
  for (size_t i = 0; i < lines.size() && !first_command; ++i)
    if (is_command(lines[i])) first_command = static_cast<long>(i + 1);

  bool requeue = false, append = false;
  long requeue_line = 0;
  for (const auto& d : parse_directives(text, "#SBATCH")) {
    if (first_command && d.line > first_command)
      problem(d.line, d.option + " comes after the first command (line " + std::to_string(first_command) +
                          "): sbatch ignores it");
    if (d.option.rfind("-", 0) != 0) problem(d.line, "'" + d.option + "' is not an option");
    if (d.option == "--requeue") {
      requeue = true;
      requeue_line = d.line;
    }
    if (d.option == "--open-mode" && d.value == "append") append = true;
    if (d.option == "--time" || d.option == "-t") {
      try {
        parse_slurm_duration(d.value);
      } catch (const InputError& e) {
        problem(d.line, std::string("--time: ") + e.what());
      }
    }
    if (d.option == "--signal") {
      try {
        const auto s = parse_signal_option(d.value);
        const bool numeric = s.signal.find_first_not_of("0123456789") == std::string::npos;
        if (!numeric) core::signal_number(s.signal);
        if (s.batch_shell_only) {
          // bash's default action for USR1/USR2 is to die: the script must trap it.
          if (!traps_signal(lines, s.signal))
            problem(d.line, "--signal=" + d.value + " goes to the batch shell, which has no 'trap ... " + s.signal +
                                "': bash would die of it instead of passing it on");
        }
      } catch (const InputError& e) {
        problem(d.line, e.what());
      }
    }
  }
  if (requeue && !append)
    problem(requeue_line, "--requeue without --open-mode=append: a requeued job truncates its own output file");
  return problems;
}

}  // namespace mambamt::slurm
