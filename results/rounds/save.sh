#!/usr/bin/env bash
# Save what the rounds have made so far into results/rounds/rK, to commit: the sampled and the expert's trajectories
# (gzipped, with their run records), the search trees, the trained adapter once its step is done and the dev run.
# round.sh unpacks them before it starts; the steps between (judging, filtering, exports) are made again from them.
set -eu
cd "$(dirname "$0")/../.."
for round in runs/rounds/r*/; do
  round=${round%/}; out=results/rounds/$(basename "$round")
  for source in react expert; do
    [ -s "$round/$source/samples.jsonl" ] || continue
    mkdir -p "$out/$source"
    cp "$round/$source/run.json" "$round/$source/samples.jsonl.manifest.json" "$out/$source/"
    gzip -nc "$round/$source/samples.jsonl" > "$out/$source/samples.jsonl.gz"
    echo "$round/$source: $(wc -l < "$round/$source/samples.jsonl") trajectories"
  done
  if [ -d "$round/trees" ]; then mkdir -p "$out"; tar -C "$round" -czf "$out/trees.tar.gz" trees; fi
  if [ -e "$round/sft-small.done" ]; then tar -C "$round" -czf "$out/sft-small.tar.gz" sft-small/adapter; fi
  if [ -d "$round/dev-small/trajectories" ]; then
    mkdir -p "$out/dev-small/trajectories"
    cp "$round/dev-small/config.json" "$out/dev-small/"
    for f in "$round"/dev-small/trajectories/*.jsonl; do gzip -nc "$f" > "$out/dev-small/trajectories/$(basename "$f").gz"; done
  fi
done
