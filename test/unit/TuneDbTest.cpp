// The autotune cache's database (runtime/tune/TuneDb): entries round-trip,
// lookups count hits, filters select, a damaged database is moved aside and
// rebuilt while anything else (a user's file, a device, a folder, another
// program's database, a damaged one behind a link) is refused and left as it
// is, the last-resort folder is the user's own, a newer schema is refused and kept, two connections (processes
// share the file the same way) see each other's writes, and export files
// parse or are refused with a reason.
#include "ir/core/Error.h"
#include "runtime/tune/Sqlite.h"
#include "runtime/tune/TuneDb.h"
#include "runtime/tune/TuneDbFile.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <unistd.h>

namespace fs = std::filesystem;
using namespace tensorc;
using namespace tensorc::tune;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("tensorc-tunedb-" + std::to_string(::getpid()) + "-" +
                                        std::to_string(reinterpret_cast<uintptr_t>(this)));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

TuneEntry entry(const std::string &kernel, const std::string &device, double winnerUs, int64_t at = 1000) {
  TuneEntry e;
  e.key = {kernel, "rows=2^10", "f32", device, "nvrtc 13.0", "0.1.0"};
  e.label = "softmax k3";
  e.winner = "b256_l32";
  e.candidates = {{"b256_i1", winnerUs * 3, ""}, {"b256_l32", winnerUs, ""}, {"b512_l512", 0, "wrong output: 1e-1"}};
  e.measuredAt = at;
  e.host = "test";
  return e;
}

} // namespace

TEST(TuneDb, StoresLooksUpAndFilters) {
  if (!sqlite::available())
    GTEST_SKIP() << sqlite::unavailableReason();
  TempDir dir;
  std::string path = (dir.path / "sub" / "tune.sqlite").string();
  TuneDb db(path);
  EXPECT_TRUE(fs::exists(path));
  TuneEntry a = entry("aaaa", "H100", 10), b = entry("bbbb", "H200", 7, 5000);
  db.store(a);
  db.store(b);
  std::optional<TuneEntry> got = db.lookup(a.key);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->winner, "b256_l32");
  EXPECT_EQ(got->candidates.size(), 3u);
  EXPECT_EQ(got->candidates[2].rejected, "wrong output: 1e-1");
  EXPECT_DOUBLE_EQ(got->winnerMicroseconds(), 10);
  EXPECT_EQ(db.lookup(a.key)->hits, 2);
  TuneKey other = a.key;
  other.bucket = "rows=2^11";
  EXPECT_FALSE(db.lookup(other).has_value());

  EXPECT_EQ(db.list().size(), 2u);
  EXPECT_EQ(db.list({"", "H200", "", 0, 0}).size(), 1u);
  EXPECT_EQ(db.list({"aa", "", "", 0, 0}).size(), 1u);
  EXPECT_EQ(db.list({"softmax", "", "", 0, 0}).size(), 2u); // label substring
  EXPECT_EQ(db.list({"", "", "", 2000, 0}).size(), 1u);     // measured before 2000
  EXPECT_EQ(db.list({"", "", "9.9", 0, 0}).size(), 0u);

  // Replacing keeps one entry per key.
  a.winner = "b256_i1";
  db.store(a);
  EXPECT_EQ(db.list().size(), 2u);
  EXPECT_EQ(db.lookup(a.key)->winner, "b256_i1");
  EXPECT_EQ(db.remove({"", "H100", "", 0, 0}), 1u);
  EXPECT_EQ(db.list().size(), 1u);
}

TEST(TuneDb, TwoConnectionsShareTheFile) {
  if (!sqlite::available())
    GTEST_SKIP() << sqlite::unavailableReason();
  TempDir dir;
  std::string path = (dir.path / "tune.sqlite").string();
  TuneDb one(path), two(path);
  one.store(entry("aaaa", "H100", 10));
  EXPECT_TRUE(two.lookup(entry("aaaa", "H100", 10).key).has_value());
  two.store(entry("bbbb", "H100", 10));
  EXPECT_EQ(one.list().size(), 2u);
}

namespace {

// Corrupts pages of a database of 200 entries, its header kept.
void writeTornDatabase(const std::string &path) {
  {
    TuneDb good(path);
    for (int i = 0; i < 200; ++i)
      good.store(entry("k" + std::to_string(i), "H100", i + 1));
  }
  fs::remove(path + "-wal");
  fs::remove(path + "-shm");
  std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
  f.seekp(4096 + 100);
  f << std::string(3 * 4096, '\x5a');
}

std::string errorOf(const std::function<void()> &fn) {
  try {
    fn();
  } catch (const Error &e) {
    return e.what();
  }
  return "";
}

} // namespace

TEST(TuneDb, ADamagedDatabaseIsMovedAsideAndRebuilt) {
  if (!sqlite::available())
    GTEST_SKIP() << sqlite::unavailableReason();
  TempDir dir;
  std::string torn = (dir.path / "torn.sqlite").string();
  writeTornDatabase(torn);
  TuneDb rebuilt(torn);
  EXPECT_NE(rebuilt.movedAside(), "");
  EXPECT_TRUE(fs::exists(rebuilt.movedAside())); // the damaged file is kept
  EXPECT_EQ(rebuilt.list().size(), 0u);
  rebuilt.store(entry("aaaa", "H100", 10));
  EXPECT_EQ(rebuilt.list().size(), 1u);
}

TEST(TuneDb, WhatIsNotADatabaseIsRefusedAndLeftAsItIs) {
  if (!sqlite::available())
    GTEST_SKIP() << sqlite::unavailableReason();
  TempDir dir;
  // A user's file: refused, its bytes and name unchanged, nothing beside it.
  std::string notes = (dir.path / "notes.txt").string();
  {
    std::ofstream f(notes, std::ios::binary);
    f << std::string(4096, 'x');
  }
  EXPECT_NE(errorOf([&] { TuneDb db(notes); }).find("not a SQLite database"), std::string::npos);
  EXPECT_EQ(fs::file_size(notes), 4096u);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator{}), 1);

  // Devices and folders, whatever the user may write to.
  EXPECT_NE(errorOf([] { TuneDb db("/dev/null"); }).find("a character device"), std::string::npos);
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  EXPECT_NE(errorOf([&] { TuneDb db(dir.path.string()); }).find("a directory"), std::string::npos);

  // A damaged database reached through a link is an error, never renamed.
  std::string torn = (dir.path / "torn.sqlite").string(), link = (dir.path / "link.sqlite").string();
  writeTornDatabase(torn);
  fs::create_symlink(torn, link);
  EXPECT_NE(errorOf([&] { TuneDb db(link); }).find("through a symbolic link"), std::string::npos);
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_TRUE(fs::is_regular_file(torn));

  // A database of another program keeps its bytes.
  std::string other = (dir.path / "other.db").string();
  {
    sqlite::Database raw(other, true);
    raw.exec("CREATE TABLE photos (name TEXT); INSERT INTO photos VALUES ('cat');");
  }
  uintmax_t size = fs::file_size(other);
  EXPECT_NE(errorOf([&] { TuneDb db(other); }).find("not a tensorc autotune cache (it has table 'photos')"),
            std::string::npos);
  EXPECT_EQ(fs::file_size(other), size);
}

TEST(TuneDb, TheLastResortFolderIsTheUsersOwn) {
  TempDir dir;
  const char *old = std::getenv("TMPDIR");
  std::string saved = old ? old : "";
  ::setenv("TMPDIR", dir.path.c_str(), 1);
  std::string mine = privateTempDirectory();
  EXPECT_EQ(mine, (dir.path / ("tensorc-" + std::to_string(::geteuid()))).string());
  EXPECT_EQ(fs::status(mine).permissions() & fs::perms::all, fs::perms::owner_all);
  EXPECT_EQ(privateTempDirectory(), mine); // an existing one of ours is used
  fs::permissions(mine, fs::perms::all);
  EXPECT_NE(errorOf([] { privateTempDirectory(); }).find("open to others"), std::string::npos);
  fs::remove(mine);
  fs::create_directory_symlink(dir.path, mine); // planted by someone else
  EXPECT_NE(errorOf([] { privateTempDirectory(); }).find("a symbolic link"), std::string::npos);
  if (old)
    ::setenv("TMPDIR", saved.c_str(), 1);
  else
    ::unsetenv("TMPDIR");
}

TEST(TuneDb, ANewerSchemaIsRefusedAndKept) {
  if (!sqlite::available())
    GTEST_SKIP() << sqlite::unavailableReason();
  TempDir dir;
  std::string path = (dir.path / "tune.sqlite").string();
  {
    sqlite::Database raw(path, true);
    raw.exec("CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);"
             "INSERT INTO meta VALUES ('schema_version', '99');");
  }
  try {
    TuneDb db(path);
    ADD_FAILURE() << "a newer schema was accepted";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("schema 99, made by a newer tensorc"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fs::exists(path));
}

TEST(TuneDb, ExportFilesRoundTripOrAreRefused) {
  std::vector<TuneEntry> es = {entry("aaaa", "H100", 10), entry("bbbb", "H100", 12)};
  std::vector<TuneEntry> back = parseExport(exportJson(es), "x.json");
  ASSERT_EQ(back.size(), 2u);
  EXPECT_TRUE(back[1].key == es[1].key);
  EXPECT_EQ(back[1].candidates[2].rejected, es[1].candidates[2].rejected);
  auto refused = [](const std::string &text, const std::string &want) {
    try {
      parseExport(text, "bad.json");
      ADD_FAILURE() << "accepted: " << text;
    } catch (const Error &e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  refused("{", "bad.json: malformed autotune export");
  refused("{\"format\": \"x\"}", "not a tensorc autotune export");
  refused("{\"format\": \"tensorc-autotune\", \"version\": 2, \"entries\": []}", "export version 2 is not 1");
  std::string text = exportJson({entry("aaaa", "H100", 10)});
  std::string wrongWinner = text;
  wrongWinner.replace(wrongWinner.find("\"winner\": \"b256_l32\""), 20, "\"winner\": \"b512_l512\"");
  refused(wrongWinner, "its winner 'b512_l512' is not one of its valid candidates");
}
