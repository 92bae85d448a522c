#include "models/average.h"

#include "core/error.h"

namespace mambamt::models {
namespace {

std::string shape_str(const torch::Tensor& t) {
  std::string s = "(";
  for (int64_t i = 0; i < t.dim(); ++i) s += (i ? "," : "") + std::to_string(t.size(i));
  return s + ")";
}

}  // namespace

TensorMap named_tensors(const torch::nn::Module& module) {
  TensorMap out;
  for (const auto& p : module.named_parameters(/*recurse=*/true)) out[p.key()] = p.value().detach();
  for (const auto& b : module.named_buffers(/*recurse=*/true)) out[b.key()] = b.value().detach();
  return out;
}

void load_named_tensors(torch::nn::Module& module, const TensorMap& tensors) {
  TensorMap own = named_tensors(module);
  for (const auto& [name, t] : own) {
    auto it = tensors.find(name);
    if (it == tensors.end()) throw Error("load_named_tensors: missing tensor " + name);
    if (it->second.sizes() != t.sizes())
      throw Error("load_named_tensors: " + name + " has shape " + shape_str(it->second) + ", the model expects " +
                  shape_str(t));
  }
  for (const auto& [name, t] : tensors)
    if (!own.count(name)) throw Error("load_named_tensors: unexpected tensor " + name);
  torch::NoGradGuard no_grad;
  for (auto& [name, t] : own) t.copy_(tensors.at(name));
}

TensorMap average_tensors(const std::vector<TensorMap>& cks) {
  if (cks.empty()) throw Error("average_tensors: no checkpoints to average");
  const TensorMap& first = cks.front();
  for (size_t i = 1; i < cks.size(); ++i) {
    if (cks[i].size() != first.size())
      throw Error("average_tensors: checkpoint " + std::to_string(i) + " has " + std::to_string(cks[i].size()) +
                  " tensors, checkpoint 0 has " + std::to_string(first.size()));
    for (const auto& [name, t] : first) {
      auto it = cks[i].find(name);
      if (it == cks[i].end()) throw Error("average_tensors: checkpoint " + std::to_string(i) + " lacks " + name);
      if (it->second.sizes() != t.sizes())
        throw Error("average_tensors: " + name + " has shape " + shape_str(it->second) + " in checkpoint " +
                    std::to_string(i) + " but " + shape_str(t) + " in checkpoint 0");
    }
  }
  torch::NoGradGuard no_grad;
  TensorMap out;
  for (const auto& [name, t] : first) {
    if (!t.is_floating_point()) {
      out[name] = cks.back().at(name).clone();
      continue;
    }
    torch::Tensor acc = torch::zeros(t.sizes(), t.options().dtype(torch::kDouble));
    for (const TensorMap& c : cks) acc += c.at(name).to(acc.device(), torch::kDouble);
    out[name] = (acc / static_cast<double>(cks.size())).to(t.scalar_type());
  }
  return out;
}

}  // namespace mambamt::models
