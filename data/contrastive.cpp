#include "data/contrastive.h"

#include <cstdlib>

#include "core/error.h"
#include "core/hash.h"
#include "data/detail/text.h"

namespace mambamt::data {

namespace {

const char* const kColumns[] = {"doc_id", "sentence", "phenomenon", "label", "distance",
                                "src_context", "tgt_context", "source", "reference"};
constexpr size_t kFixed = 9;

std::vector<std::string> split_context(std::string_view s) {
  std::vector<std::string> out;
  if (detail::trim(s).empty()) return out;
  const std::string_view sep = kContextSeparator;
  size_t start = 0;
  while (true) {
    const size_t pos = s.find(sep, start);
    out.emplace_back(detail::trim(s.substr(start, pos == std::string_view::npos ? s.npos : pos - start)));
    if (pos == std::string_view::npos) return out;
    start = pos + sep.size();
  }
}

void check_cell(const std::string& s, const char* what) {
  if (s.find_first_of("\t\n\r") != std::string::npos) {
    throw Error(std::string("contrastive example: ") + what + " contains a tab or newline: '" + s + "'");
  }
}

}  // namespace

bool ContrastiveExample::operator==(const ContrastiveExample& o) const {
  return doc_id == o.doc_id && sentence == o.sentence && phenomenon == o.phenomenon && label == o.label &&
         distance == o.distance && src_context == o.src_context && tgt_context == o.tgt_context &&
         source == o.source && reference == o.reference && contrastive == o.contrastive;
}

std::string contrastive_summary(const std::vector<ContrastiveExample>& examples) {
  // Every field, a unit separator (0x1f) after each and a record separator
  // (0x1e) after each example, so no two different sets join to the same bytes.
  core::Fnv64 h;
  auto field = [&h](const std::string& s) {
    h.add(s);
    h.add_byte(0x1f);
  };
  for (const ContrastiveExample& e : examples) {
    field(e.doc_id);
    field(std::to_string(e.sentence));
    field(e.phenomenon);
    field(e.label);
    field(std::to_string(e.distance));
    for (auto* list : {&e.src_context, &e.tgt_context, &e.contrastive}) {
      for (const std::string& s : *list) field(s);
      h.add_byte(0x1d);
    }
    field(e.source);
    field(e.reference);
    h.add_byte(0x1e);
  }
  return h.hex() + " (" + std::to_string(examples.size()) + " examples)";
}

std::string distance_bucket(int64_t distance) {
  return distance > 3 ? ">3" : std::to_string(distance);
}

std::vector<ContrastiveExample> read_contrastive(const std::string& path) {
  detail::LineReader in(path);
  std::string line;
  if (!in.next(line)) throw InputError(located(path, 1, 0, "empty file: expected the header line"));
  {
    const auto header = detail::split(line, '\t');
    for (size_t i = 0; i < kFixed; ++i) {
      if (i >= header.size() || detail::trim(header[i]) != kColumns[i]) {
        std::string expected;
        for (size_t k = 0; k < kFixed; ++k) expected += (k ? "\\t" : "") + std::string(kColumns[k]);
        throw InputError(located(path, 1, 0, "bad header: expected " + expected + "\\tcontrastive..."));
      }
    }
  }
  std::vector<ContrastiveExample> out;
  while (in.next(line)) {
    const long ln = in.line_number();
    if (detail::trim(line).empty()) continue;
    const auto f = detail::split(line, '\t');
    if (f.size() < kFixed + 1) {
      throw InputError(located(path, ln, 0,
                               "expected at least " + std::to_string(kFixed + 1) +
                                   " tab-separated fields (9 columns and one contrastive variant), found " +
                                   std::to_string(f.size())));
    }
    std::vector<long> col(f.size(), 1);
    for (size_t i = 1; i < f.size(); ++i) col[i] = col[i - 1] + static_cast<long>(f[i - 1].size()) + 1;
    auto integer = [&](size_t i) {
      const std::string s(detail::trim(f[i]));
      char* end = nullptr;
      const long long v = s.empty() ? -1 : std::strtoll(s.c_str(), &end, 10);
      if (s.empty() || *end != 0 || v < 0) {
        throw InputError(located(path, ln, col[i], std::string(kColumns[i]) + ": expected a non-negative integer, got '" + s + "'"));
      }
      return static_cast<int64_t>(v);
    };
    auto text = [&](size_t i) {
      std::string s(detail::trim(f[i]));
      if (s.empty()) throw InputError(located(path, ln, col[i], std::string("empty ") + (i < kFixed ? kColumns[i] : "contrastive variant")));
      return s;
    };
    ContrastiveExample e;
    e.doc_id = text(0);
    e.sentence = integer(1);
    e.phenomenon = text(2);
    e.label = text(3);
    e.distance = integer(4);
    e.src_context = split_context(f[5]);
    e.tgt_context = split_context(f[6]);
    if (e.src_context.size() != e.tgt_context.size()) {
      throw InputError(located(path, ln, col[6],
                               "tgt_context has " + std::to_string(e.tgt_context.size()) +
                                   " sentences but src_context has " + std::to_string(e.src_context.size())));
    }
    e.source = text(7);
    e.reference = text(8);
    for (size_t i = kFixed; i < f.size(); ++i) {
      e.contrastive.push_back(text(i));
      if (e.contrastive.back() == e.reference) {
        throw InputError(located(path, ln, col[i], "contrastive variant equals the reference"));
      }
    }
    out.push_back(std::move(e));
  }
  return out;
}

void write_contrastive(const std::vector<ContrastiveExample>& examples, const std::string& path) {
  std::string out;
  for (size_t k = 0; k < kFixed; ++k) out += std::string(k ? "\t" : "") + kColumns[k];
  out += "\tcontrastive\n";
  auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) {
      if (v[i].find("|||") != std::string::npos || v[i].empty()) {
        throw Error("contrastive example: context sentence cannot be written: '" + v[i] + "'");
      }
      check_cell(v[i], "context");
      s += (i ? kContextSeparator : "") + v[i];
    }
    return s;
  };
  for (const auto& e : examples) {
    if (e.contrastive.empty()) throw Error("contrastive example without variants: " + e.doc_id);
    for (const auto* s : {&e.doc_id, &e.phenomenon, &e.label, &e.source, &e.reference}) check_cell(*s, "field");
    out += e.doc_id + "\t" + std::to_string(e.sentence) + "\t" + e.phenomenon + "\t" + e.label + "\t" +
           std::to_string(e.distance) + "\t" + join(e.src_context) + "\t" + join(e.tgt_context) + "\t" + e.source +
           "\t" + e.reference;
    for (const auto& c : e.contrastive) {
      check_cell(c, "variant");
      out += "\t" + c;
    }
    out += '\n';
  }
  detail::write_file_atomic(path, out);
}

}  // namespace mambamt::data
