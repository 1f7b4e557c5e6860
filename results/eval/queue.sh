#!/usr/bin/env bash
# The evaluation runs in progress, one after another, each resuming where it stopped: unpacks what this
# folder holds into runs/eval first. Run from anywhere: nohup results/eval/queue.sh > runs/queue.log 2>&1 &
set -u
cd "$(dirname "$0")/../.."
. .venv/bin/activate
for saved in results/eval/*/trajectories; do
  run=runs/eval/$(basename "$(dirname "$saved")")/trajectories
  mkdir -p "$run"
  for f in "$saved"/*.gz; do [ -s "$run/$(basename "$f" .gz)" ] || gunzip -c "$f" > "$run/$(basename "$f" .gz)"; done
done
C="--bench dabench --dialect jupiter --max-turns 6 --max-tokens 768 --concurrency 4 --trials 3 --no-reformat"
run() { local out=$1; shift; echo "== $(date -u +%H:%M) $out"; datalyst eval run $C "$@" --out "runs/eval/$out" > "runs/eval/$out.log" 2>&1; echo "rc=$?"; }
run dev-small-sft --split dev --model embedded:small-sft
run dev-small-sft-lastcall --split dev --model embedded:small-sft --last-call
run dev-small-sft-preload --split dev --model embedded:small-sft --preload
run dev-small-sft-guard --split dev --model embedded:small-sft --repeat-guard
run dev-small-sft-short --split dev --model embedded:small-sft --short-tracebacks
run test-small-sft --split test --model embedded:small-sft
run test-small --split test --model embedded:small
run test-medium --split test --model embedded:medium
