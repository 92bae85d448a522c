#include "results/entities.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>

#include "core/error.h"
#include "results/unicode.h"

namespace mambamt::results {
namespace {

bool is_word_char(char32_t c) {
  return !is_space(c) && char_class(c) != CharClass::kPunctuation &&
         char_class(c) != CharClass::kSymbol;
}

// Whether pattern p occurs in t at position i with word boundaries around it.
bool match_at(const std::u32string& t, std::size_t i, const std::u32string& p) {
  if (i + p.size() > t.size() || t.compare(i, p.size(), p) != 0) return false;
  if (i > 0 && is_word_char(p.front()) && is_word_char(t[i - 1])) return false;
  const std::size_t end = i + p.size();
  if (end < t.size() && is_word_char(p.back()) && is_word_char(t[end])) return false;
  return true;
}

std::int64_t count_u32(const std::u32string& t, const std::u32string& p) {
  if (p.empty()) return 0;
  std::int64_t n = 0;
  for (std::size_t pos = t.find(p); pos != std::u32string::npos; pos = t.find(p, pos + 1)) {
    n += match_at(t, pos, p);
  }
  return n;
}

std::u32string first_word(const std::u32string& s) {
  std::size_t n = 0;
  while (n < s.size() && is_word_char(s[n])) ++n;
  return s.substr(0, n);
}

bool is_capitalised(const std::u32string& word) {
  if (word.empty()) return false;
  return to_lower(std::u32string(1, word[0])) != std::u32string(1, word[0]);
}

// A lookup of the frequencies in `map` (an entity missing from it: 0).
FrequencyLookup lookup_in(const std::unordered_map<std::string, std::int64_t>& map) {
  return [&map](const std::string& e) -> std::int64_t {
    auto it = map.find(e);
    return it == map.end() ? 0 : it->second;
  };
}

}  // namespace

EntityBucket entity_bucket(std::int64_t training_frequency, const EntityBucketEdges& edges) {
  if (training_frequency >= edges.frequent_min) return EntityBucket::kFrequent;
  if (training_frequency >= edges.regular_min) return EntityBucket::kRegular;
  return EntityBucket::kUnseen;
}

const char* entity_bucket_name(EntityBucket bucket) {
  switch (bucket) {
    case EntityBucket::kUnseen: return "unseen";
    case EntityBucket::kRegular: return "regular";
    case EntityBucket::kFrequent: return "frequent";
  }
  return "?";
}

std::string entity_bucket_range(EntityBucket bucket, const EntityBucketEdges& edges) {
  switch (bucket) {
    case EntityBucket::kUnseen:
      return edges.regular_min == 1 ? "0" : "[0," + std::to_string(edges.regular_min) + ")";
    case EntityBucket::kRegular:
      return "[" + std::to_string(edges.regular_min) + "," + std::to_string(edges.frequent_min) + ")";
    case EntityBucket::kFrequent:
      return std::to_string(edges.frequent_min) + "+";
  }
  return "?";
}

bool contains_verbatim(std::string_view text, std::string_view entity) {
  return count_verbatim(text, entity) > 0;
}

std::int64_t count_verbatim(std::string_view text, std::string_view entity) {
  if (entity.empty() || text.find(entity) == std::string_view::npos) return 0;
  return count_u32(decode_utf8(text), decode_utf8(entity));
}

EntityCounter::EntityCounter(const std::vector<std::string>& entities) {
  for (const auto& e : entities) {
    if (e.empty() || counts_.count(e)) continue;
    counts_[e] = 0;
    Pattern p{decode_utf8(e), e};
    std::u32string w = first_word(p.text);
    if (w.empty()) other_.push_back(std::move(p));
    else by_first_word_[w].push_back(std::move(p));
  }
}

void EntityCounter::add_line(std::string_view line) {
  const std::u32string t = decode_utf8(line);
  // An occurrence of an entity that starts with a word character starts at the
  // start of a word of the line, and that word equals the entity's first word.
  std::size_t i = 0;
  while (i < t.size()) {
    if (!is_word_char(t[i])) {
      ++i;
      continue;
    }
    std::size_t end = i;
    while (end < t.size() && is_word_char(t[end])) ++end;
    auto it = by_first_word_.find(t.substr(i, end - i));
    if (it != by_first_word_.end()) {
      for (const auto& p : it->second) counts_[p.key] += match_at(t, i, p.text);
    }
    i = end;
  }
  for (const auto& p : other_) counts_[p.key] += count_u32(t, p.text);
}

std::int64_t EntityCounter::count(const std::string& entity) const {
  auto it = counts_.find(entity);
  return it == counts_.end() ? 0 : it->second;
}

double RecallCell::recall() const {
  return total > 0 ? static_cast<double>(hits) / static_cast<double>(total)
                   : std::numeric_limits<double>::quiet_NaN();
}

EntityRecallResult entity_recall(const std::vector<EntitySegment>& segments,
                                 const FrequencyLookup& training_frequency,
                                 const EntityBucketEdges& edges) {
  if (edges.regular_min < 1 || edges.frequent_min <= edges.regular_min) {
    throw InputError("entity recall: bucket edges must satisfy 1 <= regular_min < frequent_min");
  }
  EntityRecallResult result;
  for (const auto& seg : segments) {
    std::set<std::string> seen;
    for (const auto& e : seg.entities) {
      if (e.empty() || !seen.insert(e).second) continue;
      ++result.candidates;
      if (!contains_verbatim(seg.source, e) || !contains_verbatim(seg.reference, e)) continue;
      const int hit = contains_verbatim(seg.hypothesis, e) ? 1 : 0;
      RecallCell& cell = result.by_bucket[static_cast<int>(entity_bucket(training_frequency(e), edges))];
      cell.hits += hit;
      cell.total += 1;
      result.total.hits += hit;
      result.total.total += 1;
    }
  }
  return result;
}

EntityRecallResult entity_recall(const std::vector<EntitySegment>& segments,
                                 const std::unordered_map<std::string, std::int64_t>& training_frequency,
                                 const EntityBucketEdges& edges) {
  return entity_recall(segments, lookup_in(training_frequency), edges);
}

double ConsistencyCell::consistency() const {
  return rendered > 0 ? static_cast<double>(consistent) / static_cast<double>(rendered)
                      : std::numeric_limits<double>::quiet_NaN();
}

EntityConsistencyResult entity_consistency(const std::vector<EntitySegment>& segments,
                                           const FrequencyLookup& training_frequency,
                                           const EntityBucketEdges& edges) {
  if (edges.regular_min < 1 || edges.frequent_min <= edges.regular_min) {
    throw InputError("entity consistency: bucket edges must satisfy 1 <= regular_min < frequent_min");
  }
  struct Mentions {
    std::int64_t total = 0;
    std::int64_t rendered = 0;
  };
  // (document, entity) -> mentions; a segment without a document is one of
  // its own (keys below zero that no document id takes).
  std::map<std::pair<std::int64_t, std::string>, Mentions> by_doc;
  std::set<std::int64_t> documents;
  for (std::size_t i = 0; i < segments.size(); ++i) {
    const EntitySegment& seg = segments[i];
    const std::int64_t doc = seg.document >= 0 ? seg.document : -1 - static_cast<std::int64_t>(i);
    documents.insert(doc);
    std::set<std::string> seen;
    for (const auto& e : seg.entities) {
      if (e.empty() || !seen.insert(e).second || !contains_verbatim(seg.source, e)) continue;
      const std::int64_t in_reference = count_verbatim(seg.reference, e);
      if (in_reference == 0) continue;
      Mentions& m = by_doc[{doc, e}];
      m.total += in_reference;
      m.rendered += std::min(in_reference, count_verbatim(seg.hypothesis, e));
    }
  }
  EntityConsistencyResult result;
  for (std::int64_t d : documents) result.by_document[d];
  for (const auto& [key, m] : by_doc) {
    if (m.total < 2) continue;
    result.mentions += m.total;
    ConsistencyCell& cell = result.by_bucket[static_cast<int>(entity_bucket(training_frequency(key.second), edges))];
    for (ConsistencyCell* c : {&cell, &result.total, &result.by_document[key.first]}) {
      c->repeated += 1;
      c->rendered += m.rendered > 0 ? 1 : 0;
      c->consistent += m.rendered == m.total ? 1 : 0;
    }
  }
  return result;
}

EntityConsistencyResult entity_consistency(const std::vector<EntitySegment>& segments,
                                           const std::unordered_map<std::string, std::int64_t>& training_frequency,
                                           const EntityBucketEdges& edges) {
  return entity_consistency(segments, lookup_in(training_frequency), edges);
}

std::optional<EntityConsistencyOutcomes> entity_consistency_outcomes(const core::StoreSnapshot& store) {
  auto t = store.tables.find("entities/by_document");
  auto set = store.texts.find("data.entities");
  if (t == store.tables.end() || set == store.texts.end()) return std::nullopt;
  const core::ResultTable& table = t->second;
  if (table.columns != std::vector<std::string>{"consistent", "rendered", "repeated"} ||
      table.values.size() != table.rows.size() * 3 || table.rows.empty())
    return std::nullopt;
  EntityConsistencyOutcomes out;
  out.set = set->second;
  out.documents = table.rows;
  for (std::size_t r = 0; r < table.rows.size(); ++r) {
    ConsistencyCell c;
    c.consistent = static_cast<std::int64_t>(table.at(r, 0));
    c.rendered = static_cast<std::int64_t>(table.at(r, 1));
    c.repeated = static_cast<std::int64_t>(table.at(r, 2));
    out.cells.push_back(c);
  }
  return out;
}

double paired_consistency_p(const EntityConsistencyOutcomes& baseline, const EntityConsistencyOutcomes& system,
                            const BootstrapOptions& options) {
  if (baseline.set != system.set)
    throw InputError("entity consistency: the systems translated different text: " + baseline.set + " and " +
                     system.set);
  if (baseline.documents != system.documents || baseline.cells.size() != baseline.documents.size() ||
      system.cells.size() != system.documents.size())
    throw InputError("entity consistency: the systems' documents differ (" + std::to_string(baseline.documents.size()) +
                     " and " + std::to_string(system.documents.size()) + ")");
  if (baseline.documents.empty()) throw InputError("entity consistency: no documents");
  auto renders = [](const std::vector<ConsistencyCell>& cells) {
    return std::any_of(cells.begin(), cells.end(), [](const ConsistencyCell& c) { return c.rendered > 0; });
  };
  // A system that renders no repeated entity has no consistency to compare
  // (its misses count against recall): no test, rather than one against 0.
  if (!renders(baseline.cells) || !renders(system.cells)) return std::numeric_limits<double>::quiet_NaN();
  auto consistency = [](const std::vector<ConsistencyCell>& cells) {
    return [&cells](const std::vector<std::size_t>& picked) {
      std::int64_t consistent = 0, rendered = 0;
      for (std::size_t i : picked) {
        consistent += cells[i].consistent;
        rendered += cells[i].rendered;
      }
      return rendered > 0 ? static_cast<double>(consistent) / static_cast<double>(rendered) : 0.0;
    };
  };
  return paired_bootstrap(baseline.cells.size(), consistency(baseline.cells), consistency(system.cells), options)
      .p_value;
}

std::vector<std::string> verbatim_entity_candidates(std::string_view source,
                                                    std::string_view reference) {
  const std::u32string ref = decode_utf8(reference);
  const std::u32string src = decode_utf8(source);
  std::vector<std::string> out;
  std::set<std::string> seen;
  // A run of capitalised reference words (separated only by whitespace) yields
  // its longest sub-runs that occur verbatim in the source, left to right, so a
  // capitalised sentence-initial word ("Yesterday Angela Merkel") or title
  // ("President Barack Obama") does not hide the name.
  std::vector<std::u32string> run;
  auto join = [&](std::size_t from, std::size_t to) {
    std::u32string s = run[from];
    for (std::size_t k = from + 1; k < to; ++k) s += U' ' + run[k];
    return s;
  };
  auto flush = [&] {
    std::size_t i = 0;
    while (i < run.size()) {
      std::size_t found = 0;
      for (std::size_t j = run.size(); j > i; --j) {
        if (count_u32(src, join(i, j)) > 0) {
          found = j;
          break;
        }
      }
      if (found == 0) {
        ++i;
        continue;
      }
      std::string e = encode_utf8(join(i, found));
      if (seen.insert(e).second) out.push_back(std::move(e));
      i = found;
    }
    run.clear();
  };
  std::size_t i = 0;
  while (i < ref.size()) {
    if (is_space(ref[i])) {
      ++i;
      continue;
    }
    if (!is_word_char(ref[i])) {  // punctuation or a symbol ends a run
      flush();
      ++i;
      continue;
    }
    std::size_t end = i;
    while (end < ref.size() && is_word_char(ref[end])) ++end;
    std::u32string word = ref.substr(i, end - i);
    if (is_capitalised(word)) run.push_back(std::move(word));
    else flush();
    i = end;
  }
  flush();
  return out;
}

}  // namespace mambamt::results
