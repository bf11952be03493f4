#include "codegen/cpu/SharedLibrary.h"
#include "runtime/host/TempFolder.h"

#include "ir/core/Error.h"
#include "runtime/host/AtomicFile.h"

#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/Bitcode/BitcodeWriter.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/OptimizationLevel.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/Triple.h"
#include "llvm/Transforms/Utils/SplitModule.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <algorithm>
#include <exception>
#include <filesystem>
#include <thread>
#include <fstream>
#include <sstream>
#include <unistd.h>

extern char **environ;

namespace tensorc::codegen::cpu {

namespace {

// -O3 over the module, then its object code.
std::string optimizeAndEmit(llvm::Module &module, llvm::TargetMachine &machine) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder builder(&machine);
  builder.registerModuleAnalyses(mam);
  builder.registerCGSCCAnalyses(cam);
  builder.registerFunctionAnalyses(fam);
  builder.registerLoopAnalyses(lam);
  builder.crossRegisterProxies(lam, fam, cam, mam);
  builder.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3).run(module, mam);
  llvm::SmallString<0> object;
  llvm::raw_svector_ostream os(object);
  llvm::legacy::PassManager codegen;
  check(!machine.addPassesToEmitFile(codegen, os, nullptr, llvm::CodeGenFileType::ObjectFile),
        "cpu codegen: the target cannot emit object files");
  codegen.run(module);
  return std::string(object.str());
}

// How many parts a module of `functions` kernels is optimized and compiled
// in, on as many threads: LLVM's time is per function (a Swin-T forward's
// 1,225-kernel module: 6.8 s of -O3, 14.9 s of code generation, one
// thread), and the parts share nothing but declarations.
unsigned codegenParts(size_t functions) {
  unsigned threads = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  if (const char *t = std::getenv("TENSORC_CPU_CODEGEN_THREADS"); t && *t) {
    char *end = nullptr;
    long v = std::strtol(t, &end, 10);
    check(end && *end == '\0' && v >= 1 && v <= 256,
          std::string("TENSORC_CPU_CODEGEN_THREADS='") + t + "' is not a number of threads (1 to 256)");
    threads = unsigned(v);
  }
  // Parts of at least 16 kernels: a small module gains nothing from a split.
  return unsigned(std::max<size_t>(1, std::min<size_t>(threads, functions / 16)));
}

} // namespace

ObjectCode emitObject(mlir::ModuleOp module, const std::string &cpuName) {
  static bool initialized = [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    return true;
  }();
  (void)initialized;
  mlir::registerBuiltinDialectTranslation(*module.getContext());
  mlir::registerLLVMDialectTranslation(*module.getContext());
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule = mlir::translateModuleToLLVMIR(module, llvmContext);
  check(bool(llvmModule), "cpu codegen: translation to LLVM IR failed");
  std::string triple = llvm::sys::getDefaultTargetTriple(), error;
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, error);
  check(target != nullptr, "cpu codegen: no LLVM target for " + triple + ": " + error);
  // "host": this machine's CPU and exactly the features it reports (a VM
  // may hide some that the CPU model implies).
  std::string cpu = cpuName == "host" ? llvm::sys::getHostCPUName().str() : cpuName, features;
  if (cpuName == "host")
    for (const auto &[name, enabled] : llvm::sys::getHostCPUFeatures())
      features += (features.empty() ? "" : ",") + std::string(enabled ? "+" : "-") + name.str();
  // Checked on a bare subtarget first: LLVM aborts the process when a target
  // machine is made for an unknown or 32-bit-only CPU (e.g. i386).
  std::unique_ptr<llvm::MCSubtargetInfo> probe(target->createMCSubtargetInfo(triple, cpu, ""));
  check(probe && (cpuName == "host" || probe->isCPUStringValid(cpu)) &&
            (!llvm::Triple(triple).isX86() || probe->checkFeatures("+64bit")),
        "cpu codegen: unknown or unsupported CPU '" + cpu +
            "' (try host, x86-64, x86-64-v2, x86-64-v3, x86-64-v4)");
  // One target machine per thread (they are not shared across threads).
  auto makeMachine = [&] {
    llvm::TargetOptions options;
    std::unique_ptr<llvm::TargetMachine> machine(target->createTargetMachine(
        triple, cpu, features, options, llvm::Reloc::PIC_, std::nullopt, llvm::CodeGenOptLevel::Aggressive));
    check(machine != nullptr, "cpu codegen: cannot target CPU '" + cpu + "'");
    return machine;
  };
  std::unique_ptr<llvm::TargetMachine> machine = makeMachine();
  llvmModule->setDataLayout(machine->createDataLayout());
  llvmModule->setTargetTriple(triple);
  ObjectCode result{{}, triple, cpu, {}};
  size_t functions = 0;
  for (const llvm::Function &f : *llvmModule)
    functions += !f.isDeclaration();
  unsigned parts = codegenParts(functions);
  if (parts <= 1) {
    result.objects.push_back(optimizeAndEmit(*llvmModule, *machine));
  } else {
    // The kernels split into parts (LLVM's SplitModule: locals made hidden
    // globals, linked again by the shared library), each part optimized and
    // compiled in its own LLVM context on its own thread (bitcode between
    // contexts); the objects link into one library.
    std::vector<std::string> bitcode;
    llvm::SplitModule(*llvmModule, parts, [&](std::unique_ptr<llvm::Module> part) {
      llvm::SmallString<0> bytes;
      llvm::raw_svector_ostream os(bytes);
      llvm::WriteBitcodeToFile(*part, os);
      bitcode.emplace_back(bytes.str());
    });
    result.objects.resize(bitcode.size());
    std::vector<std::exception_ptr> failures(bitcode.size());
    std::vector<std::thread> workers;
    for (size_t i = 0; i < bitcode.size(); ++i)
      workers.emplace_back([&, i] {
        try {
          llvm::LLVMContext context;
          llvm::Expected<std::unique_ptr<llvm::Module>> part =
              llvm::parseBitcodeFile(llvm::MemoryBufferRef(bitcode[i], "part"), context);
          check(bool(part), "cpu codegen: a split part does not parse: " + llvm::toString(part.takeError()));
          std::unique_ptr<llvm::TargetMachine> own = makeMachine();
          result.objects[i] = optimizeAndEmit(**part, *own);
        } catch (...) {
          failures[i] = std::current_exception();
        }
      });
    for (std::thread &w : workers)
      w.join();
    for (const std::exception_ptr &f : failures)
      if (f)
        std::rethrow_exception(f);
  }
  // The features the runtime checks before loading (runtime/core/Executable.cpp).
  for (const char *f : {"sse4.2", "avx", "avx2", "fma", "f16c", "bmi2", "avx512f", "avx512bw",
                        "avx512dq", "avx512vl"})
    if (machine->getMCSubtargetInfo()->checkFeatures(std::string("+") + f))
      result.features.push_back(f);
  return result;
}

std::string linkSharedLibrary(const std::vector<std::string> &objects) {
  // A private folder (mkdtemp: unpredictable name, mode 0700) and the linker
  // run without a shell, so no path is ever parsed by /bin/sh.
  std::string pattern = (std::filesystem::path(temporaryFolder()) / "tensorc-link-XXXXXX").string();
  check(::mkdtemp(pattern.data()) != nullptr,
        "cpu codegen: cannot create a temporary folder: " + std::string(std::strerror(errno)));
  std::filesystem::path dir = pattern;
  std::vector<std::string> args = {"cc", "-shared", "-o", (dir / "kernels.so").string()};
  for (size_t i = 0; i < objects.size(); ++i) {
    std::string path = (dir / ("k" + std::to_string(i) + ".o")).string();
    writeFileAtomically(path, objects[i]);
    args.push_back(path);
  }
#ifdef TENSORC_CLANG_RT_BUILTINS
  // Only the helpers the code calls are taken (e.g. __truncsfbf2; see
  // codegen/CMakeLists.txt): the library keeps no dependency on them.
  if (std::filesystem::exists(TENSORC_CLANG_RT_BUILTINS))
    args.push_back(TENSORC_CLANG_RT_BUILTINS);
#endif
  args.push_back("-lm");
  std::string logPath = (dir / "link.log").string();
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 2, logPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  std::vector<char *> argv;
  for (std::string &a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid;
  int spawned = ::posix_spawnp(&pid, "cc", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  int status = -1;
  if (spawned == 0)
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  bool ok = spawned == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  std::stringstream log, library;
  log << std::ifstream(logPath).rdbuf();
  if (ok)
    library << std::ifstream(dir / "kernels.so", std::ios::binary).rdbuf();
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  check(spawned == 0, "cpu codegen: cannot run the linker 'cc': " + std::string(std::strerror(spawned)));
  check(ok, "cpu codegen: linking the kernels failed: " + log.str());
  return library.str();
}

} // namespace tensorc::codegen::cpu
