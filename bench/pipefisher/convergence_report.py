#!/usr/bin/env python3
"""Time to a target validation loss, K-FAC against AdamW, from convergence.sh's result file.

    python3 bench/pipefisher/convergence_report.py convergence.json [--target LOSS]

Each optimizer's best run is the one of its learning-rate sweep with the lowest final validation
loss. The target, unless given, is the best AdamW run's final validation loss (what AdamW reaches
in the budget); the time to it is interpolated linearly in wall time between the two checkpoints
around the first crossing. Prints a table and one JSON line with the ratio (goal: K-FAC <= 0.75x
AdamW's wall time, issue 22).
"""
import argparse
import json
import sys


def time_to(points, target):
    prev = None
    for p in points:
        if p['val_loss'] <= target:
            if prev is None:
                return p['wall_s'], p['step']
            f = (prev['val_loss'] - target) / (prev['val_loss'] - p['val_loss'])
            return (prev['wall_s'] + f * (p['wall_s'] - prev['wall_s']),
                    prev['step'] + f * (p['step'] - prev['step']))
        prev = p
    return None, None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('result')
    ap.add_argument('--target', type=float)
    a = ap.parse_args()
    r = json.load(open(a.result))
    best = {}
    print(f"{'run':<16} {'steps':>6} {'final val':>9} {'step ms':>8}  validation loss by step")
    for run in r['runs']:
        v = run['validation']
        if not v:
            print(f"{run['optimizer']}-lr{run['lr']:<10g} no validation points")
            continue
        final = v[-1]['val_loss']
        ms = 1e3 * (run['mean_step_seconds'] or 0)
        curve = ' '.join(f"{p['step']}:{p['val_loss']:.3f}" for p in v)
        print(f"{run['optimizer']}-lr{run['lr']:<10g} {run.get('steps', r['steps']):6d} {final:9.4f} {ms:8.2f}  {curve}")
        if final == final and (run['optimizer'] not in best or final < best[run['optimizer']][0]):
            best[run['optimizer']] = (final, run)
    if 'adamw' not in best or 'kfac' not in best:
        print('convergence_report: a run of each optimizer with validation points is needed', file=sys.stderr)
        return 1
    target = a.target if a.target is not None else best['adamw'][0]
    summary = {'target_val_loss': target}
    for opt in ('adamw', 'kfac'):
        final, run = best[opt]
        t, step = time_to(run['validation'], target)
        summary[opt] = {'lr': run['lr'], 'final_val_loss': final, 'time_to_target_s': t,
                        'steps_to_target': step, 'mean_step_s': run['mean_step_seconds']}
    ta, tk = summary['adamw']['time_to_target_s'], summary['kfac']['time_to_target_s']
    summary['kfac_over_adamw_time'] = tk / ta if ta and tk is not None else None
    print(json.dumps(summary))
    return 0


if __name__ == '__main__':
    sys.exit(main())
