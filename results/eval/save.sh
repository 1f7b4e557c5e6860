#!/usr/bin/env bash
# Save what the runs of queue.txt have so far (config.json and gzipped trajectories) into this folder, to commit.
set -eu
cd "$(dirname "$0")/../.."
grep -v '^#' results/eval/queue.txt | while read -r name _; do
  [ -n "$name" ] && [ -d "runs/eval/$name/trajectories" ] || continue
  mkdir -p "results/eval/$name/trajectories"
  # the settings as the run was made (a resumed run rewrites the ones that change no result, such as concurrency)
  [ -e "results/eval/$name/config.json" ] || cp "runs/eval/$name/config.json" "results/eval/$name/"
  for f in "runs/eval/$name"/trajectories/*.jsonl; do gzip -nc "$f" > "results/eval/$name/trajectories/$(basename "$f").gz"; done
  echo "$name: $(cat "runs/eval/$name"/trajectories/*.jsonl | wc -l) trajectories"
done
