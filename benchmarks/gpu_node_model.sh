#!/usr/bin/env bash
# The neural node model cross-fitted over Spider dev on one GPU, from a pack
# (benchmarks/pack_for_gpu.py): no data folder, databases or LM needed there. The five folds train
# side by side, one process each (a single fold leaves most of an H100/H200 idle), each for at
# most MAX_TIME; then `python -m model.train merge` makes one run of them.
#
# The paper's model with Qwen2.5-Coder's input table (the pack holds table.safetensors):
#   python benchmarks/pack_for_gpu.py --out .gpu_pack +experiment=qwen_coder_paper \
#       data.root=../shared/data/spider data.use_perturbations=false
#   RUNS=runs/qwen_gpu bash benchmarks/gpu_node_model.sh           # on the GPU machine
# MiniLM fine-tuned end to end (the pack holds encoder/, rebuilt there in a Hugging Face cache):
#   python benchmarks/pack_for_gpu.py --out .gpu_pack model=minilm data=spider data.root=../shared/data/spider
#   RUNS=runs/minilm_gpu TRAIN="model=minilm data=spider trainer=gpu" bash benchmarks/gpu_node_model.sh
# then, back here, with the databases:
#   python evaluate.py run_dir=<RUNS>/merged data_root=../shared/data/spider
#
# TRAIN holds the run's train.py overrides (those the pack was made with, less data.root);
# SOURCES the pack's sources file. Extra arguments are train.py overrides for every fold (a CPU
# smoke test: `MAX_TIME=00:00:00:20 bash benchmarks/gpu_node_model.sh trainer=cpu model.encoder.d_model=64`).
set -u
PACK=${PACK:-.gpu_pack}
RUNS=${RUNS:-runs/qwen_gpu}
TRAIN=${TRAIN:-+experiment=qwen_coder_paper data.use_perturbations=false}
SOURCES=${SOURCES:-$PACK/sources.jsonl.gz}
MAX_TIME=${MAX_TIME:-00:00:06:00}   # per fold, DD:HH:MM:SS (Lightning's trainer.max_time)
FOLDS=${FOLDS:-0 1 2 3 4}
FOLD_TIMEOUT=${FOLD_TIMEOUT:-0}     # seconds before a fold's process is killed (0: never)
if [ -d .whl ]; then  # packages the GPU machine lacks, carried as wheels
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 2
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
PACKED=()
[ -f "$PACK/table.safetensors" ] && PACKED+=("model.embedder.table=$PACK/table.safetensors")
if [ -d "$PACK/encoder" ]; then  # a fine-tuned encoder: rebuilt as a hub id's snapshot in a local cache
  export HF_HOME=${HF_HOME:-/tmp/hf} HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
  python3 benchmarks/pack_for_gpu.py --unpack "$PACK/encoder" --hf-home "$HF_HOME" || exit 2
fi
mkdir -p "$RUNS"
for f in $FOLDS; do
  # shellcheck disable=SC2086  # TRAIN is a list of overrides
  timeout "$FOLD_TIMEOUT" python3 -u train.py $TRAIN data.root="$PACK" data.sources_file="$SOURCES" "${PACKED[@]}" \
    "data.run_folds=[$f]" +trainer.max_time="$MAX_TIME" callbacks.model_checkpoint.save_last=false \
    logger=csv hydra.run.dir="$RUNS/fold$f" "$@" 2>&1 |
    while IFS= read -r line; do printf '%(%T)T %s\n' -1 "$line"; done > "$RUNS/fold$f.log" &
done
wait
for f in $FOLDS; do echo "== fold $f"; grep -E "^[0-9:]+ (epoch|fold|test/|Time limit)|Error|error:" "$RUNS/fold$f.log" | tail -n 40; done
python3 -m model.train merge --out "$RUNS/merged" $(for f in $FOLDS; do echo "$RUNS/fold$f"; done)
