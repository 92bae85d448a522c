#include "cli/args.h"

#include <cmath>
#include <sstream>

#include "core/error.h"

namespace mambamt::cli {

namespace {
bool option_like(const std::string& a) { return a.size() > 1 && a[0] == '-'; }
}  // namespace

bool OptionSpec::takes_list() const {
  return value_name.size() > 3 && value_name.compare(value_name.size() - 3, 3, "...") == 0;
}

long ParsedArgs::get_int(const std::string& option, long def) const {
  auto it = values.find(option);
  if (it == values.end()) return def;
  try {
    size_t used = 0;
    long v = std::stol(it->second, &used);
    if (used == it->second.size()) return v;
  } catch (...) {
  }
  throw UsageError(option + " " + it->second + ": expected an integer");
}

double ParsedArgs::get_double(const std::string& option, double def) const {
  auto it = values.find(option);
  if (it == values.end()) return def;
  try {
    size_t used = 0;
    const double v = std::stod(it->second, &used);
    if (used == it->second.size() && std::isfinite(v)) return v;
  } catch (...) {
  }
  throw UsageError(option + " " + it->second + ": expected a number");
}

ParsedArgs parse_args(const CommandSpec& spec, const std::vector<std::string>& args, bool& help_requested) {
  ParsedArgs out;
  help_requested = false;
  auto find = [&](const std::string& name) -> const OptionSpec* {
    for (auto& o : spec.options)
      if (o.name == name) return &o;
    return nullptr;
  };
  size_t max_pos = spec.positionals.size() + spec.optional_positionals.size();
  bool only_positionals = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    // With `rest`, everything after the positionals belongs to the callee.
    if (spec.rest && out.positional.size() == max_pos) {
      out.rest.assign(args.begin() + static_cast<long>(i), args.end());
      break;
    }
    if (!only_positionals && a == "--") {
      only_positionals = true;
      continue;
    }
    if (!only_positionals && (a == "--help" || a == "-h")) {
      help_requested = true;
      continue;
    }
    if (!only_positionals && option_like(a)) {
      std::string name = a, value;
      bool inline_value = false;
      size_t eq = a.find('=');
      if (eq != std::string::npos) {
        name = a.substr(0, eq);
        value = a.substr(eq + 1);
        inline_value = true;
      }
      const OptionSpec* o = find(name);
      if (!o) throw UsageError("unknown option " + name + " for `mambamt " + spec.name + "`");
      if (o->value_name.empty()) {
        if (inline_value) throw UsageError(name + " takes no value");
        out.flags.insert(name);
      } else if (o->takes_list()) {
        std::vector<std::string>& list = out.lists[name];
        const size_t before = list.size();
        if (inline_value) list.push_back(value);
        while (i + 1 < args.size() && !option_like(args[i + 1])) list.push_back(args[++i]);
        if (list.size() == before || (inline_value && value.empty()))
          throw UsageError(name + " needs at least one " + o->value_name.substr(0, o->value_name.size() - 3));
      } else {
        if (!inline_value) {
          if (i + 1 >= args.size()) throw UsageError(name + " needs a value (" + o->value_name + ")");
          value = args[++i];
        }
        out.values[name] = value;
      }
      continue;
    }
    if (out.positional.size() >= max_pos) throw UsageError("unexpected argument \"" + a + "\"");
    out.positional.push_back(a);
  }
  if (!help_requested && out.positional.size() < spec.positionals.size())
    throw UsageError("missing " + spec.positionals[out.positional.size()]);
  return out;
}

std::string usage_text(const CommandSpec& spec) {
  std::ostringstream out;
  out << "usage: mambamt " << spec.name;
  for (auto& p : spec.positionals) out << " " << p;
  for (auto& p : spec.optional_positionals) out << " [" << p << "]";
  if (!spec.options.empty()) out << " [options]";
  if (spec.rest) out << " [ARGS...]";
  out << "\n\n" << spec.summary << "\n";
  if (!spec.description.empty()) out << "\n" << spec.description << "\n";
  out << "\noptions:\n";
  for (auto& o : spec.options) {
    std::string left = "  " + o.name + (o.value_name.empty() ? "" : " " + o.value_name);
    out << left;
    if (left.size() < 26)
      out << std::string(26 - left.size(), ' ');
    else
      out << "\n" << std::string(26, ' ');
    out << o.help << "\n";
  }
  out << "  --help, -h              show this help\n";
  return out.str();
}

}  // namespace mambamt::cli
