#!/usr/bin/env bash
# Round 1 of expert iteration (issue 41, docs/RESULTS.md): fresh verified tasks in every file kind, the policy's
# sampled and searched trajectories on them judged and filtered, mixed with the offline expert's, and a model
# trained from its base on the mix. Every step resumes where it stopped; a finished step leaves runs/rounds/r1/NAME.done.
# Run from anywhere: nohup results/rounds/round1.sh > runs/rounds/r1.log 2>&1 &
set -u
cd "$(dirname "$0")/../.."
. .venv/bin/activate
R=${R:-runs/rounds/r1}   # the round's folder, and what it draws: set them to try the round small elsewhere
S=${S:-runs/synth}       # the synthesized tasks, shared by every round
POLICY=${POLICY:-embedded:medium}
TEMPLATES=${TEMPLATES:-48} DATASETS=${DATASETS:-16} SQL=${SQL:-8} FOLLOWUPS=${FOLLOWUPS:-12} SEARCHED=${SEARCHED:-8}
EXPERT=${EXPERT:-800}
SIMULATIONS=${SIMULATIONS:-50}  # JUPITER's collection
mkdir -p "$R" "$S"
step() {  # step NAME COMMAND...: COMMAND once; each command resumes by itself, so a stopped step goes on
  local name=$1; shift
  [ -e "$R/$name.done" ] && return 0
  echo "== $(date -u +%H:%M) $name"
  if "$@" > "$R/$name.log" 2>&1; then touch "$R/$name.done"; else echo "failed: $name (see $R/$name.log)"; exit 1; fi
}

# 1. Tasks: the corpus's tables (decontaminated against the benchmarks), templates, SQL, trap datasets and follow-up
#    questions (two template questions on one file, in one conversation), each task's file rewritten in turn as every
#    kind the agent reads; some drawn for the policy (a few of them searched too), the rest of the templates the
#    expert's.
step files datalyst synth files ../shared/corpus --out $S/files.jsonl
step templates datalyst synth templates $S/files.jsonl --out $S/templates.jsonl
step sql datalyst synth sql $S/files.jsonl --out $S/sql.jsonl
step datasets datalyst synth datasets --out $S/datasets.jsonl --per-family 20
step followups datalyst synth followups $S/templates.jsonl --out $S/followups.jsonl
KINDS=csv,json,json-nested,tsv,xlsx,xlsx-sheets,parquet,sqlite,jsonl
step convert datalyst synth convert $S/templates.jsonl --out "$R/tasks/templates.jsonl" --kinds "$KINDS"
step convert-datasets datalyst synth convert $S/datasets.jsonl --out "$R/tasks/datasets.jsonl" --kinds "$KINDS"
step convert-followups datalyst synth convert $S/followups.jsonl --out "$R/tasks/followups.jsonl" --kinds "$KINDS"
step split python -c "
import random
from datalyst.tasks import read_tasks, write_tasks
def drawn(path, k, seed=1):
    tasks = read_tasks(path)
    return random.Random(seed).sample(tasks, min(k, len(tasks)))
templates = drawn('$R/tasks/templates.jsonl', 10**9)  # all of them, shuffled
policy = templates[:$TEMPLATES] + drawn('$R/tasks/datasets.jsonl', $DATASETS) + drawn('$S/sql.jsonl', $SQL)
policy += drawn('$R/tasks/followups.jsonl', $FOLLOWUPS)
write_tasks(policy, '$R/tasks/policy.jsonl')
write_tasks(templates[:$SEARCHED], '$R/tasks/search.jsonl')  # searched too: both sources' cost on the same tasks
write_tasks(templates[$TEMPLATES:], '$R/tasks/expert.jsonl')"

# 2. Trajectories from three sources, each curated alone (its report says what a kept trajectory cost):
#    the policy sampled (n = 4, DataMind's sampling with the category's workflow), the policy searching (JUPITER's
#    collection), and the offline expert playing the templates' solutions.
SAMPLE="--model $POLICY --dialect jupiter --n 4 --temperature 0.7 --max-turns 10 --max-tokens 1024 --concurrency 4"
step sample datalyst curate sample "$R/tasks/policy.jsonl" --seed 1 $SAMPLE --out "$R/react"
step search datalyst search run "$R/tasks/search.jsonl" --seed 2 --collect --simulations "$SIMULATIONS" \
  --model "$POLICY" --dialect jupiter --max-tokens 1024 --out "$R/trees"
step trees datalyst curate trees "$R/trees" --out "$R/mcts"
step expert datalyst curate expert "$R/tasks/expert.jsonl" --limit "$EXPERT" --seed 3 --dialect jupiter --out "$R/expert"
for source in react mcts expert; do
  step "judge-$source" datalyst curate judge "$R/$source" --reflect 0
  step "filter-$source" datalyst curate filter "$R/$source" --strategy non-select
  step "report-$source" datalyst curate report "$R/$source"
  if [ -s "$R/$source/kept.jsonl" ]; then step "export-$source" datalyst curate export "$R/$source" --format examples
  else echo "$source: nothing kept"; fi
done

# 3. The small model trained from its base on the mix (every source's kept trajectories), then the agent as ask runs
#    it on the dev questions, beside dev-ask-small-fcn (its base) and dev-ask-small-sft-fcn (the earlier SFT).
exports=()
for source in react mcts expert; do [ -e "$R/export-$source.done" ] && exports+=("$R/$source/exports"); done
step sft-small datalyst train sft "${exports[@]}" --model embedded:small --out "$R/sft-small" --batch-size 8 \
  --max-length 3072 --lr 2e-4 --seed 0
ASK="--bench dabench --dialect jupiter --temperature 0 --trials 1 --max-turns 10 --max-tokens 1024 --last-call --format-check"
step dev-small datalyst eval run $ASK --split dev --model "embedded:small?adapter=$R/sft-small/adapter" --no-reformat \
  --concurrency 4 --out "$R/dev-small"
echo "round 1 done: datalyst eval compare runs/eval/dev-ask-small-fcn $R/dev-small"
