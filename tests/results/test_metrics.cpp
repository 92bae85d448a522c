// Hand-worked cases for the metrics that sacreBLEU does not cover (contrastive
// accuracy, entity recall, length buckets, bootstrap), and edge cases of the
// tokenizers, Unicode handling and TER beyond sacreBLEU's own test suite.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/version.h"
#include "results/bleu.h"
#include "results/bootstrap.h"
#include "results/chrf.h"
#include "results/contrastive.h"
#include "results/entities.h"
#include "results/json.h"
#include "results/length_buckets.h"
#include "results/references.h"
#include "results/ter.h"
#include "results/tokenize.h"
#include "results/unicode.h"
#include "test_support.h"

using namespace mambamt::results;
using mambamt::InputError;
namespace core = mambamt::core;
using mambamt::results::testing::data_path;

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
}

TEST_CASE("13a and intl tokenizer edge cases match sacreBLEU's regular expressions") {
  nlohmann::ordered_json doc = read_json_file(data_path("tokenizer_cases.json"));
  for (const auto& c : doc.at("cases")) {
    const std::string input = c.at("input").get<std::string>();
    INFO("input: " << input);
    CHECK(tokenize(input, Tokenizer::k13a) == c.at("13a").get<std::string>());
    CHECK(tokenize(input, Tokenizer::kIntl) == c.at("intl").get<std::string>());
  }
  for (const auto& c : doc.at("lowercase")) {
    CHECK(to_lower(c.at("input").get<std::string>()) == c.at("lower").get<std::string>());
  }
  CHECK(tokenize("a b  c", Tokenizer::kChar) == "a b c");
  CHECK(tokenize("日本 語", Tokenizer::kChar) == "日 本 語");
  CHECK(tokenize(" keep  as is ", Tokenizer::kNone) == " keep  as is ");
  CHECK_THROWS_AS(parse_tokenizer("13b"), InputError);
}

TEST_CASE("UTF-8 decoding and Python string semantics") {
  CHECK(decode_utf8("aé€𝄞") == U"aé€𝄞");
  CHECK(encode_utf8(U"aé€𝄞") == "aé€𝄞");
  // Truncated, overlong and stray bytes become U+FFFD, one per byte.
  CHECK(decode_utf8(std::string("a\xE2\x82") + "b") == U"a\uFFFD\uFFFDb");
  CHECK(decode_utf8(std::string("\xC0\xAF")) == U"\uFFFD\uFFFD");
  CHECK(decode_utf8(std::string("\xED\xA0\x80")) == U"\uFFFD\uFFFD\uFFFD");  // a surrogate
  CHECK(split_whitespace(std::string("a\u3000b\x1c" "c\u00a0d \u200b")) ==
        std::vector<std::string>{"a", "b", "c", "d", "\u200b"});  // U+200B is not whitespace in Python
  CHECK(char_class(U'«') == CharClass::kPunctuation);
  CHECK(char_class(U'$') == CharClass::kSymbol);
  CHECK(char_class(U'½') == CharClass::kNumber);
  CHECK(char_class(U'٣') == CharClass::kNumber);
  CHECK(char_class(U'a') == CharClass::kOther);
  CHECK(char_class(U'、') == CharClass::kPunctuation);
  CHECK(to_lower(std::string("ÀÉÎ ÕÜ ß Ǆ")) == "àéî õü ß ǆ");
}

TEST_CASE("BLEU options, signatures and lowercase") {
  ReferenceStreams refs = {{"The CAT sat."}};
  BleuOptions lc;
  lc.lowercase = true;
  CHECK(corpus_bleu({"the cat sat."}, refs, lc).score == Approx(100.0));
  CHECK(corpus_bleu({"the cat sat."}, refs).score < 100.0);
  CHECK(bleu_signature(BleuOptions{}, 1) == "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp");
  BleuOptions floor;
  floor.smooth_method = Smoothing::kFloor;
  floor.effective_order = true;
  floor.lowercase = true;
  floor.tokenize = Tokenizer::kIntl;
  CHECK(bleu_signature(floor, 2) == "nrefs:2|case:lc|eff:yes|tok:intl|smooth:floor[0.10]");
  CHECK(bleu_preprocess("Hello, world!  ", BleuOptions{}) == "Hello , world !");
  CHECK_THROWS_AS(corpus_bleu({"a", "b"}, {{"a"}}), InputError);
  CHECK_THROWS_AS(parse_smoothing("laplace"), InputError);
  BleuStats wrong;
  wrong.counts = {1, 0};
  wrong.totals = {1, 0};
  CHECK_THROWS_AS(bleu_from_stats(wrong), InputError);
  // Segment statistics add up to the corpus statistics.
  std::vector<std::string> hyps = {"a b c d", "a b x"};
  ReferenceStreams r2 = {{"a b c d e", "a b y"}};
  auto segs = bleu_corpus_segment_stats(hyps, r2);
  BleuStats sum = sum_bleu_stats(segs);
  CHECK(sum.sys_len == 7);
  CHECK(sum.ref_len == 8);
  CHECK(sum.counts == std::vector<std::int64_t>{6, 4, 2, 1});
  CHECK(sum.totals == std::vector<std::int64_t>{7, 5, 3, 1});
}

TEST_CASE("chrF names, signature and the best reference") {
  ChrfScore s = sentence_chrf("abc", {"xyz", "abc"});
  CHECK(s.score == Approx(100.0));
  CHECK(s.name() == "chrF2");
  ChrfOptions pp = ChrfOptions::plus_plus();
  CHECK(sentence_chrf("abc", {"abc"}, pp).format() == "chrF2++ = 100.00");
  ChrfOptions b3;
  b3.beta = 3;
  CHECK(sentence_chrf("a", {"a"}, b3).name() == "chrF3");
  CHECK(chrf_signature(pp, 1) == "nrefs:1|case:mixed|eff:yes|nc:6|nw:2|space:no");
  ChrfOptions lc;
  lc.lowercase = true;
  CHECK(sentence_chrf("ABC", {"abc"}, lc).score == Approx(100.0));
}

TEST_CASE("TER's signature, and the version field of every signature") {
  CHECK(ter_signature(TerOptions{}, 1) == "nrefs:1|case:lc|tok:tercom|norm:no|punct:yes|asian:no");
  TerOptions all;
  all.normalized = all.no_punct = all.asian_support = all.case_sensitive = true;
  CHECK(ter_signature(all, 2) == "nrefs:2|case:mixed|tok:tercom|norm:yes|punct:no|asian:yes");
  CHECK_THAT(signature_version_field(),
             Catch::StartsWith(std::string("version:mambamt-") + core::version()) && Catch::EndsWith("/sacrebleu-2.6"));
}

TEST_CASE("TER by hand") {
  CHECK(sentence_ter("a b c d", {"a b x d"}).score == Approx(25.0));
  // Best of two references; the length is their average (4 and 2 words).
  TerScore t = sentence_ter("a b c d", {"a b x d", "a b"});
  CHECK(t.num_edits == 1);
  CHECK(t.ref_length == 3);
  CHECK(t.score == Approx(100.0 / 3));
  CHECK(t.format() == "TER = 33.33");
  // Case-insensitive by default.
  CHECK(sentence_ter("A B", {"a b"}).score == 0);
  TerOptions cs;
  cs.case_sensitive = true;
  CHECK(sentence_ter("A B", {"a b"}, cs).score == 100);
  // One block shift of three words costs 1.
  CHECK(translation_edit_rate({"c", "d", "e", "a", "b"}, {"a", "b", "c", "d", "e"}) == 1);
  CHECK(translation_edit_rate({"x", "y"}, {}) == 2);
}

TEST_CASE("paired test of two systems' contrastive accuracy") {
  // 200 examples: the baseline right on every other one; a system right on
  // nine in ten, and one right on one example more than the baseline.
  std::vector<double> base, better, one_more;
  for (int i = 0; i < 200; ++i) {
    base.push_back(i % 2 == 0 ? 1 : 0);
    better.push_back(i % 10 == 0 ? 0 : 1);
    one_more.push_back(i == 1 ? 1 : base.back());
  }
  CHECK(paired_accuracy_p(base, better) < 0.01);
  CHECK(paired_accuracy_p(base, one_more) > 0.05);
  CHECK(paired_accuracy_p(better, base) < 0.01);  // either direction
  // sacreBLEU's p for identical systems: no resample beats a difference of 0.
  CHECK(paired_accuracy_p(base, base) == 1.0);  // no difference: nothing significant
  CHECK_THROWS_AS(paired_accuracy_p(base, {1, 0}), InputError);
  CHECK_THROWS_AS(paired_accuracy_p({}, {}), InputError);
}

TEST_CASE("paired test of two systems' entity consistency resamples documents") {
  // 60 documents with two repeated entities each, both rendered: the baseline
  // consistent on one of them, a system on both; another system consistent on
  // both in one document more than the baseline.
  EntityConsistencyOutcomes base, better, one_more;
  for (auto* o : {&base, &better, &one_more}) o->set = "test 00000000000000aa (60 documents, 240 sentences)";
  for (int d = 0; d < 60; ++d)
    for (auto* o : {&base, &better, &one_more}) {
      o->documents.push_back(std::to_string(d));
      ConsistencyCell c;
      c.repeated = c.rendered = 2;
      c.consistent = o == &better || (o == &one_more && d == 0) ? 2 : 1;
      o->cells.push_back(c);
    }
  CHECK(paired_consistency_p(base, better) < 0.01);
  CHECK(paired_consistency_p(better, base) < 0.01);
  CHECK(paired_consistency_p(base, one_more) > 0.05);
  CHECK(paired_consistency_p(base, base) == 1.0);
  // A system that renders no repeated entity has no consistency: no test.
  EntityConsistencyOutcomes none = base;
  for (auto& c : none.cells) c.rendered = c.consistent = 0;
  CHECK(std::isnan(paired_consistency_p(none, base)));
  CHECK(std::isnan(paired_consistency_p(base, none)));
  // Rendered in one document only: most resamples render nothing and score 0,
  // not NaN.
  EntityConsistencyOutcomes sparse = none;
  sparse.cells[0].rendered = sparse.cells[0].consistent = 2;
  CHECK(std::isfinite(paired_consistency_p(sparse, base)));
  // Other text or other documents: no pairing.
  EntityConsistencyOutcomes other = better;
  other.set = "test 00000000000000bb (60 documents, 240 sentences)";
  CHECK_THROWS_AS(paired_consistency_p(base, other), InputError);
  other = better;
  other.documents[5] = "77";
  CHECK_THROWS_AS(paired_consistency_p(base, other), InputError);

  // From a store's table and text.
  core::StoreSnapshot snap;
  snap.texts["data.entities"] = base.set;
  core::ResultTable t;
  t.columns = {"consistent", "rendered", "repeated"};
  t.rows = {"0", "4"};
  t.values = {1, 2, 3, 0, 0, 1};
  snap.tables["entities/by_document"] = t;
  const std::optional<EntityConsistencyOutcomes> o = entity_consistency_outcomes(snap);
  REQUIRE(o);
  CHECK(o->set == base.set);
  CHECK(o->documents == std::vector<std::string>{"0", "4"});
  CHECK(o->cells[0].consistent == 1);
  CHECK(o->cells[0].rendered == 2);
  CHECK(o->cells[0].repeated == 3);
  CHECK(o->cells[1].repeated == 1);
  snap.texts.clear();
  CHECK(!entity_consistency_outcomes(snap));
}

TEST_CASE("contrastive accuracy by hand: ties and NaN count as wrong") {
  std::vector<ContrastiveScores> ex = {
      {-1.0, {-2.0, -3.0}, "er", 0},  // right
      {-2.0, {-2.0}, "sie", 1},       // tie: wrong
      {-1.5, {-1.0, -5.0}, "es", 2},  // one variant wins: wrong
      {-0.5, {-0.7}, "er", 3},        // right
      {-0.5, {-0.9, -0.6}, "sie", 5}, // right, bucket >3
      {kNaN, {-1.0}, "es", 4},        // NaN reference score: wrong
      {-1.0, {kNaN}, "er", 1},        // NaN variant score: wrong
  };
  ContrastiveResult r = contrastive_accuracy(ex);
  CHECK(r.total.correct == 3);
  CHECK(r.total.total == 7);
  CHECK(r.total.accuracy() == Approx(3.0 / 7));
  REQUIRE(r.by_label.size() == 3);
  CHECK(r.by_label["er"].correct == 2);
  CHECK(r.by_label["er"].total == 3);
  CHECK(r.by_label["sie"].correct == 1);
  CHECK(r.by_label["sie"].total == 2);
  CHECK(r.by_label["es"].correct == 0);
  CHECK(r.by_label["es"].total == 2);
  const std::int64_t correct[5] = {1, 0, 0, 1, 1}, total[5] = {1, 2, 1, 1, 2};
  for (int b = 0; b < kDistanceBuckets; ++b) {
    INFO("bucket " << distance_bucket_label(b));
    CHECK(r.by_distance[b].correct == correct[b]);
    CHECK(r.by_distance[b].total == total[b]);
  }
  CHECK(std::string(distance_bucket_label(4)) == ">3");
  CHECK(distance_bucket_index(17) == 4);
  CHECK(std::isnan(contrastive_accuracy({}).total.accuracy()));
  CHECK_THROWS_AS(contrastive_accuracy({{0.0, {}, "er", 0}}), InputError);
  CHECK_THROWS_AS(contrastive_accuracy({{0.0, {-1.0}, "er", -1}}), InputError);
}

TEST_CASE("verbatim matching respects word boundaries") {
  CHECK(contains_verbatim("Ann's report", "Ann"));
  CHECK_FALSE(contains_verbatim("The Annual report", "Ann"));
  CHECK_FALSE(contains_verbatim("Joanna", "Ann"));
  CHECK(contains_verbatim("a New York-based firm", "New York"));
  CHECK(contains_verbatim("(Zoë)", "Zoë"));
  CHECK_FALSE(contains_verbatim("Zoëy", "Zoë"));
  CHECK(count_verbatim("Berlin, Berlin und Berliner", "Berlin") == 2);
  CHECK(count_verbatim("C++ and C++17", "C++") == 2);  // a symbol ends the entity: no boundary needed after it
  CHECK_FALSE(contains_verbatim("anything", ""));

  EntityCounter counter({"Berlin", "Angela Merkel", "Ann", "#tag", "Nobody"});
  counter.add_line("Berlin Berlin, und Berliner");
  counter.add_line("Angela Merkel in Berlin");
  counter.add_line("Ann and Annual; Ann! #tag #tag2 x#tag");
  CHECK(counter.count("Berlin") == 3);
  CHECK(counter.count("Angela Merkel") == 1);
  CHECK(counter.count("Ann") == 2);
  CHECK(counter.count("#tag") == 2);  // "#tag2" continues the word; "x#tag" starts at a boundary
  CHECK(counter.count("Nobody") == 0);
  CHECK(counter.count("unknown") == 0);
}

TEST_CASE("named-entity recall by hand, bucketed by training frequency") {
  std::vector<EntitySegment> segs = {
      {"Angela Merkel traf Barack Obama in Berlin.", "Angela Merkel met Barack Obama in Berlin.",
       "Merkel met Obama in Berlin.", {"Angela Merkel", "Barack Obama", "Berlin", "Paris"}},
      {"Der Annual Report von Ann.", "Ann's annual report.", "The Annual report of Ann.", {"Ann", "Annual"}},
      {"Zoë Ørsted kam.", "Zoë Ørsted came.", "Zoe Orsted came.", {"Zoë Ørsted"}},
      {"Berlin ist groß", "Berlin is big", "Berlin is large", {"Berlin", "Berlin"}},
  };
  std::unordered_map<std::string, std::int64_t> freq = {
      {"Berlin", 120}, {"Angela Merkel", 16}, {"Barack Obama", 15}, {"Ann", 1}};
  EntityRecallResult r = entity_recall(segs, freq);
  CHECK(r.candidates == 8);  // Paris and Annual are filtered out, the repeated Berlin counts once
  CHECK(r.total.total == 6);
  CHECK(r.total.hits == 3);
  CHECK(r.total.recall() == Approx(0.5));
  const auto& unseen = r.by_bucket[static_cast<int>(EntityBucket::kUnseen)];
  const auto& regular = r.by_bucket[static_cast<int>(EntityBucket::kRegular)];
  const auto& frequent = r.by_bucket[static_cast<int>(EntityBucket::kFrequent)];
  CHECK(unseen.hits == 0);
  CHECK(unseen.total == 1);
  CHECK(regular.hits == 1);  // Ann recalled, Barack Obama (15) not
  CHECK(regular.total == 2);
  CHECK(frequent.hits == 2);  // Berlin twice; Angela Merkel (16) missed
  CHECK(frequent.total == 3);
  CHECK(entity_bucket(0) == EntityBucket::kUnseen);
  CHECK(entity_bucket(15) == EntityBucket::kRegular);
  CHECK(entity_bucket(16) == EntityBucket::kFrequent);
  CHECK(entity_bucket_range(EntityBucket::kRegular) == "[1,16)");
  CHECK(entity_bucket_range(EntityBucket::kFrequent) == "16+");
  CHECK(std::string(entity_bucket_name(EntityBucket::kUnseen)) == "unseen");
  CHECK(std::isnan(entity_recall({}, freq).total.recall()));
  CHECK_THROWS_AS(entity_recall(segs, freq, EntityBucketEdges{5, 5}), InputError);

  CHECK(verbatim_entity_candidates(
            "Gestern traf Angela Merkel den Präsidenten Barack Obama in Washington.",
            "Yesterday Angela Merkel met President Barack Obama in Washington.") ==
        std::vector<std::string>{"Angela Merkel", "Barack Obama", "Washington"});
}

TEST_CASE("entity consistency across a document by hand") {
  auto seg = [](const char* src, const char* ref, const char* hyp, std::vector<std::string> ents, std::int64_t doc) {
    return EntitySegment{src, ref, hyp, std::move(ents), doc};
  };
  std::vector<EntitySegment> segs = {
      // Document 0: Ann's 3 mentions all rendered (the extra ones in the
      // hypothesis do not count); Bob's 2 mentions rendered once ("Bo" is not
      // "Bob"). Ann twice in one list counts once.
      seg("Ann met Bob.", "Ann met Bob.", "Ann met Bob.", {"Ann", "Bob", "Ann"}, 0),
      seg("Ann saw Bob and Ann.", "Ann saw Bob and Ann.", "Ann saw Bo and Ann Ann Ann.", {"Ann", "Bob"}, 0),
      // Document 1: Cleo repeated and never rendered; Dan mentioned once.
      seg("Cleo left.", "Cleo left.", "She left.", {"Cleo"}, 1),
      seg("Cleo came back.", "Cleo came back.", "He came back.", {"Cleo"}, 1),
      seg("Dan ran.", "Dan ran.", "Dan ran.", {"Dan"}, 1),
      // Segments without a document are documents of their own: Eve twice in
      // the first (rendered once), once in the second.
      seg("Eve, Eve.", "Eve, Eve!", "Eve.", {"Eve"}, -1),
      seg("Eve sang.", "Eve sang.", "Eve sang.", {"Eve"}, -1),
      // Document 2: the first Bob is not in the reference, so one mention.
      seg("Bob rief.", "He called.", "Bob called.", {"Bob"}, 2),
      seg("Bob kam.", "Bob came.", "Bob came.", {"Bob"}, 2),
      // Document 3: Ann again, once; documents do not pool.
      seg("Ann.", "Ann.", "Ann.", {"Ann"}, 3),
  };
  std::unordered_map<std::string, std::int64_t> freq = {{"Ann", 20}, {"Bob", 3}, {"Dan", 1}};
  EntityConsistencyResult r = entity_consistency(segs, freq);
  CHECK(r.total.repeated == 4);  // Ann and Bob in document 0, Cleo in 1, Eve in the first lone segment
  CHECK(r.total.rendered == 3);  // not Cleo
  CHECK(r.total.consistent == 1);  // Ann
  CHECK(r.total.consistency() == Approx(1.0 / 3));
  CHECK(r.mentions == 9);
  const auto& unseen = r.by_bucket[static_cast<int>(EntityBucket::kUnseen)];
  const auto& regular = r.by_bucket[static_cast<int>(EntityBucket::kRegular)];
  const auto& frequent = r.by_bucket[static_cast<int>(EntityBucket::kFrequent)];
  CHECK(frequent.repeated == 1);
  CHECK(frequent.consistency() == Approx(1));
  CHECK(regular.repeated == 1);
  CHECK(regular.rendered == 1);
  CHECK(regular.consistency() == Approx(0));
  CHECK(unseen.repeated == 2);  // Cleo, Eve
  CHECK(unseen.rendered == 1);
  CHECK(unseen.consistent == 0);
  // Per document, every one present (the lone segments under -1 - index).
  std::vector<std::int64_t> docs;
  for (auto& [d, c] : r.by_document) docs.push_back(d);
  CHECK(docs == std::vector<std::int64_t>{-7, -6, 0, 1, 2, 3});
  CHECK(r.by_document.at(0).repeated == 2);
  CHECK(r.by_document.at(0).rendered == 2);
  CHECK(r.by_document.at(0).consistent == 1);
  CHECK(r.by_document.at(1).repeated == 1);
  CHECK(r.by_document.at(1).rendered == 0);
  CHECK(r.by_document.at(-6).repeated == 1);
  CHECK(r.by_document.at(-6).rendered == 1);
  CHECK(r.by_document.at(-7).repeated == 0);
  CHECK(r.by_document.at(2).repeated == 0);
  CHECK(r.by_document.at(3).repeated == 0);

  // Rendering Bob at both mentions of document 0 makes it consistent too.
  segs[1].hypothesis = "Ann saw Bob and Ann.";
  CHECK(entity_consistency(segs, freq).total.consistent == 2);
  // Nothing repeated: no value rather than 0.
  CHECK(std::isnan(entity_consistency({segs[4], segs[6]}, freq).total.consistency()));
  CHECK(entity_consistency({}, freq).total.repeated == 0);
  CHECK_THROWS_AS(entity_consistency(segs, freq, EntityBucketEdges{0, 5}), InputError);
}

TEST_CASE("quality by source-length bucket by hand") {
  std::vector<std::int64_t> lengths = {3, 10, 20, 40};
  std::vector<std::string> hyps = {"the cat sat on the mat", "a b c d e f", "one two three four",
                                   "x y z"};
  ReferenceStreams refs = {{"the cat sat on the mat", "a b c d e f", "one two three five", "p q r"}};
  LengthBucketOptions opt;
  opt.edges = {0, 16, 32, 64};
  auto buckets = quality_by_length(lengths, hyps, refs, opt);
  REQUIRE(buckets.size() == 4);
  CHECK(buckets[0].label == "0-15");
  CHECK(buckets[1].label == "16-31");
  CHECK(buckets[2].label == "32-63");
  CHECK(buckets[3].label == "64+");
  CHECK(buckets[0].segments == 2);
  CHECK(buckets[0].mean_source_length == Approx(6.5));
  CHECK(buckets[0].bleu == Approx(100.0));
  CHECK(buckets[0].chrf == Approx(100.0));
  // One segment: the bucket's corpus scores are that segment's.
  CHECK(buckets[1].bleu == Approx(corpus_bleu({hyps[2]}, {{refs[0][2]}}).score));
  CHECK(buckets[1].chrf == Approx(corpus_chrf({hyps[2]}, {{refs[0][2]}}).score));
  CHECK(buckets[2].bleu == 0.0);
  CHECK(buckets[3].segments == 0);
  CHECK(std::isnan(buckets[3].bleu));  // empty: missing, not 0
  CHECK(std::isnan(buckets[3].chrf));
  CHECK(length_bucket_index(opt.edges, 16) == 1);
  CHECK(length_bucket_index(opt.edges, 1000) == 3);

  LengthBucketOptions from_one;
  from_one.edges = {1, 17};
  CHECK_THROWS_AS(quality_by_length({0}, {"a"}, {{"a"}}, from_one), InputError);
  LengthBucketOptions unsorted;
  unsorted.edges = {0, 32, 16};
  CHECK_THROWS_AS(quality_by_length(lengths, hyps, refs, unsorted), InputError);
  CHECK_THROWS_AS(quality_by_length({1, 2}, hyps, refs, opt), InputError);
  CHECK(whitespace_lengths({"a  b c", "", "日本 語"}) == std::vector<std::int64_t>{3, 0, 2});
}

TEST_CASE("bootstrap confidence intervals") {
  SECTION("sacreBLEU's interval from sorted resample scores") {
    std::vector<double> scores;
    for (int k = 40; k >= 1; --k) scores.push_back(k);
    BootstrapResult r = estimate_ci(scores);
    CHECK(r.mean == Approx(20.5));
    CHECK(r.lower == 2);   // index 40 / 40 = 1
    CHECK(r.upper == 39);  // index 40 - 1 - 1
    CHECK(r.ci == Approx(18.5));
    CHECK_THROWS_AS(estimate_ci({}), InputError);
  }
  std::vector<std::string> hyps, good, refs1;
  for (int i = 0; i < 30; ++i) {
    const std::string n = std::to_string(i);
    refs1.push_back("the quick brown fox " + n + " jumps over the lazy dog");
    good.push_back(refs1.back());
    hyps.push_back(i % 3 == 0 ? "a quick fox " + n + " jumped over a dog" : refs1.back());
  }
  ReferenceStreams refs = {refs1};
  const auto stats = bleu_corpus_segment_stats(hyps, refs);
  BootstrapOptions opt;
  opt.num_samples = 200;
  SECTION("seeded, reproducible, centred on the score") {
    BootstrapResult a = bootstrap_bleu(stats, {}, opt);
    BootstrapResult b = bootstrap_bleu(stats, {}, opt);
    CHECK(a.mean == b.mean);
    CHECK(a.ci == b.ci);
    CHECK(a.num_samples == 200);
    CHECK(a.score == Approx(corpus_bleu(hyps, refs).score));
    CHECK(a.lower <= a.upper);
    CHECK(a.lower <= a.score);
    CHECK(a.score <= a.upper);
    CHECK(a.ci > 0);
    BootstrapOptions other = opt;
    other.seed = 7;
    CHECK(bootstrap_bleu(stats, {}, other).mean != a.mean);
    BootstrapResult c = bootstrap_chrf(chrf_corpus_segment_stats(hyps, refs), {}, opt);
    CHECK(c.score == Approx(corpus_chrf(hyps, refs).score));
    CHECK(c.lower <= c.upper);
    BootstrapResult t = bootstrap_ter(ter_corpus_segment_stats(hyps, refs), opt);
    CHECK(t.score == Approx(corpus_ter(hyps, refs).score));
  }
  SECTION("a perfect system has no spread") {
    BootstrapResult p = bootstrap_bleu(bleu_corpus_segment_stats(good, refs), {}, opt);
    CHECK(p.mean == Approx(100.0));
    CHECK(p.ci == 0);
  }
  SECTION("paired: a clearly better system is significant") {
    PairedBootstrapResult r =
        paired_bootstrap_bleu(stats, bleu_corpus_segment_stats(good, refs), {}, opt);
    CHECK(r.system.score == Approx(100.0));
    CHECK(r.baseline.score == Approx(corpus_bleu(hyps, refs).score));
    CHECK(r.p_value == Approx(1.0 / 201));
    PairedBootstrapResult c = paired_bootstrap_chrf(chrf_corpus_segment_stats(hyps, refs),
                                                    chrf_corpus_segment_stats(good, refs), {}, opt);
    CHECK(c.p_value < 0.05);
    CHECK_THROWS_AS(paired_bootstrap_bleu(stats, {}, {}, opt), InputError);
  }
  SECTION("paired: a system against itself is not significant") {
    CHECK(paired_bootstrap_bleu(stats, stats, {}, opt).p_value == 1.0);
    const auto chrf = chrf_corpus_segment_stats(hyps, refs);
    CHECK(paired_bootstrap_chrf(chrf, chrf, {}, opt).p_value == 1.0);
  }
  SECTION("bad input") {
    BootstrapOptions none;
    none.num_samples = 0;
    CHECK_THROWS_AS(bootstrap_bleu(stats, {}, none), InputError);
    CHECK_THROWS_AS(bootstrap_bleu({}, {}, opt), InputError);
  }
}
