-- srgeo.profile: the scale-resolved statistic r_η over a set of images.
--
--   p = srgeo.profile(model, X, {preset = "paper"})
--   p.scales, p.median, p.lo, p.hi, p.mean, p.per_image, p.descriptors
--   p.label, p.model, p.identity       -- what it was measured on (srgeo.identity): model, weights hash, images, preset
--   print(p:summary()); p:save_csv(path); p:save_json(path)
--   p2 = srgeo.profile.load(path)
--   c = srgeo.profile.compare(p1, p2)      -- permutation tests
--
-- The per-image work (directions, exact JVPs, batched forwards, float32 noise
-- estimate) runs in C (core/stats/profile.c); this module chooses the ladder,
-- loops over images, and aggregates: median over images (the reported
-- profile), bootstrap bands over images, and the bump descriptors.
local srgeo = require "srgeo"
local stats = require "srgeo.stats"
local util = require "srgeo.util"
local json = require "srgeo.json"

local P = {}
local Profile = {}
Profile.__index = Profile

local NAN = 0 / 0
local D224 = 3 * 224 * 224

--- Estimator presets.  "paper" is the published protocol (README, "The statistic, exactly").
P.presets = {
  paper = { directions = 1024, antipodal = true, jvp_directions = 256, nscales = 17,
            log10_lo = -2, log10_hi = 2, noise_directions = 8, noise_max = 0.05,
            bootstrap = 1000, ci = 0.95 },
  -- adds 32-direction chunks (each with exact JVPs), each evaluated only at
  -- the rungs whose paired 95% CI of r is not yet within ±2%: a rung closes
  -- on its own (plateau rungs after one chunk), so far fewer forwards for
  -- the same precision; p.rung_directions says how many directions each used
  sequential = { directions = 1024, antipodal = true, jvp_directions = 256, nscales = 17,
                 log10_lo = -2, log10_hi = 2, noise_directions = 8, noise_max = 0.05,
                 bootstrap = 1000, ci = 0.95, target_ci = 0.02, seq_chunk = 32 },
  -- JVPs on the whole (small) set, so the plateau sits at 1 for smooth nets
  quick = { directions = 64, antipodal = true, jvp_directions = "all", nscales = 9,
            log10_lo = -2, log10_hi = 2, noise_directions = 4, noise_max = 0.05,
            bootstrap = 200, ci = 0.95 },
}

local option_names = {
  preset = true, directions = true, antipodal = true, jvp_directions = true, nscales = true,
  log10_lo = true, log10_hi = true, scales = true, rms_scales = true, seed = true, batch = true,
  jvp_batch = true, tap = true, noise_directions = true, noise_max = true, precision = true,
  bootstrap = true, ci = true, per_direction = true, progress = true, label = true, model_name = true,
  user_directions = true, family = true, lowpass_sigma = true, toward = true, k = true, iters = true,
  labels = true, exact_relu = true, target_ci = true, seq_chunk = true, seq_min = true, jacobian_norm = true,
  share_prefix = true, eval = true,
}

--- The scale ladder for input dimension d: log-spaced, shifted by
--- log10 √(d224/d) so every input size sees the same per-pixel RMS amplitude.
function P.ladder(d, opts)
  opts = opts or {}
  local pre = P.presets[opts.preset or "paper"]
  local n = opts.nscales or pre.nscales
  local shift = math.log(math.sqrt(D224 / d), 10)
  return util.logspace((opts.log10_lo or pre.log10_lo) - shift, (opts.log10_hi or pre.log10_hi) - shift, n)
end

local function resolve(opts, d, level)
  level = level or 3 -- whom errors blame: the caller of resolve's caller
  opts = opts or {}
  for k in pairs(opts) do
    if not option_names[k] then error("profile: unknown option '" .. tostring(k) .. "'", level) end
  end
  local pre = P.presets[opts.preset or "paper"]
  if not pre then error("profile: unknown preset '" .. tostring(opts.preset) .. "' (paper, sequential, quick)", level) end
  local o = {}
  for k, v in pairs(pre) do o[k] = v end
  for k, v in pairs(opts) do o[k] = v end
  -- The ladder's options, checked by the core's declared-option reader (one
  -- message format: "profile: nscales must be an integer in 1..4096, got 0").
  for _, decl in ipairs { { name = "nscales", type = "integer", lo = 1, hi = 4096 },
                          { name = "log10_lo", type = "number", lo = -math.huge, hi = math.huge, open_lo = true, open_hi = true },
                          { name = "log10_hi", type = "number", lo = -math.huge, hi = math.huge, open_lo = true, open_hi = true } } do
    local ok, err = pcall(srgeo._check_option, "profile", decl, o[decl.name])
    if not ok then error(err, level) end
  end
  if opts.scales then
    o.scales = opts.scales
  elseif opts.rms_scales then
    o.scales = {}
    for i, a in ipairs(opts.rms_scales) do o.scales[i] = a * math.sqrt(d) end
  else
    o.scales = P.ladder(d, o)
  end
  if type(o.scales) ~= "table" or #o.scales == 0 then error("profile: scales must be a non-empty list", level) end
  for i = 2, #o.scales do
    if not (o.scales[i] > o.scales[i - 1]) then error("profile: scales must increase", level) end
  end
  o.precision = o.precision or "float32"
  if o.precision ~= "float32" and o.precision ~= "float64" then
    error("profile: precision must be \"float32\" or \"float64\", got " .. tostring(o.precision), level)
  end
  o.seed = o.seed or 0
  -- Types and ranges of the options the C engine declares (ci and bootstrap
  -- too: core/stats/profile.c holds them with the engine's), up front.
  local declared = {}
  for k, v in pairs(o) do declared[k] = v end
  if declared.jvp_directions == "all" then declared.jvp_directions = nil end
  local ok, err = pcall(srgeo._profile_check, declared)
  if not ok then error(err, level) end
  return o
end

-- Direction families beyond isotropic Gaussian: returns the
-- options to pass to the C engine for image i.
--   lowpass:      Gaussian noise blurred with lowpass_sigma pixels (in C, streaming)
--   toward:       x' − x for the i-th image of opts.toward (one direction, ±)
--   jacobian_top: the top-k right singular vectors of J (k, iters)
--   gradient:     ∇ₓ of the cross-entropy of the full output at labels[i] (adversarial)
--   user:         opts.user_directions: a tensor (n, C, H, W) or function(i, x) -> tensor
local families = { gaussian = true, lowpass = true, toward = true, jacobian_top = true, gradient = true, user = true }

local function family_options(model, x, i, o, copts)
  local fam = o.family or (o.user_directions and "user") or "gaussian"
  if not families[fam] then error("profile: unknown family '" .. tostring(fam) .. "' (gaussian, lowpass, toward, jacobian_top, gradient, user)", 3) end
  local dirs
  if fam == "lowpass" then
    copts.lowpass_sigma = o.lowpass_sigma or 2
    return
  elseif fam == "toward" then
    local targets = o.toward or error("profile: family 'toward' needs opts.toward (images to move toward)", 3)
    local _, get = (function()
      if type(targets) == "userdata" then return #targets, function(j) return targets:narrow(1, j, 1) end end
      if targets.get then return #targets, function(j) return (targets:get(j)) end end
      return #targets, function(j) return targets[j] end
    end)()
    local t = get(i)
    if not t then error("profile: no toward-image for image " .. i, 3) end
    if t:dtype() ~= x:dtype() then t = x:dtype() == "float64" and t:double() or t:float() end
    dirs = t - x
  elseif fam == "jacobian_top" then
    dirs = srgeo.jacobian_top(model, x, { k = o.k or 8, iters = o.iters or 20, seed = copts.seed, tap = o.tap })
  elseif fam == "gradient" then
    local labels = o.labels or error("profile: family 'gradient' needs opts.labels (class of each image, 0-based)", 3)
    local _, _, g = srgeo._train_step(model, nil, x, { labels[i] }, { input_grad = true })
    dirs = g
  elseif fam == "user" then
    local u = o.user_directions
    dirs = type(u) == "function" and u(i, x) or u
    if type(dirs) ~= "userdata" then
      error("profile: family 'user' needs user_directions, a tensor (n, C, H, W) or function(i, x) -> tensor; got "
        .. type(dirs), 3)
    end
  end
  if fam ~= "gaussian" then
    local n = #dirs
    copts.user_directions = dirs
    copts.directions = n
    copts.jvp_directions = math.min(o.jvp_directions == "all" and 2 * n or o.jvp_directions, n * (o.antipodal and 2 or 1))
  end
end

-- Images from a batch tensor, a list of tensors, or a dataset (ds:get(i)).
local function image_source(X, level)
  if type(X) == "userdata" then
    local n = #X
    return n, function(i) return X:narrow(1, i, 1) end
  elseif type(X) == "table" and X.get then
    return #X, function(i) return (X:get(i)) end
  elseif type(X) == "table" then
    return #X, function(i) return X[i] end
  end
  error("profile: images must be a tensor (N,C,H,W), a list of tensors, or a dataset", level or 3)
end

-- ‖J‖_F² = d · E‖Ju‖² for unit u (Hutchinson with normalised Gaussian
-- probes): estimate and 95% CI from the per-direction JVP energies.
local function hutchinson(jsq, d)
  local n, s, s2 = #jsq, 0, 0
  for _, v in ipairs(jsq) do s, s2 = s + v, s2 + v * v end
  local mean = s / n
  local var = n > 1 and (s2 - n * mean * mean) / (n - 1) or 0 / 0
  local se = math.sqrt(math.max(var, 0) / n)
  return { value = math.sqrt(d * mean), lo = math.sqrt(math.max(d * (mean - 1.96 * se), 0)),
           hi = math.sqrt(d * (mean + 1.96 * se)), probes = n }
end
P.hutchinson = hutchinson

local function image_seed(base, i) return (base * 1000003 + i * 7919) % (1 << 53) end

--- srgeo.profile.classify_bump(curve, plateau, peak) -> kind, bump: the one place that
--- says what a bump is (a later issue replaces the classifier).  A bump is a
--- peak more than 5% above the plateau that the curve comes back down from;
--- it is answered at the two strengths in use:
---   kind: "yes" when the last valid rung is down by at least half the
---     peak's excess, "edge" when it is still higher (the ladder may be too
---     short to see the peak), "no" without such a peak (summary tables,
---     results.json's bump_kind, the notebooks);
---   bump: true when the peak is inside the ladder (neither the first nor
---     the last valid rung) and the last valid rung is more than a fifth of
---     the excess below it (p.bump).
--- curve: r per rung, NaN rungs skipped; plateau, peak: its descriptors.
function P.classify_bump(curve, plateau, peak)
  local n, top, at, last = 0, nil, nil, nil -- valid rungs, their (first) maximum and its place, the last
  for _, v in ipairs(curve) do
    if v == v then
      n, last = n + 1, v
      if not top or v > top then top, at = v, n end
    end
  end
  if not (plateau == plateau and peak == peak) then return "no", false end
  local excess = peak - plateau
  if excess <= 0.05 * math.abs(plateau) then return "no", false end
  local kind = (last and last <= plateau + excess / 2) and "yes" or "edge"
  return kind, at ~= nil and at > 1 and at < n and last < peak - 0.2 * excess
end

--- Bump descriptors of one curve r over scales (NaN rungs skipped).
--- plateau: mean r over the first up to 3 valid rungs; onset: first η where r
--- leaves the plateau by 5% (log-interpolated); peak: max r and its η;
--- half_width: decades where r − plateau exceeds half the peak excess;
--- decay_slope: d log10 r / d log10 η after the peak; area: ∫ max(r−1, 0) d log10 η.
function P.descriptors(scales, r)
  local xs, ys = {}, {}
  for i, v in ipairs(r) do
    if v == v then xs[#xs + 1] = math.log(scales[i], 10); ys[#ys + 1] = v end
  end
  local n = #xs
  local d = { plateau = NAN, onset = NAN, peak_eta = NAN, peak_height = NAN, half_width = NAN,
              decay_slope = NAN, area = NAN }
  if n == 0 then return d end
  local m = math.min(3, n)
  local s = 0
  for i = 1, m do s = s + ys[i] end
  d.plateau = s / m
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
  local ip = 1
  for i = 2, n do if ys[i] > ys[ip] then ip = i end end
  d.peak_height = ys[ip]
  local px = xs[ip]
  if ip > 1 and ip < n then
    -- parabola through the three rungs around the maximum (in log η)
    local x0, x1, x2, y0, y1, y2 = xs[ip - 1], xs[ip], xs[ip + 1], ys[ip - 1], ys[ip], ys[ip + 1]
    local den = (x0 - x1) * (x0 - x2) * (x1 - x2)
    local A = (x2 * (y1 - y0) + x1 * (y0 - y2) + x0 * (y2 - y1)) / den
    local B = (x2 * x2 * (y0 - y1) + x1 * x1 * (y2 - y0) + x0 * x0 * (y1 - y2)) / den
    if A < 0 then px = math.max(x0, math.min(x2, -B / (2 * A))) end
  end
  d.peak_eta = 10 ^ px
  local excess = ys[ip] - d.plateau
  d.bump = select(2, P.classify_bump(ys, d.plateau, d.peak_height)) -- the stricter of its two answers
  if excess > 0.05 * math.abs(d.plateau) then
    local half = d.plateau + excess / 2
    local function cross(i, j) -- interpolate where y crosses `half` between rungs i and j
      local t = (half - ys[i]) / (ys[j] - ys[i])
      return xs[i] + t * (xs[j] - xs[i])
    end
    local left, right = xs[1], xs[n]
    for i = ip, 2, -1 do if ys[i - 1] < half then left = cross(i - 1, i) break end end
    for i = ip, n - 1 do if ys[i + 1] < half then right = cross(i, i + 1) break end end
    d.half_width = right - left
  end
  if n - ip >= 1 then
    local sx, sy, sxx, sxy, k = 0, 0, 0, 0, 0
    for i = ip, n do
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

local descriptor_names = { "plateau", "onset", "peak_eta", "peak_height", "half_width", "decay_slope", "area" }
P.descriptor_names = descriptor_names

-- Median curve over image rows.
local function median_curve(rows, ns)
  local c = {}
  for s = 1, ns do c[s] = stats.median(stats.column(rows, s)) end
  return c
end

local function mean_curve(rows, ns)
  local c = {}
  for s = 1, ns do c[s] = stats.mean(stats.column(rows, s)) end
  return c
end

-- Aggregate per-image rows into the profile's curves, bands and descriptors.
local function aggregate(p)
  local ns, rows = #p.scales, p.per_image
  p.median = median_curve(rows, ns)
  p.mean = mean_curve(rows, ns)
  local o = p.options
  local lo_q, hi_q = (1 - o.ci) / 2, 1 - (1 - o.ci) / 2
  p.lo, p.hi = {}, {}
  local dvals = P.descriptors(p.scales, p.median)
  p.descriptors = {}
  if #rows >= 2 and o.bootstrap > 0 then
    local boots = stats.bootstrap(rows, function(sample) return median_curve(sample, ns) end, o.bootstrap, o.seed + 17)
    for s = 1, ns do
      local col = stats.column(boots, s)
      p.lo[s], p.hi[s] = stats.quantile(col, lo_q), stats.quantile(col, hi_q)
    end
    local bd = {}
    for b, curve in ipairs(boots) do bd[b] = P.descriptors(p.scales, curve) end
    for _, k in ipairs(descriptor_names) do
      local col = {}
      for b = 1, #bd do col[b] = bd[b][k] end
      p.descriptors[k] = { value = dvals[k], lo = stats.quantile(col, lo_q), hi = stats.quantile(col, hi_q) }
    end
  else
    for s = 1, ns do p.lo[s], p.hi[s] = p.median[s], p.median[s] end
    for _, k in ipairs(descriptor_names) do p.descriptors[k] = { value = dvals[k], lo = NAN, hi = NAN } end
  end
  p.bump = dvals.bump
  return p
end

--- srgeo.profile.check_options(opts): the options checked as srgeo.profile
--- checks them before the first image (scripts call it on their command line).
function P.check_options(opts) resolve(opts, D224) end

-- The run of a profile in parts, so that its images can be spread over
-- the ranks of an mpirun job (srgeo.mpi.map; srgeo.experiment spreads the
-- images of several units at once): prepare checks the options and makes
-- the empty profile, image(run, i) computes image i alone (its directions
-- depend only on the seed and i, so any rank gives the same bits), place
-- puts the images' records into the profile in order, finish aggregates.

--- P.prepare(model, images, opts [, level]) -> run.  Bad options raise at
--- `level` (error's, counted from prepare; default 2, its caller).
function P.prepare(model, X, opts, level)
  level = (level or 2) + 1
  if type(model) ~= "userdata" or not model.forward then
    error("profile: model must be an srgeo module, got " .. (model == nil and "nil" or type(model)), level - 1)
  end
  local n, get = image_source(X, level)
  if n == 0 then error("profile: no images", level - 1) end
  local first = get(1)
  local d = 1
  for _, s in ipairs(first:shape()) do d = d * s end
  local o = resolve(opts, d, level)
  local copts = {
    scales = o.scales, directions = o.directions, antipodal = o.antipodal,
    jvp_directions = o.jvp_directions, batch = o.batch, jvp_batch = o.jvp_batch, tap = o.tap,
    noise_directions = o.noise_directions, noise_max = o.noise_max,
    per_direction = o.per_direction, user_directions = o.user_directions,
    target_ci = o.target_ci, seq_chunk = o.seq_chunk, seq_min = o.seq_min, exact_relu = o.exact_relu,
    share_prefix = o.share_prefix,
  }
  if o.jvp_directions == "all" then copts.jvp_directions = o.directions * (o.antipodal and 2 or 1) end
  local id = require("srgeo.identity").of(model, X, o) -- before a float64 copy changes the weights' bytes
  local p = setmetatable({
    scales = o.scales, per_image = {}, jac_energy = {}, noise = {}, ci = {}, directions_used = {}, rung_directions = {},
    jacobian_fro = {}, forwards = 0, seconds = 0, input_dim = d,
    options = o, label = id.label, model = id.model, identity = id, n_images = 0, per_direction = o.per_direction and {} or nil,
    version = srgeo.version,
  }, Profile)
  return { model = model, n = n, get = get, o = o, copts = copts, d = d, p = p,
           dtype = o.precision == "float64" and "float64" or model:dtype() }
end

--- P.image(run, i) -> the record of image i (plain data).  The model runs
--- in the profile's precision for the image and is left as it was.
function P.image(run, i)
  local model, o, copts = run.model, run.o, run.copts
  local x = run.get(i)
  if x:dtype() ~= run.dtype then x = run.dtype == "float64" and x:double() or x:float() end
  copts.seed = image_seed(o.seed, i)
  local was = model:dtype()
  if was ~= run.dtype then if run.dtype == "float64" then model:double() else model:float() end end
  local ok, r = pcall(function()
    family_options(model, x, i, o, copts)
    return srgeo._profile_image(model, x, copts)
  end)
  if was ~= model:dtype() then if was == "float64" then model:double() else model:float() end end
  if not ok then error(r, 0) end
  return r
end

-- The per-image fields of a profile, which P.resume gives back.
local resumed_fields = { "per_image", "jac_energy", "noise", "ci", "directions_used", "rung_directions",
                         "jacobian_fro", "per_direction" }

--- P.resume(run, resume): the per-image fields of images 1..resume.n_images
--- computed before (and the totals forwards, exact_pairs, shared_layers
--- after them), taken as they are: images are seeded by index, so the
--- result is the one an uninterrupted run gives.  Returns the next image.
function P.resume(run, resume, level)
  local p, k = run.p, resume.n_images
  if type(k) ~= "number" or k < 1 or k > run.n then
    error(string.format("profile: hooks.resume holds %s images of %d", tostring(k), run.n), level or 2)
  end
  for _, f in ipairs(resumed_fields) do
    if p[f] or f ~= "per_direction" then
      if type(resume[f]) ~= "table" then error("profile: hooks.resume lacks " .. f, level or 2) end
      for i = 1, k do p[f][i] = resume[f][i] end
    end
  end
  p.forwards, p.exact_pairs, p.shared_layers, p.n_images = resume.forwards or 0, resume.exact_pairs, resume.shared_layers, k
  return k + 1
end

--- P.place(run, records [, on_image]) -> the images placed: the records of
--- the images after the profile's n_images, in order while they are there
--- (records arrive from the ranks in any order); on_image(p, i) after each.
function P.place(run, records, on_image)
  local p, placed = run.p, 0
  while p.n_images < run.n and records[p.n_images + 1] do
    local i = p.n_images + 1
    local r = records[i]
    p.per_image[i], p.jac_energy[i], p.noise[i], p.ci[i] = r.r, r.jac_energy, r.noise, r.ci
    p.directions_used[i], p.rung_directions[i] = r.directions, r.rung_directions
    p.exact_pairs = (p.exact_pairs or 0) + (r.exact_pairs or 0)
    p.shared_layers = r.shared_layers
    p.jacobian_fro[i] = hutchinson(r.jvp_sq, run.d)
    if p.per_direction then p.per_direction[i] = r.per_direction end
    p.forwards = p.forwards + r.forwards
    p.n_images = i
    placed = placed + 1
    if on_image then on_image(p, i) end
  end
  return placed
end

--- P.finish(run, records [, seconds]) -> profile: the records not placed
--- yet placed (the first images in a row, when an interruption left the
--- rest out) and the profile aggregated.
function P.finish(run, records, seconds)
  P.place(run, records or {})
  run.p.seconds = seconds or 0
  return aggregate(run.p)
end

--- srgeo.profile(model, images, opts [, hooks]) -> profile.  Under mpirun
--- the images are spread over the ranks and every rank gets the whole
--- profile.  hooks (not options: they change no result): on_image =
--- function(p, i), called as image i finishes, in order (srgeo.cache
--- checkpoints it; under mpirun on rank 0 alone); resume = what P.resume
--- takes (images computed before).
local function profile(model, X, opts, hooks)
  local run = P.prepare(model, X, opts, 3)
  local n, mpi = run.n, require "srgeo.mpi"
  local start = hooks and hooks.resume and P.resume(run, hooks.resume, 3) or 1
  local on_image = hooks and hooks.on_image
  local bar = (run.o.progress ~= false) and util.progress("profile", n) or nil
  local t0 = srgeo._clock()
  local records = {}
  local ok, err = pcall(function()
    local got = mpi.map(n - start + 1, function(j) return P.image(run, start + j - 1) end, { on_result = function(j, r)
      records[start + j - 1] = r
      P.place(run, records, on_image)
      if bar then bar.update(run.p.n_images) end
    end })
    for j, r in ipairs(got) do records[start + j - 1] = r end -- the other ranks' copy
  end)
  if bar then bar.done() end
  local p = P.finish(run, records, srgeo._clock() - t0)
  if not ok then
    -- Ctrl-C keeps what is done; anything else is a real error.
    if tostring(err):find("interrupted", 1, true) and p.n_images > 0 then
      p.interrupted = true
      io.stderr:write(string.format("profile: interrupted after %d of %d images; keeping those\n", p.n_images, n))
    else
      error(err, 0)
    end
  end
  return p
end

local function fmt(v, w)
  if v == nil or v ~= v then return string.rep(" ", (w or 10) - 3) .. "nan" end
  return string.format("%" .. (w or 10) .. ".4g", v)
end

--- A readable table: one line per rung, then the descriptors with their CIs.
function Profile:summary()
  local out = {}
  local title = self.label or self.model or "profile"
  out[#out + 1] = string.format("%s: %d images, %d directions x %d scales, %.1f s, %d forwards%s",
    title, self.n_images, self.options.directions * (self.options.antipodal and 2 or 1), #self.scales,
    self.seconds, self.forwards, self.interrupted and " (interrupted)" or "")
  if self.identity then out[#out + 1] = require("srgeo.identity").describe(self.identity) end
  out[#out + 1] = string.format("%10s %10s %10s %10s %10s", "eta", "median r", "lo", "hi", "mean r")
  for s, eta in ipairs(self.scales) do
    out[#out + 1] = string.format("%10.4g %s %s %s %s", eta, fmt(self.median[s]), fmt(self.lo[s]), fmt(self.hi[s]), fmt(self.mean[s]))
  end
  out[#out + 1] = string.format("%-12s %10s %10s %10s", "descriptor", "value", "lo", "hi")
  for _, k in ipairs(descriptor_names) do
    local dsc = self.descriptors[k]
    out[#out + 1] = string.format("%-12s %s %s %s", k, fmt(dsc.value), fmt(dsc.lo), fmt(dsc.hi))
  end
  return table.concat(out, "\n")
end

Profile.__tostring = Profile.summary

--- CSV: one row per rung; per-image r in the trailing columns.
function Profile:save_csv(path)
  local lines = {}
  local head = { "eta", "median", "lo", "hi", "mean" }
  for i = 1, #self.per_image do head[#head + 1] = "r_img" .. i end
  lines[1] = table.concat(head, ",")
  local function num(v) return (v == nil or v ~= v) and "nan" or string.format("%.10g", v) end
  for s, eta in ipairs(self.scales) do
    local row = { num(eta), num(self.median[s]), num(self.lo[s]), num(self.hi[s]), num(self.mean[s]) }
    for i = 1, #self.per_image do row[#row + 1] = num(self.per_image[i][s]) end
    lines[#lines + 1] = table.concat(row, ",")
  end
  return util.write_atomic(path, table.concat(lines, "\n") .. "\n")
end

local saved_fields = { "scales", "median", "mean", "lo", "hi", "per_image", "jac_energy", "noise", "ci",
  "directions_used", "rung_directions", "jacobian_fro", "input_dim",
  "descriptors", "bump", "options", "label", "model", "identity", "n_images", "forwards", "seconds", "interrupted", "version",
  "per_direction" }

function Profile:save_json(path)
  local t = { format = "srgeo.profile/1" }
  for _, k in ipairs(saved_fields) do t[k] = self[k] end
  local o = {}
  for k, v in pairs(self.options) do if type(v) ~= "userdata" then o[k] = v end end
  t.options = o
  return util.write_atomic(path, json.encode(t, { indent = true }) .. "\n")
end

function P.load(path)
  local t = json.decode(util.read_file(path))
  if type(t) ~= "table" or t.format ~= "srgeo.profile/1" then
    error("profile.load: " .. path .. " is not an srgeo profile (format srgeo.profile/1)", 2)
  end
  t.format = nil
  return setmetatable(t, Profile)
end

--- A profile's plain table (srgeo.mpi sends no metatables) as a profile again.
function P.adopt(t) return t and setmetatable(t, Profile) end

--- Rebuild curves/bands/descriptors from per_image (e.g. after merging).
function P.aggregate(p) return aggregate(setmetatable(p, Profile)) end

-- Distance between two median curves: mean |log r1 − log r2| over rungs valid in both.
local function curve_distance(a, b)
  local s, k = 0, 0
  for i = 1, #a do
    if a[i] == a[i] and b[i] == b[i] and a[i] > 0 and b[i] > 0 then
      s, k = s + math.abs(math.log(a[i]) - math.log(b[i])), k + 1
    end
  end
  return k > 0 and s / k or NAN
end

--- Two-sample permutation test between profiles on the same ladder: images
--- are exchanged between the groups; p-values for the curve distance and for
--- each descriptor difference.
function P.compare(p1, p2, opts)
  opts = opts or {}
  if #p1.scales ~= #p2.scales then error("profile.compare: profiles have different ladders", 2) end
  for i = 1, #p1.scales do
    if math.abs(p1.scales[i] / p2.scales[i] - 1) > 1e-9 then error("profile.compare: profiles have different ladders", 2) end
  end
  local ns, B = #p1.scales, opts.permutations or 1000
  local pool = {}
  for _, r in ipairs(p1.per_image) do pool[#pool + 1] = r end
  for _, r in ipairs(p2.per_image) do pool[#pool + 1] = r end
  local n1 = #p1.per_image
  local function stat(rows1, rows2)
    local m1, m2 = median_curve(rows1, ns), median_curve(rows2, ns)
    local d1, d2 = P.descriptors(p1.scales, m1), P.descriptors(p1.scales, m2)
    local t = { curve = curve_distance(m1, m2) }
    for _, k in ipairs(descriptor_names) do
      local a, b = d1[k], d2[k]
      if k == "onset" or k == "peak_eta" then a, b = math.log(a, 10), math.log(b, 10) end
      t[k] = math.abs(a - b)
    end
    return t
  end
  local obs = stat(p1.per_image, p2.per_image)
  local count = {}
  for k in pairs(obs) do count[k] = 0 end
  local u = stats.rng(opts.seed or 1)
  for _ = 1, B do
    local perm = {}
    for i = 1, #pool do perm[i] = pool[i] end
    for i = #perm, 2, -1 do
      local j = math.floor(u() * i) + 1
      perm[i], perm[j] = perm[j], perm[i]
    end
    local a, b = {}, {}
    for i = 1, #perm do if i <= n1 then a[#a + 1] = perm[i] else b[#b + 1] = perm[i] end end
    local t = stat(a, b)
    for k, v in pairs(t) do if v == v and obs[k] == obs[k] and v >= obs[k] then count[k] = count[k] + 1 end end
  end
  local res = { statistic = obs, p = {}, permutations = B }
  for k, c in pairs(count) do res.p[k] = (obs[k] == obs[k]) and (1 + c) / (1 + B) or NAN end
  return res
end

return setmetatable(P, { __call = function(_, ...) return profile(...) end })
