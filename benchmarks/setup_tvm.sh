#!/usr/bin/env bash
# Optional: create a virtualenv with Apache TVM 0.27 for benchmarks/tvm_reference.py and
# `benchmarks/tune_gemm.py --tvm-python <venv>/bin/python`. Never run by CI or the tests, and never
# installed into Ingot's own environment (TVM brings its own numpy, xgboost, ...).
#
#   bash benchmarks/setup_tvm.sh /work/tvm-venv        # ~600 MB, wheels only (no compilation)
#
# Pins, and why:
# - apache-tvm-ffi==0.1.14.post0: apache-tvm 0.27.0 asks for >=0.1.14.post0, but with 0.1.15.post2
#   (pip's pick) creating a MetaSchedule TuneContext with a space generator segfaults in
#   tvm::ffi::ToJSONGraph (an ABI mismatch); 0.1.14.post0 works.
# - xgboost-cpu: MetaSchedule's default cost model imports `xgboost`; the CPU-only wheel avoids the
#   CUDA (nccl) packages that the plain `xgboost` wheel pulls in.
# - psutil, cloudpickle, tornado: TVM's popen worker pool (builder/runner processes).
set -euo pipefail
VENV="${1:?usage: setup_tvm.sh <venv directory, outside the repository>}"
python3 -m venv "$VENV"
"$VENV/bin/pip" install --only-binary=:all: \
    "apache-tvm==0.27.0" "apache-tvm-ffi==0.1.14.post0" numpy xgboost-cpu psutil cloudpickle tornado
"$VENV/bin/python" - <<'PY'
import tvm
from tvm.s_tir import meta_schedule  # noqa: F401  (the tuner imports)
import xgboost  # noqa: F401
print("TVM", tvm.__version__, "ready; host CPU for LLVM:", tvm.target.codegen.llvm_get_system_cpu())
PY
echo "use: python benchmarks/tune_gemm.py --tvm-python $VENV/bin/python ..."
