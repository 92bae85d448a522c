#pragma once
// The sentencepiece interface of data/, implemented by the shim library
// libmambamt_spm.so (data/spm/spm_shim.cpp) and loaded with dlopen.
//
// Why a separately loaded shim: Debian's libsentencepiece carries its own copy
// of protobuf-lite (3.14) and exports its symbols; LibTorch loads the system
// libprotobuf (3.21). Linked into one program, one copy's symbols bind for
// both and either LibTorch or sentencepiece breaks (start-up crash, or
// "compiled against version 3.14.0 of the Protocol Buffer runtime"). Loaded
// with RTLD_DEEPBIND into its own local scope, sentencepiece binds to its own
// protobuf and LibTorch to the system one.
//
// Only this interface crosses the boundary: no exceptions (errors come back as
// strings), plain standard types (both sides share one libstdc++).
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace mambamt::data::detail {

// A loaded sentencepiece model (SentencePieceProcessor).
class SpmModel {
 public:
  virtual ~SpmModel() = default;
  // Both return "" on success, else sentencepiece's error.
  virtual std::string load_file(const std::string& path) = 0;
  virtual std::string load_proto(const std::string& serialized) = 0;
  virtual void encode(std::string_view text, std::vector<int>* ids) const = 0;
  virtual std::string decode(const std::vector<int>& ids) const = 0;
  virtual int piece_size() const = 0;
  virtual int piece_to_id(std::string_view piece) const = 0;
  virtual std::string id_to_piece(int id) const = 0;
  virtual float score(int id) const = 0;
  virtual bool is_control(int id) const = 0;
  virtual int pad_id() const = 0;
  virtual int unk_id() const = 0;
  virtual int bos_id() const = 0;
  virtual int eos_id() const = 0;
};

// Training sentences, one at a time; next() returns nullptr at the end.
class SpmSentences {
 public:
  virtual ~SpmSentences() = default;
  virtual const std::string* next() = 0;
};

class SpmLibrary {
 public:
  virtual ~SpmLibrary() = default;
  virtual std::unique_ptr<SpmModel> create() const = 0;
  // Trains with sentencepiece's key=value arguments after seeding its random
  // generator; "" on success with the serialized model in *proto.
  virtual std::string train(const std::unordered_map<std::string, std::string>& args, SpmSentences& sentences,
                            uint32_t seed, std::string* proto) const = 0;
};

// The entry point the shim exports (extern "C").
using SpmEntry = const SpmLibrary* (*)();
inline constexpr const char* kSpmEntry = "mambamt_spm_library";

// The shim, loaded on first use from (in order) $MAMBAMT_SPM_LIBRARY, the
// lib/ folder next to the running binary's folder, the build tree, and the
// dynamic loader's search path. Throws Error naming what it tried.
const SpmLibrary& spm();

}  // namespace mambamt::data::detail
