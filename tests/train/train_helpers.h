#pragma once
// Shared pieces of the train/ tests: the tiny experiment of
// configs/experiments/tiny.toml with overrides, and comparisons of the
// parameters two runs end with.
#include <torch/torch.h>

#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/checkpoint.h"
#include "core/config.h"
#include "test_util.h"
#include "train/trainer.h"

namespace train_test {

// The text of configs/experiments/tiny.toml with `overrides` ("train.max_steps",
// "20") applied: an existing key of the section is replaced, a new one added
// below the section header (the section is created when missing).
inline std::string tiny_text(const std::vector<std::pair<std::string, std::string>>& overrides = {}) {
  std::string text = read_text(source_dir() + "/configs/experiments/tiny.toml");
  for (auto& [dotted, value] : overrides) {
    const size_t dot = dotted.rfind('.');
    const std::string section = "[" + dotted.substr(0, dot) + "]";
    const std::string key = dotted.substr(dot + 1);
    std::istringstream in(text);
    std::vector<std::string> lines;
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    std::string current;
    bool done = false;
    long header = -1;
    for (size_t i = 0; i < lines.size() && !done; ++i) {
      const std::string& l = lines[i];
      if (!l.empty() && l[0] == '[') {
        current = l;
        if (l == section) header = static_cast<long>(i);
        continue;
      }
      if (current == section && l.rfind(key + " =", 0) == 0) {
        lines[i] = key + " = " + value;
        done = true;
      }
    }
    if (!done) {
      if (header < 0) {
        lines.push_back(section);
        header = static_cast<long>(lines.size()) - 1;
      }
      lines.insert(lines.begin() + header + 1, key + " = " + value);
    }
    text.clear();
    for (auto& l : lines) text += l + "\n";
  }
  return text;
}

inline mambamt::core::ExperimentConfig tiny_config(
    const std::vector<std::pair<std::string, std::string>>& overrides = {}) {
  return mambamt::core::parse_experiment(tiny_text(overrides), "tiny.toml");
}

// Writes the config to <dir>/<name>.toml and returns the path.
inline std::string write_config(const std::string& dir, const std::string& name,
                                const std::vector<std::pair<std::string, std::string>>& overrides = {}) {
  const std::string path = dir + "/" + name + ".toml";
  write_text(path, tiny_text(overrides));
  return path;
}

// Model parameters of the newest checkpoint of an experiment directory.
inline std::map<std::string, torch::Tensor> final_parameters(const std::string& exp_dir) {
  mambamt::core::CheckpointDir ckpt(exp_dir + "/ckpt");
  auto latest = ckpt.latest_step();
  if (!latest) throw std::runtime_error(exp_dir + ": no checkpoint");
  return mambamt::train::model_tensors(mambamt::core::read_checkpoint(ckpt.path_for_step(*latest)));
}

// "" when equal (bitwise, or within rtol/atol when given), else the first difference.
inline std::string compare_parameters(const std::map<std::string, torch::Tensor>& a,
                                      const std::map<std::string, torch::Tensor>& b, double rtol = 0,
                                      double atol = 0) {
  if (a.size() != b.size()) return "different parameter counts";
  for (auto& [name, t] : a) {
    auto it = b.find(name);
    if (it == b.end()) return "missing " + name;
    const bool same = rtol == 0 && atol == 0 ? torch::equal(t, it->second)
                                             : torch::allclose(t, it->second, rtol, atol);
    if (!same) {
      std::ostringstream s;
      s << name << " differs: max |diff| " << (t.to(torch::kFloat64) - it->second.to(torch::kFloat64)).abs().max().item<double>();
      return s.str();
    }
  }
  return "";
}

}  // namespace train_test
