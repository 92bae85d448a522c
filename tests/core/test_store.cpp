#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "core/checkpoint.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/hash.h"
#include "core/hdf5.h"
#include "core/store.h"
#include "test_util.h"

using namespace mambamt::core;
namespace core = mambamt::core;
namespace fs = std::filesystem;

TEST_CASE("a store round-trips config, status, metrics, results and system info", "[core][store]") {
  TempDir tmp;
  std::string path = tmp.path("store.h5");
  {
    ExperimentStore st = ExperimentStore::create(path, {"abc123", "ratio=0.125", "demo", "[model]\nd_model = 8\n"});
    CHECK(st.status().state == RunState::pending);
    StoreStatus s = st.status();
    s.state = RunState::running;
    s.attempts = 1;
    s.host = "node7";
    s.step = 10;
    s.total_steps = 100;
    st.set_status(s);
    for (int i = 0; i < 5; ++i) st.append_metric("loss", i * 10, 5.0 - i, 1000.0 + i);
    st.commit();
    for (int i = 5; i < 8; ++i) st.append_metric("loss", i * 10, 5.0 - i, 1000.0 + i);
    st.append_metric("lr", 70, 1e-4);
    st.set_scalar("test/bleu", 31.5);
    st.set_scalar("test/chrf", std::nan(""));
    ResultTable t;
    t.rows = {"he", "she"};
    t.columns = {"accuracy", "n"};
    t.values = {0.75, 20, std::nan(""), 0};
    st.set_table("contrastive/by_pronoun", t);
    st.set_text("hypotheses", "test.hyp.txt");
    st.set_system({{"host", "node7"}, {"torch", "1.13"}});
    ResultTable empty;
    st.set_table("empty", empty);
    st.commit();
  }
  CHECK(h5::open_object_count() == 0);

  StoreSnapshot snap = ExperimentStore::read(path);
  CHECK(h5::open_object_count() == 0);
  CHECK(snap.experiment_id == "abc123");
  CHECK(snap.name == "ratio=0.125");
  CHECK(snap.sweep == "demo");
  CHECK(snap.config == "[model]\nd_model = 8\n");
  CHECK(snap.status.state == RunState::running);
  CHECK(snap.status.attempts == 1);
  CHECK(snap.status.host == "node7");
  CHECK(snap.status.step == 10);
  REQUIRE(snap.metrics.at("loss").size() == 8);
  CHECK(snap.metrics.at("loss")[7].step == 70);
  CHECK(snap.metrics.at("loss")[7].value == -2.0);
  CHECK(snap.metrics.at("loss")[7].time == 1007.0);
  CHECK(snap.metrics.at("lr").size() == 1);
  CHECK(snap.scalars.at("test/bleu") == 31.5);
  CHECK(std::isnan(snap.scalars.at("test/chrf")));
  auto& tb = snap.tables.at("contrastive/by_pronoun");
  CHECK(tb.rows == std::vector<std::string>({"he", "she"}));
  CHECK(tb.columns == std::vector<std::string>({"accuracy", "n"}));
  CHECK(tb.at(0, 0) == 0.75);
  CHECK(std::isnan(tb.at(1, 0)));
  CHECK(snap.texts.at("hypotheses") == "test.hyp.txt");
  CHECK(snap.tables.at("empty").rows.empty());
  CHECK(snap.system.at("torch") == "1.13");

  // The owner reopens and continues appending.
  {
    ExperimentStore st = ExperimentStore::open(path);
    CHECK(st.metrics().at("loss").size() == 8);
    st.append_metric("loss", 80, -3.0);
    st.clear_results();
    st.set_scalar("test/bleu", 32.0);
    st.commit();
  }
  snap = ExperimentStore::read(path);
  CHECK(snap.metrics.at("loss").size() == 9);
  CHECK(snap.scalars.size() == 1);
  CHECK(snap.tables.empty());
  CHECK(snap.scalars.at("test/bleu") == 32.0);
  CHECK(h5::open_object_count() == 0);
}

TEST_CASE("a store is readable with h5dump", "[core][store]") {
  TempDir tmp;
  std::string path = tmp.path("store.h5");
  {
    ExperimentStore st = ExperimentStore::create(path, {"abc", "n", "s", "cfg"});
    st.append_metric("loss", 1, 2.5);
    st.commit();
  }
  std::string out = run_command("h5dump -d /metrics/loss " + path);
  CHECK(out.find("\"step\"") != std::string::npos);
  CHECK(out.find("2.5") != std::string::npos);
}

TEST_CASE("a store reads with h5py as docs/STORE.md shows", "[core][store]") {
  TempDir tmp;
  std::string path = tmp.path("store.h5");
  {
    ExperimentStore st = ExperimentStore::create(path, {"abc123", "model.d_state=32", "demo", "[model]\nd_state = 32\n"});
    StoreStatus s = st.status();
    s.state = RunState::completed;
    s.step = 20;
    st.set_status(s);
    st.append_metric("train_loss", 10, 3.25);
    st.append_metric("train_loss", 20, 2.5);
    st.set_scalar("test/bleu", 31.5);
    ResultTable t;
    t.rows = {"he", "she"};
    t.columns = {"accuracy", "n"};
    t.values = {0.75, 20, 0.5, 10};
    st.set_table("contrastive/by_pronoun", t);
    st.commit();
  }
  // Debian's python3 (python3-h5py, installed by scripts/setup.sh), not whatever python3 is first on PATH.
  write_text(tmp.path("read.py"),
             "import h5py, sys\n"
             "f = h5py.File(sys.argv[1], 'r')\n"
             "print(f.attrs['experiment_id'], f.attrs['name'], f['status'].attrs['state'], f['status'].attrs['step'])\n"
             "m = f['metrics/train_loss']\n"
             "print(list(m['step']), list(m['value']))\n"
             "print(f['results/test/bleu'][()])\n"
             "t = f['results/contrastive/by_pronoun']\n"
             "print(list(t.attrs['rows']), list(t.attrs['columns']), t[1, 0])\n"
             "print(f['config'][()].decode() if isinstance(f['config'][()], bytes) else f['config'][()], end='')\n");
  CommandResult r = run_shell("/usr/bin/python3 " + tmp.path("read.py") + " " + path);
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK(r.output ==
        "abc123 model.d_state=32 completed 20\n"
        "[10, 20] [3.25, 2.5]\n"
        "31.5\n"
        "['he', 'she'] ['accuracy', 'n'] 0.5\n"
        "[model]\nd_state = 32\n");
}

TEST_CASE("store errors name the file and leave it untouched", "[core][store]") {
  TempDir tmp;
  CHECK_THROWS_WITH(ExperimentStore::read(tmp.path("none.h5")), Catch::Contains("none.h5: no such store"));
  write_text(tmp.path("junk.h5"), "not hdf5");
  CHECK_THROWS_WITH(ExperimentStore::read(tmp.path("junk.h5")), Catch::Contains("junk.h5: not an HDF5 file"));
  CHECK(read_text(tmp.path("junk.h5")) == "not hdf5");
  // An HDF5 file that is not a store.
  { h5::File::create(tmp.path("other.h5")).root().set_attr("x", int64_t(1)); }
  CHECK_THROWS_WITH(ExperimentStore::read(tmp.path("other.h5")), Catch::Contains("other.h5: not a mambamt store"));
  std::string path = tmp.path("s.h5");
  ExperimentStore::create(path, {"a", "b", "c", "d"});
  CHECK_THROWS_WITH(ExperimentStore::create(path, {"a", "b", "c", "d"}), Catch::Contains("already exists"));
  ExperimentStore st = ExperimentStore::open(path);
  ResultTable bad;
  bad.rows = {"a"};
  bad.columns = {"x", "y"};
  bad.values = {1};
  CHECK_THROWS_WITH(st.set_table("t", bad), Catch::Contains("1 values for 1 rows x 2 columns"));
  CHECK(h5::open_object_count() == 0);
}

TEST_CASE("CRC-32C: the check value, and the crc32 instruction agrees with the tables at every length and split",
          "[core][store]") {
  const std::string check = "123456789";
  CHECK(crc32c(0, check.data(), check.size()) == 0xE3069283u);
  CHECK(crc32c_portable(0, check.data(), check.size()) == 0xE3069283u);
  CHECK(crc32c(0, nullptr, 0) == 0u);
  std::mt19937 rng(5);
  std::string bytes(4099, '\0');
  for (char& c : bytes) c = static_cast<char>(rng());
  for (size_t n : {size_t(1), size_t(7), size_t(8), size_t(9), size_t(63), size_t(4099)}) {
    const uint32_t whole = crc32c_portable(0, bytes.data(), n);
    CHECK(crc32c(0, bytes.data(), n) == whole);
    const size_t cut = n / 3;
    CHECK(crc32c(crc32c(0, bytes.data(), cut), bytes.data() + cut, n - cut) == whole);
    CHECK(crc32c_portable(crc32c_portable(0, bytes.data(), cut), bytes.data() + cut, n - cut) == whole);
  }
  // One bit anywhere changes it.
  std::string flipped = bytes;
  flipped[2000] ^= 0x10;
  CHECK(crc32c(0, flipped.data(), flipped.size()) != crc32c(0, bytes.data(), bytes.size()));
}

namespace {

// A store with a metric series, a scalar, texts (a long one among them) and
// a table: the parts HDF5 keeps in its heaps and chunks, for damaging.
void write_sample_store(const std::string& path, const std::map<std::string, std::string>& more_texts = {}) {
  ExperimentStore st = ExperimentStore::create(path, {"abc123", "ratio=0.125", "demo", "[model]\nd_model = 8\n"});
  for (int64_t i = 1; i <= 40; ++i) st.append_metric("train_loss", i, 5.0 / static_cast<double>(i));
  st.set_scalar("bleu/test", 31.5);
  st.set_text("notes", std::string(3000, 'x'));
  for (const auto& [name, text] : more_texts) st.set_text(name, text);
  ResultTable t;
  t.rows = {"he", "she"};
  t.columns = {"accuracy", "n"};
  t.values = {0.5, 10, 0.75, 12};
  st.set_table("contrastive/pronouns", t);
  st.commit();
}

// `text` with `n` bytes from `at` set to `with`.
std::string damaged(std::string text, size_t at, size_t n, char with) {
  for (size_t i = at; i < std::min(text.size(), at + n); ++i) text[i] = with;
  return text;
}

struct DamagedCopy {
  size_t at, length;
  std::string bytes;
};

// Copies of `file` damaged as disks do: a byte flipped at 151 spread
// places, and each 4 KiB block zeroed (a lost file-system block); those
// that differ from it.
std::vector<DamagedCopy> damaged_copies(const std::string& file) {
  std::vector<DamagedCopy> out;
  for (size_t at = 0; at < file.size(); at += file.size() / 151)
    out.push_back({at, 1, damaged(file, at, 1, static_cast<char>(file[at] ^ 0x5A))});
  for (size_t at = 0; at < file.size(); at += 4096) out.push_back({at, 4096, damaged(file, at, 4096, 0)});
  out.erase(std::remove_if(out.begin(), out.end(), [&](const DamagedCopy& c) { return c.bytes == file; }), out.end());
  return out;
}

}  // namespace

TEST_CASE("HDF5 files damaged on disk are errors that name them, never a crash, and unsealed files still read",
          "[core][store]") {
  TempDir tmp;
  const std::string path = tmp.path("store.h5");
  write_sample_store(path);
  const std::string good = read_text(path);
  REQUIRE(good.size() > 2 * h5::kSealBytes);
  CHECK(good.rfind("mambamt-hdf5-seal 1\ncrc32c ", 0) == 0);
  CHECK(good.substr(h5::kSealBytes, 4) == "\x89HDF");
  const StoreSnapshot want = ExperimentStore::read(path);

  // Bytes changed anywhere after the seal: one byte flipped at spread
  // positions, or a 4 KiB block zeroed (a lost file-system block). Before
  // the seal, HDF5 crashed or looped on some of these (its global heap).
  std::vector<std::pair<size_t, size_t>> cuts;  // (offset, length)
  for (size_t at = h5::kSealBytes; at < good.size(); at += good.size() / 97) cuts.push_back({at, 1});
  for (size_t at = h5::kSealBytes; at < good.size(); at += 4096) cuts.push_back({at, 4096});
  for (const auto& [at, n] : cuts) {
    const std::string bytes = n == 1 ? damaged(good, at, 1, static_cast<char>(good[at] ^ 0x5A)) : damaged(good, at, n, 0);
    if (bytes == good) continue;
    write_text(path, bytes);
    CAPTURE(at, n);
    CHECK_THROWS_AS(ExperimentStore::read(path), mambamt::InputError);
    CHECK_THROWS_WITH(ExperimentStore::read(path), Catch::Contains(path + ": damaged: its bytes changed"));
    CHECK(read_text(path) == bytes);  // nothing written by reading
  }
  // Cut short, grown, or its seal damaged.
  write_text(path, good.substr(0, good.size() - 100));
  CHECK_THROWS_WITH(ExperimentStore::read(path), Catch::Contains(path + ": damaged: ") &&
                                                     Catch::Contains("were written (cut short)"));
  write_text(path, good + "tail");
  CHECK_THROWS_WITH(ExperimentStore::read(path), Catch::Contains(std::to_string(good.size()) + " were written"));
  write_text(path, damaged(good, 28, 4, 'z'));
  CHECK_THROWS_WITH(ExperimentStore::read(path), Catch::Contains(path + ": its seal"));

  // Without the block (as h5py, or a mambamt from before the seal, writes
  // files) it opens unchecked, with the same contents: HDF5's addresses
  // count from its signature.
  write_text(path, good.substr(h5::kSealBytes));
  const StoreSnapshot legacy = ExperimentStore::read(path);
  CHECK(legacy.experiment_id == want.experiment_id);
  CHECK(legacy.metrics.at("train_loss").size() == 40);
  CHECK(legacy.scalars == want.scalars);
  CHECK(legacy.texts == want.texts);
  CHECK(legacy.tables.at("contrastive/pronouns").values == want.tables.at("contrastive/pronouns").values);
  // Unchecked, a damaged shape is caught before it is allocated: the metric's
  // dataspace (40 points, no maximum: 40 then 8 bytes of 0xff) made to claim
  // 2^58 points was "cannot create std::vector larger than max_size()".
  {
    std::string dims(8, '\0'), huge(8, '\0');
    dims[0] = 40;
    huge[7] = 0x04;  // little-endian 2^58
    const std::string pattern = dims + std::string(8, '\xff');
    const std::string legacy_bytes = good.substr(h5::kSealBytes);
    const size_t at = legacy_bytes.find(pattern);
    REQUIRE(at != std::string::npos);
    CHECK(legacy_bytes.find(pattern, at + 1) == std::string::npos);
    write_text(path, std::string(legacy_bytes).replace(at, 8, huge));
    CHECK_THROWS_AS(ExperimentStore::read(path), mambamt::InputError);
    CHECK_THROWS_WITH(ExperimentStore::read(path),
                      Catch::StartsWith(path + ": unreadable store: /metrics/train_loss: damaged: the dataset of shape "
                                               "288230376151711744 claims more elements than the "));
  }

  // A writer that fails leaves its file unsealed, and an unsealed file does not open.
  const std::string half = tmp.path("half.h5");
  try {
    h5::File f = h5::File::create(half);
    f.root().set_attr("format", "mambamt-store");
    throw std::runtime_error("writer failed");
  } catch (const std::runtime_error&) {
  }
  CHECK_THROWS_WITH(h5::File::open(half), Catch::Contains(half + ": never sealed"));
  CHECK(h5::open_object_count() == 0);
}

TEST_CASE("sealing damaged files without a seal: HDF5's crashes and loops stay in the child, the file is left alone",
          "[core][store]") {
  // HDF5 follows damaged offsets of a file without a seal and crashes or
  // loops: reseal_in_child copies each file in a child process, so the
  // caller (`mambamt store seal`) lives on and reports it.
  TempDir tmp;
  const std::string path = tmp.path("store.h5");
  write_sample_store(path, {{"hyp", "a sentence of the output"}});
  const std::string legacy = read_text(path).substr(h5::kSealBytes);
  write_text(path, legacy);
  REQUIRE(h5::check_seal(path).state == h5::SealState::none);
  REQUIRE(h5::reseal_in_child(path, 30).empty());
  CHECK(h5::check_seal(path).state == h5::SealState::holds);
  CHECK(ExperimentStore::read(path).texts.at("notes") == std::string(3000, 'x'));

  int sealed = 0, left = 0, crashed = 0;
  for (const auto& [at, n, bytes] : damaged_copies(legacy)) {
    write_text(path, bytes);
    CAPTURE(at, n);
    const std::string why = h5::reseal_in_child(path, 3);
    if (why.empty()) {
      // HDF5 read it all without a complaint (damaged data, not structure):
      // sealed as it is, a new file written by HDF5, which reads.
      ++sealed;
      CHECK(h5::check_seal(path).state == h5::SealState::holds);
      try {
        ExperimentStore::read(path);
      } catch (const mambamt::Error&) {
      }
    } else {
      ++left;
      crashed += why.find("HDF5 crashed reading it") == 0 || why.find("HDF5 was still reading it after 3 s") == 0;
      CHECK(read_text(path) == bytes);
    }
    for (const auto& e : fs::directory_iterator(tmp.dir())) CHECK(e.path().filename() == "store.h5");  // no copy left
  }
  CHECK(sealed > 0);
  CHECK(left > 0);
  // Debian's HDF5 1.10 crashes or loops on some of these: what the child is for.
  CHECK(crashed > 0);
  CHECK(h5::open_object_count() == 0);
}

TEST_CASE("reading damaged stores without a seal in a child: HDF5's crashes and loops are errors naming the store",
          "[core][store]") {
  // status, collect, compare and store show read every store of a sweep;
  // one without a seal that HDF5 crashes or loops on must not take them down.
  TempDir tmp;
  const std::string path = tmp.path("run/exp/abc123/store.h5");
  fs::create_directories(tmp.path("run/exp/abc123"));
  write_sample_store(path, {{"hyp", "a sentence of the output"}});
  const std::string legacy = read_text(path).substr(h5::kSealBytes);
  struct InChild {
    InChild() { h5::set_unsealed_reads_in_child(true, 3); }
    ~InChild() { h5::set_unsealed_reads_in_child(false); }
  } in_child;
  write_text(path, legacy);
  CHECK(ExperimentStore::read(path).texts.at("notes") == std::string(3000, 'x'));

  int read = 0, refused = 0, crashed = 0;
  std::vector<std::string> crashing;  // the bytes of those that crash HDF5
  for (const auto& [at, n, bytes] : damaged_copies(legacy)) {
    write_text(path, bytes);
    CAPTURE(at, n);
    try {
      ExperimentStore::read(path);
      ++read;  // damaged data, not structure
    } catch (const mambamt::InputError& e) {
      ++refused;
      const std::string what = e.what();
      CHECK_THAT(what, Catch::StartsWith(path + ": "));
      if (what.find("HDF5 crashed reading it") != std::string::npos ||
          what.find("HDF5 was still reading it after 3 s") != std::string::npos) {
        ++crashed;
        if (what.find("crashed") != std::string::npos) crashing.push_back(bytes);
      }
    }
    CHECK(read_text(path) == bytes);
  }
  CHECK(read > 0);
  CHECK(refused > 0);
  // Debian's HDF5 1.10 crashes or loops on some of these: this process lives on.
  CHECK(crashed > 0);
  REQUIRE_FALSE(crashing.empty());

  // Many files in children: one child reads them one after the other, a
  // new one goes on after each crash.
  std::vector<std::string> files;
  for (int i = 0; i < 4; ++i) {
    files.push_back(tmp.path("many/" + std::to_string(i) + ".h5"));
    fs::create_directories(tmp.path("many"));
    write_text(files.back(), i % 2 == 0 ? crashing[static_cast<size_t>(i / 2) % crashing.size()] : legacy);
  }
  h5::set_unsealed_reads_in_child(false);
  const std::string pids = tmp.path("pids");
  const std::vector<std::string> why = h5::in_children(
      files,
      [&](const std::string& file) {
        std::ofstream(pids, std::ios::app) << ::getpid() << "\n";
        ExperimentStore::read(file);
      },
      [](const std::string&) { return 3.0; });
  REQUIRE(why.size() == 4);
  CHECK_THAT(why[0], Catch::StartsWith("HDF5 crashed reading it ("));
  CHECK(why[1].empty());
  CHECK_THAT(why[2], Catch::StartsWith("HDF5 crashed reading it ("));
  CHECK(why[3].empty());
  std::set<std::string> children;
  std::istringstream lines(read_text(pids));
  for (std::string line; std::getline(lines, line);) children.insert(line);
  CHECK(children.size() == 3);  // the first, and one after each crash
  // read_ahead reads them so before the reads.
  h5::set_unsealed_reads_in_child(true, 3);
  ExperimentStore::read_ahead(files);
  for (size_t i = 0; i < files.size(); ++i) {
    CAPTURE(i);
    if (i % 2 == 0)
      CHECK_THROWS_WITH(ExperimentStore::read(files[i]),
                        Catch::StartsWith(files[i] + ": unreadable store: HDF5 crashed"));
    else
      CHECK(ExperimentStore::read(files[i]).texts.at("notes") == std::string(3000, 'x'));
  }
  h5::set_unsealed_reads_in_child(false);

  // The commands that read stores say so and go on.
  write_text(path, crashing.front());
  const std::string bin = mambamt_binary();
  CommandResult show = run_shell(bin + " store show " + path);
  INFO(show.output);
  CHECK(show.code == 1);
  CHECK_THAT(show.output, Catch::Contains(path + ": unreadable store: HDF5 crashed reading it ("));
  CommandResult status = run_shell(bin + " status " + tmp.path("run"));
  INFO(status.output);
  CHECK(status.code == 0);
  CHECK_THAT(status.output, Catch::Contains("unreadable") && Catch::Contains("HDF5 crashed reading it"));
  CommandResult collect = run_shell(bin + " collect " + tmp.path("run") + " --no-plots --out " + tmp.path("out"));
  INFO(collect.output);
  CHECK(collect.code == 0);
  CHECK_THAT(collect.output,
             Catch::Contains("collect: skipping unreadable store " + path + ": unreadable store: HDF5 crashed"));
  CHECK(read_text(path) == crashing.front());
}

TEST_CASE("a file renamed over a store while it is opened is checked too: no damaged bytes are read",
          "[core][store]") {
  // A reader checks the seal on one open of the path and HDF5 opens the path
  // again; a writer renames new files over it meanwhile (as workers do while
  // status and collect read). The damaged file here opens in HDF5 without
  // complaint, and only the seal tells its text is wrong.
  TempDir tmp;
  const std::string path = tmp.path("store.h5");
  const std::string notes(3000, 'x');
  {
    ExperimentStore st = ExperimentStore::create(path, {"abc123", "ratio=0.125", "demo", "[model]\nd_model = 8\n"});
    st.set_text("notes", notes);
    st.commit();
  }
  const std::string good = read_text(path);
  const size_t x = good.find(notes);
  REQUIRE(x != std::string::npos);
  const std::string bad = damaged(good, x + 1500, 1, 'y');
  write_text(tmp.path("bad.h5"), bad);
  CHECK_THROWS_WITH(ExperimentStore::read(tmp.path("bad.h5")), Catch::Contains("damaged"));
  fs::remove(tmp.path("bad.h5"));

  std::atomic<bool> done{false};
  std::thread writer([&] {
    for (int i = 0; i < 1500; ++i) {
      const std::string next = tmp.path(i % 2 ? "next.h5" : "next.bad.h5");
      write_text(next, i % 2 ? good : bad);
      fs::rename(next, path);
    }
    done = true;
  });
  int64_t read = 0, refused = 0, wrong = 0;
  std::vector<std::string> other;
  while (!done) {
    try {
      const StoreSnapshot s = ExperimentStore::read(path);
      ++read;
      if (s.texts.at("notes") != notes) ++wrong;
    } catch (const mambamt::InputError& e) {
      const std::string what = e.what();
      if (what.find(path + ": damaged: its bytes changed") != std::string::npos ||
          what.find(path + ": replaced by another file") != std::string::npos)
        ++refused;
      else if (other.size() < 3)
        other.push_back(what);
    }
  }
  writer.join();
  CAPTURE(read, refused, other);
  CHECK(wrong == 0);
  CHECK(other.empty());
  CHECK(read > 0);
  CHECK(refused > 0);
  CHECK(h5::open_object_count() == 0);
}

TEST_CASE("checkpoints read back bitwise equal for every dtype and shape", "[core][checkpoint]") {
  TempDir tmp;
  torch::manual_seed(7);
  Checkpoint c;
  c.tensors["model/encoder.layers.0.weight"] = torch::randn({3, 5});
  c.tensors["model/scalar"] = torch::randn({});
  c.tensors["f64"] = torch::randn({2, 2, 2}, torch::kFloat64);
  c.tensors["bf16"] = torch::randn({7}).to(torch::kBFloat16);
  c.tensors["f16"] = torch::randn({4, 1}).to(torch::kFloat16);
  c.tensors["i64"] = torch::randint(-1000, 1000, {6}, torch::kInt64);
  c.tensors["i32"] = torch::randint(-1000, 1000, {6}, torch::kInt32);
  c.tensors["u8"] = torch::randint(0, 255, {9}, torch::kUInt8);
  c.tensors["bool"] = torch::randn({5}) > 0;
  c.tensors["empty"] = torch::empty({0, 3});
  c.tensors["noncontig"] = torch::randn({4, 6}).t();
  c.tensors["nan"] = torch::tensor({std::nan(""), std::numeric_limits<double>::infinity(), -0.0});
  c.ints["step"] = 1234;
  c.floats["best"] = 0.125;
  c.strings["rng"] = std::string("state\0with nul", 14).substr(0, 5);
  std::string path = tmp.path("c.h5");
  write_checkpoint(path, c);
  Checkpoint r = read_checkpoint(path);
  REQUIRE(r.tensors.size() == c.tensors.size());
  for (auto& [name, t] : c.tensors) {
    INFO(name);
    auto& u = r.tensors.at(name);
    CHECK(u.scalar_type() == t.scalar_type());
    CHECK(u.sizes() == t.sizes());
    auto a = t.contiguous(), b = u.contiguous();
    CHECK(std::memcmp(a.data_ptr(), b.data_ptr(), a.numel() * a.element_size()) == 0);
  }
  CHECK(r.ints.at("step") == 1234);
  CHECK(r.floats.at("best") == 0.125);
  CHECK(r.strings.at("rng") == "state");
  CHECK(h5::open_object_count() == 0);
  CHECK_THROWS_WITH(read_checkpoint(tmp.path("missing.h5")), Catch::Contains("missing.h5: no such checkpoint"));
}

TEST_CASE("an unsealed checkpoint whose tensor shape is damaged is an error naming file and tensor", "[core][checkpoint]") {
  TempDir tmp;
  Checkpoint c;
  c.tensors["w"] = torch::ones({37, 3});
  c.ints["step"] = 5;
  const std::string path = tmp.path("c.h5");
  write_checkpoint(path, c);
  // Without its seal (as a mambamt from before the seal wrote checkpoints),
  // with the tensor's dataspace (37 x 3: two 8-byte sizes, then the same as
  // its maximum sizes) claiming 2^58 rows.
  const std::string unsealed = read_text(path).substr(h5::kSealBytes);
  std::string dims(16, '\0'), huge(8, '\0');
  dims[0] = 37;
  dims[8] = 3;
  huge[7] = 0x04;
  const size_t at = unsealed.find(dims);
  REQUIRE(at != std::string::npos);
  CHECK(unsealed.find(dims, at + 1) == at + 16);
  CHECK(unsealed.find(dims, at + 17) == std::string::npos);
  write_text(path, std::string(unsealed).replace(at, 8, huge).replace(at + 16, 8, huge));
  CHECK_THROWS_AS(read_checkpoint(path), mambamt::InputError);
  CHECK_THROWS_WITH(read_checkpoint(path),
                    Catch::StartsWith(path + ": unreadable checkpoint: /tensors/w: damaged: the dataset of shape "
                                             "288230376151711744 x 3 claims more elements than the "));
  CHECK(h5::open_object_count() == 0);
  // The wrapped message names the file once: h5::after_file drops a leading
  // "<file>: " and nothing else.
  CHECK(h5::after_file("r/s.h5", "r/s.h5: /metrics/x: damaged") == "/metrics/x: damaged");
  CHECK(h5::after_file("r/s.h5", "cannot open r/s.h5") == "cannot open r/s.h5");
  CHECK(h5::after_file("r/s.h5", "r/s.h5x: another file") == "r/s.h5x: another file");
}

TEST_CASE("a checkpoint directory keeps the last K and the best", "[core][checkpoint]") {
  TempDir tmp;
  CheckpointDir dir(tmp.path("ckpt"));
  CHECK_FALSE(dir.latest_step().has_value());
  for (int64_t s : {10, 20, 30, 40}) {
    Checkpoint c;
    c.ints["step"] = s;
    c.tensors["w"] = torch::full({2}, static_cast<double>(s));
    dir.save(s, c, 2, /*is_best=*/s == 20);
  }
  CHECK(dir.steps() == std::vector<int64_t>({30, 40}));
  CHECK(*dir.latest_step() == 40);
  CHECK(read_checkpoint(dir.best_path()).ints.at("step") == 20);
  // A temporary file left by a crash is never listed.
  write_text(tmp.path("ckpt/.step_00000050.h5.tmp.host.1.0"), "partial");
  CHECK(*dir.latest_step() == 40);
}

TEST_CASE("a checkpoint that does not read back is set aside and the one before it is used", "[core][checkpoint]") {
  TempDir tmp;
  CheckpointDir dir(tmp.path("ckpt"));
  CHECK_FALSE(dir.latest_readable().has_value());
  for (int64_t s : {10, 20, 30}) {
    Checkpoint c;
    c.ints["step"] = s;
    c.tensors["w"] = torch::full({2}, static_cast<double>(s));
    dir.save(s, c, 3);
  }
  // Undamaged: the newest.
  auto newest = dir.latest_readable();
  REQUIRE(newest.has_value());
  CHECK(newest->step == 30);
  CHECK(newest->checkpoint.ints.at("step") == 30);

  // Step 30 truncated, one byte of step 20 changed (HDF5 alone would read
  // it: its seal does not hold).
  const std::string p30 = dir.path_for_step(30), p20 = dir.path_for_step(20);
  const std::string head30 = read_text(p30).substr(0, 1000);
  write_text(p30, head30);
  std::string bytes20 = read_text(p20);
  bytes20[bytes20.size() / 2] ^= 0x01;
  write_text(p20, bytes20);
  std::vector<std::string> skipped;
  auto found = dir.latest_readable([&](const std::string& path, const std::string& error) {
    skipped.push_back(path);
    CHECK_THAT(error, Catch::Contains(path));
  });
  REQUIRE(found.has_value());
  CHECK(found->step == 10);
  CHECK(found->path == dir.path_for_step(10));
  CHECK(found->checkpoint.tensors.at("w").equal(torch::full({2}, 10.0)));
  CHECK(skipped == std::vector<std::string>({p30, p20}));
  // Renamed aside with their bytes, not deleted, and no longer listed.
  CHECK(dir.steps() == std::vector<int64_t>({10}));
  CHECK(read_text(p30 + ".unreadable") == head30);
  CHECK(read_text(p20 + ".unreadable") == bytes20);
  // A later save of the same step keeps the earlier damaged copy.
  Checkpoint c;
  c.ints["step"] = 30;
  dir.save(30, c, 3);
  write_text(p30, "damaged again");
  CHECK(dir.latest_readable()->step == 10);
  CHECK(read_text(p30 + ".unreadable") == head30);
  CHECK(read_text(p30 + ".unreadable.1") == "damaged again");
  // Nothing readable left: nullopt, the files still there under other names.
  write_text(dir.path_for_step(10), "x");
  CHECK_FALSE(dir.latest_readable().has_value());
  CHECK(dir.steps().empty());
  CHECK(fs::exists(dir.path_for_step(10) + ".unreadable"));
}

TEST_CASE("a damaged best.h5 is copied again from its step file while that is kept", "[core][checkpoint]") {
  TempDir tmp;
  CheckpointDir dir(tmp.path("ckpt"));
  CHECK(dir.repair_best(20) == "");  // no best.h5 yet
  for (int64_t s : {10, 20, 30}) {
    Checkpoint c;
    c.ints["step"] = s;
    c.tensors["w"] = torch::full({64}, static_cast<double>(s));
    dir.save(s, c, 2, /*is_best=*/s == 20);
  }
  const std::string best = dir.best_path(), step20 = read_text(dir.path_for_step(20));
  CHECK(dir.repair_best(20) == "");  // it opens: nothing done
  const std::string damaged = read_text(best).substr(0, 1000);
  write_text(best, damaged);
  const std::string done = dir.repair_best(20);
  CHECK_THAT(done, Catch::Contains(best) && Catch::Contains("copied again from " + dir.path_for_step(20)));
  CHECK(read_text(best) == step20);
  CHECK(read_text(best + ".unreadable") == damaged);
  CHECK(read_checkpoint(best).ints.at("step") == 20);
  // The step file pruned: left as it is, and said so.
  write_text(best, damaged);
  fs::remove(dir.path_for_step(20));
  CHECK_THAT(dir.repair_best(20), Catch::Contains("is not kept or does not open either"));
  CHECK(read_text(best) == damaged);
}

TEST_CASE("atomic writes replace whole files and clean up on failure", "[core][fs]") {
  TempDir tmp;
  std::string p = tmp.path("f.txt");
  write_file_atomic(p, "one");
  write_file_atomic(p, "two");
  CHECK(read_text(p) == "two");
  CHECK_THROWS(replace_file_atomic(p, [](const std::string& t) {
    write_text(t, "partial");
    throw mambamt::Error("boom");
  }));
  CHECK(read_text(p) == "two");
  int files = 0;
  for (auto& e : fs::directory_iterator(tmp.dir())) files += e.is_regular_file();
  CHECK(files == 1);
}

// ------------------------------------------------------------------ crash safety

// The child of the crash test: appends metrics and writes checkpoints in a
// loop, reporting on fd MAMBAMT_CRASH_FD what it has committed. Hidden ([.]):
// it runs only when the crash test starts it by name.
TEST_CASE("crash writer child", "[.][crash-writer]") {
  const char* dir = std::getenv("MAMBAMT_CRASH_DIR");
  const char* fd_s = std::getenv("MAMBAMT_CRASH_FD");
  if (!dir || !fd_s) {
    WARN("only the crash-safety test runs this, with MAMBAMT_CRASH_DIR and MAMBAMT_CRASH_FD set");
    return;
  }
  int fd = std::atoi(fd_s);
  std::string store_path = std::string(dir) + "/store.h5";
  if (!fs::exists(store_path)) ExperimentStore::create(store_path, {"crash", "crash", "crash", "cfg"});
  ExperimentStore st = ExperimentStore::open(store_path);
  CheckpointDir ckpt(std::string(dir) + "/ckpt");
  int64_t step = st.metrics().count("loss") ? static_cast<int64_t>(st.metrics().at("loss").size()) : 0;
  auto report = [&](char kind, int64_t s) {
    std::string line = std::string(1, kind) + " " + std::to_string(s) + "\n";
    (void)!::write(fd, line.data(), line.size());
  };
  for (;; ++step) {
    st.append_metric("loss", step, 0.5 * static_cast<double>(step));
    st.append_metric("lr", step, 1.0 / (1.0 + static_cast<double>(step)));
    StoreStatus s = st.status();
    s.step = step;
    st.set_status(s);
    st.commit();
    report('F', step);
    if (step % 5 == 0) {
      Checkpoint c;
      c.ints["step"] = step;
      c.tensors["w"] = torch::full({64, 64}, static_cast<double>(step));
      ckpt.save(step, c, 2);
      report('C', step);
    }
  }
}

TEST_CASE("a store survives SIGKILL at 20 random moments", "[core][store][slow]") {
  TempDir tmp;
  std::mt19937 rng(12345);
  std::uniform_int_distribution<int> wait_ms(30, 400);
  int64_t flushed_total = -1;
  for (int kill_no = 0; kill_no < 20; ++kill_no) {
    int pipefd[2];
    REQUIRE(::pipe(pipefd) == 0);
    std::string exe = fs::read_symlink("/proc/self/exe").string();
    setenv("MAMBAMT_CRASH_DIR", tmp.dir().c_str(), 1);
    setenv("MAMBAMT_CRASH_FD", "3", 1);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    // Close the read end first: it may be fd 3 itself.
    posix_spawn_file_actions_addclose(&fa, pipefd[0]);
    posix_spawn_file_actions_adddup2(&fa, pipefd[1], 3);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    std::vector<std::string> args = {exe, "crash writer child"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid;
    REQUIRE(posix_spawn(&pid, exe.c_str(), &fa, nullptr, argv.data(), environ) == 0);
    posix_spawn_file_actions_destroy(&fa);
    ::close(pipefd[1]);
    // Let it get going (the first kill waits for the first commit), then kill.
    std::string reported;
    char buf[4096];
    fcntl(pipefd[0], F_SETFL, O_NONBLOCK);
    auto start = std::chrono::steady_clock::now();
    auto deadline = start + std::chrono::milliseconds(wait_ms(rng));
    while (std::chrono::steady_clock::now() < deadline || reported.find('F') == std::string::npos) {
      if (std::chrono::steady_clock::now() - start > std::chrono::seconds(120)) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
        FAIL("the writer reported no commit within 120 s");
      }
      ssize_t n = ::read(pipefd[0], buf, sizeof buf);
      if (n > 0) reported.append(buf, static_cast<size_t>(n));
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    fcntl(pipefd[0], F_SETFL, 0);
    ssize_t n;
    while ((n = ::read(pipefd[0], buf, sizeof buf)) > 0) reported.append(buf, static_cast<size_t>(n));
    ::close(pipefd[0]);

    int64_t last_flush = -1, last_ckpt = -1;
    std::istringstream in(reported);
    std::string line;
    while (std::getline(in, line)) {
      if (line.size() < 3) continue;
      int64_t v = std::stoll(line.substr(2));
      if (line[0] == 'F') last_flush = v;
      if (line[0] == 'C') last_ckpt = v;
    }
    INFO("kill " << kill_no << ": last reported flush " << last_flush << ", checkpoint " << last_ckpt);
    REQUIRE(last_flush >= 0);
    REQUIRE(last_flush > flushed_total);
    flushed_total = last_flush;

    // The store opens and holds every metric flushed before the kill, in order.
    StoreSnapshot snap = ExperimentStore::read(tmp.path("store.h5"));
    auto& loss = snap.metrics.at("loss");
    REQUIRE(static_cast<int64_t>(loss.size()) >= last_flush + 1);
    for (size_t i = 0; i < loss.size(); ++i) {
      REQUIRE(loss[i].step == static_cast<int64_t>(i));
      REQUIRE(loss[i].value == 0.5 * static_cast<double>(i));
    }
    REQUIRE(snap.metrics.at("lr").size() == loss.size());
    // The newest checkpoint loads and is the one of its step.
    CheckpointDir ckpt(tmp.path("ckpt"));
    auto latest = ckpt.latest_step();
    if (last_ckpt >= 0) {
      REQUIRE(latest.has_value());
      REQUIRE(*latest >= last_ckpt);
    }
    if (latest) {
      Checkpoint c = read_checkpoint(ckpt.path_for_step(*latest));
      REQUIRE(c.ints.at("step") == *latest);
      REQUIRE(torch::equal(c.tensors.at("w"), torch::full({64, 64}, static_cast<double>(*latest))));
    }
  }
  CHECK(h5::open_object_count() == 0);
}

TEST_CASE("a store's size follows its contents, not the number of commits", "[core][store]") {
  TempDir tmp;
  std::string path = tmp.path("store.h5");
  ExperimentStore st = ExperimentStore::create(path, {"a", "b", "c", "d"});
  for (int i = 0; i < 1000; ++i) {
    st.append_metric("loss", i, 1.0 / (i + 1));
    StoreStatus s = st.status();
    s.step = i;
    s.last_error = std::string(static_cast<size_t>(i % 50), 'x');
    st.set_status(s);
    st.commit();
  }
  // 1000 points x 24 bytes plus a few KiB of structure; in-place HDF5 updates
  // would have grown the file with every commit.
  CHECK(fs::file_size(path) < 64 * 1024);
  CHECK(ExperimentStore::read(path).metrics.at("loss").size() == 1000);
}

TEST_CASE("a store's evaluation version: 0 without one, older only when completed", "[core][store]") {
  core::StoreSnapshot s;
  s.status.state = core::RunState::completed;
  CHECK(core::evaluation_version(s) == 0);
  CHECK(core::evaluated_by_older_version(s));
  s.scalars["evaluation/version"] = static_cast<double>(core::kEvaluationVersion);
  CHECK(core::evaluation_version(s) == core::kEvaluationVersion);
  CHECK(!core::evaluated_by_older_version(s));
  s.scalars["evaluation/version"] = std::numeric_limits<double>::quiet_NaN();
  CHECK(core::evaluation_version(s) == 0);
  s.status.state = core::RunState::interrupted;  // not done training: not a re-evaluation
  CHECK(!core::evaluated_by_older_version(s));
}

TEST_CASE("a result computed otherwise since some evaluation version is current only in stores of that version",
          "[core][store]") {
  core::StoreSnapshot s;
  s.status.state = core::RunState::completed;
  s.scalars["alignment/aer"] = 0.5;
  s.scalars["test/bleu"] = 20;
  CHECK(core::result_defined_since("test/bleu") == 0);
  CHECK(core::result_defined_since("alignment/aer") == 3);
  CHECK(core::result_defined_since("alignment/aer") <= core::kEvaluationVersion);
  for (int64_t version : {0, 2, 3}) {
    INFO("evaluation version " << version);
    s.scalars["evaluation/version"] = static_cast<double>(version);
    CHECK(core::result_current(s, "test/bleu"));
    CHECK(core::result_current(s, "alignment/aer") == (version >= 3));
  }
}
