-- srgeo.metrics: finite-scale metrics beside r_η, on the same images and
-- directions.
--
--   metrics.relu_flips(m, x, {scales=, directions=, seed=})  fraction of ReLU units
--       whose sign changes along x → x+ηu, per scale (mean over directions)
--   metrics.boundary(m, x, {directions=, seed=})   exact distance to the first
--       activation boundary along each direction (ReLU nets)
--   Both take the directional rule at exact ties, as the profile does: a unit
--   exactly at 0 at x lies in the half-space u moves into, so it neither
--   limits the distance nor counts as a flip, and the layers after it get its
--   one-sided tangent max(0, ż) (PyTorch's mask x > 0 would drop it)
--   metrics.local_linearity(m, x, eps, {...})       Qin et al.'s γ(ε) by projected gradient ascent
--   metrics.trajectory_length(m, x, u, eta, {...})  length of Φ(x+tu), t ∈ [0, η], and its
--       ratio to the linear prediction η‖Ju‖
-- The Jacobian Frobenius norm (Hutchinson, with CI) comes with every profile:
-- p.jacobian_fro[i] = {value, lo, hi}.
local srgeo = require "srgeo"
local stats = require "srgeo.stats"

local M = {}

local function unit_directions(x, n, seed)
  local shape = x:shape()
  shape[1] = n
  local u = srgeo.randn(shape, seed, x:dtype())
  local rows = {}
  for i = 1, n do
    local r = u:narrow(1, i, 1)
    r:copy(r / r:norm())
  end
  return u
end
M.unit_directions = unit_directions

local function rows_for(x, u, etas)
  -- (n·S, ...) rows x + η_s u_i, direction-major
  local n, list = #u, {}
  for i = 1, n do
    local ui = u:narrow(1, i, 1)
    for _, eta in ipairs(etas) do list[#list + 1] = x + ui * eta end
  end
  return srgeo.cat(list, 1)
end

function M.relu_flips(m, x, opts)
  opts = opts or {}
  local scales = opts.scales or error("metrics.relu_flips: opts.scales (list of η) is required", 2)
  local u = opts.u or unit_directions(x, opts.directions or 16, opts.seed or 0)
  local X = rows_for(x, u, scales)
  local f = srgeo.relu_flips(m, x, X)
  local per_scale = {}
  for s = 1, #scales do
    local col = {}
    for i = 1, #u do col[i] = f[(i - 1) * #scales + s] end
    per_scale[s] = stats.mean(col)
  end
  return per_scale, f
end

function M.boundary(m, x, opts)
  opts = opts or {}
  local u = opts.u or unit_directions(x, opts.directions or 16, opts.seed or 0)
  local d, units = srgeo.relu_boundary(m, x, u)
  return d, units, u
end

--- Qin et al. (2019) local linearity γ(ε) = max_{‖δ‖ ≤ ε} g(δ), by projected
--- gradient ascent from random starts.  objective "features" (default):
--- g = ‖Φ(x+δ) − Φ(x) − Jδ‖² on the model's default tap; "loss": g = |ℓ(x+δ) −
--- ℓ(x) − δᵀ∇ℓ(x)| with the cross-entropy at opts.label (full output).
--- norm "linf" (Qin's) or "l2".  Returns γ and the maximising δ.
function M.local_linearity(m, x, eps, opts)
  opts = opts or {}
  local steps, restarts = opts.steps or 20, opts.restarts or 1
  local norm = opts.norm or "linf"
  local alpha = opts.step_size or (norm == "linf" and eps / 4 or eps / 4)
  if norm ~= "linf" and norm ~= "l2" then error("metrics.local_linearity: norm must be \"linf\" or \"l2\"", 2) end
  local objective = opts.objective or "features"
  local f0, l0, g0
  if objective == "features" then
    f0 = m:forward(x)
  elseif objective == "loss" then
    if not opts.label then error("metrics.local_linearity: objective \"loss\" needs opts.label", 2) end
    l0, _, g0 = srgeo._train_step(m, nil, x, { opts.label }, { input_grad = true })
    g0 = g0:clone()
  else
    error("metrics.local_linearity: objective must be \"features\" or \"loss\"", 2)
  end
  local function project(delta)
    if norm == "linf" then return delta:clamp(-eps, eps) end
    local n = delta:norm()
    return n > eps and delta * (eps / n) or delta
  end
  -- value and ascent direction of g at δ
  local function value_grad(delta)
    if objective == "features" then
      local _, jd = m:jvp(x, delta)
      local r = m:forward(x + delta) - f0 - jd
      local g = r:dot(r)
      local grad = (m:vjp(x + delta, r) - m:vjp(x, r)) * 2
      return g, grad
    end
    local l, _, gx = srgeo._train_step(m, nil, x + delta, { opts.label }, { input_grad = true })
    local lin = l - l0 - delta:dot(g0)
    local s = lin >= 0 and 1 or -1
    return math.abs(lin), (gx - g0) * s
  end
  local best, best_delta = -math.huge, nil
  for r = 1, restarts do
    local delta = project((srgeo.rand(x:shape(), (opts.seed or 0) + r, x:dtype()) * 2 - 1) * eps)
    for _ = 1, steps do
      local g, grad = value_grad(delta)
      if g > best then best, best_delta = g, delta:clone() end
      local step = norm == "linf" and grad:sign() * alpha or grad * (alpha / math.max(grad:norm(), 1e-30))
      delta = project(delta + step)
    end
    local g = value_grad(delta)
    if g > best then best, best_delta = g, delta:clone() end
  end
  return best, best_delta
end

--- Length of the feature-space path t ↦ Φ(x + t u), t ∈ [0, η], on `steps`
--- segments, and its ratio to the straight-line linear prediction η‖Ju‖.
function M.trajectory_length(m, x, u, eta, opts)
  opts = opts or {}
  local steps = opts.steps or 64
  u = u / u:norm()
  local ts = {}
  for i = 0, steps do ts[#ts + 1] = eta * i / steps end
  local list = {}
  for _, t in ipairs(ts) do list[#list + 1] = x + u * t end
  local Y = m:forward(srgeo.cat(list, 1))
  local len = 0
  for i = 1, steps do len = len + (Y:narrow(1, i + 1, 1) - Y:narrow(1, i, 1)):norm() end
  local _, ju = m:jvp(x, u)
  local lin = eta * ju:norm()
  return len, len / lin
end

return M
