# Sourced by the GPU-machine scripts: the CUDA attention and conv2d load libcudnn.so.9 when a
# program runs (backends/cuda/kernels/CudnnGraph.cu) and run their own kernels where they cannot.
# The GPU machines have no libcudnn under /usr/local/cuda, only PyTorch's nvidia-cudnn wheel:
# where the library path has none, put the wheel's on LD_LIBRARY_PATH (exported, so mpirun -x
# and torchrun children see it too). Prints which libcudnn the programs will find.
if ! ldconfig -p 2>/dev/null | grep -q 'libcudnn\.so\.9 ' &&
  ! ls /usr/local/cuda/lib64/libcudnn.so.9 /usr/local/cuda/lib/libcudnn.so.9 >/dev/null 2>&1; then
  _autoddl_cudnn=$(python3 -c 'import nvidia.cudnn, os; print(os.path.join(list(nvidia.cudnn.__path__)[0], "lib"))' 2>/dev/null || true)
  if [ -n "$_autoddl_cudnn" ] && [ -e "$_autoddl_cudnn/libcudnn.so.9" ]; then
    export LD_LIBRARY_PATH=$_autoddl_cudnn${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    echo "cudnn_env: libcudnn.so.9 from $_autoddl_cudnn"
  else
    echo "cudnn_env: no libcudnn.so.9 here: attention and conv2d run the own kernels"
  fi
  unset _autoddl_cudnn
fi
