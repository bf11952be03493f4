#include "codegen/cpu/SharedLibrary.h"

#include "ir/core/Error.h"
#include "runtime/host/AtomicFile.h"

#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
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

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace tensorc::codegen::cpu {

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
  llvm::TargetOptions options;
  // "host": this machine's CPU and exactly the features it reports (a VM
  // may hide some that the CPU model implies).
  std::string cpu = cpuName == "host" ? llvm::sys::getHostCPUName().str() : cpuName, features;
  if (cpuName == "host")
    for (const auto &[name, enabled] : llvm::sys::getHostCPUFeatures())
      features += (features.empty() ? "" : ",") + std::string(enabled ? "+" : "-") + name.str();
  std::unique_ptr<llvm::TargetMachine> machine(target->createTargetMachine(
      triple, cpu, features, options, llvm::Reloc::PIC_, std::nullopt,
      llvm::CodeGenOptLevel::Aggressive));
  check(machine != nullptr, "cpu codegen: cannot target CPU '" + cpu + "'");
  check(cpuName == "host" || machine->getMCSubtargetInfo()->isCPUStringValid(cpu),
        "cpu codegen: unknown CPU '" + cpu + "' (try host, x86-64, x86-64-v2, x86-64-v3, x86-64-v4)");
  llvmModule->setDataLayout(machine->createDataLayout());
  llvmModule->setTargetTriple(triple);
  // -O3 over the module, then code generation.
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder builder(machine.get());
  builder.registerModuleAnalyses(mam);
  builder.registerCGSCCAnalyses(cam);
  builder.registerFunctionAnalyses(fam);
  builder.registerLoopAnalyses(lam);
  builder.crossRegisterProxies(lam, fam, cam, mam);
  builder.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3).run(*llvmModule, mam);
  llvm::SmallString<0> object;
  llvm::raw_svector_ostream os(object);
  llvm::legacy::PassManager codegen;
  check(!machine->addPassesToEmitFile(codegen, os, nullptr, llvm::CodeGenFileType::ObjectFile),
        "cpu codegen: the target cannot emit object files");
  codegen.run(*llvmModule);
  ObjectCode result{std::string(object.str()), triple, cpu, {}};
  // The features the runtime checks before loading (runtime/core/Executable.cpp).
  for (const char *f : {"sse4.2", "avx", "avx2", "fma", "f16c", "bmi2", "avx512f", "avx512bw",
                        "avx512dq", "avx512vl"})
    if (machine->getMCSubtargetInfo()->checkFeatures(std::string("+") + f))
      result.features.push_back(f);
  return result;
}

std::string linkSharedLibrary(const std::vector<std::string> &objects) {
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      ("tensorc-link-" + std::to_string(::getpid()) + "-" + std::to_string(std::rand()));
  std::filesystem::create_directories(dir);
  std::string command = "cc -shared -o " + (dir / "kernels.so").string();
  for (size_t i = 0; i < objects.size(); ++i) {
    std::string path = (dir / ("k" + std::to_string(i) + ".o")).string();
    writeFileAtomically(path, objects[i]);
    command += " " + path;
  }
  command += " -lm 2> " + (dir / "link.log").string();
  int status = std::system(command.c_str());
  std::stringstream log, library;
  log << std::ifstream(dir / "link.log").rdbuf();
  if (status == 0)
    library << std::ifstream(dir / "kernels.so", std::ios::binary).rdbuf();
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  check(status == 0, "cpu codegen: linking the kernels failed: " + log.str());
  return library.str();
}

} // namespace tensorc::codegen::cpu
