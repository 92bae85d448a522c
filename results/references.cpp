#include "results/references.h"

#include "core/error.h"
#include "core/version.h"

namespace mambamt::results {

void check_reference_streams(std::string_view metric, std::size_t num_hypotheses,
                             const ReferenceStreams& refs) {
  if (refs.empty()) throw InputError(std::string(metric) + ": no reference stream given");
  for (std::size_t k = 0; k < refs.size(); ++k) {
    if (refs[k].size() != num_hypotheses) {
      throw InputError(std::string(metric) + ": reference stream " + std::to_string(k + 1) +
                       " has " + std::to_string(refs[k].size()) + " segments but there are " +
                       std::to_string(num_hypotheses) + " hypotheses");
    }
  }
}

std::vector<std::string> segment_references(const ReferenceStreams& refs, std::size_t i) {
  std::vector<std::string> out;
  out.reserve(refs.size());
  for (const auto& stream : refs) out.push_back(stream.at(i));
  return out;
}

std::string signature_version_field() { return std::string("version:mambamt-") + core::version() + "/sacrebleu-2.6"; }

}  // namespace mambamt::results
