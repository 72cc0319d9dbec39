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

# GPU kernels need the CUDA toolkit's ptxas (docs/kernels.md); without it
# the tests that check GPU code are reported UNSUPPORTED.
if os.path.exists("/usr/local/cuda/bin/ptxas"):
    config.available_features.add("cuda")
