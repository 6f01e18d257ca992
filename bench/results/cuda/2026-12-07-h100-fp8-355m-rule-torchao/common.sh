# Sourced by call*.sh: the stage unpacked, timing and logging, results tarred under $OUT at exit.
set -u
T0=$(date +%s); left() { echo $(( ${BUDGET:-570} - ($(date +%s) - T0) )); }
O=${OUT:-/tmp/out}; W=/tmp/s15; mkdir -p $O $W; R=$W/res${CALL:-}; mkdir -p $R
log() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $O/call.log; }
trap 'log end; tar czf $O/res.tgz -C $W $(basename $R) 2>/dev/null' EXIT
export NCCL_NVLS_ENABLE=0
source bench/cuda/cudnn_env.sh 2>/dev/null || true
S=$W/st; [ -d $S ] || tar xJf .gpu/s8/stage.txz -C $W
log "stage $(cat $S/commit) $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee $O/gpu.txt)"
med() { python3 -c "import json,statistics,sys;d=json.load(open(sys.argv[1]));s=d['step_seconds'];print('median %.2f mean %.2f ms'%(1e3*statistics.median(s[len(s)//2:]),1e3*statistics.mean(s[len(s)//2:])))" $1/metrics.json 2>/dev/null; }
