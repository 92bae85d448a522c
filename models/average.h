#pragma once
// Model tensors by name and checkpoint averaging ("average the last k
// checkpoints before evaluating"). Checkpoint files themselves are core's and
// the runtime's business; these work on name -> tensor maps.
#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

namespace mambamt::models {

using TensorMap = std::map<std::string, torch::Tensor>;

// Every parameter and buffer of a module by its dotted name
// ("decoder.layers.3.mixer.in_proj.weight"), detached, sharing storage.
TensorMap named_tensors(const torch::nn::Module& module);

// Copies `tensors` into the module's parameters and buffers. Every name must
// exist on both sides with the same shape; throws Error naming the first
// missing, unexpected or mis-shaped entry (and changes nothing then).
void load_named_tensors(torch::nn::Module& module, const TensorMap& tensors);

// The element-wise mean of k maps with the same names and shapes (accumulated
// in float64, returned in each tensor's dtype; integer tensors are taken from
// the last map). Throws Error when the maps disagree.
TensorMap average_tensors(const std::vector<TensorMap>& checkpoints);

}  // namespace mambamt::models
