-- srgeo.profile: the scale-resolved statistic r_η over a set of images.
--
--   p = srgeo.profile(model, X, {preset = "paper"})
--   p.scales, p.median, p.lo, p.hi, p.mean, p.per_image, p.shape, p.descriptors, p.range, p.estimator
--   p.label, p.model, p.identity       -- what it was measured on (srgeo.identity): model, weights hash, images, preset
--   print(p:summary()); p:save_csv(path); p:save_json(path)
--   p2 = srgeo.profile.load(path)
--   c = srgeo.profile.compare(p1, p2)      -- permutation tests
--
-- The per-image work (directions, exact JVPs, batched forwards, the float32 noise
-- bound) runs in C (core/stats/profile.c), one call per image and set of
-- rungs, or per step of directions in sequential mode.  This module chooses
-- the ladder (and extends it with range = "auto"), runs the sequential
-- estimator across images, and aggregates: the median over images (the
-- reported profile), bootstrap bands over images, the shape test and the
-- descriptors (srgeo.bump).
local srgeo = require "srgeo"
local stats = require "srgeo.stats"
local util = require "srgeo.util"
local json = require "srgeo.json"
local bump = require "srgeo.bump"

local P = {}
local Profile = { __name = "srgeo.profile" } -- the name picks its HTML form (srgeo.html.rich)
Profile.__index = Profile

local NAN = 0 / 0
local D224 = 3 * 224 * 224

--- Estimator presets.  "paper" is the published protocol (README, "The
--- statistic, exactly"): 1024 independent directions and their antipodes,
--- the denominator from the JVPs of the first 256 of them.  Its r therefore
--- does not sit at 1 on the plateau: there r = (mean over 2048 directions of
--- η²‖Ju‖²) / (mean over 256), the sampling error of 256 JVPs, a few percent
--- per image (1.04 on the shipped small_resnet's median) -- an offset of the
--- estimator, not nonlinearity.  The other presets pair every direction
--- with its own exact JVP (r = 1 by construction where Φ is linear) and use
--- orthonormal blocks of directions.
---   sequential: steps of directions per image and rung, each rung closing
---     on its own once the image's r is precise enough for the median over
---     images (P.SEQUENTIAL_RULE), at most 1024 directions (± antipodes)
---   quick: 64 directions ± antipodes, all paired, 9 rungs
P.presets = {
  paper = { directions = 1024, antipodal = true, jvp_directions = 256, paired = false, orthogonal = 0, nscales = 17,
            log10_lo = -2, log10_hi = 2, noise_directions = 16, noise_max = 0.05, bootstrap = 1000, ci = 0.95 },
  sequential = { directions = 1024, antipodal = true, jvp_directions = 256, paired = true, orthogonal = "auto",
                 nscales = 17, log10_lo = -2, log10_hi = 2, noise_directions = 16, noise_max = 0.05, bootstrap = 1000,
                 ci = 0.95, sequential = true },
  quick = { directions = 64, antipodal = true, jvp_directions = 256, paired = true, orthogonal = "auto", nscales = 9,
            log10_lo = -2, log10_hi = 2, noise_directions = 8, noise_max = 0.05, bootstrap = 200, ci = 0.95 },
}

--- The sequential estimator's stopping rule, as profiles and help state it.
P.SEQUENTIAL_RULE = "each image's rung takes steps of directions (each with its antipode and exact JVP) "
  .. "until its standard error of r is at most seq_between (1/4) of the between-image SD of r at that rung "
  .. "(a robust SD over the images, IQR/1.349, less their mean within-image variance), or its 95% CI is at "
  .. "most seq_paper (1/2) of the one the paper protocol (1024 directions ±, 256 JVPs) would give on that "
  .. "image, predicted from the same directions; at most `directions` directions"

local option_names = {
  preset = true, directions = true, antipodal = true, jvp_directions = true, nscales = true,
  log10_lo = true, log10_hi = true, scales = true, rms_scales = true, seed = true, batch = true,
  jvp_batch = true, tap = true, noise_directions = true, noise_fpc = true, noise_max = true, precision = true,
  bootstrap = true, ci = true, per_direction = true, progress = true, label = true, model_name = true,
  user_directions = true, family = true, lowpass_sigma = true, toward = true, k = true, iters = true,
  labels = true, exact_relu = true, target_ci = true, seq_chunk = true, seq_min = true, jacobian_norm = true,
  share_prefix = true, paired = true, orthogonal = true, range = true, refine = true, alpha = true,
  seq_between = true, seq_paper = true, eval = true, directional = true, emulate_bf16 = true,
}

-- The paper protocol's counts, against which sequential rungs are judged.
local REF_N, REF_NJ = P.presets.paper.directions, P.presets.paper.jvp_directions

--- The scale ladder for input dimension d: log-spaced, shifted by
--- log10 √(d224/d) so every input size sees the same per-pixel RMS amplitude.
function P.ladder(d, opts)
  opts = opts or {}
  local pre = P.presets[opts.preset or "paper"]
  local n = opts.nscales or pre.nscales
  local shift = math.log(math.sqrt(D224 / d), 10)
  return util.logspace((opts.log10_lo or pre.log10_lo) - shift, (opts.log10_hi or pre.log10_hi) - shift, n)
end

--- The orthonormal block size "auto" picks for input dimension d: up to
--- 256 directions, at most d, and at most 2^19 values (4 MB of doubles) per
--- block, so large images get small blocks (where independent directions
--- are nearly orthogonal anyway).
function P.auto_block(d)
  return math.max(1, math.min(256, d, (1 << 19) // d))
end

local function resolve(opts, d)
  opts = opts or {}
  for k in pairs(opts) do
    if not option_names[k] then error("profile: unknown option '" .. tostring(k) .. "'", 3) end
  end
  local pre = P.presets[opts.preset or "paper"]
  if not pre then error("profile: unknown preset '" .. tostring(opts.preset) .. "' (paper, sequential, quick)", 3) end
  local o = {}
  for k, v in pairs(pre) do o[k] = v end
  for k, v in pairs(opts) do o[k] = v end
  -- The ladder's options, checked by the core's declared-option reader (one
  -- message format: "profile: nscales must be an integer in 1..4096, got 0").
  for _, decl in ipairs { { name = "nscales", type = "integer", lo = 1, hi = 4096 },
                          { name = "log10_lo", type = "number", lo = -math.huge, hi = math.huge, open_lo = true, open_hi = true },
                          { name = "log10_hi", type = "number", lo = -math.huge, hi = math.huge, open_lo = true, open_hi = true } } do
    local ok, err = pcall(srgeo._check_option, "profile", decl, o[decl.name])
    if not ok then error(err, 3) end
  end
  if opts.scales then
    o.scales = opts.scales
  elseif opts.rms_scales then
    o.scales = {}
    for i, a in ipairs(opts.rms_scales) do o.scales[i] = a * math.sqrt(d) end
  else
    o.scales = P.ladder(d, o)
  end
  if type(o.scales) ~= "table" or #o.scales == 0 then error("profile: scales must be a non-empty list", 3) end
  for i = 2, #o.scales do
    if not (o.scales[i] > o.scales[i - 1]) then error("profile: scales must increase", 3) end
  end
  o.precision = o.precision or "float32"
  if o.precision ~= "float32" and o.precision ~= "float64" then
    error("profile: precision must be \"float32\" or \"float64\", got " .. tostring(o.precision), 3)
  end
  o.seed = o.seed or 0
  o.range = o.range or "paper"
  if o.directional == nil then o.directional = true end
  if o.orthogonal == "auto" or o.orthogonal == true then o.orthogonal = P.auto_block(d) end
  -- Types and ranges of the options the C engine declares (ci, bootstrap,
  -- range, ... too: core/stats/profile.c holds them with the engine's), up front.
  local declared = {}
  for k, v in pairs(o) do declared[k] = v end
  declared.jvp_directions = declared.jvp_directions ~= "all" and declared.jvp_directions or nil
  declared.sequential = nil
  local ok, err = pcall(srgeo._profile_check, declared)
  if not ok then error(err, 3) end
  if o.jvp_directions == "all" then o.paired = true end
  if o.target_ci then o.sequential = true end
  if o.sequential and opts.paired == false then
    error("profile: the sequential estimator pairs every direction with its JVP (paired = false is the paper's)", 3)
  end
  if o.sequential then o.paired = true end
  o.seq_between = o.seq_between or 0.25
  o.seq_paper = o.seq_paper or 0.5
  o.seq_chunk = o.seq_chunk or 32
  o.alpha = o.alpha or 0.05
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

local function family_of(o)
  local fam = o.family or (o.user_directions and "user") or "gaussian"
  if not families[fam] then error("profile: unknown family '" .. tostring(fam) .. "' (gaussian, lowpass, toward, jacobian_top, gradient, user)", 3) end
  return fam
end

-- Returns true for the random families (directions drawn by index, so a
-- run can take more of them), false when the family fixed the set.
local function family_options(model, x, i, o, copts)
  local fam = family_of(o)
  local dirs
  if fam == "gaussian" then return true end
  if fam == "lowpass" then
    copts.lowpass_sigma = o.lowpass_sigma or 2
    return true
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
    copts.orthogonal = 0
    copts.first_direction = 0
    copts.jvp_directions = math.min(o.jvp_directions == "all" and 2 * n or o.jvp_directions, n * (o.antipodal and 2 or 1))
  end
end

-- Images from a batch tensor, a list of tensors, or a dataset (ds:get(i)).
local function image_source(X)
  if type(X) == "userdata" then
    local n = #X
    return n, function(i) return X:narrow(1, i, 1) end
  elseif type(X) == "table" and X.get then
    return #X, function(i) return (X:get(i)) end
  elseif type(X) == "table" then
    return #X, function(i) return X[i] end
  end
  error("profile: images must be a tensor (N,C,H,W), a list of tensors, or a dataset", 3)
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

---------------------------------------------------------------------------
-- Per-rung state.  Each image keeps, per rung: its moments (core/stats/
-- rung.h; merged over the steps of directions), the estimate from them,
-- the float32 noise check of its first step, and how many directions it
-- rests on.  The profile's per-rung lists (p.per_image, p.ci, ...) are
-- views of this state, rebuilt by publish().

-- Chan's update: the moments of two disjoint sets of units.
local function merge(a, b)
  if not a then return b end
  local n = a.n + b.n
  local dd, dj = b.d_mean - a.d_mean, b.j_mean - a.j_mean
  local f = a.n * b.n / n
  return { n = n, d_mean = a.d_mean + dd * b.n / n, d_m2 = a.d_m2 + b.d_m2 + dd * dd * f,
           nj = a.nj + b.nj, j_mean = a.j_mean + dj * b.nj / (a.nj + b.nj),
           j_m2 = a.j_m2 + b.j_m2 + dj * dj * a.nj * b.nj / (a.nj + b.nj), c = a.c + b.c + dd * dj * f }
end
P.merge_moments = merge

-- The run: what every engine call of one profile shares.
local function new_run(model, X, o, d)
  local n, get = image_source(X)
  return {
    model = model, get = get, n = n, o = o, d = d, f64 = o.precision == "float64",
    copts = {
      antipodal = o.antipodal, jvp_directions = o.jvp_directions ~= "all" and o.jvp_directions or nil,
      paired = o.paired, orthogonal = o.orthogonal, batch = o.batch, jvp_batch = o.jvp_batch, tap = o.tap,
      noise_max = o.noise_max, per_direction = o.per_direction, exact_relu = o.exact_relu,
      share_prefix = o.share_prefix, directional = o.directional, emulate_bf16 = o.emulate_bf16,
    },
  }
end

local function new_rung() return { n = 0 } end

-- One engine call: image i at the rungs `rungs` (indices into p.scales),
-- base directions first .. first + count − 1 (count nil: the preset's or
-- the family's), with or without the float32 noise check.  Merges the
-- result into the image's state; returns the base directions it ran.
local function call(run, p, i, rungs, first, count, noise)
  local o, copts = run.o, run.copts
  local x = run.get(i)
  if run.f64 and x:dtype() ~= "float64" then x = x:double() end
  if not run.f64 and x:dtype() ~= run.model:dtype() then x = x:float() end
  copts.seed = image_seed(o.seed, i)
  copts.user_directions, copts.lowpass_sigma = nil, nil
  copts.directions, copts.first_direction = count or o.directions, first
  copts.orthogonal = o.orthogonal
  copts.noise_directions = noise and o.noise_directions or 0
  -- the sequential estimator's first step is not the rung's whole set: no
  -- finite-population correction of the bound (the conservative side)
  copts.noise_fpc = o.noise_fpc ~= false and not o.sequential
  local random = family_options(run.model, x, i, o, copts)
  if not random and (first > 0 or o.sequential) then
    error("profile: the sequential estimator draws more directions as it needs them: it takes the gaussian or lowpass family", 0)
  end
  local sc = {}
  for j, s in ipairs(rungs) do sc[j] = p.scales[s] end
  copts.scales = sc
  local r = srgeo._profile_image(run.model, x, copts)
  p.forwards = p.forwards + r.forwards
  p.exact_pairs = (p.exact_pairs or 0) + (r.exact_pairs or 0)
  p.shared_layers = r.shared_layers
  local st = p._state[i]
  if not st then
    st = { rungs = {}, jvp = {}, steps = {}, calls = 0 }
    p._state[i] = st
  end
  st.calls = st.calls + 1
  -- the image's ties and singular points (every call's first JVP meets the same)
  st.kinks = r.kinks
  -- JVP energies by direction index: each direction counts once
  local base0 = copts.first_direction
  for j, v in ipairs(r.jvp_sq) do st.jvp[base0 + j] = v end
  if r.noise_jvp == r.noise_jvp then st.noise_jvp = math.max(st.noise_jvp or 0, r.noise_jvp) end
  if r.fd_jvp == r.fd_jvp and not (st.fd_jvp and math.abs(st.fd_jvp) >= math.abs(r.fd_jvp)) then
    st.fd_jvp = r.fd_jvp
  end
  local nb = r.directions // (o.antipodal and 2 or 1)
  st.steps[#st.steps + 1] = nb
  for j, s in ipairs(rungs) do
    local rs = st.rungs[s] or new_rung()
    st.rungs[s] = rs
    rs.mom = merge(rs.mom, r.moments[j])
    rs.n = rs.mom.n
    if noise then
      rs.noise, rs.noise_energy = r.noise[j], r.noise_energy[j]
      if r.r[j] ~= r.r[j] and r.moments[j].n > 0 then rs.discarded = true end
    end
    if r.per_direction then
      rs.pd = rs.pd or {}
      local row = r.per_direction[j]
      for b = 1, nb do
        rs.pd[base0 + b] = { row[b], o.antipodal and row[nb + b] or nil }
      end
    end
    local e = srgeo._rung_estimate(rs.mom, p.scales[s])
    rs.r, rs.se, rs.ci = rs.discarded and NAN or e.r, e.se, e.ci
  end
  return nb
end

-- The per-rung views of the state (p.per_image, p.ci, p.se, p.noise,
-- p.noise_energy, p.moments, p.rung_directions, p.closed_by, ...).
local function publish(p)
  local o = p.options
  local mult = o.antipodal and 2 or 1
  p.per_image, p.ci, p.se, p.noise, p.noise_energy, p.moments = {}, {}, {}, {}, {}, {}
  p.rung_directions, p.directions_used, p.closed_by, p.jac_energy, p.jacobian_fro, p.noise_jvp = {}, {}, {}, {}, {}, {}
  p.fd_jvp = {}
  p.steps = {}
  p.ties, p.near_ties, p.singular = {}, {}, {}
  if o.per_direction then p.per_direction = {} end
  p.estimator.calls = 0
  for i = 1, p.n_images do
    local st = p._state[i]
    p.estimator.calls = p.estimator.calls + st.calls
    local r, ci, se, nz, ne, mo, rd, cb = {}, {}, {}, {}, {}, {}, {}, {}
    local used = 0
    for s = 1, #p.scales do
      local rs = st.rungs[s]
      r[s], ci[s], se[s] = rs.r or NAN, rs.ci or NAN, rs.se or NAN
      nz[s], ne[s], mo[s] = rs.noise or NAN, rs.noise_energy or NAN, rs.mom or false
      rd[s], cb[s] = rs.n * mult, rs.closed or false
      used = math.max(used, rs.n)
    end
    p.per_image[i], p.ci[i], p.se[i], p.noise[i], p.noise_energy[i], p.moments[i] = r, ci, se, nz, ne, mo
    p.rung_directions[i], p.directions_used[i], p.closed_by[i] = rd, used * mult, cb
    p.noise_jvp[i] = st.noise_jvp or NAN
    p.fd_jvp[i] = st.fd_jvp or NAN
    p.steps[i] = st.steps
    local kk = st.kinks or {}
    p.ties[i], p.near_ties[i], p.singular[i] = kk.ties or 0, kk.near or 0, kk.singular or 0
    local jsq, js = {}, 0
    for b = 1, #st.jvp do
      if st.jvp[b] then jsq[#jsq + 1] = st.jvp[b]; js = js + st.jvp[b] end
    end
    p.jac_energy[i] = #jsq > 0 and js / #jsq or NAN
    p.jacobian_fro[i] = hutchinson(jsq, p.input_dim)
    if o.per_direction then
      -- per rung: [u_1..u_N, −u_1..−u_N] over the image's N directions, NaN where a rung stopped
      local rows = {}
      for s = 1, #p.scales do
        local pd, row = st.rungs[s].pd or {}, {}
        for b = 1, used do
          row[b] = pd[b] and pd[b][1] or NAN
          if o.antipodal then row[used + b] = pd[b] and pd[b][2] or NAN end
        end
        rows[s] = row
      end
      p.per_direction[i] = rows
    end
  end
end

---------------------------------------------------------------------------
-- Filling rungs: fixed (every image, every rung, the preset's directions)
-- or sequential (steps of directions until each image's rung is precise
-- enough for the median over images).

-- Under mpirun (srgeo.mpi.size() > 1) the images of a stage are spread
-- over the ranks: each_image(p, list, fn, on_done) runs fn(i) for the
-- images in list (fn makes image i's call()s, which touch p._state[i] and
-- the totals only, and returns a value), then on_done(i, value) in list
-- order.  In one process a plain loop; under mpirun through srgeo.mpi.map:
-- a rank computes its images from the state every rank holds and returns
-- each image's new state with what its calls added to the totals, and
-- every rank installs all of them in list order (rank 0 as they arrive),
-- so every rank holds the whole state and the totals add up in one
-- process's order.  call() depends only on (seed, i, the image's state),
-- so whichever rank computes an image gives the same bits.
local function each_image(p, list, fn, on_done)
  local mpi = require "srgeo.mpi"
  if mpi.size() == 1 then
    for _, i in ipairs(list) do
      local v = fn(i)
      if on_done then on_done(i, v) end
    end
    return
  end
  local got, k = {}, 0 -- list[1..k] installed
  local function install()
    while k < #list and got[k + 1] do
      k = k + 1
      local i, r = list[k], got[k]
      p._state[i] = r.state
      p.forwards = p.forwards + r.forwards
      p.exact_pairs = (p.exact_pairs or 0) + r.exact_pairs
      p.shared_layers = r.shared_layers
      if on_done then on_done(i, r.value) end
    end
  end
  local all = mpi.map(#list, function(j)
    local i = list[j]
    local f, e = p.forwards, p.exact_pairs
    p.forwards, p.exact_pairs = 0, 0
    local ok, v = pcall(fn, i)
    local r = { state = p._state[i], forwards = p.forwards, exact_pairs = p.exact_pairs, shared_layers = p.shared_layers,
                value = v }
    p.forwards, p.exact_pairs = f, e
    if not ok then error(v, 0) end
    return r
  end, { on_result = function(j, r)
    got[j] = r
    install()
  end })
  for j, r in ipairs(all) do got[j] = r end
  install()
end

-- on_image (hooks): under mpirun rank 0 alone reports (srgeo.cache writes).
-- prog, stage: the profile's progress (new_progress) and this stage's name.
local function fixed_fill(run, p, rungs, prog, stage, start, on_image)
  local list = {}
  for i = start or 1, run.n do list[#list + 1] = i end
  if on_image and not require("srgeo.mpi").root() then on_image = nil end
  local f0, k = p.forwards, 0
  each_image(p, list, function(i)
    call(run, p, i, rungs, 0, nil, true)
    for _, s in ipairs(rungs) do p._state[i].rungs[s].closed = "fixed" end
  end, function(i)
    p._filled = i
    if on_image then on_image(p, i) end
    k = k + 1
    if prog then
      local per = (p.forwards - f0) / k -- passes an image of this stage takes
      prog.update(per * (#list - k), string.format("%s: image %d/%d", stage, i, run.n), per * run.n / #rungs)
    end
  end)
end

-- The between-image SD of r at rung s: a robust SD over the images less
-- their mean within-image variance (the spread the estimates add), or nil
-- with fewer than 4 images.
local function between_sd(p, s)
  local v, w = {}, {}
  for i = 1, p._filled do
    local rs = p._state[i].rungs[s]
    if rs.r and rs.r == rs.r then
      v[#v + 1] = rs.r
      w[#w + 1] = (rs.se * rs.r) ^ 2
    end
  end
  if #v < 4 then return nil end
  local sd = stats.robust_sd(v)
  return math.sqrt(math.max(sd * sd - stats.mean(w), 0))
end

-- Why rung s of an image closes now, or nil and the directions it is
-- predicted to need (its SE shrinks as 1/√n).
local function settle(p, rs, s, sdb)
  local o = p.options
  if rs.discarded then return "noise" end
  if rs.n >= o.directions then return "cap" end
  local eta = p.scales[s]
  if o.target_ci then
    if rs.ci <= o.target_ci then return "target" end
    return nil, rs.n * (rs.ci / o.target_ci) ^ 2
  end
  local need = math.huge
  local se_abs = rs.se * math.abs(rs.r)
  if sdb and o.seq_between > 0 then
    local goal = o.seq_between * sdb
    if se_abs <= goal then return "between" end
    if goal > 0 then need = rs.n * (se_abs / goal) ^ 2 end
  end
  if o.seq_paper > 0 then
    local goal = o.seq_paper * srgeo._rung_estimate(rs.mom, eta, REF_N, REF_NJ).ci
    if rs.ci <= goal then return "paper" end
    if goal > 0 then need = math.min(need, rs.n * (rs.ci / goal) ^ 2) end
  end
  return nil, need
end

local function sequential_fill(run, p, rungs, prog, stage)
  local o = p.options
  local chunk = o.seq_chunk
  local pilot = (o.seq_min and o.seq_min > 0) and o.seq_min or chunk
  pilot = math.min(pilot, o.directions)
  local next_dir, all = {}, {}
  for i = 1, run.n do all[i] = i end
  -- progress: passes per direction of one image's rung in this stage (the
  -- forecast of the steps to come is their predicted directions at that)
  local f0, units, k = p.forwards, 0, 0
  local function per_unit() return units > 0 and (p.forwards - f0) / units or 0 end
  each_image(p, all, function(i) return call(run, p, i, rungs, 0, pilot, true) end, function(i, nb)
    next_dir[i] = nb
    p._filled = i
    units, k = units + nb * #rungs, k + 1
    if prog then
      local per = (p.forwards - f0) / k
      prog.update(per * (run.n - k), string.format("%s, first step: image %d/%d", stage, i, run.n), per * run.n / #rungs)
    end
  end)
  local rounds = 0
  while true do
    local sdb = {}
    for _, s in ipairs(rungs) do sdb[s] = between_sd(p, s) end
    -- which rungs of which images stay open (every rank alike), then one
    -- more step of each open image (independent given sdb)
    local open_total, todo, plan, left = 0, {}, {}, 0
    for i = 1, run.n do
      local st, open, need = p._state[i], {}, math.huge
      for _, s in ipairs(rungs) do
        local rs = st.rungs[s]
        if not rs.closed then
          local why, want = settle(p, rs, s, sdb[s])
          if why then
            rs.closed = why
          else
            open[#open + 1] = s
            need = math.min(need, want or math.huge)
            left = left + math.max(math.min(want or o.directions, o.directions) - next_dir[i], 0)
          end
        end
      end
      if #open > 0 then
        open_total = open_total + #open
        local have = next_dir[i]
        local step = need < math.huge and math.ceil(need) - have or chunk
        step = math.max(math.max(1, chunk // 4), math.min(step, math.max(chunk, have)))
        step = math.min(step, o.directions - have)
        todo[#todo + 1], plan[i] = i, { open = open, have = have, step = step }
      end
    end
    rounds = rounds + 1
    local ran, k2 = 0, 0
    each_image(p, todo, function(i)
      local q = plan[i]
      return q.have + call(run, p, i, q.open, q.have, q.step, false)
    end, function(i, nd)
      local q = plan[i]
      ran, units, k2 = ran + (nd - q.have) * #q.open, units + (nd - q.have) * #q.open, k2 + 1
      next_dir[i] = nd
      if prog then
        local rest = (left - ran) * per_unit()
        prog.update(rest, string.format("%s, step %d: %d rungs of images open, image %d/%d", stage, rounds, open_total,
          k2, #todo), (p.forwards - f0 + rest) / #rungs)
      end
    end)
    if open_total == 0 then break end
  end
end

-- start, on_image: the first stage of a fixed profile resumes after the
-- images it is given and reports each image it finishes (hooks).
local function fill(run, p, rungs, stage, start, on_image)
  p._filled = (start or 1) - 1
  if p.options.sequential then sequential_fill(run, p, rungs, run.prog, stage)
  else fixed_fill(run, p, rungs, run.prog, stage, start, on_image) end
end

-- New rungs at etas: insert them into the ladder (kept increasing) and
-- every image's state; returns their indices.
local function add_rungs(p, etas)
  local all = {}
  for s, e in ipairs(p.scales) do all[#all + 1] = { e = e, old = s } end
  for _, e in ipairs(etas) do all[#all + 1] = { e = e } end
  table.sort(all, function(a, b) return a.e < b.e end)
  local scales, map, new = {}, {}, {}
  for s, a in ipairs(all) do
    scales[s] = a.e
    if a.old then map[a.old] = s else new[#new + 1] = s end
  end
  for _, st in pairs(p._state) do
    local rungs = {}
    for old, rs in pairs(st.rungs) do rungs[map[old]] = rs end
    st.rungs = rungs
  end
  p.scales = scales
  p.options.scales = scales
  return new
end

---------------------------------------------------------------------------
-- Aggregation: the median over images, bootstrap bands, the shape test, the
-- descriptors.

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

-- The per-pixel RMS amplitude of rung η: η/√d (x + ηu leaves [0,1]
-- everywhere on average once it reaches 1).
local function rms(p, eta) return eta / math.sqrt(p.input_dim) end

-- The float64 check behind every call (bump.classify's errors): image i's
-- r at rung s lies within |r|·(noise + |fd|)/(1 − |fd|) of an independent
-- float64 forward-difference evaluation, noise its float32 error bound
-- (p.noise, none in a float64 run) and fd = p.fd_jvp[i], its JVP energy's
-- deviation from a float64 forward difference (r64/r_fd = 1 + fd).  NaN
-- where not checked; nil for a profile without the check (made before it).
local function float64_error(p, i, s)
  local r, fd = p.per_image[i][s], p.fd_jvp[i]
  if r ~= r then return nil end
  local nz = p.options.precision == "float64" and 0 or (p.noise and p.noise[i] and p.noise[i][s] or NAN)
  if fd == nil or fd ~= fd or nz ~= nz or math.abs(fd) >= 1 then return NAN end
  return math.abs(r) * (nz + math.abs(fd)) / (1 - math.abs(fd))
end

local function float64_errors(p, images)
  if not p.fd_jvp then return nil end
  local E = {}
  for s = 1, #p.scales do
    local e = 0
    for _, i in ipairs(images) do
      local v = float64_error(p, i, s)
      if v and (v ~= v or e ~= e) then e = NAN elseif v then e = math.max(e, v) end
    end
    E[s] = e
  end
  return E
end

-- An interrupted profile's summary comes back at once (Ctrl-C in the REPL
-- or Jupyter: within 2 s).  Its cost is the two bootstraps over images and
-- the descriptors of every resample: about bootstrap × (images + 8) × 70 ns
-- (9 rungs, a shared 2-core EPYC under load; each image's own test is
-- 0.07 ms); 1600 images a cheap model had finished took 24 s.  Past
-- INTERRUPTED_WORK (quick preset, 200 resamples: 52 images; paper, 1000: 4)
-- the bands, the shape test and the descriptors' CIs are left out and said
-- to be; srgeo.profile.aggregate(p) computes them.
local INTERRUPTED_WORK = 12000
P.INTERRUPTED_WORK = INTERRUPTED_WORK

-- Whether an interrupted profile of n images skips its bootstrap.
local function skips_bootstrap(o, n) return n >= 2 and (o.bootstrap or 0) * (n + 8) > INTERRUPTED_WORK end

local function aggregate(p, interrupted)
  local ns, rows, o = #p.scales, p.per_image, p.options
  p.median = median_curve(rows, ns)
  p.mean = mean_curve(rows, ns)
  local level = o.ci or 0.95
  local lo_q, hi_q = (1 - level) / 2, 1 - (1 - level) / 2
  p.lo, p.hi = {}, {}
  local skip = interrupted and skips_bootstrap(o, #rows)
  -- The band: pointwise quantiles of the smoothed bootstrap the shape test
  -- draws its simultaneous bounds from (the plain bootstrap of a median puts
  -- each end on one image's value, so the band jumps with any image's
  -- estimate and is too narrow for small n: bump.smoothed_bootstrap).  The
  -- descriptors' CIs resample whole curves, unjittered (boots).
  local boots, sboots
  if #rows >= 2 and (o.bootstrap or 0) > 0 and not skip then
    boots = stats.bootstrap(rows, function(sample) return median_curve(sample, ns) end, o.bootstrap, (o.seed or 0) + 17)
    sboots = bump.smoothed_bootstrap(rows, o.bootstrap, (o.seed or 0) + 29)
    for s = 1, ns do
      local col = stats.column(sboots, s)
      p.lo[s], p.hi[s] = stats.quantile(col, lo_q), stats.quantile(col, hi_q)
    end
  else
    for s = 1, ns do p.lo[s], p.hi[s] = p.median[s], p.median[s] end
  end
  local top = p.scales[ns]
  local bound = p.input_dim and rms(p, top) >= 1 or false
  local alpha = o.alpha or 0.05
  local function image_shape(i)
    local se = {}
    for s = 1, ns do se[s] = (p.se and p.se[i] and p.se[i][s] or NAN) * math.abs(rows[i][s]) end
    return bump.classify { scales = p.scales, values = rows[i], se = se, alpha = alpha, bound = bound,
                           errors = float64_errors(p, { i }) }
  end
  if skip then
    local why = string.format("interrupted (Ctrl-C) with %d images: no bootstrap band, shape test over images or CIs "
      .. "(%d resamples would keep the prompt away; srgeo.profile.aggregate(p) computes them)", #rows, o.bootstrap)
    p.shape = { class = "undetermined", text = "undetermined: " .. why, reason = why, alpha = alpha, method = "none",
                n = #rows, bound = bound, rungs = ns }
  elseif #rows == 1 then
    p.shape = image_shape(1)
  else
    local all = {}
    for i = 1, #rows do all[i] = i end
    p.shape = bump.classify { scales = p.scales, rows = rows, boots = sboots, bootstrap = o.bootstrap,
                              seed = (o.seed or 0) + 29, alpha = alpha, bound = bound, errors = float64_errors(p, all) }
  end
  p.image_shapes = {}
  for i = 1, #rows do
    local sh = image_shape(i)
    p.image_shapes[i] = { class = sh.class, text = sh.text }
  end
  p.descriptors = bump.describe(p.scales, p.median, boots, p.shape, level)
  p.bump = p.shape.class == "bump"
  return p
end

-- range = "auto": the ladder extended upward with its own top spacing, one
-- rung at a time, until the shape test finds a bump (its decay is seen) or
-- a rung's per-pixel RMS reaches 1; then (refine) rungs halfway between the
-- peak and its neighbours.
local MAX_ADDED = 64

-- The rungs range = "auto" may still add after the ladder as it stands:
-- until a rung's per-pixel RMS reaches 1 (at most MAX_ADDED in all), and
-- refine's two when it has not run yet: an upper bound (a bump seen stops
-- it sooner).
local function rungs_to_come(p, refine_pending)
  local o, k = p.options, 0
  if o.range == "auto" then
    local ns, top = #p.scales, p.scales[#p.scales]
    local step = ns >= 2 and p.scales[ns] / p.scales[ns - 1] or 10 ^ 0.25
    local added = p.range and p.range.added or 0
    if rms(p, top) < 1 and step > 1 then k = math.ceil(math.log(math.sqrt(p.input_dim) / top) / math.log(step)) end
    k = math.max(0, math.min(k, MAX_ADDED - added))
  end
  if o.refine and refine_pending then k = k + 2 end
  return k
end

-- Progress of the whole profile, in passes (p.forwards counts every
-- forward and JVP pass the engine runs): those done against a forecast of
-- the whole profile's, so the ETA is the profile's, not a stage's.  Each
-- stage forecasts its own rest as it learns its cost (fixed: its passes
-- per image so far times the images left; sequential: after every image's
-- first step, each open rung's predicted directions (settle) at the passes
-- a direction of a rung has cost so far), and range = "auto" adds the
-- rungs it may still add (rungs_to_come) at the first stage's passes per
-- rung.  o.progress: false (none), true (a bar on stderr, util.progress)
-- or a function called with {done =, total =, stage =, elapsed =}.
local function new_progress(run, p)
  local o = run.o
  if o.progress == false then return nil end
  local sink = type(o.progress) == "function" and o.progress or nil
  local bar = not sink and util.progress("profile", 1, { percent = true }) or nil
  local t0 = srgeo._clock()
  local prog = { base = p.forwards, refine_pending = true }
  -- stage_left: the passes this stage still needs; rung_cost: the passes of
  -- one rung over all images (the first stage sets it)
  function prog.update(stage_left, stage, rung_cost)
    if rung_cost and prog.first then prog.rung_cost = rung_cost end
    local more = rungs_to_come(p, prog.refine_pending)
    local done = p.forwards - prog.base
    local total = done + math.max(stage_left, 0) + more * (prog.rung_cost or 0)
    if more > 0 and p.options.range == "auto" then stage = string.format("%s; ≤ %d more rungs", stage, more) end
    prog.last = { done = done, total = total, stage = stage, elapsed = srgeo._clock() - t0 }
    if sink then sink(prog.last) else bar.update(done, "(" .. stage .. ")", total) end
  end
  function prog.finish(ok) if bar then bar.done(ok and "done" or "stopped") end end
  return prog
end

local function fill_stage(run, p, rungs, what)
  fill(run, p, rungs, string.format("%s η %.3g", what, p.scales[rungs[1]]))
end

local function extend(run, p)
  local o = p.options
  local base = #p.scales
  p.range = { mode = o.range, base_rungs = base, added = 0, refined = 0 }
  if o.range == "auto" then
    while true do
      local ns = #p.scales
      local top = p.scales[ns]
      if p.shape.class == "bump" then
        p.range.stop = "decided"
        p.range.reason = string.format("a decay after the peak is seen (η %.3g → %.3g)", p.shape.decay.eta_from or NAN,
          p.shape.decay.eta_to)
        break
      end
      if rms(p, top) >= 1 then
        p.range.stop = "bound"
        p.range.reason = string.format("the top rung η %.3g has per-pixel RMS %.3g ≥ 1 (the whole [0,1] range)", top,
          rms(p, top))
        break
      end
      if p.range.added >= MAX_ADDED then
        p.range.stop = "limit"
        p.range.reason = string.format("%d rungs added without a decision", MAX_ADDED)
        break
      end
      local step = ns >= 2 and p.scales[ns] / p.scales[ns - 1] or 10 ^ 0.25
      local new = add_rungs(p, { top * step })
      p.range.added = p.range.added + 1
      fill_stage(run, p, new, "range auto: rung")
      publish(p)
      aggregate(p)
    end
  else
    p.range.stop = "fixed"
    p.range.reason = "the ladder as set (range = \"paper\")"
  end
  if o.refine and p.shape.class == "bump" then
    local s = p.shape.peak.rung
    local etas = {}
    if s > 1 then etas[#etas + 1] = math.sqrt(p.scales[s - 1] * p.scales[s]) end
    if s < #p.scales then etas[#etas + 1] = math.sqrt(p.scales[s] * p.scales[s + 1]) end
    local new = add_rungs(p, etas)
    p.range.refined = #new
    if run.prog then run.prog.refine_pending = false end
    fill_stage(run, p, new, "refining: rungs from")
    publish(p)
    aggregate(p)
  end
  local top = p.scales[#p.scales]
  p.range.top_eta, p.range.top_rms = top, rms(p, top)
end

--- srgeo.profile.check_options(opts): the options checked as srgeo.profile
--- checks them before the first image (scripts call it on their command line).
function P.check_options(opts) resolve(opts, D224) end

--- srgeo.profile(model, images, opts [, hooks]) -> profile.  hooks (not
--- options: they change no result): on_image = function(p, i), called as
--- image i finishes its first stage, p._state[i] then holds its per-rung
--- moments (srgeo.cache checkpoints it); resume = { n_images = k, _state =
--- the states of images 1..k, forwards, exact_pairs, shared_layers = the
--- totals after image k }, taken as they are and not recomputed: images are
--- seeded by index, so the result is the one an uninterrupted run gives.
--- The first stage is the given ladder with fixed directions; rungs that
--- range "auto" adds are computed again after a resume, and a sequential
--- profile (whose images close together) neither reports nor resumes.
--- Under mpirun every stage's images are spread over the ranks (each_image;
--- on_image on rank 0 alone) and every rank gets the whole profile, bit for
--- bit one process's at the same threads per process.
local function profile(model, X, opts, hooks)
  if type(model) ~= "userdata" or not model.forward then
    error("profile: model must be an srgeo module, got " .. (model == nil and "nil" or type(model)), 2)
  end
  local n, get = image_source(X)
  if n == 0 then error("profile: no images", 2) end
  local first = get(1)
  local d = 1
  for _, s in ipairs(first:shape()) do d = d * s end
  local o = resolve(opts, d)
  family_of(o)
  local run = new_run(model, X, o, d)
  local id = require("srgeo.identity").of(model, X, o) -- before a float64 copy changes the weights' bytes
  local restore = model:dtype()
  if run.f64 then model:double() end
  local p = setmetatable({
    scales = o.scales, forwards = 0, seconds = 0, input_dim = d, options = o, label = id.label, model = id.model, identity = id,
    n_images = run.n, version = srgeo.version, _state = {}, _filled = 0,
    estimator = {
      mode = o.sequential and "sequential" or "fixed", paired = o.paired or false, orthogonal = o.orthogonal or 0,
      directions = o.directions, antipodal = o.antipodal,
      -- a measurement of bf16's error, not a float32 profile (core/stats/profile.h)
      emulate_bf16 = o.emulate_bf16 or nil,
      jvp = o.paired and "each direction's own" or string.format("the first %d directions", o.jvp_directions),
      jvp_rule = o.directional and P.DIRECTIONAL_RULE or P.SUBGRADIENT_RULE,
      rule = o.sequential and (o.target_ci and string.format("each image's rung until the relative 95%% CI of r is within %g", o.target_ci)
        or P.SEQUENTIAL_RULE) or nil,
    },
  }, Profile)
  local start = 1
  local resume = hooks and hooks.resume
  if resume and not o.sequential then
    local k = resume.n_images
    if math.type(k) ~= "integer" or k < 1 or k > run.n then
      error(string.format("profile: hooks.resume holds %s images of %d", tostring(k), run.n), 2)
    end
    for i = 1, k do
      local st = type(resume._state) == "table" and resume._state[i]
      if type(st) ~= "table" or type(st.rungs) ~= "table" or #st.rungs ~= #p.scales then
        error(string.format("profile: hooks.resume lacks image %d's state on %d rungs", i, #p.scales), 2)
      end
      p._state[i] = util.copy(st) -- the caller's tables stay as given (range auto remaps rungs)
    end
    p.forwards, p.exact_pairs, p.shared_layers = resume.forwards or 0, resume.exact_pairs, resume.shared_layers
    start = k + 1
  end
  local on_image = hooks and hooks.on_image
  run.prog = new_progress(run, p)
  if run.prog then run.prog.first = true end
  local t0 = srgeo._clock()
  local rungs = {}
  for s = 1, #p.scales do rungs[s] = s end
  local ok, err = pcall(function()
    fill(run, p, rungs, "first stage", start, on_image)
    if run.prog then run.prog.first = false end
    p.n_images = p._filled
    publish(p)
    aggregate(p)
    extend(run, p)
  end)
  if run.prog then run.prog.finish(ok) end
  if run.f64 and restore == "float32" then model:float() end
  p.seconds = srgeo._clock() - t0
  if not ok then
    -- Ctrl-C keeps what is done; anything else is a real error.
    if tostring(err):find("interrupted", 1, true) and (p._filled or 0) > 0 then
      p.interrupted = true
      if p.median then
        -- interrupted while extending or refining: the ladder as it was
        local keep = {}
        for s = 1, #p.scales do
          local complete = true
          for i = 1, p.n_images do complete = complete and ((p._state[i].rungs[s] or {}).n or 0) > 0 end
          keep[s] = complete
        end
        for i = 1, p.n_images do
          local rungs2 = {}
          for s = 1, #p.scales do if keep[s] then rungs2[#rungs2 + 1] = p._state[i].rungs[s] end end
          p._state[i].rungs = rungs2
        end
        local sc = {}
        for s = 1, #p.scales do if keep[s] then sc[#sc + 1] = p.scales[s] end end
        p.scales, p.options.scales = sc, sc
      else
        p.n_images = p._filled
      end
      io.stderr:write(string.format("profile: interrupted after %d of %d images; keeping those%s\n", p.n_images, run.n,
        skips_bootstrap(o, p.n_images) and " (no bootstrap bands or shape test over images: srgeo.profile.aggregate(p) "
        .. "computes them)" or ""))
      publish(p)
      aggregate(p, true)
      p.range = p.range or { mode = o.range, base_rungs = #p.scales, added = 0, refined = 0 }
      p.range.stop, p.range.reason = "interrupted", "interrupted (Ctrl-C)"
      p.range.top_eta = p.scales[#p.scales]
      p.range.top_rms = rms(p, p.range.top_eta)
    else
      error(err, 0)
    end
  end
  p._state, p._filled = nil, nil
  return p
end

P.DIRECTIONAL_RULE = "directional (one-sided derivative at kinks and ties, u and -u each their own)"
P.SUBGRADIENT_RULE = "subgradient (PyTorch's: ReLU mask x > 0, first maximum)"

--- The summary's lines on kinks and ties: the JVP rule, how many images
--- met ties (ReLU inputs exactly at 0, tied maxima: exact under the
--- directional rule) and a warning for points without a finite one-sided
--- derivative (sqrt, log, 1/x at 0 ...), where r's denominator is not exact.
function Profile:kink_lines()
  local o, out = self.options or {}, {}
  local function stats(list)
    local n, total, max = 0, 0, 0
    for _, v in ipairs(list or {}) do
      if v > 0 then n = n + 1 end
      total, max = total + v, math.max(max, v)
    end
    return n, total, max
  end
  if o.directional == nil or not self.ties then
    out[1] = "JVP rule: not recorded (a profile saved before srgeo took the directional rule at ties)"
    return out
  end
  if o.directional == false then
    out[1] = "JVP rule: " .. P.SUBGRADIENT_RULE .. "; ties not counted: where an image has them (flat regions) "
      .. "the plateau can sit off 1"
    return out
  end
  local nt, tt, mt = stats(self.ties)
  local _, tn = stats(self.near_ties)
  out[1] = string.format("JVP rule: %s; ties: %d of %d images (%d units/windows in all, at most %d in one; %d "
    .. "within %d ulps, not exactly)", P.DIRECTIONAL_RULE, nt, self.n_images or 0, tt, mt, tn, srgeo._tie_ulps or 0)
  local fd, nfd = 0, 0
  for i = 1, self.n_images or 0 do
    local v = self.fd_jvp and self.fd_jvp[i]
    if v and v == v then fd, nfd = math.max(fd, math.abs(v)), nfd + 1 end
  end
  out[#out + 1] = nfd > 0 and string.format("float64 check: the JVP energies of %d images lie within %.2g of a "
    .. "float64 one-sided forward difference (per-pixel RMS step 1e-8, the %d noise directions), every call's "
    .. "bounds widened by it and the float32 error bound", nfd, fd, o.noise_directions or 0)
    or "float64 check: none (noise_directions = 0): the shape call is not checked against float64"
  local ns, ts, ms = stats(self.singular)
  if ns > 0 then
    out[#out + 1] = string.format("WARNING: %d points without a finite one-sided derivative (sqrt, log, 1/x at 0, pow at 0, "
      .. "a division by 0) in %d of %d images (at most %d in one): r's denominator is not exact there",
      ts, ns, self.n_images or 0, ms)
  end
  return out
end

local function fmt(v, w)
  if v == nil or v ~= v then return string.rep(" ", (w or 10) - 3) .. "nan" end
  return string.format("%" .. (w or 10) .. ".4g", v)
end

--- A readable table: one line per rung, then the shape test, the range and
--- the descriptors with their CIs (or why they are undefined).
function Profile:summary()
  local out = {}
  local o = self.options
  local title = self.label or self.model or "profile"
  local est = self.estimator or {}
  out[#out + 1] = string.format("%s: %d images, %s, %d scales, %.1f s, %d forwards%s", title, self.n_images,
    est.mode == "sequential" and string.format("sequential (at most %d directions)", o.directions * (o.antipodal and 2 or 1))
      or string.format("%d directions", o.directions * (o.antipodal and 2 or 1)),
    #self.scales, self.seconds, self.forwards, self.interrupted and " (interrupted)" or "")
  if self.identity then out[#out + 1] = require("srgeo.identity").describe(self.identity) end
  out[#out + 1] = string.format("%10s %10s %10s %10s %10s", "eta", "median r", "lo", "hi", "mean r")
  for s, eta in ipairs(self.scales) do
    out[#out + 1] = string.format("%10.4g %s %s %s %s", eta, fmt(self.median[s]), fmt(self.lo[s]), fmt(self.hi[s]), fmt(self.mean[s]))
  end
  if self.shape then
    out[#out + 1] = "shape: " .. self.shape.text
    if self.image_shapes and #self.image_shapes > 1 then
      out[#out + 1] = "per image (within-image SEs): " .. bump.counts(self.image_shapes)
    end
  end
  if self.range then
    out[#out + 1] = string.format("range: %s, %d rungs (%d added, %d refined), top η %.4g (per-pixel RMS %.3g); stopped: %s",
      self.range.mode, #self.scales, self.range.added or 0, self.range.refined or 0, self.range.top_eta or NAN,
      self.range.top_rms or NAN, self.range.reason or "?")
  end
  if est.mode then
    out[#out + 1] = string.format("estimator: %s, JVPs: %s, %s directions%s", est.mode, est.jvp or "?",
      (est.orthogonal or 0) > 1 and string.format("orthonormal blocks of %d", est.orthogonal) or "independent",
      est.rule and "; rule: " .. est.rule or "")
  end
  for _, line in ipairs(self:kink_lines()) do out[#out + 1] = line end
  out[#out + 1] = string.format("%-12s %10s %10s %10s", "descriptor", "value", "lo", "hi")
  for _, k in ipairs(bump.DESCRIPTORS) do
    local dsc = self.descriptors[k]
    out[#out + 1] = string.format("%-12s %s %s %s%s", k, fmt(dsc.value), fmt(dsc.lo), fmt(dsc.hi),
      dsc.reason and "  (" .. dsc.reason .. ")" or "")
  end
  out[#out + 1] = bump.PEAK_NOTE
  return table.concat(out, "\n")
end

Profile.__tostring = Profile.summary

-- The profile's files go where asked, their folder made as srgeo.plot makes
-- a figure's (README's first example writes out/ in a fresh checkout).
local function parent_made(path)
  local dir = util.dirname(path)
  if dir ~= "." then util.mkdir(dir) end
  return path
end

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
  return util.write_atomic(parent_made(path), table.concat(lines, "\n") .. "\n")
end

-- What save_json keeps: every field but functions, userdata and private
-- (_-prefixed) ones, so whatever a fresh profile carries (its shape call
-- and evidence, descriptors with CIs and reasons, the range, the
-- estimator, identity fields others add) survives save/load and the unit
-- cache.
local function plain(v)
  local t = type(v)
  if t == "function" or t == "userdata" or t == "thread" then return nil end
  if t ~= "table" then return v end
  local out = {}
  for k, x in pairs(v) do
    if not (type(k) == "string" and k:sub(1, 1) == "_") then out[k] = plain(x) end
  end
  return out
end

function Profile:save_json(path)
  local t = plain(self)
  t.format = "srgeo.profile/1"
  return util.write_atomic(parent_made(path), json.encode(t, { indent = true }) .. "\n")
end

-- JSON writes NaN as null, and a null object field reads back as absent:
-- the fields that hold NaN by design get it back.
local function restore_nan(t)
  local function fill(rec, keys)
    if type(rec) == "table" then for _, k in ipairs(keys) do if rec[k] == nil then rec[k] = NAN end end end
  end
  for _, d in pairs(t.descriptors or {}) do fill(d, { "value", "lo", "hi" }) end
  for _, j in ipairs(t.jacobian_fro or {}) do fill(j, { "value", "lo", "hi" }) end
  for _, row in ipairs(t.moments or {}) do
    for _, m in ipairs(row) do fill(m, { "c" }) end
  end
  if t.shape then fill(t.shape.plateau, { "value", "lo", "hi" }) end
end

function P.load(path)
  local t = json.decode(util.read_file(path))
  if type(t) ~= "table" or t.format ~= "srgeo.profile/1" then
    error("profile.load: " .. path .. " is not an srgeo profile (format srgeo.profile/1)", 2)
  end
  t.format = nil
  restore_nan(t)
  return setmetatable(t, Profile)
end

--- A profile's plain table (srgeo.mpi sends no metatables) as a profile again.
function P.adopt(t) return t and setmetatable(t, Profile) end

--- Rebuild curves, bands, the shape test and the descriptors from per_image
--- (e.g. after merging images of several runs, or after Ctrl-C left the
--- bootstrap out: P.INTERRUPTED_WORK).  p needs scales, per_image
--- and options (ci, bootstrap, seed, alpha); input_dim tells whether the
--- ladder reached the physical bound.
function P.aggregate(p) return aggregate(setmetatable(p, Profile)) end

--- srgeo.profile.grid(profiles [, field]) -> scales, rows: the profiles'
--- curves (field, default "median") on the union of their ladders (range =
--- "auto" extends some further, refine adds rungs), NaN where a profile has
--- no rung; for heatmaps and tables across profiles.
function P.grid(ps, field)
  field = field or "median"
  local all = {}
  for _, p in ipairs(ps) do for _, e in ipairs(p.scales) do all[#all + 1] = e end end
  table.sort(all)
  local scales = {}
  for _, e in ipairs(all) do
    if #scales == 0 or e > scales[#scales] * (1 + 1e-9) then scales[#scales + 1] = e end
  end
  local rows = {}
  for i, p in ipairs(ps) do
    local row, j = {}, 1
    for k, e in ipairs(scales) do
      while j <= #p.scales and p.scales[j] < e * (1 - 1e-9) do j = j + 1 end
      row[k] = (j <= #p.scales and math.abs(p.scales[j] / e - 1) <= 1e-9) and p[field][j] or NAN
    end
    rows[i] = row
  end
  return scales, rows
end

--- The raw descriptors of one curve (srgeo.bump.descriptors).
P.descriptors = bump.descriptors
P.descriptor_names = bump.DESCRIPTORS

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

-- The rungs two profiles share (η equal to 1e-9): index lists into each.
local function common_rungs(p1, p2)
  local i1, i2, j = {}, {}, 1
  for i, e in ipairs(p1.scales) do
    while j <= #p2.scales and p2.scales[j] < e * (1 - 1e-9) do j = j + 1 end
    if j <= #p2.scales and math.abs(p2.scales[j] / e - 1) <= 1e-9 then i1[#i1 + 1], i2[#i2 + 1] = i, j end
  end
  return i1, i2
end

local function rows_at(rows, idx)
  local out = {}
  for i, r in ipairs(rows) do
    local t = {}
    for k, s in ipairs(idx) do t[k] = r[s] end
    out[i] = t
  end
  return out
end

-- A comparison prints as a table (the REPL shows c = srgeo.profile.compare
-- (p, p0) readably); its fields stay plain: statistic, p, permutations,
-- scales, labels.
local Comparison = { __name = "srgeo.comparison" }
Comparison.__index = Comparison
function Comparison.__tostring(c)
  local s = c.scales or {}
  local lines = { string.format("profile comparison: %s vs %s; %d shared rungs (η %.3g … %.3g), %d permutations",
    tostring(c.labels and c.labels[1] or "p1"), tostring(c.labels and c.labels[2] or "p2"), #s, s[1] or NAN,
    s[#s] or NAN, c.permutations or 0),
    string.format("  %-13s %-22s %s", "quantity", "observed difference", "p") }
  local function row(k, what)
    local v, pv = c.statistic and c.statistic[k], c.p and c.p[k]
    -- a descriptor one profile lacks (no decay after a rise) is no difference
    if v ~= nil and v ~= v then
      lines[#lines + 1] = string.format("  %-13s %-22s %s", k, "undefined", "(in one profile or both)")
      return
    end
    lines[#lines + 1] = string.format("  %-13s %-22s %s", k, v == nil and "" or string.format("%.4g%s", v, what),
      pv == nil and "" or string.format("%.3g", pv))
  end
  row("curve", " (curve distance)")
  for _, k in ipairs(bump.DESCRIPTORS) do row(k, (k == "onset" or k == "peak_eta") and " (|Δ log10 η|)" or "") end
  return table.concat(lines, "\n")
end

--- Two-sample permutation test between profiles, over the rungs they share
--- (range = "auto" may have extended one ladder further): images are
--- exchanged between the groups; p-values for the curve distance and for
--- each descriptor difference.  The result prints as a table (tostring);
--- c.p[k] and c.statistic[k] for curve and each descriptor.
function P.compare(p1, p2, opts)
  opts = opts or {}
  local i1, i2 = common_rungs(p1, p2)
  if #i1 < 3 then error(string.format("profile.compare: the profiles share %d rungs (need 3)", #i1), 2) end
  local scales = {}
  for k, s in ipairs(i1) do scales[k] = p1.scales[s] end
  local r1, r2 = rows_at(p1.per_image, i1), rows_at(p2.per_image, i2)
  local ns, B = #scales, opts.permutations or 1000
  local pool = {}
  for _, r in ipairs(r1) do pool[#pool + 1] = r end
  for _, r in ipairs(r2) do pool[#pool + 1] = r end
  local n1 = #r1
  local function stat(rows1, rows2)
    local m1, m2 = median_curve(rows1, ns), median_curve(rows2, ns)
    local d1, d2 = bump.descriptors(scales, m1), bump.descriptors(scales, m2)
    local t = { curve = curve_distance(m1, m2) }
    for _, k in ipairs(bump.DESCRIPTORS) do
      local a, b = d1[k], d2[k]
      if k == "onset" or k == "peak_eta" then a, b = math.log(a, 10), math.log(b, 10) end
      t[k] = math.abs(a - b)
    end
    return t
  end
  local obs = stat(r1, r2)
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
  local res = { statistic = obs, p = {}, permutations = B, scales = scales, labels = { p1.label, p2.label } }
  for k, c in pairs(count) do res.p[k] = (obs[k] == obs[k]) and (1 + c) / (1 + B) or NAN end
  return setmetatable(res, Comparison)
end

return setmetatable(P, { __call = function(_, ...) return profile(...) end })
