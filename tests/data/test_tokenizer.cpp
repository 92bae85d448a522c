// sentencepiece through its C++ API: special tokens, reproducible training,
// reuse of a trained directory, race-safe writes, and the word cache being
// exactly sentencepiece's own segmentation.
#include <catch2/catch.hpp>
#include <dlfcn.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "data/synthetic.h"
#include "data/tokenizer.h"
#include "data_fixtures.h"
#include "mambamt_spm_path.h"

using namespace mambamt::data;
using namespace mambamt::data::testing;
using Catch::Matchers::Contains;

namespace {

const Corpus& training_corpus() {
  static const Corpus c = [] {
    SyntheticOptions o;
    o.train_docs = 300;
    o.valid_docs = 1;
    o.test_docs = 1;
    Corpus corpus = generate_synthetic(o).train;
    // Some real-language text with non-ASCII characters.
    Document d;
    d.id = "de";
    d.sentences.push_back({"Über die Brücke gehen wir morgen früh.", "We cross the bridge early tomorrow.", 1});
    d.sentences.push_back({"Das Mädchen läuft schnell.", "The girl runs fast.", 2});
    corpus.documents.push_back(d);
    return corpus;
  }();
  return c;
}

TokenizerOptions options(const std::string& type = "bpe") {
  TokenizerOptions o;
  o.model_type = type;
  o.vocab_size = 400;
  o.languages = {"src", "tgt"};
  return o;
}

size_t temp_files(const std::string& dir) {
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) n += e.path().string().find(".tmp.") != std::string::npos;
  return n;
}

}  // namespace

TEST_CASE("tokenizer: special tokens, language tags, encode and decode") {
  ScratchDir d;
  const Tokenizer tok = Tokenizer::train(training_corpus(), options(), d.path("tok"));
  CHECK(std::filesystem::exists(d.path("tok/spm.model")));
  CHECK(std::filesystem::exists(d.path("tok/spm.vocab")));
  CHECK(std::filesystem::exists(d.path("tok/tokenizer.txt")));
  const SpecialIds& s = tok.specials();
  CHECK(s.pad == 0);
  CHECK(s.unk == 1);
  CHECK(s.bos == 2);
  CHECK(s.eos == 3);
  CHECK(s.sep == 4);
  CHECK(tok.piece(4) == "<sep>");
  CHECK(tok.language_id("src") == 5);
  CHECK(tok.language_id("tgt") == 6);
  CHECK_THAT(input_error([&] { tok.language_id("fr"); }), Contains("<fr>"));
  CHECK(tok.vocab_size() <= 400);
  CHECK(tok.vocab_size() > 100);

  const std::string text = training_corpus().documents[0].sentences[0].src;
  const auto ids = tok.encode(text);
  REQUIRE_FALSE(ids.empty());
  for (int32_t id : ids) CHECK(id > 6);  // text never encodes to a special token
  CHECK(tok.decode(ids) == text);
  // A literal "<sep>" in text is text, not the separator.
  for (int32_t id : tok.encode("a <sep> b")) CHECK(id != s.sep);

  std::vector<int32_t> two = tok.encode("Das Mädchen läuft schnell.");
  two.push_back(s.sep);
  const auto second = tok.encode(text);
  two.insert(two.end(), second.begin(), second.end());
  two.push_back(s.eos);
  const auto parts = tok.decode_sentences(two);
  REQUIRE(parts.size() == 2);
  CHECK(parts[0] == "Das Mädchen läuft schnell.");
  CHECK(parts[1] == text);

  const Tokenizer loaded = Tokenizer::load(d.path("tok"));
  CHECK(loaded.encode(text) == ids);
  CHECK(loaded.vocab_size() == tok.vocab_size());
}

TEST_CASE("tokenizer: the word cache gives exactly sentencepiece's segmentation") {
  ScratchDir d;
  for (const char* type : {"bpe", "unigram"}) {
    const Tokenizer tok = Tokenizer::train(training_corpus(), options(type), d.path(type));
    int64_t n = 0;
    for (const auto& doc : training_corpus().documents)
      for (const auto& s : doc.sentences) {
        if (n++ > 3000) break;
        REQUIRE(tok.encode(s.src) == tok.encode_uncached(s.src));
        REQUIRE(tok.encode(s.tgt) == tok.encode_uncached(s.tgt));
      }
    for (const std::string s : {"  leading and   repeated  spaces ", "tab\tinside", "", " ", "Über\u00a0Brücke",
                                "zero\u200bwidth word", "\u3000ideographic space", "Ünseen Wörter ÆØÅ 漢字",
                                "x  \u200b  y", "Kabo.Mira,Zorvak!?"}) {
      INFO(type << ": '" << s << "'");
      CHECK(tok.encode(s) == tok.encode_uncached(s));
    }
  }
}

TEST_CASE("tokenizer training is reproducible") {
  ScratchDir d;
  for (const char* type : {"bpe", "unigram"}) {
    Tokenizer::train(training_corpus(), options(type), d.path(std::string(type) + "1"));
    Tokenizer::train(training_corpus(), options(type), d.path(std::string(type) + "2"));
    CHECK(slurp(d.path(std::string(type) + "1/spm.model")) == slurp(d.path(std::string(type) + "2/spm.model")));
    CHECK(slurp(d.path(std::string(type) + "1/tokenizer.txt")) == slurp(d.path(std::string(type) + "2/tokenizer.txt")));
  }
  CHECK(slurp(d.path("bpe1/spm.model")) != slurp(d.path("unigram1/spm.model")));
}

TEST_CASE("train_or_load reuses a directory and refuses a different one") {
  ScratchDir d;
  const Tokenizer a = Tokenizer::train_or_load(training_corpus(), options(), d.path("tok"));
  const auto written = std::filesystem::last_write_time(d.path("tok/spm.model"));
  const Tokenizer b = Tokenizer::train_or_load(training_corpus(), options(), d.path("tok"));
  CHECK(std::filesystem::last_write_time(d.path("tok/spm.model")) == written);
  CHECK(b.vocab_size() == a.vocab_size());

  TokenizerOptions other = options();
  other.vocab_size = 300;
  const std::string before = slurp(d.path("tok/spm.model"));
  CHECK_THAT(input_error([&] { Tokenizer::train_or_load(training_corpus(), other, d.path("tok")); }),
             Contains(d.path("tok/tokenizer.txt")) && Contains("other options") &&
                 Contains("vocab_size = 400 there, 300 now"));
  // The training text changed (one sentence edited, then one dropped): said as such, with what differs.
  Corpus changed = training_corpus();
  changed.documents[0].sentences[0].src += " extra";
  const std::string edited = input_error([&] { Tokenizer::train_or_load(changed, options(), d.path("tok")); });
  CHECK_THAT(edited, Contains("other text") && Contains("text_fingerprint = ") && !Contains("training_sentences") &&
                         !Contains("other options"));
  changed.documents[0].sentences.pop_back();
  const int64_t n = 2 * training_corpus().num_sentences();
  CHECK_THAT(input_error([&] { Tokenizer::train_or_load(changed, options(), d.path("tok")); }),
             Contains("training_sentences = " + std::to_string(n) + " there, " + std::to_string(n - 2) + " now"));
  CHECK(slurp(d.path("tok/spm.model")) == before);  // nothing changed on disk
}

TEST_CASE("train_or_load trains a damaged tokenizer of its own again, to the same bytes, and keeps the damaged file") {
  ScratchDir d;
  Tokenizer::train_or_load(training_corpus(), options(), d.path("tok"));
  const std::string model = d.path("tok/spm.model");
  const std::string original = slurp(model);
  const std::string damaged = original.substr(0, original.size() / 3);
  {
    std::ofstream out(model, std::ios::binary | std::ios::trunc);
    out << damaged;
  }
  CHECK_THAT(input_error([&] { Tokenizer::load(d.path("tok")); }), Contains(model));
  const Tokenizer again = Tokenizer::train_or_load(training_corpus(), options(), d.path("tok"));
  CHECK(slurp(model) == original);
  CHECK(slurp(model + ".unreadable") == damaged);
  CHECK_FALSE(again.encode("the cat").empty());
  // A tokenizer that is not ours (no tokenizer.txt) is never trained over.
  std::filesystem::remove(d.path("tok/tokenizer.txt"));
  {
    std::ofstream out(model, std::ios::binary | std::ios::trunc);
    out << damaged;
  }
  CHECK_THAT(input_error([&] { Tokenizer::train_or_load(training_corpus(), options(), d.path("tok")); }),
             Contains("not trained by mambamt"));
  CHECK(slurp(model) == damaged);
}

TEST_CASE("load refuses a truncated model that still parses, by its fingerprint in tokenizer.txt") {
  ScratchDir d;
  const Tokenizer full = Tokenizer::train_or_load(training_corpus(), options(), d.path("tok"));
  const std::string model = d.path("tok/spm.model"), info = d.path("tok/tokenizer.txt");
  const std::string original = slurp(model), with_print = slurp(info);
  REQUIRE_THAT(with_print, Contains("\nmodel_fingerprint = "));
  auto write = [](const std::string& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << bytes;
  };
  // With neither the fingerprint nor spm.vocab, some prefixes of the model
  // load as a smaller vocabulary.
  const std::string vocab = slurp(d.path("tok/spm.vocab"));
  std::filesystem::remove(d.path("tok/spm.vocab"));
  write(info, with_print.substr(0, with_print.find("model_fingerprint = ")));
  size_t cut = 0;
  for (size_t n = 32; n < original.size() && cut == 0; n += 8) {
    write(model, original.substr(0, n));
    try {
      if (Tokenizer::load(d.path("tok")).vocab_size() < full.vocab_size()) cut = n;
    } catch (const mambamt::InputError&) {
    }
  }
  REQUIRE(cut > 0);
  // A directory written before the fingerprint: refused by its piece count.
  write(d.path("tok/spm.vocab"), vocab);
  CHECK_THAT(input_error([&] { Tokenizer::load(d.path("tok")); }),
             Contains(model) && Contains("damaged: it has ") && Contains(d.path("tok/spm.vocab")));
  // With the fingerprint: refused, naming both files; the whole model loads.
  write(info, with_print);
  write(model, original.substr(0, cut));
  CHECK_THAT(input_error([&] { Tokenizer::load(d.path("tok")); }),
             Contains(model) && Contains("damaged: its fingerprint is") && Contains(info));
  write(model, original);
  CHECK(Tokenizer::load(d.path("tok")).vocab_size() == full.vocab_size());
}

TEST_CASE("two trainers racing for one directory leave one complete tokenizer") {
  ScratchDir d;
  Tokenizer::train(training_corpus(), options(), d.path("ref"));
  std::vector<std::thread> threads;
  std::vector<int64_t> sizes(3, 0);
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&, i] {
      sizes[static_cast<size_t>(i)] = Tokenizer::train_or_load(training_corpus(), options(), d.path("race")).vocab_size();
    });
  }
  for (auto& t : threads) t.join();
  CHECK(sizes[0] == sizes[1]);
  CHECK(sizes[1] == sizes[2]);
  CHECK(slurp(d.path("race/spm.model")) == slurp(d.path("ref/spm.model")));
  CHECK(temp_files(d.path("race")) == 0);
}

TEST_CASE("tokenizer errors") {
  ScratchDir d;
  TokenizerOptions o = options();
  o.model_type = "wordpiece";
  CHECK_THAT(input_error([&] { Tokenizer::train(training_corpus(), o, d.path("x")); }), Contains("wordpiece"));
  o = options();
  o.vocab_size = 10;
  CHECK_THAT(input_error([&] { Tokenizer::train(training_corpus(), o, d.path("x")); }), Contains("vocab_size"));
  CHECK_THAT(input_error([&] { Tokenizer::load(d.path("nothing")); }), Contains(d.path("nothing/spm.model")));
  write_file(d.path("junk/spm.model"), "not a model");
  CHECK_THAT(input_error([&] { Tokenizer::load(d.path("junk")); }),
             Contains(d.path("junk/spm.model") + ": not a sentencepiece model: its bytes do not parse as one"));
}

// The shim is loaded with RTLD_DEEPBIND: sentencepiece looks symbols up in the
// shim's own dependencies first. Strings cross its interface both ways, so
// the allocation functions found there must be the program's (jemalloc where
// linked): with libstdc++'s new and libc's free found first instead, glibc's
// free() aborted on a block of jemalloc's inside sentencepiece's trainer.
TEST_CASE("the sentencepiece shim's lookup scope finds the program's malloc, free, new and delete") {
  void* shim = ::dlopen(MAMBAMT_SPM_BUILD_PATH, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  REQUIRE(shim != nullptr);
  auto library_of = [](void* symbol) -> std::string {
    Dl_info info{};
    if (symbol == nullptr || ::dladdr(symbol, &info) == 0 || info.dli_fname == nullptr) return "?";
    return info.dli_fname;
  };
  // malloc, free, operator new, operator delete (plain and sized), new[] and delete[].
  for (const char* name : {"malloc", "free", "_Znwm", "_ZdlPv", "_ZdlPvm", "_Znam", "_ZdaPv"}) {
    INFO(name);
    const std::string in_shim = library_of(::dlsym(shim, name));
    CHECK(in_shim != "?");
    CHECK(in_shim == library_of(::dlsym(RTLD_DEFAULT, name)));
#ifdef MAMBAMT_JEMALLOC_LINKED
    CHECK(in_shim.find("jemalloc") != std::string::npos);
#endif
  }
  ::dlclose(shim);
}
