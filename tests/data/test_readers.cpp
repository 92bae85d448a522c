// Corpus readers on small files in the exact distributed formats, including
// every error path: each error must name the file and line.
#include <catch2/catch.hpp>

#include <filesystem>
#include <set>

#include "data/contrastive.h"
#include "data/corpus.h"
#include "data/iwslt.h"
#include "data_fixtures.h"

using namespace mambamt::data;
using namespace mambamt::data::testing;
using Catch::Matchers::Contains;

namespace {

// IWSLT14 de-en style: talks separated by their metadata block, no <doc> wrapper.
const char* kTrainDe =
    "<url>http://www.ted.com/talks/lang/de/stephen_palumbi_following_the_mercury_trail.html</url>\n"
    "<keywords>talks, business, environment, ocean</keywords>\n"
    "<speaker>Stephen Palumbi</speaker>\n"
    "<talkid>1</talkid>\n"
    "<title>Stephen Palumbi: Folgen Sie der Spur des Quecksilbers</title>\n"
    "<description>TED Talk Subtitles and Transcript: Das Meer ist kompliziert.</description>\n"
    "Das Meer kann ziemlich kompliziert sein.\n"
    "Und was menschliche Gesundheit ist, kann auch kompliziert sein.\n"
    "<url>http://www.ted.com/talks/lang/de/ken_robinson.html</url>\n"
    "<keywords>talks, education</keywords>\n"
    "<speaker>Ken Robinson</speaker>\n"
    "<talkid>66</talkid>\n"
    "<title>Ken Robinson: Schulen und Kreativität</title>\n"
    "<description>TED Talk Subtitles and Transcript: Über Kreativität.</description>\n"
    "Guten Morgen. Wie geht es Ihnen?\n"
    "Es war großartig, nicht wahr?\n"
    "<3 Ich bin ganz begeistert.\n";
const char* kTrainEn =
    "<url>http://www.ted.com/talks/stephen_palumbi_following_the_mercury_trail.html</url>\n"
    "<keywords>talks, business, environment, ocean</keywords>\n"
    "<speaker>Stephen Palumbi</speaker>\n"
    "<talkid>1</talkid>\n"
    "<title>Stephen Palumbi: Following the mercury trail</title>\n"
    "<description>TED Talk Subtitles and Transcript: The ocean is complicated.</description>\n"
    "It can be a very complicated thing, the ocean.\n"
    "And it can be a very complicated thing, what human health is.\n"
    "<url>http://www.ted.com/talks/ken_robinson.html</url>\n"
    "<keywords>talks, education</keywords>\n"
    "<speaker>Ken Robinson</speaker>\n"
    "<talkid>66</talkid>\n"
    "<title>Ken Robinson: Do schools kill creativity?</title>\n"
    "<description>TED Talk Subtitles and Transcript: On creativity.</description>\n"
    "Good morning. How are you?\n"
    "It's been great, hasn't it?\n"
    "<3 I've been blown away by the whole thing.\n";

// IWSLT17 fr-en style: <doc docid> wrappers and reviewer/translator lines.
std::string wrapped_talk(const std::string& id, const std::vector<std::string>& lines) {
  std::string s = "<doc docid=\"" + id + "\" genre=\"lectures\">\n<url>http://www.ted.com/talks/" + id +
                  "</url>\n<keywords>talks</keywords>\n<speaker>Someone</speaker>\n<talkid>" + id +
                  "</talkid>\n<title>Title " + id + "</title>\n<description>About " + id +
                  "</description>\n<reviewer href=\"http://www.ted.com/profiles/1\">A Reviewer</reviewer>\n"
                  "<translator href=\"http://www.ted.com/profiles/2\">A Translator</translator>\n";
  for (const auto& l : lines) s += l + "\n";
  return s + "</doc>\n";
}

std::string xml(const std::string& set_tag, const std::string& docs) {
  const std::string attrs = set_tag == "srcset" ? " setid=\"iwslt2017-dev2010\" srclang=\"french\""
                                                : " setid=\"iwslt2017-dev2010\" srclang=\"french\" trglang=\"english\" refid=\"ref\"";
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<mteval>\n<" + set_tag + attrs + ">\n" + docs + "</" +
         set_tag + ">\n</mteval>\n";
}

std::string xml_doc(const std::string& id, const std::vector<std::pair<int, std::string>>& segs) {
  std::string s = "<doc docid=\"" + id + "\" genre=\"lectures\">\n<url>http://www.ted.com/talks/x</url>\n"
                  "<description>TED Talk Subtitles and Transcript: x</description>\n<keywords>talks</keywords>\n"
                  "<talkid>" + id + "</talkid>\n<title>T</title>\n";
  for (const auto& [i, t] : segs) s += "<seg id=\"" + std::to_string(i) + "\"> " + t + " </seg>\n";
  return s + "</doc>\n";
}

}  // namespace

TEST_CASE("plain parallel text: blank lines separate documents") {
  ScratchDir d;
  write_file(d.path("c.de"), "Hallo Welt.\nWie geht's?\n\nZweites Dokument.\n");
  write_file(d.path("c.en"), "Hello world.\nHow are you?\n\nSecond document.\n");
  const Corpus c = read_parallel(d.path("c.de"), d.path("c.en"));
  REQUIRE(c.documents.size() == 2);
  CHECK(c.documents[0].sentences.size() == 2);
  CHECK(c.documents[0].sentences[1].src == "Wie geht's?");
  CHECK(c.documents[0].sentences[1].tgt == "How are you?");
  CHECK(c.documents[0].sentences[1].id == 2);
  CHECK(c.documents[1].id == "2");
  CHECK(c.num_sentences() == 3);

  // The same through read_corpus with a prefix.
  const Corpus c2 = read_corpus(CorpusOptions{"parallel", d.path("c"), "de", "en"});
  CHECK(c2 == c);
}

TEST_CASE("plain parallel text: a .docids file gives the documents") {
  ScratchDir d;
  write_file(d.path("c.de"), "a1\r\na2\r\nb1\r\n");  // CRLF is accepted
  write_file(d.path("c.en"), "A1\nA2\nB1\n");
  write_file(d.path("c.docids"), "talk-7\ntalk-7\ntalk-9\n");
  const Corpus c = read_corpus(CorpusOptions{"parallel", d.path("c"), "de", "en"});
  REQUIRE(c.documents.size() == 2);
  CHECK(c.documents[0].id == "talk-7");
  CHECK(c.documents[0].sentences[1].src == "a2");
  CHECK(c.documents[1].id == "talk-9");
}

TEST_CASE("plain parallel text: every error names the file and line") {
  ScratchDir d;
  const auto s = d.path("x.src"), t = d.path("x.tgt"), ids = d.path("x.docids");

  write_file(s, "one\ntwo\nthree\n");
  write_file(t, "eins\nzwei\n");
  auto msg = input_error([&] { read_parallel(s, t); });
  CHECK_THAT(msg, Contains(place(t, 3)) && Contains("line counts differ") && Contains(s) && Contains("has 3"));

  write_file(s, "one\n\ntwo\n");
  write_file(t, "eins\nzwei\ndrei\n");
  msg = input_error([&] { read_parallel(s, t); });
  CHECK_THAT(msg, Contains(place(s, 2)) && Contains("blank line"));

  write_file(s, "one\n\n\ntwo\n");
  write_file(t, "eins\n\n\nzwei\n");
  msg = input_error([&] { read_parallel(s, t); });
  CHECK_THAT(msg, Contains(place(s, 3)) && Contains("empty document"));

  write_file(s, "\none\n");
  write_file(t, "\neins\n");
  msg = input_error([&] { read_parallel(s, t); });
  CHECK_THAT(msg, Contains(place(s, 1)) && Contains("empty document"));

  write_file(s, "one\nt\xC3\x28o\n");  // invalid UTF-8 at byte 2 of line 2
  write_file(t, "eins\nzwei\n");
  msg = input_error([&] { read_parallel(s, t); });
  CHECK_THAT(msg, Contains(s + ":2:2:") && Contains("invalid UTF-8"));

  write_file(s, "one\ntwo\n");
  write_file(t, "eins\nzwei\n");
  write_file(ids, "a\n");
  msg = input_error([&] { read_parallel(s, t, ids); });
  CHECK_THAT(msg, Contains(place(ids, 2)) && Contains("line counts differ"));

  write_file(s, "one\ntwo\nthree\n");
  write_file(t, "eins\nzwei\ndrei\n");
  write_file(ids, "a\nb\na\n");
  msg = input_error([&] { read_parallel(s, t, ids); });
  CHECK_THAT(msg, Contains(place(s, 3)) && Contains("document 'a' is split"));

  write_file(ids, "a\n\nb\n");
  msg = input_error([&] { read_parallel(s, t, ids); });
  CHECK_THAT(msg, Contains(place(ids, 2)) && Contains("empty document id"));

  write_file(s, "one\n\nthree\n");
  write_file(t, "eins\n\ndrei\n");
  write_file(ids, "a\na\nb\n");
  msg = input_error([&] { read_parallel(s, t, ids); });
  CHECK_THAT(msg, Contains(place(s, 2)) && Contains("empty sentence"));

  msg = input_error([&] { read_parallel(d.path("missing.src"), t); });
  CHECK_THAT(msg, Contains(d.path("missing.src")) && Contains("cannot open"));
  // A directory opens on Linux and reads as an empty file.
  std::filesystem::create_directories(d.path("dir.src"));
  msg = input_error([&] { read_parallel(d.path("dir.src"), t); });
  CHECK_THAT(msg, Contains(d.path("dir.src") + ": is a directory, not a file"));
}

TEST_CASE("TSV with and without document ids") {
  ScratchDir d;
  write_file(d.path("a.tsv"), "Hallo.\tHello.\td1\nJa.\tYes.\td1\n\nNein.\tNo.\td2\n");
  Corpus c = read_tsv(d.path("a.tsv"));
  REQUIRE(c.documents.size() == 2);
  CHECK(c.documents[0].id == "d1");
  CHECK(c.documents[0].sentences.size() == 2);
  CHECK(c.documents[1].sentences[0].tgt == "No.");

  write_file(d.path("b.tsv"), "Hallo.\tHello.\nJa.\tYes.\n\nNein.\tNo.\n");
  c = read_tsv(d.path("b.tsv"));
  REQUIRE(c.documents.size() == 2);
  CHECK(c.documents[1].id == "2");

  // write_tsv -> read_tsv is the identity.
  write_tsv(c, d.path("c.tsv"));
  CHECK(read_tsv(d.path("c.tsv")) == c);
  write_parallel(c, d.path("p.src"), d.path("p.tgt"));
  CHECK(read_parallel(d.path("p.src"), d.path("p.tgt")) == c);
  write_parallel(c, d.path("q.src"), d.path("q.tgt"), d.path("q.docids"));
  CHECK(read_parallel(d.path("q.src"), d.path("q.tgt"), d.path("q.docids")) == c);
}

TEST_CASE("corpus fingerprints follow the text and the document boundaries, not the format or ids") {
  ScratchDir d;
  write_file(d.path("a.tsv"), "Hallo.\tHello.\td1\nJa.\tYes.\td1\nNein.\tNo.\td2\n");
  const Corpus a = read_tsv(d.path("a.tsv"));
  const std::string fp = corpus_fingerprint(a);
  CHECK(fp.size() == 16);
  CHECK(fp.find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(corpus_summary(a) == fp + " (2 documents, 3 sentences)");
  // The same text as plain parallel files (ids "1", "2") and with other ids.
  write_file(d.path("p.de"), "Hallo.\nJa.\n\nNein.\n");
  write_file(d.path("p.en"), "Hello.\nYes.\n\nNo.\n");
  CHECK(corpus_fingerprint(read_parallel(d.path("p.de"), d.path("p.en"))) == fp);
  write_file(d.path("b.tsv"), "Hallo.\tHello.\tx\nJa.\tYes.\tx\nNein.\tNo.\ty\n");
  CHECK(corpus_fingerprint(read_tsv(d.path("b.tsv"))) == fp);
  // Any change of a sentence, a side or a boundary changes it.
  std::vector<Corpus> changed(5, a);
  changed[0].documents[1].sentences[0].tgt = "No!";
  changed[1].documents[0].sentences[0].src = "Hallo!";
  std::swap(changed[2].documents[0].sentences[0].src, changed[2].documents[0].sentences[0].tgt);
  // Ja. moves into the second document.
  changed[3].documents[1].sentences.insert(changed[3].documents[1].sentences.begin(), a.documents[0].sentences[1]);
  changed[3].documents[0].sentences.pop_back();
  // A word moved across the source/target boundary.
  changed[4].documents[0].sentences[0].src = "Hallo. Hello.";
  changed[4].documents[0].sentences[0].tgt = "";
  std::set<std::string> all = {fp};
  for (const Corpus& c : changed) all.insert(corpus_fingerprint(c));
  CHECK(all.size() == 6);
}

TEST_CASE("TSV: every error names the file and line") {
  ScratchDir d;
  const auto f = d.path("e.tsv");
  write_file(f, "a\tb\td\nonly-one-field\n");
  auto msg = input_error([&] { read_tsv(f); });
  CHECK_THAT(msg, Contains(place(f, 2)) && Contains("expected 2 or 3"));

  write_file(f, "a\tb\td\nc\td\n");
  msg = input_error([&] { read_tsv(f); });
  CHECK_THAT(msg, Contains(place(f, 2)) && Contains("line 1 has 3"));

  write_file(f, "a\tb\nc\t \n");
  msg = input_error([&] { read_tsv(f); });
  CHECK_THAT(msg, Contains(f + ":2:3:") && Contains("empty target sentence"));

  write_file(f, "a\tb\td1\nc\td\td2\ne\tf\td1\n");
  msg = input_error([&] { read_tsv(f); });
  CHECK_THAT(msg, Contains(place(f, 3)) && Contains("'d1' is split"));

  write_file(f, "a\tb\n\xFF\tc\n");
  msg = input_error([&] { read_tsv(f); });
  CHECK_THAT(msg, Contains(f + ":2:1:") && Contains("invalid UTF-8"));

  write_file(f, "a\tb\n\n\nc\td\n");
  msg = input_error([&] { read_tsv(f); });
  CHECK_THAT(msg, Contains(place(f, 3)) && Contains("empty document"));

  write_file(f, "");
  msg = input_error([&] { read_tsv(f); });
  CHECK_THAT(msg, Contains(f) && Contains("no sentences"));
}

TEST_CASE("IWSLT14 train.tags: talks are documents, metadata is not text") {
  ScratchDir d;
  write_file(d.path("de-en/train.tags.de-en.de"), kTrainDe);
  write_file(d.path("de-en/train.tags.de-en.en"), kTrainEn);
  const Corpus c = read_iwslt(d.path("de-en"), "de", "en");
  REQUIRE(c.documents.size() == 2);
  CHECK(c.documents[0].id == "1");
  CHECK(c.documents[1].id == "66");
  REQUIRE(c.documents[1].sentences.size() == 3);
  CHECK(c.documents[1].sentences[0].src == "Guten Morgen. Wie geht es Ihnen?");
  CHECK(c.documents[1].sentences[2].tgt == "<3 I've been blown away by the whole thing.");  // text, not a tag
  // The reverse direction finds the same files (the pair is named de-en).
  const Corpus r = read_iwslt(d.path("de-en"), "en", "de");
  CHECK(r.documents[0].sentences[0].src == "It can be a very complicated thing, the ocean.");
}

TEST_CASE("IWSLT17 train.tags with <doc docid> wrappers") {
  ScratchDir d;
  write_file(d.path("train.tags.fr-en.fr"),
             wrapped_talk("1", {"Merci beaucoup.", "C'est un honneur."}) + wrapped_talk("2", {"Bonjour."}));
  write_file(d.path("train.tags.fr-en.en"),
             wrapped_talk("1", {"Thank you so much.", "It's an honor."}) + wrapped_talk("2", {"Hello."}));
  const Corpus c = read_iwslt(d.path("train.tags.fr-en"), "fr", "en");
  REQUIRE(c.documents.size() == 2);
  CHECK(c.documents[0].sentences.size() == 2);
  CHECK(c.documents[0].sentences[1].src == "C'est un honneur.");
  CHECK(c.documents[1].id == "2");
}

TEST_CASE("IWSLT train.tags: every error names the file, line and document") {
  ScratchDir d;
  const auto s = d.path("train.tags.fr-en.fr"), t = d.path("train.tags.fr-en.en");
  auto wrapped = [](const std::string& id, const std::string& body) {
    return "<doc docid=\"" + id + "\">\n<talkid>" + id + "</talkid>\n" + body + "</doc>\n";
  };

  write_file(s, "<doc docid=\"1\">\n<talkid>1</talkid>\nBonjour.\n");
  write_file(t, wrapped("1", "Hello.\n"));
  auto msg = input_error([&] { read_iwslt_train(s, t); });
  CHECK_THAT(msg, Contains(place(s, 1)) && Contains("unclosed <doc>"));

  write_file(s, "<doc docid=\"1\">\nBonjour.\n<doc docid=\"2\">\nSalut.\n</doc>\n");
  msg = input_error([&] { read_iwslt_train(s, t); });
  CHECK_THAT(msg, Contains(place(s, 3)) && Contains("missing </doc>"));

  write_file(s, "Bonjour.\n</doc>\n");
  msg = input_error([&] { read_iwslt_train(s, t); });
  CHECK_THAT(msg, Contains(place(s, 2)) && Contains("</doc> without"));

  write_file(s, "<doc docid=\"1\">\n<title>Un titre\nBonjour.\n</doc>\n");
  msg = input_error([&] { read_iwslt_train(s, t); });
  CHECK_THAT(msg, Contains(place(s, 2)) && Contains("unclosed <title>"));

  write_file(s, wrapped("1", "Bonjour.\n") + wrapped("2", ""));
  write_file(t, wrapped("1", "Hello.\n") + wrapped("2", "Hi.\n"));
  msg = input_error([&] { read_iwslt_train(s, t); });
  CHECK_THAT(msg, Contains(place(s, 5)) && Contains("empty document '2'"));

  // A line missing in one talk of the target: named by document and line.
  write_file(s, wrapped("1", "Bonjour.\nÇa va ?\nOui.\n"));
  write_file(t, wrapped("1", "Hello.\nYes.\n"));
  msg = input_error([&] { read_iwslt_train(s, t); });
  CHECK_THAT(msg, Contains(place(s, 1)) && Contains("document '1' has 3 sentences") && Contains(t + ":3-4"));

  write_file(s, wrapped("1", "Bonjour.\n") + wrapped("2", "Salut.\n"));
  write_file(t, wrapped("1", "Hello.\n") + wrapped("3", "Hi.\n"));
  msg = input_error([&] { read_iwslt_train(s, t); });
  CHECK_THAT(msg, Contains(place(s, 5)) && Contains("document '2'") && Contains("'3'"));

  write_file(t, wrapped("1", "Hello.\n"));
  msg = input_error([&] { read_iwslt_train(s, t); });
  CHECK_THAT(msg, Contains(place(s, 5)) && Contains("no counterpart") && Contains("2 vs 1 documents"));

  write_file(s, wrapped("1", "Bon\xE2\x82jour.\n"));
  msg = input_error([&] { read_iwslt_train(s, t); });
  CHECK_THAT(msg, Contains(s + ":3:4:") && Contains("invalid UTF-8"));
}

TEST_CASE("IWSLT XML dev/test sets: segments aligned by document and id") {
  ScratchDir d;
  const auto s = d.path("IWSLT17.TED.dev2010.fr-en.fr.xml"), t = d.path("IWSLT17.TED.dev2010.fr-en.en.xml");
  write_file(s, xml("srcset", xml_doc("535", {{1, "Merci. C&apos;est un honneur &amp; un plaisir."}, {2, "Deux."}}) +
                                  xml_doc("536", {{1, "Autre &#233;pisode."}})));
  write_file(t, xml("refset", xml_doc("535", {{1, "Thanks. It's an honor &amp; a pleasure."}, {2, "Two."}}) +
                                  xml_doc("536", {{1, "Another episode."}})));
  const Corpus c = read_iwslt(s, "fr", "en");
  REQUIRE(c.documents.size() == 2);
  CHECK(c.documents[0].id == "535");
  CHECK(c.documents[0].sentences[0].src == "Merci. C'est un honneur & un plaisir.");
  CHECK(c.documents[0].sentences[1].id == 2);
  CHECK(c.documents[1].sentences[0].src == "Autre \xC3\xA9pisode.");
  CHECK(c.documents[1].sentences[0].id == 1);  // ids restart per document
  // A prefix finds the pair too.
  CHECK(read_iwslt(d.path("IWSLT17.TED.dev2010.fr-en"), "fr", "en") == c);
}

TEST_CASE("IWSLT XML: every error names the file, line, document and segment") {
  ScratchDir d;
  const auto s = d.path("x.fr.xml"), t = d.path("x.en.xml");
  const std::string good_t = xml("refset", xml_doc("7", {{1, "One."}, {2, "Two."}}));
  write_file(t, good_t);
  // Header lines: 1 <?xml, 2 <mteval>, 3 <srcset>, 4 <doc>, 5-9 metadata, 10.. segs.
  auto check = [&](const std::string& src, const std::string& where, const std::string& what) {
    write_file(s, src);
    const auto msg = input_error([&] { read_iwslt_xml(s, t); });
    CHECK_THAT(msg, Contains(where) && Contains(what));
  };
  check(xml("srcset", xml_doc("7", {{1, "Un."}})), place(t, 11), "document '7': segment 2 has no counterpart in " + s);
  std::string unclosed_seg = xml("srcset", xml_doc("7", {{1, "Un."}, {2, "Deux."}}));
  unclosed_seg.replace(unclosed_seg.find(" </seg>\n<seg id=\"2\">"), 7, "");
  check(unclosed_seg, place(s, 10), "unclosed <seg id=\"1\">");
  std::string no_doc_close = xml("srcset", xml_doc("7", {{1, "Un."}, {2, "Deux."}}));
  no_doc_close.erase(no_doc_close.find("</doc>\n"), 7);
  check(no_doc_close, place(s, 12), "before the <doc> opened at line 4 is closed");
  std::string no_set_close = xml("srcset", xml_doc("7", {{1, "Un."}, {2, "Deux."}}));
  no_set_close.erase(no_set_close.find("</srcset>\n"), 10);
  check(no_set_close, place(s, 13), "does not close the <srcset> opened at line 3");
  std::string eof = "<mteval>\n<srcset>\n" + xml_doc("7", {{1, "Un."}, {2, "Deux."}});
  check(eof, place(s, 2), "unclosed <srcset>");
  check("<mteval>\n<srcset>\n<doc docid=\"7\">\n<seg id=\"1\"> Un. </seg>\n", place(s, 3), "unclosed <doc docid=\"7\">");
  check(xml("srcset", "<seg id=\"1\"> Un. </seg>\n"), place(s, 4), "<seg> outside <doc>");
  check(xml("srcset", "<doc docid=\"7\">\nloose text\n</doc>\n"), place(s, 5), "text outside <seg>");
  check(xml("srcset", "<doc genre=\"lectures\">\n<seg id=\"1\"> Un. </seg>\n</doc>\n"), place(s, 4), "without a docid");
  check(xml("srcset", "<doc docid=\"7\">\n<seg id=\"x\"> Un. </seg>\n</doc>\n"), place(s, 5), "numeric id");
  check(xml("srcset", "<doc docid=\"7\">\n<seg id=\"1\"> Un. </seg>\n<seg id=\"1\"> Deux. </seg>\n</doc>\n"),
        place(s, 6), "duplicate segment id 1");
  check(xml("srcset", xml_doc("7", {{1, "Un."}, {3, "Trois."}})), place(s, 11), "segment id 3 is paired with segment id 2");
  check(xml("srcset", xml_doc("8", {{1, "Un."}, {2, "Deux."}})), place(s, 4), "document '8' is paired with document '7'");
  check(xml("srcset", "<doc docid=\"7\">\n<title>T</title>\n</doc>\n"), place(s, 4), "empty document '7'");
  check(xml("srcset", xml_doc("7", {{1, "Un."}, {2, "De\xC0ux."}})), s + ":11:", "invalid UTF-8");
}

TEST_CASE("contrastive TSV round trip and errors") {
  ScratchDir d;
  ContrastiveExample e;
  e.doc_id = "test-1";
  e.sentence = 3;
  e.label = "sye";
  e.distance = 2;
  e.src_context = {"ta kabo mira .", "Zorvak pa lumi ."};
  e.tgt_context = {"ra glen mirek .", "Zorvak lumek ."};
  e.source = "ul tesa .";
  e.reference = "sye tesa .";
  e.contrastive = {"hen tesa .", "dit tesa ."};
  ContrastiveExample first = e;
  first.sentence = 1;
  first.src_context.clear();
  first.tgt_context.clear();
  first.distance = 0;
  write_contrastive({e, first}, d.path("c.tsv"));
  const auto back = read_contrastive(d.path("c.tsv"));
  REQUIRE(back.size() == 2);
  CHECK((back[0] == e));
  CHECK((back[1] == first));
  // The set's fingerprint: the same examples give the same, any field changed another.
  const std::string summary = contrastive_summary({e, first});
  CHECK(summary.find_first_not_of("0123456789abcdef") == 16);
  CHECK(summary.substr(16) == " (2 examples)");
  CHECK(contrastive_summary(back) == summary);
  CHECK(contrastive_summary({first, e}) != summary);
  ContrastiveExample moved = first;
  moved.tgt_context = {"x"};
  moved.src_context = {"y"};
  const std::string with_context = contrastive_summary({e, moved});
  CHECK(with_context != summary);
  std::swap(moved.src_context, moved.tgt_context);  // the same strings in the other field
  CHECK(contrastive_summary({e, moved}) != with_context);
  moved = e;
  moved.distance = 1;
  CHECK(contrastive_summary({moved, first}) != summary);
  CHECK(distance_bucket(0) == "0");
  CHECK(distance_bucket(3) == "3");
  CHECK(distance_bucket(4) == ">3");

  std::string text = slurp(d.path("c.tsv"));
  const std::string header = text.substr(0, text.find('\n') + 1);
  write_file(d.path("bad.tsv"), header + "test-1\t3\tpronoun\tsye\t2\ta\tb\tsrc\tref\n");
  auto msg = input_error([&] { read_contrastive(d.path("bad.tsv")); });
  CHECK_THAT(msg, Contains(place(d.path("bad.tsv"), 2)) && Contains("at least 10"));
  write_file(d.path("bad.tsv"), header + "test-1\tthree\tpronoun\tsye\t2\ta\tb\tsrc\tref\tvar\n");
  msg = input_error([&] { read_contrastive(d.path("bad.tsv")); });
  CHECK_THAT(msg, Contains(d.path("bad.tsv") + ":2:8:") && Contains("sentence"));
  write_file(d.path("bad.tsv"), header + "test-1\t3\tpronoun\tsye\t2\ta ||| b\tc\tsrc\tref\tvar\n");
  msg = input_error([&] { read_contrastive(d.path("bad.tsv")); });
  CHECK_THAT(msg, Contains(place(d.path("bad.tsv"), 2)) && Contains("tgt_context has 1"));
  write_file(d.path("bad.tsv"), header + "test-1\t3\tpronoun\tsye\t2\t\t\tsrc\tref\tref\n");
  msg = input_error([&] { read_contrastive(d.path("bad.tsv")); });
  CHECK_THAT(msg, Contains(place(d.path("bad.tsv"), 2)) && Contains("equals the reference"));
  write_file(d.path("bad.tsv"), "doc\tsentence\n");
  msg = input_error([&] { read_contrastive(d.path("bad.tsv")); });
  CHECK_THAT(msg, Contains(place(d.path("bad.tsv"), 1)) && Contains("bad header"));
}
