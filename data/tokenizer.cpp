#include "data/tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include <spdlog/spdlog.h>

#include "core/error.h"
#include "core/fs.h"
#include "data/detail/spm_api.h"
#include "data/detail/text.h"

namespace mambamt::data {

namespace {

const char* const kModelFile = "spm.model";
const char* const kVocabFile = "spm.vocab";
const char* const kInfoFile = "tokenizer.txt";

// Feeds the source and target sentences of a corpus to the trainer.
class CorpusSentences : public detail::SpmSentences {
 public:
  explicit CorpusSentences(const Corpus& c) : c_(c) {}
  const std::string* next() override {
    while (doc_ < c_.documents.size()) {
      const auto& sents = c_.documents[doc_].sentences;
      if (sent_ < sents.size()) {
        const std::string* s = side_ == 0 ? &sents[sent_].src : &sents[sent_].tgt;
        if (side_ == 1) ++sent_;
        side_ ^= 1;
        return s;
      }
      ++doc_;
      sent_ = 0;
    }
    return nullptr;
  }

 private:
  const Corpus& c_;
  size_t doc_ = 0, sent_ = 0;
  int side_ = 0;
};

std::string info_text(const Corpus& corpus, const TokenizerOptions& o) {
  uint64_t h = detail::fnv1a("");
  for (const auto& d : corpus.documents)
    for (const auto& s : d.sentences) {
      h = detail::fnv1a(s.src, h);
      h = detail::fnv1a("\n", h);
      h = detail::fnv1a(s.tgt, h);
      h = detail::fnv1a("\n", h);
    }
  std::ostringstream s;
  s.precision(17);
  s << "# mambamt tokenizer (data/tokenizer.h); train_or_load reuses it only for these values\n"
    << "model_type = " << o.model_type << "\n"
    << "vocab_size = " << o.vocab_size << "\n"
    << "languages = ";
  for (size_t i = 0; i < o.languages.size(); ++i) s << (i ? "," : "") << o.languages[i];
  s << "\ncharacter_coverage = " << o.character_coverage << "\n"
    << "max_training_sentences = " << o.max_training_sentences << "\n"
    << "seed = " << o.seed << "\n"
    << "threads = " << o.threads << "\n"
    << "training_sentences = " << 2 * corpus.num_sentences() << "\n"
    << "text_fingerprint = " << detail::hex64(h) << "\n";
  return s.str();
}

// The line of tokenizer.txt that fingerprints spm.model (written by train();
// directories written before it have none).
const char* const kModelFingerprint = "model_fingerprint = ";

std::string model_fingerprint(std::string_view proto) { return detail::hex64(detail::fnv1a(proto)); }

// tokenizer.txt without its model fingerprint line, and that fingerprint ("" if none).
std::pair<std::string, std::string> split_info(const std::string& info) {
  const size_t at = info.find(std::string("\n") + kModelFingerprint);
  if (at == std::string::npos) return {info, ""};
  const size_t from = at + 1 + std::string(kModelFingerprint).size();
  const size_t end = info.find('\n', from);
  return {info.substr(0, at + 1), info.substr(from, end == std::string::npos ? std::string::npos : end - from)};
}

// "key = value" lines of tokenizer.txt, by key.
std::map<std::string, std::string> info_values(const std::string& info) {
  std::map<std::string, std::string> v;
  std::istringstream in(info);
  for (std::string line; std::getline(in, line);) {
    const size_t eq = line.find(" = ");
    if (line.empty() || line[0] == '#' || eq == std::string::npos) continue;
    v[line.substr(0, eq)] = line.substr(eq + 3);
  }
  return v;
}

// Why a directory's tokenizer.txt (`have`) is not the one these options and
// this text would write (`want`): the values that differ, and what to do.
std::string mismatch(const std::string& have, const std::string& want) {
  const auto h = info_values(have), w = info_values(want);
  std::string options, text;
  for (const auto& [key, value] : w) {
    const auto it = h.find(key);
    const std::string there = it == h.end() ? "(none)" : it->second;
    if (there == value) continue;
    const bool of_text = key == "training_sentences" || key == "text_fingerprint";
    std::string& out = of_text ? text : options;
    out += (out.empty() ? "" : "; ") + key + " = " + there + " there, " + value + " now";
  }
  if (!options.empty())
    return "the tokenizer here was trained with other options (" + options +
           "); use another directory for these, or delete this one to retrain if nothing uses it";
  return "the tokenizer here was trained on other text: the training corpus has changed since (" +
         (text.empty() ? std::string("tokenizer.txt differs") : text) +
         "); experiments that used this tokenizer were trained on the text it was trained on. Restore that "
         "text, or train on the new one in another directory (a new sweep); delete this one to retrain only if "
         "nothing uses it";
}

void check_options(const TokenizerOptions& o) {
  if (o.model_type != "bpe" && o.model_type != "unigram") {
    throw InputError("data.tokenizer: '" + o.model_type + "' is not a sentencepiece model type (bpe or unigram)");
  }
  const int64_t specials = 5 + static_cast<int64_t>(o.languages.size());
  if (o.vocab_size < specials + 8) {
    throw InputError("data.vocab_size = " + std::to_string(o.vocab_size) + ": must be at least " +
                     std::to_string(specials + 8) + " (" + std::to_string(specials) + " special tokens)");
  }
  for (const auto& l : o.languages) {
    if (l.empty() || l.find_first_of(", \t<>") != std::string::npos) {
      throw InputError("data: language code '" + l + "' cannot name a tag token");
    }
  }
  if (o.threads < 1) throw InputError("tokenizer threads must be >= 1");
}

}  // namespace

struct Tokenizer::Impl {
  std::unique_ptr<detail::SpmModel> model;
  std::string dir;
  SpecialIds specials;
  mutable std::mutex mutex;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache;  // word -> ids
};

Tokenizer::Tokenizer(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

Tokenizer Tokenizer::train(const Corpus& corpus, const TokenizerOptions& o, const std::string& dir) {
  check_options(o);
  if (dir.empty()) throw InputError("tokenizer: no directory given to write it to");
  if (corpus.num_sentences() == 0) throw InputError("tokenizer: the training corpus has no sentences");
  std::string controls = "<sep>";
  for (const auto& l : o.languages) controls += ",<" + l + ">";
  const std::unordered_map<std::string, std::string> args = {
      {"model_type", o.model_type},
      {"vocab_size", std::to_string(o.vocab_size)},
      {"hard_vocab_limit", "false"},
      {"pad_id", "0"}, {"unk_id", "1"}, {"bos_id", "2"}, {"eos_id", "3"},
      {"pad_piece", "<pad>"}, {"unk_piece", "<unk>"}, {"bos_piece", "<s>"}, {"eos_piece", "</s>"},
      {"control_symbols", controls},
      {"character_coverage", std::to_string(o.character_coverage)},
      {"input_sentence_size", std::to_string(o.max_training_sentences)},
      {"shuffle_input_sentence", "true"},
      {"num_threads", std::to_string(o.threads)},
      {"minloglevel", "1"},
  };
  std::string proto;
  {
    // sentencepiece keeps its seed in a global; training is serialised so two
    // threads of one process cannot interleave seeds.
    static std::mutex train_mutex;
    std::lock_guard<std::mutex> lock(train_mutex);
    CorpusSentences sentences(corpus);
    const std::string error = detail::spm().train(args, sentences, o.seed, &proto);
    if (!error.empty()) throw Error("sentencepiece training failed: " + error);
  }
  auto impl = std::make_shared<Impl>();
  impl->model = detail::spm().create();
  const std::string error = impl->model->load_proto(proto);
  if (!error.empty()) throw Error("sentencepiece produced an unreadable model: " + error);
  impl->dir = dir;

  std::string vocab;
  for (int i = 0; i < impl->model->piece_size(); ++i) {
    vocab += impl->model->id_to_piece(i) + "\t" + std::to_string(impl->model->score(i)) + "\n";
  }
  const std::string base = (std::filesystem::path(dir) / "").string();
  detail::write_file_atomic(base + kInfoFile,
                            info_text(corpus, o) + kModelFingerprint + model_fingerprint(proto) + "\n");
  detail::write_file_atomic(base + kVocabFile, vocab);
  detail::write_file_atomic(base + kModelFile, proto);
  return Tokenizer(impl);
}

Tokenizer Tokenizer::load(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / kModelFile).string();
  if (!detail::file_exists(path)) throw InputError(located(path, 0, 0, "no tokenizer model here"));
  const std::string proto = core::read_file(path);
  // A model written by train() is checked against its fingerprint: a
  // truncated model can still parse, as a smaller vocabulary.
  // Directories written before the fingerprint: the pieces are counted
  // against spm.vocab (one line each) instead.
  const std::string info_path = (std::filesystem::path(dir) / kInfoFile).string();
  const std::string vocab_path = (std::filesystem::path(dir) / kVocabFile).string();
  std::string want;
  if (detail::file_exists(info_path)) {
    want = split_info(core::read_file(info_path)).second;
    if (!want.empty() && model_fingerprint(proto) != want)
      throw InputError(located(path, 0, 0, "damaged: its fingerprint is " + model_fingerprint(proto) + ", " +
                                               info_path + " says " + want));
  }
  auto impl = std::make_shared<Impl>();
  impl->model = detail::spm().create();
  const std::string error = impl->model->load_proto(proto);
  if (!error.empty())
    throw InputError(located(path, 0, 0,
                             error.find("ParseFromArray") != std::string::npos
                                 ? std::string("not a sentencepiece model: its bytes do not parse as one (damaged?)")
                                 : "not a sentencepiece model: " + error));
  if (want.empty() && detail::file_exists(info_path) && detail::file_exists(vocab_path)) {
    const std::string vocab = core::read_file(vocab_path);
    const auto lines = static_cast<int>(std::count(vocab.begin(), vocab.end(), '\n'));
    if (lines != impl->model->piece_size())
      throw InputError(located(path, 0, 0, "damaged: it has " + std::to_string(impl->model->piece_size()) +
                                               " pieces, " + vocab_path + " lists " + std::to_string(lines)));
  }
  const SpecialIds& s = impl->specials;
  const detail::SpmModel& m = *impl->model;
  if (m.pad_id() != s.pad || m.unk_id() != s.unk || m.bos_id() != s.bos || m.eos_id() != s.eos ||
      m.piece_to_id("<sep>") != s.sep || !m.is_control(s.sep)) {
    throw InputError(located(path, 0, 0,
                             "sentencepiece model without mambamt's special tokens (pad 0, unk 1, bos 2, eos 3, <sep> 4)"));
  }
  impl->dir = dir;
  return Tokenizer(impl);
}

Tokenizer Tokenizer::train_or_load(const Corpus& corpus, const TokenizerOptions& o, const std::string& dir) {
  check_options(o);
  const auto base = std::filesystem::path(dir);
  if (detail::file_exists((base / kModelFile).string())) {
    const std::string info_path = (base / kInfoFile).string();
    const std::string want = info_text(corpus, o);
    if (!detail::file_exists(info_path)) {
      throw InputError(located(info_path, 0, 0,
                               "missing: this tokenizer was not trained by mambamt; load it as it is "
                               "(data.tokenizer_dir) or delete the directory to retrain"));
    }
    const std::string have = split_info(core::read_file(info_path)).first;
    if (have != want) throw InputError(located(info_path, 0, 0, mismatch(have, want)));
    try {
      return load(dir);
    } catch (const InputError& e) {
      // Ours (tokenizer.txt matches) but damaged on disk: training again on
      // the same text with the same options writes the same bytes, so the
      // experiments that used it are unaffected. The damaged file is kept.
      const std::string aside = core::set_aside_unreadable((base / kModelFile).string());
      spdlog::warn("{}; {}: training the tokenizer again (the same text and options give the same model)",
                   e.what(), aside.empty() ? "moved aside by another process" : "set aside as " + aside);
    }
  }
  return train(corpus, o, dir);
}

void Tokenizer::encode_append(std::string_view text, std::vector<int32_t>& out) const {
  // Word-level caching is exact because sentencepiece never forms a piece
  // across whitespace (split_by_whitespace) and its normalisation is local to
  // a word. Control characters (tabs included) take the uncached path, where
  // sentencepiece's normaliser decides what counts as whitespace.
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7F) {
      auto ids = encode_uncached(text);
      out.insert(out.end(), ids.begin(), ids.end());
      return;
    }
  }
  std::lock_guard<std::mutex> lock(impl_->mutex);
  std::string key;
  std::vector<int> ids;
  for (const auto word : detail::split_words(text)) {
    key.assign(word.data(), word.size());
    auto it = impl_->cache.find(key);
    if (it == impl_->cache.end()) {
      impl_->model->encode(word, &ids);
      it = impl_->cache.emplace(key, std::vector<int32_t>(ids.begin(), ids.end())).first;
    }
    out.insert(out.end(), it->second.begin(), it->second.end());
  }
}

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<int32_t> out;
  encode_append(text, out);
  return out;
}

std::vector<int32_t> Tokenizer::encode_uncached(std::string_view text) const {
  std::vector<int> ids;
  impl_->model->encode(text, &ids);
  return std::vector<int32_t>(ids.begin(), ids.end());
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
  std::vector<int> keep;
  keep.reserve(ids.size());
  const int n = impl_->model->piece_size();
  for (int32_t id : ids) {
    if (id < 0 || id >= n || impl_->model->is_control(id)) continue;
    keep.push_back(id);
  }
  return impl_->model->decode(keep);
}

std::vector<std::string> Tokenizer::decode_sentences(const std::vector<int32_t>& ids) const {
  std::vector<std::string> out;
  std::vector<int32_t> part;
  for (int32_t id : ids) {
    if (id == impl_->specials.sep) {
      out.push_back(decode(part));
      part.clear();
    } else {
      part.push_back(id);
    }
  }
  out.push_back(decode(part));
  return out;
}

const SpecialIds& Tokenizer::specials() const { return impl_->specials; }

int32_t Tokenizer::language_id(const std::string& code) const {
  const int id = impl_->model->piece_to_id("<" + code + ">");
  if (id == impl_->specials.unk || !impl_->model->is_control(id)) {
    throw InputError("tokenizer in " + impl_->dir + " has no language tag <" + code + ">");
  }
  return id;
}

int64_t Tokenizer::vocab_size() const { return impl_->model->piece_size(); }

std::string Tokenizer::piece(int32_t id) const {
  if (id < 0 || id >= impl_->model->piece_size()) return "";
  return impl_->model->id_to_piece(id);
}

const std::string& Tokenizer::dir() const { return impl_->dir; }

}  // namespace mambamt::data
