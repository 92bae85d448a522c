// libmambamt_spm.so: sentencepiece behind data/detail/spm_api.h. Built on its
// own (not part of libmambamt_data) and loaded by data/detail/spm_loader.cpp;
// see spm_api.h for why.
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <exception>

#include "data/detail/spm_api.h"

namespace {

using mambamt::data::detail::SpmLibrary;
using mambamt::data::detail::SpmModel;
using mambamt::data::detail::SpmSentences;

std::string error_of(const sentencepiece::util::Status& s) { return s.ok() ? std::string() : s.ToString(); }

class Model final : public SpmModel {
 public:
  std::string load_file(const std::string& path) override { return guarded([&] { return error_of(sp_.Load(path)); }); }
  std::string load_proto(const std::string& serialized) override {
    return guarded([&] { return error_of(sp_.LoadFromSerializedProto(serialized)); });
  }
  void encode(std::string_view text, std::vector<int>* ids) const override {
    if (!sp_.Encode(text, ids).ok()) ids->clear();
  }
  std::string decode(const std::vector<int>& ids) const override {
    std::string out;
    if (!sp_.Decode(ids, &out).ok()) out.clear();
    return out;
  }
  int piece_size() const override { return sp_.GetPieceSize(); }
  int piece_to_id(std::string_view piece) const override { return sp_.PieceToId(piece); }
  std::string id_to_piece(int id) const override { return sp_.IdToPiece(id); }
  float score(int id) const override { return sp_.GetScore(id); }
  bool is_control(int id) const override { return sp_.IsControl(id); }
  int pad_id() const override { return sp_.pad_id(); }
  int unk_id() const override { return sp_.unk_id(); }
  int bos_id() const override { return sp_.bos_id(); }
  int eos_id() const override { return sp_.eos_id(); }

 private:
  template <typename F>
  static std::string guarded(F&& f) {
    try {
      return f();
    } catch (const std::exception& e) {
      return e.what();
    }
  }
  sentencepiece::SentencePieceProcessor sp_;
};

class Sentences final : public sentencepiece::SentenceIterator {
 public:
  explicit Sentences(SpmSentences& source) : source_(source) { Next(); }
  bool done() const override { return current_ == nullptr; }
  void Next() override { current_ = source_.next(); }
  const std::string& value() const override { return *current_; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  SpmSentences& source_;
  const std::string* current_ = nullptr;
};

class Library final : public SpmLibrary {
 public:
  std::unique_ptr<SpmModel> create() const override { return std::make_unique<Model>(); }
  std::string train(const std::unordered_map<std::string, std::string>& args, SpmSentences& sentences,
                    uint32_t seed, std::string* proto) const override {
    try {
      sentencepiece::SetRandomGeneratorSeed(seed);
      Sentences it(sentences);
      return error_of(sentencepiece::SentencePieceTrainer::Train(args, &it, proto));
    } catch (const std::exception& e) {
      return e.what();
    }
  }
};

}  // namespace

extern "C" __attribute__((visibility("default"))) const SpmLibrary* mambamt_spm_library() {
  static const Library library;
  return &library;
}
