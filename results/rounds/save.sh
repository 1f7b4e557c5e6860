#!/usr/bin/env bash
# Save what the rounds have made so far into results/rounds/rK, to commit: the sampled and the expert's trajectories
# (gzipped, with their run records), the search trees, the trained adapter once its step is done and the dev run.
# round.sh unpacks them before it starts; the steps between (judging, filtering, exports) are made again from them.
# The model-written questions every round draws from are kept too (queries.jsonl.gz).
set -eu
cd "$(dirname "$0")/../.."
if [ -e runs/synth/queries.done ]; then gzip -nc runs/synth/queries.jsonl > results/rounds/queries.jsonl.gz; fi
for round in runs/rounds/r*/; do
  round=${round%/}; out=results/rounds/$(basename "$round")
  for source in react queries expert; do
    [ -s "$round/$source/samples.jsonl" ] || continue
    mkdir -p "$out/$source"
    cp "$round/$source/run.json" "$round/$source/samples.jsonl.manifest.json" "$out/$source/"
    gzip -nc "$round/$source/samples.jsonl" > "$out/$source/samples.jsonl.gz"
    echo "$round/$source: $(wc -l < "$round/$source/samples.jsonl") trajectories"
  done
  if [ -d "$round/trees" ]; then mkdir -p "$out"; tar -C "$round" -czf "$out/trees.tar.gz" trees; fi
  for size in small medium; do
    if [ -e "$round/sft-$size.done" ]; then  # the adapter and the record of its training, not the checkpoints
      tar -C "$round" -czf "$out/sft-$size.tar.gz" --exclude "sft-$size/checkpoints" "sft-$size"
    fi
    if [ -d "$round/dev-$size/trajectories" ]; then
      mkdir -p "$out/dev-$size/trajectories"
      cp "$round/dev-$size/config.json" "$out/dev-$size/"
      for f in "$round/dev-$size"/trajectories/*.jsonl; do
        gzip -nc "$f" > "$out/dev-$size/trajectories/$(basename "$f").gz"
      done
    fi
  done
done
