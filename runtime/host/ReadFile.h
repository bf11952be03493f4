// Reading a whole file that must be a regular file: /dev/zero, a FIFO or a
// directory passed where a file is expected must not be read until memory
// runs out. Shared by every reader of user-given files (.npy, artifacts,
// kernel cache entries).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace tensorc {

// The bytes of `path`; nullopt if it is missing, not a regular file, larger
// than `maxBytes`, or cannot be read. `why` (if given) says which.
std::optional<std::string> readRegularFile(const std::string &path, uint64_t maxBytes = UINT64_MAX,
                                           std::string *why = nullptr);

// A file descriptor of `path` opened for reading when it is a regular file;
// -1 otherwise, `why` saying what it is (a FIFO, a directory, a device) or
// why it cannot be opened. Opening never blocks: a FIFO with no writer is
// refused at once, not waited on.
int openRegularFile(const std::string &path, std::string *why = nullptr);

// What a file that is not a regular file is ("a FIFO"), "" for a regular
// file or one that cannot be inspected.
std::string fileKindProblem(const std::string &path);

} // namespace tensorc
