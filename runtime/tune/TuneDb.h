// The autotune cache (issue 15): a SQLite database of tuning results that
// persists across runs, is safe under concurrent processes (WAL journal, a
// busy timeout) and can be shared (export/import). An entry is keyed by
// what makes a measurement valid: the kernel's content hash, the shape
// bucket, the dtype, the device (name, compute capability, SM count or CPU
// model and threads), the library versions that run it and the tensorc
// version. It stores the winner and every candidate's time or rejection
// reason, with when and where it was measured.
//
// Location: the constructor's argument, else $TENSORC_TUNE_DB, else
// $XDG_CACHE_HOME/tensorc/autotune.sqlite, else
// $HOME/.cache/tensorc/autotune.sqlite, else
// $TMPDIR/tensorc-<uid>/autotune.sqlite (a folder of the user's own, 0700).
// What the path names is checked before SQLite opens it (TuneDbFile.h):
// anything but a missing file, an empty file or a tensorc autotune database
// is an error naming it, left as it is. A database SQLite finds damaged
// (a regular file with SQLite's header) is moved aside to
// `<path>.damaged-<unix time>` and a fresh database is made: never a crash,
// never a wrong choice. docs/autotune.md documents the schema.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tensorc::tune {

struct TuneKey {
  std::string kernel;         // content hash of the kernel (hex)
  std::string bucket;         // shape bucket, e.g. "rows=2^10,cols=2^12"
  std::string dtype;          // e.g. "f32"
  std::string device;         // e.g. "NVIDIA H100 80GB HBM3 sm_90 132 SMs"
  std::string versions;       // driver / NVRTC / cuBLASLt versions
  std::string tensorcVersion; // the tensorc that measured it
  bool operator==(const TuneKey &o) const {
    return kernel == o.kernel && bucket == o.bucket && dtype == o.dtype && device == o.device &&
           versions == o.versions && tensorcVersion == o.tensorcVersion;
  }
};

struct TuneCandidate {
  std::string name;     // the variant, e.g. "b256_l32"
  double microseconds = 0; // median time (0 when rejected before timing)
  std::string rejected; // why it may not win (wrong output, failed launch); empty: valid
};

struct TuneEntry {
  TuneKey key;
  std::string label;  // the step or kernel it tuned, for people
  std::string winner; // a candidate's name
  std::vector<TuneCandidate> candidates;
  int64_t measuredAt = 0; // unix seconds
  std::string host;       // the machine's name
  int64_t hits = 0;       // lookups that found it
  // The winner's time (0 if it is not among the candidates).
  double winnerMicroseconds() const;
};

// Which entries a query or a deletion means; empty fields match all.
struct TuneFilter {
  std::string kernel;  // a prefix of the hash or a substring of the label
  std::string device;  // a substring of the device
  std::string tensorcVersion;
  int64_t olderThan = 0; // unix seconds: measured before (0: any)
  int64_t newerThan = 0; // measured at or after (0: any)
  bool matches(const TuneEntry &e) const;
};

class TuneDb {
public:
  static std::string defaultPath();
  // Opens the database, creating it (and its folder) if missing; moves a
  // damaged one aside. Throws Error when SQLite is unavailable, the path is
  // not a tensorc autotune database (a device, a folder, another file or
  // database), or it cannot be opened or created (permissions, a newer
  // schema).
  explicit TuneDb(std::string path = "");
  ~TuneDb();
  const std::string &path() const { return path_; }
  // Where a damaged database was moved on open ("" if it was not).
  const std::string &movedAside() const { return movedAside_; }

  // The entry of `key`, counting a hit.
  std::optional<TuneEntry> lookup(const TuneKey &key);
  // Inserts or replaces the entry of its key.
  void store(const TuneEntry &entry);
  std::vector<TuneEntry> list(const TuneFilter &filter = {});
  // Deletes the matching entries; returns how many.
  size_t remove(const TuneFilter &filter);
  // Deletes the entry of `key`; whether there was one.
  bool erase(const TuneKey &key);
  // Database size in bytes (the main file and its WAL).
  uint64_t bytes() const;

private:
  // Opens and checks the database; creates the tables when it has none (a
  // new or empty database holds nothing of anyone's). Throws
  // sqlite::CorruptError for damage, Error otherwise.
  void open();
  // Checks that the open database is tensorc's (`fresh`: it has no tables
  // yet); throws Error naming what else it holds.
  void checkIsTuneCache(bool &fresh);
  std::string path_, movedAside_;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The portable file of `tensorc-tune export` (JSON, docs/autotune.md).
std::string exportJson(const std::vector<TuneEntry> &entries);
// Parses an export file; throws Error naming `where` and the problem.
std::vector<TuneEntry> parseExport(const std::string &text, const std::string &where);

} // namespace tensorc::tune
