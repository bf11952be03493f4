// The on-disk cache of compiled GPU kernels (issue 6). An entry is keyed by
// a SHA-256 of everything that changes the binary (source, GPU
// architecture, compiler version, compile options, tensorc version); it is
// written atomically (temporary file + rename, so concurrent processes never
// see half a file) and carries a checksum of its payload, so a truncated or
// corrupted entry is detected, deleted and rebuilt, never loaded. Failing to
// write the cache (read-only disk) never fails a run.
//
// Directory: the constructor's argument, else $TENSORC_CACHE_DIR, else
// $XDG_CACHE_HOME/tensorc/kernels, else $HOME/.cache/tensorc/kernels (HOME
// from the environment, else the password database), else
// /tmp/tensorc-kernels-<uid>.
//
// Trust: entries are code the runtime runs. The directory is created 0700;
// an existing one is used only when it belongs to this user (or root) and is
// not writable by group or others, otherwise nothing is read or written
// (runs compile their kernels). Entries larger than 256 MiB are never read.
#pragma once

#include <atomic>
#include <functional>
#include <optional>
#include <string>

namespace tensorc {

struct KernelKey {
  std::string source;          // the kernel's full source
  std::string arch;            // e.g. "sm_90"
  std::string compilerVersion; // e.g. "nvrtc 13.0"
  std::string options;         // compile options, in order
  std::string tensorcVersion;
  // Hex SHA-256 of a length-prefixed encoding of every field.
  std::string digest() const;
};

class KernelCache {
public:
  explicit KernelCache(std::string directory = "");
  static std::string defaultDirectory();
  const std::string &directory() const { return dir_; }

  // The cached binary, if a valid entry exists; an invalid entry (bad
  // magic, wrong key, truncated, checksum mismatch) is deleted.
  std::optional<std::string> lookup(const KernelKey &key);
  // Stores atomically; throws Error if the directory cannot be written.
  void store(const KernelKey &key, const std::string &binary);
  // lookup, else build and store (a failed store is ignored).
  std::string getOrBuild(const KernelKey &key, const std::function<std::string()> &build);

  // The payload of an entry's bytes if they are a valid entry for the key
  // digest `digest` (magic, version, key, size, checksum), else nullopt.
  static std::optional<std::string> decodeEntry(const std::string &bytes, const std::string &digest);

  // Where the entry of `key` lives.
  std::string entryPath(const KernelKey &key) const;

  struct Stats {
    uint64_t hits = 0, misses = 0, discarded = 0, storeFailures = 0;
  };
  Stats stats() const {
    return {hits_.load(), misses_.load(), discarded_.load(), storeFailures_.load()};
  }

private:
  bool directoryTrusted();
  std::string dir_;
  std::atomic<uint64_t> hits_{0}, misses_{0}, discarded_{0}, storeFailures_{0};
};

} // namespace tensorc
