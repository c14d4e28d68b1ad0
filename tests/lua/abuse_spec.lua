-- abuse_spec.lua: the public API called the way a hostile user would:
-- hostile shapes (wrapping products, negative, fractional, huge), indices
-- and lengths, NUL bytes and reserved names, wrong types, NaN and infinite
-- option values, bad options of every declared option set.  Each call must
-- end in a clean error naming the op (or succeed where the call is legal):
-- never a crash, never an internal Lua error ("attempt to ..."), never a
-- sanitizer report (`make sanitize` runs this spec under ASan + UBSan).
-- The calls are generated: families of ops times lists of hostile values.
local T = ...
local srgeo = require "srgeo"
local nn = srgeo.nn

local HUGE = { 1 << 62, -(1 << 62), 1 << 40, (1 << 40) + 1, 1 << 31, math.maxinteger, math.mininteger, -1, 0 }
local NUMS = { 0 / 0, math.huge, -math.huge, 1.5, -0.5, 1e300, -1e300 }
local NOT_NUMBERS = { "abc", "", "a\0b", {}, true, false, function() end }

local cases = {}
-- A call f() that, when it fails, must fail naming one of `names` (a
-- string or a list).  legal: the call may also succeed.
local function call(names, f, legal, what)
  cases[#cases + 1] = { names = type(names) == "table" and names or { names }, f = f, legal = legal, what = what }
end

local function show(v)
  if type(v) == "string" then return string.format("%q", v) end
  if type(v) == "table" then
    local t = {}
    for i, x in ipairs(v) do t[i] = show(x) end
    return "{" .. table.concat(t, ",") .. "}"
  end
  return tostring(v)
end

-- Hostile shapes: wrapping, huge, negative, fractional, too many dims, junk.
local shapes = {
  { 1 << 62, 4 }, { 1 << 40, 1 << 24 }, { 1 << 62, 1 << 62 }, { 0, 1 << 62 }, { 0, 1 << 32, 1 << 32 },
  { 1 << 41 }, { -1 }, { 2, -3 }, { 1.5 }, { 0 / 0 }, { math.huge }, { 1, 2, 3, 4, 5, 6, 7, 8, 9 },
  { "a" }, { {} }, { true }, { math.maxinteger }, { math.mininteger },
}

-- --- tensors -----------------------------------------------------------------
local CTOR = { "zeros", "ones", "rand", "randn", "tensor", "shape", "srgeo.", "bad argument" }
for _, fn in ipairs { "zeros", "ones", "rand", "randn" } do
  for _, s in ipairs(shapes) do
    call(CTOR, function() return srgeo[fn](s) end, false, fn .. show(s))
  end
  for _, v in ipairs(NUMS) do call(CTOR, function() return srgeo[fn](v) end, false, fn .. "(" .. show(v) .. ")") end
  for _, v in ipairs(NOT_NUMBERS) do call(CTOR, function() return srgeo[fn]({ 2 }, v, v) end, true, fn .. " junk") end
end
for _, s in ipairs(shapes) do call({ "full", "tensor", "shape", "bad argument" }, function() return srgeo.full(s, 1) end, false, "full" .. show(s)) end
for _, a in ipairs { { 1e300 }, { 0, 1, 0 }, { 0 / 0 }, { 1, math.huge }, { 1, 2, -0.0 }, { "x" } } do
  call("arange", function() return srgeo.arange(table.unpack(a)) end, false, "arange" .. show(a))
end
for _, t in ipairs { { 1, { 2 } }, { { 1 }, 2 }, { { 1, 2 }, { 3 } }, { "a" }, { srgeo.zeros(2) },
                     { { { { { { { { { 1 } } } } } } } } } } do
  call("tensor", function() return srgeo.tensor(t) end, false, "tensor" .. show(t))
end

local empty, t23, t0 = srgeo.zeros { 0 }, srgeo.arange(6):reshape(2, 3), srgeo.tensor(1.5)
for _, base in ipairs { empty, t23, t0 } do
  for _, s in ipairs(shapes) do
    local legal = s[1] == -1 and #s == 1 -- a flattening view
    call({ "reshape", "view" }, function() return base:view(s) end, legal, "view" .. show(s))
    call({ "reshape", "view" }, function() return base:reshape(table.unpack(s)) end, legal or type(s[1]) == "table",
      "reshape" .. show(s))
  end
  for _, s in ipairs { { -1, -1 }, { -2 }, { -1, 0 }, { 1 << 40, -1 }, { -1 }, { 0, -1 } } do
    call({ "reshape", "view" }, function() return base:view(s) end, true, "view" .. show(s))
  end
end
-- the reported ones, one by one
call("reshape", function() return srgeo.zeros { 0 }:view { 1 << 62, 4 }:get(1, 1) end, false, "view{2^62,4}:get")
call("reshape", function() return srgeo.zeros { 0 }:view { 1 << 40, 1 << 24 }:set(1, 3, 1) end, false, "view:set")
call("reshape", function() return srgeo.zeros { 0 }:reshape { 1 << 62, 1 << 62 }:row(1 << 40):sum() end, false, "row:sum")

for _, base in ipairs { t23, empty } do
  for _, i in ipairs(HUGE) do
    for _, j in ipairs { 1, 1 << 62, -1, 0 } do
      call("get", function() return base:get(i, j) end, true, "get")
      call("set", function() return base:set(0, i, j) end, true, "set")
      call("narrow", function() return base:narrow(i, j) end, true, "narrow")
      call("narrow", function() return base:narrow(j, i, 2) end, true, "narrow dim 2")
      call("slice", function() return base:slice(i, j) end, true, "slice")
    end
    call("row", function() return base:row(i) end, true, "row")
    call("index", function() return base:index { i, 1 } end, true, "index")
    for _, op in ipairs { "sum", "mean", "max", "min", "argmax", "norm", "size" } do
      call({ op, op:gsub("^arg", ""), "bad argument" }, function() return base[op](base, i) end, true, op .. "(" .. i .. ")")
    end
    call("unsqueeze", function() return base:unsqueeze(i) end, true, "unsqueeze")
    call("squeeze", function() return base:squeeze(i) end, true, "squeeze")
    call("transpose", function() return base:transpose(i, 1) end, true, "transpose")
  end
  for _, v in ipairs(NUMS) do
    call({ "get", "index", "integer", "bad argument" }, function() return base:get(v, 1) end, false, "get(" .. show(v) .. ")")
    call({ "narrow", "bad argument", "integer" }, function() return base:narrow(1, v) end, false, "narrow")
  end
  for _, v in ipairs(NOT_NUMBERS) do
    call({ "get", "integer", "bad argument", "index" }, function() return base:get(v, 1) end, false, "get junk")
    call({ "add", "bad argument", "expected" }, function() return base + v end, false, "+ junk")
  end
end
for _, list in ipairs { {}, { 1 }, { t23, "x" }, { t23, srgeo.zeros(4) }, { t23, srgeo.zeros({ 2, 3 }, "float64") } } do
  call("cat", function() return srgeo.cat(list) end, false, "cat")
  call("stack", function() return srgeo.stack(list) end, false, "stack")
  call("cat", function() return srgeo.cat({ t23, t23 }, 1 << 40) end, false, "cat dim")
end
for _, b in ipairs { srgeo.zeros(4), srgeo.zeros(3, 2, 5), empty, t0, srgeo.zeros({ 3, 2 }, "float64") } do
  call("matmul", function() return t23:matmul(b) end, true, "matmul")
  call({ "dot", "bad argument" }, function() return t23:dot(b) end, false, "dot")
  call({ "add", "mul", "broadcast" }, function() return t23 * b + b end, true, "broadcast")
end
call("check_finite", function() return srgeo.check_finite(srgeo.tensor { 1, 0 / 0 }, "a\0b") end, false, "check_finite")

-- --- names and files ---------------------------------------------------------
local D = "build/test-abuse"
os.execute("mkdir -p " .. D)
local w = srgeo.zeros(2)
for _, tensors in ipairs {
  { ["a\0b"] = w }, { { "a\0b", w } }, { __metadata__ = w }, { { "__metadata__", w } }, { { "w", w }, { "w", w } },
  { { 1, w } }, { { "w", 5 } }, { w = "x" }, { [1.5] = w }, { { "e", srgeo.zeros(0) } },
} do
  call("safetensors", function() return srgeo.safetensors.save(D .. "/n.safetensors", tensors) end, true, "st.save")
end
call("safetensors", function() return srgeo.safetensors.save(D .. "/m.safetensors", { w = w }, { ["k\0"] = "v" }) end, false, "meta key")
call("safetensors", function() return srgeo.safetensors.save(D .. "/m.safetensors", { w = w }, { k = "v\0" }) end, false, "meta value")
call("safetensors", function() return srgeo.safetensors.save(D .. "/m.safetensors", { w = w }, { k = {} }) end, false, "meta table")
for _, p in ipairs { D .. "/x\0.npy", D .. "/no/such/dir/x.npy", D, "" } do
  call("npy", function() return srgeo.npy.save(p, w) end, false, "npy.save " .. show(p))
  call("npy", function() return srgeo.npy.load(p) end, false, "npy.load " .. show(p))
  call("safetensors", function() return srgeo.safetensors.open(p) end, false, "st.open " .. show(p))
  call("image", function() return srgeo.image.load(p) end, false, "image.load " .. show(p))
  call("image", function() return srgeo.image.save(p .. ".png", srgeo.zeros(1, 3, 4, 4)) end, true, "image.save")
end
call("npy", function() return srgeo.npy.save(D .. "/e.npy", srgeo.zeros(0, 3)) end, true, "npy empty")
local f = srgeo.safetensors.open("models/shipped/small_resnet.safetensors")
for _, name in ipairs { "a\0b", "", "__metadata__", ("x"):rep(5000) } do
  call("safetensors", function() return f:get(name) end, false, "st.get " .. show(name))
end
call("safetensors", function() f:close(); return f:get("conv1.weight") end, false, "closed get")

-- --- images ---------------------------------------------------------------------
srgeo.image.save(D .. "/ok.png", srgeo.rand({ 1, 3, 8, 8 }, 1))
for _, o in ipairs {
  { size = -1 }, { size = 1 << 40 }, { size = { 0, 3 } }, { size = "x" }, { resize = -5 }, { resize = 1e9 },
  { resize = 0 / 0 }, { channels = 2 }, { channels = 4 }, { max_pixels = 0 }, { max_pixels = 10 },
  { max_pixels = -1 }, { bogus = 1 }, { ["k\0"] = 1 }, { on_error = "ignore" }, { resize = 65536, size = false },
} do
  call({ "image.load", "image" }, function() return srgeo.image.load(D .. "/ok.png", o) end, true, "image.load " .. show(o))
  call({ "image.load_batch", "image" }, function() return srgeo.image.load_batch({ D .. "/ok.png" }, o) end, true, "load_batch")
end
for _, o in ipairs { { quality = 0 }, { quality = 101 }, { rescale = "x" }, { bogus = 1 } } do
  call("image.save", function() return srgeo.image.save(D .. "/q.jpg", srgeo.zeros(1, 3, 4, 4), o) end, false, "save opts")
end
for _, t in ipairs { srgeo.zeros(1, 5, 4, 4), srgeo.zeros(2, 3, 4, 4), srgeo.zeros(1, 3, 0, 4), srgeo.zeros(70000, 1) } do
  call("image save", function() return srgeo.image.save(D .. "/s.png", t) end, false, "save shape")
end
for _, sigma in ipairs { 0, -1, 0 / 0, math.huge, 1e9 } do
  call({ "blur", "sigma" }, function() return srgeo.image.blur(srgeo.zeros(1, 1, 8, 8), sigma) end, sigma == 0, "blur")
end

-- --- layers, modules ---------------------------------------------------------------
local layer_cases = {
  conv2d = { in_channels = 1, out_channels = 1, kernel_size = 3 },
  linear = { in_features = 2, out_features = 2 },
  maxpool2d = { kernel_size = 2 }, avgpool2d = { kernel_size = 2 }, adaptive_avgpool2d = { output_size = 1 },
  batchnorm2d = { num_features = 1 }, layernorm = { normalized_shape = 2 },
}
for kind, good in pairs(layer_cases) do
  for key in pairs(good) do
    for _, v in ipairs { 0, -1, 1 << 62, 1 << 40, 1.5, 0 / 0, math.huge, "x", {}, { 1, 2, 3 }, true } do
      local o = {}
      for k, x in pairs(good) do o[k] = x end
      o[key] = v
      call(kind, function() return nn[kind](o) end, true, kind .. "." .. key .. "=" .. show(v))
    end
  end
  for _, extra in ipairs { { bogus = 1 }, { ["a\0"] = 1 }, { [1] = 2 }, { padding = 1 << 62 }, { stride = 0 },
                           { dilation = 1 << 50 }, { groups = 3 } } do
    local o = {}
    for k, x in pairs(good) do o[k] = x end
    for k, x in pairs(extra) do o[k] = x end
    call(kind, function() return nn[kind](o) end, true, kind .. " extra")
  end
end
local conv = nn.conv2d { in_channels = 1, out_channels = 2, kernel_size = 3, padding = 1 }
local big_pad = nn.conv2d { in_channels = 1, out_channels = 1, kernel_size = 3, padding = 3000000000 }
call("conv2d", function() return big_pad:forward(srgeo.zeros(1, 1, 4, 4)) end, false, "padding 3e9 forward")
local m = nn.sequential { conv, nn.relu {}, nn.adaptive_avgpool2d { output_size = 1 }, nn.flatten {} }
for _, x in ipairs { srgeo.zeros(1, 2, 5, 5), srgeo.zeros(5, 5), srgeo.zeros(0, 1, 5, 5), srgeo.zeros({ 1, 1, 5, 5 }, "float64"),
                     srgeo.zeros(1, 1, 0, 5), srgeo.zeros(1, 1, 1, 1), t0 } do
  call({ "conv2d", "forward", "sequential" }, function() return m:forward(x) end, true, "forward " .. show(x:shape()))
  call({ "conv2d", "jvp", "sequential" }, function() return m:jvp(srgeo.zeros(2, 1, 5, 5), x) end, true, "jvp")
  call({ "conv2d", "vjp", "sequential", "backward" }, function() return m:vjp(srgeo.zeros(1, 1, 5, 5), x) end, true, "vjp")
end
for _, o in ipairs { { tap = "nope" }, { tap = "a\0b" }, { tap = 5 }, { taps = { "x", 3 } } } do
  call({ "forward", "tap", "find" }, function() return m:forward(srgeo.zeros(1, 1, 5, 5), o) end, false, "forward tap " .. show(o.tap))
end
for _, p in ipairs { "nope", "a\0b", "1.weight.x", ("1."):rep(200) } do
  call({ "m:get", "find", "no ", "param" }, function() return m:get(p) end, false, "m:get " .. show(p))
  call({ "m:find", "find", "no ", "module" }, function() return m:find(p) end, false, "m:find " .. show(p))
end
call({ "m:set", "set", "shape", "param" }, function() return m:set("1.weight", srgeo.zeros(3)) end, false, "m:set shape")

-- --- declared option sets: profile (the issue's list), trainer, attacks ------------------
local pm = srgeo.models.load("models/shipped/small_resnet.safetensors")
local X = srgeo.rand({ 2, 1, 28, 28 }, 1)
local profile_bad = {
  { ci = -1 }, { ci = 2 }, { bootstrap = 0 }, { noise_max = -1 }, { batch = 0 }, { batch = -1 }, { tap = "" },
  { seq_chunk = 0 }, { seq_min = -1 }, { target_ci = 0 }, { noise_directions = -1 }, { lowpass_sigma = 0 / 0 },
  { seed = "x" }, { family = "user" }, { directions = 0 }, { jvp_directions = 0 }, { nscales = 0 },
  { precision = "float16" }, { preset = "nope" }, { bogus = 1 }, { scales = {} }, { scales = { 2, 1 } },
  { tap = "a\0b" }, { ["k\0"] = 1 }, { directions = 1 << 40 }, { jvp_batch = 0 }, { family = "nope" },
}
for _, o in ipairs(profile_bad) do
  o.progress = false
  call("profile", function() return srgeo.profile(pm, X, o) end, false, "profile " .. show(next(o)))
end
call("profile", function() return srgeo.profile(nil, X) end, false, "profile(nil)")
call("profile", function() return srgeo.profile(pm, nil) end, false, "profile(m, nil)")
call("profile", function() return srgeo.profile(pm, {}) end, false, "profile(m, {})")
local lin = nn.sequential { nn.flatten {}, nn.linear { in_features = 4, out_features = 3 } }
local Xs, ls = srgeo.rand({ 2, 1, 2, 2 }, 1), { 0, 1 }
for _, o in ipairs {
  { lr = -1 }, { lr = 0 / 0 }, { momentum = 2 }, { weight_decay = -1 }, { nesterov = true, momentum = 0 }, { bogus = 1 },
} do
  call("optim.sgd", function() return srgeo.optim.sgd(o) end, false, "sgd " .. show(next(o)))
end
for _, o in ipairs { { beta1 = 1 }, { beta2 = -0.1 }, { eps = 0 }, { lr = math.huge }, { momentum = 0.9 } } do
  call("optim.adamw", function() return srgeo.optim.adamw(o) end, false, "adamw " .. show(next(o)))
end
for _, o in ipairs { { eps = -1 }, { steps = -1 }, { steps = 1e6 }, { norm = "l3" }, { step_size = 0 / 0 },
                     { seed = 1.5 }, { bogus = 1 }, { eps = math.huge } } do
  call("pgd", function() return srgeo._pgd(lin, Xs, ls, o) end, false, "pgd " .. show(next(o)))
  call("llr", function() return srgeo._llr_step(lin, nil, Xs, ls, o) end, false, "llr " .. show(next(o)))
end
call("llr", function() return srgeo._llr_step(lin, nil, Xs, ls, { fd = 0 }) end, false, "llr fd=0")
local ds = srgeo.data.noise { n = 8, shape = { 1, 2, 2 }, seed = 1 }
for _, o in ipairs {
  { batch = 0 }, { batch = 1.5 }, { steps = 0 }, { steps = -3 }, { epochs = 0 }, { optimizer = "rmsprop" },
  { schedule = "linear" }, { gamma = -1 }, { warmup = -1 }, { labels = "shuffled" }, { objective = "mse" },
  { blur = -1 }, { eval_batch = 0 }, { log_every = 0 }, { per_decade = 0 }, { keep_optim = "none" },
  { lr = -1 }, { momentum = -1 }, { beta1 = 0.9 }, { objective = "pgd", pgd = { eps = -1 } },
  { objective = "pgd", pgd = { seed = 3 } }, { objective = "gaussian", gaussian = { sigma = 0 / 0 } },
  { objective = "llr", llr = { fd = 0 } }, { augment = { crop = -1 } }, { augment = 5 }, { milestones = { -1 }, schedule = "step" },
  { threads = 0 }, { stop_at = -1 }, { eval_train = 0 }, { bogus = true }, { ["a\0"] = 1 },
} do
  o.model, o.data, o.steps, o.progress = lin, ds, o.steps or (o.epochs and nil or 2), false
  call("srgeo.train", function() return srgeo.train(o) end, false, "train " .. show(next(o)))
end

-- -------------------------------------------------------------------------------------
T.test(string.format("abuse: %d generated bad API calls end in clean errors naming the op", #cases), function()
  local bad, legal_ok, errors = {}, 0, 0
  for i, c in ipairs(cases) do
    local ok, err = pcall(c.f)
    if ok then
      if not c.legal then bad[#bad + 1] = string.format("#%d %s: succeeded, expected an error", i, c.what) end
      legal_ok = legal_ok + 1
    else
      errors = errors + 1
      local msg = tostring(err)
      local named = false
      for _, n in ipairs(c.names) do if msg:find(n, 1, true) then named = true end end
      if type(err) ~= "string" and type(err) ~= "table" then
        bad[#bad + 1] = string.format("#%d %s: error is a %s", i, c.what, type(err))
      elseif msg:find("attempt to ", 1, true) or msg:find("stack traceback", 1, true) then
        bad[#bad + 1] = string.format("#%d %s: internal error: %s", i, c.what, msg)
      elseif not named then
        bad[#bad + 1] = string.format("#%d %s: error does not name %s: %s", i, c.what, table.concat(c.names, "|"), msg)
      end
    end
    if i % 50 == 0 then collectgarbage() end
  end
  if os.getenv("SRGEO_VERBOSE") then print(string.format("  %d calls: %d clean errors, %d legal successes", #cases, errors, legal_ok)) end
  T.truthy(#bad == 0, table.concat(bad, "\n", 1, math.min(#bad, 30)) .. (#bad > 30 and "\n..." or ""))
end)
