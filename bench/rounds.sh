#!/usr/bin/env bash
# static.sh in ROUNDS rounds with the server order rotated each round, and
# the medians: one run of static.sh on this noisy machine varies by 10-30 %
# per server, and whoever runs first or last meets a different machine.
#
# Usage: ROUNDS=5 MODES="ka-100k" [LUXD_BASE=/path/luxd] bash bench/rounds.sh [SERVER...]
#   SERVER: as static.sh (default: luxd nginx lighttpd h2o, and luxd-base
#   when LUXD_BASE is set). Other settings (DURATION, WARMUP, CONNS...) go to
#   static.sh as they are; DURATION defaults to 5 and WARMUP to 1 here.
# Prints, per mode, each server's median CPU us per request (its processes'
# utime+stime) and median core us per request (CPU 0 busy, softirq
# included), the ratio of the first to the best of nginx, lighttpd and h2o,
# and every round's figure; writes them to bench/results/rounds-DATE.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-5}
export DURATION=${DURATION:-5} WARMUP=${WARMUP:-1}
servers=("$@")
if ((${#servers[@]} == 0)); then
  servers=(luxd nginx lighttpd h2o)
  [[ -n ${LUXD_BASE:-} ]] && servers=(luxd luxd-base nginx lighttpd h2o)
fi
n=${#servers[@]}
out=bench/results/rounds-$(date +%Y%m%d-%H%M%S)
mkdir -p bench/results
: >"$out.tsv"
for ((r = 0; r < ROUNDS; r++)); do
  order=("${servers[@]:$((r % n))}" "${servers[@]:0:$((r % n))}")
  echo "bench: round $((r + 1)) of $ROUNDS: ${order[*]}" >&2
  dir=$(bash bench/static.sh "${order[@]}" 2>&1 | sed -n 's/^Raw results: //p')
  [[ -n $dir && -f $dir/summary.tsv ]] || { echo "bench: round $((r + 1)): static.sh gave no results" >&2; exit 1; }
  tail -n +2 "$dir/summary.tsv" >>"$out.tsv"
done
python3 - "$out.tsv" "${servers[0]}" <<'PY' | tee "$out.txt"
import sys, statistics, collections
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    f = line.rstrip('\n').split('\t')
    if len(f) < 16 or f[12] != 'ok':
        continue
    core = float(f[15]) if f[15] not in ('', '-') else float('nan')
    rows[(f[1], f[0])].append((float(f[10]), core))
first = sys.argv[2]
for mode in dict.fromkeys(k[0] for k in rows):
    print(f"== {mode}: median of {max(len(v) for k, v in rows.items() if k[0] == mode)} rounds")
    med = {s: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v), v)
           for (m, s), v in rows.items() if m == mode}
    peers = [med[s][0] for s in ('nginx', 'lighttpd', 'h2o') if s in med]
    best = min(peers) if peers else None
    for s, (cpu, core, v) in sorted(med.items(), key=lambda kv: kv[1][0]):
        ratio = f"{cpu / best:5.2f}" if best else "    -"
        print(f"  {s:10s} CPU us/req {cpu:9.2f}  core us/req {core:9.2f}  /best peer {ratio}"
              f"  rounds: {' '.join(f'{x[0]:.1f}' for x in v)}")
PY
echo "bench: rounds in $out.tsv, table in $out.txt" >&2
