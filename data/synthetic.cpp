#include "data/synthetic.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <initializer_list>
#include <optional>
#include <set>
#include <sstream>
#include <unordered_map>

#include <spdlog/spdlog.h>

#include "core/error.h"
#include "core/fs.h"
#include "data/detail/rng.h"
#include "data/detail/text.h"

namespace mambamt::data {

namespace {

using detail::Rng;

constexpr int kGenders = 3;
constexpr int kNom = 0, kAcc = 1;
// Bump when the generator's output changes for the same options.
constexpr int kGeneratorVersion = 1;

// ---- closed-class words -----------------------------------------------------

struct Closed {
  // source
  std::string def = "ta", indef = "en", conj = "ok", prep = "ib", past = "pa", subj = "ul", obj = "ulo";
  // target: det[gender][definite][case]
  std::string det[kGenders][2][2] = {{{"un", "unom"}, {"ro", "rom"}},
                                     {{"una", "unam"}, {"ra", "ram"}},
                                     {{"uni", "unim"}, {"ri", "rim"}}};
  std::string pron[kGenders][2] = {{"hen", "hem"}, {"sye", "syem"}, {"dit", "dim"}};
  std::string adj_suffix[kGenders] = {"o", "a", "e"};
  std::string past_suffix = "ek";
  std::string tconj = "uk", postp = "dor";
};
const Closed kClosed;

// ---- the lexicon ------------------------------------------------------------

struct Noun {
  std::string src;
  std::array<std::string, 2> tgt;  // [1] used only by ambiguous nouns
  std::array<int, 2> gender{};
  bool ambiguous = false;
  std::array<int, 2> cue{-1, -1};  // cue adjective per sense (ambiguous nouns)
};

struct Word {
  std::string src, tgt;
};

struct Lexicon {
  std::vector<Noun> nouns;
  std::vector<Word> verbs, adjectives;
  std::vector<int> plain_adjectives;  // adjectives that are not cues
  std::vector<int> ambiguous;         // indices of ambiguous nouns
  std::vector<std::string> entities;
  std::vector<int> seen_entities, unseen_entities;
  std::vector<double> noun_weights_cum;
};

const char* const kSrcConsonants[] = {"b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z"};
const char* const kSrcVowels[] = {"a", "e", "i", "o", "u"};
const char* const kTgtOnsets[] = {"b", "d", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s",
                                  "t", "v", "w", "sk", "st", "tr", "gr", "kl", "pl", "br", "dr", "fr"};
const char* const kTgtVowels[] = {"a", "e", "i", "o", "u", "y", "ae", "oe", "ei", "au"};
const char* const kTgtCodas[] = {"", "n", "r", "l", "s", "k", "t", "m"};
const char* const kNameOnsets[] = {"K", "Z", "M", "V", "T", "B", "Q", "X", "R", "S", "N", "D", "L", "J", "Th", "Sh"};
const char* const kNameVowels[] = {"a", "o", "e", "i", "u", "y", "ai", "ia", "eo"};
const char* const kNameConsonants[] = {"r", "l", "n", "v", "z", "x", "th", "sh", "k", "m", "d", "b"};
const char* const kNameFinals[] = {"", "", "n", "r", "s", "x", "th", "k", "l"};

template <size_t N>
const char* pick(Rng& rng, const char* const (&arr)[N]) {
  return arr[rng.below(N)];
}

class WordMaker {
 public:
  explicit WordMaker(Rng& rng) : rng_(rng) {
    for (const auto& s : {kClosed.def, kClosed.indef, kClosed.conj, kClosed.prep, kClosed.past, kClosed.subj,
                          kClosed.obj}) {
      used_.insert(s);
    }
    for (int g = 0; g < kGenders; ++g) {
      for (int d = 0; d < 2; ++d)
        for (int c = 0; c < 2; ++c) used_.insert(kClosed.det[g][d][c]);
      for (int c = 0; c < 2; ++c) used_.insert(kClosed.pron[g][c]);
    }
    used_.insert(kClosed.tconj);
    used_.insert(kClosed.postp);
    used_.insert(".");
  }

  std::string source_word() {
    while (true) {
      std::string w;
      const int syl = 2 + static_cast<int>(rng_.below(2));
      for (int i = 0; i < syl; ++i) w += std::string(pick(rng_, kSrcConsonants)) + pick(rng_, kSrcVowels);
      if (claim({w})) return w;
    }
  }

  // A target stem whose inflected forms (stem + each suffix) are all unused.
  std::string target_word(const std::vector<std::string>& suffixes, bool end_in_consonant) {
    while (true) {
      std::string w;
      const int syl = 1 + static_cast<int>(rng_.below(2));
      for (int i = 0; i < syl; ++i) {
        w += pick(rng_, kTgtOnsets);
        w += pick(rng_, kTgtVowels);
        const char* coda = pick(rng_, kTgtCodas);
        if (end_in_consonant && i == syl - 1 && !*coda) coda = "n";
        w += coda;
      }
      if (w.size() < 3) continue;
      std::vector<std::string> forms;
      for (const auto& s : suffixes) forms.push_back(w + s);
      if (claim(forms)) return w;
    }
  }

  std::string name() {
    while (true) {
      std::string w = std::string(pick(rng_, kNameOnsets)) + pick(rng_, kNameVowels);
      const int more = 1 + static_cast<int>(rng_.below(2));
      for (int i = 0; i < more; ++i) w += std::string(pick(rng_, kNameConsonants)) + pick(rng_, kNameVowels);
      w += pick(rng_, kNameFinals);
      if (claim({w})) return w;
    }
  }

 private:
  bool claim(const std::vector<std::string>& forms) {
    for (const auto& f : forms)
      if (used_.count(f)) return false;
    for (const auto& f : forms) used_.insert(f);
    return true;
  }

  Rng& rng_;
  std::set<std::string> used_;
};

Lexicon make_lexicon(const SyntheticOptions& o) {
  Rng rng(detail::mix_seed({o.seed, 0x6c6578 /* "lex" */}));
  WordMaker make(rng);
  Lexicon lex;
  const int64_t n_nouns = std::max<int64_t>(4, o.vocab_size * 45 / 100);
  const int64_t n_verbs = std::max<int64_t>(3, o.vocab_size * 25 / 100);
  const int64_t n_adjs = std::max<int64_t>(3, o.vocab_size - n_nouns - n_verbs);
  const int64_t n_amb = std::min({o.ambiguous_words, n_nouns / 4, n_adjs / 3});

  // Genders round-robin over a shuffled order: balanced, so a model that
  // guesses a pronoun without its antecedent is right one time in three.
  std::vector<int> genders(static_cast<size_t>(n_nouns));
  for (size_t i = 0; i < genders.size(); ++i) genders[i] = static_cast<int>(i % kGenders);
  rng.shuffle(genders);
  const std::vector<std::string> noun_forms = {""};
  for (int64_t i = 0; i < n_nouns; ++i) {
    Noun n;
    n.src = make.source_word();
    n.tgt[0] = make.target_word(noun_forms, false);
    n.gender[0] = genders[static_cast<size_t>(i)];
    n.gender[1] = n.gender[0];
    n.tgt[1] = n.tgt[0];
    lex.nouns.push_back(n);
  }
  const std::vector<std::string> verb_forms = {"", kClosed.past_suffix};
  for (int64_t i = 0; i < n_verbs; ++i) lex.verbs.push_back({make.source_word(), make.target_word(verb_forms, false)});
  const std::vector<std::string> adj_forms = {kClosed.adj_suffix[0], kClosed.adj_suffix[1], kClosed.adj_suffix[2]};
  for (int64_t i = 0; i < n_adjs; ++i) lex.adjectives.push_back({make.source_word(), make.target_word(adj_forms, true)});

  // The first n_amb nouns get a second sense of another gender and one cue
  // adjective per sense (the first 2 * n_amb adjectives).
  for (int64_t a = 0; a < n_amb; ++a) {
    Noun& n = lex.nouns[static_cast<size_t>(a)];
    n.ambiguous = true;
    n.tgt[1] = make.target_word(noun_forms, false);
    n.gender[1] = (n.gender[0] + 1 + static_cast<int>(rng.below(2))) % kGenders;
    n.cue = {static_cast<int>(2 * a), static_cast<int>(2 * a + 1)};
    lex.ambiguous.push_back(static_cast<int>(a));
  }
  for (int64_t i = 2 * n_amb; i < n_adjs; ++i) lex.plain_adjectives.push_back(static_cast<int>(i));

  // Ambiguous nouns are drawn four times as often, so that both senses and
  // their later mentions are seen often enough to be learned.
  double total = 0;
  for (const auto& n : lex.nouns) {
    total += n.ambiguous ? 4.0 : 1.0;
    lex.noun_weights_cum.push_back(total);
  }

  for (int64_t i = 0; i < o.entities; ++i) lex.entities.push_back(make.name());
  // Every k-th entity by Zipf rank is held out of training, so unseen entities
  // are spread over the frequency range instead of being all rare.
  const int64_t n_unseen = static_cast<int64_t>(std::llround(o.unseen_entity_fraction * static_cast<double>(o.entities)));
  const double stride = n_unseen > 0 ? static_cast<double>(o.entities) / static_cast<double>(n_unseen) : 0;
  std::vector<bool> unseen(static_cast<size_t>(o.entities), false);
  for (int64_t k = 0; k < n_unseen; ++k) {
    unseen[static_cast<size_t>(std::min<int64_t>(o.entities - 1, static_cast<int64_t>(stride * (k + 0.5))))] = true;
  }
  for (int64_t i = 0; i < o.entities; ++i) {
    (unseen[static_cast<size_t>(i)] ? lex.unseen_entities : lex.seen_entities).push_back(static_cast<int>(i));
  }
  return lex;
}

// ---- sentence structure -----------------------------------------------------

struct NP {
  enum Kind { kNoun, kEntity, kPronoun } kind = kNoun;
  int noun = -1;  // kNoun: the noun; kPronoun: the antecedent noun
  bool definite = true;
  std::vector<int> adjectives;  // source order
  int entity = -1;
};

struct Clause {
  NP subj;
  int verb = 0;
  bool past = false;
  std::optional<NP> obj;
  int place = -1;  // entity of the "ib NAME" phrase, -1 = none
};

struct Sentence {
  Clause main;
  std::optional<Clause> coord;  // "... ok ul ..." : subject pronoun referring to main.subj
  int pronoun_distance = -1;    // the sentence's pronoun (at most one), -1 = none
  // Later (cue-less) mentions of ambiguous nouns: (noun, sentences since the cue).
  std::vector<std::pair<int, int>> lexical;
};

// The gold word alignment of a sentence while it is rendered: every source
// word is entered under a key naming its part ("m.s.det": the determiner of
// the main clause's subject), and every target word links to the source words
// of the parts it translates (a past-tense verb to the verb and the particle
// "pa", the postposition "dor" to the preposition "ib").
struct Aligner {
  std::map<std::string, int32_t> src;
  int32_t src_words = 0, tgt_words = 0;
  WordAlignment links;
};

// How to render a sentence: the document's senses, optionally overridden.
struct Render {
  const std::vector<int>* sense = nullptr;  // per noun
  int pronoun_gender = -1;                  // override of the pronoun's gender
  int flip_noun = -1;                       // render this noun in its other sense
};

class Renderer {
 public:
  explicit Renderer(const Lexicon& lex) : lex_(lex) {}

  int sense_of(int noun, const Render& r) const {
    int s = (*r.sense)[static_cast<size_t>(noun)];
    if (noun == r.flip_noun) s = 1 - s;
    return s;
  }
  int gender_of(int noun, const Render& r) const {
    return lex_.nouns[static_cast<size_t>(noun)].gender[static_cast<size_t>(sense_of(noun, r))];
  }

  // The source sentence; `al` (when given) receives its words' parts.
  std::string source(const Sentence& s, Aligner* al = nullptr) const {
    std::string out;
    clause_src(s.main, "m", out, al);
    if (s.coord) {
      src_word(out, kClosed.conj, "ok", al);
      clause_src(*s.coord, "c", out, al);
    }
    src_word(out, ".", ".", al);
    return out;
  }

  // The target sentence; `pronoun_word` receives the pronoun's surface form,
  // `al` (filled by source() first) the links of its words.
  std::string target(const Sentence& s, const Render& r, std::string* pronoun_word = nullptr,
                     Aligner* al = nullptr) const {
    std::string out;
    clause_tgt(s.main, "m", r, out, pronoun_word, al);
    if (s.coord) {
      tgt_word(out, kClosed.tconj, {"ok"}, al);
      clause_tgt(*s.coord, "c", r, out, pronoun_word, al);
    }
    tgt_word(out, ".", {"."}, al);
    return out;
  }

 private:
  static void add(std::string& out, const std::string& w) {
    if (!out.empty()) out += ' ';
    out += w;
  }

  static void src_word(std::string& out, const std::string& w, const std::string& part, Aligner* al) {
    add(out, w);
    if (al) al->src[part] = al->src_words++;
  }

  static void tgt_word(std::string& out, const std::string& w, std::initializer_list<std::string> parts, Aligner* al) {
    add(out, w);
    if (!al) return;
    for (const std::string& part : parts) {
      auto it = al->src.find(part);
      if (it != al->src.end()) al->links.push_back(WordLink{it->second, al->tgt_words, true});
    }
    ++al->tgt_words;
  }

  // `part` names the phrase ("m.s": the main clause's subject).
  void np_src(const NP& np, int kase, const std::string& part, std::string& out, Aligner* al) const {
    switch (np.kind) {
      case NP::kEntity: src_word(out, lex_.entities[static_cast<size_t>(np.entity)], part + ".n", al); return;
      case NP::kPronoun: src_word(out, kase == kNom ? kClosed.subj : kClosed.obj, part + ".n", al); return;
      case NP::kNoun:
        src_word(out, np.definite ? kClosed.def : kClosed.indef, part + ".det", al);
        for (size_t i = 0; i < np.adjectives.size(); ++i)
          src_word(out, lex_.adjectives[static_cast<size_t>(np.adjectives[i])].src, part + ".a" + std::to_string(i), al);
        src_word(out, lex_.nouns[static_cast<size_t>(np.noun)].src, part + ".n", al);
        return;
    }
  }

  void np_tgt(const NP& np, int kase, const std::string& part, const Render& r, std::string& out,
              std::string* pronoun_word, Aligner* al) const {
    switch (np.kind) {
      case NP::kEntity: tgt_word(out, lex_.entities[static_cast<size_t>(np.entity)], {part + ".n"}, al); return;
      case NP::kPronoun: {
        const int g = r.pronoun_gender >= 0 ? r.pronoun_gender : gender_of(np.noun, r);
        tgt_word(out, kClosed.pron[g][kase], {part + ".n"}, al);
        if (pronoun_word) *pronoun_word = kClosed.pron[g][kase];
        return;
      }
      case NP::kNoun: {
        const Noun& n = lex_.nouns[static_cast<size_t>(np.noun)];
        const int sense = sense_of(np.noun, r);
        const int g = n.gender[static_cast<size_t>(sense)];
        tgt_word(out, kClosed.det[g][np.definite ? 1 : 0][kase], {part + ".det"}, al);
        tgt_word(out, n.tgt[static_cast<size_t>(sense)], {part + ".n"}, al);
        // Adjectives follow the noun, in mirrored order.
        for (size_t i = np.adjectives.size(); i-- > 0;) {
          tgt_word(out, lex_.adjectives[static_cast<size_t>(np.adjectives[i])].tgt + kClosed.adj_suffix[g],
                   {part + ".a" + std::to_string(i)}, al);
        }
        return;
      }
    }
  }

  void clause_src(const Clause& c, const std::string& part, std::string& out, Aligner* al) const {
    np_src(c.subj, kNom, part + ".s", out, al);
    if (c.past) src_word(out, kClosed.past, part + ".pa", al);
    src_word(out, lex_.verbs[static_cast<size_t>(c.verb)].src, part + ".v", al);
    if (c.obj) np_src(*c.obj, kAcc, part + ".o", out, al);
    if (c.place >= 0) {
      src_word(out, kClosed.prep, part + ".ib", al);
      src_word(out, lex_.entities[static_cast<size_t>(c.place)], part + ".place", al);
    }
  }

  void clause_tgt(const Clause& c, const std::string& part, const Render& r, std::string& out,
                  std::string* pronoun_word, Aligner* al) const {
    np_tgt(c.subj, kNom, part + ".s", r, out, pronoun_word, al);
    if (c.obj) np_tgt(*c.obj, kAcc, part + ".o", r, out, pronoun_word, al);
    if (c.place >= 0) {
      tgt_word(out, lex_.entities[static_cast<size_t>(c.place)], {part + ".place"}, al);
      tgt_word(out, kClosed.postp, {part + ".ib"}, al);
    }
    // The past tense is a suffix of the verb: the verb translates "pa" too.
    tgt_word(out, lex_.verbs[static_cast<size_t>(c.verb)].tgt + (c.past ? kClosed.past_suffix : ""),
             {part + ".v", part + ".pa"}, al);
  }

  const Lexicon& lex_;
};

// ---- documents --------------------------------------------------------------

enum class Split { kTrain, kValid, kTest };

class DocumentMaker {
 public:
  DocumentMaker(const SyntheticOptions& o, const Lexicon& lex, Split split, uint64_t seed)
      : o_(o), lex_(lex), split_(split), rng_(seed), render_(lex) {
    // Zipf weights over the entities that this split may use.
    for (size_t i = 0; i < lex.seen_entities.size(); ++i) {
      zipf_total_ += 1.0 / std::pow(static_cast<double>(i + 1), o.entity_zipf);
      zipf_cum_.push_back(zipf_total_);
    }
  }

  struct Result {
    Document doc;
    std::vector<ContrastiveExample> contrastive;
    std::vector<WordAlignment> alignments;  // one per sentence (test split only)
  };

  Result make(const std::string& doc_id) {
    const int64_t n = rng_.between(o_.min_sentences, o_.max_sentences);
    const int64_t max_distance = split_ == Split::kTest ? o_.test_max_distance : o_.max_distance;
    sense_.assign(lex_.nouns.size(), 0);
    cue_at_.assign(lex_.nouns.size(), -1);
    mentioned_.clear();
    for (int a : lex_.ambiguous) sense_[static_cast<size_t>(a)] = static_cast<int>(rng_.below(2));
    draw_cast();

    std::vector<Sentence> sents;
    int ante_noun = -1, ante_at = -1;
    for (int s = 0; s < n; ++s) {
      cur_ = s;
      Sentence sent;
      const int d = ante_noun >= 0 ? s - ante_at : 1 << 20;
      const bool pronoun_ok = d <= max_distance;
      enum { A, P, F } type;
      const double r = rng_.uniform();
      if (ante_noun < 0) type = A;
      else if (pronoun_ok) type = r < 0.45 ? P : r < 0.75 ? F : A;
      else type = r < 0.6 ? A : F;
      Clause& c = sent.main;
      c.verb = verb();
      c.past = rng_.bernoulli(0.5);
      if (type == A) {
        c.subj = noun_np(sent, -1);
        if (rng_.bernoulli(0.75)) c.obj = noun_np(sent, c.subj.noun);
        if (rng_.bernoulli(0.3)) c.place = cast_member();
        if (rng_.bernoulli(0.2)) {
          Clause k;
          k.subj.kind = NP::kPronoun;
          k.subj.noun = c.subj.noun;
          k.verb = verb();
          k.past = rng_.bernoulli(0.5);
          if (rng_.bernoulli(0.7)) k.obj = noun_np(sent, c.subj.noun);
          sent.coord = k;
          sent.pronoun_distance = 0;
        }
        ante_noun = c.subj.noun;
        ante_at = s;
      } else if (type == P) {
        c.subj.kind = NP::kPronoun;
        c.subj.noun = ante_noun;
        sent.pronoun_distance = d;
        if (rng_.bernoulli(0.8)) c.obj = noun_np(sent, ante_noun);
        else c.obj = entity_np();
        if (rng_.bernoulli(0.3)) c.place = cast_member();
      } else {
        c.subj = entity_np();
        if (pronoun_ok && rng_.bernoulli(0.35)) {
          NP p;
          p.kind = NP::kPronoun;
          p.noun = ante_noun;
          c.obj = p;
          sent.pronoun_distance = d;
        } else if (rng_.bernoulli(0.8)) {
          c.obj = noun_np(sent, ante_noun);
        } else {
          c.obj = entity_np(c.subj.entity);
        }
        if (rng_.bernoulli(0.25)) c.place = cast_member();
      }
      sents.push_back(std::move(sent));
    }

    Result out;
    out.doc.id = doc_id;
    Render plain{&sense_};
    for (size_t s = 0; s < sents.size(); ++s) {
      Aligner al;
      Aligner* aligner = split_ == Split::kTest ? &al : nullptr;
      std::string src = render_.source(sents[s], aligner);
      std::string tgt = render_.target(sents[s], plain, nullptr, aligner);
      out.doc.sentences.push_back(SentencePair{std::move(src), std::move(tgt), static_cast<int64_t>(s) + 1});
      if (aligner) out.alignments.push_back(std::move(al.links));
    }
    if (split_ == Split::kTest) contrastive(sents, out);
    return out;
  }

 private:
  // The contrastive examples of one test document.
  void contrastive(const std::vector<Sentence>& sents, Result& out) {
    Render plain{&sense_};
    for (size_t s = 0; s < sents.size(); ++s) {
      const Sentence& sent = sents[s];
      auto base = [&](const std::string& phenomenon, const std::string& label, int distance) {
        ContrastiveExample e;
        e.doc_id = out.doc.id;
        e.sentence = static_cast<int64_t>(s) + 1;
        e.phenomenon = phenomenon;
        e.label = label;
        e.distance = distance;
        for (size_t k = 0; k < s; ++k) {
          e.src_context.push_back(out.doc.sentences[k].src);
          e.tgt_context.push_back(out.doc.sentences[k].tgt);
        }
        e.source = out.doc.sentences[s].src;
        e.reference = out.doc.sentences[s].tgt;
        return e;
      };
      if (sent.pronoun_distance >= 0) {
        std::string word;
        render_.target(sent, plain, &word);
        ContrastiveExample e = base("pronoun", word, sent.pronoun_distance);
        for (int g = 0; g < kGenders; ++g) {
          Render r = plain;
          r.pronoun_gender = g;
          std::string variant = render_.target(sent, r);
          if (variant != e.reference) e.contrastive.push_back(std::move(variant));
        }
        out.contrastive.push_back(std::move(e));
      }
      std::set<int> done;
      for (const auto& [noun, distance] : sent.lexical) {
        if (!done.insert(noun).second) continue;
        const Noun& n = lex_.nouns[static_cast<size_t>(noun)];
        ContrastiveExample e = base("lexical", n.tgt[static_cast<size_t>(sense_[static_cast<size_t>(noun)])], distance);
        Render r = plain;
        r.flip_noun = noun;
        e.contrastive.push_back(render_.target(sent, r));
        out.contrastive.push_back(std::move(e));
      }
    }
  }

  void draw_cast() {
    cast_.clear();
    const int64_t k = rng_.between(1, 3);
    for (int64_t tries = 0; static_cast<int64_t>(cast_.size()) < k && tries < 100; ++tries) {
      const int e = entity();
      if (std::find(cast_.begin(), cast_.end(), e) == cast_.end()) cast_.push_back(e);
    }
  }

  int entity() {
    // Valid and test draw a quarter of their cast from entities never seen in training.
    if (split_ != Split::kTrain && !lex_.unseen_entities.empty() && rng_.bernoulli(0.25)) {
      return lex_.unseen_entities[rng_.below(lex_.unseen_entities.size())];
    }
    return lex_.seen_entities[rng_.weighted(zipf_cum_)];
  }

  int cast_member() { return cast_[rng_.below(cast_.size())]; }

  NP entity_np(int avoid = -1) {
    NP np;
    np.kind = NP::kEntity;
    np.entity = cast_member();
    if (np.entity == avoid && cast_.size() > 1) {
      while (np.entity == avoid) np.entity = cast_member();
    }
    return np;
  }

  int verb() { return static_cast<int>(rng_.below(lex_.verbs.size())); }

  int plain_adjective() { return lex_.plain_adjectives[rng_.below(lex_.plain_adjectives.size())]; }

  // A common-noun phrase; `avoid` is a noun not to repeat in the same clause.
  NP noun_np(Sentence& sent, int avoid) {
    NP np;
    np.kind = NP::kNoun;
    // Reuse a noun of this document 40% of the time (recurring referents),
    // ambiguous ones three times as likely: their later mentions are what the
    // lexical-consistency phenomenon is made of.
    if (!mentioned_.empty() && rng_.bernoulli(0.4)) {
      std::vector<double> cum;
      double total = 0;
      for (int m : mentioned_) {
        total += lex_.nouns[static_cast<size_t>(m)].ambiguous ? 3.0 : 1.0;
        cum.push_back(total);
      }
      np.noun = mentioned_[rng_.weighted(cum)];
    } else {
      np.noun = static_cast<int>(rng_.weighted(lex_.noun_weights_cum));
    }
    for (int tries = 0; np.noun == avoid && tries < 20; ++tries) {
      np.noun = static_cast<int>(rng_.weighted(lex_.noun_weights_cum));
    }
    const bool first = std::find(mentioned_.begin(), mentioned_.end(), np.noun) == mentioned_.end();
    if (first) mentioned_.push_back(np.noun);
    // Definiteness is marked in the source: first mentions mostly indefinite.
    np.definite = first ? rng_.bernoulli(0.2) : rng_.bernoulli(0.8);
    const Noun& n = lex_.nouns[static_cast<size_t>(np.noun)];
    const double r = rng_.uniform();
    const int n_adj = r < 0.55 ? 0 : r < 0.9 ? 1 : 2;
    if (n.ambiguous && cue_at_[static_cast<size_t>(np.noun)] < 0) {
      // The first mention carries the cue of the document's sense.
      np.adjectives.push_back(n.cue[static_cast<size_t>(sense_[static_cast<size_t>(np.noun)])]);
      if (n_adj == 2) np.adjectives.insert(np.adjectives.begin(), plain_adjective());
      cue_at_[static_cast<size_t>(np.noun)] = cur_;
    } else {
      for (int i = 0; i < n_adj; ++i) {
        int a = plain_adjective();
        if (i == 1 && !lex_.plain_adjectives.empty() && lex_.plain_adjectives.size() > 1) {
          while (a == np.adjectives[0]) a = plain_adjective();
        }
        np.adjectives.push_back(a);
      }
      if (n.ambiguous) sent.lexical.emplace_back(np.noun, cur_ - cue_at_[static_cast<size_t>(np.noun)]);
    }
    return np;
  }

  const SyntheticOptions& o_;
  const Lexicon& lex_;
  Split split_;
  Rng rng_;
  Renderer render_;
  std::vector<double> zipf_cum_;
  double zipf_total_ = 0;
  std::vector<int> sense_, cue_at_, mentioned_, cast_;
  int cur_ = 0;
};

std::string doc_name(const char* split, int64_t i, int64_t n) {
  std::string num = std::to_string(i + 1);
  const size_t width = std::to_string(n).size();
  if (num.size() < width) num.insert(0, width - num.size(), '0');
  return std::string(split) + "-" + num;
}

void count_entities(const Corpus& c, const std::unordered_map<std::string, size_t>& index,
                    std::vector<EntityCount>& counts, int64_t EntityCount::*field) {
  for (const auto& d : c.documents)
    for (const auto& s : d.sentences)
      for (auto w : detail::split_words(s.src)) {
        auto it = index.find(std::string(w));
        if (it != index.end()) ++(counts[it->second].*field);
      }
}

}  // namespace

void validate(const SyntheticOptions& o) {
  auto fail = [](const std::string& field, const std::string& msg) {
    throw InputError("data.synthetic." + field + ": " + msg);
  };
  if (o.train_docs < 1) fail("train_docs", "must be >= 1");
  if (o.valid_docs < 0) fail("valid_docs", "must be >= 0");
  if (o.test_docs < 0) fail("test_docs", "must be >= 0");
  if (o.min_sentences < 1) fail("min_sentences", "must be >= 1");
  if (o.max_sentences < o.min_sentences) fail("max_sentences", "must be >= min_sentences");
  if (o.vocab_size < 20) fail("vocab_size", "must be >= 20");
  if (o.entities < 1) fail("entities", "must be >= 1");
  if (!(o.unseen_entity_fraction >= 0 && o.unseen_entity_fraction < 1)) fail("unseen_entity_fraction", "must be in [0, 1)");
  if (o.ambiguous_words < 0) fail("ambiguous_words", "must be >= 0");
  if (o.max_distance < 1) fail("max_distance", "must be >= 1");
  if (o.test_max_distance < 1) fail("test_max_distance", "must be >= 1");
  if (!(o.entity_zipf >= 0)) fail("entity_zipf", "must be >= 0");
  const int64_t unseen = std::llround(o.unseen_entity_fraction * static_cast<double>(o.entities));
  if (unseen >= o.entities) fail("unseen_entity_fraction", "leaves no entity for training");
}

SyntheticCorpus generate_synthetic(const SyntheticOptions& o) {
  validate(o);
  const Lexicon lex = make_lexicon(o);
  SyntheticCorpus out;
  struct Job {
    Split split;
    const char* name;
    int64_t docs;
    Corpus* corpus;
  };
  const Job jobs[] = {{Split::kTrain, "train", o.train_docs, &out.train},
                      {Split::kValid, "valid", o.valid_docs, &out.valid},
                      {Split::kTest, "test", o.test_docs, &out.test}};
  for (const auto& job : jobs) {
    DocumentMaker maker(o, lex, job.split, detail::mix_seed({o.seed, static_cast<uint64_t>(job.split) + 1}));
    for (int64_t i = 0; i < job.docs; ++i) {
      auto r = maker.make(doc_name(job.name, i, job.docs));
      job.corpus->documents.push_back(std::move(r.doc));
      for (auto& e : r.contrastive) out.contrastive.push_back(std::move(e));
      for (auto& a : r.alignments) out.test_alignments.push_back(std::move(a));
    }
  }

  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < lex.entities.size(); ++i) {
    index[lex.entities[i]] = i;
    out.entities.push_back(EntityCount{lex.entities[i], 0, 0, 0});
  }
  count_entities(out.train, index, out.entities, &EntityCount::train);
  count_entities(out.valid, index, out.entities, &EntityCount::valid);
  count_entities(out.test, index, out.entities, &EntityCount::test);
  std::stable_sort(out.entities.begin(), out.entities.end(),
                   [](const EntityCount& a, const EntityCount& b) { return a.train > b.train; });

  SyntheticLexicon& sl = out.lexicon;
  sl.src_subject_pronoun = kClosed.subj;
  sl.src_object_pronoun = kClosed.obj;
  for (int g = 0; g < kGenders; ++g) {
    sl.subject_pronouns[static_cast<size_t>(g)] = kClosed.pron[g][kNom];
    sl.object_pronouns[static_cast<size_t>(g)] = kClosed.pron[g][kAcc];
    for (int d = 0; d < 2; ++d)
      for (int c = 0; c < 2; ++c) sl.determiner_gender[kClosed.det[g][d][c]] = g;
  }
  for (const auto& n : lex.nouns) {
    sl.noun_gender[n.tgt[0]] = n.gender[0];
    sl.noun_gender[n.tgt[1]] = n.gender[1];
    if (n.ambiguous) {
      sl.ambiguous[n.src] = n.tgt;
      sl.cue_adjectives[lex.adjectives[static_cast<size_t>(n.cue[0])].src] = n.tgt[0];
      sl.cue_adjectives[lex.adjectives[static_cast<size_t>(n.cue[1])].src] = n.tgt[1];
    }
  }
  return out;
}

std::string synthetic_manifest(const SyntheticOptions& o) {
  std::ostringstream s;
  s.precision(17);
  s << "# mambamt synthetic document-level corpus (data/synthetic.h)\n"
    << "generator_version = " << kGeneratorVersion << "\n"
    << "seed = " << o.seed << "\n"
    << "train_docs = " << o.train_docs << "\n"
    << "valid_docs = " << o.valid_docs << "\n"
    << "test_docs = " << o.test_docs << "\n"
    << "min_sentences = " << o.min_sentences << "\n"
    << "max_sentences = " << o.max_sentences << "\n"
    << "vocab_size = " << o.vocab_size << "\n"
    << "entities = " << o.entities << "\n"
    << "unseen_entity_fraction = " << o.unseen_entity_fraction << "\n"
    << "ambiguous_words = " << o.ambiguous_words << "\n"
    << "max_distance = " << o.max_distance << "\n"
    << "test_max_distance = " << o.test_max_distance << "\n"
    << "entity_zipf = " << o.entity_zipf << "\n";
  return s.str();
}

void write_entities(const std::vector<EntityCount>& entities, const std::string& path) {
  std::string out = "entity\ttrain\tvalid\ttest\n";
  for (const auto& e : entities) {
    out += e.name + "\t" + std::to_string(e.train) + "\t" + std::to_string(e.valid) + "\t" + std::to_string(e.test) + "\n";
  }
  detail::write_file_atomic(path, out);
}

std::vector<EntityCount> read_entities(const std::string& path) {
  detail::LineReader in(path);
  std::string line;
  if (!in.next(line) || detail::trim(line) != "entity\ttrain\tvalid\ttest") {
    throw InputError(located(path, 1, 0, "bad header: expected entity\\ttrain\\tvalid\\ttest"));
  }
  std::vector<EntityCount> out;
  while (in.next(line)) {
    if (detail::trim(line).empty()) continue;
    const auto f = detail::split(line, '\t');
    if (f.size() != 4 || detail::trim(f[0]).empty()) {
      throw InputError(located(path, in.line_number(), 0, "expected entity<TAB>train<TAB>valid<TAB>test"));
    }
    EntityCount e;
    e.name = std::string(detail::trim(f[0]));
    int64_t* fields[] = {&e.train, &e.valid, &e.test};
    for (int i = 0; i < 3; ++i) {
      const std::string v(detail::trim(f[static_cast<size_t>(i) + 1]));
      char* end = nullptr;
      const long long n = v.empty() ? -1 : std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end != 0 || n < 0) {
        throw InputError(located(path, in.line_number(), 0, "count is not a non-negative integer: '" + v + "'"));
      }
      *fields[i] = n;
    }
    out.push_back(std::move(e));
  }
  return out;
}

namespace {

// The corpus files of a directory, and the manifest lines that fingerprint
// them ("fingerprint train.tsv = <hex>"): a file cut at a line boundary reads
// as a smaller corpus, so the loader checks them (manifests written before
// the fingerprints have none, and are not checked).
const char* const kCorpusFiles[] = {"train.tsv", "valid.tsv", "test.tsv", "test.align", "contrastive.tsv", "entities.tsv"};
const char* const kFingerprint = "fingerprint ";

std::string file_fingerprints(const std::string& dir) {
  std::string out;
  for (const char* f : kCorpusFiles) {
    const std::string path = dir + "/" + f;
    if (detail::file_exists(path))
      out += std::string(kFingerprint) + f + " = " + detail::hex64(detail::fnv1a(core::read_file(path))) + "\n";
  }
  return out;
}

// The files of `dir` whose content differs from the manifest's fingerprints.
std::vector<std::string> damaged_files(const std::string& dir, const std::string& manifest_text) {
  std::vector<std::string> out;
  std::istringstream in(manifest_text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(kFingerprint, 0) != 0) continue;
    const size_t eq = line.find(" = ");
    if (eq == std::string::npos) continue;
    const size_t from = std::string(kFingerprint).size();
    const std::string path = dir + "/" + line.substr(from, eq - from);
    if (!detail::file_exists(path) || detail::hex64(detail::fnv1a(core::read_file(path))) != line.substr(eq + 3))
      out.push_back(path);
  }
  return out;
}

}  // namespace

void write_synthetic(const SyntheticCorpus& c, const SyntheticOptions& o, const std::string& dir) {
  write_tsv(c.train, dir + "/train.tsv");
  if (!c.valid.documents.empty()) write_tsv(c.valid, dir + "/valid.tsv");
  if (!c.test.documents.empty()) {
    write_tsv(c.test, dir + "/test.tsv");
    write_alignments(c.test_alignments, dir + "/test.align");
  }
  write_contrastive(c.contrastive, dir + "/contrastive.tsv");
  write_entities(c.entities, dir + "/entities.tsv");
  detail::write_file_atomic(dir + "/manifest.txt", synthetic_manifest(o) + file_fingerprints(dir));
}

SyntheticCorpus load_synthetic(const std::string& dir) {
  if (!detail::file_exists(dir + "/manifest.txt")) {
    throw InputError(located(dir + "/manifest.txt", 0, 0, "no synthetic corpus here (manifest missing)"));
  }
  SyntheticCorpus c;
  c.train = read_tsv(dir + "/train.tsv");
  if (detail::file_exists(dir + "/valid.tsv")) c.valid = read_tsv(dir + "/valid.tsv");
  if (detail::file_exists(dir + "/test.tsv")) c.test = read_tsv(dir + "/test.tsv");
  if (detail::file_exists(dir + "/test.align")) c.test_alignments = read_alignments(dir + "/test.align");
  c.contrastive = read_contrastive(dir + "/contrastive.tsv");
  c.entities = read_entities(dir + "/entities.tsv");
  return c;
}

SyntheticCorpus ensure_synthetic(const SyntheticOptions& o, const std::string& dir) {
  const std::string manifest = dir + "/manifest.txt";
  const std::string expected = synthetic_manifest(o);
  if (detail::file_exists(manifest)) {
    const std::string text = core::read_file(manifest);
    if (text.substr(0, std::min(text.find(kFingerprint), text.size())) != expected) {
      throw InputError(located(manifest, 0, 0,
                               "this directory holds a synthetic corpus generated with other options; "
                               "use another directory or delete it"));
    }
    const std::vector<std::string> damaged = damaged_files(dir, text);
    // Corpora written before the generator wrote gold alignments (2026-11-27)
    // lack test.align: generating again adds it and rewrites the other files
    // as they are.
    const bool without_alignments = o.test_docs > 0 && !detail::file_exists(dir + "/test.align");
    if (damaged.empty() && !without_alignments) return load_synthetic(dir);
    if (without_alignments && damaged.empty())
      spdlog::info("{}: no test.align (a corpus written before the gold alignments); generating it", dir);
    // Damaged on disk: the generator is a pure function of the options, so
    // generating again writes the same files. The damaged ones are kept.
    for (const std::string& path : damaged) {
      const std::string aside = core::set_aside_unreadable(path);
      spdlog::warn("{}: missing or damaged (see the fingerprints in {}); {}: generating the corpus again", path,
                   manifest, aside.empty() ? "no file to set aside" : "set aside as " + aside);
    }
  }
  // Racing writers produce identical files and rename them into place, and the
  // manifest goes last, so a reader that sees it sees complete files.
  SyntheticCorpus c = generate_synthetic(o);
  write_synthetic(c, o, dir);
  return c;
}

}  // namespace mambamt::data
