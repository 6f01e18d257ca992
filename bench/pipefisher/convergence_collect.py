#!/usr/bin/env python3
"""Collects convergence.sh's runs into OUT/convergence.json (the device mode's last step; rerun it
on a copied-back OUT when the call ran out of time before it).

    python3 bench/pipefisher/convergence_collect.py OUT STEPS EVAL_EVERY EVAL_STEPS COMMIT REFRESH [--device NAME]

REFRESH 0: K-FAC ran at its plan's own refresh intervals (convergence.sh KFAC_REFRESH=plan).
The TRAIN_FLAGS and KFAC_FLAGS variables (convergence.sh) are recorded as train_flags and kfac_flags.

A run's validation points are the evaluations that exist: a checkpoint whose evaluation did not run
is left out. --device: the GPU's name where nvidia-smi is not there to ask.
"""
import glob, json, os, subprocess, sys, datetime
args = sys.argv[1:]
device = None
if '--device' in args:
    i = args.index('--device')
    device = args[i + 1]
    del args[i:i + 2]
out, steps, every, eval_steps, commit, refresh = args[0], int(args[1]), int(args[2]), int(args[3]), args[4], int(args[5])
runs = []
for d in sorted(glob.glob(os.path.join(out, 'runs', '*'))):
    name = os.path.basename(d)
    m = json.load(open(os.path.join(d, 'metrics.json')))
    cum, t = [0.0], 0.0
    for s in m['step_seconds']:
        t += s
        cum.append(t)
    points = []
    for e in sorted(glob.glob(os.path.join(out, 'eval', name, 'step-*')), key=lambda p: int(p.rsplit('-', 1)[1])):
        n = int(e.rsplit('-', 1)[1])
        if not os.path.exists(os.path.join(e, 'metrics.json')):  # cut off mid-evaluation
            continue
        em = json.load(open(os.path.join(e, 'metrics.json')))
        points.append({'step': n, 'wall_s': cum[min(n, len(cum) - 1)], 'val_loss': sum(em['loss']) / len(em['loss'])})
    opt, lr = name.split('-lr')
    runs.append({'optimizer': opt, 'lr': float(lr), 'steps': len(m['step_seconds']), 'train_loss': m['loss'], 'step_seconds': m['step_seconds'],
                 'mean_step_seconds': m.get('mean_step_seconds'), 'validation': points})
gpu = device if device is not None else subprocess.run(
    ['nvidia-smi', '--query-gpu=name,driver_version', '--format=csv,noheader'],
    capture_output=True, text=True).stdout.strip()
plan_k = os.path.join(out, 'kfac-plan-refresh', 'metrics.json')
plan_k_step = json.load(open(plan_k)).get('mean_step_seconds') if os.path.exists(plan_k) else None
json.dump({'date': datetime.datetime.now(datetime.timezone.utc).isoformat(), 'device': gpu, 'commit': commit,
           'train_flags': os.environ.get('TRAIN_FLAGS', ''), 'kfac_flags': os.environ.get('KFAC_FLAGS', ''),
           'steps': steps, 'eval_every': every, 'eval_steps': eval_steps, 'kfac_refresh': refresh,
           'kfac_step_s_at_plan_refresh': plan_k_step, 'runs': runs},
          open(os.path.join(out, 'convergence.json'), 'w'), indent=1)
print('wrote', os.path.join(out, 'convergence.json'), len(runs), 'runs')
