-- srgeo.train: train an encoder with checkpoints on a log-spaced schedule,
-- and resume it bit for bit.
--
--   run = srgeo.train{model = m, data = train_ds, test_data = test_ds, epochs = 20, out = "runs/r18"}
--   run.history, run.checkpoints, run.final.test_acc, run.images_per_s (training's
--   alone), run.eval_seconds (this session's evaluations of checkpoints)
--
-- Options (defaults): epochs= or steps=; batch 128; optimizer "sgd" (lr 0.1, momentum 0.9,
-- nesterov false, weight_decay 5e-4 coupled) | "adamw" (lr 1e-3, beta1, beta2, adam_eps,
-- weight_decay 0.05 decoupled); schedule "cosine" (per step to 0) | "step" (milestones
-- {0.5, 0.75} of the run, gamma 0.1) | "constant"; warmup 0 steps; augment {crop = 4,
-- flip = true} | false; labels "true" | "random"; data_kind "real" | "noise"; objective
-- "ce" | "pgd" | "gaussian" | "llr" (+ pgd= / gaussian= / llr= tables); blur = sigma
-- (blur_test = true blurs the test set too); checkpoints "log" (per_decade 4, plus epoch
-- ends unless epoch_checkpoints = false) | {steps} | "none"; out = dir; seed 0; resume
-- true; eval_train 5000 (seeded train subset, as trained) | false; eval_test (all);
-- eval_batch 256; eval_every (extra evaluations, no checkpoint); log_every 50; progress
-- (default: a line on a terminal or in Jupyter, util.live; "lines": one line per log
-- row); keep_optim "latest" | "all"; stop_at = S (stop after S steps of a run planned
-- for steps=/epochs=, to resume later); drop_last false; threads; command / name
-- (recorded in the metadata);
-- on_checkpoint(entry, model), on_log(row).
--
--   r = srgeo.train.evaluate(m, ds [, {n =, seed =, batch =}])      -- {loss=, acc=, n=}
--   Xadv = srgeo.train.attack(m, X, labels, {norm = "l2", eps = 0.5, steps = 7})
--   r = srgeo.train.robust_accuracy(m, ds, {eps =, norm =, steps =, n =})
--   srgeo.train.checkpoint_steps(total, {per_decade = 4, steps_per_epoch = 469})
--   srgeo.train.lr_at(step, total, cfg)
--   srgeo.train.permute_labels(labels, seed)    -- the random-label control
--   srgeo.train.latest(out) -> path, step (the checkpoint resume would use)
--   srgeo.train.list(out) -> {{step=, path=}, ...} (model checkpoints)
--
-- What runs where: the step itself (forward with saved activations, softmax
-- cross-entropy, backward, SGD/AdamW update), PGD and LLR run in C
-- (core/train/train.c); batch assembly with random crop + flip and input noise in
-- C (core/data/augment.c).  This file plans the run: data, schedule, checkpoints,
-- logging and resume.
--
-- Reproducibility.  Every random choice is a function of (seed, stream,
-- index): the shuffle of epoch e, the augmentation of the batch at step s,
-- the PGD random start at step s, the label permutation, the noise images.
-- So a checkpoint holds all a resumed run needs: the weights and buffers
-- (BatchNorm running statistics), the optimiser state (momentum / Adam
-- moments, step count) and the log so far.  With the same seed and thread
-- count, a run resumed from any checkpoint ends with the same weights, bit
-- for bit, as a run that was never interrupted (tests/lua/train_spec.lua).
--
-- Objectives (objective = ..., options in the table of the same name):
--   "ce"        softmax cross-entropy (BatchNorm in train mode)
--   "pgd"       adversarial training (Madry et al. 2018): each batch is replaced by its PGD
--               adversarial examples; pgd = {norm = "l2"|"linf", eps = 0.5, steps = 7,
--               step_size = 2.5 eps/steps, random_start = true, use_best = false}.  As in the
--               robustness library (Salman et al.'s models), the attack runs with the model
--               in eval mode (BatchNorm running statistics, no statistic updates) and the
--               update on the adversarial batch in train mode.  eps is in raw pixel units
--               (L2 over the whole image), inputs clipped to [0, 1].
--   "gaussian"  Gaussian noise augmentation: x + sigma N(0, 1) (gaussian = {sigma = 0.25,
--               clip = false}), fresh noise every step.
--   "llr"       Qin et al. 2019's local linearity regulariser, ℓ(x) + λ γ + μ |δᵀ∇ℓ(x)|
--               (llr = {norm = "linf", eps = 8/255, steps = 3, lambda = 4, mu = 3, fd = 0.1});
--               the double-backprop term uses a documented first-order (finite-difference)
--               approximation, see core/train/train.h.
-- Controls: labels = "random" (a seeded permutation across the training set:
-- class counts kept), data_kind = "noise" (seeded uniform-noise images with
-- the original labels); both train without augmentation unless augment= is
-- given.  blur = sigma trains on Gaussian-blurred images (ds:blurred, once).
--
-- Files in out/ (each written to a temporary name, fsync'ed and renamed, so a
-- killed run never leaves a truncated file under a checkpoint's name):
--   ckpt_SSSSSSSS.safetensors   weights + buffers after S updates, with
--                               __metadata__: architecture, config, training
--                               (JSON), step, epoch, train/test acc + loss,
--                               seed, srgeo_version; loads with
--                               srgeo.models.load(path)
--   optim_SSSSSSSS.safetensors  optimiser state + log for resuming (only the
--                               latest is kept unless keep_optim = "all")
--   log.csv                     one row per log interval / checkpoint
local srgeo = require "srgeo"
local util = require "srgeo.util"
local json = require "srgeo.json"

local T = {}

-- Random streams (the `a` of seed_mix(seed, a, b)).
local STREAM = { shuffle = 101, augment = 102, objective = 103, labels = 104, noise = 105,
                 eval_train = 106, eval_test = 107 }

local function mix(seed, stream, b) return srgeo.augment.seed_mix(seed, stream, b or 0) end

-- The options are declared in the core with the rest of the trainer's
-- (sr_train_specs, sr_sgd_specs / sr_adamw_specs, sr_pgd_specs,
-- sr_gaussian_specs, sr_llr_specs in core/train/train.c): types, ranges,
-- defaults and help, read through srgeo._options.  Of each objective's
-- options, these belong to the run (its seed is drawn per step, its clip
-- is [0, 1]).
local objective_keys = {
  pgd = { "norm", "eps", "steps", "step_size", "random_start", "use_best", "eval_mode" },
  gaussian = { "sigma", "clip" },
  llr = { "norm", "eps", "steps", "step_size", "random_start", "lambda", "mu", "fd", "eval_mode" },
}
local optimizer_keys = {
  sgd = { lr = "lr", momentum = "momentum", nesterov = "nesterov", weight_decay = "weight_decay" },
  adamw = { lr = "lr", beta1 = "beta1", beta2 = "beta2", adam_eps = "eps", weight_decay = "weight_decay" },
}

-- User errors (a bad option, a run that cannot resume) print without a
-- traceback in the shell.
local fail = util.failer("srgeo.train: ")

local copy = util.copy

-- ---------------------------------------------------------------------------
-- Schedules

--- The learning rate for the update after `step` updates (0-based), of
--- `total`.  cosine: lr (1 + cos(π s/T)) / 2 per step, reaching 0 at T
--- (torch CosineAnnealingLR stepped per batch); step: lr·gamma^k after each
--- milestone (fractions of T, or step counts when > 1); constant.  warmup W:
--- linear lr (s+1)/W for s < W, then the schedule over the remaining steps.
function T.lr_at(step, total, cfg)
  local lr = cfg.lr
  local w = cfg.warmup or 0
  if step < w then return lr * (step + 1) / w end
  local s, n = step - w, math.max(1, total - w)
  local kind = cfg.schedule or "cosine"
  if kind == "cosine" then
    return lr * 0.5 * (1 + math.cos(math.pi * s / n))
  elseif kind == "step" then
    local k = 0
    for _, m in ipairs(cfg.milestones or { 0.5, 0.75 }) do
      local at = m <= 1 and math.floor(m * total + 0.5) or m
      if step >= at then k = k + 1 end
    end
    return lr * (cfg.gamma or 0.1) ^ k
  elseif kind == "constant" then
    return lr
  end
  error("srgeo.train: schedule must be \"cosine\", \"step\" or \"constant\"", 2)
end

--- Checkpoint steps: 0, round(10^(k / per_decade)) for k = 0, 1, ... up to
--- total, every epoch end (multiples of steps_per_epoch), and total.
function T.checkpoint_steps(total, opts)
  opts = opts or {}
  local per = opts.per_decade or 4
  local set = { [0] = true, [total] = true }
  local k = 0
  while true do
    local v = math.floor(10 ^ (k / per) + 0.5)
    if v > total then break end
    set[v] = true
    k = k + 1
  end
  local spe = opts.steps_per_epoch
  if spe and opts.epochs ~= false then
    for s = spe, total, spe do set[s] = true end
  end
  local list = {}
  for s in pairs(set) do list[#list + 1] = s end
  table.sort(list)
  return list
end

-- ---------------------------------------------------------------------------
-- Data

-- The whole set as one tensor and a label list (0-based).
local function materialize(ds, what)
  if type(ds) ~= "table" and type(ds) ~= "userdata" then fail("%s must be a dataset", what) end
  local n = #ds
  if n < 1 then fail("%s is empty", what) end
  local X, labels
  if ds.all then
    X, labels = ds:all()
  else
    local parts, labs = {}, {}
    for first = 1, n, 4096 do
      local idx = {}
      for i = first, math.min(n, first + 4095) do idx[#idx + 1] = i end
      local Xb, lb = ds:batch(idx)
      parts[#parts + 1] = Xb
      for _, l in ipairs(lb) do labs[#labs + 1] = l end
    end
    X = #parts == 1 and parts[1] or srgeo.augment.cat(parts)
    labels = labs
  end
  local shape = X:shape()
  if #shape ~= 4 then fail("%s gives images %s; expected (N,C,H,W)", what, table.concat(shape, "x")) end
  if shape[1] ~= n or #labels ~= n then fail("%s: %d items but %d images and %d labels", what, n, shape[1], #labels) end
  local l2 = {}
  for i, l in ipairs(labels) do
    if math.type(l) ~= "integer" then
      if type(l) == "number" and l == math.floor(l) then l = math.tointeger(l)
      else fail("%s: label %d is %s, not a 0-based class index", what, i, tostring(l)) end
    end
    l2[i] = l
  end
  return X, l2
end

--- The random-label control: labels permuted across the whole set with a
--- seeded permutation (so every class keeps its count).
function T.permute_labels(labels, seed)
  local p = srgeo.augment.permutation(#labels, seed)
  local out = {}
  for i = 1, #labels do out[i] = labels[p[i]] end
  return out
end

--- Accuracy and mean loss of m on a dataset or on {X=tensor, labels=list}
--- (eval mode; forward only).  opts: n (a seeded subset), seed, batch.
function T.evaluate(m, ds, opts)
  opts = opts or {}
  local X, labels
  if type(ds) == "table" and ds.X then X, labels = ds.X, ds.labels else X, labels = materialize(ds, "evaluate: data") end
  local n = X:shape()[1]
  local idx
  if opts.n and opts.n < n then
    local p = srgeo.augment.permutation(n, opts.seed or 0)
    idx = {}
    for i = 1, opts.n do idx[i] = p[i] end
  end
  return T._evaluate(m, X, labels, idx, opts.batch)
end

-- fn(rows, labels, first) for each batch of the first n of rows idx (1..n
-- when nil) of X, in order; the rows are gathered into one reused buffer.
local function each_batch(X, labels, idx, n, batch, fn)
  local buf
  for first = 1, n, batch do
    local ix, lab = {}, {}
    for k = first, math.min(n, first + batch - 1) do
      local i = idx and idx[k] or k
      ix[#ix + 1] = i
      lab[#lab + 1] = labels[i]
    end
    buf = srgeo.augment.batch(X, ix, { out = buf })
    fn(buf, lab, first)
  end
end

-- Evaluate rows idx (all when nil) of X in batches; the model is left in
-- the mode it had.
function T._evaluate(m, X, labels, idx, batch)
  local n = idx and #idx or X:shape()[1]
  local was = m:training()
  m:eval()
  local loss, correct = 0, 0
  -- Under mpirun each rank evaluates its share of the rows (collective).
  local ranks, rank = srgeo.mpi.size(), srgeo.mpi.rank()
  local sub, mine = idx, n
  if ranks > 1 then
    sub = {}
    for k = n * rank // ranks + 1, n * (rank + 1) // ranks do sub[#sub + 1] = idx and idx[k] or k end
    mine = #sub
  end
  each_batch(X, labels, sub, mine, batch or 256, function(rows, lab)
    local l, c = srgeo._eval_batch(m, rows, lab)
    loss, correct = loss + l, correct + c
  end)
  if ranks > 1 then loss, correct = srgeo.mpi.allreduce(loss), srgeo.mpi.allreduce(correct) end
  if was then m:train() end
  return { loss = loss / n, acc = correct / n, n = n }
end

--- PGD adversarial examples for a batch (see core/train/train.h): opts norm
--- ("l2"|"linf"), eps, steps, step_size (2.5 eps/steps), random_start,
--- use_best, clip, eval_mode, seed.  Returns Xadv, loss, correct.
function T.attack(m, X, labels, opts) return srgeo._pgd(m, X, labels, opts) end

--- Accuracy under a PGD attack on (a seeded subset of) a dataset.
function T.robust_accuracy(m, ds, opts)
  opts = copy(opts or {})
  local n, seed, batch = opts.n, opts.seed or 0, opts.batch or 200
  opts.n, opts.batch = nil, nil
  local X, labels = materialize(ds, "robust_accuracy: data")
  local total = X:shape()[1]
  local p = (n and n < total) and srgeo.augment.permutation(total, seed) or nil
  n = p and n or total
  local correct, loss = 0, 0
  each_batch(X, labels, p, n, batch, function(rows, lab, first)
    opts.seed = mix(seed, STREAM.objective, first)
    local _, l, c = srgeo._pgd(m, rows, lab, opts)
    correct, loss = correct + c, loss + l * #lab
  end)
  return { acc = correct / n, loss = loss / n, n = n }
end

-- ---------------------------------------------------------------------------
-- Files

local function ckpt_name(step) return string.format("ckpt_%08d.safetensors", step) end
local function optim_name(step) return string.format("optim_%08d.safetensors", step) end

-- Steps of the complete checkpoints in out (both files present, sorted).
local function scan(out)
  local names = srgeo._listdir(out)
  if not names then return {}, {} end
  local ck, op = {}, {}
  for _, f in ipairs(names) do
    local s = f:match("^ckpt_(%d+)%.safetensors$")
    if s then ck[tonumber(s)] = true end
    s = f:match("^optim_(%d+)%.safetensors$")
    if s then op[tonumber(s)] = true end
  end
  local both = {}
  for s in pairs(ck) do if op[s] then both[#both + 1] = s end end
  table.sort(both)
  local all = {}
  for s in pairs(ck) do all[#all + 1] = s end
  table.sort(all)
  return both, all, op
end

--- The checkpoint a resume would start from: path, step (or nil).
function T.latest(out)
  local both = scan(out)
  local s = both[#both]
  if not s then return nil end
  return out .. "/" .. ckpt_name(s), s
end

--- The model checkpoints (not optimiser files) in out: list of {step, path}.
function T.list(out)
  local _, all = scan(out)
  local r = {}
  for _, s in ipairs(all) do r[#r + 1] = { step = s, path = out .. "/" .. ckpt_name(s) } end
  return r
end

local csv_columns = { "step", "epoch", "lr", "loss", "acc", "train_loss", "train_acc", "test_loss", "test_acc",
                      "images_per_s", "elapsed_s", "checkpoint" }

local function fmt_cell(v)
  if v == nil then return "" end
  if type(v) == "number" then
    if math.type(v) == "integer" then return tostring(v) end
    return string.format("%.6g", v)
  end
  return tostring(v)
end

local function write_csv(out, rows)
  local lines = { table.concat(csv_columns, ",") }
  for _, r in ipairs(rows) do
    local cells = {}
    for i, c in ipairs(csv_columns) do cells[i] = fmt_cell(r[c]) end
    lines[#lines + 1] = table.concat(cells, ",")
  end
  util.write_atomic(out .. "/log.csv", table.concat(lines, "\n") .. "\n")
end

-- ---------------------------------------------------------------------------
-- Configuration

-- srgeo._options(set, t, op), its message raised as it is ("srgeo.train:
-- batch must be an integer in 1..10000000, got 0"); rename: {declared name =
-- the name the user wrote} (adam_eps is AdamW's eps).
local function declared(set, t, op, rename)
  local ok, v = pcall(srgeo._options, set, t, op)
  if ok then return v end
  local msg = tostring(v)
  for from, to in pairs(rename or {}) do msg = msg:gsub("^(" .. op:gsub("%p", "%%%0") .. ": )" .. from .. " ", "%1" .. to .. " ") end
  util.raise { msg = msg }
end

local function resolve(opts, check_only)
  if type(opts) ~= "table" then fail("options must be a table") end
  local v = declared("train", opts, "srgeo.train")
  if not opts.model and not check_only then fail("%s is required", util.option("model")) end
  if not opts.data and not check_only then fail("%s is required", util.option("data")) end
  if opts.epochs and opts.steps then fail("give %s or %s, not both", util.option("epochs"), util.option("steps")) end
  if not opts.epochs and not opts.steps then fail("give %s or %s", util.option("epochs"), util.option("steps")) end
  local c = {}
  c.batch = v.batch
  c.optimizer = v.optimizer
  local sgd = c.optimizer == "sgd"
  -- The optimiser's own options, by its declaration; the other's are errors.
  local oo, rename = {}, {}
  for key, o in pairs(optimizer_keys[c.optimizer]) do oo[o] = opts[key]; rename[o] = key end
  for key in pairs(optimizer_keys[sgd and "adamw" or "sgd"]) do
    if opts[key] ~= nil and not optimizer_keys[c.optimizer][key] then
      fail("%s is an option of optimizer \"%s\" (optimizer is \"%s\")", key, sgd and "adamw" or "sgd", c.optimizer)
    end
  end
  local ov = declared(c.optimizer, oo, "srgeo.train", rename)
  c.lr, c.weight_decay = ov.lr, ov.weight_decay
  if sgd then
    c.momentum, c.nesterov = ov.momentum, ov.nesterov
  else
    c.beta1, c.beta2, c.adam_eps = ov.beta1, ov.beta2, ov.eps
  end
  c.schedule = v.schedule
  if c.schedule == "step" then
    c.milestones = opts.milestones or { 0.5, 0.75 }
    if type(c.milestones) ~= "table" then fail("milestones must be a list of numbers") end
    for i, m in ipairs(c.milestones) do
      if type(m) ~= "number" or not (m >= 0) or m == math.huge then
        fail("milestones[%d] must be a number >= 0 (a fraction of the run, or a step count), got %s", i, tostring(m))
      end
    end
    c.gamma = v.gamma
  end
  c.warmup = v.warmup
  c.labels = v.labels
  c.data_kind = v.data_kind
  -- Controls (random labels / noise images) train without augmentation
  -- unless asked, as in Zhang et al. 2017 and the published protocol.
  local control = c.labels == "random" or c.data_kind == "noise"
  local aug = opts.augment
  if aug == nil then aug = not control end
  if aug == true then aug = { crop = 4, flip = true } end
  if aug then
    if type(aug) ~= "table" then fail("augment must be true, false or {crop =, flip =}, got %s", tostring(aug)) end
    for k in pairs(aug) do if k ~= "crop" and k ~= "flip" then fail("augment: unknown option '%s'", tostring(k)) end end
    if aug.crop ~= nil and (math.type(aug.crop) ~= "integer" or aug.crop < 0 or aug.crop > 4096) then
      fail("augment: crop must be an integer in 0..4096, got %s", tostring(aug.crop))
    end
    c.augment = { crop = aug.crop or 0, flip = aug.flip and true or false }
  else
    c.augment = false
  end
  c.objective = v.objective
  for name, keys in pairs(objective_keys) do
    if opts[name] and c.objective ~= name then fail("%s= given but objective is \"%s\"", name, c.objective) end
    if c.objective == name then
      local given = opts[name] or {}
      if type(given) ~= "table" then fail("%s= must be a table of options", name) end
      local known = {}
      for _, k in ipairs(keys) do known[k] = true end
      for k in pairs(given) do
        if not known[k] then fail("%s: unknown option '%s' (options: %s)", name, tostring(k), table.concat(keys, ", ")) end
      end
      local r = declared(name, given, "srgeo.train: " .. name)
      local o = {}
      for _, k in ipairs(keys) do o[k] = r[k] end
      if (name == "pgd" or name == "llr") and not o.step_size then o.step_size = 2.5 * o.eps / math.max(1, o.steps) end
      c[name] = o
    end
  end
  c.blur = v.blur
  if c.blur == 0 then c.blur = nil end
  c.blur_test = v.blur_test
  c.seed = v.seed
  c.drop_last = v.drop_last
  c.checkpoints = opts.checkpoints == nil and "log" or opts.checkpoints
  c.per_decade = v.per_decade
  c.epoch_checkpoints = v.epoch_checkpoints
  c.eval_train = v.eval_train
  c.eval_test = v.eval_test
  c.eval_batch = v.eval_batch
  c.eval_every = v.eval_every
  c.log_every = v.log_every
  c.keep_optim = v.keep_optim
  c.sync_bn = v.sync_bn or nil -- only when set: older runs' trajectories lack it
  c.overlap = v.overlap
  c.bucket = v.bucket
  return c
end

--- srgeo.train.check(opts): the options checked as srgeo.train checks them
--- (model= and data= aside), raising the same error; scripts call it on
--- their command line before loading anything.
function T.check(opts) resolve(opts, true) end

--- srgeo.train.options() -> the declared options of srgeo.train, for help:
--- {{name=, what=, default=, help=}, ...}.
function T.options() return srgeo._option_specs("train") end

-- The options that determine the trajectory: a resumed run must agree.
local trajectory_keys = { "batch", "optimizer", "lr", "weight_decay", "momentum", "nesterov", "beta1", "beta2",
  "adam_eps", "schedule", "milestones", "gamma", "warmup", "labels", "data_kind", "augment", "objective", "pgd",
  "gaussian", "llr", "blur", "seed", "drop_last", "total_steps", "n_train", "sync_bn" }

local function trajectory(c)
  local t = {}
  for _, k in ipairs(trajectory_keys) do t[k] = c[k] end
  return t
end

-- ---------------------------------------------------------------------------
-- The run

local function progress_line(st, live)
  local now = srgeo._clock()
  if now - (st.last_print or 0) < 0.25 and st.step < st.total then return end
  st.last_print = now
  local done = st.step - st.start
  local el = now - st.t0
  local train_s = el - (st.eval_s or 0) -- evaluating checkpoints is not training
  local ips = train_s > 0 and done * st.batch / train_s or 0
  local eta = done > 0 and el * (st.total - st.step) / done or 0 / 0
  -- The running means of the current log interval (just after a log row:
  -- that row's values).
  local loss, acc = st.last_loss or 0 / 0, st.last_acc or 0 / 0
  if st.acc_n > 0 then loss, acc = st.acc_loss / st.acc_n, st.acc_correct / math.max(1, st.acc_images) end
  live.show(string.format("[train] step %d/%d  ep %.2f  loss %.4f  acc %.1f%%  lr %.4g  %.0f img/s  ETA %s",
    st.step, st.total, st.step / st.spe, loss, 100 * acc, st.lr, ips, util.duration(eta)))
end

function T.train(opts)
  local c = resolve(opts)
  local m = opts.model
  if opts.threads then srgeo.threads(opts.threads) end
  local out = opts.out
  local seed = c.seed

  -- Data: materialised once; blur, noise images and label permutation are
  -- applied here, before the pipeline.
  local ds = opts.data
  if c.blur then
    if not (ds.blurred) then fail("blur= needs a dataset with :blurred(sigma) (srgeo.data)") end
    ds = ds:blurred(c.blur)
  end
  local X, labels = materialize(ds, "data")
  local shape = X:shape()
  local N = shape[1]
  if c.data_kind == "noise" then
    X = srgeo.augment.uniform { n = N, shape = { shape[2], shape[3], shape[4] }, seed = mix(seed, STREAM.noise) }
  end
  if c.labels == "random" then labels = T.permute_labels(labels, mix(seed, STREAM.labels)) end
  if m:dtype() == "float64" then X = X:double() end
  local Xtest, ltest
  if opts.test_data then
    local tds = opts.test_data
    if c.blur and c.blur_test then tds = tds:blurred(c.blur) end
    Xtest, ltest = materialize(tds, "test_data")
    if m:dtype() == "float64" then Xtest = Xtest:double() end
  end
  -- Fixed seeded evaluation subsets.
  local eval_train_idx
  if c.eval_train and c.eval_train ~= false then
    local k = math.min(c.eval_train, N)
    local p = srgeo.augment.permutation(N, mix(seed, STREAM.eval_train))
    eval_train_idx = {}
    for i = 1, k do eval_train_idx[i] = p[i] end
  end
  local eval_test_idx
  if Xtest and c.eval_test and c.eval_test < #ltest then
    local p = srgeo.augment.permutation(#ltest, mix(seed, STREAM.eval_test))
    eval_test_idx = {}
    for i = 1, c.eval_test do eval_test_idx[i] = p[i] end
  end

  local B = c.batch
  if B < 1 or B > N then fail("batch %d must be in 1..%d (the training set size)", B, N) end
  -- Batches per epoch: the last partial batch is kept (PyTorch's default)
  -- unless drop_last, or unless it would hold a single image, which
  -- BatchNorm cannot normalise.
  local spe = (c.drop_last or N % B == 1) and N // B or (N + B - 1) // B
  local total = opts.steps or opts.epochs * spe
  c.total_steps, c.n_train, c.steps_per_epoch = total, N, spe
  -- Data-parallel under mpirun: each rank a contiguous shard of every batch.
  local mpi = srgeo.mpi
  local ranks, rank = mpi.size(), mpi.rank()
  if ranks > 1 then
    if c.objective == "llr" then
      fail("objective \"llr\" runs in one process (its weighted passes are not split over ranks); run it without mpirun")
    end
    local last = N - (spe - 1) * B
    if math.min(B, last) < ranks then
      fail("a batch of %d rows cannot be split over %d ranks (each needs a row); a smaller -np, a larger batch, or drop_last",
        math.min(B, last), ranks)
    end
  end
  c.epochs = opts.epochs
  local stop_at = math.min(opts.stop_at or total, total)

  local ckpts = {}
  if c.checkpoints == "log" then
    for _, s in ipairs(T.checkpoint_steps(total, { per_decade = c.per_decade, steps_per_epoch = c.epoch_checkpoints and spe or nil })) do ckpts[s] = true end
  elseif type(c.checkpoints) == "table" then
    for _, s in ipairs(c.checkpoints) do ckpts[s] = true end
    ckpts[total] = true
  elseif c.checkpoints == "none" or c.checkpoints == false then
    ckpts[total] = true
  else
    fail("checkpoints must be \"log\", a list of steps or \"none\"")
  end
  if not out then ckpts = {} end

  local opt
  if c.optimizer == "sgd" then
    opt = srgeo.optim.sgd { lr = c.lr, momentum = c.momentum, nesterov = c.nesterov, weight_decay = c.weight_decay }
  else
    opt = srgeo.optim.adamw { lr = c.lr, beta1 = c.beta1, beta2 = c.beta2, eps = c.adam_eps, weight_decay = c.weight_decay }
  end

  local info = srgeo.models.info(m)
  local training_json = json.encode(c)
  local traj_json = json.encode(trajectory(c))

  -- State carried across a resume.
  local st = { step = 0, start = 0, total = total, batch = B, spe = spe, acc_loss = 0, acc_correct = 0, acc_n = 0,
               acc_images = 0, elapsed = 0, lr = T.lr_at(0, total, c) }
  local rows = {}
  local checkpoints = {}
  local progress = opts.progress
  if rank ~= 0 then progress = false end -- rank 0 reports
  -- the line redrawn in place: on a terminal, or Jupyter's display (util.live)
  local live = (progress == nil or progress == true) and util.live_line("train", progress == true) or nil
  if progress == nil then progress = live ~= nil end

  -- Rank 0 resumes from its files and hands the state to the others below.
  if out and rank == 0 then
    util.mkdir(out)
    srgeo._clean_tmp(out .. "/log.csv") -- what killed writers left (dead PIDs only: core/base/fsutil.h)
    local both, all = scan(out)
    if #all > 0 and opts.resume == false then
      fail("%s already holds checkpoints (%s ...); resume=true continues that run, or remove them", out, ckpt_name(all[1]))
    end
    if #all > 0 and #both == 0 then
      fail("%s holds model checkpoints but no optimiser state to resume from", out)
    end
    local s = both[#both]
    if s then
      local opath = out .. "/" .. optim_name(s)
      local f <close> = srgeo.safetensors.open(opath)
      local meta = f:metadata()
      if meta.trajectory ~= traj_json then
        local old = json.decode(meta.trajectory or "{}")
        local diff = {}
        for _, k in ipairs(trajectory_keys) do
          if json.encode(old[k]) ~= json.encode(trajectory(c)[k]) then
            diff[#diff + 1] = string.format("%s: %s -> %s", k, json.encode(old[k]), json.encode(trajectory(c)[k]))
          end
        end
        fail("cannot resume %s: its run was configured differently (%s); use another out=", out, table.concat(diff, "; "))
      end
      m:load(out .. "/" .. ckpt_name(s))
      local state = {}
      for _, k in ipairs(f:keys()) do state[k] = f:get(k, m:dtype()) end
      opt:load_state(m, state)
      opt:set_steps(math.tointeger(tonumber(meta.optimizer_steps)))
      local ts = json.decode(meta.train_state)
      for k, v in pairs(ts) do st[k] = v end
      st.start = s
      st.step = s
      st.resumed = true
      rows = json.decode(meta.log or "[]")
      checkpoints = json.decode(meta.checkpoints or "[]")
      if tonumber(meta.threads) ~= srgeo.threads() then
        io.stderr:write(string.format("srgeo.train: warning: resuming with %d threads, the run used %s; results may differ in the last bits\n",
          srgeo.threads(), tostring(meta.threads)))
      end
      if tonumber(meta.ranks or 1) ~= ranks then
        io.stderr:write(string.format("srgeo.train: resuming a run of %s ranks on %d; the gradients' sums change order "
          .. "(the last bits)%s\n", meta.ranks or 1, ranks, c.sync_bn and "" or ", and BatchNorm's batch statistics "
          .. "are taken per rank (sync_bn=true takes them over the whole batch)"))
      end
    end
  end
  if ranks > 1 then
    -- One model and optimiser state on every rank: rank 0's (its initial
    -- weights, or the checkpoint it resumed from).
    local r = mpi.bcast(st.resumed and { st = st, rows = rows, checkpoints = checkpoints, steps = opt.steps } or false)
    if r and rank ~= 0 then
      for k, v in pairs(r.st) do st[k] = v end
      rows, checkpoints = r.rows, r.checkpoints
      opt:set_steps(r.steps)
    end
    srgeo._mpi.bcast_tensors(m)
    srgeo._mpi.bcast_tensors(opt:state(m))
  end

  local perm, perm_epoch
  local Xb, Xbuf
  local t_session = srgeo._clock()
  st.t0 = t_session
  local interval_t0, interval_images, interval_eval = t_session, 0, 0

  -- Evaluation time is kept apart (st.eval_s, this session): throughput is
  -- training's alone, not diluted by scoring checkpoints.
  st.eval_s = 0
  local function eval_now()
    local te = srgeo._clock()
    local r = {}
    if eval_train_idx then
      local e = T._evaluate(m, X, labels, eval_train_idx, c.eval_batch)
      r.train_loss, r.train_acc = e.loss, e.acc
    end
    if Xtest then
      local e = T._evaluate(m, Xtest, ltest, eval_test_idx, c.eval_batch)
      r.test_loss, r.test_acc = e.loss, e.acc
    end
    st.eval_s = st.eval_s + (srgeo._clock() - te)
    return r
  end

  local function row_at(step)
    local r = rows[#rows]
    if r and r.step == step then return r end
    r = { step = step, epoch = step / spe, lr = st.lr }
    rows[#rows + 1] = r
    return r
  end

  local function save_checkpoint(step)
    local ev = eval_now()
    local r = row_at(step)
    for k, v in pairs(ev) do r[k] = v end
    r.elapsed_s = st.elapsed + (srgeo._clock() - t_session)
    r.checkpoint = ckpt_name(step)
    local meta = {
      training = training_json, step = step, epoch = string.format("%.6g", step / spe),
      epochs_done = step // spe, total_steps = total, seed = seed, srgeo_version = srgeo.version,
      threads = srgeo.threads(), ranks = ranks, name = opts.name, command = opts.command,
      train_acc = ev.train_acc, train_loss = ev.train_loss, test_acc = ev.test_acc, test_loss = ev.test_loss,
    }
    if info then
      meta.architecture = info.arch
      local cfg = copy(info.config or {})
      cfg.init = nil
      meta.config = cfg
    end
    for k, v in pairs(meta) do if type(v) == "number" and math.type(v) == "float" then meta[k] = string.format("%.17g", v) end end
    local entry = { step = step, path = ckpt_name(step), train_acc = ev.train_acc, test_acc = ev.test_acc,
                    train_loss = ev.train_loss, test_loss = ev.test_loss }
    checkpoints[#checkpoints + 1] = entry
    -- Optimiser file first, then the model file: a model checkpoint is
    -- complete (resumable) once both exist, and the rename of the second is
    -- the commit.
    local tstate = {}
    for _, k in ipairs { "acc_loss", "acc_correct", "acc_n", "acc_images" } do tstate[k] = st[k] end
    tstate.elapsed = r.elapsed_s
    local ometa = { step = tostring(step), optimizer_steps = tostring(opt.steps), trajectory = traj_json,
                    training = training_json, train_state = json.encode(tstate), log = json.encode(rows),
                    checkpoints = json.encode(checkpoints), threads = tostring(srgeo.threads()),
                    ranks = tostring(ranks), srgeo_version = srgeo.version }
    if rank == 0 then -- the ranks hold the same model: rank 0 writes
      srgeo.safetensors.save(out .. "/" .. optim_name(step), opt:state(m), ometa)
      m:save(out .. "/" .. ckpt_name(step), meta)
    end
    write_csv(out, rows)
    if c.keep_optim ~= "all" and rank == 0 then
      local _, _, op = scan(out)
      for s in pairs(op or {}) do
        if s ~= step then os.remove(out .. "/" .. optim_name(s)) end
      end
    end
    if progress == "lines" and rank == 0 then
      io.stderr:write(string.format("[train] checkpoint %s  train acc %s  test acc %s\n", ckpt_name(step),
        ev.train_acc and string.format("%.4f", ev.train_acc) or "-", ev.test_acc and string.format("%.4f", ev.test_acc) or "-"))
    end
    if opts.on_checkpoint then opts.on_checkpoint(entry, m) end
    return entry
  end

  if out and not st.resumed and ckpts[0] then save_checkpoint(0) end

  local aug = c.augment
  local obj = c.objective
  -- Gradients left by an interrupted step (Ctrl-C in the REPL) must not leak
  -- into this run's first update.
  m:zero_grad()
  m:train()
  while st.step < stop_at do
    local s = st.step
    local e, pos = s // spe, s % spe
    if perm_epoch ~= e then
      perm = srgeo.augment.permutation(N, mix(seed, STREAM.shuffle, e))
      perm_epoch = e
    end
    local first = pos * B + 1
    local last = math.min(first + B - 1, N)
    local idx, lab = {}, {}
    for k = first, last do
      local i = perm[k]
      idx[#idx + 1] = i
      lab[#lab + 1] = labels[i]
    end
    Xbuf = srgeo.augment.batch(X, idx, { crop = aug and aug.crop or 0, flip = aug and aug.flip or false,
                                         seed = mix(seed, STREAM.augment, s), out = Xbuf })
    Xb = Xbuf
    st.lr = T.lr_at(s, total, c)
    opt:set_lr(st.lr)
    local loss, correct
    local oseed = mix(seed, STREAM.objective, s)
    -- Random draws are by row of the whole batch, so a rank's shard (rows
    -- lo .. lo + cnt - 1) sees what one process would.
    if obj == "gaussian" then Xb = srgeo.augment.gaussian(Xb, c.gaussian.sigma, oseed, c.gaussian.clip) end
    local lo, step_opts = 1, nil
    if ranks > 1 then
      local cnt
      lo, cnt = #idx * rank // ranks + 1, #idx * (rank + 1) // ranks - #idx * rank // ranks
      Xb = Xb:narrow(1, lo, cnt)
      lab = table.move(lab, lo, lo + cnt - 1, 1, {})
      step_opts = { rows = #idx, sync_bn = c.sync_bn, overlap = c.overlap, bucket = c.bucket }
    end
    if obj == "ce" or obj == "gaussian" then
      loss, correct = srgeo._train_step(m, opt, Xb, lab, step_opts)
    elseif obj == "pgd" then
      local p = c.pgd
      local Xa = srgeo._pgd(m, Xb, lab, { norm = p.norm, eps = p.eps, steps = p.steps, step_size = p.step_size,
        random_start = p.random_start, use_best = p.use_best, eval_mode = p.eval_mode, seed = oseed, row_offset = lo - 1 })
      loss, correct = srgeo._train_step(m, opt, Xa, lab, step_opts)
    else
      local p = c.llr
      local r = srgeo._llr_step(m, opt, Xb, lab, { norm = p.norm, eps = p.eps, steps = p.steps,
        step_size = p.step_size, random_start = p.random_start, lambda = p.lambda, mu = p.mu, fd = p.fd,
        eval_mode = p.eval_mode, seed = oseed })
      loss, correct = r.loss, r.correct
    end
    if ranks > 1 then loss, correct = mpi.allreduce(loss), mpi.allreduce(correct) end
    if loss ~= loss then fail("loss is NaN at step %d (lr %g); lower lr=", s, st.lr) end
    st.step = s + 1
    st.acc_loss, st.acc_correct = st.acc_loss + loss, st.acc_correct + correct
    st.acc_n, st.acc_images = st.acc_n + 1, st.acc_images + #idx
    interval_images = interval_images + #idx
    local now_step = st.step
    local logged = now_step % c.log_every == 0 or now_step == total
    if logged then
      local now = srgeo._clock()
      local r = row_at(now_step)
      r.lr = st.lr
      r.loss = st.acc_loss / math.max(1, st.acc_n)
      r.acc = st.acc_correct / math.max(1, st.acc_images)
      r.images_per_s = interval_images / math.max(1e-9, now - interval_t0 - (st.eval_s - interval_eval))
      r.elapsed_s = st.elapsed + (now - t_session)
      interval_t0, interval_images, interval_eval = now, 0, st.eval_s
      st.last_loss, st.last_acc = r.loss, r.acc
      st.acc_loss, st.acc_correct, st.acc_n, st.acc_images = 0, 0, 0, 0
      if opts.on_log then opts.on_log(r) end
      if progress == "lines" and rank == 0 then
        io.stderr:write(string.format("[train] step %d/%d  ep %.2f  loss %.4f  acc %.4f  lr %.4g  %.0f img/s\n",
          now_step, total, now_step / spe, r.loss, r.acc, r.lr, r.images_per_s))
      end
    end
    if c.eval_every and now_step % c.eval_every == 0 and not ckpts[now_step] then
      local r = row_at(now_step)
      for k, v in pairs(eval_now()) do r[k] = v end
    end
    if ckpts[now_step] then
      save_checkpoint(now_step)
      m:train()
    elseif out and logged then
      write_csv(out, rows)
    end
    if progress == true then progress_line(st, live) end
    if srgeo.interrupted() then
      if progress == true then live.done(true) end
      fail("interrupted at step %d (resume=true continues from the last checkpoint)", now_step)
    end
  end
  if progress == true then live.done() end
  m:eval()
  local done = st.step - st.start
  local final = {}
  local last = checkpoints[#checkpoints]
  if last and last.step == st.step then
    final = { train_acc = last.train_acc, test_acc = last.test_acc, train_loss = last.train_loss, test_loss = last.test_loss }
  elseif not out then
    final = eval_now()
  end
  -- The session ends after the final evaluation: eval_s counts it, so a
  -- session read before it could be shorter than its own evaluations (seen
  -- under ASan, where scoring 600 images outlasted 8 small steps).
  local session = srgeo._clock() - t_session
  return {
    out = out, model = m, step = st.step, steps = total, steps_per_epoch = spe, history = rows,
    checkpoints = checkpoints, final = final, seconds = session, config = c, eval_seconds = st.eval_s,
    images_per_s = done > 0 and done * B / math.max(1e-9, session - st.eval_s) or nil,
  }
end

return setmetatable(T, { __call = function(_, opts) return T.train(opts) end })
