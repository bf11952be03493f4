// The on-disk kernel cache (keys, atomic writes, corruption detection,
// concurrent writers from several processes) against a fake compiler, and
// NVRTC (compiling for sm_90 and sm_80; skipped where NVRTC is absent).
#include "ir/core/Error.h"
#include "runtime/cache/KernelCache.h"
#include "runtime/cache/Sha256.h"
#include "runtime/cuda/Nvrtc.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using namespace tensorc;
namespace fs = std::filesystem;

namespace {

std::string freshDir() {
  static std::random_device rd;
  fs::path p = fs::temp_directory_path() / ("tensorc-cache-test-" + std::to_string(::getpid()) +
                                            "-" + std::to_string(rd()));
  fs::remove_all(p);
  return p.string();
}

std::string readAll(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void writeAll(const std::string &path, const std::string &bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

KernelKey sampleKey() { return {"__global__ void k() {}", "sm_90", "nvrtc 13.0", "-O3", "0.1.0"}; }

TEST(Sha256, NistVectors) {
  EXPECT_EQ(sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256Hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  // Fed in pieces, the same digest.
  Sha256 h;
  for (int i = 0; i < 1000; ++i)
    h.update(std::string(1000, 'a'));
  EXPECT_EQ(h.hexDigest(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(KernelCache, KeyCoversEveryField) {
  KernelKey k = sampleKey();
  std::set<std::string> digests = {k.digest()};
  for (std::string KernelKey::*field : {&KernelKey::source, &KernelKey::arch,
                                        &KernelKey::compilerVersion, &KernelKey::options,
                                        &KernelKey::tensorcVersion}) {
    KernelKey changed = k;
    changed.*field += " ";
    digests.insert(changed.digest());
  }
  EXPECT_EQ(digests.size(), 6u);
  EXPECT_EQ(sampleKey().digest(), k.digest());
  // Field boundaries are part of the key.
  KernelKey a = k, b = k;
  a.arch = "sm_9";
  a.compilerVersion = "0nvrtc 13.0";
  b.arch = "sm_90";
  b.compilerVersion = "nvrtc 13.0";
  EXPECT_NE(a.digest(), b.digest());
}

TEST(KernelCache, StoresAndFinds) {
  KernelCache cache(freshDir());
  KernelKey k = sampleKey();
  EXPECT_FALSE(cache.lookup(k));
  cache.store(k, std::string("\x7f" "ELF binary\0with nul", 20));
  std::optional<std::string> got = cache.lookup(k);
  ASSERT_TRUE(got);
  EXPECT_EQ(*got, std::string("\x7f" "ELF binary\0with nul", 20));
  EXPECT_EQ(cache.stats().hits, 1u);
  EXPECT_EQ(cache.stats().misses, 1u);
  fs::remove_all(cache.directory());
}

TEST(KernelCache, DamagedEntriesAreDiscardedAndRebuilt) {
  KernelCache cache(freshDir());
  KernelKey k = sampleKey();
  std::string path = cache.entryPath(k);
  int builds = 0;
  auto build = [&] {
    ++builds;
    return std::string(4096, 'x');
  };
  EXPECT_EQ(cache.getOrBuild(k, build), std::string(4096, 'x'));
  std::string good = readAll(path);
  auto damage = [&](const std::string &what, const std::string &bytes) {
    SCOPED_TRACE(what);
    writeAll(path, bytes);
    uint64_t discarded = cache.stats().discarded;
    EXPECT_FALSE(cache.lookup(k));
    EXPECT_EQ(cache.stats().discarded, discarded + 1);
    EXPECT_FALSE(fs::exists(path)) << "a damaged entry must be removed";
    int before = builds;
    EXPECT_EQ(cache.getOrBuild(k, build), std::string(4096, 'x'));
    EXPECT_EQ(builds, before + 1);
    EXPECT_EQ(readAll(path), good);
  };
  damage("truncated", good.substr(0, good.size() - 100));
  damage("header only", good.substr(0, 50));
  damage("empty", "");
  std::string flipped = good;
  flipped[flipped.size() - 7] ^= 1;
  damage("payload bit flipped", flipped);
  flipped = good;
  flipped[10] ^= 1;
  damage("key bit flipped", flipped);
  // Another key's valid entry at this path.
  KernelCache other(freshDir());
  KernelKey k2 = k;
  k2.arch = "sm_80";
  other.store(k2, std::string(4096, 'x'));
  damage("another key's entry", readAll(other.entryPath(k2)));
  fs::remove_all(other.directory());
  fs::remove_all(cache.directory());
}

TEST(KernelCache, DirectoryFromEnvironment) {
  ::setenv("TENSORC_CACHE_DIR", "/tmp/somewhere/kernels", 1);
  EXPECT_EQ(KernelCache::defaultDirectory(), "/tmp/somewhere/kernels");
  EXPECT_EQ(KernelCache().directory(), "/tmp/somewhere/kernels");
  EXPECT_EQ(KernelCache("/explicit").directory(), "/explicit");
  ::unsetenv("TENSORC_CACHE_DIR");
  ::setenv("XDG_CACHE_HOME", "/tmp/xdg", 1);
  EXPECT_EQ(KernelCache::defaultDirectory(), "/tmp/xdg/tensorc/kernels");
  ::unsetenv("XDG_CACHE_HOME");
  const char *home = std::getenv("HOME");
  if (home) {
    EXPECT_EQ(KernelCache::defaultDirectory(), std::string(home) + "/.cache/tensorc/kernels");
  }
}

TEST(KernelCache, UnwritableCacheDoesNotFailTheBuild) {
  std::string dir = freshDir();
  fs::create_directories(dir);
  writeAll(dir + "/file", "not a directory");
  KernelCache cache(dir + "/file/cache");
  EXPECT_EQ(cache.getOrBuild(sampleKey(), [] { return std::string("bin"); }), "bin");
  EXPECT_EQ(cache.stats().storeFailures, 1u);
  EXPECT_THROW(cache.store(sampleKey(), "bin"), Error);
  fs::remove_all(dir);
}

// Eight processes, each with four threads, race to build and store the same
// entries: every one gets the right bytes, the cache ends with one valid
// entry per key and no temporary files.
TEST(KernelCache, ConcurrentWritersFromSeveralProcesses) {
  std::string dir = freshDir();
  std::vector<pid_t> children;
  for (int p = 0; p < 8; ++p) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      bool ok = true;
      std::vector<std::thread> threads;
      std::atomic<bool> allOk{true};
      for (int t = 0; t < 4; ++t)
        threads.emplace_back([&, t] {
          KernelCache cache(dir);
          for (int round = 0; round < 20; ++round) {
            KernelKey k = sampleKey();
            k.source += std::to_string(round % 5);
            std::string want(100000 + round % 5, char('a' + round % 5));
            std::string got = cache.getOrBuild(k, [&] {
              std::this_thread::sleep_for(std::chrono::microseconds(200 * (t + 1)));
              return want;
            });
            if (got != want)
              allOk = false;
          }
        });
      for (auto &th : threads)
        th.join();
      ok = allOk;
      _exit(ok ? 0 : 1);
    }
    children.push_back(pid);
  }
  for (pid_t c : children) {
    int status = 0;
    waitpid(c, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a writer saw wrong bytes";
  }
  KernelCache cache(dir);
  int entries = 0, temporaries = 0;
  for (const auto &e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file())
      continue;
    std::string name = e.path().filename().string();
    (name.find(".tmp.") != std::string::npos ? temporaries : entries)++;
  }
  EXPECT_EQ(entries, 5);
  EXPECT_EQ(temporaries, 0);
  for (int i = 0; i < 5; ++i) {
    KernelKey k = sampleKey();
    k.source += std::to_string(i);
    std::optional<std::string> got = cache.lookup(k);
    ASSERT_TRUE(got);
    EXPECT_EQ(*got, std::string(100000 + i, char('a' + i)));
  }
  fs::remove_all(dir);
}

const char *kSampleKernel = R"(
#include <cuda_bf16.h>
extern "C" __global__ void scale_bf16(__nv_bfloat16 *y, const __nv_bfloat16 *x, float a, long n) {
  long i = long(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n)
    y[i] = __float2bfloat16(a * __bfloat162float(x[i]));
}
)";

TEST(Nvrtc, CompilesForHopperAndAmpere) {
  if (!cuda::Nvrtc::available())
    GTEST_SKIP() << "NVRTC is not installed";
  const cuda::Nvrtc &nvrtc = cuda::Nvrtc::get();
  std::vector<int> archs = nvrtc.supportedArchs();
  EXPECT_NE(std::find(archs.begin(), archs.end(), 90), archs.end());
  for (const char *arch : {"sm_90", "sm_80"}) {
    cuda::Nvrtc::Output out = nvrtc.compile(kSampleKernel, "scale_bf16.cu", arch);
    ASSERT_GE(out.cubin.size(), 4u) << arch;
    EXPECT_EQ(out.cubin.substr(0, 4), "\x7f" "ELF") << arch;
    EXPECT_EQ(out.log, "") << arch << ": no warnings expected";
  }
  try {
    nvrtc.compile("__global__ void broken( {", "broken.cu", "sm_90");
    FAIL() << "a broken kernel compiled";
  } catch (const Error &e) {
    std::string m = e.what();
    EXPECT_NE(m.find("broken.cu: NVRTC could not compile it for sm_90"), std::string::npos) << m;
    EXPECT_NE(m.find("error"), std::string::npos) << m;
  }
}

TEST(Nvrtc, CachedCompilationRunsOnce) {
  if (!cuda::Nvrtc::available())
    GTEST_SKIP() << "NVRTC is not installed";
  const cuda::Nvrtc &nvrtc = cuda::Nvrtc::get();
  KernelCache cache(freshDir());
  KernelKey key{kSampleKernel, "sm_90", nvrtc.version(), "", "test"};
  int compiles = 0;
  auto build = [&] {
    ++compiles;
    return nvrtc.compile(kSampleKernel, "scale_bf16.cu", "sm_90").cubin;
  };
  std::string first = cache.getOrBuild(key, build), second = cache.getOrBuild(key, build);
  EXPECT_EQ(compiles, 1);
  EXPECT_EQ(first, second);
  fs::remove_all(cache.directory());
}

} // namespace

namespace {

// Entries are code: a cache directory others can write is neither read nor
// written; the same directory made private again is used.
TEST(KernelCache, WritableByOthersIsNotTrusted) {
  std::string dir = freshDir();
  fs::create_directories(dir);
  KernelCache seed(dir);
  seed.store(sampleKey(), "cubin");
  ASSERT_TRUE(seed.lookup(sampleKey()).has_value());
  fs::permissions(dir, fs::perms::all); // 0777
  KernelCache open(dir);
  EXPECT_FALSE(open.lookup(sampleKey()).has_value());
  EXPECT_THROW(open.store(sampleKey(), "planted"), Error);
  EXPECT_EQ(open.getOrBuild(sampleKey(), [] { return std::string("built"); }), "built");
  EXPECT_EQ(open.stats().storeFailures, 1u);
  fs::permissions(dir, fs::perms::owner_all, fs::perm_options::replace);
  EXPECT_EQ(KernelCache(dir).lookup(sampleKey()), std::optional<std::string>("cubin"));
  fs::remove_all(dir);
}

// Every level is checked, not only the top folder: an entry's sub-folder or
// the entry itself writable by others, or a symbolic link (out of the
// cache), is a miss; storing through a linked sub-folder is refused.
TEST(KernelCache, EveryLevelIsChecked) {
  std::string dir = freshDir(), elsewhere = freshDir();
  KernelCache seed(dir);
  seed.store(sampleKey(), "cubin");
  std::string entry = seed.entryPath(sampleKey());
  fs::path folder = fs::path(entry).parent_path();
  ASSERT_TRUE(KernelCache(dir).lookup(sampleKey()).has_value());

  fs::permissions(entry, fs::perms::group_write, fs::perm_options::add);
  EXPECT_FALSE(KernelCache(dir).lookup(sampleKey()).has_value());
  fs::permissions(entry, fs::perms::group_write, fs::perm_options::remove);
  fs::permissions(folder, fs::perms::others_write, fs::perm_options::add);
  EXPECT_FALSE(KernelCache(dir).lookup(sampleKey()).has_value());
  fs::permissions(folder, fs::perms::others_write, fs::perm_options::remove);
  ASSERT_TRUE(KernelCache(dir).lookup(sampleKey()).has_value());

  // The entry a link to a file elsewhere (a valid entry: only the link is wrong).
  fs::create_directories(elsewhere);
  fs::copy_file(entry, fs::path(elsewhere) / "planted.bin");
  fs::remove(entry);
  fs::create_symlink(fs::path(elsewhere) / "planted.bin", entry);
  EXPECT_FALSE(KernelCache(dir).lookup(sampleKey()).has_value());
  // Rebuilt: the link is replaced by an entry, its target left as it was.
  std::string planted = readAll((fs::path(elsewhere) / "planted.bin").string());
  EXPECT_EQ(KernelCache(dir).getOrBuild(sampleKey(), [] { return std::string("rebuilt"); }), "rebuilt");
  EXPECT_FALSE(fs::is_symlink(entry));
  EXPECT_EQ(readAll((fs::path(elsewhere) / "planted.bin").string()), planted);
  EXPECT_EQ(KernelCache(dir).lookup(sampleKey()), std::optional<std::string>("rebuilt"));

  // The sub-folder a link to a folder elsewhere.
  fs::remove_all(folder);
  fs::create_directories(fs::path(elsewhere) / "sub");
  fs::copy_file(fs::path(elsewhere) / "planted.bin", fs::path(elsewhere) / "sub" / fs::path(entry).filename());
  fs::create_directory_symlink(fs::path(elsewhere) / "sub", folder);
  KernelCache linked(dir);
  EXPECT_FALSE(linked.lookup(sampleKey()).has_value());
  EXPECT_THROW(linked.store(sampleKey(), "through the link"), Error);
  EXPECT_EQ(readAll((fs::path(elsewhere) / "sub" / fs::path(entry).filename()).string()),
            readAll((fs::path(elsewhere) / "planted.bin").string()));
  fs::remove_all(dir);
  fs::remove_all(elsewhere);
}

} // namespace
