// .safetensors files: round trips per dtype through the writer and the
// mapped reader, and one clear error for each kind of damage.
#include "TestUtil.h"
#include "ir/core/Error.h"
#include "runtime/host/Safetensors.h"

#include <gtest/gtest.h>

#include <chrono>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <unistd.h>

using namespace tensorc;

namespace {

std::string header(const std::string &json) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i)
    bytes[size_t(i)] = char((uint64_t(json.size()) >> (8 * i)) & 0xff);
  return bytes + json;
}

std::string errorOf(const std::string &bytes) {
  try {
    parseSafetensorsHeader(reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size(), bytes.size(),
                           "w.safetensors");
  } catch (const Error &e) {
    return e.what();
  }
  return "no error";
}

std::string tempPath(const std::string &name) {
  return (std::filesystem::temp_directory_path() /
          ("tensorc-st-" + std::to_string(::getpid()) + "-" + name))
      .string();
}

} // namespace

TEST(Safetensors, RoundTripsEveryDType) {
  std::vector<HostTensor> ts;
  std::vector<std::pair<std::string, const HostTensor *>> named;
  for (DType d : kAllDTypes) {
    HostTensor t(d, {3, 1 + int64_t(ts.size())});
    for (int64_t i = 0; i < t.numel(); ++i)
      isFloat(d) ? t.setF(i, i * 0.25 - 1) : t.setI(i, i % 2 ? i : -i);
    ts.push_back(std::move(t));
  }
  ts.emplace_back(DType::F32, std::vector<int64_t>{0, 4}); // empty
  ts.emplace_back(DType::I64, std::vector<int64_t>{});     // scalar
  ts.back().setI(0, -7);
  for (size_t i = 0; i < ts.size(); ++i)
    named.emplace_back("t" + std::to_string(i) + "." + std::string(dtypeName(ts[i].dtype())), &ts[i]);
  std::string path = tempPath("roundtrip.safetensors");
  writeSafetensors(path, named, {{"format", "pt"}});
  auto f = SafetensorsFile::open(path);
  EXPECT_EQ(f->metadata().at("format"), "pt");
  ASSERT_EQ(f->entries().size(), ts.size());
  for (size_t i = 0; i < ts.size(); ++i) {
    const SafetensorsEntry *e = f->find(named[i].first);
    ASSERT_NE(e, nullptr) << named[i].first;
    EXPECT_EQ(e->dtype, ts[i].dtype());
    EXPECT_EQ(e->shape, ts[i].shape());
    ASSERT_EQ(e->bytes, ts[i].nbytes());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(f->data(*e)) % dtypeSize(e->dtype), 0u);
    if (ts[i].nbytes()) { // an empty tensor has no data to compare (memcmp takes no null pointers)
      EXPECT_EQ(std::memcmp(f->data(*e), ts[i].data(), ts[i].nbytes()), 0) << named[i].first;
    }
  }
  EXPECT_EQ(f->find("missing"), nullptr);
  std::filesystem::remove(path);
}

TEST(Safetensors, UnalignedTensorsAreCopiedAligned) {
  // An f64 at data offset 1 (legal in the format, if unusual).
  std::string json = R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})";
  EXPECT_NE(errorOf(header(json) + "x"), "no error"); // U8 is not a tensorc dtype
  std::string bytes = header(R"({"b":{"dtype":"F64","shape":[1],"data_offsets":[1,9]}})");
  double v = 2.5;
  bytes += "?";
  bytes.append(reinterpret_cast<const char *>(&v), 8);
  std::string path = tempPath("unaligned.safetensors");
  std::ofstream(path, std::ios::binary) << bytes;
  auto f = SafetensorsFile::open(path);
  const SafetensorsEntry *e = f->find("b");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(f->data(*e)) % 8, 0u);
  EXPECT_EQ(*static_cast<const double *>(f->data(*e)), 2.5);
  std::filesystem::remove(path);
}

TEST(Safetensors, DamageIsOneClearError) {
  const std::string ok = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  EXPECT_EQ(errorOf(header(ok) + std::string(8, '\0')), "no error");
  EXPECT_EQ(errorOf("abc"), "w.safetensors: safetensors: shorter than its 8-byte header length");
  EXPECT_EQ(errorOf(header(ok).substr(0, 20)),
            "w.safetensors: safetensors: header of " + std::to_string(ok.size()) +
                " bytes in a file of 20 (truncated?)");
  std::string huge(8, '\xff');
  EXPECT_NE(errorOf(huge).find("header of 18446744073709551615 bytes (at most"), std::string::npos);
  EXPECT_NE(errorOf(header("{\"w\":") + "x").find("header is not valid JSON"), std::string::npos);
  EXPECT_EQ(errorOf(header("[1,2]")), "w.safetensors: safetensors: header is not a JSON object");
  EXPECT_EQ(errorOf(header(ok) + std::string(4, '\0')),
            "w.safetensors: safetensors: tensor 'w': data_offsets [0, 8] outside the data section of 4 bytes");
  EXPECT_EQ(errorOf(header(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})") + std::string(12, '\0')),
            "w.safetensors: safetensors: tensor 'w': 8 bytes for F32 [3] (needs 12)");
  EXPECT_EQ(errorOf(header(R"({"w":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1]}})") + "x"),
            "w.safetensors: safetensors: tensor 'w': dtype F8_E4M3 is not supported (F64 F32 F16 BF16 I64 I32 BOOL)");
  EXPECT_EQ(errorOf(header(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}})")),
            "w.safetensors: safetensors: tensor 'w': shape: expected a non-negative integer, got -1");
  EXPECT_EQ(errorOf(header(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0]}})")),
            "w.safetensors: safetensors: tensor 'w': data_offsets is not [begin, end]");
  EXPECT_EQ(errorOf(header(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                           R"("w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})") + std::string(8, '\0')),
            "w.safetensors: safetensors: tensor 'w' appears twice");
  EXPECT_EQ(errorOf(header(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                           R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})") + std::string(8, '\0')),
            "w.safetensors: safetensors: tensors 'a' and 'b' overlap");
  EXPECT_NE(errorOf(header(R"({"w":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,0]}})"))
                .find("needs more bytes than the file has"),
            std::string::npos);
  EXPECT_EQ(errorOf(header(R"({"__metadata__":{"k":1}})")),
            "w.safetensors: safetensors: __metadata__ 'k' is not a string");
  EXPECT_EQ(errorOf(header(R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[0,0],"x":1}})")),
            "w.safetensors: safetensors: tensor 'w': unknown field 'x'");
}

// What the format forbids and JSON parsers accept is refused, in time
// linear in the header: deep nesting (70,000 levels overflowed the stack),
// a key repeated inside a tensor, a byte-order mark, NUL bytes; a message
// never carries more than an excerpt of the input.
TEST(Safetensors, HeadersOutsideTheFormatAreRefusedQuickly) {
  std::string deep = "{\"w\":" + std::string(70000, '[') + std::string(70000, ']') + "}";
  EXPECT_EQ(errorOf(header(deep)), "w.safetensors: safetensors: header nested deeper than 8 levels");
  EXPECT_EQ(errorOf(header(R"({"w":{"dtype":"F32","dtype":"F64","shape":[0],"data_offsets":[0,0]}})")),
            "w.safetensors: safetensors: the key 'dtype' appears twice in one object");
  const std::string ok = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  EXPECT_EQ(errorOf(header("\xEF\xBB\xBF" + ok) + std::string(8, '\0')),
            "w.safetensors: safetensors: header starts with a byte-order mark");
  EXPECT_EQ(errorOf(header(ok + std::string(3, '\0')) + std::string(8, '\0')),
            "w.safetensors: safetensors: header contains NUL bytes");
  std::string longShape = R"({"w":{"dtype":"F32","shape":[)" + std::string(5000, '1') +
                          R"(],"data_offsets":[0,0]}})";
  EXPECT_LT(errorOf(header(longShape)).size(), 260u) << "an excerpt of the value, not all of it";
  // 100,000 zero-size tensors parse in linear time (the callback parser
  // took 23 s at 20,000): 10x the tensors, well under 100x the time (a
  // ratio, so that a sanitizer build's slowness does not matter).
  auto secondsFor = [](int tensors) {
    std::string many = "{";
    for (int i = 0; i < tensors; ++i)
      many += (i ? ",\"t" : "\"t") + std::to_string(i) + R"(":{"dtype":"F32","shape":[0],"data_offsets":[0,0]})";
    many += "}";
    auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(errorOf(header(many)), "no error");
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  double small = secondsFor(10000), large = secondsFor(100000);
  EXPECT_LT(large, 30 * small + 0.5) << small << " s for 10,000 tensors, " << large << " s for 100,000";
}

// A file shortened after it was opened: reading a tensor is an error naming
// the file, not SIGBUS from the mapping (issue 50 item 4).
TEST(Safetensors, AFileTruncatedWhileOpenIsAnError) {
  HostTensor t(DType::F32, {4096});
  std::string path = tempPath("truncated.safetensors");
  writeSafetensors(path, {{"w", &t}});
  auto f = SafetensorsFile::open(path);
  const SafetensorsEntry *e = f->find("w");
  ASSERT_NE(e, nullptr);
  EXPECT_NO_THROW(f->data(*e));
  ASSERT_EQ(::truncate(path.c_str(), 100), 0);
  try {
    f->data(*e);
    ADD_FAILURE() << "no error for a truncated file";
  } catch (const Error &err) {
    EXPECT_NE(std::string(err.what()).find("shorter than when it was opened"), std::string::npos) << err.what();
  }
  std::filesystem::remove(path);
}

TEST(Safetensors, FilesThatAreNotRegularAreRefused) {
  EXPECT_THROW(SafetensorsFile::open("/nonexistent/w.safetensors"), Error);
  EXPECT_THROW(SafetensorsFile::open(std::filesystem::temp_directory_path().string()), Error);
}
