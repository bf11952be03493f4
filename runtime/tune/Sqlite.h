// SQLite, loaded at run time (libsqlite3.so.0, with dlopen): the runtime has
// no link-time dependency on it, so an embedder without SQLite still loads
// the runtime (the autotune cache then says it is unavailable). A thin RAII
// layer: a connection, prepared statements, and errors as tensorc::Error
// naming the database file.
#pragma once

#include "ir/core/Error.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace tensorc::sqlite {

// Whether libsqlite3 could be loaded; otherwise why not.
bool available();
std::string unavailableReason();

struct Api; // the loaded entry points

// SQLITE_BUSY or SQLITE_LOCKED: another connection holds a lock longer than
// the busy timeout, or a read transaction could not become a write one.
// Not damage: the database is fine, the caller may try again.
class BusyError : public Error {
public:
  using Error::Error;
};

// SQLITE_CORRUPT or SQLITE_NOTADB: the file's pages are damaged or its
// header is not SQLite's. The only errors that say the file itself is bad
// (a read-only file, a full disk or a failing trigger do not).
class CorruptError : public Error {
public:
  using Error::Error;
};

class Statement;

class Database {
public:
  // Opens (creating it if `create`) the database at `path`; throws Error.
  Database(const std::string &path, bool create);
  ~Database();
  Database(const Database &) = delete;
  Database &operator=(const Database &) = delete;

  // Runs SQL with no results (several statements allowed); throws Error.
  void exec(const std::string &sql);
  Statement prepare(const std::string &sql);
  int64_t changes() const;
  const std::string &path() const { return path_; }

private:
  friend class Statement;
  // Throws BusyError for SQLite result `rc` SQLITE_BUSY/SQLITE_LOCKED,
  // CorruptError for SQLITE_CORRUPT/SQLITE_NOTADB (any extended code), else
  // Error.
  [[noreturn]] void fail(const std::string &what, int rc) const;
  const Api &api_;
  void *db_ = nullptr;
  std::string path_;
};

class Statement {
public:
  Statement(Statement &&o) noexcept;
  ~Statement();
  // Parameters count from 1, as in SQLite.
  Statement &bind(int index, const std::string &text);
  Statement &bind(int index, int64_t value);
  Statement &bind(int index, double value);
  // Advances to the next row: false when done; throws Error.
  bool step();
  std::string text(int column) const;
  int64_t integer(int column) const;
  double real(int column) const;
  bool isNull(int column) const;
  // Runs to completion (statements without rows).
  void run();
  // Resets for another run with new bindings.
  void reset();

private:
  friend class Database;
  Statement(const Database &db, void *stmt) : db_(&db), stmt_(stmt) {}
  const Database *db_;
  void *stmt_;
};

} // namespace tensorc::sqlite
