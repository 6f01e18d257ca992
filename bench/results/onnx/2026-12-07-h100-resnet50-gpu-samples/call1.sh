#!/usr/bin/env bash
# Eleventh session, call 1: build; ResNet-50 (issue 45); 355M compressed resume (issue 46).
set -u
source .gpu/s1/common.sh
trap 'log end; tar czf $O/res1.tgz -C $W res 2>/dev/null' EXIT
R=$W/res; mkdir -p $R
build_all || exit 1
# ResNet-50 at batch 256: ours (GPU-drawn samples) and PyTorch eager/compile, then A/B variants
AUTODDL_PREBUILT=$W/bin OUT=$R/rn timeout $(( $(left) - 240 )) bash bench/onnx/resnet_speed.sh device $S/rn; log "resnet rc $?"
cp $R/rn/speed.txt $O/ 2>/dev/null
med() { python3 -c "import json,statistics,sys;d=json.load(open(sys.argv[1]));s=d['step_seconds'];print('median %.2f ms loss %.4f'%(1e3*statistics.median(s[len(s)//2:]),d['loss'][-1]))" $1 2>/dev/null; }
rv() { local l=$1; shift; env "$@" timeout 60 $W/bin/train_resnet --steps 30 --quiet --out $R/rn-$l --overwrite $X > $R/rn-$l.log 2>&1; log "rn-$l rc $? $(med $R/rn-$l/metrics.json)"; }
X= rv wgrad-bf16 AUTODDL_CONV_WGRAD=bf16
X= rv own-conv AUTODDL_CONV=own
X="--profile" rv profile A=1
X="--profile" rv profile-wgrad-bf16 AUTODDL_CONV_WGRAD=bf16
X= rv default-2 A=1
# 355M compressed vs exact resume with the log-domain moment levels (bitsnap_version 2)
AUTODDL_PREBUILT=$W/bin OUT=$R/compress DATA=$W/train.txt STEPS=160 EVERY=40 MODELS=gpt2-medium CKPT=$W/ck \
  timeout $(( $(left) - 5 )) bash bench/checkpoint/compress.sh device $S/ck; log "compress rc $?"
rm -rf $W/ck
