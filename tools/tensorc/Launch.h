// `tensorc launch --nproc N -- CMD ARGS...`: one process per device of an
// SPMD run on this machine, torchrun style. Each child gets RANK,
// LOCAL_RANK, WORLD_SIZE and LOCAL_WORLD_SIZE, TENSORC_RENDEZVOUS (a fresh
// directory where rank 0 leaves NCCL's unique id) and, unless the caller
// set it, CUDA_VISIBLE_DEVICES=LOCAL_RANK (each process's GPU is its device
// 0). When a child fails, the others are stopped and the launcher exits
// with its status, naming the rank. MLIR-free: in both CLIs.
#pragma once

#include <CLI/CLI.hpp>

namespace tensorc::cli {

void addLaunchCommand(CLI::App &app);

} // namespace tensorc::cli
