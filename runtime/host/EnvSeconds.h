// A time limit from the environment (TENSORC_NCCL_TIMEOUT,
// TENSORC_MPI_TIMEOUT): unset or empty is nullopt; anything but a positive
// number of seconds is an error naming `who` and the variable.
#pragma once

#include <optional>
#include <string>

namespace tensorc {

std::optional<double> secondsFromEnvironment(const char *variable, const std::string &who);

} // namespace tensorc
