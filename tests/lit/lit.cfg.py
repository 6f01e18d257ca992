# lit configuration for the sbp dialect tests. Run through ctest (test "lit"),
# which passes where autoddl-opt and LLVM's FileCheck live, or by hand:
#   lit.py -sv tests/lit --param autoddl_opt=build/tools/autoddl-opt/autoddl-opt
import os

import lit.formats

config.name = "autoddl-sbp"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".mlir"]
config.test_source_root = os.path.dirname(__file__)

params = lit_config.params
autoddl_opt = params.get("autoddl_opt", "autoddl-opt")
llvm_tools_dir = params.get("llvm_tools_dir", "/usr/lib/llvm-19/bin")
# Keep lit's Output/ directories out of the source tree.
config.test_exec_root = params.get(
    "exec_root", os.path.join(config.test_source_root, "..", "..", "build", "tests", "lit"))

config.environment["PATH"] = os.pathsep.join(
    [os.path.dirname(os.path.abspath(autoddl_opt)), llvm_tools_dir, os.environ.get("PATH", "")])
