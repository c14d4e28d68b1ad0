-- bench_noise.lua: p.noise, the float32 noise bound of r, against the
-- actual float32 error of r measured by an independent float64 run of the
-- whole direction set (same directions, same rungs, precision = "float64").
-- A case is MODEL:EVAL:PRESET[:DIRECTIONS]; each runs at every --threads
-- count, on --images images and at --rungs (indices into the preset's
-- ladder: the tiny-η rung 1, where float32 cancellation dominates, and a
-- mid-η rung).  Per case and thread count: the largest actual error, the
-- smallest bound/actual ratio over images and rungs, and the violations
-- (bound < actual: expected in about 5% of (image, rung) pairs at the 95%
-- level, fewer where the bound's t quantile and triangle inequality are
-- loose).  Also the extra forwards the bound costs (float64 rows) against
-- the run's own.
--   build/srgeo tests/bench/bench_noise.lua [--cases ...] [--images 4] [--threads 1,2] [--rungs 1,9]
local srgeo = require "srgeo"
local cli = require "srgeo.cli"
local E = require "srgeo.experiment"

local o = cli.run({
  name = "bench_noise.lua",
  about = "p.noise (95% bound on r's float32 error) vs float64 over the whole direction set",
  options = {
    { "cases", "small_resnet:fmnist-test:paper,resnet18_cifar@init:noise:paper,small_vgg:fmnist-test:paper,"
      .. "vgg16_cifar@init:noise:paper:256,small_vgg:fmnist-test:quick", "MODEL:EVAL:PRESET[:DIRECTIONS],..." },
    { "images", 4, "images per case" },
    { "threads", "1,2", "thread counts" },
    { "rungs", "1,9", "rungs of the preset's ladder (1: tiny η)" },
    { "noise_directions", 0, "directions checked in float64 (0: the preset's)" },
  },
}, { ... })

local function list(s)
  local t = {}
  for v in tostring(s):gmatch("[^,]+") do t[#t + 1] = v end
  return t
end

local rungs = {}
for _, v in ipairs(list(o.rungs)) do rungs[#rungs + 1] = math.tointeger(tonumber(v)) end
local total = { pairs = 0, violations = 0 }
print(string.format("OPENBLAS_CORETYPE=%s", os.getenv("OPENBLAS_CORETYPE") or "<unset>"))
for _, case in ipairs(list(o.cases)) do
  local mspec, espec, preset, ndirs = case:match("^([^:]+):([^:]+):([^:]+):?(%d*)$")
  local m = E.load_model(mspec)
  local X = E.load_eval(string.format("%s:%d@0", espec, o.images), { model = m })
  local d = 1
  for _, v in ipairs(E.input_shape(m)) do d = d * v end
  local ladder = srgeo.profile.ladder(d, { preset = preset })
  local scales = {}
  for k, s in ipairs(rungs) do scales[k] = ladder[s] end
  local po = { preset = preset, scales = scales, progress = false, bootstrap = 1 }
  if ndirs ~= "" then po.directions = tonumber(ndirs) end
  if o.noise_directions > 0 then po.noise_directions = o.noise_directions end
  local base
  for _, th in ipairs(list(o.threads)) do
    srgeo.threads(tonumber(th))
    local t0 = srgeo._clock()
    local p32 = srgeo.profile(m, X, po)
    local t32 = srgeo._clock() - t0
    local f32 = p32.forwards
    local q = {}
    for k, v in pairs(po) do q[k] = v end
    q.precision, q.noise_directions = "float64", 0
    local p64 = srgeo.profile(m, X, q)
    m:float()
    -- the bound's own cost: the same run without the check (once per case)
    q.precision = "float32"
    base = base or srgeo.profile(m, X, q).forwards
    local worst, min_ratio, viol, n, lines = 0, math.huge, 0, 0, {}
    for i = 1, #X do
      for s = 1, #scales do
        local m32, m64 = p32.moments[i][s], p64.moments[i][s]
        -- r from the moments: defined also where the rung was discarded
        local r32, r64 = m32.d_mean / m32.j_mean, m64.d_mean / m64.j_mean
        local actual = math.abs(r32 / r64 - 1)
        local bound = p32.noise[i][s]
        n = n + 1
        worst = math.max(worst, actual)
        if actual > 0 then min_ratio = math.min(min_ratio, bound / actual) end
        if not (bound >= actual) then viol = viol + 1 end
        lines[#lines + 1] = string.format("      image %d rung %d (η %.3g): bound %.3g  actual %.3g  energy bound %.3g  "
          .. "actual %.3g%s", i, rungs[s], scales[s], bound, actual, p32.noise_energy[i][s],
          math.abs(m32.d_mean / m64.d_mean - 1), bound >= actual and "" or "  VIOLATION")
      end
    end
    total.pairs, total.violations = total.pairs + n, total.violations + viol
    print(string.format("%s threads %s: %d (image, rung) pairs, %d base directions, largest actual error %.3g, "
      .. "smallest bound/actual %.3g, violations %d; the bound's float64 rows %d = %.1f%% of the run's %d (%.0f s)",
      case, th, n, p32.options.directions, worst, min_ratio, viol, f32 - base, 100 * (f32 - base) / base, base, t32))
    for _, l in ipairs(lines) do print(l) end
  end
end
print(string.format("total: %d (image, rung) pairs, %d violations of p.noise >= actual", total.pairs, total.violations))
