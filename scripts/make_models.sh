#!/bin/sh
# make_models.sh - train the shipped default encoders from scratch (`make models`).
#
# Every model is one scripts/train.lua command (recorded verbatim in its
# checkpoint metadata and model card).  Runs go to $RUNS/NAME (resumable:
# rerunning this script continues interrupted runs bit-identically and skips
# finished ones); the final checkpoint is copied to models/shipped/NAME.safetensors
# with a model card NAME.md, and for the three standard models a log-spaced
# subset of the run (incl. step 0) to models/shipped/NAME_run/.
#
#   sh scripts/make_models.sh [BUILD_DIR] [NAME ...]     (default: build, all models)
#   EPOCHS=20 PGD_STEPS=4690 THREADS=2 sh scripts/make_models.sh build small_resnet
#   SMOKE=1 RUNS=/tmp/r SHIP=/tmp/s sh scripts/make_models.sh     (4 steps each on 512 images: checks the recipe)
#
# Names: small_resnet small_vgg small_vit small_resnet_random_labels
#        small_resnet_random_data small_resnet_pgd_eps0.5 small_resnet_pgd_eps1.0
set -eu

B=${1:-build}
[ $# -gt 0 ] && shift
SRGEO="$B/srgeo"
RUNS=${RUNS:-runs/shipped}
SHIP=${SHIP:-models/shipped}
# The defaults are the recipes of the shipped files, sized for 2 cores (each
# run ~15-30 min at 1 thread, two runs side by side): see each model card.
EPOCHS=${EPOCHS:-4}           # standard runs (Fashion-MNIST, 469 steps per epoch at batch 128)
VIT_EPOCHS=${VIT_EPOCHS:-3}
PGD_STEPS=${PGD_STEPS:-300}   # a PGD-3 step costs about 4 standard steps
CONTROL_SUBSET=${CONTROL_SUBSET:-2560} # controls memorise a seeded subset ...
CONTROL_EPOCHS=${CONTROL_EPOCHS:-50}   # ... in as many images seen as ~2 epochs of the full set
THREADS=${THREADS:-0}        # 0: SRGEO_THREADS or the default
ROBUST=${ROBUST:-1000}      # test images for the PGD robust-accuracy line of the cards
if [ -n "${SMOKE:-}" ]; then
    SM="--steps 4 --train-subset 512 --eval-test 256 --eval-train 256 --log-every 2"
    STD=$SM VIT=$SM PGD=$SM CTL=$SM WARM=2 ROBUST=64
else
    STD="--epochs $EPOCHS" VIT="--epochs $VIT_EPOCHS" PGD="--steps $PGD_STEPS" WARM=469
    CTL="--train-subset $CONTROL_SUBSET --epochs $CONTROL_EPOCHS"
fi
ALL="small_resnet small_vgg small_vit small_resnet_random_labels small_resnet_random_data small_resnet_pgd_eps0.5 small_resnet_pgd_eps1.0"
NAMES=${*:-$ALL}

[ -x "$SRGEO" ] || { echo "make_models: $SRGEO not built (run make first)"; exit 1; }
mkdir -p "$RUNS" "$SHIP"

train() {
    name=$1
    shift
    echo "== $name"
    start=$(date +%s)
    # (POSIX sh has no pipefail: the exit status travels through a file.)
    { "$SRGEO" scripts/train.lua --out "$RUNS/$name" --ship "$SHIP/$name.safetensors" --threads "$THREADS" "$@" 2>&1
      echo $? > "$RUNS/$name.status"; } | tee "$RUNS/$name.log"
    status=$(cat "$RUNS/$name.status")
    [ "$status" -eq 0 ] || { echo "make_models: $name failed (exit $status; log: $RUNS/$name.log)"; exit 1; }
    echo "== $name: $(( $(date +%s) - start )) s"
}

for n in $NAMES; do
    case $n in
    small_resnet)
        train small_resnet --model small_resnet $STD --ship-run "$SHIP/small_resnet_run" --robust-eval "$ROBUST" ;;
    small_vgg)
        train small_vgg --model small_vgg $STD --ship-run "$SHIP/small_vgg_run" ;;
    small_vit)
        # ViTs want AdamW with warm-up (one epoch) rather than SGD at 0.1.
        train small_vit --model small_vit $VIT --optimizer adamw --lr 1e-3 --weight-decay 0.05 \
            --warmup "$WARM" --ship-run "$SHIP/small_vit_run" ;;
    small_resnet_random_labels)
        # Twin of small_resnet: same model seed, labels permuted across the
        # (subset) training set, no augmentation (the control's default).  A
        # subset, because memorising random labels takes many epochs.
        train small_resnet_random_labels --model small_resnet $CTL --labels random ;;
    small_resnet_random_data)
        # Twin: seeded uniform-noise images with the original labels, no augmentation.
        train small_resnet_random_data --model small_resnet $CTL --data-kind noise ;;
    small_resnet_pgd_eps0.5)
        # L2 PGD (3 steps of 2.5 eps/3, random start, attack in eval mode as the
        # robustness library does), eps in raw pixel units of the 28x28 input.
        train small_resnet_pgd_eps0.5 --model small_resnet $PGD --objective pgd --norm l2 \
            --eps 0.5 --attack-steps 3 --robust-eval "$ROBUST" ;;
    small_resnet_pgd_eps1.0)
        train small_resnet_pgd_eps1.0 --model small_resnet $PGD --objective pgd --norm l2 \
            --eps 1.0 --attack-steps 3 --robust-eval "$ROBUST" ;;
    *)
        echo "make_models: unknown model '$n' (known: $ALL)"
        exit 2 ;;
    esac
done
ls -l "$SHIP"
