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
-- This module composes the parts, one module per concept, and re-exports
-- their functions so scripts and notebooks need only E:
--   srgeo.spec     model and evaluation-set specs (E.parse_model, E.load_model, E.parse_eval, ...)
--   srgeo.cache    the unit cache in OUT/units/ (resume; --force recomputes)
--   srgeo.report   tables, ‖J‖_F, the bump kind, the result files (E.descriptor_table, E.bump, ...)
--   srgeo.models   the zoo and the shipped models (E.shipped, E.shipped_dir)
-- Ctrl-C during a unit stops the script; completed units stay cached.
local srgeo = require "srgeo"
local util = require "srgeo.util"
local cli = require "srgeo.cli"
local models = require "srgeo.models"
local S = require "srgeo.spec"
local cache = require "srgeo.cache"
local report = require "srgeo.report"

local E = {}

-- User errors (a bad spec, a missing model) print without a traceback.
E.Error = util.Error
local fail = util.failer("experiment: ")

local copy = util.copy

E.shipped_dir, E.shipped = models.shipped_dir, models.shipped
for _, k in ipairs { "parse_model", "twin", "load_model", "input_shape", "model_eps", "checkpoints", "EVAL_NAMES",
                     "parse_eval", "load_eval", "expand_models", "eval_key" } do E[k] = S[k] end
E.model_key = cache.model_key
for _, k in ipairs { "jacobian_fro", "bump", "with_jacobian", "columns", "descriptor_table", "shape_table",
                     "compare_table", "finding", "load_results", "images_text" } do E[k] = report[k] end

-- ---------------------------------------------------------------------------
-- Options every script shares

E.PRESETS = { "paper", "sequential", "quick" }

--- Common options (cli entries); a script's own entries come first.
function E.common_options(defaults)
  defaults = defaults or {}
  return {
    { "out", defaults.out or "out/experiment", "output folder (results, figures, cached units)" },
    { "preset", defaults.preset or "quick", "estimator preset", choices = E.PRESETS },
    { "images", defaults.images or 32, "images per evaluation set when a spec gives no :N", min = 1 },
    { "seed", defaults.seed or 0, "seed of evaluation draws, directions and random inits" },
    { "threads", 0, "threads (0: SRGEO_THREADS or the machine's default)", min = 0, max = 4096 },
    { "directions", type = "integer", help = "directions per image (overrides the preset)" },
    { "jvp_directions", type = "string", help = "directions with exact JVPs: a number or 'all' (overrides the preset)" },
    { "nscales", defaults.nscales, "rungs of the scale ladder (overrides the preset)", type = "integer", min = 1, max = 4096 },
    { "log10_lo", defaults.log10_lo, "lowest rung, log10 η at 224² (shifted by log10 √(d224/d) for other sizes; preset: -2)",
      type = "number" },
    { "log10_hi", defaults.log10_hi, "highest rung, likewise (preset: 2)", type = "number" },
    { "range", defaults.range or "auto", "auto: extend the ladder upward until the shape test finds a bump or the "
      .. "perturbation's per-pixel RMS reaches 1; paper: the ladder as set", choices = { "auto", "paper" } },
    { "refine", false, "add rungs halfway around a bump's peak (peak η within half a rung spacing)" },
    { "alpha", defaults.alpha or 0.05, "level of the shape tests (familywise)", type = "number" },
    { "bootstrap", type = "integer", help = "bootstrap resamples for the CI bands (overrides the preset)" },
    { "precision", type = "string", help = "float32 (with a 95% bound on its float32 error, p.noise) or float64", choices = { "float32", "float64" } },
    { "tap", type = "string", help = "module to measure (default: the model's 'features'; an .onnx model: "
      .. "'embedding' when its last linear layer makes class scores, else 'output'; a value name imports only "
      .. "what it depends on)" },
    { "mean", type = "numbers", help = "an .onnx model's input mean per channel (e.g. 0.485,0.456,0.406)" },
    { "std", type = "numbers", help = "an .onnx model's input std per channel (e.g. 0.229,0.224,0.225)" },
    { "normalize", type = "boolean", help = "--no-normalize: an .onnx model takes raw [0, 1] pixels as they are" },
    { "input_size", type = "numbers", help = "an .onnx model's input size C,H,W (for dynamic height and width)" },
    { "output", type = "string", help = "an .onnx model's value to return (only what it depends on is imported)" },
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
    "ARCH{cfg}@init (e.g. mlp{hidden={16}}@init), a .safetensors path, a PyTorch checkpoint\n" ..
    "(FILE.pth, or ARCH:FILE when the keys do not say; read without Python), published weights\n" ..
    "ARCH:imagenet or ARCH:URL (fetched once into $SRGEO_CACHE, checked by SHA-256), an .onnx file (with\n" ..
    "--mean/--std or --no-normalize, --input-size, --tap, --output); LABEL=SPEC names a curve;\n" ..
    "in lists (--models) also a folder or a glob of .safetensors files ('runs/x/*.safetensors').\n" ..
    "Evaluation sets: NAME[:N][@SEED] with NAME one of\n  " .. S.EVAL_NAMES .. ".\n" ..
    "Units already computed in OUT/units/ with the same options are reused (--force recomputes)."
  return s
end

--- E.script(t, argv [, defaults]) -> opts, experiment: parse argv (exits on
--- --help or a bad option), set threads, and open the output folder.
function E.script(t, argv, defaults)
  local spec = E.spec(t, defaults)
  local o = cli.run(spec, argv)
  -- lists of model specs take folders and globs too
  for _, k in ipairs { "models", "others" } do
    if type(o[k]) == "table" then o[k] = S.expand_models(o[k]) end
  end
  o._argv = argv
  return o, E.new(o, t.name)
end

-- ---------------------------------------------------------------------------
-- The experiment object

local Ex = {}
Ex.__index = Ex
E.Experiment = Ex

local PROFILE_KEYS = { "directions", "jvp_directions", "nscales", "log10_lo", "log10_hi", "bootstrap", "precision", "tap",
                       "range", "alpha" }

--- E.new(opts, name) -> experiment.  opts: out, preset, images, seed,
--- threads, force, quiet and profile overrides (directions, range
--- (default "auto"), alpha, ...), profile = {extra srgeo.profile options}.
function E.new(o, name)
  o = o or {}
  local ex = setmetatable({
    name = name or o.name or "experiment", out = o.out or "out/experiment", seed = o.seed or 0,
    images = o.images or 32, preset = o.preset or "quick", force = o.force or false, quiet = o.quiet or false,
    argv = o._argv, opts = o, units = {}, figures = {}, notes = {}, extra = {}, files = {},
    models = {}, t0 = srgeo._clock(), computed = 0, cached = 0,
  }, Ex)
  ex.name = ex.name:gsub("%.lua$", "")
  if not srgeo.mpi.root() then ex.quiet = true end -- under mpirun rank 0 reports (and writes)
  if o.threads and o.threads > 0 then srgeo.threads(o.threads) end
  ex.popts = { preset = ex.preset, seed = ex.seed, range = "auto" }
  for _, k in ipairs(PROFILE_KEYS) do if o[k] ~= nil then ex.popts[k] = o[k] end end
  if o.exact_relu then ex.popts.exact_relu = true end
  if o.refine then ex.popts.refine = true end
  if type(ex.popts.jvp_directions) == "string" then
    local v = ex.popts.jvp_directions
    if v ~= "all" then
      local n = math.tointeger(tonumber(v))
      if not n or n < 1 then fail("--jvp-directions must be a positive integer or 'all' (got '%s')", v) end
      ex.popts.jvp_directions = n
    end
  end
  for k, v in pairs(o.profile or {}) do ex.popts[k] = v end
  -- how .onnx models are imported (spec.load_model), part of their units' identity
  for _, k in ipairs(S.IMPORT_KEYS) do
    if o[k] ~= nil then ex.import = ex.import or {}; ex.import[k] = o[k] end
  end
  -- The estimator's options, checked now by srgeo.profile's own checks (the
  -- declarations of core/stats/profile.c), not after the first model loads;
  -- on a command line, named as the flag.
  local ok, err = pcall(srgeo.profile.check_options, ex.popts)
  if not ok then
    local msg = tostring(err):gsub("^.-profile: ", "")
    if o._argv then util.raise { msg = (name or "script") .. ": " .. util.flag_message(msg) } end
    fail("%s", msg)
  end
  util.mkdir(ex.out .. "/units")
  return ex
end

function Ex:log(fmt, ...)
  if self.quiet then return end
  io.stdout:write(string.format(fmt, ...), "\n")
  io.stdout:flush()
end

--- The model (loaded once per spec) and its info.
function Ex:model(spec)
  local ms = E.parse_model(spec)
  local c = self.models[ms.spec]
  if not c then
    local m, info = E.load_model(ms, self.seed, self.import)
    c = { m, info }
    self.models[ms.spec] = c
  end
  return c[1], c[2]
end

--- Forget loaded models (frees their memory between units).
function Ex:drop_models() self.models = {}; collectgarbage() end

--- The evaluation set for a spec (noise sets take the model's input shape).
function Ex:eval_set(spec, model, model_label)
  return E.load_eval(spec, { images = self.images, seed = self.seed, model = model, model_label = model_label })
end

-- What a unit is: its specs, estimator options, label, cache key and files,
-- its description (the cache's identity) and the record ex:finish reports.
function Ex:unit(mspec, espec, extra)
  extra = extra or {}
  local ms = E.parse_model(mspec)
  local es = E.parse_eval(espec, { images = self.images, seed = self.seed })
  local popts = copy(self.popts)
  for k, v in pairs(extra) do
    if k ~= "label" and k ~= "key" and k ~= "eval_label" then popts[k] = v end
  end
  local label = extra.label or ms.label
  local key = extra.key or cache.key(ms, es, popts.tap)
  local files = cache.files(self.out .. "/units", key)
  -- rec.eval: the set as asked until a profile says how many images it holds (take_profile)
  local rec = { key = key, label = label, model = ms.spec, model_label = ms.label, eval = es.key, request = es.key,
                eval_label = extra.eval_label or es.label, tap = popts.tap, json = files.json, csv = files.csv }
  local desc = cache.unit(ms, es, popts, self.seed, self.out .. "/units")
  if S.is_onnx(ms) then desc.import = self.import end
  if S.is_onnx(ms) and ms.init then desc.twin = S.ONNX_TWIN_RULE end -- a new rule recomputes the twin's units
  return { ms = ms, es = es, popts = popts, label = label, files = files, rec = rec, desc = desc }
end

-- A unit's record takes its profile: the set's key names the images the
-- profile holds, not the count asked for.
local function take_profile(u, p)
  u.rec.profile = p
  if p and p.n_images then u.rec.eval = S.eval_key(u.es, p.n_images) end
  return p
end

-- The unit's profile from the cache (nil when it must be computed).
function Ex:from_cache(u)
  if self.force then return nil end
  local p, changed = cache.lookup(u.files, u.desc)
  if p then
    p.label = u.label
    u.rec.cached, u.profile = true, p
    return take_profile(u, p)
  elseif changed and not self.quiet and not u.said_changed then
    u.said_changed = true
    self:log("  %s: options or model changed since it was cached; recomputing", u.rec.key)
  end
end

-- The unit's lock (srgeo.cache: one process computes a unit): taken at
-- once, or (wait) after waiting for the process that holds it, or nil.
function Ex:lock(u, wait)
  local lock, held = cache.lock(u.files)
  if lock or not wait then return lock end
  self:log("  %s: another process is computing this unit (%s); waiting for it", u.rec.key, tostring(held))
  return assert(cache.lock(u.files, true))
end

--- ex:profile(model_spec, eval_spec [, extra [, nowait [, slot]]]) -> profile, record.
--- extra: label, tap, key (file name) and any srgeo.profile options for this
--- unit.  Reuses OUT/units/KEY.json when its description matches, resumes an
--- unfinished unit from its finished images, and computes a unit under its
--- lock (srgeo.cache): when another process holds it, waits for it (and then
--- uses what that process stored), or with nowait returns nil, record.
--- slot: the unit's place in ex.units (and so in the result files; ex:run
--- keeps its list's order whatever order the units finish in).  Under
--- mpirun the unit's images are spread over the ranks (ex:compute).
function Ex:profile(mspec, espec, extra, nowait, slot)
  local u = self:unit(mspec, espec, extra)
  if srgeo.mpi.size() > 1 then
    local p = self:compute({ u })[1]
    return p, u.rec
  end
  local rec = u.rec
  local p = self:from_cache(u)
  if p then
    self.cached = self.cached + 1
    self.units[slot or #self.units + 1] = rec
    return p, rec
  end
  local lock = self:lock(u, not nowait)
  if not lock then return nil, rec end
  p = self:from_cache(u) -- stored by the process we waited for
  if p then
    lock:unlock()
    rec.by_other = true
    self:log("  %s: computed by the other process; using its result", rec.key)
    self.cached = self.cached + 1
    self.units[slot or #self.units + 1] = rec
    return p, rec
  end
  local ok, a = pcall(self.compute_unit, self, u)
  lock:unlock()
  if not ok then error(a, 0) end
  self.units[slot or #self.units + 1] = rec
  return a, rec
end

-- Compute a unit under its lock in this process: resume its finished
-- images, checkpoint each new one, store it.
function Ex:compute_unit(u)
  local files, rec = u.files, u.rec
  if self.force then cache.discard(files) end
  local resume = cache.resume(files, u.desc)
  local m = self:model(u.ms)
  local X = self:eval_set(u.es, m, u.ms.label)
  local po = copy(u.popts)
  po.label, po.model_name, po.eval = u.label, u.ms.spec, S.eval_key(u.es, #X)
  if resume then
    self:log("  %s: resuming after image %d of %d (checkpoints in %s)", rec.key, resume.n_images, #X, files.partial)
  end
  local t0 = srgeo._clock()
  local p = srgeo.profile(m, X, po, { resume = resume,
    on_image = function(pp, i) cache.save_image(files, u.desc, pp, i) end })
  if p.interrupted then
    fail("interrupted during %s after %d images; the %d completed units and this unit's finished images are "
      .. "cached in %s/units — rerun the same command to resume", rec.key, p.n_images, self.computed + self.cached, self.out)
  end
  cache.store(files, u.desc, u.label, p, srgeo._clock() - t0)
  rec.cached, rec.seconds = false, srgeo._clock() - t0
  take_profile(u, p)
  self.computed = self.computed + 1
  return p
end

--- ex:compute(units [, log]) -> profiles: under mpirun, the units (ex:unit)
--- from the cache or computed, with a "[k/N]" line per unit when log.  Rank
--- 0 alone touches the unit cache: it decides what is computed, holds the
--- units' locks (another job on the same folder waits), resumes unfinished
--- units from their finished images, checkpoints each image as the images
--- before it have arrived, and stores each unit as soon as it is complete,
--- so a rerun with any number of ranks resumes from what was finished.
--- Every rank walks the units to compute in the same order, each one a
--- srgeo.profile whose images (stage by stage) are spread over the ranks;
--- every rank returns the profiles.
function Ex:compute(us, log)
  local mpi = srgeo.mpi
  local n = #us
  local plan, locks = {}, {}
  local function unlock_all()
    for k, l in pairs(locks) do l:unlock(); locks[k] = nil end
  end
  if mpi.root() then
    local ok, err = pcall(function()
      for k, u in ipairs(us) do
        local p = self:from_cache(u)
        if not p then
          locks[k] = self:lock(u, true)
          p = self:from_cache(u) -- stored by the process we waited for
          if p then locks[k]:unlock(); locks[k] = nil end
        end
        if p then
          plan[k] = { cached = true }
        else
          if self.force then cache.discard(u.files) end
          local resume = cache.resume(u.files, u.desc)
          plan[k] = { resume = resume }
          if resume then
            local total = u.es.noise and u.es.n or #self:eval_set(u.es)
            self:log("  %s: resuming after image %d of %d (checkpoints in %s)", u.rec.key, resume.n_images, total,
              u.files.partial)
          end
        end
      end
    end)
    if not ok then unlock_all(); error(err, 0) end
  end
  plan = mpi.bcast(plan)
  local done = 0
  local function line(k)
    done = done + 1
    if not log then return end
    local u = us[k]
    local what = string.format("[%d/%d] %s on %s%s", done, n, u.rec.label, u.rec.eval, u.rec.tap and " (" .. u.rec.tap .. ")" or "")
    if u.rec.cached then self:log("%s: cached", what)
    else self:log("%s: %d images, %.1f s", what, u.profile.n_images, u.rec.seconds) end
  end
  local at -- the unit being computed
  local ok, err = pcall(function()
    for k, pl in ipairs(plan) do
      local u = us[k]
      u.rec.cached = pl.cached or false
      if pl.cached then
        self.cached = self.cached + 1
        line(k)
      else
        at = k
        local m = self:model(u.ms)
        local X = self:eval_set(u.es, m, u.ms.label)
        local po = copy(u.popts)
        po.label, po.model_name, po.eval = u.label, u.ms.spec, S.eval_key(u.es, #X)
        local t0 = srgeo._clock()
        local p = srgeo.profile(m, X, po, { resume = pl.resume,
          on_image = mpi.root() and function(pp, i) cache.save_image(u.files, u.desc, pp, i) end or nil })
        if p.interrupted then error("interrupted", 0) end
        local seconds = srgeo._clock() - t0
        if mpi.root() then
          cache.store(u.files, u.desc, u.label, p, seconds)
          if locks[k] then locks[k]:unlock(); locks[k] = nil end
        end
        u.profile, u.rec.seconds = p, seconds
        take_profile(u, p)
        self.computed = self.computed + 1
        line(k)
      end
    end
  end)
  unlock_all()
  if not ok then
    -- Ctrl-C: the finished units are cached, and the finished images of the unit it stopped in.
    if tostring(err):find("interrupted", 1, true) and at then
      fail("interrupted during %s; the %d completed units and the finished images of the others are cached in %s/units"
        .. " — rerun the same command to resume", us[at].rec.key, self.computed + self.cached, self.out)
    end
    error(err, 0)
  end
  -- Every rank gets rank 0's profiles and records.
  local got = {}
  for k, u in ipairs(us) do got[k] = { profile = u.profile, seconds = u.rec.seconds } end
  got = mpi.bcast(got)
  local ps = {}
  for k, u in ipairs(us) do
    ps[k] = srgeo.profile.adopt(got[k].profile)
    u.profile, u.rec.seconds = ps[k], got[k].seconds
    take_profile(u, ps[k])
    self.units[#self.units + 1] = u.rec
  end
  return ps
end

--- ex:run(list) -> profiles: each entry {model =, eval =, label =, tap =, ...};
--- eval defaults to opts.default_eval.  Prints one line per unit.  A unit
--- another process is computing is left for last (this process computes
--- the others meanwhile), then waited for.  Under mpirun the units' images
--- are spread over the ranks (ex:compute).
function Ex:run(list, default_eval)
  local function extra_of(e)
    local extra = {}
    for k, v in pairs(e) do if k ~= "model" and k ~= "eval" then extra[k] = v end end
    return extra
  end
  if srgeo.mpi.size() > 1 then
    local us = {}
    for i, e in ipairs(list) do us[i] = self:unit(e.model, e.eval or default_eval, extra_of(e)) end
    return self:compute(us, true)
  end
  local out, later = {}, {}
  local n, base = #list, #self.units
  local function one(i, u, nowait)
    local t0 = srgeo._clock()
    local p, rec = self:profile(u.model, u.eval or default_eval, extra_of(u), nowait, base + i)
    if not p then
      self:log("[%d/%d] %s on %s: another process is computing it; leaving it for last", i, n, rec.label, rec.eval)
      later[#later + 1] = i
      return
    end
    if rec.cached then
      self:log("[%d/%d] %s on %s%s: %s", i, n, rec.label, rec.eval, rec.tap and " (" .. rec.tap .. ")" or "",
        rec.by_other and "computed by another process" or "cached")
    else
      self:log("[%d/%d] %s on %s%s: %d images, %.1f s", i, n, rec.label, rec.eval,
        rec.tap and " (" .. rec.tap .. ")" or "", p.n_images, srgeo._clock() - t0)
    end
    out[i] = p
  end
  for i, u in ipairs(list) do one(i, u, n > 1) end
  for _, i in ipairs(later) do one(i, list[i], false) end
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
    -- a descriptor chart of fewer than two values is mostly its "left
    -- out" note: its values go in the summary as a table instead
    if plotfn == srgeo.plot.descriptors and o.min_points == nil then o.min_points = 2 end
    local ok, err = pcall(plotfn, data, o)
    if ok then
      written[#written + 1] = o.out
    elseif type(err) == "table" and err.too_few then
      self:note(string.format("%s: %s", name, (err.msg:gsub("^srgeo%.plot%.%w+: ", ""))), E.columns(err.rows))
      if not self.quiet then io.stderr:write(string.format("%s: %s: a table in the summary instead\n", self.name, name)) end
      break
    else
      io.stderr:write(string.format("%s: figure %s not drawn: %s\n", self.name, o.out, tostring(err)))
      break
    end
  end
  if #written > 0 then self.figures[#self.figures + 1] = { name = name, files = written } end
  return written[1]
end

--- A figure title for an evaluation set: "r_η on NAME (N images, seed S, P preset)";
--- prefix: text before it (a model name); what: the quantity (default r_η).
--- N is what the profiles hold: ps (default: ex's units on that set), or,
--- before any is computed, the count asked for ("up to N images").
--- srgeo.plot sets titles literally (noenhanced), so names need no escaping.
function E.title(espec, ex, prefix, what, ps)
  local es = E.parse_eval(espec, ex and { images = ex.images, seed = ex.seed })
  if not ps and ex then
    ps = {}
    for _, rec in ipairs(ex.units) do if rec.request == es.key then ps[#ps + 1] = rec.profile end end
  end
  return string.format("%s%s on %s (%s, seed %d, %s preset)", prefix and prefix .. ": " or "", what or "r_η",
    es.name, E.images_text(ps) or string.format("up to %d images", es.n), es.seed, ex and ex.preset or "quick")
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
function Ex:note(title, text) self.notes[#self.notes + 1] = { title = title, text = tostring(text) } end

--- A value stored under results.json's "extra".
function Ex:set(key, value) self.extra[key] = value end

--- ex:finish([profiles, labels]) -> summary text.  Writes OUT/profiles.csv
--- (one row per unit and rung), OUT/descriptors.csv, OUT/results.json and
--- OUT/summary.txt (srgeo.report), then prints the summary and the files
--- written.
function Ex:finish(ps, labels)
  local text = report.write(self, ps, labels)
  if not self.quiet then
    io.stdout:write("\n", text, "\n")
    io.stdout:write("wrote ", table.concat(report.files(self), " "), "\n")
    io.stdout:flush()
  end
  return text
end

--- The command line that reruns this experiment.
function Ex:command() return report.command(self.name, self.argv) end

--- E.run_script(name, args): run scripts/NAME.lua in this state with the
--- given argument list (what `srgeo scripts/NAME.lua ARGS` does).
function E.run_script(name, args)
  local path = srgeo.root .. "/scripts/" .. name .. ".lua"
  local chunk, err = loadfile(path)
  if not chunk then fail("%s", err) end
  return chunk(table.unpack(args or {}))
end

return E
