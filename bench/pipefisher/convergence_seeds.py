#!/usr/bin/env python3
"""K-FAC against AdamW over several seeds: convergence.sh result files, one per seed.

    for s in 1 2 3; do
      TRAIN_FLAGS="--warmup 100 --lr-decay cosine --seed $s" ... \
        bash bench/pipefisher/convergence.sh device DIR OUT/seed-$s
    done
    python3 bench/pipefisher/convergence_seeds.py OUT/seed-*/convergence.json [--target LOSS]

A single run is not a result when the runs of one optimizer differ as much as the optimizers do
(GPT-2 124M, AdamW 5e-4: 1.455 on an H200, 1.616 on an H100 after a loss spike;
bench/results/pipefisher/2026-12-07-h200-kfac-adam-graft-gpt2/). Runs are grouped by optimizer,
learning rate, step count and (K-FAC) program flags; per group the final validation loss's mean, standard deviation and
range over the seeds. Each optimizer's best group is the lowest mean; the target, unless given,
is AdamW's best mean final loss. Time to it: per seed, interpolated as convergence_report.py does
(a seed that never reaches it counts as not reached); the ratio is K-FAC's mean time over AdamW's
among the seeds that reached it, with how many did. Prints a table and one JSON line.
"""
import argparse
import json
import statistics
import sys

from convergence_report import time_to


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('results', nargs='+')
    ap.add_argument('--target', type=float)
    a = ap.parse_args()
    groups = {}
    for path in a.results:
        r = json.load(open(path))
        for run in r['runs']:
            if not run['validation']:
                continue
            flags = r.get('kfac_flags', '') if run['optimizer'] == 'kfac' else ''
            key = (run['optimizer'], run['lr'], run['validation'][-1]['step'], flags)
            groups.setdefault(key, []).append(run)
    if not groups:
        sys.exit('convergence_seeds.py: no run with validation points')
    print(f"{'optimizer':<8} {'lr':>8} {'steps':>6} {'seeds':>5} {'mean final':>10} {'sd':>7} "
          f"{'min':>7} {'max':>7} {'step ms':>8}  flags")
    best = {}
    for (opt, lr, steps, flags), runs in sorted(groups.items()):
        finals = [run['validation'][-1]['val_loss'] for run in runs]
        mean = statistics.fmean(finals)
        sd = statistics.stdev(finals) if len(finals) > 1 else float('nan')
        ms = 1e3 * statistics.fmean(run['mean_step_seconds'] or 0 for run in runs)
        print(f"{opt:<8} {lr:>8g} {steps:>6} {len(runs):>5} {mean:>10.4f} {sd:>7.4f} "
              f"{min(finals):>7.4f} {max(finals):>7.4f} {ms:>8.2f}  {flags}")
        if opt not in best or mean < best[opt][0]:
            best[opt] = (mean, (lr, steps, flags), runs)
    if 'adamw' not in best or 'kfac' not in best:
        sys.exit('convergence_seeds.py: runs of both optimizers are needed')
    target = a.target if a.target is not None else best['adamw'][0]
    summary = {'target_val_loss': target, 'seed_files': len(a.results)}
    for opt in ('adamw', 'kfac'):
        mean, (lr, steps, flags), runs = best[opt]
        times = [time_to(run['validation'], target)[0] for run in runs]
        reached = [t for t in times if t is not None]
        summary[opt] = {'lr': lr, 'steps': steps, 'flags': flags, 'seeds': len(runs),
                        'mean_final_val_loss': mean,
                        'reached_target': len(reached),
                        'mean_time_to_target_s': statistics.fmean(reached) if reached else None}
    ta = summary['adamw']['mean_time_to_target_s']
    tk = summary['kfac']['mean_time_to_target_s']
    summary['kfac_over_adamw_time'] = tk / ta if ta and tk is not None else None
    print(json.dumps(summary))
    return 0


if __name__ == '__main__':
    sys.exit(main())
