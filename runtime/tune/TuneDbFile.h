// What a path named as the autotune cache is, looked at before SQLite opens
// it. `--tune-db`, TENSORC_TUNE_DB and `tensorc-tune --db` take any path a
// user types: /dev/null, a folder, a FIFO or a user's notes must never be
// opened as a database, let alone moved aside and replaced (as root, an
// earlier tensorc replaced /dev/null with a regular file). Only a regular
// file whose header is SQLite's, named directly (not through a symbolic
// link), may be moved aside when SQLite finds it damaged.
#pragma once

#include <string>

namespace tensorc::tune {

struct TuneDbFile {
  enum class Kind {
    Missing,  // nothing there: SQLite creates it
    Empty,    // a regular file of 0 bytes (SQLite makes it a database)
    Database, // a regular file with SQLite's header
  } kind = Kind::Missing;
  bool throughSymlink = false; // the path is a symbolic link to it
  // Whether a damaged database at this path may be renamed aside: a regular
  // file with SQLite's header, not reached through a link.
  bool mayMoveAside() const { return kind == Kind::Database && !throughSymlink; }
};

// Throws Error naming `path` and what it is when it is anything else: a
// directory, a device, a FIFO, a socket, a link to nothing, an unreadable
// file, or a file that is not a SQLite database. Reads at most its first
// 16 bytes and never opens anything but a regular file.
TuneDbFile inspectTuneDbFile(const std::string &path);

// The folder of the last-resort cache location (no $TENSORC_TUNE_DB, no
// home folder): `$TMPDIR/tensorc-<uid>` (else /tmp), created 0700; an
// existing one must be a real folder owned by this user that no one else
// can enter, or Error (another user could create the name first and hand
// us their database).
std::string privateTempDirectory();

} // namespace tensorc::tune
