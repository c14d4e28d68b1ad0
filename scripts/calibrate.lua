-- calibrate.lua: the statistics behind srgeo's calls, checked by simulation and on real models.
--
--   bump.rates("saturating", {n = 16, reps = 400})      -- how often the shape test calls each class
--   srgeo.profile(m, {x}, {directions = 64, orthogonal = 0 | 64, seed = s})   -- r's spread over seeds
local srgeo = require "srgeo"
local E = require "srgeo.experiment"
local bump = require "srgeo.bump"
local stats = require "srgeo.stats"

local o, ex = E.script({
  name = "calibrate.lua",
  about = "The shape test's error rates and power on simulated evaluation sets of known shape\n"
       .. "(srgeo.bump.rates: false bumps on monotone rises, false rises and falls on flat profiles,\n"
       .. "power on bumps), and orthogonal vs independent directions: the variance of the\n"
       .. "denominator E‖Ju‖² on a linear map, where the ratio is known exactly ((d − k)/(d − 1) for\n"
       .. "blocks of k in d dimensions), and the variance of r per rung over seeds on real models.",
  options = {
    { "reps", 400, "simulated evaluation sets per shape and size" },
    { "sizes", { 8, 16, 32 }, "images per simulated evaluation set" },
    { "seeds", 16, "direction seeds per model and mode (orthogonal vs independent)" },
    { "models", { "small_resnet", "small_resnet@init" }, "models for the variance of r over seeds" },
    { "dirs", 256, "directions (± antipodes) per profile in the variance comparison" },
  },
  examples = {
    "srgeo scripts/calibrate.lua --out out/calibrate",
    "srgeo scripts/calibrate.lua --reps 100 --seeds 8 --models small_resnet --out out/calibrate-quick",
  },
}, { ... }, { out = "out/calibrate" })

-- 1. The shape test on simulated evaluation sets: per-image monotone rises
-- (rise, saturating), bumps, falls and flat profiles with image-to-image
-- spread in height (log-sd 0.8) and location (0.3 decades) and 10%
-- estimation noise per rung.
local t = { { "truth", "images", "bump", "rise", "fall", "edge", "flat", "undetermined" } }
local rates = {}
for _, kind in ipairs(bump.SIMULATED) do
  rates[kind] = {}
  for _, n in ipairs(o.sizes) do
    local r = bump.rates(kind, { n = n, reps = o.reps, amplitude = 0.3, spread = 0.8, shift = 0.3, noise = 0.1,
                                 bootstrap = 400, seed = o.seed + 1, bound = true, alpha = o.alpha })
    rates[kind][tostring(n)] = r
    local row = { kind, tostring(n) }
    for _, c in ipairs(bump.CLASSES) do row[#row + 1] = string.format("%.3f", r[c]) end
    t[#t + 1] = row
    ex:log("shape test: %s, %d images: bump %.3f, rise %.3f, fall %.3f, flat %.3f, undetermined %.3f", kind, n,
      r.bump, r.rise, r.fall, r.flat, r.undetermined)
  end
end
ex:note(string.format("Shape test on %d simulated evaluation sets per row (alpha %.2g; every image's own curve has the "
  .. "row's shape: a bump call on rise/saturating is a false bump, any call but flat/undetermined on flat a false one)",
  o.reps, o.alpha), E.columns(t))
ex:set("shape_rates", rates)

-- 2a. Known answer: the mean JVP energy of a linear map over k directions,
-- independent vs one orthonormal block; Var ratio (d − k)/(d − 1).
local d, k = 64, 32
local lin = srgeo.nn.linear { in_features = d, out_features = 16, seed = 1 }
lin:double()
local x = srgeo.rand({ 1, d }, 1):double()
local function jvar(block)
  local v = {}
  for s = 1, 4 * o.seeds do
    local p = srgeo.profile(lin, { x }, { preset = "quick", directions = k, orthogonal = block, scales = { 1 },
                                          precision = "float64", seed = s, progress = false, noise_directions = 0 })
    v[s] = p.jac_energy[1]
  end
  local sd = stats.sd(v)
  return sd * sd
end
local vi, vo = jvar(0), jvar(k)
local want = (d - k) / (d - 1)
ex:log("linear map, d %d, %d directions: Var(E_J) orthogonal / independent = %.3f (exact %.3f)", d, k, vo / vi, want)
ex:note("Orthogonal vs independent directions, known answer", string.format(
  "linear map %d -> 16, mean ‖Ju‖² over %d directions, %d seeds each: variance ratio orthogonal / independent %.3f "
  .. "(exact (d − k)/(d − 1) = %.3f)", d, k, 4 * o.seeds, vo / vi, want))
ex:set("linear_variance_ratio", { measured = vo / vi, exact = want, d = d, k = k, seeds = 4 * o.seeds })

-- 2b. Real models: the spread of r per rung over direction seeds on one
-- test image, paired JVPs, independent vs orthonormal blocks of `dirs`.
local X = ex:eval_set("fmnist-test:1@0")
local real = {}
for _, spec in ipairs(o.models) do
  local m = ex:model(spec)
  local runs = { iid = {}, orth = {} }
  for mode, block in pairs { iid = 0, orth = math.min(o.dirs, 784) } do
    for s = 1, o.seeds do
      runs[mode][s] = srgeo.profile(m, X, { preset = "quick", directions = o.dirs, orthogonal = block, nscales = 9,
                                            seed = 1000 + s, progress = false, noise_directions = 0 }).per_image[1]
    end
  end
  local rows = { { "eta", "mean r", "sd (independent)", "sd (orthogonal)", "variance ratio" } }
  local ratios = {}
  local scales = srgeo.profile.ladder(784, { preset = "quick", nscales = 9 })
  for s = 1, #scales do
    local a, b = stats.column(runs.iid, s), stats.column(runs.orth, s)
    local sa, sb = stats.sd(a), stats.sd(b)
    ratios[s] = (sb * sb) / (sa * sa)
    rows[#rows + 1] = { string.format("%.3g", scales[s]), string.format("%.4g", stats.mean(a)), string.format("%.3g", sa),
                        string.format("%.3g", sb), string.format("%.2f", ratios[s]) }
  end
  real[spec] = ratios
  ex:note(string.format("r over %d seeds, %s, one test image, %d directions ± (paired): independent vs orthonormal blocks",
    o.seeds, spec, o.dirs), E.columns(rows))
  ex:log("%s: variance ratios per rung %s", spec, table.concat((function()
    local t2 = {}
    for i, v in ipairs(ratios) do t2[i] = string.format("%.2f", v) end
    return t2
  end)(), " "))
end
ex:set("real_variance_ratios", real)
ex:finish({})
