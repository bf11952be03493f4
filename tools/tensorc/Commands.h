// The tensorc CLI's subcommands. Each registers itself on the CLI11 app with
// a callback; errors are thrown as tensorc::Error and reported once by main().
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tensorc::cli {

void addVerifyCommand(CLI::App &app);
void addCompileCommand(CLI::App &app);
void addRunCommand(CLI::App &app);
void addOpsCommand(CLI::App &app);
void addGradCommand(CLI::App &app);
void addShardCommand(CLI::App &app);

// Writes `text` to `path` atomically: a temporary file renamed into place,
// so a failed command never leaves partial output. "-" writes to stdout.
// Refuses (Error) a path that is a file the command read (noteInputFile):
// `tensorc compile m.json -o m.json` replaced the user's graph.
void writeOutputFile(const std::string &path, const std::string &text);

// Records a file the command reads, which no output may replace.
void noteInputFile(const std::string &path);

// "B=8" assignments of --dim options; throws Error for malformed ones.
std::map<std::string, int64_t> parseDimAssignments(const std::vector<std::string> &assignments);

} // namespace tensorc::cli
