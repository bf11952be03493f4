// tensorc-tune: inspects and maintains the autotune cache
// (runtime/tune/TuneDb.h, docs/autotune.md).
//
//   tensorc-tune [--db PATH] [--json] list [filters]
//   tensorc-tune show KERNEL            every candidate of the matching entries
//   tensorc-tune stats                  entries, devices, hits, size
//   tensorc-tune export FILE [filters]  a portable JSON file for one device kind
//   tensorc-tune import FILE            merges: the faster measurement wins
//   tensorc-tune prune FILTERS...       deletes what the filters match
//   tensorc-tune clear                  deletes every entry
//   tensorc-tune verify MODEL.tcx [--delete] [run options]
//                                       re-runs the model's cached winners beside
//                                       the default variant on this device
//
// Filters: --kernel (hash prefix or label substring), --device (substring),
// --tensorc-version, --older-than DAYS, --newer-than DAYS.
#include "ir/core/Error.h"
#include "runtime/host/AtomicFile.h"
#include "runtime/host/ReadFile.h"
#include "runtime/tune/TuneDb.h"
#include "tools/tensorc/RunArtifact.h"

#include <filesystem>
#include <new>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <tuple>
#include <set>

using tensorc::check;
using tensorc::Error;
using tensorc::tune::TuneDb;
using tensorc::tune::TuneEntry;
using tensorc::tune::TuneFilter;
using json = nlohmann::json;

namespace {

int64_t now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct FilterArgs {
  std::string kernel, device, version;
  double olderDays = -1, newerDays = -1;
  void add(CLI::App &cmd) {
    cmd.add_option("--kernel", kernel, "a kernel hash prefix or a substring of its label");
    cmd.add_option("--device", device, "a substring of the device name");
    cmd.add_option("--tensorc-version", version, "entries measured by this tensorc version");
    cmd.add_option("--older-than", olderDays, "entries measured more than DAYS ago")->check(CLI::NonNegativeNumber);
    cmd.add_option("--newer-than", newerDays, "entries measured less than DAYS ago")->check(CLI::NonNegativeNumber);
  }
  bool any() const { return !kernel.empty() || !device.empty() || !version.empty() || olderDays >= 0 || newerDays >= 0; }
  TuneFilter filter() const {
    TuneFilter f;
    f.kernel = kernel;
    f.device = device;
    f.tensorcVersion = version;
    if (olderDays >= 0)
      f.olderThan = now() - int64_t(olderDays * 86400);
    if (newerDays >= 0)
      f.newerThan = now() - int64_t(newerDays * 86400);
    return f;
  }
};

json entryJson(const TuneEntry &e, bool candidates) {
  json j = {{"kernel", e.key.kernel},   {"bucket", e.key.bucket},   {"dtype", e.key.dtype},
            {"device", e.key.device},   {"versions", e.key.versions}, {"tensorc_version", e.key.tensorcVersion},
            {"label", e.label},         {"winner", e.winner},       {"winner_us", e.winnerMicroseconds()},
            {"measured_at", e.measuredAt}, {"host", e.host},        {"hits", e.hits}};
  if (candidates) {
    json cs = json::array();
    for (const auto &c : e.candidates) {
      json x = {{"name", c.name}, {"us", c.microseconds}};
      if (!c.rejected.empty())
        x["rejected"] = c.rejected;
      cs.push_back(x);
    }
    j["candidates"] = cs;
  }
  return j;
}

std::string age(int64_t at) {
  int64_t s = std::max<int64_t>(0, now() - at);
  if (s < 3600)
    return std::to_string(s / 60) + " min";
  if (s < 86400 * 2)
    return std::to_string(s / 3600) + " h";
  return std::to_string(s / 86400) + " d";
}

} // namespace

int main(int argc, char **argv) {
  CLI::App app{"tensorc-tune: the autotune cache (docs/autotune.md)"};
  app.set_version_flag("--version", "tensorc-tune " TENSORC_VERSION);
  std::string dbPath;
  bool asJson = false;
  app.add_option("--db", dbPath, "the database (default: $TENSORC_TUNE_DB, else the XDG cache folder)");
  app.add_flag("--json", asJson, "machine-readable output");
  app.require_subcommand(1);

  FilterArgs listArgs, exportArgs, pruneArgs;
  auto *list = app.add_subcommand("list", "List entries (filters narrow it)");
  listArgs.add(*list);
  std::string showKernel;
  auto *show = app.add_subcommand("show", "Every candidate and time of the entries of a kernel");
  show->add_option("KERNEL", showKernel, "a kernel hash prefix or a substring of its label")->required();
  auto *stats = app.add_subcommand("stats", "Entries, devices, hits and size");
  std::string exportFile;
  auto *exportCmd = app.add_subcommand("export", "Write entries of one device kind to a portable JSON file");
  exportCmd->add_option("FILE", exportFile, "the file to write ('-': stdout)")->required();
  exportArgs.add(*exportCmd);
  std::string importFile;
  auto *importCmd = app.add_subcommand("import", "Merge an exported file (the faster measurement wins)");
  importCmd->add_option("FILE", importFile, "a file written by `tensorc-tune export`")->required();
  auto *prune = app.add_subcommand("prune", "Delete the entries the filters match (at least one filter)");
  pruneArgs.add(*prune);
  auto *clear = app.add_subcommand("clear", "Delete every entry");
  tensorc::cli::RunArgs verifyArgs;
  bool verifyDelete = false;
  auto *verify = app.add_subcommand("verify", "Run a compiled model with its cached winners beside the default "
                                              "variants on this device; report wrong or slower winners");
  tensorc::cli::addRunOptions(*verify, verifyArgs);
  verify->add_flag("--delete", verifyDelete, "also delete the wrong or slower entries");

  try {
    app.parse(argc, argv);
    if (prune->parsed())
      check(pruneArgs.any(), "prune: give at least one filter (--older-than, --device, --kernel, "
                             "--tensorc-version, --newer-than); `clear` deletes everything");
    if (verify->parsed()) {
      check(tensorc::cli::isArtifactFile(verifyArgs.file), verifyArgs.file + ": not a compiled model (.tcx)");
      check(verifyArgs.autotune.empty(), "verify: it runs in verify mode; --autotune does not apply");
      check(dbPath.empty() || verifyArgs.tuneDb.empty() || dbPath == verifyArgs.tuneDb,
            "verify: --db and --tune-db name different databases");
      verifyArgs.autotune = verifyDelete ? "verify-delete" : "verify";
      if (verifyArgs.tuneDb.empty())
        verifyArgs.tuneDb = dbPath;
      verifyArgs.showValues = 0;
      tensorc::cli::runArtifact(verifyArgs); // the report comes on stderr
      return 0;
    }
    TuneDb db(dbPath);
    if (!db.movedAside().empty())
      std::cerr << "tensorc-tune: " << db.path() << " was damaged: moved aside to " << db.movedAside()
                << ", starting an empty cache\n";
    if (list->parsed()) {
      std::vector<TuneEntry> es = db.list(listArgs.filter());
      if (asJson) {
        json arr = json::array();
        for (const TuneEntry &e : es)
          arr.push_back(entryJson(e, false));
        std::cout << arr.dump(1, ' ', false, json::error_handler_t::replace) << "\n";
      } else {
        std::printf("%-16s %-22s %-6s %-14s %10s %6s %8s  %s\n", "kernel", "bucket", "dtype", "winner", "us", "hits",
                    "age", "device / label");
        for (const TuneEntry &e : es)
          std::printf("%-16.16s %-22s %-6s %-14s %10.2f %6lld %8s  %s / %s\n", e.key.kernel.c_str(),
                      e.key.bucket.c_str(), e.key.dtype.c_str(), e.winner.c_str(), e.winnerMicroseconds(),
                      (long long)e.hits, age(e.measuredAt).c_str(), e.key.device.c_str(), e.label.c_str());
        std::printf("%zu entries\n", es.size());
      }
    } else if (show->parsed()) {
      TuneFilter f;
      f.kernel = showKernel;
      std::vector<TuneEntry> es = db.list(f);
      check(!es.empty(), "no entry of a kernel matching '" + showKernel + "' in " + db.path());
      if (asJson) {
        json arr = json::array();
        for (const TuneEntry &e : es)
          arr.push_back(entryJson(e, true));
        std::cout << arr.dump(1, ' ', false, json::error_handler_t::replace) << "\n";
      } else {
        for (const TuneEntry &e : es) {
          std::printf("%s (%s)\n  bucket %s, %s, on %s\n  versions: %s; tensorc %s\n  measured %s ago on %s, "
                      "%lld hits\n",
                      e.key.kernel.c_str(), e.label.c_str(), e.key.bucket.c_str(), e.key.dtype.c_str(),
                      e.key.device.c_str(), e.key.versions.c_str(), e.key.tensorcVersion.c_str(),
                      age(e.measuredAt).c_str(), e.host.c_str(), (long long)e.hits);
          for (const auto &c : e.candidates)
            std::printf("  %s %-14s %10.2f us%s%s\n", c.name == e.winner ? "*" : " ", c.name.c_str(),
                        c.microseconds, c.rejected.empty() ? "" : "  rejected: ", c.rejected.c_str());
        }
      }
    } else if (stats->parsed()) {
      std::vector<TuneEntry> es = db.list();
      std::set<std::string> devices, kernels;
      int64_t hits = 0;
      size_t rejected = 0;
      for (const TuneEntry &e : es) {
        devices.insert(e.key.device);
        kernels.insert(e.key.kernel);
        hits += e.hits;
        for (const auto &c : e.candidates)
          rejected += !c.rejected.empty();
      }
      json j = {{"path", db.path()},
                {"entries", es.size()},
                {"kernels", kernels.size()},
                {"devices", std::vector<std::string>(devices.begin(), devices.end())},
                {"hits", hits},
                {"rejected_candidates", rejected},
                {"bytes", db.bytes()}};
      if (asJson) {
        std::cout << j.dump(1, ' ', false, json::error_handler_t::replace) << "\n";
      } else {
        std::printf("%s\n%zu entries, %zu kernels, %lld hits, %zu rejected candidates, %llu bytes\n",
                    db.path().c_str(), es.size(), kernels.size(), (long long)hits, rejected,
                    (unsigned long long)db.bytes());
        for (const std::string &d : devices)
          std::printf("device: %s\n", d.c_str());
      }
    } else if (exportCmd->parsed()) {
      std::vector<TuneEntry> es = db.list(exportArgs.filter());
      std::set<std::string> devices;
      for (const TuneEntry &e : es)
        devices.insert(e.key.device);
      if (devices.size() > 1) {
        std::string names;
        for (const std::string &d : devices)
          names += "\n  " + d;
        tensorc::fail("export: the entries are of " + std::to_string(devices.size()) +
                      " device kinds; an export file holds one: pass --device (devices:" + names + ")");
      }
      std::string text = tensorc::tune::exportJson(es);
      if (exportFile == "-")
        std::cout << text;
      else
        tensorc::writeFileAtomically(exportFile, text);
      std::cerr << "tensorc-tune: exported " << es.size() << " entries" << (devices.empty() ? "" : " of ")
                << (devices.empty() ? "" : *devices.begin()) << "\n";
    } else if (importCmd->parsed()) {
      std::string why;
      std::optional<std::string> text = tensorc::readRegularFile(importFile, uint64_t(1) << 30, &why);
      check(text.has_value(), importFile + ": cannot read: " + why);
      std::vector<TuneEntry> incoming = tensorc::tune::parseExport(*text, importFile);
      size_t added = 0, replaced = 0, kept = 0, refused = 0;
      json conflicts = json::array(), refusals = json::array();
      // The cache's entries read once, by key: a query per incoming entry
      // listed every entry of its kernel (2,000 entries of one kernel: 76 s).
      auto keyOf = [](const tensorc::tune::TuneKey &k) {
        return std::tuple(k.kernel, k.bucket, k.dtype, k.device, k.versions, k.tensorcVersion);
      };
      std::map<decltype(keyOf(tensorc::tune::TuneKey{})), TuneEntry> existing;
      for (TuneEntry &x : db.list({}))
        existing.emplace(keyOf(x.key), std::move(x));
      for (const TuneEntry &e : incoming) {
        if (e.key.tensorcVersion != TENSORC_VERSION) {
          ++refused;
          refusals.push_back({{"kernel", e.key.kernel},
                              {"reason", "measured by tensorc " + e.key.tensorcVersion + ", this is " TENSORC_VERSION
                                         " (kernels and variants may differ)"}});
          continue;
        }
        auto found = existing.find(keyOf(e.key));
        if (found == existing.end()) {
          db.store(e);
          existing.emplace(keyOf(e.key), e);
          ++added;
          continue;
        }
        const TuneEntry *old = &found->second;
        bool faster = e.winnerMicroseconds() > 0 && e.winnerMicroseconds() < old->winnerMicroseconds();
        if (old->winner != e.winner)
          conflicts.push_back({{"kernel", e.key.kernel},
                               {"bucket", e.key.bucket},
                               {"kept", faster ? e.winner : old->winner},
                               {"kept_us", faster ? e.winnerMicroseconds() : old->winnerMicroseconds()},
                               {"dropped", faster ? old->winner : e.winner},
                               {"dropped_us", faster ? old->winnerMicroseconds() : e.winnerMicroseconds()}});
        if (faster) {
          TuneEntry merged = e;
          merged.hits = old->hits;
          db.store(merged);
          found->second = merged;
          ++replaced;
        } else {
          ++kept;
        }
      }
      json report = {{"added", added},         {"replaced", replaced},   {"kept", kept},
                     {"refused", refused},     {"conflicts", conflicts}, {"refusals", refusals}};
      if (asJson) {
        std::cout << report.dump(1, ' ', false, json::error_handler_t::replace) << "\n";
      } else {
        std::printf("imported %s: %zu added, %zu replaced by faster measurements, %zu kept, %zu refused\n",
                    importFile.c_str(), added, replaced, kept, refused);
        for (const json &c : conflicts)
          std::printf("conflict %s [%s]: kept %s (%.2f us) over %s (%.2f us)\n",
                      c["kernel"].get<std::string>().c_str(), c["bucket"].get<std::string>().c_str(),
                      c["kept"].get<std::string>().c_str(), c["kept_us"].get<double>(),
                      c["dropped"].get<std::string>().c_str(), c["dropped_us"].get<double>());
        for (const json &r : refusals)
          std::printf("refused %s: %s\n", r["kernel"].get<std::string>().c_str(),
                      r["reason"].get<std::string>().c_str());
      }
    } else if (prune->parsed() || clear->parsed()) {
      size_t n = db.remove(prune->parsed() ? pruneArgs.filter() : TuneFilter{});
      if (asJson)
        std::cout << json({{"deleted", n}}).dump() << "\n";
      else
        std::printf("deleted %zu entries\n", n);
    }
  } catch (const CLI::ParseError &e) {
    // CLI11 prints the usage error; its codes (100-110) mean nothing to a
    // shell: a usage error exits 2, --help 0.
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const Error &e) {
    std::cerr << "tensorc-tune: " << e.what() << "\n";
    return 1;
  } catch (const std::bad_alloc &) {
    std::cerr << "tensorc-tune: out of memory (an allocation failed; a smaller model, batch or --threads needs less)\n";
    return 1;
  } catch (const std::filesystem::filesystem_error &e) {
    std::cerr << "tensorc-tune: " << e.what() << "\n";
    return 1;
  } catch (const std::exception &e) {
    std::cerr << "tensorc-tune: internal error: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
