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
                     "parse_eval", "load_eval", "expand_models" } do E[k] = S[k] end
E.model_key = cache.model_key
for _, k in ipairs { "jacobian_fro", "bump", "with_jacobian", "columns", "descriptor_table", "compare_table",
                     "load_results" } do E[k] = report[k] end

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
    "ARCH{cfg}@init (e.g. mlp{hidden={16}}@init), a .safetensors path; LABEL=SPEC names a curve;\n" ..
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
  if not srgeo.mpi.root() then ex.quiet = true end -- under mpirun rank 0 reports (and writes)
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
function Ex:eval_set(spec, model, model_label)
  return E.load_eval(spec, { images = self.images, seed = self.seed, model = model, model_label = model_label })
end

-- What a unit is: its specs, estimator options, label, cache key and files,
-- and the record ex:finish reports.
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
  local rec = { key = key, label = label, model = ms.spec, model_label = ms.label, eval = es.key,
                eval_label = extra.eval_label or es.label, tap = popts.tap, json = files.json, csv = files.csv }
  return { ms = ms, es = es, popts = popts, label = label, files = files, rec = rec,
           desc = cache.unit(ms, es, popts, self.seed) }
end

-- The profile run of unit u on this rank (srgeo.profile.prepare), made on
-- first use: the model and the evaluation set load once per rank.
function Ex:prepared(u)
  if not u.run then
    local m = self:model(u.ms)
    local X = self:eval_set(u.es, m, u.ms.label)
    local po = copy(u.popts)
    po.label, po.model_name, po.eval, po.progress = u.label, u.ms.spec, u.es.key, false
    u.run = srgeo.profile.prepare(m, X, po)
  end
  return u.run
end

--- ex:compute(units [, log]) -> profiles: the units (ex:unit) from the
--- cache or computed, with a "[k/N]" line per unit when log.  Under mpirun
--- the images of every unit to compute are spread over the ranks at once
--- (srgeo.mpi.map: a rank that finishes early takes images of the next
--- unit); rank 0 decides from its unit cache what is computed, and caches
--- each unit as soon as its last image arrives, so a rerun with any number
--- of ranks resumes from the finished units.  Every rank returns the
--- profiles.
function Ex:compute(us, log)
  local mpi = srgeo.mpi
  local n = #us
  local plan = {}
  if mpi.root() then
    for k, u in ipairs(us) do
      local p, changed
      if not self.force then p, changed = cache.lookup(u.files, u.desc) end
      if p then
        p.label = u.label
        u.profile, plan[k] = p, { cached = true }
      else
        if changed then self:log("  %s: options or model changed since it was cached; recomputing", u.rec.key) end
        plan[k] = { images = u.es.noise and u.es.n or #self:eval_set(u.es) }
      end
    end
  end
  plan = mpi.bcast(plan)
  local items, left, records, seconds, done = {}, {}, {}, {}, 0
  local bar -- the images of the units computed (util.progress: rank 0 reports)
  local function line(k)
    done = done + 1
    if not log then return end
    if bar then bar.done() end -- a terminal's bar line makes way
    local u = us[k]
    local what = string.format("[%d/%d] %s on %s%s", done, n, u.rec.label, u.rec.eval, u.rec.tap and " (" .. u.rec.tap .. ")" or "")
    if u.rec.cached then self:log("%s: cached", what)
    else self:log("%s: %d images, %.1f s", what, u.profile.n_images, u.rec.seconds) end
  end
  for k, pl in ipairs(plan) do
    us[k].rec.cached = pl.cached or false
    if pl.cached then
      self.cached = self.cached + 1
      line(k)
    else
      left[k], records[k], seconds[k] = pl.images, {}, 0
      for i = 1, pl.images do items[#items + 1] = { k, i } end
    end
  end
  local function finish(k, partial)
    local u = us[k]
    local p = srgeo.profile.finish(self:prepared(u), records[k], seconds[k])
    if partial then
      if p.n_images > 0 then cache.save_partial(u.files, p) end
      return
    end
    cache.store(u.files, u.desc, u.label, p, seconds[k])
    u.profile, u.rec.seconds, u.run = p, seconds[k], nil
    self.computed = self.computed + 1
    line(k)
  end
  local arrived = 0
  bar = #items > 0 and not self.quiet and util.progress("profile", #items) or nil
  local ok, err = pcall(mpi.map, #items, function(j)
    local t0 = srgeo._clock()
    local r = srgeo.profile.image(self:prepared(us[items[j][1]]), items[j][2])
    return { r = r, seconds = srgeo._clock() - t0 }
  end, { root_only = true, on_result = function(j, v)
    local k, i = items[j][1], items[j][2]
    records[k][i], seconds[k], left[k] = v.r, seconds[k] + v.seconds, left[k] - 1
    arrived = arrived + 1
    if bar then bar.update(arrived) end
    if left[k] == 0 then finish(k) end
  end })
  if bar then bar.done() end
  if not ok then
    -- Ctrl-C (one process): the finished units are cached; keep what an
    -- unfinished one computed (the next run starts it afresh).
    local at
    for k in pairs(left) do
      if left[k] > 0 then at = at or k; finish(k, true) end
    end
    if tostring(err):find("interrupted", 1, true) and at then
      fail("interrupted during %s; the %d completed units are cached in %s/units — rerun the same command to resume",
        us[at].rec.key, self.computed + self.cached, self.out)
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
    u.profile, u.rec.profile, u.rec.seconds = ps[k], ps[k], got[k].seconds
    self.units[#self.units + 1] = u.rec
  end
  return ps
end

--- ex:profile(model_spec, eval_spec [, extra]) -> profile, record.  extra:
--- label, tap, key (file name) and any srgeo.profile options for this unit.
--- Reuses OUT/units/KEY.json when its description matches (srgeo.cache).
function Ex:profile(mspec, espec, extra)
  local u = self:unit(mspec, espec, extra)
  local p = self:compute({ u })[1]
  return p, u.rec
end

--- ex:run(list) -> profiles: each entry {model =, eval =, label =, tap =, ...};
--- eval defaults to opts.default_eval.  Prints one line per unit.
function Ex:run(list, default_eval)
  local us = {}
  for i, e in ipairs(list) do
    local extra = {}
    for k, v in pairs(e) do if k ~= "model" and k ~= "eval" then extra[k] = v end end
    us[i] = self:unit(e.model, e.eval or default_eval, extra)
  end
  return self:compute(us, true)
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
--- prefix: text before it (a model name); what: the quantity (default r_η).
--- srgeo.plot sets titles literally (noenhanced), so names need no escaping.
function E.title(espec, ex, prefix, what)
  local es = E.parse_eval(espec, ex and { images = ex.images, seed = ex.seed })
  return string.format("%s%s on %s (%d images, seed %d, %s preset)", prefix and prefix .. ": " or "", what or "r_η",
    es.name, es.n, es.seed, ex and ex.preset or "quick")
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
