#include "runtime/tune/TuneDb.h"

#include "ir/core/Error.h"
#include "runtime/host/CacheHome.h"
#include "runtime/tune/Sqlite.h"
#include "runtime/tune/TuneDbFile.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace tensorc::tune {

using json = nlohmann::json;

namespace {

// Bumped when the tables change; a database of a newer schema is refused
// (not moved aside: a newer tensorc may still use it).
constexpr int64_t kSchemaVersion = 1;

const char *kSchema = R"sql(
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS entries (
  kernel TEXT NOT NULL, bucket TEXT NOT NULL, dtype TEXT NOT NULL, device TEXT NOT NULL,
  versions TEXT NOT NULL, tensorc_version TEXT NOT NULL,
  label TEXT NOT NULL, winner TEXT NOT NULL, candidates TEXT NOT NULL,
  measured_at INTEGER NOT NULL, host TEXT NOT NULL, hits INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (kernel, bucket, dtype, device, versions, tensorc_version));
)sql";

const char *kColumns = "kernel, bucket, dtype, device, versions, tensorc_version, label, winner, candidates, "
                       "measured_at, host, hits";

json candidatesJson(const std::vector<TuneCandidate> &cs) {
  json arr = json::array();
  for (const TuneCandidate &c : cs) {
    json j = {{"name", c.name}, {"us", c.microseconds}};
    if (!c.rejected.empty())
      j["rejected"] = c.rejected;
    arr.push_back(j);
  }
  return arr;
}

std::vector<TuneCandidate> parseCandidates(const json &arr) {
  check(arr.is_array(), "candidates are not a list");
  std::vector<TuneCandidate> cs;
  for (const json &j : arr)
    cs.push_back({j.at("name").get<std::string>(), j.at("us").get<double>(), j.value("rejected", "")});
  return cs;
}

TuneEntry readRow(const sqlite::Statement &s) {
  TuneEntry e;
  e.key = {s.text(0), s.text(1), s.text(2), s.text(3), s.text(4), s.text(5)};
  e.label = s.text(6);
  e.winner = s.text(7);
  e.candidates = parseCandidates(json::parse(s.text(8)));
  e.measuredAt = s.integer(9);
  e.host = s.text(10);
  e.hits = s.integer(11);
  return e;
}

sqlite::Statement &bindKey(sqlite::Statement &s, const TuneKey &k) {
  return s.bind(1, k.kernel).bind(2, k.bucket).bind(3, k.dtype).bind(4, k.device).bind(5, k.versions)
      .bind(6, k.tensorcVersion);
}

const char *kKeyWhere = "kernel = ?1 AND bucket = ?2 AND dtype = ?3 AND device = ?4 AND versions = ?5 AND "
                        "tensorc_version = ?6";

} // namespace

double TuneEntry::winnerMicroseconds() const {
  for (const TuneCandidate &c : candidates)
    if (c.name == winner)
      return c.microseconds;
  return 0;
}

bool TuneFilter::matches(const TuneEntry &e) const {
  if (!kernel.empty() && e.key.kernel.rfind(kernel, 0) != 0 && e.label.find(kernel) == std::string::npos)
    return false;
  if (!device.empty() && e.key.device.find(device) == std::string::npos)
    return false;
  if (!tensorcVersion.empty() && e.key.tensorcVersion != tensorcVersion)
    return false;
  if (olderThan && e.measuredAt >= olderThan)
    return false;
  return !newerThan || e.measuredAt >= newerThan;
}

struct TuneDb::Impl {
  std::unique_ptr<sqlite::Database> db;
};

namespace {

// Opening is one process at a time (an exclusive flock on `<db>.lock`):
// processes creating the same new database at once raced on its first
// pages and its switch to WAL, and one took the half-made file for a
// damaged one and moved it aside under the others (8 processes tuning into
// a fresh database: "database is locked", "disk I/O error"). Where the lock
// file cannot be made (a read-only folder), opening goes unlocked.
class OpenLock {
public:
  explicit OpenLock(const std::string &dbPath)
      : fd_(::open((dbPath + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644)) {
    // Only a regular file is a lock: something else under that name is
    // left alone and opening goes unlocked.
    struct stat st;
    if (fd_ >= 0 && (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode))) {
      ::close(fd_);
      fd_ = -1;
    }
    if (fd_ >= 0)
      while (::flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
      }
  }
  ~OpenLock() {
    if (fd_ >= 0)
      ::close(fd_); // releases the lock
  }
  OpenLock(const OpenLock &) = delete;
  OpenLock &operator=(const OpenLock &) = delete;

private:
  int fd_;
};

} // namespace

std::string TuneDb::defaultPath() {
  if (const char *d = std::getenv("TENSORC_TUNE_DB"); d && *d)
    return d;
  if (std::optional<std::string> home = tensorcCacheHome())
    return *home + "/autotune.sqlite";
  return privateTempDirectory() + "/autotune.sqlite";
}

TuneDb::TuneDb(std::string path) : impl_(new Impl) {
  path_ = path.empty() ? defaultPath() : std::move(path);
  check(sqlite::available(), path_ + ": the autotune cache needs SQLite: " + sqlite::unavailableReason());
  // Refuse what is not a database before anything is created beside it.
  inspectTuneDbFile(path_);
  std::filesystem::path parent = std::filesystem::path(path_).parent_path();
  std::error_code ec;
  if (!parent.empty())
    std::filesystem::create_directories(parent, ec);
  OpenLock lock(path_);
  inspectTuneDbFile(path_); // again, under the lock
  try {
    open();
  } catch (const sqlite::CorruptError &e) {
    // Only SQLite's own verdict that the file is damaged moves it aside, and
    // only a regular file with SQLite's header named directly: a read-only
    // file, a foreign database, a failing trigger or a full disk are errors
    // that leave the file as it is.
    impl_->db.reset();
    check(inspectTuneDbFile(path_).mayMoveAside(), path_ + ": damaged autotune cache (" + e.what() +
                                   "); it is reached through a symbolic link, so tensorc leaves it as it is");
    movedAside_ = path_ + ".damaged-" +
                  std::to_string(std::chrono::duration_cast<std::chrono::seconds>(
                                     std::chrono::system_clock::now().time_since_epoch())
                                     .count());
    std::filesystem::rename(path_, movedAside_, ec);
    check(!ec, path_ + ": damaged autotune cache (" + e.what() + ") cannot be moved aside: " + ec.message());
    for (const char *suffix : {"-wal", "-shm"})
      if (std::filesystem::is_regular_file(std::filesystem::symlink_status(path_ + suffix, ec)))
        std::filesystem::remove(path_ + suffix, ec);
    open();
  }
}

TuneDb::~TuneDb() = default;

void TuneDb::checkIsTuneCache(bool &fresh) {
  sqlite::Database &db = *impl_->db;
  // A database tensorc made holds its two tables and their primary-key
  // indexes, nothing else: another program's database, or one with views
  // or triggers (a view named `entries` that recurses hung every query), is
  // refused, never written to.
  const std::string foreign = path_ + ": a SQLite database but not a tensorc autotune cache (";
  const std::string leftAlone = "); tensorc leaves it as it is (name a new file)";
  bool meta = false, entries = false;
  std::string stranger; // the first object tensorc does not make
  {
    sqlite::Statement objects = db.prepare("SELECT type, name FROM sqlite_master");
    while (objects.step()) {
      std::string type = objects.text(0), name = objects.text(1);
      if (type == "table" && name == "meta")
        meta = true;
      else if (type == "table" && name == "entries")
        entries = true;
      else if (!(type == "index" && name.rfind("sqlite_autoindex_", 0) == 0) && stranger.empty())
        stranger = type + " '" + name + "'";
    }
  }
  fresh = !meta && !entries && stranger.empty();
  if (fresh)
    return;
  check(meta, foreign + (stranger.empty() ? "it lacks the table 'meta'" : "it has " + stranger) + leftAlone);
  sqlite::Statement v = db.prepare("SELECT value FROM meta WHERE name = 'schema_version'");
  check(v.step(), foreign + "its table 'meta' has no schema_version" + leftAlone);
  int64_t version = std::atoll(v.text(0).c_str());
  // A newer tensorc's database may hold other tables: its version says so
  // before its tables are judged.
  check(version <= kSchemaVersion, path_ + ": autotune cache of schema " + std::to_string(version) +
                                       ", made by a newer tensorc (this one reads " +
                                       std::to_string(kSchemaVersion) + ")");
  check(version >= 1, foreign + "bad schema version '" + v.text(0) + "'" + leftAlone);
  check(stranger.empty(), foreign + "it has " + stranger + leftAlone);
  check(entries, foreign + "it lacks the table 'entries'" + leftAlone);
  std::string columns;
  sqlite::Statement info = db.prepare("PRAGMA table_info(entries)");
  while (info.step())
    columns += (columns.empty() ? "" : ", ") + info.text(1);
  check(columns == kColumns, foreign + "its table 'entries' has the columns " + columns + leftAlone);
}

void TuneDb::open() {
  impl_->db = std::make_unique<sqlite::Database>(path_, true);
  sqlite::Database &db = *impl_->db;
  // The integrity check reads every page: CorruptError on damage (or on a
  // file that is not a database). Nothing is written before the schema is
  // known to be tensorc's.
  {
    sqlite::Statement quick = db.prepare("PRAGMA quick_check");
    if (!quick.step() || quick.text(0) != "ok")
      throw sqlite::CorruptError(path_ + ": SQLite's integrity check failed");
  }
  bool fresh = false;
  checkIsTuneCache(fresh);
  db.exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;");
  if (fresh) {
    db.exec(kSchema);
    db.prepare("INSERT OR IGNORE INTO meta (name, value) VALUES ('schema_version', ?1)")
        .bind(1, std::to_string(kSchemaVersion))
        .run();
  }
}

std::optional<TuneEntry> TuneDb::lookup(const TuneKey &key) {
  sqlite::Database &db = *impl_->db;
  // Read and count the hit in one transaction that takes the write lock at
  // its start (waiting for it, up to the busy timeout): a read transaction
  // that later writes fails at once with SQLITE_BUSY when another process
  // wrote meanwhile, without waiting.
  db.exec("BEGIN IMMEDIATE");
  try {
    std::optional<TuneEntry> e;
    bool found = false, unreadable = false;
    {
      sqlite::Statement s = db.prepare(std::string("SELECT ") + kColumns + " FROM entries WHERE " + kKeyWhere);
      bindKey(s, key);
      if (s.step()) {
        found = true;
        try {
          e = readRow(s);
        } catch (const std::exception &) {
          unreadable = true;
        }
      }
    }
    if (unreadable) {
      // An entry that does not parse is never used: drop it.
      sqlite::Statement del = db.prepare(std::string("DELETE FROM entries WHERE ") + kKeyWhere);
      bindKey(del, key).run();
    } else if (found) {
      sqlite::Statement hit = db.prepare(std::string("UPDATE entries SET hits = hits + 1 WHERE ") + kKeyWhere);
      bindKey(hit, key).run();
      ++e->hits;
    }
    db.exec("COMMIT");
    return e;
  } catch (...) {
    try {
      db.exec("ROLLBACK");
    } catch (const std::exception &) {
      // The transaction may already be gone; the first error is the one to report.
    }
    throw;
  }
}

void TuneDb::store(const TuneEntry &e) {
  sqlite::Statement s = impl_->db->prepare(std::string("INSERT OR REPLACE INTO entries (") + kColumns +
                                           ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)");
  bindKey(s, e.key)
      .bind(7, e.label)
      .bind(8, e.winner)
      .bind(9, candidatesJson(e.candidates).dump(-1, ' ', false, json::error_handler_t::replace))
      .bind(10, e.measuredAt)
      .bind(11, e.host)
      .bind(12, e.hits)
      .run();
}

std::vector<TuneEntry> TuneDb::list(const TuneFilter &filter) {
  sqlite::Statement s = impl_->db->prepare(std::string("SELECT ") + kColumns +
                                           " FROM entries ORDER BY label, kernel, bucket, device");
  std::vector<TuneEntry> out;
  while (s.step()) {
    try {
      TuneEntry e = readRow(s);
      if (filter.matches(e))
        out.push_back(std::move(e));
    } catch (const std::exception &) {
      // Unreadable rows are skipped here and dropped by lookup.
    }
  }
  return out;
}

size_t TuneDb::remove(const TuneFilter &filter) {
  size_t n = 0;
  for (const TuneEntry &e : list(filter))
    n += erase(e.key);
  return n;
}

bool TuneDb::erase(const TuneKey &key) {
  sqlite::Statement s = impl_->db->prepare(std::string("DELETE FROM entries WHERE ") + kKeyWhere);
  bindKey(s, key).run();
  return impl_->db->changes() > 0;
}

uint64_t TuneDb::bytes() const {
  uint64_t total = 0;
  std::error_code ec;
  for (const std::string &p : {path_, path_ + "-wal"}) {
    uintmax_t b = std::filesystem::file_size(p, ec);
    if (!ec)
      total += b;
  }
  return total;
}

std::string exportJson(const std::vector<TuneEntry> &entries) {
  json arr = json::array();
  for (const TuneEntry &e : entries)
    arr.push_back({{"kernel", e.key.kernel},
                   {"bucket", e.key.bucket},
                   {"dtype", e.key.dtype},
                   {"device", e.key.device},
                   {"versions", e.key.versions},
                   {"tensorc_version", e.key.tensorcVersion},
                   {"label", e.label},
                   {"winner", e.winner},
                   {"candidates", candidatesJson(e.candidates)},
                   {"measured_at", e.measuredAt},
                   {"host", e.host}});
  // A row's text is whatever the file held (another tool, a damaged disk):
  // bytes that are not UTF-8 are written as U+FFFD, not an exception.
  return json({{"format", "tensorc-autotune"}, {"version", 1}, {"entries", arr}})
             .dump(1, ' ', false, json::error_handler_t::replace) +
         "\n";
}

std::vector<TuneEntry> parseExport(const std::string &text, const std::string &where) {
  std::vector<TuneEntry> out;
  try {
    json m = json::parse(text);
    check(m.is_object() && m.value("format", "") == "tensorc-autotune",
          "not a tensorc autotune export (no \"format\": \"tensorc-autotune\")");
    check(m.at("version") == 1, "export version " + m.at("version").dump() + " is not 1");
    size_t i = 0;
    for (const json &j : m.at("entries")) {
      TuneEntry e;
      e.key = {j.at("kernel").get<std::string>(),   j.at("bucket").get<std::string>(),
               j.at("dtype").get<std::string>(),    j.at("device").get<std::string>(),
               j.at("versions").get<std::string>(), j.at("tensorc_version").get<std::string>()};
      e.label = j.value("label", "");
      e.winner = j.at("winner").get<std::string>();
      e.candidates = parseCandidates(j.at("candidates"));
      e.measuredAt = j.at("measured_at").get<int64_t>();
      e.host = j.value("host", "");
      bool known = false;
      for (const TuneCandidate &c : e.candidates)
        known = known || (c.name == e.winner && c.rejected.empty());
      check(known, "entry " + std::to_string(i) + ": its winner '" + e.winner +
                       "' is not one of its valid candidates");
      check(!e.key.kernel.empty() && !e.key.device.empty(), "entry " + std::to_string(i) + ": no kernel or device");
      out.push_back(std::move(e));
      ++i;
    }
  } catch (const json::exception &e) {
    fail(where + ": malformed autotune export: " + e.what());
  } catch (const Error &e) {
    fail(where + ": " + e.what());
  }
  return out;
}

} // namespace tensorc::tune
