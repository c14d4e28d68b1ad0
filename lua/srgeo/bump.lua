-- srgeo.bump: what shape a profile has, decided by tests at a stated level,
-- and the bump descriptors.  The one place that calls a bump: profiles
-- (p.shape, p.image_shapes, p.descriptors), the scripts' tables and
-- results.json, the notebooks and the plots all read its answer.
--
--   shape = bump.classify { scales = p.scales, values = p.median, boots = B medians, alpha = 0.05, bound = true }
--   shape = bump.classify { scales = ..., values = r of one image, se = its SEs, ... }
--   shape.class: "bump" | "rise" | "fall" | "edge" | "flat" | "undetermined"; shape.text says why
--
-- The plateau P is r at the lowest valid rung: the level r tends to as
-- η → 0 (1 for a piecewise-linear Φ with paired directions, kernels/kink.h),
-- the same in the shape test and the descriptor.  Averaging the next rungs
-- in (as srgeo did, the first three) averages in the start of the rise:
-- small_vgg on 16 Fashion-MNIST images read 1.0043 that way, 0.9998 at
-- the lowest rung, where a float64 run agrees.  Two families of contrasts
-- are compared at once:
--   Δ_t  = r_t − P            every rung t after the plateau
--   δ_st = r_t − r_s          every pair of such rungs, s < t
-- with simultaneous (1 − α) bounds: over images, a bootstrap of the median
-- profile and the joint percentile band over all contrasts (the quantile
-- level γ at which a fraction 1 − α of the resamples lie inside every
-- contrast's [1 − γ, γ] bootstrap quantiles); for one image, its rungs'
-- standard errors and a Bonferroni normal quantile.  Every statement below then holds jointly at
-- familywise level α, so on a profile that never decreases the chance of a
-- false decay (and so of a false bump) is at most α.
-- Checked in float64 (t.errors, from the profile's float64 check): each
-- rung's bound E_s on how far its r may lie from an independent float64
-- forward-difference evaluation (the float32 error bound p.noise plus the
-- JVP energy's deviation from a float64 forward difference, over the
-- images: the largest, since a median moves by at most its largest shift).
-- Every contrast's bounds are widened by the E of its two ends, so each
-- call holds for the float64 values too: a rise from the small-η end whose
-- lower bound does not clear the float error is not called.  A rise or
-- edge that starts at the first rung after the plateau with no float64
-- check behind it (t.errors all NaN: noise_directions = 0) is
-- undetermined.
--   bump          some rung s lies above the plateau (Δ_s's lower bound > 0) and a later rung t
--                 below it (δ_st's upper bound < 0): an interior peak with a decay after it
--   rise          r lies above the plateau somewhere and no decay follows, up to the physical bound
--                 of the ladder (per-pixel RMS of the perturbation ≥ 1); a dip below the plateau
--                 before the rise is reported with it
--   edge          the same on a ladder that stops short of that bound: the range was too short to
--                 tell a rise from a peak beyond it
--   fall          some rung lies below the plateau and none above it
--   flat          no contrast differs from 0 and every Δ_t's bounds lie within ±5% of P
--   undetermined  none of the above (too few images or rungs, or bounds too wide to say "flat")
local stats = require "srgeo.stats"

local B = {}
local NAN = 0 / 0

B.CLASSES = { "bump", "rise", "fall", "edge", "flat", "undetermined" }
B.FLAT_TOLERANCE = 0.05
B.PLATEAU_RUNGS = 1

local function finite(v) return type(v) == "number" and v == v and v ~= math.huge and v ~= -math.huge end

-- The valid rungs (finite value) and the plateau's share of them.
local function valid_rungs(values)
  local idx = {}
  for s, v in ipairs(values) do if finite(v) then idx[#idx + 1] = s end end
  local k = math.min(B.PLATEAU_RUNGS, math.max(1, #idx - 2), #idx)
  return idx, k
end

local function plateau_of(values, idx, k)
  local s = 0
  for j = 1, k do s = s + values[idx[j]] end
  return s / k
end

-- The contrasts over the valid rungs: {a = rung or "plateau", b = rung}.
local function contrasts(idx, k)
  local c = {}
  for j = k + 1, #idx do c[#c + 1] = { a = "plateau", b = idx[j] } end
  for i = k + 1, #idx do
    for j = i + 1, #idx do c[#c + 1] = { a = idx[i], b = idx[j] } end
  end
  return c
end

local function contrast_value(values, P, c)
  return values[c.b] - (c.a == "plateau" and P or values[c.a])
end

-- Simultaneous bounds from bootstrap curves: the percentile band over all
-- contrasts at once.  Each contrast's bootstrap values are ranked (mid-ranks
-- for ties); a resample's extremeness is its most extreme rank over the
-- contrasts, max(F, 1 − F); with γ the (1 − α) quantile of that over the
-- resamples, each contrast's bounds are its own γ and 1 − γ bootstrap
-- quantiles.  Ranks rather than SDs, because a median's bootstrap is
-- discrete: on the plateau its SD can be near 0 while single resamples jump,
-- which turns a max-|t| quantile into nonsense.
local function bounds_bootstrap(values, boots, idx, k, cs, alpha)
  local P = plateau_of(values, idx, k)
  local est, cols = {}, {}
  for ci, c in ipairs(cs) do est[ci], cols[ci] = contrast_value(values, P, c), {} end
  local nb = #boots
  for b, curve in ipairs(boots) do
    local Pb = plateau_of(curve, idx, k)
    for ci, c in ipairs(cs) do cols[ci][b] = contrast_value(curve, Pb, c) end
  end
  local M = {}
  for b = 1, nb do M[b] = 0.5 end
  local sorted = {}
  for ci = 1, #cs do
    local col = cols[ci]
    local order = {}
    for b = 1, nb do order[b] = b end
    table.sort(order, function(x, y)
      local vx, vy = col[x], col[y]
      if vx ~= vx then return false end
      if vy ~= vy then return true end
      return vx < vy
    end)
    -- mid-ranks over runs of ties
    local j = 1
    while j <= nb do
      local v = col[order[j]]
      local e = j
      while e < nb and col[order[e + 1]] == v do e = e + 1 end
      if v == v then
        local F = (j - 1 + (e - j + 1) / 2) / nb
        local m = math.max(F, 1 - F)
        for t = j, e do if m > M[order[t]] then M[order[t]] = m end end
      end
      j = e + 1
    end
    sorted[ci] = col
  end
  local gamma = stats.quantile(M, 1 - alpha)
  local lo, hi = {}, {}
  for ci = 1, #cs do
    lo[ci], hi[ci] = stats.quantile(sorted[ci], 1 - gamma), stats.quantile(sorted[ci], gamma)
  end
  local Pcol = {}
  for b, curve in ipairs(boots) do Pcol[b] = plateau_of(curve, idx, k) end
  return est, lo, hi, gamma, { value = P, lo = stats.quantile(Pcol, alpha / 2), hi = stats.quantile(Pcol, 1 - alpha / 2) }
end

-- Simultaneous bounds from per-rung standard errors (one image): Bonferroni.
local function bounds_se(values, se_rung, idx, k, cs, alpha)
  local P = plateau_of(values, idx, k)
  local vp = 0
  for j = 1, k do vp = vp + (se_rung[idx[j]] or NAN) ^ 2 end
  vp = vp / (k * k)
  local q = stats.qnorm(1 - alpha / (2 * math.max(#cs, 1)))
  local est, lo, hi = {}, {}, {}
  for ci, c in ipairs(cs) do
    est[ci] = contrast_value(values, P, c)
    local va = c.a == "plateau" and vp or se_rung[c.a] ^ 2
    local w = q * math.sqrt(va + se_rung[c.b] ^ 2)
    if w ~= w then w = math.huge end
    lo[ci], hi[ci] = est[ci] - w, est[ci] + w
  end
  local zp = stats.qnorm(1 - alpha / 2)
  return est, lo, hi, q, { value = P, lo = P - zp * math.sqrt(vp), hi = P + zp * math.sqrt(vp) }
end

--- bump.smoothed_bootstrap(rows, nb, seed) -> nb median curves of the
--- images (rows of r per rung) resampled with replacement, each resampled
--- value jittered by h_s·z, z standard normal, h_s = robust SD of rung s over
--- the images · n^(−1/4).  The plain bootstrap of a median is discrete
--- (every resample's median is one of the n values), and its bounds come
--- out too narrow for small n; the jitter smooths that (Hall, DiCiccio &
--- Romano 1989).  In the simulations of bump.rates (with the plateau then a
--- mean of the first three rungs) the familywise error of
--- the shape test on flat profiles dropped from 16% / 11% / 3.5% (plain, 8 /
--- 16 / 32 images) to 11% / 5% / 3.5%, at 92% power instead of 97% for the
--- 16-image bump.
function B.smoothed_bootstrap(rows, nb, seed)
  local n, S = #rows, 0
  for _, r in ipairs(rows) do S = math.max(S, #r) end
  local h = {}
  for s = 1, S do
    local sd = stats.robust_sd(stats.column(rows, s))
    h[s] = (sd == sd) and sd * n ^ (-0.25) or 0
  end
  local u = stats.rng(seed or 1)
  local function normal()
    local a, b = u(), u()
    return math.sqrt(-2 * math.log(a + 1e-300)) * math.cos(2 * math.pi * b)
  end
  local out = {}
  for b = 1, nb do
    local cols = {}
    for s = 1, S do cols[s] = {} end
    for i = 1, n do
      local r = rows[math.floor(u() * n) + 1]
      for s = 1, S do cols[s][i] = r[s] + h[s] * normal() end
    end
    local m = {}
    for s = 1, S do m[s] = stats.median(cols[s]) end
    out[b] = m
  end
  return out
end

local function fmt(v) return string.format("%.3g", v) end
local function signed(v) return string.format("%+.3g", v) end

B.MIN_IMAGES = 8

--- bump.classify(t) -> shape.  t: scales and either rows (per-image r, each
--- a list over the rungs: the median profile is tested, by a smoothed
--- bootstrap over the images of t.bootstrap resamples, default 1000, seed
--- t.seed, or the curves t.boots of bump.smoothed_bootstrap already drawn)
--- or values and se (one image's r per rung and each rung's
--- standard error); alpha (default 0.05); bound (the ladder reached the
--- physical bound).  NaN rungs are skipped.
function B.classify(t)
  local alpha = t.alpha or 0.05
  local scales, values, boots = t.scales, t.values, nil
  local method = t.rows and "bootstrap" or "within-image"
  local n = t.rows and #t.rows or 1
  if t.rows then
    values = {}
    for s = 1, #scales do values[s] = stats.median(stats.column(t.rows, s)) end
  end
  local idx, k = valid_rungs(values)
  local shape = { class = "undetermined", alpha = alpha, method = method, n = n, bound = t.bound or false,
                  rungs = #idx }
  local why
  if #idx < 3 then
    why = string.format("%d valid rungs (need 3)", #idx)
  elseif t.rows and n < B.MIN_IMAGES then
    why = string.format("%d images: the test over images needs at least %d (each image's own call is in "
      .. "p.image_shapes)", n, B.MIN_IMAGES)
  elseif t.rows then
    boots = t.boots or B.smoothed_bootstrap(t.rows, t.bootstrap or 1000, t.seed)
  end
  if why then
    shape.text = "undetermined: " .. why
    shape.reason = why
    return shape
  end
  local cs = contrasts(idx, k)
  local est, lo, hi, q, plat
  if boots then
    est, lo, hi, q, plat = bounds_bootstrap(values, boots, idx, k, cs, alpha)
  else
    est, lo, hi, q, plat = bounds_se(values, t.se, idx, k, cs, alpha)
  end
  plat.rungs = k
  -- checked in float64: each contrast's bounds widened by its ends' E
  local E, checked
  if t.errors then
    E, checked = {}, true
    for _, s in ipairs(idx) do
      local e = t.errors[s]
      if finite(e) and e >= 0 then E[s] = e else E[s], checked = 0, false end
    end
    if not checked then for s in pairs(E) do E[s] = 0 end end
    local EP = 0
    for j = 1, k do EP = EP + E[idx[j]] end
    EP = EP / k
    local widest, at = EP, idx[1]
    for ci, c in ipairs(cs) do
      local w = E[c.b] + (c.a == "plateau" and EP or E[c.a])
      lo[ci], hi[ci] = lo[ci] - w, hi[ci] + w
      if E[c.b] > widest then widest, at = E[c.b], c.b end
    end
    shape.float64 = { checked = checked, plateau = EP, widest = widest, widest_eta = scales[at] }
  end
  -- bootstrap: the per-contrast quantile level γ of the joint band; SEs: the normal quantile
  shape.plateau, shape.critical = plat, q
  local function record(ci)
    local c = cs[ci]
    return { from = c.a, to = c.b, eta_from = c.a ~= "plateau" and scales[c.a] or nil, eta_to = scales[c.b],
             diff = est[ci], lo = lo[ci], hi = hi[ci] }
  end
  -- significant rises over the plateau and drops between rungs
  local rise_at, fall_at, first_rise, first_fall = {}, {}, nil, nil
  local drops = {} -- drops[s] = list of contrast indices s -> t significantly down
  for ci, c in ipairs(cs) do
    if c.a == "plateau" then
      if lo[ci] > 0 then rise_at[c.b] = ci; first_rise = first_rise or c.b end
      if hi[ci] < 0 then fall_at[c.b] = ci; first_fall = first_fall or c.b end
    elseif hi[ci] < 0 then
      drops[c.a] = drops[c.a] or {}
      table.insert(drops[c.a], ci)
    end
  end
  -- bump: the highest significantly raised rung that a significant drop follows
  local best
  for s, rci in pairs(rise_at) do
    if drops[s] and (not best or values[s] > values[best]) then best = s end
  end
  if best then
    local dci = drops[best][1]
    for _, ci in ipairs(drops[best]) do if hi[ci] < hi[dci] then dci = ci end end
    shape.class = "bump"
    shape.peak = { rung = best, eta = scales[best], value = values[best] }
    shape.rise = record(rise_at[best])
    shape.decay = record(dci)
    shape.text = string.format("bump: r %s at the peak rung η %s, %s [%s, %s] over the plateau %s, then %s at η %s (%s [%s, %s])",
      fmt(values[best]), fmt(scales[best]), signed(est[rise_at[best]]), signed(lo[rise_at[best]]),
      signed(hi[rise_at[best]]), fmt(plat.value), fmt(values[cs[dci].b]), fmt(scales[cs[dci].b]), signed(est[dci]),
      signed(lo[dci]), signed(hi[dci]))
  elseif first_rise and E and not checked and first_rise == idx[k + 1] then
    shape.reason = string.format("r rises over the plateau from the first rung after it (η %s), and no float64 "
      .. "check stands behind that (noise_directions = 0): float32 error at the small-η end is not ruled out",
      fmt(scales[first_rise]))
    shape.text = "undetermined: " .. shape.reason
  elseif first_rise then
    -- the rise's evidence: the highest significantly raised rung (a dip
    -- below the plateau before it is reported, it does not make a fall)
    local top = first_rise
    for s in pairs(rise_at) do if values[s] > values[top] then top = s end end
    local ci = rise_at[top]
    shape.class = shape.bound and "rise" or "edge"
    shape.rise = record(ci)
    shape.peak = { rung = top, eta = scales[top], value = values[top] }
    local dip = ""
    if first_fall and first_fall < first_rise then
      local low = first_fall
      for t in pairs(fall_at) do if t < first_rise and values[t] < values[low] then low = t end end
      shape.fall = record(fall_at[low])
      dip = string.format(" after a dip to %s at η %s (%s [%s, %s]),", fmt(values[low]), fmt(scales[low]),
        signed(est[fall_at[low]]), signed(lo[fall_at[low]]), signed(hi[fall_at[low]]))
    end
    shape.text = string.format("%s: r %s at the highest raised rung η %s, %s [%s, %s] over the plateau %s,%s no decay after it %s",
      shape.class, fmt(values[top]), fmt(scales[top]), signed(est[ci]), signed(lo[ci]), signed(hi[ci]),
      fmt(plat.value), dip, shape.bound and "up to the physical bound (per-pixel RMS ≥ 1)"
        or string.format("up to the top rung η %s (the range stops short of the physical bound)", fmt(scales[idx[#idx]])))
  elseif first_fall then
    -- the evidence: the lowest significantly lowered rung
    local low = first_fall
    for t in pairs(fall_at) do if values[t] < values[low] then low = t end end
    local ci = fall_at[low]
    shape.class = "fall"
    shape.fall = record(ci)
    shape.text = string.format("fall: r %s at η %s, %s [%s, %s] below the plateau %s, never significantly above it",
      fmt(values[low]), fmt(scales[low]), signed(est[ci]), signed(lo[ci]), signed(hi[ci]), fmt(plat.value))
  else
    local worst = 0
    for ci, c in ipairs(cs) do
      if c.a == "plateau" then worst = math.max(worst, math.abs(lo[ci]), math.abs(hi[ci])) end
    end
    local tol = B.FLAT_TOLERANCE * math.abs(plat.value)
    shape.flat = { widest = worst, tolerance = tol }
    if worst <= tol then
      shape.class = "flat"
      shape.text = string.format("flat: every rung within ±%s of the plateau %s (bounds reach ±%s)", fmt(tol),
        fmt(plat.value), fmt(worst))
    else
      shape.reason = string.format("no rung differs from the plateau %s, but the bounds reach ±%s (flat needs ±%s)",
        fmt(plat.value), fmt(worst), fmt(tol))
      shape.text = "undetermined: " .. shape.reason
    end
  end
  shape.text = shape.text .. string.format("; simultaneous %g%% bounds, %s", 100 * (1 - alpha),
    method == "bootstrap" and string.format("smoothed bootstrap over %d images", n) or "within-image SEs (Bonferroni)")
  local f = shape.float64
  if f and f.checked then
    shape.text = shape.text .. string.format("; checked in float64: each bound widened by its rungs' distance to a "
      .. "float64 forward-difference evaluation (±%s at the plateau, at most ±%s, at η %s)", fmt(f.plateau),
      fmt(f.widest), fmt(f.widest_eta))
  elseif f then
    shape.text = shape.text .. "; not checked in float64 (noise_directions = 0)"
  end
  return shape
end

---------------------------------------------------------------------------
-- Descriptors

B.DESCRIPTORS = { "plateau", "onset", "peak_eta", "peak_height", "half_width", "decay_slope", "area" }

--- Two peaks, named apart wherever both are printed: the descriptor peak_eta
--- is the vertex of a parabola in log η through the curve's highest rung
--- (within a bump's window) and its two neighbours, between rungs; the shape
--- test's "peak rung" (p.shape.peak, its text) is that highest rung itself.
B.PEAK_NOTE = "peak η (parabolic): the vertex of a parabola in log η through the median profile's highest rung and its "
  .. "neighbours; the shape test's \"peak rung\" is that rung itself"

--- bump.descriptors(scales, r [, window]) -> the raw descriptors of one curve
--- (NaN rungs skipped).  plateau: r at the lowest valid rung (the shape test's);
--- onset: first η where r leaves the plateau by 5% (log-interpolated); peak:
--- max r within window {lo, hi} (rung indices; default all) and its η,
--- refined by a parabola in log η through the rungs around it; half_width:
--- decades where r − plateau exceeds half the peak excess; decay_slope:
--- d log10 r / d log10 η from the peak to window.stop (default the last
--- rung); area: ∫ max(r − 1, 0) d log10 η.
function B.descriptors(scales, r, window)
  local xs, ys, rung = {}, {}, {}
  for i, v in ipairs(r) do
    if finite(v) then xs[#xs + 1] = math.log(scales[i], 10); ys[#ys + 1] = v; rung[#rung + 1] = i end
  end
  local n = #xs
  local d = { plateau = NAN, onset = NAN, peak_eta = NAN, peak_height = NAN, half_width = NAN,
              decay_slope = NAN, area = NAN }
  if n == 0 then return d end
  d.plateau = plateau_of(r, valid_rungs(r)) -- the shape test's plateau
  for i = 2, n do
    if math.abs(ys[i] - d.plateau) > 0.05 * math.abs(d.plateau) then
      local a, b = ys[i - 1] - d.plateau, ys[i] - d.plateau
      local thr = (b > 0 and 1 or -1) * 0.05 * math.abs(d.plateau)
      local t = (b ~= a) and (thr - a) / (b - a) or 1
      t = math.max(0, math.min(1, t))
      d.onset = 10 ^ (xs[i - 1] + t * (xs[i] - xs[i - 1]))
      break
    end
  end
  local wlo, whi, stop = 1, n, n
  if window then
    wlo, whi, stop = nil, nil, nil
    for j = 1, n do
      if rung[j] >= window.lo and not wlo then wlo = j end
      if rung[j] <= window.hi then whi = j end
      if rung[j] <= (window.stop or math.huge) then stop = j end
    end
    if not wlo or not whi or whi < wlo then
      local area = 0
      for i = 2, n do area = area + 0.5 * (math.max(ys[i - 1] - 1, 0) + math.max(ys[i] - 1, 0)) * (xs[i] - xs[i - 1]) end
      d.area = area
      return d
    end
  end
  local ip = wlo
  for i = wlo + 1, whi do if ys[i] > ys[ip] then ip = i end end
  d.peak_height = ys[ip]
  local px = xs[ip]
  if ip > 1 and ip < n then
    -- parabola through the three rungs around the maximum (in log η)
    local x0, x1, x2, y0, y1, y2 = xs[ip - 1], xs[ip], xs[ip + 1], ys[ip - 1], ys[ip], ys[ip + 1]
    local den = (x0 - x1) * (x0 - x2) * (x1 - x2)
    local A = (x2 * (y1 - y0) + x1 * (y0 - y2) + x0 * (y2 - y1)) / den
    local Bq = (x2 * x2 * (y0 - y1) + x1 * x1 * (y2 - y0) + x0 * x0 * (y1 - y2)) / den
    if A < 0 then px = math.max(x0, math.min(x2, -Bq / (2 * A))) end
  end
  d.peak_eta = 10 ^ px
  local excess = ys[ip] - d.plateau
  if excess > 0.05 * math.abs(d.plateau) then
    local half = d.plateau + excess / 2
    local function cross(i, j) -- where y crosses `half` between rungs i and j
      local t = (half - ys[i]) / (ys[j] - ys[i])
      return xs[i] + t * (xs[j] - xs[i])
    end
    local left, right = xs[1], xs[n]
    for i = ip, 2, -1 do if ys[i - 1] < half then left = cross(i - 1, i) break end end
    for i = ip, n - 1 do if ys[i + 1] < half then right = cross(i, i + 1) break end end
    d.half_width = right - left
  end
  if stop > ip then
    local sx, sy, sxx, sxy, k = 0, 0, 0, 0, 0
    for i = ip, stop do
      if ys[i] > 0 then
        local ly = math.log(ys[i], 10)
        sx, sy, sxx, sxy, k = sx + xs[i], sy + ly, sxx + xs[i] ^ 2, sxy + xs[i] * ly, k + 1
      end
    end
    if k >= 2 and (k * sxx - sx * sx) > 0 then d.decay_slope = (k * sxy - sx * sy) / (k * sxx - sx * sx) end
  end
  local area = 0
  for i = 2, n do
    area = area + 0.5 * (math.max(ys[i - 1] - 1, 0) + math.max(ys[i] - 1, 0)) * (xs[i] - xs[i - 1])
  end
  d.area = area
  return d
end

-- The peak window of a shape: a bump's peak is the largest r after the
-- plateau and before its decay rung; the decay slope runs up to that rung.
function B.window(shape)
  if shape.class ~= "bump" then return nil end
  return { lo = (shape.rise and shape.rise.to) or 1, hi = shape.decay.to - 1, stop = shape.decay.to }
end

-- Which descriptors a class leaves undefined, and why.
local PEAK = { peak_eta = true, peak_height = true, half_width = true, decay_slope = true }
local function reason(shape, name)
  local c = shape.class
  if name == "plateau" then return nil end
  if c == "bump" then return nil end
  if c == "undetermined" then return "shape undetermined: " .. (shape.reason or "see the shape test") end
  if c == "edge" then
    if PEAK[name] or name == "area" then
      return "edge: r is still up at the top rung, the peak (if any) lies beyond the range"
    end
  elseif c == "rise" then
    if PEAK[name] then return "rise: no peak up to the physical bound" end
    if name == "area" then return "rise: r is still above the plateau at the physical bound" end
  elseif c == "fall" then
    if PEAK[name] then return "fall: no peak, r falls below the plateau" end
  elseif c == "flat" then
    if PEAK[name] or name == "onset" then return "flat: r stays on the plateau" end
  end
  return nil
end

--- bump.describe(scales, values, boots, shape, level) -> descriptors: each
--- {value, lo, hi} with a bootstrap CI over images at the given level
--- (boots: bootstrap curves, or nil for none), NaN with a reason where the
--- shape leaves it undefined.
function B.describe(scales, values, boots, shape, level)
  local win = B.window(shape)
  local dv = B.descriptors(scales, values, win)
  local out = {}
  local bd = {}
  if boots then for b, curve in ipairs(boots) do bd[b] = B.descriptors(scales, curve, win) end end
  for _, k in ipairs(B.DESCRIPTORS) do
    local why = reason(shape, k)
    if why then
      out[k] = { value = NAN, lo = NAN, hi = NAN, reason = why }
    elseif boots and #bd > 0 then
      local col = {}
      for b = 1, #bd do col[b] = bd[b][k] end
      out[k] = { value = dv[k], lo = stats.quantile(col, (1 - level) / 2), hi = stats.quantile(col, 1 - (1 - level) / 2) }
    else
      out[k] = { value = dv[k], lo = NAN, hi = NAN }
    end
  end
  return out
end

--- bump.counts(shapes) -> "28 bump, 3 edge, 1 undetermined" (per-image calls).
function B.counts(shapes)
  local n = {}
  for _, s in ipairs(shapes or {}) do n[s.class] = (n[s.class] or 0) + 1 end
  local parts = {}
  for _, c in ipairs(B.CLASSES) do if n[c] then parts[#parts + 1] = n[c] .. " " .. c end end
  return table.concat(parts, ", ")
end

---------------------------------------------------------------------------
-- Calibration: synthetic per-image profiles of a known shape

local SHAPES = {
  -- g(t): the excess over the plateau at t = log10 η − the image's location
  rise = function(t) return 1 / (1 + math.exp(-3 * t)) * (1 + math.max(t, 0)) end, -- keeps rising
  saturating = function(t) return 1 / (1 + math.exp(-4 * t)) end,                   -- rises, then flat
  bump = function(t) return math.exp(-t * t / (2 * 0.35 ^ 2)) end,                  -- peak, decay back
  fall = function(t) return -0.6 / (1 + math.exp(-4 * t)) end,                       -- drops below 1
  flat = function() return 0 end,
}
B.SIMULATED = { "rise", "saturating", "bump", "fall", "flat" }

--- bump.simulate(kind, opts) -> scales, rows: opts.n synthetic per-image
--- profiles (rows of r over opts.rungs log-spaced rungs, default 12 over
--- three decades) of a known shape kind (B.SIMULATED): r_i(η) = 1 + A_i
--- g(log10 η − μ_i), with image-to-image spread in amplitude A_i (log-sd
--- opts.spread, default 0.3, around opts.amplitude, default 2) and location
--- μ_i (sd opts.shift, default 0.1 decades, around the middle of the
--- ladder), plus independent estimation noise of relative sd opts.noise
--- (default 0.03) at every rung.  Each image's own curve has the shape
--- (monotone for rise and saturating), so a bump call on them is false.
--- Seeded (opts.seed).
function B.simulate(kind, opts)
  opts = opts or {}
  local g = SHAPES[kind] or error("bump.simulate: unknown shape '" .. tostring(kind) .. "'", 2)
  local n, S = opts.n or 16, opts.rungs or 12
  local u = stats.rng(opts.seed or 1)
  local function normal()
    local a, b = u(), u()
    return math.sqrt(-2 * math.log(a + 1e-300)) * math.cos(2 * math.pi * b)
  end
  local scales, lx = {}, {}
  for s = 1, S do
    lx[s] = -1.5 + 3 * (s - 1) / (S - 1)
    scales[s] = 10 ^ lx[s]
  end
  local rows = {}
  for i = 1, n do
    local A = (opts.amplitude or 2) * math.exp((opts.spread or 0.3) * normal())
    local mu = (opts.center or 0) + (opts.shift or 0.1) * normal()
    local row = {}
    for s = 1, S do
      local r = 1 + A * g(lx[s] - mu)
      row[s] = r * math.exp((opts.noise or 0.03) * normal())
    end
    rows[i] = row
  end
  return scales, rows
end

--- bump.rates(kind, opts) -> {class = fraction}, reps: how often the shape
--- test calls each class on opts.reps (default 100) simulated evaluation
--- sets of opts.n images (bump.simulate; opts.seed varies per set), with
--- opts.bootstrap resamples (default 200) at level opts.alpha (0.05);
--- opts.bound: the ladder reached the physical bound.  With opts.per_image,
--- each image is classified alone from its rungs' SEs (opts.noise) instead.
function B.rates(kind, opts)
  opts = opts or {}
  local reps, alpha = opts.reps or 100, opts.alpha or 0.05
  local count, total = {}, 0
  for rep = 1, reps do
    local o = {}
    for k, v in pairs(opts) do o[k] = v end
    o.seed = (opts.seed or 1) * 7919 + rep
    local scales, rows = B.simulate(kind, o)
    if opts.per_image then
      for _, r in ipairs(rows) do
        local se = {}
        for s, v in ipairs(r) do se[s] = (opts.noise or 0.03) * v end
        local c = B.classify { scales = scales, values = r, se = se, alpha = alpha, bound = opts.bound }.class
        count[c], total = (count[c] or 0) + 1, total + 1
      end
    else
      local c = B.classify { scales = scales, rows = rows, bootstrap = opts.bootstrap or 200, seed = o.seed + 17,
                             alpha = alpha, bound = opts.bound }.class
      count[c], total = (count[c] or 0) + 1, total + 1
    end
  end
  local rates = {}
  for _, c in ipairs(B.CLASSES) do rates[c] = (count[c] or 0) / total end
  return rates, total
end

return B
