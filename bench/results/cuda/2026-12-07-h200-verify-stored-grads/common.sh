# Sourced by the thirteenth session's call scripts (repository root on the GPU machine).
T0=$(date +%s); left() { echo $(( ${BUDGET:-585} - ($(date +%s) - T0) )); }
O=${OUT:-/tmp/out}; W=/tmp/s13; mkdir -p $O $W
log() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $O/call.log; }
export NCCL_NVLS_ENABLE=0
source bench/cuda/cudnn_env.sh 2>/dev/null || true
S=$W/st
if [ ! -f $S/commit ] || [ "$(cat $S/commit)" != "$(tar xJf .gpu/s4/stage.txz -O st/commit)" ]; then
  rm -rf $S $W/bin $W/binb $W/pre; tar xJf .gpu/s4/stage.txz -C $W
  xz -dc $S/conv/corpus/train.txt.xz > $W/train.txt 2>/dev/null || true
fi
log "stage $(cat $S/commit) $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee $O/gpu.txt)"
med() { python3 -c "import json,statistics,sys;d=json.load(open(sys.argv[1]));s=d['step_seconds'];print('median %.2f ms loss %.4f'%(1e3*statistics.median(s[len(s)//2:]),d['loss'][-1]))" $1 2>/dev/null; }
# One runtime build for every main-branch program of the session (bench/cuda/build_projects.sh).
build_all() {
  [ -x $W/bin/train_conv-kfac ] && { log "prebuilt kept"; return 0; }
  mkdir -p $W/projects
  ln -sfn $S/rn/resnet $W/projects/resnet
  for p in gpt2-single gpt2-medium-single; do ln -sfn $S/p/$p $W/projects/$p; done
  for o in adamw kfac; do ln -sfn $S/conv/$o $W/projects/conv-$o; done
  bash bench/cuda/build_projects.sh $W/bin $O/build.log $W/projects/* || { log "build failed"; return 1; }
  mkdir -p $W/pre/conv; for o in adamw kfac; do ln -sf $W/bin/train_conv-$o $W/pre/conv/train_$o; done
  log "built"
}
build_bnsmall() {
  [ -x $W/binb/train_resnet-bnsmall ] && return 0
  bash bench/cuda/build_projects.sh $W/binb $O/buildb.log $S/rn/resnet-bnsmall && log "built bnsmall"
}
