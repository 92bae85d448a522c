// `mambamt store seal`: files written without a seal (h5py, a mambamt from
// before the seal) sealed in place of the old ones, with the same contents.
#include <sys/stat.h>

#include <catch2/catch.hpp>

#include <filesystem>
#include <stdexcept>
#include <string>

#include "core/error.h"
#include "core/hdf5.h"
#include "core/store.h"
#include "test_util.h"

using namespace mambamt;
namespace fs = std::filesystem;
namespace h5 = core::h5;

namespace {

struct Stat {
  ino_t ino;
  nlink_t links;
  mode_t mode;
};

Stat stat_of(const std::string& path) {
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return {st.st_ino, st.st_nlink, st.st_mode & 07777};
}

bool starts_sealed(const std::string& path) { return read_text(path).rfind("mambamt-hdf5-seal 1\n", 0) == 0; }

// How many hard links name the object at `name`.
unsigned hard_links(hid_t loc, const char* name) {
#if H5_VERSION_GE(1, 12, 0)
  H5O_info2_t info;
  REQUIRE(H5Oget_info_by_name3(loc, name, &info, H5O_INFO_BASIC, H5P_DEFAULT) >= 0);
#else
  H5O_info_t info;
  REQUIRE(H5Oget_info_by_name2(loc, name, &info, H5O_INFO_BASIC, H5P_DEFAULT) >= 0);
#endif
  return info.rc;
}

// The kind and the target of the link `name`.
std::pair<H5L_type_t, std::string> link_of(hid_t loc, const char* name) {
  H5L_info_t info;
  REQUIRE(H5Lget_info(loc, name, &info, H5P_DEFAULT) >= 0);
  std::string value(info.u.val_size, '\0');
  if (info.type != H5L_TYPE_HARD) REQUIRE(H5Lget_val(loc, name, value.data(), value.size(), H5P_DEFAULT) >= 0);
  if (info.type == H5L_TYPE_EXTERNAL) {
    unsigned flags = 0;
    const char *file = nullptr, *object = nullptr;
    REQUIRE(H5Lunpack_elink_val(value.data(), value.size(), &flags, &file, &object) >= 0);
    return {info.type, std::string(file) + ":" + object};
  }
  return {info.type, value.substr(0, value.find('\0'))};
}

}  // namespace

TEST_CASE("store seal: files without a seal get one with their contents and hard links kept while damaged ones stay as they are",
          "[cli][store]") {
  TempDir tmp;
  const std::string exp = tmp.path("run/exp/abc123");
  fs::create_directories(exp + "/ckpt");
  const std::string store = exp + "/store.h5", notes(3000, 'x');
  {
    core::ExperimentStore st =
        core::ExperimentStore::create(store, {"abc123", "ratio=0.125", "demo", "[model]\nd_model = 8\n"});
    for (int64_t i = 1; i <= 30; ++i) st.append_metric("train_loss", i, 4.0 / static_cast<double>(i));
    st.set_scalar("bleu/test", 27.25);
    st.set_text("notes", notes);
    st.commit();
  }
  const core::StoreSnapshot want = core::ExperimentStore::read(store);
  // A checkpoint-like file with nested groups, attributes of every kind on
  // its root, and a second name (a sweep's shared training hard-links them).
  const std::string ckpt = exp + "/ckpt/step_00000100.h5", shared = tmp.path("run/exp/def456.h5");
  {
    h5::File f = h5::File::create(ckpt);
    h5::Group root = f.root();
    root.set_attr("format", "mambamt-checkpoint");
    root.set_attr("step", int64_t{100});
    root.set_attr("loss", 1.5);
    root.set_attr("names", std::vector<std::string>{"a", "bb", ""});
    root.set_attr("scales", std::vector<double>{0.5, -2.0});
    h5::Group layer = root.create_group("model/layers/0");
    layer.write_doubles("weight", {1, 2, 3, 4, 5, 6}, {2, 3}).set_attr("dtype", "float32");
    root.write_strings("order", {"model/layers/0/weight"});
    // The weight under a second name (tied weights), a soft and an external link.
    REQUIRE(H5Lcreate_hard(root.id(), "model/layers/0/weight", root.id(), "tied", H5P_DEFAULT, H5P_DEFAULT) >= 0);
    REQUIRE(H5Lcreate_soft("/model/layers/0/weight", root.id(), "latest", H5P_DEFAULT, H5P_DEFAULT) >= 0);
    REQUIRE(H5Lcreate_external("other.h5", "/x", root.id(), "elsewhere", H5P_DEFAULT, H5P_DEFAULT) >= 0);
    f.close();
  }
  fs::create_hard_link(ckpt, shared);
  // Without their seals, as h5py writes files.
  for (const std::string& p : {store, ckpt}) {
    write_text(p, read_text(p).substr(h5::kSealBytes));
    fs::permissions(p, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  }
  const std::string legacy_store = read_text(store), legacy_ckpt = read_text(ckpt);
  const ino_t ckpt_ino = stat_of(ckpt).ino;
  REQUIRE(stat_of(shared).ino == ckpt_ino);
  const std::string run = tmp.path("run"), bin = mambamt_binary() + " store seal ";

  // --check writes nothing and lists the files without a seal (the two names of one file once).
  CommandResult check = run_shell(bin + "--check " + run);
  INFO(check.output);
  CHECK(check.code == 1);
  CHECK(check.output.find(store + ": no seal\n") != std::string::npos);
  CHECK(check.output.find(ckpt + " (and its 1 other hard link(s)): no seal\n") != std::string::npos);  // first by name
  CHECK(check.output.find("store seal " + run + ": 2 file(s), 0 sealed already, 2 not (listed above)") !=
        std::string::npos);
  CHECK(read_text(store) == legacy_store);
  CHECK(read_text(ckpt) == legacy_ckpt);
  CHECK(run_shell(bin + "--check --force " + run).code == 2);

  CommandResult sealed = run_shell(bin + run);
  INFO(sealed.output);
  CHECK(sealed.code == 0);
  CHECK(sealed.output.find(store + ": sealed (it had no seal)\n") != std::string::npos);
  CHECK(sealed.output.find("2 sealed now (1 more hard links), 0 left alone") != std::string::npos);
  CHECK(starts_sealed(store));
  CHECK(starts_sealed(ckpt));
  // Read through the seal now, with the same contents.
  const core::StoreSnapshot got = core::ExperimentStore::read(store);
  CHECK(got.experiment_id == want.experiment_id);
  CHECK(got.name == want.name);
  CHECK(got.config == want.config);
  CHECK(got.scalars == want.scalars);
  CHECK(got.texts == want.texts);
  REQUIRE(got.metrics.at("train_loss").size() == 30);
  CHECK(got.metrics.at("train_loss")[29].value == want.metrics.at("train_loss")[29].value);
  CHECK(got.status.state == want.status.state);
  {
    h5::File f = h5::File::open(ckpt);
    h5::Group root = f.root();
    CHECK(root.attr_string("format") == "mambamt-checkpoint");
    CHECK(root.attr_int("step") == 100);
    CHECK(root.attr_double("loss") == 1.5);
    CHECK(root.attr_strings("names") == std::vector<std::string>{"a", "bb", ""});
    CHECK(root.attr_doubles("scales") == std::vector<double>{0.5, -2.0});
    h5::Dataset w = root.group("model/layers/0").dataset("weight");
    CHECK(w.shape() == std::vector<uint64_t>{2, 3});
    CHECK(w.read_doubles() == std::vector<double>{1, 2, 3, 4, 5, 6});
    CHECK(w.attr_string("dtype") == "float32");
    CHECK(root.dataset("order").read_strings() == std::vector<std::string>{"model/layers/0/weight"});
    // Still one weight under two names, and the links still links.
    CHECK(hard_links(root.id(), "tied") == 2);
    CHECK(root.dataset("tied").read_doubles() == std::vector<double>{1, 2, 3, 4, 5, 6});
    CHECK(link_of(root.id(), "latest") == std::pair{H5L_TYPE_SOFT, std::string("/model/layers/0/weight")});
    CHECK(link_of(root.id(), "elsewhere") == std::pair{H5L_TYPE_EXTERNAL, std::string("other.h5:/x")});
    CHECK(link_of(root.id(), "tied").first == H5L_TYPE_HARD);
    CHECK(root.children() == std::vector<std::string>{"elsewhere", "latest", "model", "order", "tied"});  // no scratch group left
  }
  // One file still under both names, a new one, with the old permissions.
  CHECK(stat_of(ckpt).ino == stat_of(shared).ino);
  CHECK(stat_of(ckpt).ino != ckpt_ino);
  CHECK(stat_of(ckpt).links == 2);
  CHECK(stat_of(store).mode == 0640);
  CHECK(h5::open_object_count() == 0);

  // Sealed files are not touched again.
  const std::string sealed_store = read_text(store);
  const ino_t store_ino = stat_of(store).ino;
  CommandResult again = run_shell(bin + run);
  CHECK(again.code == 0);
  CHECK(again.output.find("2 sealed already, 0 sealed now, 0 left alone") != std::string::npos);
  CHECK(stat_of(store).ino == store_ino);
  CHECK(read_text(store) == sealed_store);

  // A sealed file changed since (as an h5py edit in place does) is left
  // alone unless --force says the change is wanted.
  const size_t x = sealed_store.find(notes);
  REQUIRE(x != std::string::npos);
  std::string edited = sealed_store;
  edited[x + 10] = 'y';
  write_text(store, edited);
  CommandResult refused = run_shell(bin + store);
  INFO(refused.output);
  CHECK(refused.code == 1);
  CHECK(refused.output.find(store + ": left alone: damaged: its bytes changed since they were written") !=
        std::string::npos);
  CHECK(refused.output.find("; --force seals it as it is now") != std::string::npos);
  CHECK(read_text(store) == edited);
  CommandResult forced = run_shell(bin + "--force " + store);
  INFO(forced.output);
  CHECK(forced.code == 0);
  CHECK(forced.output.find(store + ": sealed as it is now (damaged: its bytes changed") != std::string::npos);
  CHECK(core::ExperimentStore::read(store).texts.at("notes") == std::string(10, 'x') + "y" + std::string(2989, 'x'));

  // A file with another program's user block (as h5jam writes one) and a
  // file whose writer failed before it sealed it: left alone, and sealed
  // as they are with --force (the other block dropped).
  const std::string jammed = tmp.path("jammed.h5"), half = tmp.path("half.h5");
  std::string block = "written by another tool\n";
  block.resize(h5::kSealBytes, ' ');
  write_text(jammed, block + legacy_store);
  try {
    h5::File f = h5::File::create(half);
    f.root().set_attr("format", "mambamt-store");
    throw std::runtime_error("writer failed");
  } catch (const std::runtime_error&) {
  }
  for (const std::string& p : {jammed, half}) {
    const std::string bytes = read_text(p);
    CommandResult alone = run_shell(bin + p);
    INFO(alone.output);
    CHECK(alone.code == 1);
    const std::string why = p == jammed ? "its user block is another program's" : "never sealed: the program writing";
    CHECK(alone.output.find(p + ": left alone: " + why) != std::string::npos);
    CHECK(read_text(p) == bytes);
    CommandResult sealed_now = run_shell(bin + "--force " + p);
    INFO(sealed_now.output);
    CHECK(sealed_now.code == 0);
    CHECK(h5::check_seal(p).state == h5::SealState::holds);
  }
  CHECK(core::ExperimentStore::read(jammed).texts == want.texts);
  CHECK(h5::File::open(half).root().attr_string("format") == "mambamt-store");
  CHECK(h5::open_object_count() == 0);

  // Files HDF5 cannot read, or that are no HDF5, stay as they are, --force or not.
  const std::string cut = tmp.path("run/cut.h5"), text = tmp.path("run/notes.h5");
  write_text(cut, legacy_store.substr(0, legacy_store.size() / 2));
  write_text(text, "not hdf5\n");
  CommandResult left = run_shell(bin + "--force " + run);
  INFO(left.output);
  CHECK(left.code == 1);
  CHECK(left.output.find(text + ": left alone: not an HDF5 file\n") != std::string::npos);
  CHECK(left.output.find(cut + ": left alone: cannot open HDF5 file: ") != std::string::npos);
  CHECK(left.output.find("store seal " + run + ": 4 file(s), 2 sealed already, 0 sealed now, 2 left alone") !=
        std::string::npos);
  CHECK(read_text(cut) == legacy_store.substr(0, legacy_store.size() / 2));
  CHECK(read_text(text) == "not hdf5\n");
  for (const auto& e : fs::directory_iterator(tmp.path("run")))
    CHECK(e.path().filename().string().find(".tmp.") == std::string::npos);  // no copy left behind

  CommandResult missing = run_shell(bin + tmp.path("nonesuch"));
  CHECK(missing.code != 0);
  CHECK(missing.output.find(tmp.path("nonesuch") + ": no such file or directory") != std::string::npos);
}
