-- srgeo.experiment: what every script in scripts/ shares, so each is thin.
--
--   local E = require "srgeo.experiment"
--   local o, ex = E.script(spec, { ... })        -- parse argv (spec + common options), open the out folder
--   local p  = ex:profile("small_resnet", "fmnist-test:64")     -- one unit, cached in OUT/units/
--   local ps = ex:run { { model = "small_resnet" }, { model = "small_resnet@init" } }   -- with [k/N] progress
--   ex:figure("bump", srgeo.plot.profile, ps, { labels = {...} })   -- OUT/bump.png + OUT/bump.svg
--   ex:note("Comparison", text) ; ex:set("compare", t)
--   ex:finish()     -- OUT/results.json, OUT/profiles.csv, OUT/descriptors.csv, OUT/summary.txt; prints it
--
-- Model specs (E.parse_model):
--   small_resnet                  a shipped model: models/shipped/small_resnet.safetensors
--                                 ($SRGEO_SHIPPED overrides the folder)
--   small_resnet@init             its random-init twin (architecture and config from the shipped file's
--                                 metadata, or the zoo architecture of that name); @init:7 picks the seed
--   mlp{hidden={16}}@init         a zoo architecture with a config (a Lua table literal)
--   runs/x/ckpt_00000100.safetensors   any checkpoint srgeo.models.load reads (@init works too)
--   trained=path.safetensors      LABEL=SPEC names the curve
-- Evaluation-set specs (E.parse_eval): NAME[:N][@SEED], N images (default --images), SEED (default --seed)
--   fmnist-test  fmnist-train  (or test, train)  cifar10-test  cifar10-train
--   fmnist-test-blur1  blur1  blur2 ...   the test draw Gaussian-blurred with that σ (train-blur1 too)
--   noise  noise-gaussian  noise-pink  noise-dead_leaves   i.i.d. synthetic images of the model's input shape
--
-- Caching (resume): each unit (model × evaluation set × estimator options ×
-- tap) is written to OUT/units/KEY.json (+ .csv, + .unit.json describing what
-- was computed).  A rerun with the same options reuses every unit whose
-- description matches and recomputes the rest; --force recomputes all.
-- Ctrl-C during a unit stops the script; completed units stay cached.
local srgeo = require "srgeo"
local util = require "srgeo.util"
local json = require "srgeo.json"
local stats = require "srgeo.stats"
local cli = require "srgeo.cli"

local E = {}
local NAN = 0 / 0

-- User errors (a bad spec, a missing model) print without a traceback.
E.Error = util.Error
local fail = util.failer("experiment: ")

local copy, exists = util.copy, util.exists

local function basename(p) return (p:match("([^/]+)$") or p) end

local function stem(p) return (basename(p):gsub("%.safetensors$", "")) end

-- A file's identity for the cache: size and modification time (seconds),
-- "?" when it cannot be read.
local function file_id(path)
  local st = srgeo._stat(path)
  if not st then return "?" end
  return string.format("%d %d", st.size, st.mtime)
end

-- Shipped models belong to the models registry (srgeo.models.shipped).
E.shipped_dir, E.shipped = srgeo.models.shipped_dir, srgeo.models.shipped
local shipped_path = srgeo.models.shipped_path

-- ---------------------------------------------------------------------------
-- Model specs

local function is_arch(name)
  local ok, opts = pcall(srgeo.models.options, name)
  return ok and opts ~= nil
end

local function parse_cfg(s, spec)
  local chunk, err = load("return " .. s, "=model config", "t", {})
  if not chunk then fail("model '%s': config %s is not a Lua table: %s", spec, s, err) end
  local ok, cfg = pcall(chunk)
  if not ok or type(cfg) ~= "table" then fail("model '%s': config %s is not a Lua table", spec, s) end
  return cfg
end

--- E.parse_model(spec) -> {spec, label, name | path, cfg, init, init_seed}
function E.parse_model(spec)
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
  if s:match("%.safetensors$") or s:find("/", 1, true) then
    ms.path = s:gsub("^~", os.getenv("HOME") or "~")
  else
    local name, cfg = s:match("^([%w_%.%-]+)(%b{})$")
    if name then ms.name, ms.cfg = name, parse_cfg(cfg, spec)
    elseif s:match("^[%w_%.%-]+$") then ms.name = s
    else fail("model '%s': expected NAME, NAME{config}, NAME@init or a .safetensors path", spec) end
  end
  if not ms.label then
    local init = ms.init and ("@init" .. (ms.init_seed and ":" .. ms.init_seed or "")) or ""
    ms.label = (ms.path and stem(ms.path) or ms.name) .. init
  end
  return ms
end

--- The random-init twin of a model spec ("x" -> "x@init").
function E.twin(spec)
  local ms = E.parse_model(spec)
  if ms.init then return ms.spec end
  local label, rest = ms.spec:match("^([%w_%.%-@]+)=(.+)$")
  if label and not label:find("/") then return label .. "@init=" .. rest .. "@init" end
  return ms.spec .. "@init"
end

-- Architecture and config recorded in a checkpoint.
local function ckpt_arch(path)
  local f <close> = srgeo.safetensors.open(path)
  local meta = f:metadata()
  local arch = meta.architecture
  if not arch then fail("%s has no 'architecture' in its metadata (cannot build its random-init twin)", path) end
  local cfg = {}
  if meta.config then
    local ok, c = pcall(json.decode, meta.config)
    if ok and type(c) == "table" then cfg = c end
  end
  return arch, cfg, meta
end

-- Where a spec's weights come from, and the cache identity of the model.
function E.model_key(ms, seed)
  ms = E.parse_model(ms)
  local key
  if ms.path then
    key = "file:" .. ms.path .. "#" .. file_id(ms.path)
  elseif not ms.cfg and exists(shipped_path(ms.name)) then
    key = "shipped:" .. ms.name .. "#" .. file_id(shipped_path(ms.name))
  else
    key = "arch:" .. ms.name .. (ms.cfg and json.encode(ms.cfg) or "")
  end
  if ms.init then key = key .. "@init:" .. tostring(ms.init_seed or seed or 0) end
  return key
end

--- E.load_model(spec, seed) -> model (eval mode), info {label, arch, config, path, metadata}
function E.load_model(spec, seed)
  local ms = E.parse_model(spec)
  local init_seed = ms.init_seed or seed or 0
  local path = ms.path
  if not path and not ms.cfg and exists(shipped_path(ms.name)) then path = shipped_path(ms.name) end
  local m, info
  if path then
    if not exists(path) then fail("model '%s': no such file %s", ms.spec, path) end
    if ms.init then
      local arch, cfg, meta = ckpt_arch(path)
      cfg.init, cfg.seed = nil, init_seed
      m = srgeo.models.build(arch, cfg)
      info = { arch = arch, config = cfg, twin_of = path, metadata = meta }
    else
      local meta
      m, meta = srgeo.models.load(path)
      local mi = srgeo.models.info(m) or {}
      info = { arch = mi.arch, config = mi.config, path = path, metadata = meta }
    end
  elseif is_arch(ms.name) then
    if not ms.init then
      fail("model '%s' is an architecture, not a shipped model (%s does not exist; `make models` builds the "
        .. "shipped ones): write %s@init for a random-init network, or give a .safetensors path",
        ms.spec, shipped_path(ms.name), ms.spec)
    end
    local cfg = copy(ms.cfg or {})
    cfg.seed = cfg.seed or init_seed
    m = srgeo.models.build(ms.name, cfg)
    info = { arch = ms.name, config = cfg }
  else
    local shipped = E.shipped()
    local archs = {}
    for _, r in ipairs(srgeo.models.list { params = false }) do archs[#archs + 1] = r.name end
    fail("unknown model '%s': not a shipped model (%s: %s) nor an architecture (%s), nor a .safetensors path",
      ms.spec, E.shipped_dir(), #shipped > 0 and table.concat(shipped, ", ") or "none yet", table.concat(archs, ", "))
  end
  m:eval()
  info.label, info.spec = ms.label, ms.spec
  return m, info
end

--- The (C, H, W) input of a zoo-built model, or nil.
function E.input_shape(m)
  local mi = srgeo.models.info(m)
  if not mi then return nil end
  local cfg = mi.config or {}
  if type(cfg.input) == "table" then return copy(cfg.input) end
  for _, r in ipairs(srgeo.models.list { params = false }) do
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
function E.model_eps(spec)
  local ms = E.parse_model(spec)
  local path = ms.path or (ms.name and exists(shipped_path(ms.name)) and shipped_path(ms.name))
  if path and exists(path) then
    local ok, meta = pcall(function()
      local f <close> = srgeo.safetensors.open(path)
      return f:metadata()
    end)
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
function E.checkpoints(dir)
  local names, err = srgeo._listdir(dir)
  if not names then fail("run folder %s: %s", dir, tostring(err)) end
  local out = {}
  for _, f in ipairs(names) do
    if f:match("%.safetensors$") and not f:match("^optim_") then
      local path = dir .. "/" .. f
      local step = tonumber(f:match("(%d+)%.safetensors$"))
      local acc
      local ok, meta = pcall(function()
        local h <close> = srgeo.safetensors.open(path)
        return h:metadata()
      end)
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
E.EVAL_NAMES = "fmnist-test, fmnist-train, cifar10-test, cifar10-train, <base>-blur<σ>, blur<σ>, noise, noise-gaussian, noise-pink, noise-dead_leaves"

--- E.parse_eval(spec, {images =, seed =}) -> {spec, name, n, seed, key, label, base | noise, blur}
function E.parse_eval(spec, defaults)
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
    if not BASES[base] then fail("unknown evaluation set '%s' (%s)", spec, E.EVAL_NAMES) end
    es.base = base
  end
  es.key = string.format("%s:%d@%d", name, es.n, es.seed)
  es.label = name
  return es
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

--- E.load_eval(spec, {images, seed, shape, model}) -> dataset
function E.load_eval(spec, opts)
  opts = opts or {}
  local es = E.parse_eval(spec, opts)
  if es.noise then
    local shape = opts.shape or (opts.model and E.input_shape(opts.model)) or { 1, 28, 28 }
    return srgeo.data.noise { n = es.n, shape = shape, seed = es.seed, kind = es.noise }
  end
  local ds = source(es.base)
  local draw = ds:sample(math.min(es.n, #ds), es.seed)
  if es.blur then draw = draw:blurred(es.blur) end
  return draw
end

-- ---------------------------------------------------------------------------
-- Options every script shares

E.PRESETS = { "paper", "sequential", "quick" }

--- Common options (cli entries); a script's own entries come first.
function E.common_options(defaults)
  defaults = defaults or {}
  return {
    { "out", defaults.out or "out/experiment", "output folder (results, figures, cached units)" },
    { "preset", defaults.preset or "quick", "estimator preset", choices = E.PRESETS },
    { "images", defaults.images or 32, "images per evaluation set when a spec gives no :N" },
    { "seed", defaults.seed or 0, "seed of evaluation draws, directions and random inits" },
    { "threads", 0, "threads (0: SRGEO_THREADS or the machine's default)" },
    { "directions", type = "integer", help = "directions per image (overrides the preset)" },
    { "jvp_directions", type = "string", help = "directions with exact JVPs: a number or 'all' (overrides the preset)" },
    { "nscales", defaults.nscales, "rungs of the scale ladder (overrides the preset)", type = "integer" },
    { "log10_lo", defaults.log10_lo, "lowest rung, log10 η at 224² (shifted by log10 √(d224/d) for other sizes; preset: -2)",
      type = "number" },
    { "log10_hi", defaults.log10_hi, "highest rung, likewise (preset: 2)", type = "number" },
    { "bootstrap", type = "integer", help = "bootstrap resamples for the CI bands (overrides the preset)" },
    { "precision", type = "string", help = "float32 (with the noise check) or float64", choices = { "float32", "float64" } },
    { "tap", type = "string", help = "module to measure (default: the model's 'features')" },
    { "exact_relu", false, "ReLU nets: no forwards below each direction's first activation boundary (exact)" },
    { "force", false, "recompute every unit even when cached" },
    { "quiet", false, "print only errors" },
  }
end

--- E.spec(t, defaults): a cli spec with the common options appended.
function E.spec(t, defaults)
  local s = {}
  for k, v in pairs(t) do s[k] = v end
  s.options = {}
  for _, o in ipairs(t.options or {}) do s.options[#s.options + 1] = o end
  for _, o in ipairs(E.common_options(defaults or t.defaults)) do s.options[#s.options + 1] = o end
  s.epilog = (t.epilog and t.epilog .. "\n\n" or "") ..
    "Models: a shipped name (models/shipped/NAME.safetensors), NAME@init (random-init twin),\n" ..
    "ARCH{cfg}@init (e.g. mlp{hidden={16}}@init), a .safetensors path; LABEL=SPEC names a curve.\n" ..
    "Evaluation sets: NAME[:N][@SEED] with NAME one of\n  " .. E.EVAL_NAMES .. ".\n" ..
    "Units already computed in OUT/units/ with the same options are reused (--force recomputes)."
  return s
end

--- E.script(t, argv [, defaults]) -> opts, experiment: parse argv (exits on
--- --help or a bad option), set threads, and open the output folder.
function E.script(t, argv, defaults)
  local spec = E.spec(t, defaults)
  local o = cli.run(spec, argv)
  o._argv = argv
  return o, E.new(o, t.name)
end

-- ---------------------------------------------------------------------------
-- The experiment object

local Ex = {}
Ex.__index = Ex
E.Experiment = Ex

local PROFILE_KEYS = { "directions", "jvp_directions", "nscales", "log10_lo", "log10_hi", "bootstrap", "precision", "tap" }

--- E.new(opts, name) -> experiment.  opts: out, preset, images, seed,
--- threads, force, quiet and profile overrides (directions, ...), profile =
--- {extra srgeo.profile options}.
function E.new(o, name)
  o = o or {}
  local ex = setmetatable({
    name = name or o.name or "experiment", out = o.out or "out/experiment", seed = o.seed or 0,
    images = o.images or 32, preset = o.preset or "quick", force = o.force or false, quiet = o.quiet or false,
    argv = o._argv, opts = o, units = {}, figures = {}, notes = {}, extra = {}, files = {},
    models = {}, t0 = srgeo._clock(), computed = 0, cached = 0,
  }, Ex)
  ex.name = ex.name:gsub("%.lua$", "")
  if o.threads and o.threads > 0 then srgeo.threads(o.threads) end
  ex.popts = { preset = ex.preset, seed = ex.seed }
  for _, k in ipairs(PROFILE_KEYS) do if o[k] ~= nil then ex.popts[k] = o[k] end end
  if o.exact_relu then ex.popts.exact_relu = true end
  if type(ex.popts.jvp_directions) == "string" then
    local v = ex.popts.jvp_directions
    if v ~= "all" then
      local n = math.tointeger(tonumber(v))
      if not n or n < 1 then fail("--jvp-directions must be a positive integer or 'all' (got '%s')", v) end
      ex.popts.jvp_directions = n
    end
  end
  for k, v in pairs(o.profile or {}) do ex.popts[k] = v end
  util.mkdir(ex.out .. "/units")
  return ex
end

function Ex:log(fmt, ...)
  if self.quiet then return end
  io.stdout:write(string.format(fmt, ...), "\n")
  io.stdout:flush()
end

local function sanitize(s) return (tostring(s):gsub("[^%w%.%-_@]+", "_")) end

--- The model (loaded once per spec) and its info.
function Ex:model(spec)
  local ms = E.parse_model(spec)
  local c = self.models[ms.spec]
  if not c then
    local m, info = E.load_model(ms, self.seed)
    c = { m, info }
    self.models[ms.spec] = c
  end
  return c[1], c[2]
end

--- Forget loaded models (frees their memory between units).
function Ex:drop_models() self.models = {}; collectgarbage() end

--- The evaluation set for a spec (noise sets take the model's input shape).
function Ex:eval_set(spec, model)
  return E.load_eval(spec, { images = self.images, seed = self.seed, model = model })
end

-- JSON canonical form of a unit's description (for cache comparison).
local function canon(t) return json.encode(json.decode(json.encode(t))) end

--- ex:profile(model_spec, eval_spec [, extra]) -> profile.  extra: label,
--- tap, key (file name) and any srgeo.profile options for this unit.
--- Reuses OUT/units/KEY.json when its description matches.
function Ex:profile(mspec, espec, extra)
  extra = extra or {}
  local ms = E.parse_model(mspec)
  local es = E.parse_eval(espec, { images = self.images, seed = self.seed })
  local popts = copy(self.popts)
  for k, v in pairs(extra) do
    if k ~= "label" and k ~= "key" and k ~= "eval_label" then popts[k] = v end
  end
  local label = extra.label or ms.label
  local key = extra.key or sanitize(ms.label .. (ms.cfg and json.encode(ms.cfg) or "") .. "__" .. es.key
    .. (popts.tap and "__" .. popts.tap or ""))
  local unit = { format = "srgeo.unit/1", model = E.model_key(ms, self.seed), eval = es.key, profile = popts,
                 version = srgeo.version }
  local base = self.out .. "/units/" .. key
  local jpath, cpath, upath = base .. ".json", base .. ".csv", base .. ".unit.json"
  local rec = { key = key, label = label, model = ms.spec, model_label = ms.label, eval = es.key,
                eval_label = extra.eval_label or es.label, tap = popts.tap, json = jpath, csv = cpath }
  self.units[#self.units + 1] = rec
  local want = canon(unit)
  if not self.force and exists(jpath) and exists(upath) then
    local ok, have = pcall(function() return canon(json.decode(util.read_file(upath)).unit) end)
    if ok and have == want then
      local lok, p = pcall(srgeo.profile.load, jpath)
      if lok then
        p.label = label
        rec.cached, rec.profile = true, p
        self.cached = self.cached + 1
        return p, rec
      end
    elseif ok and not self.quiet then
      self:log("  %s: options or model changed since it was cached; recomputing", key)
    end
  end
  local m = self:model(ms)
  local X = self:eval_set(es, m)
  local po = copy(popts)
  po.label, po.model_name = label, ms.spec
  local t0 = srgeo._clock()
  local p = srgeo.profile(m, X, po)
  if p.interrupted then
    p:save_json(base .. ".partial.json")
    fail("interrupted during %s after %d images; the %d completed units are cached in %s/units — "
      .. "rerun the same command to resume", key, p.n_images, self.computed + self.cached, self.out)
  end
  p:save_json(jpath)
  p:save_csv(cpath)
  util.write_atomic(upath, json.encode({ unit = unit, label = label, seconds = srgeo._clock() - t0,
    written = os.date("!%Y-%m-%dT%H:%M:%SZ") }, { indent = true }) .. "\n")
  os.remove(base .. ".partial.json")
  rec.cached, rec.profile, rec.seconds = false, p, srgeo._clock() - t0
  self.computed = self.computed + 1
  return p, rec
end

--- ex:run(list) -> profiles: each entry {model =, eval =, label =, tap =, ...};
--- eval defaults to opts.default_eval.  Prints one line per unit.
function Ex:run(list, default_eval)
  local out = {}
  local n = #list
  for i, u in ipairs(list) do
    local extra = {}
    for k, v in pairs(u) do if k ~= "model" and k ~= "eval" then extra[k] = v end end
    local espec = u.eval or default_eval
    local t0 = srgeo._clock()
    local p, rec = self:profile(u.model, espec, extra)
    if rec.cached then
      self:log("[%d/%d] %s on %s%s: cached", i, n, rec.label, rec.eval, rec.tap and " (" .. rec.tap .. ")" or "")
    else
      self:log("[%d/%d] %s on %s%s: %d images, %.1f s", i, n, rec.label, rec.eval,
        rec.tap and " (" .. rec.tap .. ")" or "", p.n_images, srgeo._clock() - t0)
    end
    out[i] = p
  end
  return out
end

--- ex:figure(name, plotfn, data, opts): draw with srgeo.plot.FN into
--- OUT/NAME.png and OUT/NAME.svg (the .dat/.gp beside them).  A failing
--- figure (no gnuplot) is reported and the results are still written.
function Ex:figure(name, plotfn, data, opts)
  local written = {}
  for _, ext in ipairs { "png", "svg" } do
    local o = copy(opts or {})
    o.out = self.out .. "/" .. name .. "." .. ext
    local ok, err = pcall(plotfn, data, o)
    if ok then
      written[#written + 1] = o.out
    else
      io.stderr:write(string.format("%s: figure %s not drawn: %s\n", self.name, o.out, tostring(err)))
      break
    end
  end
  if #written > 0 then self.figures[#self.figures + 1] = { name = name, files = written } end
  return written[1]
end

--- A figure title for an evaluation set: "r_η on NAME (N images, seed S, P preset)";
--- prefix: text before it (a model name).  srgeo.plot sets titles
--- literally (noenhanced), so names need no escaping.
function E.title(espec, ex, prefix)
  local es = E.parse_eval(espec, ex and { images = ex.images, seed = ex.seed })
  return string.format("%sr_η on %s (%d images, seed %d, %s preset)", prefix and prefix .. ": " or "",
    es.name, es.n, es.seed, ex and ex.preset or "quick")
end

--- A stand-in profile for plot.descriptors carrying ‖J‖_F as the
--- descriptor "jacobian_fro".
function E.with_jacobian(p)
  return { label = p.label, model = p.model,
           descriptors = setmetatable({ jacobian_fro = E.jacobian_fro(p) }, { __index = p.descriptors }) }
end

--- Default taps of a model for layer-resolved profiles: its top-level
--- containers (ResNet stages, ...) or, for flat models, its activations,
--- then "features" (the embedding).
function E.default_taps(m)
  local taps, seen = {}, {}
  local feat = (m:aliases() or {}).features
  local function add(t) if not seen[t] then seen[t] = true; taps[#taps + 1] = t end end
  for _, ch in ipairs(m:children()) do
    if #ch[2]:children() > 0 and ch[1] ~= feat then add(ch[1]) end
  end
  if #taps == 0 then
    for _, ch in ipairs(m:children()) do
      local k = ch[2]:kind()
      if (k == "relu" or k == "gelu") and ch[1] ~= feat then add(ch[1]) end
    end
  end
  add("features")
  if #taps < 2 then add("logits") end
  return taps
end

--- A titled section of summary.txt.
function Ex:note(title, text) self.notes[#self.notes + 1] = { title = title, text = text } end

--- A value stored under results.json's "extra".
function Ex:set(key, value) self.extra[key] = value end

-- ---------------------------------------------------------------------------
-- Tables

local function g(v, p)
  if v == nil or v ~= v then return "nan" end
  return string.format("%." .. (p or 3) .. "g", v)
end

--- E.jacobian_fro(p) -> {value, lo, hi}: the median over images of the
--- Hutchinson ‖J‖_F estimates, with a bootstrap CI of that median.
function E.jacobian_fro(p, B, seed)
  local vals = {}
  for i, j in ipairs(p.jacobian_fro or {}) do vals[i] = type(j) == "table" and j.value or j end
  if #vals == 0 then return { value = NAN, lo = NAN, hi = NAN } end
  local med = stats.median(vals)
  if #vals < 2 then return { value = med, lo = NAN, hi = NAN } end
  local rows = {}
  for i, v in ipairs(vals) do rows[i] = { v } end
  local boots = stats.bootstrap(rows, function(s) return stats.median(stats.column(s, 1)) end, B or 500, seed or 1)
  local ci = (p.options and p.options.ci) or 0.95
  return { value = med, lo = stats.quantile(boots, (1 - ci) / 2), hi = stats.quantile(boots, 1 - (1 - ci) / 2) }
end

--- E.bump(p) -> "yes" | "edge" | "no": srgeo.profile.classify_bump's kind
--- for a profile (a peak more than 5% above the plateau that comes back
--- down by at least half its excess before the end of the ladder is a bump;
--- a rise still high at the last valid rung is "edge").
function E.bump(p)
  local d = p.descriptors
  return (srgeo.profile.classify_bump(p.median, d.plateau.value, d.peak_height.value))
end

local function ci_cell(d, p)
  if type(d) ~= "table" then return g(d, p) end
  if d.lo ~= d.lo or d.lo == nil then return g(d.value, p) end
  return string.format("%s [%s, %s]", g(d.value, p), g(d.lo, p), g(d.hi, p))
end

-- Left-justify text columns to their widest cell.
local function columns(rows)
  local w = {}
  for _, r in ipairs(rows) do for j, c in ipairs(r) do w[j] = math.max(w[j] or 0, utf8.len(c) or #c) end end
  local out = {}
  for _, r in ipairs(rows) do
    local cells = {}
    for j, c in ipairs(r) do
      cells[j] = j < #r and c .. string.rep(" ", w[j] - (utf8.len(c) or #c)) or c
    end
    out[#out + 1] = table.concat(cells, "  ")
  end
  return table.concat(out, "\n")
end
E.columns = columns

--- E.descriptor_table(profiles [, labels]) -> text: one row per profile:
--- plateau, onset η, peak η and height (with CIs), half-width, area, ‖J‖_F.
function E.descriptor_table(ps, labels)
  local rows = { { "profile", "bump", "plateau", "onset η", "peak η [95% CI]", "peak r [95% CI]", "half-width",
                   "area", "‖J‖_F [95% CI]" } }
  for i, p in ipairs(ps) do
    local d = p.descriptors
    rows[#rows + 1] = {
      tostring(labels and labels[i] or p.label or p.model or ("#" .. i)),
      E.bump(p),
      g(d.plateau.value), g(d.onset.value), ci_cell(d.peak_eta), ci_cell(d.peak_height),
      g(d.half_width.value), g(d.area.value), ci_cell(E.jacobian_fro(p)),
    }
  end
  return columns(rows)
end

--- E.compare_table(pairs) -> text: rows {label, compare result} from
--- srgeo.profile.compare: p-values of the curve and of each descriptor.
function E.compare_table(list)
  local names = { "curve", "plateau", "onset", "peak_eta", "peak_height", "half_width", "area" }
  local head = { "comparison" }
  for _, k in ipairs(names) do head[#head + 1] = "p(" .. k .. ")" end
  local rows = { head }
  for _, e in ipairs(list) do
    local r = { e[1] }
    for _, k in ipairs(names) do r[#r + 1] = g(e[2].p[k], 2) end
    rows[#rows + 1] = r
  end
  return columns(rows)
end

-- ---------------------------------------------------------------------------
-- Writing the results

local function num(v) return (v == nil or v ~= v) and "nan" or string.format("%.10g", v) end

local function csv_cell(s)
  s = tostring(s)
  if s:find('[,"\n]') then s = '"' .. s:gsub('"', '""') .. '"' end
  return s
end

--- ex:finish([profiles, labels]) -> summary text.  Writes OUT/profiles.csv
--- (one row per unit and rung), OUT/descriptors.csv, OUT/results.json and
--- OUT/summary.txt, then prints the summary and the files written.
function Ex:finish(ps, labels)
  if not ps then
    ps, labels = {}, {}
    for i, u in ipairs(self.units) do ps[i], labels[i] = u.profile, u.label end
  end
  local out = self.out
  -- profiles.csv
  local lines = { "label,model,eval,tap,eta,median,lo,hi,mean" }
  for _, u in ipairs(self.units) do
    local p = u.profile
    for s, eta in ipairs(p.scales) do
      lines[#lines + 1] = table.concat({ csv_cell(u.label), csv_cell(u.model), csv_cell(u.eval), csv_cell(u.tap or ""),
        num(eta), num(p.median[s]), num(p.lo[s]), num(p.hi[s]), num(p.mean[s]) }, ",")
    end
  end
  util.write_atomic(out .. "/profiles.csv", table.concat(lines, "\n") .. "\n")
  -- descriptors.csv
  lines = { "label,model,eval,tap,descriptor,value,lo,hi" }
  for _, u in ipairs(self.units) do
    local p = u.profile
    local rows = {}
    for _, k in ipairs(srgeo.profile.descriptor_names) do rows[#rows + 1] = { k, p.descriptors[k] } end
    rows[#rows + 1] = { "jacobian_fro", E.jacobian_fro(p) }
    for _, r in ipairs(rows) do
      lines[#lines + 1] = table.concat({ csv_cell(u.label), csv_cell(u.model), csv_cell(u.eval), csv_cell(u.tap or ""),
        r[1], num(r[2].value), num(r[2].lo), num(r[2].hi) }, ",")
    end
  end
  util.write_atomic(out .. "/descriptors.csv", table.concat(lines, "\n") .. "\n")
  -- results.json
  local units = {}
  for i, u in ipairs(self.units) do
    local p = u.profile
    units[i] = { key = u.key, label = u.label, model = u.model, eval = u.eval, tap = u.tap, json = u.json,
                 csv = u.csv, cached = u.cached, seconds = p.seconds, n_images = p.n_images, bump = p.bump,
                 bump_kind = E.bump(p), descriptors = p.descriptors, jacobian_fro = E.jacobian_fro(p), scales = p.scales,
                 median = p.median, lo = p.lo, hi = p.hi }
  end
  local figs = {}
  for i, f in ipairs(self.figures) do figs[i] = f end
  local opts = {}
  for k, v in pairs(self.opts) do if type(k) == "string" and k:sub(1, 1) ~= "_" then opts[k] = v end end
  util.write_atomic(out .. "/results.json", json.encode({
    format = "srgeo.experiment/1", name = self.name, command = self:command(), options = opts,
    units = units, figures = figs, extra = self.extra, version = srgeo.version,
    seconds = srgeo._clock() - self.t0, written = os.date("!%Y-%m-%dT%H:%M:%SZ"),
  }, { indent = true }) .. "\n")
  -- summary.txt
  local s = {}
  s[#s + 1] = string.format("%s — srgeo %s, preset %s, seed %d, %d units (%d computed, %d cached), %.1f s",
    self.name, srgeo.version, self.preset, self.seed, #self.units, self.computed, self.cached, srgeo._clock() - self.t0)
  s[#s + 1] = "command: " .. self:command()
  s[#s + 1] = ""
  s[#s + 1] = "Descriptors (median over images; 95% bootstrap CIs over images):"
  s[#s + 1] = E.descriptor_table(ps, labels)
  for _, n in ipairs(self.notes) do
    s[#s + 1] = ""
    s[#s + 1] = n.title .. ":"
    s[#s + 1] = n.text
  end
  local text = table.concat(s, "\n") .. "\n"
  util.write_atomic(out .. "/summary.txt", text)
  if not self.quiet then
    io.stdout:write("\n", text, "\n")
    local files = { out .. "/summary.txt", out .. "/results.json", out .. "/profiles.csv", out .. "/descriptors.csv" }
    for _, f in ipairs(self.figures) do for _, p in ipairs(f.files) do files[#files + 1] = p end end
    io.stdout:write("wrote ", table.concat(files, " "), "\n")
    io.stdout:flush()
  end
  return text
end

function Ex:command()
  local parts = { "srgeo", "scripts/" .. self.name .. ".lua" }
  for _, a in ipairs(self.argv or {}) do
    a = tostring(a)
    parts[#parts + 1] = a:match("^[%w%-%._/:=@,]+$") and a or util.shell_quote(a)
  end
  return table.concat(parts, " ")
end

--- E.load_results(out) -> the results.json table of a finished experiment.
function E.load_results(out)
  local t = json.decode(util.read_file(out .. "/results.json"))
  if type(t) ~= "table" or t.format ~= "srgeo.experiment/1" then fail("%s/results.json is not an srgeo experiment", out) end
  return t
end

--- E.run_script(name, args): run scripts/NAME.lua in this state with the
--- given argument list (what `srgeo scripts/NAME.lua ARGS` does).
function E.run_script(name, args)
  local path = srgeo.root .. "/scripts/" .. name .. ".lua"
  local chunk, err = loadfile(path)
  if not chunk then fail("%s", err) end
  return chunk(table.unpack(args or {}))
end

return E
