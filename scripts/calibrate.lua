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
-- Cheap (a 64-input map), so many seeds: a variance ratio over n seeds
-- has a relative spread of about 2/sqrt(n/2).
local nlin = 25 * o.seeds
local function energies(block)
  local v = {}
  for s = 1, nlin do
    local p = srgeo.profile(lin, { x }, { preset = "quick", directions = k, orthogonal = block, scales = { 1 },
                                          precision = "float64", seed = s, progress = false, noise_directions = 0 })
    v[s] = { p.jac_energy[1] }
  end
  return v
end
local ei, eo = energies(0), energies(k)
local function ratio(a, b) return stats.sd(stats.column(b, 1)) ^ 2 / stats.sd(stats.column(a, 1)) ^ 2 end
local bi = stats.bootstrap(ei, function(v) return v end, 400, o.seed + 1)
local bo = stats.bootstrap(eo, function(v) return v end, 400, o.seed + 2)
local lb = {}
for b = 1, #bi do lb[b] = ratio(bi[b], bo[b]) end
local lin_ratio = { measured = ratio(ei, eo), lo = stats.quantile(lb, 0.025), hi = stats.quantile(lb, 0.975),
                    exact = (d - k) / (d - 1), d = d, k = k, seeds = nlin }
ex:log("linear map, d %d, %d directions: Var(E_J) orthogonal / independent = %.3f [%.3f, %.3f] (exact %.3f)", d, k,
  lin_ratio.measured, lin_ratio.lo, lin_ratio.hi, lin_ratio.exact)
ex:note("Orthogonal vs independent directions, known answer", string.format(
  "linear map %d -> 16, mean ‖Ju‖² over %d directions, %d seeds each: variance ratio orthogonal / independent %.3f "
  .. "[%.3f, %.3f] (95%% bootstrap over seeds; exact (d − k)/(d − 1) = %.3f)", d, k, nlin, lin_ratio.measured,
  lin_ratio.lo, lin_ratio.hi, lin_ratio.exact))
ex:set("linear_variance_ratio", lin_ratio)

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
  -- One rung's ratio over 16 seeds has a wide sampling spread (F(15, 15):
  -- 0.35-2.9 at 95%), so the rungs are pooled: the geometric mean of the
  -- per-rung ratios, with a bootstrap CI over seeds (each mode resampled).
  local function pooled(iid, orth)
    local sum, n = 0, 0
    for s = 1, #scales do
      local va, vb = stats.sd(stats.column(iid, s)) ^ 2, stats.sd(stats.column(orth, s)) ^ 2
      if va > 0 and vb > 0 then sum, n = sum + math.log(vb / va), n + 1 end
    end
    return n > 0 and math.exp(sum / n) or 0 / 0
  end
  local ri = stats.bootstrap(runs.iid, function(v) return v end, 400, o.seed + 3)
  local ro = stats.bootstrap(runs.orth, function(v) return v end, 400, o.seed + 4)
  local pb = {}
  for b = 1, #ri do pb[b] = pooled(ri[b], ro[b]) end
  local pool = { value = pooled(runs.iid, runs.orth), lo = stats.quantile(pb, 0.025), hi = stats.quantile(pb, 0.975) }
  real[spec] = { per_rung = ratios, pooled = pool }
  ex:note(string.format("r over %d seeds, %s, one test image, %d directions ± (paired): independent vs orthonormal blocks; "
    .. "pooled over rungs (geometric mean of the ratios) %.2f [%.2f, %.2f] (95%% bootstrap over seeds)",
    o.seeds, spec, o.dirs, pool.value, pool.lo, pool.hi), E.columns(rows))
  ex:log("%s: variance ratios per rung %s; pooled %.2f [%.2f, %.2f]", spec, table.concat((function()
    local t2 = {}
    for i, v in ipairs(ratios) do t2[i] = string.format("%.2f", v) end
    return t2
  end)(), " "), pool.value, pool.lo, pool.hi)
end
ex:set("real_variance_ratios", real)
ex:finish({})
