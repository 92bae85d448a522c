#pragma once
// Command-line parsing for the mambamt subcommands: each command declares its
// positionals and options once; parsing, --help text and usage errors come
// from that declaration.
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace mambamt::cli {

struct OptionSpec {
  std::string name;        // "--out"
  std::string value_name;  // "DIR"; empty for a flag. "FILE..." takes the words up to the
                           // next option (at least one), and a repeated option adds more.
  std::string help;
  bool takes_list() const;
};

struct CommandSpec {
  std::string name;                     // "config check"
  std::string summary;                  // one line for `mambamt --help`
  std::vector<std::string> positionals;  // required, in order ("RUN_DIR")
  std::vector<std::string> optional_positionals;  // after the required ones
  bool rest = false;                    // pass everything after the positionals through (bench)
  std::vector<OptionSpec> options;
  std::string description;              // paragraphs after the usage line
};

class ParsedArgs {
 public:
  std::vector<std::string> positional;
  std::vector<std::string> rest;  // CommandSpec::rest
  std::map<std::string, std::string> values;
  std::map<std::string, std::vector<std::string>> lists;  // options of OptionSpec::takes_list
  std::set<std::string> flags;

  bool has(const std::string& option) const {
    return flags.count(option) || values.count(option) || lists.count(option);
  }
  std::string get(const std::string& option, const std::string& def = "") const {
    auto it = values.find(option);
    return it == values.end() ? def : it->second;
  }
  // The words of a list option, in order (empty when it was not given).
  std::vector<std::string> get_list(const std::string& option) const {
    auto it = lists.find(option);
    return it == lists.end() ? std::vector<std::string>{} : it->second;
  }
  // The value as an integer; a non-number is a usage error naming the option.
  long get_int(const std::string& option, long def) const;
  // The value as a finite number; anything else is a usage error naming the option.
  double get_double(const std::string& option, double def) const;
};

// Parses `args` (the words after the command name). Throws UsageError for an
// unknown option, a missing value or a wrong number of positionals. A word
// that starts with '-' (other than "-" itself) is an option until "--". `--help`
// is reported through `help_requested`.
ParsedArgs parse_args(const CommandSpec& spec, const std::vector<std::string>& args, bool& help_requested);

// "usage: mambamt config check FILE [options]" and the option table.
std::string usage_text(const CommandSpec& spec);

struct Command {
  CommandSpec spec;
  std::function<int(const ParsedArgs&)> run;  // returns the exit code
};

// Every subcommand, in the order `mambamt --help` lists them (cli/commands.cpp).
const std::vector<Command>& commands();

}  // namespace mambamt::cli
