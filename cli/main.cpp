// mambamt: the one binary. The only place where exceptions become messages
// and exit codes: 0 success, 1 failure, 2 usage error.
#include <iostream>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/device.h"
#include "core/error.h"
#include "core/log.h"

using namespace mambamt;

namespace {

std::string overview() {
  std::string out =
      "usage: mambamt [--log-level LEVEL] COMMAND [ARGS...]\n"
      "       mambamt --version | --help\n\n"
      "Ablation studies of hybrid Mamba/attention document-level translation models.\n\n"
      "commands:\n";
  for (auto& c : cli::commands()) {
    std::string left = "  " + c.spec.name;
    out += left + std::string(left.size() < 22 ? 22 - left.size() : 1, ' ') + c.spec.summary + "\n";
  }
  out +=
      "\nglobal options:\n"
      "  --log-level LEVEL   trace, debug, info (default), warn, error, critical, off\n"
      "  --version           version, git revision, LibTorch, CUDA, BLAS and CPU kernels, MPI\n"
      "  --help, -h          this help; `mambamt COMMAND --help` for a command\n";
  return out;
}

// The command whose name matches the longest prefix of `words`.
const cli::Command* find_command(const std::vector<std::string>& words, size_t& used) {
  const cli::Command* best = nullptr;
  used = 0;
  for (auto& c : cli::commands()) {
    std::vector<std::string> parts;
    size_t start = 0;
    while (true) {
      size_t sp = c.spec.name.find(' ', start);
      parts.push_back(c.spec.name.substr(start, sp - start));
      if (sp == std::string::npos) break;
      start = sp + 1;
    }
    if (parts.size() > words.size()) continue;
    bool match = true;
    for (size_t i = 0; i < parts.size(); ++i) match = match && parts[i] == words[i];
    if (match && parts.size() > used) {
      best = &c;
      used = parts.size();
    }
  }
  return best;
}

// Commands that share a first word ("config check", "config doc").
std::string group_usage(const std::string& first) {
  std::string out;
  for (auto& c : cli::commands())
    if (c.spec.name.rfind(first + " ", 0) == 0) out += "  mambamt " + c.spec.name + "   " + c.spec.summary + "\n";
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  core::ensure_blas_kernels(argv);
  std::vector<std::string> args(argv + 1, argv + argc);
  const cli::Command* cmd = nullptr;
  try {
    core::log::init();
    size_t i = 0;
    for (; i < args.size(); ++i) {
      const std::string& a = args[i];
      if (a == "--help" || a == "-h") {
        std::cout << overview();
        return 0;
      }
      if (a == "--version") {
        std::cout << cli::version_text();
        return 0;
      }
      if (a == "--log-level" || a.rfind("--log-level=", 0) == 0) {
        std::string level;
        if (a == "--log-level") {
          if (i + 1 >= args.size()) throw UsageError("--log-level needs a value");
          level = args[++i];
        } else {
          level = a.substr(12);
        }
        core::log::set_level(level);
        continue;
      }
      if (!a.empty() && a[0] == '-') throw UsageError("unknown option " + a);
      break;
    }
    std::vector<std::string> words(args.begin() + static_cast<long>(i), args.end());
    if (words.empty()) {
      std::cerr << overview();
      return 2;
    }
    size_t used = 0;
    cmd = find_command(words, used);
    if (!cmd) {
      std::string group = group_usage(words[0]);
      if (!group.empty()) {
        bool help = words.size() > 1 && (words[1] == "--help" || words[1] == "-h");
        (help ? std::cout : std::cerr) << "usage:\n" << group;
        return help ? 0 : 2;
      }
      throw UsageError("unknown command \"" + words[0] + "\"");
    }
    std::vector<std::string> rest(words.begin() + static_cast<long>(used), words.end());
    bool help = false;
    cli::ParsedArgs parsed = cli::parse_args(cmd->spec, rest, help);
    if (help) {
      std::cout << cli::usage_text(cmd->spec);
      return 0;
    }
    return cmd->run(parsed);
  } catch (const UsageError& e) {
    std::cerr << "mambamt: error: " << e.what() << "\n\n" << (cmd ? cli::usage_text(cmd->spec) : overview());
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "mambamt: error: " << e.what() << "\n";
    return 1;
  }
}
