#pragma once
// Model kinds by name (the values of model.kind), each with its builder. The
// list lives in registry.cpp; adding a kind is a builder and one line there.
#include <functional>
#include <string>
#include <vector>

#include "core/config.h"
#include "models/model.h"

namespace mambamt::models {

struct ModelKind {
  std::string name;         // model.kind
  std::string description;  // one line, for `mambamt plan` and errors
  std::function<ModelPtr(const core::ModelConfig&, const ModelContext&)> build;
  // Kinds not built from stacks count and report their own parameters
  // (count_parameters / plan_report of models/plan.h use these when both are
  // set); empty for the kinds whose plan's stacks are counted layer by layer.
  std::function<int64_t(const core::ModelConfig&, int64_t vocab_size)> count;
  std::function<std::string(const core::ModelConfig&, int64_t vocab_size)> report;
};

// Every kind, in the order of model.kind's documentation.
const std::vector<ModelKind>& model_kinds();

// Builds the model of a validated config (parameters initialised from the
// current LibTorch seed: call torch::manual_seed first for reproducibility).
// Throws InputError for an unknown kind or a plan the layers cannot build.
ModelPtr build_model(const core::ModelConfig& config, const ModelContext& context);
// The same with the default token ids and no boundary token.
ModelPtr build_model(const core::ModelConfig& config, int64_t vocab_size);

}  // namespace mambamt::models
