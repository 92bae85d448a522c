#pragma once
// Named-entity recall (the SSM-for-MT paper, §4.2): entities that appear
// verbatim in both the source and the reference, counted as recalled when they
// appear verbatim in the hypothesis, bucketed by how often they occur in the
// training data: unseen (0), regular [1, 16) and frequent (16+).
//
// "Verbatim" means a whole-word match: the characters next to an occurrence are
// not word characters (word characters: anything but whitespace, punctuation and
// symbols), so "Ann" does not match inside "Annual".
#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/store.h"
#include "results/bootstrap.h"

namespace mambamt::results {

enum class EntityBucket { kUnseen = 0, kRegular = 1, kFrequent = 2 };
inline constexpr int kEntityBuckets = 3;

struct EntityBucketEdges {
  std::int64_t regular_min = 1;    // first frequency of "regular"
  std::int64_t frequent_min = 16;  // first frequency of "frequent"
};

EntityBucket entity_bucket(std::int64_t training_frequency, const EntityBucketEdges& edges = {});
// "unseen", "regular", "frequent".
const char* entity_bucket_name(EntityBucket bucket);
// The frequency range: "0", "[1,16)", "16+".
std::string entity_bucket_range(EntityBucket bucket, const EntityBucketEdges& edges = {});

// Whole-word occurrence of `entity` in `text` (empty entities never match).
bool contains_verbatim(std::string_view text, std::string_view entity);
// Number of whole-word occurrences.
std::int64_t count_verbatim(std::string_view text, std::string_view entity);

// Counts whole-word occurrences of many entities over a large corpus (the
// training data) in one pass per line.
class EntityCounter {
 public:
  explicit EntityCounter(const std::vector<std::string>& entities);
  void add_line(std::string_view line);
  std::int64_t count(const std::string& entity) const;  // 0 for an unknown entity
  const std::unordered_map<std::string, std::int64_t>& counts() const { return counts_; }

 private:
  struct Pattern {
    std::u32string text;
    std::string key;
  };
  std::unordered_map<std::u32string, std::vector<Pattern>> by_first_word_;
  std::vector<Pattern> other_;  // entities that do not start with a word character
  std::unordered_map<std::string, std::int64_t> counts_;
};

// A test segment with its candidate entities (from an NER tagger, the synthetic
// corpus generator, or verbatim_entity_candidates below).
struct EntitySegment {
  std::string source;
  std::string reference;
  std::string hypothesis;
  std::vector<std::string> entities;
  // The document the segment belongs to, for entity_consistency (segments of
  // one document share it); -1: a document of its own.
  std::int64_t document = -1;
};

struct RecallCell {
  std::int64_t hits = 0;
  std::int64_t total = 0;
  double recall() const;  // NaN when total is 0 (missing, not 0)
};

struct EntityRecallResult {
  RecallCell total;
  std::array<RecallCell, kEntityBuckets> by_bucket{};  // indexed by EntityBucket
  std::int64_t candidates = 0;  // candidate (segment, entity) pairs before the source/reference filter
};

using FrequencyLookup = std::function<std::int64_t(const std::string& entity)>;

// Each distinct entity of a segment that is verbatim in its source and reference
// counts once; a hit when it is verbatim in the hypothesis.
EntityRecallResult entity_recall(const std::vector<EntitySegment>& segments,
                                 const FrequencyLookup& training_frequency,
                                 const EntityBucketEdges& edges = {});
// Frequencies from a map (an entity missing from it is unseen).
EntityRecallResult entity_recall(const std::vector<EntitySegment>& segments,
                                 const std::unordered_map<std::string, std::int64_t>& training_frequency,
                                 const EntityBucketEdges& edges = {});

// Entity consistency across a document (the research plan, 7.3.2: "the same
// entity translated consistently across a document"). For each document and
// each entity that is verbatim in the source and reference of its segments,
// its mentions are its whole-word occurrences in those references, and a
// mention is rendered when the segment's hypothesis holds the entity as often
// (occurrences past the reference's count do not count). An entity with two or
// more mentions in a document is "repeated"; if the hypotheses render at least
// one of them it is "rendered", and if they render all of them, "consistent".
// Consistency = consistent / rendered: of the repeated entities a system knows
// how to write in that document, the share it writes at every mention. An
// entity it never renders counts against recall, not here: with verbatim
// matching, a consistent other rendering cannot be told from a miss.
struct ConsistencyCell {
  std::int64_t consistent = 0;
  std::int64_t rendered = 0;
  std::int64_t repeated = 0;
  double consistency() const;  // NaN when rendered is 0
};

struct EntityConsistencyResult {
  ConsistencyCell total;
  std::array<ConsistencyCell, kEntityBuckets> by_bucket{};  // by the entity's training frequency
  std::int64_t mentions = 0;  // mentions of the repeated entities
  // Every document of the segments (EntitySegment::document; a segment without
  // one under -1 - its index), with the counts of its repeated entities (zero
  // when none repeats there): the units of the paired test below.
  std::map<std::int64_t, ConsistencyCell> by_document;
};

EntityConsistencyResult entity_consistency(const std::vector<EntitySegment>& segments,
                                           const FrequencyLookup& training_frequency,
                                           const EntityBucketEdges& edges = {});
EntityConsistencyResult entity_consistency(const std::vector<EntitySegment>& segments,
                                           const std::unordered_map<std::string, std::int64_t>& training_frequency,
                                           const EntityBucketEdges& edges = {});

// An experiment store's per-document consistency counts (results/entities/
// by_document: rows the document ids, columns consistent, rendered, repeated)
// and the text they come from (text data.entities: the test set's fingerprint
// and the sentences translated).
struct EntityConsistencyOutcomes {
  std::vector<std::string> documents;
  std::vector<ConsistencyCell> cells;
  std::string set;
};
// Null when the store has no such table or text.
std::optional<EntityConsistencyOutcomes> entity_consistency_outcomes(const core::StoreSnapshot& store);

// p-value of sacreBLEU's paired bootstrap test (results/bootstrap.h) of two
// systems' entity consistency on the same documents: documents are resampled
// (the units whose mentions depend on each other), both systems alike, and
// each resample scored as its consistent over its rendered entities (0 when
// none is rendered). NaN (no test) when either system renders no repeated
// entity at all: its consistency is undefined. Throws InputError when the two
// differ in text or documents.
double paired_consistency_p(const EntityConsistencyOutcomes& baseline, const EntityConsistencyOutcomes& system,
                            const BootstrapOptions& options = {});

// A fallback when no NER is available: the longest runs of capitalised reference
// words (joined by single spaces) that also appear verbatim in the source, in
// reference order, each once.
std::vector<std::string> verbatim_entity_candidates(std::string_view source,
                                                    std::string_view reference);

}  // namespace mambamt::results
