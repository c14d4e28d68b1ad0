-- bump_spec.lua: srgeo.bump, the shape test behind every bump call, on
-- synthetic profiles with known answers and on simulated evaluation sets
-- (false-bump rate and power at alpha = 0.05), and the descriptors it
-- leaves defined or not.
local T = ...
local srgeo = require "srgeo"
local stats = require "srgeo.stats"
local B = require "srgeo.bump"

-- n images around a curve: r_i,s = curve_s · (1 + 0.01·noise), seeded.
local function around(curve, n, seed)
  local u = stats.rng(seed or 1)
  local rows = {}
  for i = 1, n do
    local r = {}
    for s, v in ipairs(curve) do r[s] = v * (1 + 0.02 * (u() - 0.5)) end
    rows[i] = r
  end
  return rows
end

local function scales_of(n)
  local s = {}
  for i = 1, n do s[i] = 10 ^ (-2 + 0.25 * (i - 1)) end
  return s
end

-- The shape of a synthetic profile through srgeo.profile.aggregate (the
-- same path a real profile takes).
local function shape_of(curve, opts)
  opts = opts or {}
  local p = srgeo.profile.aggregate { scales = scales_of(#curve), per_image = around(curve, opts.n or 12, opts.seed),
    options = { ci = 0.95, bootstrap = 300, seed = 0, alpha = 0.05 }, input_dim = opts.d or 1e9 }
  return p.shape, p
end

T.test("bump.classify: known shapes over images (bump, rise, edge, fall, flat, undetermined)", function()
  local cases = {
    { { 1, 1, 1, 1.5, 3, 2, 1.2, 1 }, "bump" },
    { { 1, 1, 1, 0.97, 0.95, 1.5, 3, 2, 1.2 }, "bump", "a dip before the bump does not make it a fall" },
    { { 1, 1, 1, 1.2, 1.8, 3, 5, 9 }, "edge", "still rising at the top, ladder short of the bound" },
    { { 1, 1, 1, 1.3, 2, 3, 3, 3 }, "edge", "rising, then level: no decay seen" },
    { { 1, 1, 1, 0.9, 0.6, 0.36, 0.1 }, "fall" },
    { { 1, 1, 1, 0.9, 0.6, 0.3, 0.1, 0.2 }, "fall", "a partial recovery that stays below the plateau" },
    { { 1, 1, 1, 0.9, 0.7, 1, 2.4, 5 }, "edge", "a dip, then a rise: no decay after the rise" },
    { { 1, 1, 1, 1, 1, 1, 1, 1 }, "flat" },
    { { 1, 0 / 0 }, "undetermined", "too few valid rungs" },
  }
  for _, c in ipairs(cases) do
    local sh = shape_of(c[1])
    T.eq(sh.class, c[2], c[3] or table.concat(c[1], ","))
    T.truthy(sh.text:find(c[2], 1, true) == 1, sh.text)
    T.truthy(sh.text:find("95% bounds", 1, true) or c[2] == "undetermined", sh.text)
  end
  -- the same rise reaching the physical bound (per-pixel RMS >= 1) is a rise
  local sh = shape_of({ 1, 1, 1, 1.2, 1.8, 3, 5, 9 }, { d = 0.01 }) -- top η 0.56 / √0.01 > 1
  T.eq(sh.class, "rise")
  -- the evidence is numbers: the bump's rise and decay with their bounds
  sh = shape_of({ 1, 1, 1, 1.5, 3, 2, 1.2, 1 })
  T.eq(sh.peak.rung, 5)
  T.truthy(sh.rise.lo > 0 and sh.decay.hi < 0, "bounds exclude 0")
  T.eq(sh.decay.from, 5)
  T.eq(sh.alpha, 0.05)
  T.eq(sh.n, 12)
  -- wide images: the same bump over 2 noisy images is not called
  local p = srgeo.profile.aggregate { scales = scales_of(8), options = { ci = 0.95, bootstrap = 300, seed = 0 },
    per_image = { { 1, 1, 1, 1.5, 3, 2, 1.2, 1 }, { 1, 1, 1, 0.7, 0.5, 0.6, 0.9, 1 } } }
  T.truthy(p.shape.class ~= "bump", p.shape.text)
end)

T.test("bump: the plateau is r at the lowest valid rung, one definition in the shape test and the descriptor", function()
  -- r already curving at rungs 2-3 (as small_vgg's does): a mean over the
  -- first rungs would average in the start of the rise
  local sh, p = shape_of({ 1, 1.01, 1.03, 1.2, 1.8, 3, 5, 9 })
  T.eq(sh.plateau.rungs, 1)
  T.eq(sh.plateau.value, p.median[1])
  T.eq(p.descriptors.plateau.value, sh.plateau.value)
  T.eq(B.descriptors(scales_of(4), { 0 / 0, 1.002, 1.05, 2 }).plateau, 1.002, "NaN rungs skipped")
end)

-- Simultaneous bounds widened by each rung's distance bound to a float64
-- evaluation (t.errors): a small rise from the small-eta end is called only
-- if it clears them, and without any float64 check it is undetermined.
T.test("bump.classify: checked in float64, a rise must clear the float error; unchecked, a rise from the first rung is not called", function()
  local scales, rows = scales_of(8), {}
  local u = stats.rng(5)
  for i = 1, 16 do
    local r = {}
    for s = 1, 8 do r[s] = 1 + 0.004 * (s - 1) + 1e-4 * (u() - 0.5) end
    rows[i] = r
  end
  local function call(E)
    local errors
    if E then errors = {}; for s = 1, 8 do errors[s] = E end end
    return B.classify { scales = scales, rows = rows, bootstrap = 300, seed = 1, bound = true, errors = errors }
  end
  T.eq(call().class, "rise", "no check asked for")
  local small = call(0.003)
  T.eq(small.class, "rise", small.text)
  T.truthy(small.text:find("checked in float64: each bound widened", 1, true), small.text)
  T.truthy(small.rise.lo > 0 and small.float64.plateau == 0.003, small.text)
  local big = call(0.02) -- wider than the whole rise (0.028): nothing is called raised
  T.truthy(big.class ~= "rise" and big.class ~= "edge", big.text)
  local none = call(0 / 0)
  T.eq(none.class, "undetermined", none.text)
  T.truthy(none.text:find("no float64 check", 1, true), none.text)
  -- unchecked, a rise that starts later than the first rung after the plateau stands
  for i = 1, 16 do rows[i][2], rows[i][3] = rows[i][1], rows[i][1] end
  local later = call(0 / 0)
  T.eq(later.class, "rise", later.text)
  T.truthy(later.text:find("not checked in float64", 1, true), later.text)
end)

T.test("profile band: smooth in each image's estimate (smoothed bootstrap, shared with the shape test)", function()
  -- 32 images spread like a normal sample over three flat rungs; then the
  -- image nearest the band's lower end moves by a tenth of the band.  A
  -- plain bootstrap puts that end on one image's value, so it would move by
  -- the whole step (or half of it): here it must move by less than a
  -- quarter.  The band is also the shape test's resamples: its ends are
  -- their pointwise quantiles.
  local n, rows = 32, {}
  for i = 1, n do
    local v = 2 + 0.5 * require("srgeo.stats").qnorm((i - 0.5) / n)
    rows[i] = { v, v, v }
  end
  local function band(r)
    local p = srgeo.profile.aggregate { scales = scales_of(3), per_image = r,
      options = { ci = 0.95, bootstrap = 1000, seed = 3 } }
    return p.lo[2], p.hi[2], p
  end
  local lo, hi, p = band(rows)
  T.truthy(lo < p.median[2] and p.median[2] < hi, "median inside its band")
  local near, dist = 1, math.huge
  for i = 1, n do
    if math.abs(rows[i][2] - lo) < dist then near, dist = i, math.abs(rows[i][2] - lo) end
  end
  local step = 0.1 * (hi - lo)
  local moved = {}
  for i = 1, n do moved[i] = { rows[i][1], rows[i][2] + (i == near and step or 0), rows[i][3] } end
  local lo2 = band(moved)
  T.truthy(math.abs(lo2 - lo) < 0.25 * step, string.format("band end moved %.3g for a step of %.3g", lo2 - lo, step))
  local boots = B.smoothed_bootstrap(rows, 1000, 3 + 29)
  local col = {}
  for b = 1, #boots do col[b] = boots[b][2] end
  T.close(lo, require("srgeo.stats").quantile(col, 0.025), 1e-12, "band = the shape test's resamples")
end)

T.test("bump.classify: one image from its rungs' standard errors", function()
  local scales = scales_of(8)
  local r = { 1, 1, 1, 1.5, 3, 2, 1.2, 1 }
  local se = {}
  for s, v in ipairs(r) do se[s] = 0.02 * v end
  T.eq(B.classify { scales = scales, values = r, se = se }.class, "bump")
  for s, v in ipairs(r) do se[s] = 2 * v end
  T.eq(B.classify { scales = scales, values = r, se = se }.class, "undetermined", "SEs too wide to tell")
end)

T.test("bump.rates: false bumps on monotone rises stay within alpha = 0.05; power on bumps (simulation)", function()
  -- 100 simulated evaluation sets of 16 images each; every image's own
  -- curve rises monotonically (saturating: rises, then stays level, the
  -- hardest case for a decay test), with image-to-image spread in height
  -- and location and 10% estimation noise per rung
  local o = { n = 16, reps = 100, amplitude = 0.3, spread = 0.8, shift = 0.3, noise = 0.1, bootstrap = 200, seed = 3 }
  for _, kind in ipairs { "rise", "saturating" } do
    local r = B.rates(kind, o)
    T.truthy(r.bump <= 0.05, string.format("%s: false-bump rate %.3f", kind, r.bump))
  end
  -- flat profiles: any call but flat or undetermined is false; the bounds
  -- are joint over all contrasts, so at most about alpha (here with the
  -- simulation's own error; pointwise bounds would give about 20%)
  local f = B.rates("flat", o)
  local false_calls = f.bump + f.rise + f.fall + f.edge
  print(string.format("     flat profiles: %.2f false calls (bump %.2f, edge %.2f, fall %.2f)", false_calls, f.bump, f.edge, f.fall))
  T.truthy(false_calls <= 0.10, "false calls on flat profiles " .. false_calls)
  local r = B.rates("bump", o)
  print(string.format("     power at 16 images (amplitude 0.3, 10%% noise): %.2f bump, %.2f undetermined", r.bump,
    r.undetermined))
  T.truthy(r.bump >= 0.3, "power " .. r.bump)
  o.amplitude, o.noise, o.spread, o.shift = 1, 0.05, 0.3, 0.1
  r = B.rates("bump", o)
  T.truthy(r.bump >= 0.9, "power on a clear bump " .. r.bump)
  -- one image at a time, from its rungs' SEs
  o.per_image, o.reps, o.amplitude, o.noise, o.spread, o.shift = true, 10, 0.3, 0.1, 0.8, 0.3
  r = B.rates("saturating", o)
  T.truthy(r.bump <= 0.05, string.format("per image: false-bump rate %.3f", r.bump))
  r = B.rates("bump", o)
  T.truthy(r.bump >= 0.1, "per-image power " .. r.bump)
end)

T.test("bump.describe: descriptors with CIs for a bump, NaN with a reason otherwise", function()
  local _, p = shape_of({ 1, 1, 1, 1.5, 3, 2, 1.2, 1 })
  local d = p.descriptors
  for _, k in ipairs(B.DESCRIPTORS) do
    T.truthy(d[k].value == d[k].value and d[k].reason == nil, k)
    T.truthy(d[k].lo <= d[k].value + 1e-12 and d[k].value <= d[k].hi + 1e-12, k .. " inside its CI")
  end
  T.truthy(math.abs(math.log(d.peak_eta.value, 10) - math.log(p.scales[5], 10)) < 0.25, "peak within a rung")
  _, p = shape_of({ 1, 1, 1, 1.2, 1.8, 3, 5, 9 })
  d = p.descriptors
  for _, k in ipairs { "peak_eta", "peak_height", "half_width", "decay_slope", "area" } do
    T.truthy(d[k].value ~= d[k].value, k .. " is NaN for an edge")
    T.truthy(d[k].reason:find("edge", 1, true), d[k].reason)
  end
  T.truthy(d.onset.value == d.onset.value and d.plateau.value == d.plateau.value, "onset and plateau stay")
  T.eq(p.bump, false)
  -- a bump followed by a rise: the peak is the bump's, before its decay
  _, p = shape_of({ 1, 1, 1, 2, 3, 2, 1.1, 1, 2, 4, 8 })
  T.eq(p.shape.class, "bump")
  T.close(p.descriptors.peak_height.value, 3, 0.02)
end)

T.test("bump.simulate: seeded, the requested shape", function()
  local s1, a = B.simulate("bump", { n = 4, seed = 5 })
  local _, b = B.simulate("bump", { n = 4, seed = 5 })
  T.eq(a[3][7], b[3][7])
  T.eq(#s1, 12)
  T.raises(function() B.simulate("wiggle") end, "unknown shape 'wiggle'")
end)

T.test("the two peaks are named apart: the shape's peak rung, the parabolic peak η descriptor", function()
  -- an asymmetric peak: the parabola's vertex lies between rungs, off the highest rung
  local shape, p = shape_of { 1, 1, 1, 1.5, 3, 2.8, 1.2, 1 }
  T.eq(shape.class, "bump")
  local rung = p.scales[shape.peak.rung]
  T.eq(rung, p.scales[5])
  T.truthy(shape.text:find("^bump: r 3[%.%d]* at the peak rung η " .. string.format("%.3g", rung)), shape.text)
  local eta = p.descriptors.peak_eta.value
  T.truthy(eta > rung * 1.05 and eta < p.scales[6], string.format("parabolic peak η %g vs peak rung %g", eta, rung))
  -- every place that prints the descriptor says which peak it is
  p.n_images, p.seconds, p.forwards = 12, 0, 0
  p.options.directions, p.options.antipodal = 1, false
  T.truthy(p:summary():find(B.PEAK_NOTE, 1, true), p:summary())
  local E = require "srgeo.experiment"
  p.label = "x"
  T.truthy(E.descriptor_table { p }:find("peak η (parabolic) [95% CI]", 1, true), E.descriptor_table { p })
  T.truthy(srgeo.help.text_of("profile"):find("peak_eta is parabolic", 1, true), "help names the parabolic peak")
end)
