-- train.lua: train an encoder with srgeo.train (checkpoints on a log-spaced schedule, resume, controls,
-- PGD / Gaussian / LLR objectives) and optionally ship it with a model card.
--
--   srgeo scripts/train.lua --model small_resnet --epochs 20 --out runs/small_resnet
--   srgeo scripts/train.lua --model small_resnet --labels random --epochs 20 --out runs/rl
--   srgeo scripts/train.lua --model small_resnet --objective pgd --eps 0.5 --out runs/pgd0.5
-- Rerunning the same command continues from the last checkpoint (--no-resume refuses an existing run).
local srgeo = require "srgeo"
local cli = require "srgeo.cli"
local util = require "srgeo.util"
local json = require "srgeo.json"

local argv = { ... }
local o = cli.run({
  name = "train.lua",
  about = "Train a zoo model on Fashion-MNIST (or CIFAR-10) with srgeo.train.  Writes OUT/ckpt_*.safetensors\n"
       .. "(weights + metadata, srgeo.models.load reads them), OUT/optim_*.safetensors (resume state) and\n"
       .. "OUT/log.csv.  Rerunning the same command resumes bit-identically from the latest checkpoint.\n"
       .. "--ship copies the final checkpoint (and --ship-run a log-spaced subset of the run) and writes a\n"
       .. "model card NAME.md next to it with the exact command, accuracy and training time.",
  options = {
    { "model", "small_resnet", "architecture (srgeo.models.list())", metavar = "ARCH" },
    { "config", "{}", "architecture config, a Lua table literal, e.g. {widths={16,32,64}}", metavar = "TABLE" },
    { "model_seed", 0, "seed of the model's initialisation" },
    { "data", "fmnist", "training data", choices = { "fmnist", "cifar10" } },
    { "data_root", "", "dataset folder (default: the Debian package / srgeo's search path)", metavar = "DIR", sets = "root" },
    { "train_subset", 0, "train on a seeded subset of N images (0: all; for smoke runs)", min = 0 },
    { "epochs", 0, "epochs (or --steps)", min = 0 },
    { "steps", 0, "optimiser steps (instead of --epochs)", min = 0 },
    { "batch", 128, "batch size" },
    { "optimizer", "sgd", "optimiser", choices = { "sgd", "adamw" } },
    { "lr", 0.0, "peak learning rate (0: 0.1 for SGD, 1e-3 for AdamW)", min = 0 },
    { "momentum", 0.9, "SGD momentum" },
    { "nesterov", false, "SGD Nesterov momentum" },
    { "weight_decay", -1.0, "weight decay (-1: 5e-4 for SGD, coupled; 0.05 for AdamW, decoupled)", min = -1 },
    { "schedule", "cosine", "learning-rate schedule (cosine: per step to 0)", choices = { "cosine", "step", "constant" } },
    { "warmup", 0, "linear warm-up steps" },
    { "augment", type = "boolean",
      help = "random crop (zero padding) + horizontal flip; --no-augment turns it off [on; off for the random-label and random-data controls]" },
    { "crop", 4, "crop padding in pixels" },
    { "flip", true, "horizontal flips" },
    { "labels", "true", "labels (random: permuted across the training set, counts kept)", choices = { "true", "random" } },
    { "data_kind", "real", "inputs (noise: seeded uniform-noise images replace the images)", choices = { "real", "noise" } },
    { "objective", "ce", "training objective", choices = { "ce", "pgd", "gaussian", "llr" } },
    { "norm", "", "pgd / llr: threat model (default l2 for pgd, linf for llr)", choices = { "", "l2", "linf" } },
    { "eps", 0.0, "pgd / llr: radius in raw pixel units (default 0.5 for pgd, 8/255 for llr)", min = 0 },
    { "attack_steps", 0, "pgd / llr: ascent steps (default 7 for pgd, 3 for llr)", min = 0 },
    { "step_size", 0.0, "pgd / llr: step size (0: 2.5 eps / steps)", min = 0 },
    { "random_start", true, "pgd / llr: random start in the ball" },
    { "use_best", false, "pgd: keep each image's highest-loss iterate" },
    { "sigma", 0.25, "gaussian: noise standard deviation" },
    { "lambda", 4.0, "llr: weight of the local-linearity term" },
    { "mu", 3.0, "llr: weight of the gradient-alignment term" },
    { "blur", 0.0, "Gaussian-blur the training images with this sigma (pixels) first", min = 0 },
    { "checkpoints", "log", "\"log\" (log-spaced incl. step 0, plus epoch ends), \"none\" or a list of steps", metavar = "SPEC" },
    { "per_decade", 4, "log-spaced checkpoints per decade of steps" },
    { "seed", 0, "seed of shuffles, augmentation, attacks, label permutation, noise data" },
    { "out", "", "run folder (default runs/ARCH)", metavar = "DIR" },
    { "resume", true, "continue from the latest checkpoint in OUT" },
    { "eval_train", 5000, "train-accuracy subset size at each checkpoint" },
    { "eval_test", 1000, "test images scored at each checkpoint (a seeded subset; 0: the whole test set)", min = 0 },
    { "log_every", 50, "log interval in steps" },
    { "robust_eval", 0, "after training: PGD accuracy on N test images at --robust-eps", min = 0 },
    { "robust_eps", { 0.5, 1.0 }, "radii for --robust-eval (L2, 7 steps)" },
    { "threads", 0, "threads (0: SRGEO_THREADS or the default)", min = 0, max = 4096 },
    { "sync_bn", false, "under mpirun: BatchNorm statistics over the whole batch, not each rank's shard" },
    { "overlap", false, "under mpirun: sum each bucket of gradients while backward goes on (same weights either way)" },
    { "ship", "", "copy the final checkpoint to this .safetensors path and write a model card beside it", metavar = "PATH" },
    { "ship_run", "", "also copy a log-spaced subset of the run's checkpoints into this folder", metavar = "DIR" },
    { "ship_per_decade", 2, "checkpoints per decade in --ship-run (plus step 0 and the final step)", min = 1 },
    { "name", "", "model name for the card (default: the --ship file's stem)" },
  },
  examples = {
    "srgeo train --model small_resnet --epochs 20 --out runs/small_resnet",
    "srgeo train --model small_resnet --steps 300 --train-subset 8192 --out /tmp/smoke",
    "srgeo train --model small_resnet --labels random --epochs 20 --out runs/small_resnet_rl",
    "srgeo train --model small_resnet --objective pgd --eps 0.5 --attack-steps 3 --out runs/pgd0.5",
    "srgeo train --model small_vit --optimizer adamw --lr 1e-3 --warmup 500 --epochs 30",
  },
}, argv)

if o.threads > 0 then srgeo.threads(o.threads) end
if (o.epochs > 0) == (o.steps > 0) then
  io.stderr:write("train.lua: give exactly one of --epochs and --steps\n")
  os.exit(2)
end

-- The exact command, for the checkpoints' metadata and the model card.
local words = { "srgeo", "train" }
for _, a in ipairs(argv) do words[#words + 1] = a:match("^[%w%-_./=,:{}]+$") and a or util.shell_quote(a) end
local command = table.concat(words, " ")

local chunk = load("return " .. o.config, "=config", "t", {})
local cfg = chunk and chunk()
if type(cfg) ~= "table" then
  io.stderr:write("train.lua: --config must be a Lua table literal\n")
  os.exit(2)
end
cfg.seed = o.model_seed

local checkpoints = o.checkpoints
if checkpoints ~= "log" and checkpoints ~= "none" then
  local list = {}
  for s in checkpoints:gmatch("[^,]+") do list[#list + 1] = math.tointeger(tonumber(s)) end
  checkpoints = list
end
local control = o.labels == "random" or o.data_kind == "noise"
-- --augment / --no-augment decide; unset, the controls train without it
local augment = false
if o.augment == true or (o.augment == nil and not control) then augment = { crop = o.crop, flip = o.flip } end

local opts = {
  batch = o.batch, optimizer = o.optimizer,
  lr = o.lr > 0 and o.lr or nil, weight_decay = o.weight_decay >= 0 and o.weight_decay or nil,
  schedule = o.schedule, warmup = o.warmup, augment = augment, labels = o.labels, data_kind = o.data_kind,
  objective = o.objective, blur = o.blur > 0 and o.blur or nil, checkpoints = checkpoints,
  per_decade = o.per_decade, seed = o.seed, out = o.out ~= "" and o.out or ("runs/" .. o.model),
  resume = o.resume, eval_train = o.eval_train, eval_test = o.eval_test > 0 and o.eval_test or nil,
  log_every = o.log_every, command = command, progress = srgeo._isatty(2) or "lines",
  name = o.name ~= "" and o.name or nil, sync_bn = o.sync_bn or nil, overlap = o.overlap,
}
if o.epochs > 0 then opts.epochs = o.epochs else opts.steps = o.steps end
if o.optimizer == "sgd" then opts.momentum, opts.nesterov = o.momentum, o.nesterov end
if o.weight_decay < 0 and o.weight_decay ~= -1 then
  io.stderr:write(string.format("train.lua: --weight-decay must be -1 (the optimiser's default) or >= 0, got %g\n", o.weight_decay))
  os.exit(2)
end
if o.objective == "pgd" or o.objective == "llr" then
  local a = { random_start = o.random_start }
  if o.norm ~= "" then a.norm = o.norm end
  if o.eps > 0 then a.eps = o.eps end
  if o.attack_steps > 0 then a.steps = o.attack_steps end
  if o.step_size > 0 then a.step_size = o.step_size end
  if o.objective == "pgd" then a.use_best = o.use_best else a.lambda, a.mu = o.lambda, o.mu end
  opts[o.objective] = a
elseif o.objective == "gaussian" then
  opts.gaussian = { sigma = o.sigma }
end

-- srgeo.train's own checks (its declared options) on the command line,
-- before anything is loaded; its option names shown as this script's flags
-- (an objective's steps are --attack-steps).
local ok, err = pcall(srgeo.train.check, opts)
if not ok then
  local msg = tostring(err):gsub("^srgeo%.train: ", "")
  local objective_opt = msg:match("^%a+: ") ~= nil
  msg = util.flag_message(msg:gsub("^%a+: ", ""), objective_opt and { steps = "attack_steps" } or nil)
  io.stderr:write("train.lua: ", msg, "\n(try --help)\n")
  os.exit(2)
end

local model = srgeo.models.build(o.model, cfg)
local function dataset(split)
  local root = o.data_root ~= "" and o.data_root or nil
  if o.data == "fmnist" then return srgeo.data.fashion_mnist { split = split, root = root } end
  return srgeo.data.cifar10 { split = split, root = root }
end
local train, test = dataset("train"), dataset("test")
if o.train_subset > 0 and o.train_subset < #train then train = train:sample(o.train_subset, o.seed) end
opts.model, opts.data, opts.test_data = model, train, test

local function plural(n, word) return string.format("%d %s%s", n, word, n == 1 and "" or "s") end

-- The CPU and the BLAS kernels, for the model card (training time means
-- little without them).
local function machine()
  local c = srgeo.config()
  return c.cpu.model ~= "" and c.cpu.model or "an unknown CPU", string.format("%s, %s kernels%s", c.blas.name,
    c.blas.core, c.blas.coretype and ", OPENBLAS_CORETYPE=" .. c.blas.coretype or "")
end

local mpi = srgeo.mpi
if mpi.root() then
  print(string.format("srgeo %s: training %s on %s (%d images), %s%s -> %s", srgeo.version, o.model, o.data,
    #train, mpi.size() > 1 and plural(mpi.size(), "rank") .. " x " or "", plural(srgeo.threads(), "thread"), opts.out))
end
local t0 = srgeo._clock()
local run = srgeo.train(opts)
local wall = srgeo._clock() - t0
local last = run.checkpoints[#run.checkpoints] or {}
-- Total training time across resumed sessions: the log's elapsed seconds.
local elapsed = run.history[#run.history] and run.history[#run.history].elapsed_s or wall
if mpi.root() then
  print(string.format("done: step %d/%d, train acc %.4f, test acc %.4f (%s test images), %.1f min of training%s; "
    .. "%.1f s of it evaluating checkpoints", run.step, run.steps, last.train_acc or 0 / 0, last.test_acc or 0 / 0,
    o.eval_test > 0 and tostring(math.min(o.eval_test, #test)) or tostring(#test), elapsed / 60,
    run.images_per_s and string.format(", %.0f images/s training this session", run.images_per_s) or "",
    run.eval_seconds or 0))
end

local robust = {}
if o.robust_eval > 0 then
  for _, eps in ipairs(o.robust_eps) do
    local r = srgeo.train.robust_accuracy(run.model, test, { norm = "l2", eps = eps, steps = 7, n = o.robust_eval, seed = 1 })
    robust[#robust + 1] = { eps = eps, acc = r.acc, n = r.n }
    if mpi.root() then print(string.format("PGD-7 L2 eps %g: robust accuracy %.4f on %d test images", eps, r.acc, r.n)) end
  end
end

if o.ship ~= "" and mpi.root() then -- rank 0 holds the run's files
  local final = opts.out .. "/" .. string.format("ckpt_%08d.safetensors", run.step)
  util.mkdir(util.dirname(o.ship))
  util.write_atomic(o.ship, util.read_file(final))
  local name = o.name ~= "" and o.name or o.ship:match("([^/]+)%.safetensors$")
  local size = #util.read_file(o.ship)
  local shipped_run = {}
  if o.ship_run ~= "" then
    util.mkdir(o.ship_run)
    local keep = {}
    for _, s in ipairs(srgeo.train.checkpoint_steps(run.steps, { per_decade = o.ship_per_decade })) do keep[s] = true end
    for _, c in ipairs(srgeo.train.list(opts.out)) do
      if keep[c.step] then
        util.write_atomic(o.ship_run .. "/" .. c.path:match("[^/]+$"), util.read_file(c.path))
        shipped_run[#shipped_run + 1] = c.step
      end
    end
  end
  local info = srgeo.models.info(run.model) or {}
  -- the card's test accuracy on the whole test set (checkpoints were scored on --eval-test images)
  if o.eval_test > 0 and o.eval_test < #test then
    last = { train_acc = last.train_acc, test_acc = srgeo.train.evaluate(run.model, test).acc }
  end
  local card = {
    "# " .. name, "",
    string.format("%s trained by srgeo %s on %s (%d training images); %s.", o.model, srgeo.version,
      o.data == "fmnist" and "Fashion-MNIST" or "CIFAR-10", #train,
      (o.labels == "random" and "labels permuted across the training set (random-label control)")
      or (o.data_kind == "noise" and "seeded uniform-noise images replace the inputs (random-data control)")
      or (o.objective == "pgd" and string.format("L2-PGD adversarial training (eps %s)", tostring(opts.pgd.eps or 0.5)))
      or "standard training"), "",
    "| | |", "|---|---|",
    string.format("| file | `%s` (%.2f MB) |", o.ship, size / 2 ^ 20),
    string.format("| architecture | `%s` %s |", info.arch or o.model, json.encode(cfg)),
    string.format("| steps | %d (%.4g epochs of %d steps, batch %d) |", run.step, run.step / run.steps_per_epoch,
      run.steps_per_epoch, o.batch),
    string.format("| test accuracy | %.4f (%s test set, %s images) |", last.test_acc or 0 / 0, o.data == "fmnist" and "Fashion-MNIST" or "CIFAR-10",
      "all " .. #test),
    string.format("| train accuracy | %.4f (seeded subset of %d training images, as trained: same labels/inputs) |",
      last.train_acc or 0 / 0, math.min(o.eval_train, #train)),
    string.format("| training time | %.1f min on %s of %s (%s) |", elapsed / 60, plural(srgeo.threads(), "thread"),
      machine()),
    string.format("| srgeo version | %s |", srgeo.version),
    string.format("| seed | data/augmentation %d, model init %d |", o.seed, o.model_seed),
  }
  for _, r in ipairs(robust) do
    card[#card + 1] = string.format("| PGD-7 L2 accuracy, eps %g | %.4f (%d test images) |", r.eps, r.acc, r.n)
  end
  card[#card + 1] = ""
  card[#card + 1] = "Training configuration: " .. json.encode(run.config)
  card[#card + 1] = ""
  card[#card + 1] = "Reproduce (from the repository root; resumes if OUT exists):"
  card[#card + 1] = ""
  card[#card + 1] = "    " .. command
  if #shipped_run > 0 then
    local s = {}
    for i, v in ipairs(shipped_run) do s[i] = tostring(v) end
    card[#card + 1] = ""
    card[#card + 1] = string.format("Checkpoints of the run in `%s/` at steps %s (log-spaced, %d per decade, incl. step 0).",
      o.ship_run, table.concat(s, ", "), o.ship_per_decade)
  end
  card[#card + 1] = ""
  local card_path = o.ship:gsub("%.safetensors$", "") .. ".md"
  util.write_atomic(card_path, table.concat(card, "\n"))
  print("shipped " .. o.ship .. " (" .. string.format("%.2f MB", size / 2 ^ 20) .. ") and " .. card_path)
end
