-- experiments_spec.lua: the experiment library (cli, experiment), every
-- script end to end on a tiny model and a tiny set, caching on rerun,
-- help() and examples() (the notebooks and the HTML pages: notebook_spec.lua).
--
-- The models are built here: an MLP on 1x8x8 inputs trained for 40 steps by
-- srgeo.train (its checkpoints are the "run" for dynamics.lua), saved under
-- fake shipped names in a folder that SRGEO_SHIPPED points the scripts at.
local T = ...
local srgeo = require "srgeo"
local cli = require "srgeo.cli"
local E = require "srgeo.experiment"
local spec = require "srgeo.spec"
local cache = require "srgeo.cache"
local report = require "srgeo.report"
local models = require "srgeo.models"
local json = require "srgeo.json"
local util = require "srgeo.util"

local ROOT = "build/test-experiments"

-- The srgeo binary running these tests.
local function exe() return T.shell() or "build/srgeo" end

local sh = T.sh

local read = T.read

local function exists(path) return read(path) ~= nil end

-- Fixtures, built once: SHIP/{tiny, tiny_random_labels, tiny_pgd_eps0.5}.safetensors and RUN/ckpt_*.
local fixtures
local function setup()
  if fixtures then return fixtures end
  os.execute("rm -rf " .. ROOT .. " && mkdir -p " .. ROOT .. "/ship " .. ROOT .. "/run")
  local m = srgeo.models.mlp { hidden = { 16 }, input = { 1, 8, 8 }, seed = 1 }
  local ds = srgeo.data.noise { n = 256, shape = { 1, 8, 8 }, seed = 3, kind = "uniform" }
  srgeo.train { model = m, data = ds, steps = 40, batch = 32, lr = 0.05, augment = false, out = ROOT .. "/run",
                seed = 1, progress = false, per_decade = 2 }
  local ckpts = E.checkpoints(ROOT .. "/run")
  local function cp(src, name)
    util.write_atomic(ROOT .. "/ship/" .. name .. ".safetensors", read(src))
  end
  cp(ckpts[#ckpts].path, "tiny")
  cp(ckpts[math.max(1, #ckpts - 2)].path, "tiny_random_labels")
  cp(ckpts[math.max(1, #ckpts - 1)].path, "tiny_pgd_eps0.5")
  -- a PGD-trained twin whose name says nothing: its ε comes from the metadata
  local mr = srgeo.models.mlp { hidden = { 16 }, input = { 1, 8, 8 }, seed = 2 }
  local run = srgeo.train { model = mr, data = ds, steps = 4, batch = 32, lr = 0.05, augment = false, seed = 1,
                            out = ROOT .. "/run_pgd", progress = false, objective = "pgd", pgd = { eps = 0.25, steps = 2 } }
  cp(ROOT .. "/run_pgd/" .. run.checkpoints[#run.checkpoints].path, "tiny_robust")
  fixtures = { ship = ROOT .. "/ship", run = ROOT .. "/run", n_ckpts = #ckpts }
  return fixtures
end

-- Small estimator settings: every unit takes well under a second.
local SMALL = "--images 4 --directions 16 --jvp-directions all --nscales 7 --bootstrap 50"

local function script(name, args)
  local f = setup()
  return sh(string.format("SRGEO_SHIPPED=%s %s scripts/%s.lua %s", f.ship, exe(), name, args))
end

-- The invariants every unit of a finished experiment must hold.
local function check_results(out, expect_figures, n_units)
  for _, f in ipairs { "summary.txt", "results.json", "profiles.csv", "descriptors.csv" } do
    T.truthy(exists(out .. "/" .. f), out .. "/" .. f .. " missing")
  end
  local summary = read(out .. "/summary.txt") or ""
  for _, fig in ipairs(expect_figures) do
    local png = read(out .. "/" .. fig .. ".png")
    -- a descriptor chart of fewer than two defined values is a table in the summary instead
    local tabled = not png and summary:find("\n" .. fig .. ": %d+ of %d+ [%w_]+ defined %(fewer than 2: a table, not a chart%):\n")
    if not tabled then
      T.truthy(png and png:sub(1, 8) == "\137PNG\r\n\26\n", fig .. ".png missing or not a PNG")
      local svg = read(out .. "/" .. fig .. ".svg")
      T.truthy(svg and svg:find("<svg", 1, true), fig .. ".svg missing or not an SVG")
    end
  end
  local r = E.load_results(out)
  if n_units then T.eq(#r.units, n_units, "units in results.json") end
  -- results.json names files relative to the output folder and each unit's identity
  local raw = json.decode(read(out .. "/results.json"))
  for _, u in ipairs(raw.units) do
    T.truthy(u.json:match("^units/[^/]+%.json$") and u.csv:match("^units/[^/]+%.csv$"), "unit files relative to OUT: " .. u.json)
    T.truthy(not tostring(u.model):match("^/"), "model spec not absolute: " .. tostring(u.model))
    T.truthy(type(u.identity) == "table" and #u.identity.weights == 16 and u.identity.eval == u.eval,
      "unit identity: " .. json.encode(u.identity or {}))
  end
  for _, f in ipairs(raw.figures) do
    for _, path in ipairs(f.files) do T.truthy(not path:find("/", 1, true), "figure file relative to OUT: " .. path) end
  end
  local rows = 0
  for _, u in ipairs(r.units) do
    local p = srgeo.profile.load(u.json)
    -- range auto: the 7-rung ladder, extended until a bump or the physical bound
    T.eq(#p.scales, 7 + p.range.added + p.range.refined, "rungs")
    T.truthy(p.range.stop == "decided" or p.range.stop == "bound", p.range.reason)
    T.eq(u.shape.class, p.shape.class, "results.json has the unit's shape")
    -- ReLU network with exact JVPs on every direction: r = 1 on the plateau
    local checked = 0
    for s = 1, 3 do
      if p.median[s] == p.median[s] then
        T.close(p.median[s], 1, 1e-3, u.key .. " plateau rung " .. s)
        checked = checked + 1
      end
    end
    T.truthy(checked > 0, u.key .. ": no valid plateau rung")
    for s = 1, #p.scales do
      local lo, md, hi = p.lo[s], p.median[s], p.hi[s]
      if md == md then
        T.truthy(lo <= md + 1e-12 and md <= hi + 1e-12, string.format("%s rung %d: lo %g median %g hi %g", u.key, s, lo, md, hi))
      end
    end
    for _, k in ipairs(srgeo.profile.descriptor_names) do
      local d = u.descriptors[k]
      T.truthy(d ~= nil, "descriptor " .. k)
      if type(d.lo) == "number" and type(d.hi) == "number" and d.lo == d.lo and d.hi == d.hi then
        T.truthy(d.lo <= d.hi + 1e-12, k .. " CI ordered")
      end
    end
    local j = u.jacobian_fro
    T.truthy(j.value > 0 and j.lo <= j.value + 1e-12 and j.value <= j.hi + 1e-12, "‖J‖_F and its CI")
    rows = rows + #p.scales
  end
  local n = 0
  for _ in read(out .. "/profiles.csv"):gmatch("\n") do n = n + 1 end
  T.eq(n, rows + 1, "profiles.csv rows")
  T.truthy(read(out .. "/summary.txt"):find("peak η", 1, true), "summary has the descriptor table")
  return r
end

-- ---------------------------------------------------------------------------
-- cli

local SPEC = {
  name = "t.lua", about = "a test",
  options = {
    { "model", "small_resnet", "model" },
    { "models", { "a", "b" }, "models" },
    { "eps", { 0.5, 1 }, "eps" },
    { "n", 4, "count" },
    { "lr", 0.1, "rate" },
    { "twin", false, "flag" },
    { "band", true, "on by default" },
    { "preset", "quick", "preset", choices = { "paper", "quick" } },
    { "jvp_directions", type = "string", help = "n or all" },
  },
  positional = { { "file", "a file", required = false } },
}

T.test("cli: typed defaults, values, flags, lists, positionals", function()
  local o = cli.parse(SPEC, {})
  T.eq(o.model, "small_resnet"); T.eq(o.n, 4); T.eq(o.twin, false); T.eq(o.band, true); T.eq(#o.models, 2)
  o = cli.parse(SPEC, { "--model", "x@init", "--models", "p,q,r", "--eps=0,0.25", "--n", "7", "--lr", "-1e-3",
                        "--twin", "--no-band", "--jvp-directions", "all", "nb.md" })
  T.eq(o.model, "x@init"); T.eq(#o.models, 3); T.eq(o.models[3], "r"); T.eq(o.eps[2], 0.25)
  T.eq(math.type(o.n), "integer"); T.eq(o.n, 7); T.close(o.lr, -1e-3, 1e-15)
  T.eq(o.twin, true); T.eq(o.band, false); T.eq(o.jvp_directions, "all"); T.eq(o.file, "nb.md")
  T.eq(cli.parse(SPEC, { "--twin=false" }).twin, false)
end)

T.test("cli: bad command lines name the problem and the valid options", function()
  local err = T.raises(function() cli.parse(SPEC, { "--modle", "x" }) end, "unknown option '--modle'")
  T.truthy(tostring(err):find("did you mean --model", 1, true), tostring(err))
  T.truthy(tostring(err):find("--jvp-directions", 1, true), "lists the valid options")
  T.raises(function() cli.parse(SPEC, { "--n", "1.5" }) end, "--n expects an integer")
  T.raises(function() cli.parse(SPEC, { "--lr", "fast" }) end, "--lr expects a number")
  T.raises(function() cli.parse(SPEC, { "--preset", "slow" }) end, "--preset must be one of paper, quick")
T.test("errors: cli, experiment and notebook raise util.Error objects (the shell prints them without a traceback)", function()
  local function err_of(f, ...)
    local ok, e = pcall(f, ...)
    T.eq(ok, false)
    T.eq(getmetatable(e), util.Error, tostring(e))
    return tostring(e)
  end
  T.truthy(err_of(cli.parse, SPEC, { "--modle", "x" }):find("^t%.lua: unknown option '%-%-modle'"))
  T.truthy(err_of(E.parse_eval, "imagenet:5"):find("^experiment: unknown evaluation set 'imagenet:5'"))
  T.truthy(err_of(require("srgeo.notebook").run, ROOT .. "/no_such_notebook.md"):find("^notebook: cannot read "))
  T.eq(cli.Error, util.Error); T.eq(E.Error, util.Error)
end)

  T.raises(function() cli.parse(SPEC, { "--model" }) end, "--model needs a value")
  T.raises(function() cli.parse(SPEC, { "a", "b" }) end, "unexpected argument 'b'")
end)

T.test("cli: --help text from the spec", function()
  local o, help = cli.parse(SPEC, { "--help" })
  T.eq(o, nil)
  for _, s in ipairs { "usage: srgeo t [options] [FILE]", "a test", "--model VALUE", "[small_resnet]", "--models A,B,...",
                       "[a,b]", "--twin", "--no-band", "(paper|quick)", "-h, --help", "[FILE]" } do
    T.truthy(help:find(s, 1, true), "help lacks '" .. s .. "':\n" .. help)
  end
end)

-- ---------------------------------------------------------------------------
-- experiment specs

T.test("experiment: model specs", function()
  local ms = E.parse_model("small_resnet")
  T.eq(ms.name, "small_resnet"); T.eq(ms.init, nil); T.eq(ms.label, "small_resnet")
  ms = E.parse_model("mlp{hidden={16}}@init:7")
  T.eq(ms.name, "mlp"); T.eq(ms.cfg.hidden[1], 16); T.eq(ms.init, true); T.eq(ms.init_seed, 7); T.eq(ms.label, "mlp@init:7")
  ms = E.parse_model("runs/x/ckpt_00000100.safetensors")
  T.eq(ms.path, "runs/x/ckpt_00000100.safetensors"); T.eq(ms.label, "ckpt_00000100")
  ms = E.parse_model("trained=runs/x/a.safetensors")
  T.eq(ms.label, "trained"); T.eq(ms.path, "runs/x/a.safetensors")
  T.eq(E.twin("small_resnet"), "small_resnet@init")
  T.eq(E.parse_model(E.twin("t=a/b.safetensors")).label, "t@init")
  T.raises(function() E.parse_model("mlp{hidden=}@init") end, "is not a Lua table")
  T.raises(function() E.load_model("small_resnet_nonexistent") end, "unknown model 'small_resnet_nonexistent'")
  T.raises(function() E.load_model("mlp") end, "is an architecture, not a shipped model")
  local m, info = E.load_model("mlp{hidden={4},input={1,2,2}}@init")
  T.eq(info.arch, "mlp"); T.eq(E.input_shape(m)[3], 2)
  T.eq(E.model_eps("small_resnet_pgd_eps0.5"), 0.5)
  local f = setup()
  T.eq(E.model_eps(f.ship .. "/tiny_robust.safetensors"), 0.25, "PGD eps from the training metadata")
  T.eq(E.model_eps(f.ship .. "/tiny.safetensors"), 0, "standard training: 0")
end)

T.test("experiment: E.bump is the profile's shape test (srgeo.bump)", function()
  local function prof(curve)
    local rows = {}
    for i = 1, 10 do
      rows[i] = {}
      for s, v in ipairs(curve) do rows[i][s] = v * (1 + 0.002 * i) end
    end
    return srgeo.profile.aggregate { scales = { 0.01, 0.1, 1, 10, 100, 1000 }, per_image = rows,
                                     options = { ci = 0.95, bootstrap = 200, seed = 0 } }
  end
  local class, text = E.bump(prof { 1, 1, 1, 3, 1, 1 })
  T.eq(class, "bump")
  T.truthy(text:find("^bump: r 3[%.%d]* at the peak rung η 10,"), text)
  T.eq(E.bump(prof { 1, 1, 1, 1.5, 3, 6 }), "edge")
  T.eq(E.bump(prof { 1, 1, 1, 0.5, 0.3, 0.2 }), "fall")
  T.eq(E.bump(prof { 1, 1, 1, 1, 1, 1 }), "flat")
  local class2, why = E.bump { median = { 1, 2, 1 } }
  T.eq(class2, "undetermined")
  T.truthy(why:find("older srgeo", 1, true), why)
end)

T.test("experiment: evaluation-set specs", function()
  local es = E.parse_eval("fmnist-test:64@3")
  T.eq(es.base, "fmnist-test"); T.eq(es.n, 64); T.eq(es.seed, 3); T.eq(es.key, "fmnist-test:64@3")
  es = E.parse_eval("blur2", { images = 8, seed = 1 })
  T.eq(es.base, "fmnist-test"); T.eq(es.blur, 2); T.eq(es.n, 8); T.eq(es.seed, 1)
  es = E.parse_eval("train-blur1:5")
  T.eq(es.base, "train"); T.eq(es.blur, 1)
  es = E.parse_eval("noise-pink:3")
  T.eq(es.noise, "pink")
  T.raises(function() E.parse_eval("imagenet:5") end, "unknown evaluation set 'imagenet:5'")
  T.raises(function() E.parse_eval("noise-plaid") end, "unknown noise kind 'plaid'")
  local m = srgeo.models.mlp { hidden = { 4 }, input = { 1, 5, 5 } }
  local ds = E.load_eval("noise:3@2", { model = m })
  T.eq(#ds, 3); T.eq(ds:get(1):shape()[4], 5)
end)

T.test("cache: srgeo._stat gives a file's identity without a shell", function()
  local f = setup()
  local path = f.ship .. "/tiny.safetensors"
  local st = srgeo._stat(path)
  T.eq(st.size, #read(path)); T.eq(math.type(st.mtime), "integer"); T.eq(st.dir, false)
  T.truthy(math.type(st.mtime_nsec) == "integer" and st.mtime_nsec >= 0 and st.mtime_nsec < 1e9, "nanoseconds")
  T.truthy(math.abs(st.mtime - os.time()) < 86400, "mtime in seconds since the epoch")
  T.eq(srgeo._stat(f.ship).dir, true)
  local none, err = srgeo._stat(f.ship .. "/nope.safetensors")
  T.eq(none, nil); T.truthy(err:find("nope.safetensors", 1, true), err)
  T.eq(cache.file_id(path), "fnv1a64:" .. srgeo._file_hash(path))
  T.eq(cache.file_id(f.ship .. "/nope.safetensors"), "?")
  T.eq(cache.file_id(f.ship), "?", "a folder")
end)

T.test("cache: model keys name where the weights come from", function()
  local f = setup()
  local path = f.ship .. "/tiny.safetensors"
  T.eq(cache.model_key(path), "file:" .. path .. "#" .. cache.file_id(path))
  T.eq(cache.model_key("t=" .. path .. "@init:4"), "file:" .. path .. "#" .. cache.file_id(path) .. "@init:4")
  T.eq(cache.model_key("mlp{hidden={4}}@init", 3), 'arch:mlp{"hidden":[4]}@init:3', "the run's seed for @init")
  T.eq(cache.model_key("mlp@init"), "arch:mlp@init:0")
  local shipped = models.shipped_path("small_resnet")
  if util.exists(shipped) then
    T.eq(cache.model_key("small_resnet@init:2"), "shipped:small_resnet#" .. cache.file_id(shipped) .. "@init:2")
    T.eq(cache.model_key("small_resnet{widths={4,8,16}}@init"), 'arch:small_resnet{"widths":[4,8,16]}@init:0',
      "NAME{cfg} is an architecture even when NAME is shipped")
  end
end)

T.test("cache: a stored unit is found again only under the same description", function()
  local dir = ROOT .. "/cache"
  util.mkdir(dir)
  local ms, es = spec.parse_model("mlp{hidden={4},input={1,4,4}}@init"), spec.parse_eval("noise:2@1")
  local key = cache.key(ms, es)
  T.eq(key, "mlp@init_hidden_4_input_1_4_4___noise_2@1", "a file-system-safe name")
  T.eq(cache.key(ms, es, "fc1"), key .. "__fc1")
  local files = cache.files(dir, key)
  for _, k in ipairs { "json", "csv", "unit" } do os.remove(files[k]) end
  cache.discard(files)
  local unit = cache.unit(ms, es, { preset = "quick", seed = 0, directions = 4 }, 0)
  T.eq(unit.model, cache.model_key(ms, 0)); T.eq(unit.eval, "noise:2@1")
  local p0, changed = cache.lookup(files, unit)
  T.eq(p0, nil); T.eq(changed, false, "nothing cached yet")
  local m = spec.load_model(ms)
  local p = srgeo.profile(m, spec.load_eval(es, { model = m }), { preset = "quick", directions = 4, nscales = 5,
    bootstrap = 10, progress = false })
  for i = 1, p.n_images do cache.save_image(files, unit, p, i) end
  T.truthy(exists(files.partial .. "/000002.json"), "per-image checkpoints")
  local r = cache.resume(files, unit)
  T.eq(r.n_images, 2, "both images resume")
  T.eq(cache.resume(files, cache.unit(ms, es, { preset = "quick", seed = 1 }, 0)), nil, "another unit's images are not resumed")
  T.eq(srgeo._listdir(files.partial), nil, "and are discarded")
  for i = 1, p.n_images do cache.save_image(files, unit, p, i) end
  cache.store(files, unit, "lbl", p, 0.25)
  T.truthy(exists(files.json) and exists(files.csv) and not exists(files.partial), "profile written, checkpoints removed")
  T.eq(json.decode(read(files.unit)).label, "lbl")
  local q = cache.lookup(files, unit)
  T.truthy(q, "found again")
  for s = 1, #p.scales do T.close(q.median[s], p.median[s], 1e-12) end
  local other = cache.unit(ms, es, { preset = "quick", seed = 0, directions = 8 }, 0)
  q, changed = cache.lookup(files, other)
  T.eq(q, nil); T.eq(changed, true, "options changed")
  util.write_atomic(files.unit, "{not json")
  q, changed = cache.lookup(files, unit)
  T.eq(q, nil); T.eq(changed, false, "an unreadable description is recomputed silently")
end)

T.test("report: CSV rows (quoted labels, nan), the rerun command line", function()
  local descriptors = {}
  for _, k in ipairs(srgeo.profile.descriptor_names) do descriptors[k] = { value = 1.5, lo = 0 / 0, hi = 0 / 0 } end
  local p = { scales = { 0.1, 1 }, median = { 1, 0 / 0 }, lo = { 0.9, 0 / 0 }, hi = { 1.1, 0 / 0 }, mean = { 1, 0 / 0 },
              descriptors = descriptors, jacobian_fro = { 2, 4 } }
  local u = { label = 'a,"b"', model = "m", eval = "noise:2@0", tap = "fc1", profile = p }
  T.eq(report.profiles_csv { u }, 'label,model,eval,tap,eta,median,lo,hi,mean\n'
    .. '"a,""b""",m,noise:2@0,fc1,0.1,1,0.9,1.1,1\n"a,""b""",m,noise:2@0,fc1,1,nan,nan,nan,nan\n')
  local lines = {}
  for l in report.descriptors_csv({ u }):gmatch("[^\n]+") do lines[#lines + 1] = l end
  T.eq(#lines, 2 + #srgeo.profile.descriptor_names, "header, one row per descriptor, then ‖J‖_F")
  T.eq(lines[2], '"a,""b""",m,noise:2@0,fc1,plateau,1.5,nan,nan')
  T.truthy(lines[#lines]:find('^"a,""b""",m,noise:2@0,fc1,jacobian_fro,3,'), lines[#lines])
  T.eq(report.jacobian_fro(p).value, 3, "median of the per-image ‖J‖_F")
  T.eq(report.command("bump", { "--model", "a b", "--eval", "noise:4@0" }),
    "srgeo bump --model 'a b' --eval noise:4@0")
  T.eq(E.descriptor_table, report.descriptor_table, "srgeo.experiment re-exports the report")
end)

T.test("models: shipped models listed by the registry; help lists them without srgeo.experiment", function()
  local f = setup()
  local out = sh("SRGEO_SHIPPED=" .. f.ship .. " " .. exe() .. [[ -e 'print(table.concat(srgeo.models.shipped(), " "))
print(srgeo.help.text_of("models"):match("Shipped models here: [^\n]*"))
print(package.loaded["srgeo.experiment"] == nil and "experiment not loaded" or "experiment loaded")']])
  T.truthy(out:find("tiny tiny_pgd_eps0.5 tiny_random_labels tiny_robust\n", 1, true), out)
  T.truthy(out:find("Shipped models here: tiny, tiny_pgd_eps0.5, tiny_random_labels, tiny_robust.", 1, true), out)
  T.truthy(out:find("experiment not loaded", 1, true), out)
  T.eq(E.shipped, models.shipped)
end)

-- ---------------------------------------------------------------------------
-- scripts end to end

local function out_dir(name) return ROOT .. "/out/" .. name end

-- Two different weight files with the same size and mtime, one after the
-- other at the same path (copied in place, then `touch -d`): the second is
-- recomputed and results.json names its weights.  Units were identified by
-- size and mtime (1 s), and this run said "0 computed, 1 cached" and kept
-- the old weights' hash.  An unchanged file's hash comes from
-- units/file-hashes.json (kept by inode, size, mtime and ctime), not read again.
T.test("cache: different weights with the same size and mtime are a new unit (identity by content)", function()
  local f = setup()
  local out = out_dir("samesize")
  os.execute("rm -rf " .. out .. " && mkdir -p " .. out)
  local w = out .. "/w.safetensors"
  local a, b = read(f.ship .. "/tiny.safetensors"), read(f.ship .. "/tiny_random_labels.safetensors")
  T.eq(#a, #b, "two checkpoints of one architecture")
  T.truthy(a ~= b)
  local function put(bytes)
    local fh = assert(io.open(w, "r+b") or io.open(w, "wb")) -- in place: the same inode
    fh:write(bytes); fh:close()
    T.eq(os.execute("touch -d '2020-01-02 03:04:05' " .. w), true)
  end
  local function weights()
    local r = json.decode(read(out .. "/results.json"))
    return r.units[1].identity.weights
  end
  put(a)
  local st1 = srgeo._stat(w)
  local log, code = script("bump", SMALL .. " --model " .. w .. " --eval noise --out " .. out)
  T.eq(code, 0, log)
  T.truthy(log:find("1 units (1 computed, 0 cached)", 1, true), log)
  local wa = weights()
  T.eq(wa, require("srgeo.identity").weights_hash(srgeo.models.load(f.ship .. "/tiny.safetensors")))
  put(b)
  local st2 = srgeo._stat(w)
  T.eq(st2.size, st1.size); T.eq(st2.mtime, st1.mtime); T.eq(st2.mtime_nsec, st1.mtime_nsec); T.eq(st2.ino, st1.ino)
  log, code = script("bump", SMALL .. " --model " .. w .. " --eval noise --out " .. out)
  T.eq(code, 0, log)
  T.truthy(log:find("1 units (1 computed, 0 cached)", 1, true), log)
  local wb = weights()
  T.truthy(wb ~= wa, "results.json names the new weights")
  T.eq(wb, require("srgeo.identity").weights_hash(srgeo.models.load(f.ship .. "/tiny_random_labels.safetensors")))
  log, code = script("bump", SMALL .. " --model " .. w .. " --eval noise --out " .. out)
  T.truthy(log:find("1 units (0 computed, 1 cached)", 1, true), log)
  -- the hash of the unchanged file comes from the book: a planted value is believed
  local book = json.decode(read(out .. "/units/file-hashes.json"))
  local n, key = 0, nil
  for k, h in pairs(book) do
    n = n + 1
    if h == srgeo._file_hash(w) then key = k end
  end
  T.truthy(key and key:find(":" .. st2.ino .. ":" .. st2.size .. ":", 1, true), "the book keys the file by its status")
  book[key] = "0123456789abcdef"
  util.write_atomic(out .. "/units/file-hashes.json", json.encode(book))
  T.eq(cache.file_id(w, out .. "/units"), "fnv1a64:0123456789abcdef")
end)

T.test("experiment: --eval takes an image folder, loaded at the model's input shape", function()
  local dir = ROOT .. "/evalimages"
  os.execute("rm -rf " .. dir .. " && mkdir -p " .. dir)
  for i = 1, 3 do srgeo.image.save(dir .. "/im" .. i .. ".png", srgeo.rand({ 1, 3, 20, 24 }, i)) end
  local es = E.parse_eval(dir .. "/:2@1")
  T.eq(es.folder, dir); T.eq(es.n, 2); T.eq(es.seed, 1); T.eq(es.label, "evalimages")
  T.eq(es.key, "folder:" .. dir .. ":2@1")
  T.raises(function() E.parse_eval(ROOT .. "/no_such_folder") end, "no such folder " .. ROOT .. "/no_such_folder")
  local m = srgeo.models.mlp { hidden = { 4 }, input = { 3, 8, 8 } }
  local ds = E.load_eval(dir, { model = m, images = 2 })
  T.eq(#ds, 2)
  T.eq(table.concat(ds:get(1):shape(), ","), "1,3,8,8")
  -- end to end: a script profiles the folder
  local out, code = sh(string.format("%s bump --model 'mlp{hidden={4},input={3,8,8}}@init' --eval %s:3 %s --out %s",
    exe(), dir, SMALL, out_dir("folder")))
  T.eq(code, 0, out)
  T.truthy(out:find("on folder:" .. dir .. ":3@0: 3 images", 1, true), out)
  -- a set that holds fewer images than asked (8 of a folder of 3): every
  -- count printed is the one computed, from the title to the index page
  local o8 = out_dir("folder8")
  out, code = sh(string.format("%s bump --model 'mlp{hidden={4},input={3,8,8}}@init' --eval %s:8 %s --out %s",
    exe(), dir, SMALL, o8))
  T.eq(code, 0, out)
  T.truthy(out:find("on folder:" .. dir .. ":3@0: 3 images", 1, true), out)
  T.truthy(read(o8 .. "/bump.gp"):find("(3 images, seed 0, quick preset)", 1, true), read(o8 .. "/bump.gp"))
  T.truthy(not read(o8 .. "/bump.gp"):find("8 images", 1, true), "the asked-for count is not the title's")
  local r = E.load_results(o8)
  T.eq(r.units[1].n_images, 3); T.eq(r.units[1].eval, "folder:" .. dir .. ":3@0")
  local pr = srgeo.profile.load(r.units[1].json)
  T.eq(pr.identity.eval, "folder:" .. dir .. ":3@0")
  local page = read(require("srgeo.index").write(o8).path)
  T.truthy(page:find("3 images per set", 1, true) and not page:find("8 images per set", 1, true), page)
  -- rerun from the cache: the same counts
  out, code = sh(string.format("%s bump --model 'mlp{hidden={4},input={3,8,8}}@init' --eval %s:8 %s --out %s",
    exe(), dir, SMALL, o8))
  T.truthy(out:find("on folder:" .. dir .. ":3@0: cached", 1, true), out)
  T.truthy(read(o8 .. "/bump.gp"):find("(3 images, seed 0, quick preset)", 1, true), read(o8 .. "/bump.gp"))
end)

T.test("experiment: titles and image counts come from the profiles", function()
  local function prof(n) return { n_images = n } end
  T.eq(E.images_text { prof(8) }, "8 images")
  T.eq(E.images_text { prof(1) }, "1 image")
  T.eq(E.images_text { prof(8), prof(32) }, "8–32 images")
  T.eq(E.images_text {}, nil)
  T.eq(E.eval_key("fmnist-test:32@1", 8), "fmnist-test:8@1")
  local dir = ROOT .. "/keyimages"
  os.execute("mkdir -p " .. dir)
  T.eq(E.eval_key(dir .. ":32", 3), "folder:" .. dir .. ":3@0")
  -- before anything is computed the title says what was asked for, as asked for
  local ex = { images = 32, seed = 0, preset = "quick", units = {} }
  T.eq(E.title("fmnist-test", ex), "r_η on fmnist-test (up to 32 images, seed 0, quick preset)")
  ex.units[1] = { request = "fmnist-test:32@0", profile = prof(8) }
  T.eq(E.title("fmnist-test", ex, "m"), "m: r_η on fmnist-test (8 images, seed 0, quick preset)")
  T.eq(E.title("fmnist-test", ex, nil, nil, { prof(5) }), "r_η on fmnist-test (5 images, seed 0, quick preset)")
end)

T.test("experiment: an evaluation set of other channels than the model's fails naming the sets that fit", function()
  local m = srgeo.models.mlp { hidden = { 4 }, input = { 3, 8, 8 } }
  T.raises(function() E.load_eval("fmnist-test:2", { model = m, model_label = "rgb_mlp" }) end,
    "evaluation set 'fmnist-test:2' has 1-channel images (1x28x28) but model 'rgb_mlp' takes 3-channel inputs (3x8x8); "
    .. "sets that fit: cifar10-test (3x32x32), cifar10-train (3x32x32), a folder of images (--eval path/to/images: "
    .. "loaded at 3x8x8), noise sets")
  -- from a script: the message, no traceback, status 1
  local out, code = sh(string.format("%s bump --model 'mlp{hidden={4},input={3,8,8}}@init' --eval fmnist-test:2 %s --out %s",
    exe(), SMALL, out_dir("channels")))
  T.eq(code, 1, out)
  T.truthy(out:find("model 'mlp@init' takes 3-channel inputs (3x8x8); sets that fit: cifar10-test", 1, true), out)
  T.truthy(not out:find("traceback", 1, true), out)
  -- the same channels pass (sizes may differ: a convolutional model takes any)
  T.eq(#E.load_eval("fmnist-test:1", { shape = { 1, 8, 8 } }), 1)
end)

T.test("experiment: --models takes folders and globs of .safetensors files", function()
  local f = setup()
  local S = E
  local all = S.expand_models { f.ship }
  T.eq(#all, 4, table.concat(all, " "))
  T.eq(all[1], f.ship .. "/tiny.safetensors")
  local r = S.expand_models { "small_vgg", f.ship .. "/tiny_r*.safetensors", f.ship .. "/tiny_pgd_eps?.?.safetensors" }
  T.eq(table.concat(r, " "), "small_vgg " .. f.ship .. "/tiny_random_labels.safetensors " .. f.ship
    .. "/tiny_robust.safetensors " .. f.ship .. "/tiny_pgd_eps0.5.safetensors")
  T.eq(table.concat(S.expand_models { f.ship .. "/tiny_[pr]*" }, " "), f.ship .. "/tiny_pgd_eps0.5.safetensors " .. f.ship
    .. "/tiny_random_labels.safetensors " .. f.ship .. "/tiny_robust.safetensors")
  T.raises(function() S.expand_models { f.ship .. "/*.nothing" } end, "matches no .safetensors file in " .. f.ship)
  T.raises(function() S.expand_models { ROOT .. "/*/tiny.safetensors" } end, "wildcards only in the file name")
  T.raises(function() S.expand_models { ROOT .. "/evalimages" } end, "the folder holds no .safetensors file")
  -- a glob the shell expanded leaves stray arguments: the message says how to pass a list
  local stray = script("zoo", "--models " .. f.ship .. "/tiny.safetensors " .. f.ship .. "/tiny_robust.safetensors")
  T.truthy(stray:find("unexpected argument '" .. f.ship .. "/tiny_robust.safetensors'", 1, true)
    and stray:find("--models takes one value, its items joined by commas (--models a,b), and a glob quoted", 1, true), stray)
  -- a run folder: its checkpoints without the optimiser states
  local ck = S.expand_models { f.run }
  T.eq(#ck, f.n_ckpts)
  for _, p in ipairs(ck) do T.truthy(not p:find("optim_", 1, true), p) end
  -- end to end, quoted as the shell would pass it
  local out, code = script("zoo", "--models '" .. f.ship .. "/tiny_r*.safetensors' --eval noise:2 " .. SMALL .. " --out "
    .. out_dir("glob"))
  T.eq(code, 0, out)
  T.truthy(out:find("[1/2] tiny_random_labels on noise:2@0", 1, true) and out:find("[2/2] tiny_robust on noise:2@0", 1, true), out)
end)

T.test("experiment: results.json keeps empty lists as [] (units, figures, list options)", function()
  local o = cli.parse({ name = "t.lua", options = { { "others", {}, "a list" } } }, {})
  local ex = E.new { out = out_dir("empty"), quiet = true, others = o.others }
  ex.opts.others = o.others
  ex:finish()
  local text = read(out_dir("empty") .. "/results.json")
  T.truthy(text:find('"units": []', 1, true) and text:find('"figures": []', 1, true), text)
  T.truthy(text:find('"others": []', 1, true), text)
end)

T.test("scripts: when stderr is not a terminal, progress comes as periodic lines with an ETA (SRGEO_PROGRESS)", function()
  local run = exe() .. " bump --model 'mlp{hidden={8}}@init' --eval noise:6 " .. SMALL .. " --force --out " .. out_dir("progress")
  local function stderr_of(cmd) return (sh("(" .. cmd .. " 2>&1 >/dev/null)")) end
  local err = stderr_of("SRGEO_PROGRESS=0.000001 " .. run)
  -- one progress for the whole profile: its share of the forecast passes, the ETA of the whole
  -- profile, and the stage (each image of the first stage, then the rungs range auto adds)
  local counts, last_pct = {}, nil
  for l in err:gmatch("profile: [^\n]*") do
    local pct, stage = l:match("^profile: (%d+)%%, [%d.]+s elapsed, ETA [%d.]+s %((.*)%)$")
    T.truthy(pct and tonumber(pct) <= 100, "a progress line: " .. l)
    local k = stage:match("^first stage: image (%d)/6")
    if k then counts[#counts + 1] = tonumber(k) end
    last_pct = tonumber(pct)
  end
  T.eq(#counts, 6, "a line after each image of the first stage:\n" .. err)
  for i = 2, #counts do T.truthy(counts[i] > counts[i - 1], "counts grow:\n" .. err) end
  T.eq(last_pct, 100, "the last line: the whole profile done:\n" .. err)
  T.truthy(not stderr_of("SRGEO_PROGRESS=0 " .. run):find("profile: ", 1, true), "SRGEO_PROGRESS=0: none")
  T.truthy(not stderr_of(run):find("profile: ", 1, true), "default: every 10 s, none in a run this short")
end)

T.test("scripts: train --help states one default for --augment", function()
  local out, code = sh(exe() .. " train --help")
  T.eq(code, 0, out)
  local line = out:match("\n  %-%-augment [^\n]*")
  T.truthy(line, out)
  local n = 0
  for _ in line:gmatch("%b[]") do n = n + 1 end
  T.eq(n, 1, "one bracketed default in: " .. line)
  T.truthy(line:find("[on; off for the random-label and random-data controls]", 1, true), line)
end)

T.test("scripts: every script is a subcommand, documents --help and rejects unknown options", function()
  for _, name in ipairs { "bump", "zoo", "init_vs_trained", "dynamics", "controls", "distributions", "robustness",
                          "layers", "demo", "notebook" } do
    local out, code = sh(exe() .. " " .. name .. " --help")
    T.eq(code, 0, name .. " --help exit status")
    T.truthy(out:find("usage: srgeo " .. name .. " [options]", 1, true), name .. " --help:\n" .. out)
    T.eq(sh(exe() .. " scripts/" .. name .. ".lua --help"), out, "srgeo scripts/" .. name .. ".lua --help: the same")
    T.truthy(out:find("--out", 1, true), name .. " --help lists --out")
    out, code = sh(exe() .. " scripts/" .. name .. ".lua --bogus-option 1")
    T.eq(code, 2, name .. " bad option exit status")
    T.truthy(out:find("unknown option '--bogus-option'", 1, true) and out:find("valid options", 1, true), out)
  end
end)

T.test("bump.lua: trained + twin; rerun reuses cached units; --force and new options recompute", function()
  local out = out_dir("bump")
  local log, code = script("bump", SMALL .. " --model tiny --twin --eval noise --out " .. out)
  T.eq(code, 0, log)
  check_results(out, { "bump" }, 2)
  T.truthy(log:find("peak η", 1, true), "prints the descriptor table")
  -- titles are literal text (noenhanced): names appear as typed, not escaped
  -- (the one backslash: the line break before the models, plot.about)
  local title = read(out .. "/bump.gp"):match("\nset title (.-)\n")
  T.truthy(title and title:find("tiny: trained vs random init: r_η on noise (4 images, seed 0, ", 1, true)
    and title:find("noenhanced", 1, true) and title:find("'.\"\\n\".'tiny, tiny@init' noenhanced", 1, true)
    and not title:gsub('%."\\n"%.', ""):find("\\", 1, true), tostring(title))
  local unit = out .. "/units/tiny__noise_4@0.json"
  local before = read(unit)
  log, code = script("bump", SMALL .. " --model tiny --twin --eval noise --out " .. out)
  T.eq(code, 0, log)
  T.truthy(log:find("[1/2] tiny on noise:4@0: cached", 1, true) and log:find("[2/2] tiny@init on noise:4@0: cached", 1, true), log)
  T.truthy(log:find("2 units (0 computed, 2 cached)", 1, true), log)
  T.eq(read(unit), before, "cached unit untouched")
  check_results(out, { "bump" }, 2)
  log = script("bump", SMALL .. " --model tiny --twin --eval noise --out " .. out .. " --force")
  T.truthy(log:find("2 units (2 computed, 0 cached)", 1, true), log)
  log = script("bump", SMALL:gsub("--directions 16", "--directions 8") .. " --model tiny --eval noise --out " .. out
    .. " --title 'tiny_net^2 {x}'")
  T.truthy(log:find("options or model changed", 1, true) and log:find("1 units (1 computed, 0 cached)", 1, true), log)
  T.truthy(read(out .. "/bump.gp"):find("\nset title 'tiny_net^2 {x}'.\"\\n\".'tiny on noise, 4 images' noenhanced\n", 1, true),
    "--title verbatim, then the model, set and count:\n" .. read(out .. "/bump.gp"))
end)

T.test("zoo.lua and init_vs_trained.lua", function()
  local out = out_dir("zoo")
  local log, code = script("zoo", SMALL .. " --models tiny,tiny@init,'mlp{hidden={8},input={1,8,8}}@init' --eval noise --out " .. out)
  T.eq(code, 0, log)
  check_results(out, { "zoo", "zoo_peak_eta", "zoo_peak_height" }, 3)
  out = out_dir("init_vs_trained")
  log, code = script("init_vs_trained", SMALL .. " --models tiny,tiny_pgd_eps0.5 --eval noise --permutations 50 --out " .. out)
  T.eq(code, 0, log)
  local r = check_results(out, { "init_vs_trained", "init_vs_trained_peak" }, 4)
  local c = r.extra.compare.tiny
  T.truthy(c and c.p.curve > 0 and c.p.curve <= 1, "permutation p-value in (0, 1]")
  T.truthy(read(out .. "/summary.txt"):find("tiny: trained vs init", 1, true))
end)

T.test("dynamics.lua: checkpoints of a run, heatmap and descriptors vs step", function()
  local f = setup()
  local out = out_dir("dynamics")
  local log, code = script("dynamics", SMALL .. " --run " .. f.run .. " --max-checkpoints 4 --eval noise --out " .. out)
  T.eq(code, 0, log)
  local r = check_results(out, { "dynamics", "dynamics_profiles", "dynamics_peak", "dynamics_peak_eta", "dynamics_jacobian" }, 4)
  T.eq(r.extra.steps[1], "0", "first checkpoint is step 0")
  T.eq(r.units[1].label, "step 0")
  -- r > 0 is a ratio: the heatmap's colours run on a log scale centred at 1
  local gp = read(out .. "/dynamics.gp")
  local lo, hi = gp:match("set cbrange %[([%d.e+-]+):([%d.e+-]+)%]")
  T.truthy(gp:find("set logscale cb", 1, true) and lo and hi, gp)
  T.close(tonumber(lo) * tonumber(hi), 1, 1e-6, "cbrange symmetric about 1 in log")
  T.truthy(gp:find("set title 'r_η on noise (4 images, seed 0, quick preset)'", 1, true), "heatmap titled")
  -- every figure of the run names the checkpoints it was measured on (plot.about; lines and heatmap: from = ps)
  for _, f in ipairs { "dynamics", "dynamics_profiles", "dynamics_jacobian" } do
    local t = read(out .. "/" .. f .. ".gp"):match("\nset title ([^\n]*)")
    T.truthy(t and t:find("'.\"\\n\".'4 models", 1, true), f .. ": " .. tostring(t))
  end
  -- the checkpoints' overlay in an ordered palette: the first curve dark violet, then along viridis
  local colours = {}
  for c in read(out .. "/dynamics_profiles.gp"):gmatch('with linespoints [^\n]-lc rgb "(#%x+)"') do colours[#colours + 1] = c end
  T.eq(#colours, 4)
  T.eq(colours[1], "#440154")
  for i = 1, 4 do T.eq(colours[i], srgeo.plot._ordered_color(i, 4)) end
  -- no checkpoint of the tiny run has a bump: its peak charts are tables in the summary
  T.truthy(read(out .. "/summary.txt"):find("dynamics_peak: 0 of 4 peak_height defined (fewer than 2: a table, not a chart)",
    1, true), "descriptor vs step as a table")
end)

T.test("controls.lua and distributions.lua (with two-sample tests)", function()
  local out = out_dir("controls")
  local log, code = script("controls", SMALL .. " --models tiny,tiny_random_labels --evals noise,noise-pink --out " .. out)
  T.eq(code, 0, log)
  check_results(out, { "controls", "controls_peak" }, 4)
  out = out_dir("distributions")
  log, code = script("distributions", SMALL .. " --model tiny --evals noise,noise-pink,noise-gaussian:3 --others tiny@init"
    .. " --permutations 50 --out " .. out)
  T.eq(code, 0, log)
  local r = check_results(out, { "distributions", "distributions_peak", "encoders" }, 4)
  local c = r.extra.compare["noise vs noise-pink"]
  T.truthy(c and c.p.curve > 0 and c.p.curve <= 1 and c.permutations == 50, "compare result stored")
  T.truthy(read(out .. "/summary.txt"):find("noise vs noise-gaussian", 1, true))
end)

T.test("robustness.lua: ε from names and explicit; layers.lua: one panel per tap", function()
  local out = out_dir("robustness")
  local log, code = script("robustness", SMALL .. " --models tiny,tiny_pgd_eps0.5 --eval noise --out " .. out)
  T.eq(code, 0, log)
  local r = check_results(out, { "robustness", "robustness_peak_eta", "robustness_jacobian", "robustness_jacobian_vs_eps" }, 2)
  T.eq(r.extra.eps[1], 0); T.eq(r.extra.eps[2], 0.5)
  -- the tiny models have no bump: the peak η chart is a table in the summary instead
  T.truthy(not io.open(out .. "/robustness_peak_eta.png"), "no chart of no value")
  T.truthy(read(out .. "/summary.txt"):find("robustness_peak_eta: 0 of 2 peak_eta defined (fewer than 2: a table, not a chart)",
    1, true), read(out .. "/summary.txt"))
  T.truthy(read(out .. "/robustness_jacobian.gp"):find("set title '‖J‖F on noise (preset quick)'.\"\\n\".'tiny, tiny_pgd_eps0.5, 4 images'",
    1, true), read(out .. "/robustness_jacobian.gp"))
  -- one quantity per figure, with its intervals: ‖J‖_F against ε, lo and hi columns drawn as bars
  local gp, dat = read(out .. "/robustness_jacobian_vs_eps.gp"), read(out .. "/robustness_jacobian_vs_eps.dat")
  T.truthy(dat:find("# x y lo hi", 1, true), dat)
  T.truthy(gp:find("with vectors", 1, true), gp)
  T.truthy(not gp:find("value", 1, true), "no axis called value:\n" .. gp)
  -- its own default ladder: 3.5 decades (log10 η -1 .. 2.5 at 224²), past the paper preset's top,
  -- then range auto's rungs at the same spacing
  local pr = srgeo.profile.load(r.units[1].json)
  local sc = pr.scales
  T.close(math.log(sc[#sc - pr.range.added] / sc[1], 10), 3.5, 1e-9, "robustness ladder span")
  T.eq(pr.range.refined, 0)
  log, code = script("robustness", SMALL .. " --models tiny,tiny@init --eps 0 --eval noise --out " .. out)
  T.eq(code, 2, "mismatched --eps count")
  out = out_dir("layers")
  log, code = script("layers", SMALL .. " --model 'mlp{hidden={16,8},input={1,8,8}}@init' --eval noise --out " .. out)
  T.eq(code, 0, log)
  r = check_results(out, { "layers", "layers_overlay" }, 2)
  T.eq(r.units[1].tap, "relu1"); T.eq(r.units[2].tap, "features")
end)

T.test("experiment library: the same unit from Lua, cached across experiment objects", function()
  setup()
  local out = out_dir("lib")
  local env_ship = fixtures.ship
  local m = E.load_model(env_ship .. "/tiny.safetensors")
  T.truthy(m ~= nil)
  local ex = E.new { out = out, images = 3, directions = 8, nscales = 7, bootstrap = 20, quiet = true }
  local p = ex:profile(env_ship .. "/tiny.safetensors", "noise")
  T.eq(p.n_images, 3)
  local ex2 = E.new { out = out, images = 3, directions = 8, nscales = 7, bootstrap = 20, quiet = true }
  local q, rec = ex2:profile(env_ship .. "/tiny.safetensors", "noise")
  T.eq(rec.cached, true)
  for s = 1, #p.scales do T.close(q.median[s], p.median[s], 1e-12) end
  local txt = ex2:finish()
  T.truthy(txt:find("1 units (0 computed, 1 cached)", 1, true), txt)
  T.truthy(E.descriptor_table({ p }):find("‖J‖_F", 1, true))
end)

T.test("round trips: a fresh unit, its JSON reloaded and the resumed (cached) unit agree field by field", function()
  setup()
  local out = out_dir("roundtrip")
  os.execute("rm -rf " .. out)
  local model = fixtures.ship .. "/tiny.safetensors"
  local function run()
    local ex = E.new { out = out, images = 8, preset = "sequential", directions = 64, nscales = 7, bootstrap = 50,
                       quiet = true, refine = true }
    local p, rec = ex:profile(model, "noise")
    ex:finish()
    return p, rec, report.load_results(out)
  end
  local fresh, rec1, res1 = run()
  T.eq(rec1.cached, false)
  -- everything a fresh profile has: the shape call and its evidence, the
  -- per-image calls, descriptors with CIs (and reasons), the range, the
  -- estimator and its stopping rules, the identity
  for _, k in ipairs { "shape", "image_shapes", "descriptors", "range", "estimator", "identity", "moments", "closed_by",
                       "rung_directions", "noise", "noise_energy", "noise_jvp", "steps", "options" } do
    T.truthy(fresh[k] ~= nil, "fresh profile has " .. k)
  end
  T.truthy(fresh.shape.text and fresh.shape.alpha == 0.05, "the shape test says what it is")
  local reloaded = srgeo.profile.load(rec1.json)
  local resumed, rec2, res2 = run()
  T.eq(rec2.cached, true)
  T.same(reloaded, fresh, "reloaded")
  T.same(resumed, fresh, "resumed")
  T.eq(getmetatable(resumed), getmetatable(fresh))
  T.truthy(resumed:summary():find("shape: ", 1, true), "a reloaded profile still summarises")
  -- results.json of the resumed run: the same units, but for the cache flag and timing
  local a, b = res1.units[1], res2.units[1]
  a.cached, b.cached = nil, nil
  T.same(b, a, "results.json unit")
end)

-- ---------------------------------------------------------------------------
-- help and examples

-- What help(x) prints, captured.
local function quietly(fn, ...)
  local w, buf = io.write, {}
  io.write = function(...) for i = 1, select("#", ...) do buf[#buf + 1] = tostring((select(i, ...))) end end
  local ok, r = pcall(fn, ...)
  io.write = w
  if not ok then error(r, 0) end
  T.eq(r, nil, "help returns nothing (the REPL would print it twice)")
  return table.concat(buf)
end

T.test("help: topics, library tables, layers, functions' doc comments; srgeo.examples()", function()
  local t = quietly(srgeo.help)
  for _, topic in ipairs { "tensors", "nn", "models", "profile", "plot", "data", "train", "scripts", "shell" } do
    T.truthy(t:find("\n  " .. topic .. " ", 1, true), "topic " .. topic)
  end
  T.truthy(quietly(srgeo.help, srgeo.profile):find("p:summary()", 1, true))
  T.eq(quietly(srgeo.help, "profile"), quietly(srgeo.help, srgeo.profile))
  T.truthy(quietly(srgeo.help, srgeo.nn.conv2d):find("srgeo.nn.conv2d{...}: in_channels, out_channels", 1, true))
  T.truthy(quietly(srgeo.help, srgeo.profile.compare):find("srgeo.profile.compare(p1, p2, opts)\nTwo-sample", 1, true))
  T.truthy(quietly(srgeo.help, "small_resnet"):find("srgeo.models.small_resnet{...}", 1, true))
  T.truthy(quietly(srgeo.help, "no_such_topic"):find("no topic 'no_such_topic'", 1, true))
  T.truthy(quietly(srgeo.help, "onnx"):find("srgeo.models.load(\"effnet.onnx\")", 1, true))
  -- every public table of the library leads to a topic: first every lazy
  -- part under lua/srgeo/ (srgeo[name] loads it; non-parts give nil)
  local ls = io.popen("ls lua/srgeo")
  for f in ls:lines() do local _ = srgeo[f:match("^(.-)%.lua$") or ""] end
  ls:close()
  T.truthy(rawget(srgeo, "mpi") and rawget(srgeo, "identity"), "the lazy parts were loaded")
  for k, v in pairs(srgeo) do
    if type(v) == "table" and type(k) == "string" and not k:match("^_") then
      local text = quietly(srgeo.help, v)
      T.truthy(not text:find("nothing known", 1, true), "help(srgeo." .. k .. ") leads to a topic:\n" .. text:sub(1, 200))
    end
  end
  local listing = quietly(srgeo.examples)
  local found = {}
  for _, e in ipairs(srgeo.help.scripts()) do
    found[e.name] = e.description
    T.truthy(listing:find(e.name .. "%s+" .. e.description:sub(1, 20):gsub("%p", "%%%0")), "listed: " .. e.name)
    -- the whole description, wrapped between words, never cut
    T.truthy(listing:gsub("%s+", " "):find(e.description:gsub("%s+", " "), 1, true), "whole description of " .. e.name)
  end
  for l in listing:gmatch("[^\n]+") do T.truthy(utf8.len(l) <= 78, "srgeo.examples() wraps at 78 columns: " .. l) end
  T.truthy(found.train and found.train:find("optionally ship it with a model card", 1, true),
    "a header comment that continues on a second line is read whole: " .. tostring(found.train))
  for _, s in ipairs { "bump", "zoo", "init_vs_trained", "dynamics", "controls", "distributions",
                       "robustness", "layers", "demo", "notebook", "train" } do
    T.truthy(found[s] and #found[s] > 10, "srgeo.examples lists " .. s .. " with a description")
  end
  -- the shell's help() defers to srgeo.help
  local out = sh(exe() .. " -e 'help(srgeo.nn.linear)'")
  T.truthy(out:find("in_features, out_features", 1, true), out)
end)
