#include "runtime/cache/KernelCache.h"

#include "ir/core/Error.h"
#include "runtime/cache/Sha256.h"
#include "runtime/host/AtomicFile.h"
#include "runtime/host/CacheHome.h"
#include "runtime/host/ReadFile.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

namespace tensorc {
namespace {

// Entry layout: magic, version, the key digest (64 hex chars), payload
// size (u64 LE), SHA-256 of the payload (32 bytes), payload.
constexpr char kMagic[4] = {'T', 'C', 'K', 'C'};
constexpr uint32_t kEntryVersion = 1;
constexpr size_t kHeaderBytes = 4 + 4 + 64 + 8 + 32;
// Cubins of a whole model are a few MiB; a larger entry is not ours.
constexpr uint64_t kMaxEntryBytes = uint64_t(256) << 20;

void appendField(std::string &out, const std::string &field) {
  uint64_t n = field.size();
  out.append(reinterpret_cast<const char *>(&n), 8);
  out += field;
}

} // namespace

std::string KernelKey::digest() const {
  std::string encoded = "tensorc-kernel-key-v1";
  for (const std::string *f : {&source, &arch, &compilerVersion, &options, &tensorcVersion})
    appendField(encoded, *f);
  return sha256Hex(encoded);
}

std::string KernelCache::defaultDirectory() {
  if (const char *d = std::getenv("TENSORC_CACHE_DIR"); d && *d)
    return d;
  if (std::optional<std::string> home = tensorcCacheHome())
    return *home + "/kernels";
  // Per user, never a shared name another user could create first.
  return "/tmp/tensorc-kernels-" + std::to_string(::geteuid());
}

KernelCache::KernelCache(std::string directory)
    : dir_(directory.empty() ? defaultDirectory() : std::move(directory)) {}

bool KernelCache::directoryTrusted() {
  // Entries are code the runtime loads: a directory others can write to
  // could hand us their kernels. Created 0700 when missing; an existing one
  // must belong to us (or root) and not be writable by group or others.
  std::error_code ec;
  if (!std::filesystem::exists(dir_, ec)) {
    std::filesystem::path p(dir_);
    std::filesystem::create_directories(p.parent_path(), ec);
    if (::mkdir(dir_.c_str(), 0700) != 0 && errno != EEXIST)
      return false;
  }
  struct stat st;
  if (::lstat(dir_.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return false;
  return (st.st_uid == ::geteuid() || st.st_uid == 0) && (st.st_mode & 022) == 0;
}

namespace {

// Whether `path` itself (not what a symbolic link names) is a directory or a
// regular file as asked, belonging to this user (or root) and not writable
// by group or others: entries are code the runtime loads, at every level of
// the cache (a forged entry in a sub-folder, or a link out of the cache,
// must not be loaded).
bool privateToUs(const std::string &path, bool directory) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0 || (directory ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)))
    return false;
  return (st.st_uid == ::geteuid() || st.st_uid == 0) && (st.st_mode & 022) == 0;
}

} // namespace

std::string KernelCache::entryPath(const KernelKey &key) const {
  std::string d = key.digest();
  return dir_ + "/" + d.substr(0, 2) + "/" + d + ".bin";
}

std::optional<std::string> KernelCache::lookup(const KernelKey &key) {
  std::string path = entryPath(key), digest = key.digest();
  // A missing, non-regular or oversized entry is a miss (never read whole).
  std::optional<std::string> read;
  if (directoryTrusted() && privateToUs(std::filesystem::path(path).parent_path().string(), true) &&
      privateToUs(path, false))
    read = readRegularFile(path, kMaxEntryBytes);
  if (!read) {
    ++misses_;
    return std::nullopt;
  }
  const std::string &bytes = *read;
  std::optional<std::string> payload = decodeEntry(bytes, digest);
  if (!payload) {
    // Never load it; remove it so that the rebuilt entry replaces it.
    std::error_code ec;
    std::filesystem::remove(path, ec);
    ++discarded_;
    ++misses_;
    return std::nullopt;
  }
  ++hits_;
  return payload;
}

std::optional<std::string> KernelCache::decodeEntry(const std::string &bytes,
                                                    const std::string &digest) {
  if (bytes.size() < kHeaderBytes || std::memcmp(bytes.data(), kMagic, 4) != 0)
    return std::nullopt;
  uint32_t version;
  uint64_t size;
  std::memcpy(&version, bytes.data() + 4, 4);
  std::memcpy(&size, bytes.data() + 72, 8);
  if (version != kEntryVersion || bytes.compare(8, 64, digest) != 0 ||
      size != bytes.size() - kHeaderBytes)
    return std::nullopt;
  Sha256 h;
  h.update(bytes.data() + kHeaderBytes, size);
  if (std::memcmp(h.digest().data(), bytes.data() + 80, 32) != 0)
    return std::nullopt;
  return bytes.substr(kHeaderBytes);
}

void KernelCache::store(const KernelKey &key, const std::string &binary) {
  std::string path = entryPath(key);
  check(binary.size() + kHeaderBytes <= kMaxEntryBytes, dir_ + ": kernel binary too large to cache");
  check(directoryTrusted(), dir_ + ": kernel cache directory is not ours or is writable by others; "
                                   "not caching");
  std::error_code ec;
  std::string folder = std::filesystem::path(path).parent_path().string();
  if (::mkdir(folder.c_str(), 0700) != 0 && errno != EEXIST)
    fail(dir_ + ": cannot create the kernel cache directory " + folder + ": " + std::strerror(errno));
  check(privateToUs(folder, true), folder + ": not a directory of this user's, or writable by others; not caching");
  // An entry that is not a regular file of ours (a link: the atomic write
  // would replace its target, outside the cache) is removed first.
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0 && !privateToUs(path, false))
    check(::unlink(path.c_str()) == 0, path + ": cannot replace a kernel cache entry that is not ours: " +
                                           std::strerror(errno));
  std::string entry(kMagic, 4);
  entry.append(reinterpret_cast<const char *>(&kEntryVersion), 4);
  entry += key.digest();
  uint64_t size = binary.size();
  entry.append(reinterpret_cast<const char *>(&size), 8);
  Sha256 h;
  h.update(binary);
  auto d = h.digest();
  entry.append(reinterpret_cast<const char *>(d.data()), 32);
  entry += binary;
  writeFileAtomically(path, entry);
}

std::string KernelCache::getOrBuild(const KernelKey &key, const std::function<std::string()> &build) {
  if (std::optional<std::string> cached = lookup(key))
    return *cached;
  std::string binary = build();
  try {
    store(key, binary);
  } catch (const Error &) {
    ++storeFailures_; // a read-only cache slows the next start, nothing more
  }
  return binary;
}

} // namespace tensorc
