# lit configuration for tensorc's regression tests.
import os
import lit.formats

config.name = "tensorc"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".mlir", ".test"]
config.excludes = ["Inputs", "consumer", "gpu", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "lit.site.cfg.py.in", "unit", "Inputs"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.tensorc_binary_dir, "test")

# Tools: tensorc, tensorc-opt, FileCheck, not, count.
paths = [config.tensorc_tools_dir, config.llvm_tools_dir]
config.environment["PATH"] = os.pathsep.join(paths + [config.environment.get("PATH", os.environ.get("PATH", ""))])
config.substitutions.append(("%python", config.python_executable))
config.substitutions.append(("%examples", os.path.join(config.tensorc_source_dir, "examples")))
config.substitutions.append(("%tensorc_src", config.tensorc_source_dir))
config.substitutions.append(("%tensorc_build", config.tensorc_binary_dir))
config.substitutions.append(("%mlir_include", config.mlir_include_dir))

# A Python with NumPy for the binding's tests (python/tensorc): lit's own, or
# Debian's (python3-numpy, installed by scripts/setup.sh). Without one the
# tests are UNSUPPORTED, which lit reports as such (never as passed).
import shutil
import subprocess
for candidate in (config.python_executable, "/usr/bin/python3", shutil.which("python3")):
    if candidate and subprocess.run([candidate, "-c", "import numpy"], capture_output=True).returncode == 0:
        config.available_features.add("numpy")
        config.substitutions.append(("%numpy_python", candidate))
        break
# ... and one with PyTorch too (python3-torch) for the exporter (python/tensorc/torch).
for candidate in (config.python_executable, "/usr/bin/python3", shutil.which("python3")):
    if candidate and subprocess.run([candidate, "-c", "import numpy, torch.fx"], capture_output=True).returncode == 0:
        config.available_features.add("torch")
        config.substitutions.append(("%torch_python", candidate))
        break

# scripts/sanitize.sh runs the suite on an ASan+UBSan build: tests that link
# an outside program against the installed library or check `ldd` say
# `UNSUPPORTED: asan`.
# `%fuzz_graphs`: how many random graphs the differential fuzz test runs
# (300; 60 under ASan, where 300 and their gradients took 5.4 minutes of
# CI's sanitizer phase and 100 still 77 s; the plain run keeps all 300). `%fuzz_special`: those
# with nan, +-inf and -0.0 inputs (100; 30 under ASan). `%manifest_edits`:
# random artifact manifest edits (150; 20 under ASan).
if os.environ.get("TENSORC_LIT_ASAN"):
    config.available_features.add("asan")
    for var in ("ASAN_OPTIONS", "UBSAN_OPTIONS"):
        if var in os.environ:
            config.environment[var] = os.environ[var]
    config.substitutions.append(("%fuzz_graphs", "60"))
    config.substitutions.append(("%fuzz_special", "30"))
    config.substitutions.append(("%manifest_edits", "20"))
else:
    config.substitutions.append(("%fuzz_graphs", "300"))
    config.substitutions.append(("%fuzz_special", "100"))
    config.substitutions.append(("%manifest_edits", "150"))

# Open MPI (openmpi-bin, libopenmpi-dev; installed by scripts/setup.sh) for
# SPMD programs run as one process per device. `%mpirun N` launches N
# processes, as root too (CI containers) and more than the cores.
if shutil.which("mpirun"):
    config.available_features.add("mpi")
    config.substitutions.append(("%mpirun", "mpirun --allow-run-as-root --oversubscribe -np"))
    for var in ("OMPI_MCA_plm", "OMPI_MCA_btl"):
        if var in os.environ:
            config.environment[var] = os.environ[var]
