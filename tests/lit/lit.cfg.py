# lit configuration of dtf's compiler tests: .mlir and .dtf files with RUN lines.
import os

import lit.formats

config.name = "dtf"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".dtf"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.dtf_obj_root, "tests", "lit")
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "Inputs"]

# Our tools first, then LLVM's FileCheck, not and count.
config.environment["PATH"] = os.pathsep.join(
    [config.dtf_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", os.environ["PATH"])]
)
config.substitutions.append(("%PYTHON", config.python_executable))

# GPU kernels need the CUDA toolkit's ptxas (docs/kernels.md). CMake looked
# for it once (DTF_CUDA_TOOLKIT): where it found none, the tests that check
# GPU code are reported UNSUPPORTED; where it did, they must run.
if config.have_cuda_toolkit:
    ptxas = os.path.join(config.cuda_toolkit, "bin", "ptxas")
    if not os.path.exists(ptxas):
        lit_config.fatal(ptxas + " was there when the build was configured and is gone")
    config.available_features.add("cuda")
