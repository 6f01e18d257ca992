#!/usr/bin/env bash
# Thirteenth session, call 2: speed. ResNet-50 at batch 256 (main; the bnsmall batch norm; cuDNN
# engines autotuned; per-op profile) against PyTorch eager and torch.compile in the same call;
# GPT-2 124M/355M programs alone (the residual stream's gradients now stored by its adds).
set -u
source .gpu/s4/common.sh
trap 'log end; tar czf $O/res2.tgz -C $W res2 2>/dev/null' EXIT
R=$W/res2; mkdir -p $R
build_all > $R/build_all.log 2>&1 || exit 1
build_bnsmall >> $R/build_all.log 2>&1
rv() { local l=$1 bin=$2; shift 2; [ $(left) -gt 40 ] || { log "skip $l"; return; }
  env "$@" timeout 60 $bin --steps 40 --quiet --out $R/rn-$l --overwrite $X > $R/rn-$l.log 2>&1; log "rn-$l rc $? $(med $R/rn-$l/metrics.json)"; }
X= rv main $W/bin/train_resnet A=1
X= rv bnsmall $W/binb/train_resnet-bnsmall A=1
X= rv tuned $W/bin/train_resnet AUTODDL_CONV_AUTOTUNE=1
X= rv bnsmall-tuned $W/binb/train_resnet-bnsmall AUTODDL_CONV_AUTOTUNE=1
AUTODDL_PREBUILT=$W/bin OUT=$R/rn STEPS=40 timeout 240 bash bench/onnx/resnet_speed.sh device $S/rn > $R/rn.log 2>&1; log "resnet+pytorch rc $?"
cat $R/rn/speed.txt 2>/dev/null
X=--profile rv profile $W/bin/train_resnet A=1
X="--profile" rv bnsmall-profile $W/binb/train_resnet-bnsmall A=1
for m in gpt2 gpt2-medium; do [ $(left) -gt 40 ] || break
  timeout 60 $W/bin/train_$m-single --steps 30 --quiet --out $R/$m --overwrite > $R/$m.log 2>&1
  log "$m rc $? $(med $R/$m/metrics.json) $(python3 -c "import json,statistics,sys;d=json.load(open(sys.argv[1]));s=d['step_seconds'][10:];print('tok/s %.0f' % (d['tokens_per_second'] if 'tokens_per_second' in d else 0))" $R/$m/metrics.json 2>/dev/null)"
done
