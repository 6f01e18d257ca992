#!/bin/bash
# usage: runs.sh TRAIN TAG   (compressed run to step 80, then two resumes to 160)
set -e
T=$1; tag=$2
D="--data /tmp/gc/train.txt --quiet"
rm -rf /tmp/cw/$tag-cz
mpirun --allow-run-as-root -np 1 $T --steps 80 $D --save /tmp/cw/$tag-cz --save-every 40 --checkpoint-compress --out /tmp/cw/$tag-compressed --overwrite > /tmp/cw/$tag-compressed.log 2>&1
mpirun --allow-run-as-root -np 1 $T --steps 160 $D --resume /tmp/cw/$tag-cz/step-80 --out /tmp/cw/$tag-resumed-compressed --overwrite > /tmp/cw/$tag-rc.log 2>&1
[ -d /tmp/cw/$tag-resumed-exact ] || mpirun --allow-run-as-root -np 1 $T --steps 160 $D --resume /tmp/cw/base-ck/step-80 --out /tmp/cw/$tag-resumed-exact --overwrite > /tmp/cw/$tag-re.log 2>&1
echo done
