#!/usr/bin/env bash
# The evaluation runs in progress, one after another, each resuming where it stopped: unpacks what this folder
# holds into runs/eval first, then makes the runs of queue.txt in order, reading it again before each run, so it
# can be edited while this runs. A finished run leaves runs/eval/NAME.done.
# Run from anywhere: nohup results/eval/queue.sh > runs/queue.log 2>&1 &
set -u
cd "$(dirname "$0")/../.."
. .venv/bin/activate
for saved in results/eval/*/trajectories; do
  run=runs/eval/$(basename "$(dirname "$saved")")
  mkdir -p "$run/trajectories"
  [ -s "$run/config.json" ] || cp "$(dirname "$saved")/config.json" "$run/"
  for f in "$saved"/*.gz; do
    [ -s "$run/trajectories/$(basename "$f" .gz)" ] || gunzip -c "$f" > "$run/trajectories/$(basename "$f" .gz)"
  done
done
# The completion cache is rebuilt from the saved trajectories: a run one scaffold change apart from a saved one
# computes only the turns where they differ (datalyst eval cache; docs/evaluation.md)
[ -d runs/cache ] || for run in runs/eval/*/; do datalyst eval cache "$run" --to runs/cache > /dev/null; done
[ -s runs/tasks/dev.jsonl ] || python -c "from datalyst.eval import load_bench; from datalyst.tasks import split_tasks, write_tasks
write_tasks(split_tasks(load_bench('dabench', None), 'dabench', 'dev'), 'runs/tasks/dev.jsonl')"
[ -s runs/tasks/dev-files.jsonl ] || datalyst synth convert runs/tasks/dev.jsonl --out runs/tasks/dev-files.jsonl
[ -s runs/tasks/dev-layouts.jsonl ] || datalyst synth convert runs/tasks/dev.jsonl --out runs/tasks/dev-layouts.jsonl --kinds json-nested,xlsx-sheets
[ -s runs/tasks/test.jsonl ] || python -c "from datalyst.eval import load_bench; from datalyst.tasks import split_tasks, write_tasks
write_tasks(split_tasks(load_bench('dabench', None), 'dabench', 'test'), 'runs/tasks/test.jsonl')"
# The test questions with their files in every other kind the agent reads (a trained model must beat its base on each)
[ -s runs/tasks/test-kinds.jsonl ] || datalyst synth convert runs/tasks/test.jsonl --out runs/tasks/test-kinds.jsonl \
  --kinds json,json-nested,tsv,xlsx,xlsx-sheets,parquet,sqlite,jsonl
if [ ! -s runs/tasks/analyst/tasks.jsonl ]; then
  python -c "import vega_datasets, palmerpenguins" 2>/dev/null || pip install -q vega_datasets==0.9.0 palmerpenguins==0.1.6
  python results/analyst/build.py --out runs/tasks/analyst > /dev/null
fi
C="--bench dabench --dialect jupiter --max-turns 6 --max-tokens 768 --concurrency 4 --trials 3 --no-reformat --completion-cache runs/cache"
while next=$(grep -v '^#' results/eval/queue.txt | while read -r name args; do
               [ -n "$name" ] && [ ! -e "runs/eval/$name.done" ] && { echo "$name $args"; break; }; done) && [ -n "$next" ]; do
  read -r name args <<< "$next"
  echo "== $(date -u +%H:%M) $name"
  # later options win: a run's own --bench or --trials replaces the common one
  if datalyst eval run $C $args --out "runs/eval/$name" > "runs/eval/$name.log" 2>&1; then
    touch "runs/eval/$name.done"; echo "done $name"
    datalyst eval cache "runs/eval/$name" --to runs/cache > /dev/null  # its turns made before the cache was used
  else
    echo "rc=$? $name: see runs/eval/$name.log"; break
  fi
done
