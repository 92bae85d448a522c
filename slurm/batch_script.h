#pragma once
// Reading and checking batch scripts (jobs/*.slurm, jobs/*.sge): the mistakes
// that cost a queue wait before they show. sbatch itself (`sbatch --test-only`)
// checks option syntax and resources; this checks what sbatch accepts silently.
#include <cstdint>
#include <string>
#include <vector>

namespace mambamt::slurm {

// One embedded option line: "#SBATCH --time=1:00:00" -> {line, "--time", "1:00:00"};
// "#$ -l h_rt=02:00:00" -> {line, "-l", "h_rt=02:00:00"}.
struct Directive {
  long line = 0;
  std::string option;
  std::string value;  // "" when the option has none
};

// Directive lines starting with `prefix` ("#SBATCH", "#$"), in file order, with
// trailing "# comments" removed. Commented-out settings ("##SBATCH", "# #SBATCH")
// are not directives.
std::vector<Directive> parse_directives(const std::string& text, const std::string& prefix);

// The value of `--signal=[{R|B}:]<sig>[@<lead>]`.
struct SignalOption {
  bool batch_shell_only = false;  // B: only the batch shell gets it, not the steps
  std::string signal;             // name without SIG ("USR2") or number as written
  int64_t lead_s = 60;            // Slurm's default lead
};
// Throws InputError for a malformed value.
SignalOption parse_signal_option(const std::string& value);

// Problems in an sbatch script, each "file:line: what": a missing shebang;
// #SBATCH lines after the first command (sbatch ignores them); an unknown
// --signal or one without a trap in a script that gets it in the batch shell
// (B:, bash would die of it); --requeue without --open-mode=append (a requeued
// job truncates its own log); a malformed --time.
std::vector<std::string> check_sbatch_script(const std::string& text, const std::string& file);

}  // namespace mambamt::slurm
