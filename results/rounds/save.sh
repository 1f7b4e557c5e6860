#!/usr/bin/env bash
# Save what the rounds have made so far into results/rounds/rK, to commit: the draws of tasks, the sampled and the
# expert's trajectories (gzipped, with their run records), the search trees, the records of the trained models (their
# loss, config and examples; the weights are trained again where they are missing) and the dev runs.
# round.sh unpacks them before it starts; the steps between (judging, filtering, exports) are made again from them.
# The model-written questions every round draws from are kept too (queries.jsonl.gz).
set -eu
cd "$(dirname "$0")/../.."
if [ -e runs/synth/queries.done ]; then gzip -nc runs/synth/queries.jsonl > results/rounds/queries.jsonl.gz; fi
for round in runs/rounds/r*/; do
  round=${round%/}; out=results/rounds/$(basename "$round")
  mkdir -p "$out" && tar -C "$round" -czf "$out/tasks.tar.gz" tasks  # the round's draws
  for source in react queries expert band; do
    [ -s "$round/$source/samples.jsonl" ] || continue
    mkdir -p "$out/$source"
    for f in run.json samples.jsonl.manifest.json; do  # the record of when and how the sampling began: a resumed
      [ -e "$out/$source/$f" ] || cp "$round/$source/$f" "$out/$source/"  # run (even one with nothing left) rewrites it
    done
    gzip -nc "$round/$source/samples.jsonl" > "$out/$source/samples.jsonl.gz"
    echo "$round/$source: $(wc -l < "$round/$source/samples.jsonl") trajectories"
  done
  if [ -d "$round/trees" ]; then tar -C "$round" -czf "$out/trees.tar.gz" trees; fi
  for trained in "$round"/sft-*/ "$round"/rl-*/; do  # the record of a finished training, not the weights (35-75 MB
    trained=$(basename "$trained")                   # each): another machine trains them again from the trajectories
    [ -e "$round/$trained/loss.png" ] || [ -e "$round/$trained/reward.png" ] || continue  # drawn when it ends
    mkdir -p "$out/$trained"
    for f in config.json train.manifest.json log.jsonl examples.txt loss.png reward.png; do
      [ -e "$round/$trained/$f" ] && cp "$round/$trained/$f" "$out/$trained/"
    done
  done
  for dev in "$round"/dev-*/; do
    dev=$(basename "$dev")
    if [ -d "$round/$dev/trajectories" ]; then
      mkdir -p "$out/$dev/trajectories"
      cp "$round/$dev/config.json" "$out/$dev/"
      for f in "$round/$dev"/trajectories/*.jsonl; do gzip -nc "$f" > "$out/$dev/trajectories/$(basename "$f").gz"; done
    fi
  done
done
