-- srgeo.spec: model and evaluation-set specs, the strings the scripts take
-- (`--model small_resnet@init`, `--eval fmnist-test:64@1`), and what they
-- load.
--
-- Model specs (spec.parse_model):
--   small_resnet                  a shipped model: models/shipped/small_resnet.safetensors
--                                 ($SRGEO_SHIPPED overrides the folder)
--   small_resnet@init             its random-init twin (architecture and config from the shipped file's
--                                 metadata, or the zoo architecture of that name); @init:7 picks the seed
--   x.onnx  x.onnx@init           an ONNX file (--mean, --std, --input-size ... say how to import it), and
--                                 its random-init twin (srgeo.models.twin: learned constants by role)
--   mlp{hidden={16}}@init         a zoo architecture with a config (a Lua table literal)
--   runs/x/ckpt_00000100.safetensors   any checkpoint models.load reads (@init works too)
--   resnet50.pth  resnet50:FILE.pth  a PyTorch checkpoint (torch.save), read without Python: the
--                                 architecture from its keys, or the one named before ':'
--                                 (ARCH:FILE.safetensors loads a safetensors file into ARCH)
--   resnet18:imagenet  resnet50:IMAGENET1K_V1  resnet18:https://...   published weights by
--                                 name or URL, from the weights cache (srgeo.weights; fetched
--                                 once, checked by SHA-256; labelled resnet18-imagenet); a model
--                                 file's URL alone (https://.../x.pth, .onnx, .safetensors) likewise
--   trained=path.safetensors      LABEL=SPEC names the curve
-- Evaluation-set specs (spec.parse_eval): NAME[:N][@SEED], N images (default --images), SEED (default --seed)
--   fmnist-test  fmnist-train  (or test, train)  cifar10-test  cifar10-train
--   fmnist-test-blur1  blur1  blur2 ...   the test draw Gaussian-blurred with that σ (train-blur1 too)
--   noise  noise-gaussian  noise-pink  noise-dead_leaves   i.i.d. synthetic images of the model's input shape
--   a folder of images (path/to/images, ~/pics:64@1)     srgeo.data.folder at the model's input shape
-- A set whose images have other channels than the model's input fails
-- naming the sets that fit.  Lists of model specs (--models) also take
-- folders and globs of .safetensors files (spec.expand_models).
--
-- A bad spec is a user error (util.Error) whose message starts with
-- "experiment: ": the scripts reach this module through srgeo.experiment.
local srgeo = require "srgeo"
local util = require "srgeo.util"
local json = require "srgeo.json"
local models = require "srgeo.models"
local weights = require "srgeo.weights"

local S = {}

local fail = util.failer("experiment: ")
local copy, exists = util.copy, util.exists

local function basename(p) return (p:match("([^/]+)$") or p) end

local function stem(p) return (basename(p):gsub("%.safetensors$", ""):gsub("%.pth?$", "")) end -- an .onnx keeps its extension

-- ---------------------------------------------------------------------------
-- Model specs

local function is_arch(name)
  local ok, opts = pcall(models.options, name)
  return ok and opts ~= nil
end

local function parse_cfg(s, spec)
  local chunk, err = load("return " .. s, "=model config", "t", {})
  if not chunk then fail("model '%s': config %s is not a Lua table: %s", spec, s, err) end
  local ok, cfg = pcall(chunk)
  if not ok or type(cfg) ~= "table" then fail("model '%s': config %s is not a Lua table", spec, s) end
  return cfg
end

--- spec.parse_model(spec) -> {spec, label, name | path, cfg, init, init_seed}
function S.parse_model(spec)
  if type(spec) == "table" and spec.spec then return spec end
  if type(spec) ~= "string" or spec == "" then fail("a model spec must be a non-empty string (got %s)", tostring(spec)) end
  local ms = { spec = spec }
  local s = spec
  local label, rest = s:match("^([%w_%.%-@]+)=(.+)$")
  if label and not label:find("/") then ms.label, s = label, rest end
  local base, seed = s:match("^(.-)@init:(%-?%d+)$")
  if base then ms.init, ms.init_seed, s = true, math.tointeger(tonumber(seed)), base
  else
    base = s:match("^(.-)@init$")
    if base then ms.init, s = true, base end
  end
  if s:find("@", 1, true) then fail("model '%s': only @init or @init:SEED may follow the name", spec) end
  local arch, wfile = s:match("^([%w_]+):(.+)$")
  if arch and is_arch(arch) then
    -- ARCH:FILE: a zoo architecture with the weights of FILE (a PyTorch checkpoint or safetensors)
    ms.name, ms.weights = arch, wfile:gsub("^~", os.getenv("HOME") or "~")
  elseif s:match("%.safetensors$") or s:lower():match("%.onnx$") or s:find("/", 1, true)
      or s:lower():match("%.pth?$") or s:lower():match("%.ckpt$") then
    ms.path = s:gsub("^~", os.getenv("HOME") or "~")
  else
    local name, cfg = s:match("^([%w_%.%-]+)(%b{})$")
    if name then ms.name, ms.cfg = name, parse_cfg(cfg, spec)
    elseif s:match("^[%w_%.%-]+$") then ms.name = s
    else fail("model '%s': expected NAME, NAME{config}, NAME@init, ARCH:FILE or a .safetensors / .pth path", spec) end
  end
  if not ms.label then
    local init = ms.init and ("@init" .. (ms.init_seed and ":" .. ms.init_seed or "")) or ""
    local wl = ms.weights and (weights.is_ref(ms.name, ms.weights) and not ms.weights:find("/", 1, true)
      and ms.name .. "-" .. ms.weights or stem(ms.weights))
    ms.label = (ms.path and stem(ms.path) or wl or ms.name) .. init
  end
  return ms
end

--- The random-init twin of a model spec ("x" -> "x@init").
function S.twin(spec)
  local ms = S.parse_model(spec)
  if ms.init then return ms.spec end
  local label, rest = ms.spec:match("^([%w_%.%-@]+)=(.+)$")
  if label and not label:find("/") then return label .. "@init=" .. rest .. "@init" end
  return ms.spec .. "@init"
end

-- The shipped file of a spec's NAME, when there is one.
local function shipped_file(ms)
  if ms.name and exists(models.shipped_path(ms.name)) then return models.shipped_path(ms.name) end
end

--- The file a spec's weights (or, for @init, architecture) come from: its
--- path, or the shipped file of its name (a NAME{cfg} is an architecture,
--- never a shipped file); nil for a zoo architecture.
function S.weights_path(spec)
  local ms = S.parse_model(spec)
  -- ARCH:imagenet, ARCH:https://..., ARCH:NAME-HASH.pth, https://...: the
  -- weights cache's file, fetched once (srgeo.weights)
  local ok, path
  if ms.weights and not exists(ms.weights) then
    ok, path = pcall(weights.resolve, ms.name, ms.weights)
  elseif weights.is_url(ms.path) then
    ok, path = pcall(weights.fetch, ms.path)
  end
  if ok == false then fail("model '%s': %s", ms.spec, weights.reason(path)) end
  if ok then return path end
  return ms.path or ms.weights or (not ms.cfg and shipped_file(ms)) or nil
end

-- Architecture and config recorded in a checkpoint (a PyTorch one: what
-- its keys say, arch when the spec names it).
local function ckpt_arch(path, arch)
  local meta
  if models.is_torch_file(path) then
    local _
    _, meta = models.load(path, { arch = arch })
  elseif arch then
    meta = { architecture = arch, config = "{}" }
  else
    meta = models.metadata(path)
  end
  local arch = meta.architecture
  if not arch then fail("%s has no 'architecture' in its metadata (cannot build its random-init twin)", path) end
  local cfg = {}
  if meta.config then
    local ok, c = pcall(json.decode, meta.config)
    if ok and type(c) == "table" then cfg = c end
  end
  return arch, cfg, meta
end

-- The rule an imported graph's twin is drawn by (learned constants and
-- their roles: core/README.md "Random twins"), part of its units' identity.
S.ONNX_TWIN_RULE = "roles/1"

--- Whether a spec is an ONNX file.
function S.is_onnx(ms) return ms.path ~= nil and ms.path:lower():match("%.onnx$") ~= nil end

-- The options of an ONNX import the command line gives (--mean, ...), and
-- the flags that give them.
S.IMPORT_KEYS = { "mean", "std", "normalize", "input_size", "tap", "output" }

-- The import options for srgeo.models.load of an ONNX file: a value that
-- does not fit is a user error naming its flag.
local function onnx_opts(ms, import)
  local o = {}
  for k, v in pairs(import or {}) do o[k] = v end
  if o.normalize == false and (o.mean or o.std) then
    fail("model '%s': --no-normalize and --mean/--std contradict each other", ms.spec)
  end
  if (o.mean == nil) ~= (o.std == nil) then
    fail("model '%s': give both --mean and --std (one value per input channel each)", ms.spec)
  end
  if o.mean and #o.mean ~= #o.std then
    fail("model '%s': --mean has %d values, --std %d", ms.spec, #o.mean, #o.std)
  end
  return o
end

-- srgeo.models.load's message about an option, as the flag that gave it.
local function as_flags(msg)
  return (tostring(msg):gsub("^.-srgeo%.models%.load [^:]*: ", ""):gsub("normalize = false %(%-%-no%-normalize%)", "--no-normalize")
    :gsub("input_size", "--input-size"):gsub("onnx%.load: ([%w_]+)", function(k) return "--" .. k:gsub("_", "-") end))
end

--- spec.load_model(spec, seed [, import]) -> model (eval mode), info {label, arch, config, path, metadata}
--- import: how an .onnx model is imported (mean, std, normalize, input_size, tap, output: the
--- command line's --mean ...); for other models only tap may be given (it is the profile's).
function S.load_model(spec, seed, import)
  local ms = S.parse_model(spec)
  local init_seed = ms.init_seed or seed or 0
  local path = S.weights_path(ms)
  local m, info
  if not S.is_onnx(ms) then
    for _, k in ipairs(S.IMPORT_KEYS) do
      if k ~= "tap" and import and import[k] ~= nil then
        fail("model '%s': --%s is for .onnx models (a srgeo model carries its own normalisation and input size)",
          ms.spec, k:gsub("_", "-"))
      end
    end
  end
  if path and S.is_onnx(ms) then
    if not exists(path) then fail("model '%s': no such file %s", ms.spec, path) end
    local ok, mm, oi = pcall(models.load, path, onnx_opts(ms, import))
    if not ok then fail("model '%s': %s", ms.spec, as_flags(mm)) end
    m = mm
    info = { arch = "onnx", config = models.info(m).config, path = path, metadata = oi.metadata, onnx = oi }
    if ms.init then -- its random-init twin: learned constants drawn anew by role (models.twin)
      m = models.twin(m, { seed = init_seed })
      info.twin_of, info.path = path, nil
    end
  elseif path then
    if not exists(path) then fail("model '%s': no such file %s", ms.spec, path) end
    if ms.init then
      local arch, cfg, meta = ckpt_arch(path, ms.weights and ms.name)
      cfg.init, cfg.seed = nil, init_seed
      m = models.build(arch, cfg)
      info = { arch = arch, config = cfg, twin_of = path, metadata = meta }
    else
      local meta
      if ms.weights then m, meta = models.load(ms.name, { weights = path }) else m, meta = models.load(path) end
      local mi = models.info(m) or {}
      info = { arch = mi.arch, config = mi.config, path = path, metadata = meta }
    end
  elseif is_arch(ms.name) then
    if not ms.init then
      fail("model '%s' is an architecture, not a shipped model (%s does not exist; `make models` builds the "
        .. "shipped ones): write %s@init for a random-init network, or give a .safetensors path",
        ms.spec, models.shipped_path(ms.name), ms.spec)
    end
    local cfg = copy(ms.cfg or {})
    cfg.seed = cfg.seed or init_seed
    m = models.build(ms.name, cfg)
    info = { arch = ms.name, config = cfg }
  else
    local shipped = models.shipped()
    local archs = {}
    for _, r in ipairs(models.list { params = false }) do archs[#archs + 1] = r.name end
    fail("unknown model '%s': not a shipped model (%s: %s) nor an architecture (%s), nor a .safetensors path",
      ms.spec, models.shipped_dir(), #shipped > 0 and table.concat(shipped, ", ") or "none yet", table.concat(archs, ", "))
  end
  m:eval()
  info.label, info.spec = ms.label, ms.spec
  return m, info
end

-- A glob's basename as a Lua pattern: * and ? within one path component,
-- [...] sets as they are.
local function glob_pattern(g)
  local out, i = {}, 1
  while i <= #g do
    local c = g:sub(i, i)
    if c == "*" then out[#out + 1] = "[^/]*"
    elseif c == "?" then out[#out + 1] = "[^/]"
    elseif c == "[" and g:find("]", i + 1, true) then
      local j = g:find("]", i + 1, true)
      out[#out + 1] = "[" .. g:sub(i + 1, j - 1):gsub("^!", "^"):gsub("%%", "%%%%") .. "]"
      i = j
    else out[#out + 1] = c:gsub("%p", "%%%0") end
    i = i + 1
  end
  return "^" .. table.concat(out) .. "$"
end

local function is_dir(path)
  local st = srgeo._stat(path)
  return st and st.dir
end

-- The checkpoints in dir whose names match pattern (sorted): *.safetensors,
-- without the optimiser states train keeps beside them.
local function checkpoint_files(dir, pattern)
  local names = srgeo._listdir(dir) or {}
  table.sort(names)
  local out = {}
  for _, f in ipairs(names) do
    if f:match("%.safetensors$") and not f:match("^optim_") and (not pattern or f:match(pattern)) then
      out[#out + 1] = (dir == "." and "" or dir .. "/") .. f
    end
  end
  return out
end

--- spec.expand_models(list) -> list: each entry that is a folder becomes its
--- .safetensors files, each glob (*, ?, [...] in the file name:
--- 'models/shipped/*.safetensors') the files it matches, in name order;
--- other specs stay as they are.  A folder or glob that matches nothing is
--- an error.
function S.expand_models(list)
  local out = {}
  for _, spec in ipairs(list) do
    local s = tostring(spec):gsub("^~", os.getenv("HOME") or "~")
    local dir, base = s:match("^(.*)/([^/]*)$")
    if not dir then dir, base = ".", s end
    local files
    if dir:find("[%*%?%[]") then fail("--models '%s': wildcards only in the file name, not in its folder", spec) end
    if base:find("[%*%?%[]") then
      if not is_dir(dir == "" and "/" or dir) then fail("--models '%s': no such folder %s", spec, dir) end
      files = checkpoint_files(dir == "" and "/" or dir, glob_pattern(base))
      if #files == 0 then fail("--models '%s' matches no .safetensors file in %s", spec, dir) end
    elseif not s:find("=", 1, true) and is_dir(s) then
      files = checkpoint_files((s:gsub("/+$", "")))
      if #files == 0 then fail("--models '%s': the folder holds no .safetensors file", spec) end
    end
    for _, f in ipairs(files or { spec }) do out[#out + 1] = f end
  end
  return out
end

--- The (C, H, W) input of a zoo-built model, or nil.
function S.input_shape(m)
  local mi = models.info(m)
  if not mi then return nil end
  local cfg = mi.config or {}
  if type(cfg.input) == "table" then return copy(cfg.input) end
  for _, r in ipairs(models.list { params = false }) do
    if r.name == mi.arch and r.input then
      local s = copy(r.input)
      if cfg.in_channels then s[1] = cfg.in_channels end
      if cfg.image_size then s[2], s[3] = cfg.image_size, cfg.image_size end
      return s
    end
  end
  return nil
end

--- The robustness "ε" a model was trained with, from its checkpoint's
--- training metadata: PGD eps, LLR eps or Gaussian-augmentation σ; 0 for
--- standard training; else a name like ..._eps0.5; nil when unknown.
function S.model_eps(spec)
  local ms = S.parse_model(spec)
  local path = ms.path or shipped_file(ms)
  if path and exists(path) then
    local ok, meta = pcall(models.metadata, path)
    if ok and meta and meta.training then
      local dok, t = pcall(json.decode, meta.training)
      if dok and type(t) == "table" then
        local obj = t.objective
        local sub = type(obj) == "string" and type(t[obj]) == "table" and t[obj] or {}
        if obj == "pgd" or obj == "llr" then
          if tonumber(sub.eps) then return tonumber(sub.eps) end
        elseif obj == "gaussian" then
          if tonumber(sub.sigma) then return tonumber(sub.sigma) end
        elseif (obj == nil or obj == "ce") and not (ms.label or ""):find("eps") then
          return 0
        end
      end
    end
  end
  local e = (ms.label or ms.spec):match("eps([%d%.]+)")
  if e then return tonumber((e:gsub("%.$", ""))) end
  return nil
end

--- Checkpoints of a training run (OUT of srgeo.train): a list of {path, step,
--- label, test_acc} sorted by step.
function S.checkpoints(dir)
  local names, err = srgeo._listdir(dir)
  if not names then fail("run folder %s: %s", dir, tostring(err)) end
  local out = {}
  for _, f in ipairs(names) do
    if f:match("%.safetensors$") and not f:match("^optim_") then
      local path = dir .. "/" .. f
      local step = tonumber(f:match("(%d+)%.safetensors$"))
      local acc
      local ok, meta = pcall(models.metadata, path)
      if ok and meta then
        step = tonumber(meta.step) or step
        acc = tonumber(meta.test_acc)
      end
      if step then out[#out + 1] = { path = path, step = math.tointeger(step) or step, test_acc = acc, file = f } end
    end
  end
  table.sort(out, function(a, b) return a.step < b.step end)
  if #out == 0 then fail("run folder %s holds no checkpoints (*.safetensors with a step)", dir) end
  return out
end

-- ---------------------------------------------------------------------------
-- Evaluation-set specs

local NOISE_KINDS = { uniform = true, gaussian = true, pink = true, dead_leaves = true }
local BASES = {
  ["fmnist-test"] = { "fashion_mnist", "test" }, ["fmnist-train"] = { "fashion_mnist", "train" },
  test = { "fashion_mnist", "test" }, train = { "fashion_mnist", "train" },
  ["cifar10-test"] = { "cifar10", "test" }, ["cifar10-train"] = { "cifar10", "train" },
}
S.EVAL_NAMES = "fmnist-test, fmnist-train, cifar10-test, cifar10-train, <base>-blur<σ>, blur<σ>, noise, noise-gaussian, noise-pink, noise-dead_leaves, or a folder of images"

--- spec.parse_eval(spec, {images =, seed =}) -> {spec, name, n, seed, key, label, base | noise, blur}
function S.parse_eval(spec, defaults)
  if type(spec) == "table" and spec.key then return spec end
  defaults = defaults or {}
  if type(spec) ~= "string" or spec == "" then fail("an evaluation set spec must be a non-empty string") end
  local s, seed = spec:match("^(.-)@(%-?%d+)$")
  if not s then s = spec end
  local name, n = s:match("^(.-):(%d+)$")
  if not name then name = s end
  local es = { spec = spec, name = name, n = math.tointeger(tonumber(n)) or defaults.images or 64,
               seed = math.tointeger(tonumber(seed)) or defaults.seed or 0 }
  if es.n < 1 then fail("evaluation set '%s': needs at least one image", spec) end
  local known = BASES[name] or name:match("^noise") or name == "uniform" or name:match("blur[%d%.]+$")
  if not known and (name:find("/", 1, true) or name:match("^~") or is_dir(name)) then
    es.folder = (name:gsub("^~", os.getenv("HOME") or "~"):gsub("(.)/+$", "%1"))
    if not is_dir(es.folder) then fail("evaluation set '%s': no such folder %s", spec, es.folder) end
    es.key = string.format("folder:%s:%d@%d", es.folder, es.n, es.seed)
    es.label = es.folder:match("([^/]+)$") or es.folder
    return es
  end
  local kind = name:match("^noise%-(.+)$")
  if name == "noise" or name == "uniform" then kind = "uniform" end
  if kind then
    if not NOISE_KINDS[kind] then fail("evaluation set '%s': unknown noise kind '%s' (uniform, gaussian, pink, dead_leaves)", spec, kind) end
    es.noise = kind
  else
    local base, sigma = name:match("^(.-)%-?blur([%d%.]+)$")
    if base then
      es.blur = tonumber(sigma)
      if not es.blur or es.blur <= 0 then fail("evaluation set '%s': bad blur σ", spec) end
      if base == "" then base = "fmnist-test" end
    else
      base = name
    end
    if not BASES[base] then fail("unknown evaluation set '%s' (%s)", spec, S.EVAL_NAMES) end
    es.base = base
  end
  es.key = string.format("%s:%d@%d", name, es.n, es.seed)
  es.label = name
  return es
end

--- spec.eval_key(es, n) -> the key of evaluation set es with n images (the
--- count that was loaded: a folder or a named set may hold fewer than es.n).
function S.eval_key(es, n)
  es = S.parse_eval(es)
  return (es.key:gsub(":%d+@(%-?%d+)$", ":" .. math.tointeger(n) .. "@%1"))
end

local source_cache = setmetatable({}, { __mode = "v" })

local function source(base)
  local b = BASES[base]
  local key = b[1] .. "/" .. b[2]
  local ds = source_cache[key]
  if not ds then
    ds = srgeo.data[b[1]] { split = b[2] }
    source_cache[key] = ds
  end
  return ds
end

-- The images' (C, H, W) of each named set, for the advice below.
local BASE_SHAPES = { fashion_mnist = { 1, 28, 28 }, cifar10 = { 3, 32, 32 } }

local function shape_str(s) return table.concat(s, "x") end

-- A model takes images of one channel count: a set with another fails here,
-- naming the sets that fit, rather than deep inside the model.
local function check_fits(es, ds, want, opts)
  local have = ds.shape
  if not (want and have) or want[1] == have[1] then return end
  local fits = {}
  for _, name in ipairs { "fmnist-test", "fmnist-train", "cifar10-test", "cifar10-train" } do
    local b = BASES[name]
    local sh = BASE_SHAPES[b[1]]
    if sh[1] == want[1] then fits[#fits + 1] = name .. " (" .. shape_str(sh) .. ")" end
  end
  fits[#fits + 1] = "a folder of images (--eval path/to/images: loaded at " .. shape_str(want) .. ")"
  fits[#fits + 1] = "noise sets (noise, noise-pink, ...: made at " .. shape_str(want) .. ")"
  fail("evaluation set '%s' has %d-channel images (%s) but %s takes %d-channel inputs (%s); sets that fit: %s",
    es.spec, have[1], shape_str(have), opts.model_label and "model '" .. opts.model_label .. "'" or "the model",
    want[1], shape_str(want), table.concat(fits, ", "))
end

--- spec.load_eval(spec, {images, seed, shape, model, model_label}) -> dataset.
--- With a model (or shape), noise sets and image folders are made at its
--- input shape, and a set of other channels fails naming the sets that fit.
function S.load_eval(spec, opts)
  opts = opts or {}
  local es = S.parse_eval(spec, opts)
  local want = opts.shape or (opts.model and S.input_shape(opts.model))
  if es.noise then
    return srgeo.data.noise { n = es.n, shape = want or { 1, 28, 28 }, seed = es.seed, kind = es.noise }
  end
  local ds
  if es.folder then
    ds = srgeo.data.folder(es.folder, want and { channels = want[1], size = { want[2], want[3] } } or nil)
  else
    ds = source(es.base)
  end
  check_fits(es, ds, want, opts)
  local draw = ds:sample(math.min(es.n, #ds), es.seed)
  if es.blur then draw = draw:blurred(es.blur) end
  return draw
end

return S
