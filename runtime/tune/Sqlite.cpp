#include "runtime/tune/Sqlite.h"

#include "ir/core/Error.h"

#include "runtime/host/DynamicLibrary.h"

namespace tensorc::sqlite {

// The entry points of sqlite3.h used here (C ABI, stable since 3.7).
struct Api {
  int (*open_v2)(const char *, void **, int, const char *);
  int (*close_v2)(void *);
  int (*exec)(void *, const char *, void *, void *, char **);
  int (*prepare_v2)(void *, const char *, int, void **, const char **);
  int (*bind_text)(void *, int, const char *, int, void (*)(void *));
  int (*bind_int64)(void *, int, long long);
  int (*bind_double)(void *, int, double);
  int (*step)(void *);
  const unsigned char *(*column_text)(void *, int);
  int (*column_bytes)(void *, int);
  long long (*column_int64)(void *, int);
  double (*column_double)(void *, int);
  int (*column_type)(void *, int);
  int (*reset)(void *);
  int (*finalize)(void *);
  const char *(*errmsg)(void *);
  int (*busy_timeout)(void *, int);
  int (*changes)(void *);
  void (*free)(void *);
};

namespace {

constexpr int kOk = 0, kBusy = 5, kLocked = 6, kCorrupt = 11, kNotADatabase = 26, kRow = 100, kDone = 101, kNull = 5;
constexpr int kOpenReadWrite = 0x2, kOpenCreate = 0x4, kOpenFullMutex = 0x10000;
// SQLITE_TRANSIENT: SQLite copies bound text.
void (*const kTransient)(void *) = reinterpret_cast<void (*)(void *)>(-1);

struct Loaded {
  Api api{};
  std::string error;
};

const Loaded &loaded() {
  static const Loaded l = [] {
    Loaded r;
    std::string tried;
    DynamicLibrary lib = DynamicLibrary::open({"libsqlite3.so.0"}, false, tried);
    if (!lib) {
      r.error = "libsqlite3.so.0 cannot be loaded (" + lib.error() + ")";
      return r;
    }
    auto get = [&](auto &fn, const char *name) { lib.bind(fn, name); };
    Api &a = r.api;
    get(a.open_v2, "sqlite3_open_v2");
    get(a.close_v2, "sqlite3_close_v2");
    get(a.exec, "sqlite3_exec");
    get(a.prepare_v2, "sqlite3_prepare_v2");
    get(a.bind_text, "sqlite3_bind_text");
    get(a.bind_int64, "sqlite3_bind_int64");
    get(a.bind_double, "sqlite3_bind_double");
    get(a.step, "sqlite3_step");
    get(a.column_text, "sqlite3_column_text");
    get(a.column_bytes, "sqlite3_column_bytes");
    get(a.column_int64, "sqlite3_column_int64");
    get(a.column_double, "sqlite3_column_double");
    get(a.column_type, "sqlite3_column_type");
    get(a.reset, "sqlite3_reset");
    get(a.finalize, "sqlite3_finalize");
    get(a.errmsg, "sqlite3_errmsg");
    get(a.busy_timeout, "sqlite3_busy_timeout");
    get(a.changes, "sqlite3_changes");
    get(a.free, "sqlite3_free");
    if (!lib.missing().empty()) {
      r.error = "libsqlite3.so.0 lacks " + lib.missing();
      r.api = Api{};
    }
    return r;
  }();
  return l;
}

const Api &api() {
  check(available(), "autotune cache: SQLite is unavailable: " + unavailableReason());
  return loaded().api;
}

} // namespace

bool available() { return loaded().error.empty(); }
std::string unavailableReason() { return loaded().error; }

Database::Database(const std::string &path, bool create) : api_(api()), path_(path) {
  int flags = kOpenReadWrite | kOpenFullMutex | (create ? kOpenCreate : 0);
  int rc = api_.open_v2(path.c_str(), &db_, flags, nullptr);
  if (rc != kOk) {
    std::string why = db_ ? api_.errmsg(db_) : "out of memory";
    if (db_)
      api_.close_v2(db_);
    db_ = nullptr;
    tensorc::fail(path + ": cannot open the database: " + why);
  }
  // Concurrent processes: wait up to 10 s for a writer instead of failing.
  api_.busy_timeout(db_, 10000);
}

Database::~Database() {
  if (db_)
    api_.close_v2(db_);
}

namespace {
// BusyError for SQLITE_BUSY/SQLITE_LOCKED, CorruptError for
// SQLITE_CORRUPT/SQLITE_NOTADB (any extended code), else Error.
[[noreturn]] void throwFor(int rc, const std::string &message) {
  if ((rc & 0xff) == kBusy || (rc & 0xff) == kLocked)
    throw BusyError(message);
  if ((rc & 0xff) == kCorrupt || (rc & 0xff) == kNotADatabase)
    throw CorruptError(message);
  tensorc::fail(message);
}
} // namespace

void Database::fail(const std::string &what, int rc) const {
  throwFor(rc, path_ + ": " + what + ": " + api_.errmsg(db_));
}

void Database::exec(const std::string &sql) {
  char *error = nullptr;
  if (int rc = api_.exec(db_, sql.c_str(), nullptr, nullptr, &error); rc != kOk) {
    std::string why = error ? error : api_.errmsg(db_);
    api_.free(error);
    throwFor(rc, path_ + ": " + why);
  }
}

Statement Database::prepare(const std::string &sql) {
  void *stmt = nullptr;
  if (int rc = api_.prepare_v2(db_, sql.c_str(), int(sql.size()), &stmt, nullptr); rc != kOk)
    fail("cannot prepare '" + sql.substr(0, 40) + "'", rc);
  return Statement(*this, stmt);
}

int64_t Database::changes() const { return api_.changes(db_); }

Statement::Statement(Statement &&o) noexcept : db_(o.db_), stmt_(o.stmt_) { o.stmt_ = nullptr; }

Statement::~Statement() {
  if (stmt_)
    db_->api_.finalize(stmt_);
}

Statement &Statement::bind(int index, const std::string &text) {
  if (int rc = db_->api_.bind_text(stmt_, index, text.data(), int(text.size()), kTransient); rc != kOk)
    db_->fail("cannot bind a parameter", rc);
  return *this;
}

Statement &Statement::bind(int index, int64_t value) {
  if (int rc = db_->api_.bind_int64(stmt_, index, value); rc != kOk)
    db_->fail("cannot bind a parameter", rc);
  return *this;
}

Statement &Statement::bind(int index, double value) {
  if (int rc = db_->api_.bind_double(stmt_, index, value); rc != kOk)
    db_->fail("cannot bind a parameter", rc);
  return *this;
}

bool Statement::step() {
  int rc = db_->api_.step(stmt_);
  if (rc == kRow)
    return true;
  if (rc == kDone)
    return false;
  db_->fail("query failed", rc);
}

std::string Statement::text(int column) const {
  const unsigned char *p = db_->api_.column_text(stmt_, column);
  return p ? std::string(reinterpret_cast<const char *>(p), size_t(db_->api_.column_bytes(stmt_, column)))
           : std::string();
}

int64_t Statement::integer(int column) const { return db_->api_.column_int64(stmt_, column); }
double Statement::real(int column) const { return db_->api_.column_double(stmt_, column); }
bool Statement::isNull(int column) const { return db_->api_.column_type(stmt_, column) == kNull; }

void Statement::run() {
  while (step()) {
  }
}

void Statement::reset() { db_->api_.reset(stmt_); }

} // namespace tensorc::sqlite
