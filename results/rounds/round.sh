#!/usr/bin/env bash
# One round of expert iteration (issue 41, docs/RESULTS.md): fresh verified tasks in every file kind that no earlier
# round drew, the policy's sampled and searched trajectories on them judged and filtered, the offline expert's beside
# them, and the small model trained from its base on every round's kept trajectories so far. Every step resumes where
# it stopped; a finished step leaves runs/rounds/rK/NAME.done (a shared one, runs/synth/NAME.done).
# Run from anywhere: nohup results/rounds/round.sh 1 > runs/rounds/r1.log 2>&1 &
# A later round samples the best model so far: POLICY="embedded:small?adapter=runs/rounds/r1/sft-small/adapter" ...
set -u
cd "$(dirname "$0")/../.."
. .venv/bin/activate
K=${1:?usage: round.sh ROUND (1, 2, ...)}
ROUNDS=${ROUNDS:-runs/rounds}  # every round's folder, rJ; this one's is $R (set these to try rounds small elsewhere)
R=$ROUNDS/r$K
S=${S:-runs/synth}             # the synthesized tasks, shared by every round
POLICY=${POLICY:-embedded:medium}
WRITER=${WRITER:-embedded:medium}  # writes the questions of synth queries, once for every round
# How many tasks of each set the policy samples. Round 1 drew 16 trap datasets, 8 SQL tasks and 12 follow-ups,
# searched 8 of its templates and sampled 16 model-written questions; what each kept per hour (docs/RESULTS.md,
# round 1) set these: the sets the policy is right on more often get more, and search and questions none.
# Round 2 ran on an AVX2 machine, where a sample costs about twice as much: 32 templates, 4 trap datasets, 2 SQL tasks
# and 16 follow-ups (TEMPLATES=32 DATASETS=4 SQL=2 FOLLOWUPS=16).
TEMPLATES=${TEMPLATES:-48} DATASETS=${DATASETS:-8} SQL=${SQL:-4} FOLLOWUPS=${FOLLOWUPS:-24} SEARCHED=${SEARCHED:-0}
QUERIES=${QUERIES:-0} QUERY_TABLES=${QUERY_TABLES:-20} BAND_POOL=${BAND_POOL:-32} RL_STEPS=${RL_STEPS:-16}
EXPERT=${EXPERT:-800}
SIMULATIONS=${SIMULATIONS:-16}  # per tree; JUPITER collects with 50: 8 trees of 50 by medium would take about 5 h here
mkdir -p "$R/tasks" "$S"
saved=results/rounds/r$K  # what save.sh kept of this round on another machine
# The model-written questions are not made again on another machine (a model's words differ from CPU to CPU): the
# rounds' draws name them by id
if [ "$S" = runs/synth ] && [ -s results/rounds/queries.jsonl.gz ] && [ ! -s $S/queries.jsonl ]; then
  gunzip -c results/rounds/queries.jsonl.gz > $S/queries.jsonl && touch $S/queries.done
fi
if [ "$ROUNDS" = runs/rounds ] && [ -d "$saved" ]; then
  if [ -s "$saved/tasks.tar.gz" ] && [ ! -s "$R/tasks/drawn.txt" ]; then
    tar -C "$R" -xzf "$saved/tasks.tar.gz"
    for draw in "" -queries -band; do [ -s "$R/tasks/drawn$draw.txt" ] && touch "$R/draw$draw.done"; done
  fi
  for source in react queries expert band; do
    if [ -s "$saved/$source/samples.jsonl.gz" ] && [ ! -s "$R/$source/samples.jsonl" ]; then
      mkdir -p "$R/$source" && cp "$saved/$source/"*.json "$R/$source/"
      gunzip -c "$saved/$source/samples.jsonl.gz" > "$R/$source/samples.jsonl"
    fi
  done
  [ -s "$saved/trees.tar.gz" ] && [ ! -d "$R/trees" ] && tar -C "$R" -xzf "$saved/trees.tar.gz"
  for dev in "$saved"/dev-*/; do
    dev=$(basename "$dev")
    if [ -d "$saved/$dev/trajectories" ] && [ ! -d "$R/$dev" ]; then
      mkdir -p "$R/$dev/trajectories" && cp "$saved/$dev/config.json" "$R/$dev/"
      for f in "$saved/$dev"/trajectories/*.gz; do gunzip -c "$f" > "$R/$dev/trajectories/$(basename "$f" .gz)"; done
    fi
  done
fi
step() {  # step DIR NAME COMMAND...: COMMAND once; each command resumes by itself, so a stopped step goes on
  local dir=$1 name=$2; shift 2
  [ -e "$dir/$name.done" ] && return 0
  echo "== $(date -u +%H:%M) $name"
  if "$@" > "$dir/$name.log" 2>&1; then touch "$dir/$name.done"; else echo "failed: $name (see $dir/$name.log)"; exit 1; fi
}

# 1. Tasks, made once for every round: the corpus's tables (decontaminated against the benchmarks), templates, SQL,
#    trap datasets, follow-up questions (two template questions on one file, in one conversation) and questions a
#    model wrote (no answer: curation takes the one that independent samples agree on), each task's file rewritten in
#    turn as every kind the agent reads.
step $S files datalyst synth files ../shared/corpus --out $S/files.jsonl
step $S templates datalyst synth templates $S/files.jsonl --out $S/templates.jsonl
step $S sql datalyst synth sql $S/files.jsonl --out $S/sql.jsonl
step $S datasets datalyst synth datasets --out $S/datasets.jsonl --per-family 20
step $S followups datalyst synth followups $S/templates.jsonl --out $S/followups.jsonl
step $S queries datalyst synth queries $S/files.jsonl --out $S/queries.jsonl --model "$WRITER" --sample "$QUERY_TABLES"
KINDS=csv,json,json-nested,tsv,xlsx,xlsx-sheets,parquet,sqlite,jsonl
for set in templates datasets followups queries; do
  step $S "kinds-$set" datalyst synth convert $S/$set.jsonl --out "$S/kinds/$set.jsonl" --kinds "$KINDS"
done
# This round's draws (seeded by the round) from the tasks no other round drew (their ids in rJ/tasks/drawn*.txt):
# some for the policy (a few of them searched too), templates for the expert, and the model-written questions.
DRAW="
import glob, random
from datalyst.tasks import read_tasks, write_tasks
others = [path for path in glob.glob('$ROUNDS/r*/tasks/drawn*.txt') if not path.startswith('$R/')]
drawn_before = {line.strip() for path in others for line in open(path)}
rng = random.Random($K)
def draw(path, k):
    fresh = [task for task in read_tasks(path) if task.id not in drawn_before]
    return rng.sample(fresh, min(k, len(fresh)))
"
step "$R" draw python -c "$DRAW
templates = draw('$S/kinds/templates.jsonl', $TEMPLATES + $EXPERT)
policy = templates[:$TEMPLATES] + draw('$S/kinds/datasets.jsonl', $DATASETS) + draw('$S/sql.jsonl', $SQL)
policy += draw('$S/kinds/followups.jsonl', $FOLLOWUPS)
write_tasks(policy, '$R/tasks/policy.jsonl')
write_tasks(templates[:$SEARCHED], '$R/tasks/search.jsonl')  # searched too: both sources' cost on the same tasks
write_tasks(templates[$TEMPLATES:], '$R/tasks/expert.jsonl')
open('$R/tasks/drawn.txt', 'w').writelines(f'{id}\n' for id in sorted({t.id for t in policy + templates}))"
step "$R" draw-queries python -c "$DRAW
queries = draw('$S/kinds/queries.jsonl', $QUERIES)
write_tasks(queries, '$R/tasks/queries.jsonl')
open('$R/tasks/drawn-queries.txt', 'w').writelines(f'{id}\n' for id in sorted({t.id for t in queries}))"

# 2. Trajectories from four sources, each curated alone (its report says what a kept trajectory cost):
#    the policy sampled (n = 4, DataMind's sampling with the category's workflow) on tasks with verified answers and
#    on the model-written questions (judged by agreement), the policy searching (JUPITER's collection), and the
#    offline expert playing the templates' solutions.
SAMPLE="--dialect jupiter --n 4 --temperature 0.7 --max-turns 10 --max-tokens 1024 --concurrency 4"
# From round 2 the policy samples as ask runs it (--analyst: the last call, format check and repeat guard): more of
# its runs end with an answer, and the kept ones hold the messages the shipped agent sends. And without the
# category's workflow in the prompt (--no-knowledge): the exports leave that hint out, so a kept run trained the model
# to take the workflow's steps one cell each without being told them (round 1, docs/RESULTS.md); sampled without
# it, a kept run is exactly what the model read and wrote. Round 1 sampled plain, with the workflow.
if [ "$K" -gt 1 ]; then SAMPLE="$SAMPLE --analyst --no-knowledge"; else SAMPLE="$SAMPLE --knowledge"; fi
step "$R" sample datalyst curate sample "$R/tasks/policy.jsonl" --seed "$K" --model "$POLICY" $SAMPLE --out "$R/react"
step "$R" expert datalyst curate expert "$R/tasks/expert.jsonl" --seed "$K" --dialect jupiter --out "$R/expert"
# From round 2 the expert's runs that recover from a failing cell are preferred: half of what its filter keeps (a
# quarter of its runs make a mistake and fix it; round 1 kept them in that share), so the capped sample the small
# model trains on holds twice as many recoveries.
PREFER=""; [ "$K" -gt 1 ] && PREFER="--mix success=0.5,error_correction=0.5"
curated() {  # curated SOURCE: judged, filtered, reported and, when it kept any, exported
  local mix=""; [ "$1" = expert ] && mix=$PREFER
  step "$R" "judge-$1" datalyst curate judge "$R/$1" --reflect 0
  step "$R" "filter-$1" datalyst curate filter "$R/$1" --strategy non-select $mix
  step "$R" "report-$1" datalyst curate report "$R/$1"
  if [ -s "$R/$1/kept.jsonl" ]; then step "$R" "export-$1" datalyst curate export "$R/$1" --format examples
  else echo "$1: nothing kept"; fi
}
for source in react expert; do curated "$source"; done
if [ "$QUERIES" -gt 0 ]; then
  step "$R" sample-queries datalyst curate sample "$R/tasks/queries.jsonl" --seed "$K" --model "$POLICY" $SAMPLE \
    --out "$R/queries"
  curated queries
fi
# Search last, the longest step (a tree is saved after every simulation, so a stopped search goes on)
if [ "$SEARCHED" -gt 0 ]; then
  step "$R" search datalyst search run "$R/tasks/search.jsonl" --seed "$K" --collect --simulations "$SIMULATIONS" \
    --concurrency 4 --model "$POLICY" --dialect jupiter --max-tokens 1024 --out "$R/trees"
  step "$R" trees datalyst curate trees "$R/trees" --out "$R/mcts"
  curated mcts
fi

# 3. The models trained from their bases on every round's kept trajectories up to this one, then the agent as ask
#    runs each on the dev questions, beside its base's dev run: medium first (the 1.5B model, the default's
#    candidate), on the policy's own kept runs alone (round 1: the mix's expert runs gave most of its loss, and both
#    trainings went round cells, which the repeat guard in ask's agent now stops; about 42 min for round 1's 39
#    runs with AVX-512, 110 min without), then small for 3 epochs on the mix (JUPITER's count; one epoch of round
#    1's 87 examples left it half-trained, ending its turns after a thought).
#    Each round's expert share is capped at what the policy's sources kept in it: the policy's own right runs are
#    most of the signal, and the expert's regular moves teach the file kinds without outweighing them (a model
#    trained on the templates alone carries their fixed moves to files where they do not fit). Uncapped, round 1's
#    611 expert trajectories of at most 3,072 tokens would take small about 3 h and medium about 12 h on 2 cores.
#    Runs sampled with the category's workflow in the prompt (round 1's) train neither model: their exports leave
#    the hint out, so their text is not what the model read (round 2 in docs/RESULTS.md).
hinted() {  # hinted DIR: DIR's runs were sampled with the category's workflow in the prompt
  python -c "import json, sys; sys.exit(0 if json.load(open('$1/run.json')).get('knowledge') else 1)"
}
own=() experts=() caps=()  # the policy's kept runs of every round so far; the expert's, each round's capped
for round in $(seq 1 "$K"); do
  kept=0
  for source in react queries mcts; do
    dir=$ROUNDS/r$round/$source
    if [ -e "$ROUNDS/r$round/export-$source.done" ] && ! hinted "$dir"; then
      own+=("$dir/exports") && kept=$((kept + $(wc -l < "$dir/exports/examples.jsonl")))
    fi
  done
  if [ -e "$ROUNDS/r$round/export-expert.done" ] && [ "$kept" -gt 0 ]; then
    experts+=("$ROUNDS/r$round/expert/exports") caps+=(--cap "$ROUNDS/r$round/expert/exports=$kept")
  fi
done
ASK="--bench dabench --dialect jupiter --temperature 0 --trials 1 --max-turns 10 --max-tokens 1024 --last-call --format-check
  --repeat-guard"
step "$R" sft-medium-own datalyst train sft "${own[@]}" --model embedded:medium --out "$R/sft-medium-own" \
  --recompute --batch-size 4 --max-length 3072 --lr 1e-4 --seed 0
step "$R" dev-medium-own-rg datalyst eval run $ASK --split dev \
  --model "embedded:medium?adapter=$R/sft-medium-own/adapter" --no-reformat --concurrency 4 --out "$R/dev-medium-own-rg"
step "$R" sft-small datalyst train sft "${own[@]}" "${experts[@]}" "${caps[@]}" --model embedded:small \
  --out "$R/sft-small" --epochs 3 --batch-size 8 --max-length 3072 --lr 2e-4 --seed 0
step "$R" dev-small datalyst eval run $ASK --split dev --model "embedded:small?adapter=$R/sft-small/adapter" --no-reformat \
  --concurrency 4 --out "$R/dev-small"
# 4. With RL=1, RL that can move (DataMind's dapo+sft) from the small model just trained, on fresh verified tasks it
#    solves only sometimes: drawn, sampled four times each by it, kept where 20-80% of the samples were right
#    (curate band), so a group's runs disagree and the advantages are not all zero; then its dev run.
if [ "${RL:-0}" = 1 ]; then
  step "$R" draw-band python -c "$DRAW
pool = draw('$S/kinds/templates.jsonl', $BAND_POOL) + draw('$S/kinds/datasets.jsonl', $BAND_POOL // 4)
pool += draw('$S/sql.jsonl', $BAND_POOL // 8)
write_tasks(pool, '$R/tasks/band-pool.jsonl')
open('$R/tasks/drawn-band.txt', 'w').writelines(f'{id}\n' for id in sorted({t.id for t in pool}))"
  step "$R" sample-band datalyst curate sample "$R/tasks/band-pool.jsonl" --seed "$K" \
    --model "embedded:small?adapter=$R/sft-small/adapter" $SAMPLE --out "$R/band"
  step "$R" judge-band datalyst curate judge "$R/band" --reflect 0
  step "$R" band datalyst curate band "$R/band" --out "$R/tasks/band.jsonl"
  if [ -s "$R/tasks/band.jsonl" ]; then
    step "$R" rl-small datalyst train rl "$R/tasks/band.jsonl" --model embedded:small --adapter "$R/sft-small/adapter" \
      --algo dapo+sft --expert "$R/expert" --steps "$RL_STEPS" --max-turns 10 --max-tokens 1024 --seed "$K" \
      --out "$R/rl-small"
    step "$R" dev-rl-small datalyst eval run $ASK --split dev --model "embedded:small?adapter=$R/rl-small/adapter" \
      --no-reformat --concurrency 4 --out "$R/dev-rl-small"
  else echo "band: no task that the model solves only sometimes, so no RL (a larger BAND_POOL finds some)"; fi
fi
echo "round $K done: datalyst eval compare runs/eval/dev-ask-medium-fcn-rg $R/dev-medium-own-rg --by level"
echo "  and: datalyst eval compare runs/eval/dev-ask-small-fcn-rg $R/dev-small --by level"
echo "every round: datalyst eval trend runs/eval/dev-ask-medium-fcn-rg $ROUNDS/r*/dev-medium-own-rg --out results/rounds/trend-medium.png"
echo "  and: datalyst eval trend runs/eval/dev-ask-small-fcn-rg $ROUNDS/r*/dev-small --out results/rounds/trend.png"
