-- train_spec.lua: the trainer: a PyTorch reference step, schedules, the
-- data pipeline, objectives, checkpoints, resume (also after SIGKILL).
local T = ...
local srgeo = require "srgeo"
local nn = srgeo.nn
local util = require "srgeo.util"

local FIX = "tests/fixtures/train/"

local function tmpdir(tag)
  local d = os.tmpname()
  os.remove(d)
  d = d .. "_srgeo_" .. tag
  os.execute("rm -rf " .. util.shell_quote(d))
  util.mkdir(d)
  return d
end

local function rmrf(d) os.execute("rm -rf " .. util.shell_quote(d)) end

-- max |a - b| over all entries
local function maxdiff(a, b)
  return (a:double() - b:double()):abs():max()
end

-- max |a-b| / max(|b|, 1e-3) elementwise-normalised by the reference's scale
local function reldiff(a, b)
  local d = maxdiff(a, b)
  local s = b:double():abs():max()
  return d / math.max(s, 1e-3)
end

-- The fixture's CNN (tests/fixtures/gen_train.py) with torch's key names.
local function fixture_cnn()
  return nn.sequential {
    { "conv", nn.conv2d { in_channels = 1, out_channels = 3, kernel_size = 3, padding = 1, bias = false } },
    { "bn", nn.batchnorm2d { num_features = 3 } },
    { "relu", nn.relu {} },
    { "pool", nn.maxpool2d { kernel_size = 2, stride = 2 } },
    { "flat", nn.flatten {} },
    { "fc", nn.linear { in_features = 27, out_features = 4 } },
  }
end

local function fixture_labels()
  local t = srgeo.npy.load(FIX .. "labels.npy"):totable()
  local l = {}
  for i, v in ipairs(t) do l[i] = math.tointeger(v) end
  return l
end

T.test("train: two SGD / nesterov / AdamW steps on a small CNN match PyTorch 1.13", function()
  local X = srgeo.npy.load(FIX .. "x.npy")
  local labels = fixture_labels()
  local opts = {
    sgd = function() return srgeo.optim.sgd { lr = 0.1, momentum = 0.9, weight_decay = 5e-4 } end,
    nest = function() return srgeo.optim.sgd { lr = 0.05, momentum = 0.9, weight_decay = 1e-3, nesterov = true } end,
    adamw = function() return srgeo.optim.adamw { lr = 1e-2, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.05 } end,
  }
  local worst = 0
  for _, name in ipairs { "sgd", "nest", "adamw" } do
    local make = opts[name]
    local m = fixture_cnn()
    for _, k in ipairs(m:param_names()) do
      local t = srgeo.npy.load(FIX .. "init_" .. k .. ".npy")
      if #m:get(k):shape() == 0 then m:get(k):fill(t:reshape { -1 }:totable()[1]) else m:set(k, t) end
    end
    m:train()
    local opt = make()
    local want_loss = srgeo.npy.load(FIX .. name .. "_loss.npy"):totable()
    for step = 1, 2 do
      local loss = srgeo._train_step(m, opt, X, labels)
      T.close(loss, want_loss[step], 1e-6, name .. " loss of step " .. step)
      local p = m:state_dict()
      for _, k in ipairs(m:param_names()) do
        local want = srgeo.npy.load(FIX .. string.format("%s_step%d_%s.npy", name, step, k))
        local e = reldiff(p[k]:reshape { -1 }, want:reshape { -1 })
        worst = math.max(worst, e)
        if e > 1e-5 then error(string.format("%s step %d %s: rel err %.3g", name, step, k, e)) end
      end
    end
  end
  if os.getenv("SRGEO_VERBOSE") then print(string.format("  worst rel err vs torch: %.3g", worst)) end
end)

T.test("train: learning-rate schedules", function()
  local c = { lr = 0.1, schedule = "cosine" }
  T.close(srgeo.train.lr_at(0, 100, c), 0.1, 1e-15)
  T.close(srgeo.train.lr_at(50, 100, c), 0.05, 1e-15)
  T.close(srgeo.train.lr_at(99, 100, c), 0.1 * 0.5 * (1 + math.cos(math.pi * 0.99)), 1e-15)
  c.warmup = 10
  T.close(srgeo.train.lr_at(0, 100, c), 0.01, 1e-15)
  T.close(srgeo.train.lr_at(9, 100, c), 0.1, 1e-15)
  T.close(srgeo.train.lr_at(10, 100, c), 0.1, 1e-15)
  T.close(srgeo.train.lr_at(55, 100, c), 0.05, 1e-15)
  local s = { lr = 1, schedule = "step", milestones = { 0.5, 0.75 }, gamma = 0.1 }
  T.close(srgeo.train.lr_at(49, 100, s), 1, 0)
  T.close(srgeo.train.lr_at(50, 100, s), 0.1, 1e-15)
  T.close(srgeo.train.lr_at(80, 100, s), 0.01, 1e-15)
  T.close(srgeo.train.lr_at(7, 100, { lr = 0.3, schedule = "constant" }), 0.3, 0)
end)

T.test("train: log-spaced checkpoint steps include 0, epoch ends and the last step", function()
  local s = srgeo.train.checkpoint_steps(1000, { per_decade = 4, steps_per_epoch = 300 })
  T.eq(table.concat(s, ","), "0,1,2,3,6,10,18,32,56,100,178,300,316,562,600,900,1000")
end)

T.test("train: augment.permutation and random labels keep class counts", function()
  local p = srgeo.augment.permutation(10, 3)
  local seen = {}
  for _, v in ipairs(p) do seen[v] = true end
  for i = 1, 10 do T.truthy(seen[i], "permutation misses " .. i) end
  T.eq(table.concat(srgeo.augment.permutation(10, 3), ","), table.concat(p, ","))
  -- The trainer's random-label control.
  local labels = {}
  for i = 1, 1000 do labels[i] = (i * 7) % 10 end
  local perm = srgeo.train.permute_labels(labels, 5)
  local count_a, count_b, changed = {}, {}, 0
  for i = 1, 1000 do
    local r = perm[i]
    count_a[labels[i]] = (count_a[labels[i]] or 0) + 1
    count_b[r] = (count_b[r] or 0) + 1
    if r ~= labels[i] then changed = changed + 1 end
  end
  for c = 0, 9 do T.eq(count_b[c], count_a[c], "class " .. c .. " count") end
  T.truthy(changed > 800, "only " .. changed .. " labels changed")
end)

-- A tiny 4-class set of 1x8x8 images: class c has a bright quadrant c
-- (so horizontal flips change the class: train it with augment = false).
local function tiny_set(n, seed)
  math.randomseed(seed)
  local flat, labels = {}, {}
  for i = 1, n do
    local c = (i - 1) % 4
    labels[i] = c
    for y = 0, 7 do
      for x = 0, 7 do
        local q = (y >= 4 and 2 or 0) + (x >= 4 and 1 or 0)
        flat[#flat + 1] = 0.3 * math.random() + (q == c and 0.6 or 0)
      end
    end
  end
  local X = srgeo.tensor(flat):reshape { n, 1, 8, 8 }
  -- Only the minimal dataset interface (#ds, ds:batch(indices)).
  return setmetatable({ X = X, labels = labels }, {
    __len = function() return n end,
    __index = {
      batch = function(self, idx)
        local lab = {}
        for k, i in ipairs(idx) do lab[k] = self.labels[i] end
        return srgeo.augment.batch(self.X, idx), lab
      end,
    },
  })
end

local function tiny_cnn(seed)
  local m = nn.sequential {
    { "conv", nn.conv2d { in_channels = 1, out_channels = 4, kernel_size = 3, padding = 1 } },
    { "bn", nn.batchnorm2d { num_features = 4 } },
    { "relu", nn.relu {} },
    { "pool", nn.maxpool2d { kernel_size = 2, stride = 2 } },
    { "flat", nn.flatten {} },
    { "fc", nn.linear { in_features = 64, out_features = 4 } },
  }
  m:init(seed)
  return m
end

local function same_weights(a, b, what)
  local pa, pb = a:state_dict(), b:state_dict()
  for _, k in ipairs(a:param_names()) do
    local d = maxdiff(pa[k], pb[k])
    if d ~= 0 then error(string.format("%s: %s differs by %.3g", what, k, d), 2) end
  end
end

T.test("train: a tiny CNN's loss falls and test accuracy rises", function()
  local tr, te = tiny_set(256, 1), tiny_set(128, 2)
  local m = tiny_cnn(3)
  -- (no augmentation: flips would swap this task's classes)
  local run = srgeo.train { model = m, data = tr, test_data = te, steps = 40, batch = 32, lr = 0.05,
                            progress = false, log_every = 10, eval_train = 128, augment = false }
  local h = run.history
  T.truthy(#h >= 4, "history rows")
  T.truthy(h[#h].loss < h[1].loss, string.format("loss %g -> %g", h[1].loss, h[#h].loss))
  T.truthy(run.final.test_acc > 0.9, "test acc " .. tostring(run.final.test_acc))
  local e = srgeo.train.evaluate(m, te)
  T.close(e.acc, run.final.test_acc, 1e-12)
end)

T.test("train: resume from a mid-run checkpoint gives bit-identical weights (ce + augment, pgd, llr, gaussian)", function()
  local tr, te = tiny_set(100, 4), tiny_set(40, 5)
  local cases = {
    { name = "ce", extra = { augment = { crop = 2, flip = true } } },
    { name = "pgd", extra = { objective = "pgd", pgd = { norm = "linf", eps = 0.05, steps = 2 } } },
    { name = "llr", extra = { objective = "llr", llr = { eps = 0.05, steps = 1 }, optimizer = "adamw", lr = 1e-2 } },
    { name = "gaussian", extra = { objective = "gaussian", gaussian = { sigma = 0.1 }, nesterov = true } },
  }
  for _, case in ipairs(cases) do
    local da, db = tmpdir("resA"), tmpdir("resB")
    local function opts(out, stop)
      local o = { model = tiny_cnn(7), data = tr, test_data = te, steps = 14, batch = 16, lr = 0.05, out = out,
                  progress = false, log_every = 3, eval_train = 40, checkpoints = { 5, 9 }, stop_at = stop, seed = 11 }
      for k, v in pairs(case.extra) do o[k] = v end
      return o
    end
    local ra = srgeo.train(opts(da))
    local b1 = srgeo.train(opts(db, 7))
    T.eq(b1.step, 7, case.name .. " stop_at")
    local ob = opts(db)
    local rb = srgeo.train(ob)
    T.eq(rb.step, 14)
    same_weights(ra.model, rb.model, case.name .. " resumed vs uninterrupted")
    -- The optimiser state too (momentum / moments) went through the file.
    local fa <close> = srgeo.safetensors.open(da .. "/optim_00000014.safetensors")
    local fb <close> = srgeo.safetensors.open(db .. "/optim_00000014.safetensors")
    for _, k in ipairs(fa:keys()) do T.eq(maxdiff(fa:get(k), fb:get(k)), 0, case.name .. " " .. k) end
    -- The log up to the last checkpoint is identical except timings.
    for i, r in ipairs(ra.history) do
      local s = rb.history[i]
      T.eq(s.step, r.step)
      T.eq(s.loss, r.loss, case.name .. " logged loss at step " .. r.step)
      T.eq(s.test_acc, r.test_acc)
    end
    rmrf(da)
    rmrf(db)
  end
end)

T.test("train: checkpoints carry metadata, load with srgeo.models.load, and a changed config refuses to resume", function()
  local tr, te = tiny_set(64, 6), tiny_set(32, 7)
  local d = tmpdir("meta")
  local m = srgeo.models.mlp { input = { 1, 8, 8 }, hidden = { 16 }, num_classes = 4, seed = 2 }
  local run = srgeo.train { model = m, data = tr, test_data = te, steps = 12, batch = 16, out = d, progress = false,
                            command = "srgeo scripts/train.lua --test", eval_train = 32, seed = 5 }
  local names = srgeo._listdir(d)
  table.sort(names)
  T.eq(table.concat(names, " "), "ckpt_00000000.safetensors ckpt_00000001.safetensors ckpt_00000002.safetensors "
    .. "ckpt_00000003.safetensors ckpt_00000004.safetensors ckpt_00000006.safetensors ckpt_00000008.safetensors "
    .. "ckpt_00000010.safetensors "
    .. "ckpt_00000012.safetensors log.csv optim_00000012.safetensors")
  local m2, meta = srgeo.models.load(d .. "/ckpt_00000012.safetensors")
  T.eq(meta.architecture, "mlp")
  T.eq(meta.step, "12")
  T.eq(meta.seed, "5")
  T.eq(meta.srgeo_version, srgeo.version)
  T.eq(meta.command, "srgeo scripts/train.lua --test")
  T.close(tonumber(meta.test_acc), run.final.test_acc, 1e-12)
  local cfg = srgeo.json.decode(meta.training)
  T.eq(cfg.batch, 16)
  T.eq(cfg.total_steps, 12)
  same_weights(m2, m, "models.load")
  local csv = util.read_file(d .. "/log.csv")
  T.truthy(csv:find("^step,epoch,lr,loss,acc,train_loss,train_acc,test_loss,test_acc"), "csv header")
  T.truthy(csv:find("\n12,3,"), "csv row of step 12")
  -- Resuming the finished run is a no-op; a different config is refused.
  local again = srgeo.train { model = m, data = tr, test_data = te, steps = 12, batch = 16, out = d, progress = false,
                              eval_train = 32, seed = 5 }
  T.eq(again.step, 12)
  T.raises(function()
    srgeo.train { model = m, data = tr, steps = 12, batch = 8, out = d, progress = false, seed = 5 }
  end, "batch: 16 -> 8")
  T.raises(function() srgeo.train { model = m, data = tr, steps = 12, batch = 16, out = d, resume = false } end, "already holds checkpoints")
  T.raises(function() srgeo.train { model = m, data = tr, steps = 2, lr_max = 1 } end, "unknown option 'lr_max'")
  T.raises(function() srgeo.train { model = m, data = tr, steps = 2, pgd = { eps = 1 } } end, "pgd= given but objective is \"ce\"")
  rmrf(d)
end)

T.test("train: controls (random labels, noise data) and PGD robust accuracy", function()
  local tr, te = tiny_set(64, 8), tiny_set(64, 9)
  local m = tiny_cnn(1)
  local r = srgeo.train { model = m, data = tr, test_data = te, steps = 30, batch = 16, labels = "random",
                          progress = false, eval_train = 64, lr = 0.05 }
  T.eq(r.config.augment, false, "controls train without augmentation by default")
  T.truthy(r.final.test_acc < 0.6, "random labels generalise: " .. r.final.test_acc)
  local n = srgeo.train { model = tiny_cnn(1), data = tr, test_data = te, steps = 5, batch = 16, data_kind = "noise",
                          progress = false, eval_train = 64 }
  T.eq(n.config.data_kind, "noise")
  -- A trained model: PGD lowers accuracy; more eps, lower still.
  local clean = srgeo.train { model = tiny_cnn(2), data = tr, test_data = te, steps = 30, batch = 16, lr = 0.05,
                              progress = false, augment = false }
  local a0 = srgeo.train.evaluate(clean.model, te).acc
  local a1 = srgeo.train.robust_accuracy(clean.model, te, { norm = "l2", eps = 0.5, steps = 5 }).acc
  local a2 = srgeo.train.robust_accuracy(clean.model, te, { norm = "l2", eps = 2, steps = 5 }).acc
  T.truthy(a0 >= a1 and a1 >= a2 and a2 < a0, string.format("acc clean %g, eps .5 %g, eps 2 %g", a0, a1, a2))
end)

-- Kill test: a training run in a child process, SIGKILLed at random moments
-- and resumed; every checkpoint file left must load, and the final weights
-- must equal an uninterrupted run's.
T.test("train: SIGKILL mid-run never leaves a corrupt checkpoint, and resume finishes identically", function()
  local bin = T.shell()
  if not bin then error("kill test needs the srgeo binary as arg[-1], got " .. tostring(arg and arg[-1])) end
  local d, ref = tmpdir("kill"), tmpdir("killref")
  local script = d .. "_child.lua"
  util.write_atomic(script, string.format([[
    package.path = "./?.lua;" .. package.path
    srgeo.threads(1)
    local out = ...
    local function tiny_set(n, seed)
      math.randomseed(seed)
      local flat, labels = {}, {}
      for i = 1, n do
        local c = (i - 1) %% 4
        labels[i] = c
        for y = 0, 7 do for x = 0, 7 do
          local q = (y >= 4 and 2 or 0) + (x >= 4 and 1 or 0)
          flat[#flat + 1] = 0.3 * math.random() + (q == c and 0.6 or 0)
        end end
      end
      return srgeo.data.tensor(srgeo.tensor(flat):reshape { n, 1, 8, 8 }, labels)
    end
    local nn = srgeo.nn
    local m = nn.sequential {
      { "conv", nn.conv2d { in_channels = 1, out_channels = 8, kernel_size = 3, padding = 1 } },
      { "bn", nn.batchnorm2d { num_features = 8 } }, { "relu", nn.relu {} },
      { "pool", nn.maxpool2d { kernel_size = 2, stride = 2 } }, { "flat", nn.flatten {} },
      { "fc", nn.linear { in_features = 128, out_features = 4 } } }
    m:init(3)
    srgeo.train { model = m, data = tiny_set(256, 1), test_data = tiny_set(64, 2), steps = 400, batch = 32,
                  out = out, progress = false, per_decade = 12, eval_train = 64, seed = 9, log_every = 5 }
  ]]))
  local function count_ckpts(dir)
    local n = 0
    for _, f in ipairs(srgeo._listdir(dir) or {}) do if f:match("^ckpt_%d+%.safetensors$") then n = n + 1 end end
    return n
  end
  local function alive(pid)
    return os.execute(string.format("[ -e /proc/%s ] && ! grep -q '^State:.*Z' /proc/%s/status 2>/dev/null", pid, pid))
  end
  -- Start the child; with kill_at, SIGKILL it (after a random 0-30 ms) once
  -- that many checkpoints exist, so the kill lands mid-run whatever the
  -- machine's speed, often while the next file is being written.
  local function child(out, kill_at)
    local cmd = string.format("%s %s %s >/dev/null 2>&1 & echo $!", util.shell_quote(bin), util.shell_quote(script),
                              util.shell_quote(out))
    local p = io.popen(cmd)
    local pid = p:read("l")
    p:close()
    if kill_at then
      while alive(pid) and count_ckpts(out) < kill_at do os.execute("sleep 0.01") end
      os.execute(string.format("sleep %.3f; kill -9 %s 2>/dev/null", 0.03 * math.random(), pid))
    end
    -- Wait for the exit (a zombie left for init to reap counts as exited).
    while alive(pid) do os.execute("sleep 0.02") end
  end
  child(ref, nil)
  local ref_final = ref .. "/ckpt_00000400.safetensors"
  T.truthy(io.open(ref_final), "reference run finished")
  local total = #srgeo.train.checkpoint_steps(400, { per_decade = 12, steps_per_epoch = 8 })
  T.eq(count_ckpts(ref), total)
  math.randomseed(os.time())
  local kills, interrupted = 0, 0
  for i = 1, 5 do
    local target = math.min(total - 1, count_ckpts(d) + math.random(3, 15))
    child(d, target)
    kills = kills + 1
    local f = io.open(d .. "/ckpt_00000400.safetensors")
    if f then f:close() else interrupted = interrupted + 1 end
    if os.getenv("SRGEO_VERBOSE") then print("kill", i, target, count_ckpts(d), f ~= nil) end
    -- Every file that looks like a checkpoint is complete.
    for _, f in ipairs(srgeo._listdir(d)) do
      if f:match("^ckpt_%d+%.safetensors$") or f:match("^optim_%d+%.safetensors$") then
        local ok, err = pcall(function()
          local st <close> = srgeo.safetensors.open(d .. "/" .. f)
          T.truthy(#st:keys() > 0 or f:match("^optim"), f .. " has tensors")
          st:metadata()
        end)
        if not ok then error("after kill " .. i .. ": " .. f .. " does not load: " .. tostring(err)) end
      end
    end
  end
  -- The kills must have landed mid-run, or this test proves nothing.
  T.truthy(interrupted >= 4, string.format("only %d of %d kills interrupted the run", interrupted, kills))
  child(d, nil)
  local names = srgeo._listdir(d)
  for _, f in ipairs(names) do T.truthy(not f:find("%.tmp%."), "temporary file left: " .. f) end
  local a <close> = srgeo.safetensors.open(ref_final)
  local b <close> = srgeo.safetensors.open(d .. "/ckpt_00000400.safetensors")
  for _, k in ipairs(a:keys()) do T.eq(maxdiff(a:get(k), b:get(k)), 0, "after " .. kills .. " kills: " .. k) end
  rmrf(d)
  rmrf(ref)
  os.remove(script)
end)

T.test("train: throughput is training's alone (evaluation timed apart); srgeo train scores --eval-test 1000 test images", function()
  local tr, te = tiny_set(64, 6), tiny_set(600, 7)
  local m = srgeo.models.mlp { input = { 1, 8, 8 }, hidden = { 16 }, num_classes = 4, seed = 2 }
  local run = srgeo.train { model = m, data = tr, test_data = te, steps = 8, batch = 16, progress = false,
                            checkpoints = { 0, 2, 4, 6, 8 }, eval_train = 64, seed = 5 }
  T.truthy(run.eval_seconds > 0 and run.eval_seconds < run.seconds, string.format("evaluation time kept: %s s of a %s s session", tostring(run.eval_seconds), tostring(run.seconds)))
  -- images/s counts training time only: steps × batch over (session − evaluation)
  T.close(run.images_per_s, 8 * 16 / (run.seconds - run.eval_seconds), 1e-6 * run.images_per_s)
  -- Without out, the final score is evaluated after the loop: inside the
  -- session too.  One step of one image against 2400 scored ones: a session
  -- that ended before that evaluation is shorter than its evaluation time.
  local big = tiny_set(2400, 8)
  local t0 = srgeo._clock()
  local r1 = srgeo.train { model = m, data = tr, test_data = big, steps = 1, batch = 1, progress = false, seed = 5 }
  local outer = srgeo._clock() - t0
  T.truthy(r1.final.test_acc and r1.eval_seconds > 0, "the final evaluation ran")
  T.truthy(r1.eval_seconds <= r1.seconds and r1.seconds <= outer,
    string.format("final evaluation inside the session: %.4g s of a %.4g s session (call took %.4g s)", r1.eval_seconds,
      r1.seconds, outer))
  -- the command line's default: 1000 test images a checkpoint, not the whole test set
  local help = io.popen(string.format("%s train --help 2>&1", T.shell() or "build/srgeo")):read("a")
  local line = help:match("\n(  %-%-eval%-test N[^\n]*)")
  T.truthy(line and line:find("test images scored at each checkpoint", 1, true) and line:find("[1000]", 1, true), help)
end)

T.test("train: progress goes through util.live when it is set (Jupyter's display), a line per update, none on stderr", function()
  local util = require "srgeo.util"
  local tr, te = tiny_set(64, 1), tiny_set(32, 2)
  local shown, finished = {}, nil
  local saved = util.live
  util.live = function(label)
    T.eq(label, "train")
    return { show = function(text) shown[#shown + 1] = text end, done = function(keep) finished = keep or false end }
  end
  local ok, err = pcall(srgeo.train, { model = tiny_cnn(3), data = tr, test_data = te, steps = 6, batch = 16, lr = 0.05,
                                      log_every = 3, eval_train = 32, augment = false })
  util.live = saved
  T.truthy(ok, tostring(err))
  T.truthy(#shown >= 1, "progress shown by default where util.live is set")
  T.truthy(shown[#shown]:find("^%[train%] step 6/6"), "the last line: " .. tostring(shown[#shown]))
  T.eq(finished, false, "done() once at the end (cleared on a terminal, kept in Jupyter)")
end)
