#include "tools/tensorc/Launch.h"
#include "runtime/host/TempFolder.h"

#include "ir/core/Error.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace tensorc::cli {

namespace {

struct LaunchArgs {
  int nproc = 1;
  std::vector<std::string> command;
};

// The ranks' process groups, for the signal handler: each rank runs in a
// group of its own (stopping one stops what it started), so a signal to
// the launcher (Ctrl-C, `timeout`, a job scheduler's SIGTERM) reaches them
// only through it. Without this, ranks outlived their launcher, and one
// stuck in an NCCL kernel kept its GPU busy for later runs.
constexpr int kMaxRanks = 1 << 12;
pid_t rankGroups[kMaxRanks];
std::atomic<int> rankCount{0};
volatile std::sig_atomic_t forwardedSignal = 0;

void forwardToRanks(int sig) {
  forwardedSignal = sig;
  int n = rankCount.load();
  for (int r = 0; r < n; ++r)
    if (rankGroups[r] > 0)
      ::kill(-rankGroups[r], sig);
}

void launch(const LaunchArgs &args) {
  check(!args.command.empty(), "launch: no command (tensorc launch --nproc N -- CMD ARGS...)");
  const std::string temp = temporaryFolder();
  std::string pattern = (std::filesystem::path(temp) / "tensorc-rendezvous-XXXXXX").string();
  std::vector<char> dir(pattern.begin(), pattern.end());
  dir.push_back('\0');
  check(::mkdtemp(dir.data()) != nullptr, "launch: cannot create a rendezvous directory in " + temp);
  std::string rendezvous = dir.data();
  const char *visible = std::getenv("CUDA_VISIBLE_DEVICES");
  std::vector<std::string> devices;
  if (visible && *visible) {
    std::string list = visible;
    for (size_t start = 0; start <= list.size();) {
      size_t comma = list.find(',', start);
      devices.push_back(list.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
      if (comma == std::string::npos)
        break;
      start = comma + 1;
    }
    check(int(devices.size()) >= args.nproc, "launch: --nproc " + std::to_string(args.nproc) +
                                                 " but CUDA_VISIBLE_DEVICES lists " +
                                                 std::to_string(devices.size()) + " devices");
  }
  std::vector<pid_t> children;
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) {
    struct sigaction action {};
    action.sa_handler = forwardToRanks;
    sigemptyset(&action.sa_mask);
    ::sigaction(sig, &action, nullptr);
  }
  for (int rank = 0; rank < args.nproc; ++rank) {
    pid_t pid = ::fork();
    check(pid >= 0, std::string("launch: fork failed: ") + std::strerror(errno));
    if (pid == 0) {
      ::setpgid(0, 0); // its own process group: stopping a rank stops what it started
      for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT})
        ::signal(sig, SIG_DFL);
      ::setenv("RANK", std::to_string(rank).c_str(), 1);
      ::setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(args.nproc).c_str(), 1);
      ::setenv("LOCAL_WORLD_SIZE", std::to_string(args.nproc).c_str(), 1);
      ::setenv("TENSORC_RENDEZVOUS", rendezvous.c_str(), 1);
      ::setenv("CUDA_VISIBLE_DEVICES", devices.empty() ? std::to_string(rank).c_str() : devices[size_t(rank)].c_str(),
               1);
      std::vector<char *> argv;
      for (const std::string &a : args.command)
        argv.push_back(const_cast<char *>(a.c_str()));
      argv.push_back(nullptr);
      ::execvp(argv[0], argv.data());
      std::cerr << "tensorc launch: rank " << rank << ": cannot run " << args.command[0] << ": "
                << std::strerror(errno) << "\n";
      ::_exit(127);
    }
    ::setpgid(pid, pid);
    children.push_back(pid);
    rankGroups[rank] = pid;
    rankCount = rank + 1;
    if (forwardedSignal) // arrived while this rank was starting
      ::kill(-pid, int(forwardedSignal));
  }
  int failedRank = -1, failedStatus = 0;
  size_t running = children.size();
  while (running > 0) {
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, 0);
    if (pid < 0 && errno == EINTR)
      continue; // a forwarded signal: the ranks end, waitpid reports them
    if (pid < 0)
      break;
    --running;
    int rank = int(std::find(children.begin(), children.end(), pid) - children.begin());
    bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok && failedRank < 0 && !forwardedSignal) {
      failedRank = rank;
      failedStatus = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      // The others would wait for it in a collective: stop them.
      for (size_t r = 0; r < children.size(); ++r)
        if (int(r) != rank)
          ::kill(-children[r], SIGTERM);
    }
  }
  std::error_code ec;
  std::filesystem::remove_all(rendezvous, ec);
  rankCount = 0;
  if (forwardedSignal) {
    std::cerr << "tensorc launch: " << strsignal(int(forwardedSignal)) << ": passed it to the ranks\n";
    std::exit(128 + int(forwardedSignal));
  }
  if (failedRank >= 0) {
    std::cerr << "tensorc launch: rank " << failedRank << " failed (status " << failedStatus
              << "); stopped the other ranks\n";
    std::exit(failedStatus == 0 ? 1 : failedStatus);
  }
}

} // namespace

void addLaunchCommand(CLI::App &app) {
  auto *cmd = app.add_subcommand(
      "launch", "Run a command once per device of an SPMD run (torchrun style: RANK, WORLD_SIZE, ...)");
  auto args = std::make_shared<LaunchArgs>();
  cmd->add_option("--nproc", args->nproc, "processes (devices) to start")
      ->required()
      ->check(CLI::Range(1, 1 << 12));
  cmd->add_option("command", args->command, "the command and its arguments, after --")->required();
  cmd->callback([args] { launch(*args); });
}

} // namespace tensorc::cli
