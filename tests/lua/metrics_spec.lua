-- metrics_spec.lua: ReLU boundaries and flips, the exact shortcut, γ(ε),
-- trajectory length: on maps whose answers are known.
local T = ...
local srgeo = require "srgeo"
local nn = srgeo.nn
local metrics = require "srgeo.metrics"

local function relu_net(seed)
  local m = nn.sequential {
    { "fc1", nn.linear { in_features = 6, out_features = 16, seed = seed } },
    { "relu", nn.relu {} },
    { "fc2", nn.linear { in_features = 16, out_features = 3, seed = seed + 1 } },
  }
  m:init(seed)
  return m:double()
end

T.test("one ReLU layer: r = 1 exactly below the first-boundary distance, not above", function()
  local m = relu_net(1)
  local x = srgeo.randn({ 1, 6 }, 2, "float64")
  local u = metrics.unit_directions(x, 1, 3)
  local dist = metrics.boundary(m, x, { u = u })
  local t = dist[1]
  T.truthy(t > 0 and t < math.huge, "finite boundary ahead: " .. tostring(t))
  -- Φ(x+ηu) − Φ(x) − ηJu vanishes for η < t and not beyond
  local _, ju = m:jvp(x, u)
  local function residual(eta)
    return (m:forward(x + u * eta) - m:forward(x) - ju * eta):norm()
  end
  T.truthy(residual(0.999 * t) < 1e-12, "linear below the boundary: " .. residual(0.999 * t))
  T.truthy(residual(1.5 * t) > 1e-9, "nonlinear beyond it: " .. residual(1.5 * t))
  -- and the flip count jumps from 0 to 1 unit exactly there
  local f = srgeo.relu_flips(m, x, srgeo.cat({ x + u * (0.999 * t), x + u * (1.001 * t) }, 1))
  T.eq(f[1], 0)
  T.close(f[2], 1 / 16, 1e-12)
end)

T.test("relu_flips equals a brute-force count of sign changes", function()
  local m = relu_net(4)
  local x = srgeo.randn({ 1, 6 }, 5, "float64")
  local X = srgeo.randn({ 7, 6 }, 6, "float64")
  local f = srgeo.relu_flips(m, x, X)
  local fc1 = m:find("fc1")
  local z0 = fc1:forward(x):totable()[1]
  local Z = fc1:forward(X):totable()
  for r = 1, 7 do
    local c = 0
    for j = 1, 16 do if (z0[j] > 0) ~= (Z[r][j] > 0) then c = c + 1 end end
    T.close(f[r], c / 16, 1e-15, "row " .. r)
  end
end)

T.test("profile exact_relu: same r as brute force, fewer forwards; non-ReLU nets refused", function()
  local m = relu_net(7)
  local X = { srgeo.randn({ 1, 6 }, 8, "float64"), srgeo.randn({ 1, 6 }, 9, "float64") }
  local o = { directions = 64, jvp_directions = 64, scales = srgeo.util.logspace(-3, 1, 9),
              precision = "float64", progress = false }
  local p1 = srgeo.profile(m, X, o)
  o.exact_relu = true
  local p2 = srgeo.profile(m, X, o)
  for s = 1, 9 do T.close(p2.median[s], p1.median[s], 1e-9, "rung " .. s) end
  T.truthy(p2.exact_pairs > 0, "some pairs solved exactly")
  T.truthy(p2.forwards < p1.forwards, p2.forwards .. " vs " .. p1.forwards)
  local g = nn.sequential { nn.linear { in_features = 6, out_features = 4 }, nn.gelu {} }
  T.raises(function() srgeo.profile(g, X, { preset = "quick", exact_relu = true, progress = false }) end,
    "not piecewise linear with ReLU kinks only (found gelu)")
end)

T.test("local linearity gamma: 0 for a linear map, positive for a ReLU net", function()
  local lin = nn.linear { in_features = 6, out_features = 3, seed = 1 }:double()
  local x = srgeo.randn({ 1, 6 }, 1, "float64")
  local g0 = metrics.local_linearity(lin, x, 0.5, { steps = 5 })
  T.truthy(g0 < 1e-20, "linear gamma " .. g0)
  local g1 = metrics.local_linearity(relu_net(2), x, 2.0, { steps = 10, norm = "l2" })
  T.truthy(g1 > 1e-6, "relu gamma " .. g1)
end)

T.test("trajectory length: eta*|Ju| inside the linear region, never shorter than the chord", function()
  local lin = nn.linear { in_features = 6, out_features = 3, seed = 1 }:double()
  local x = srgeo.randn({ 1, 6 }, 1, "float64")
  local u = srgeo.randn({ 1, 6 }, 2, "float64")
  local _, ratio = metrics.trajectory_length(lin, x, u, 3.0)
  T.close(ratio, 1, 1e-9)
  local m = relu_net(3)
  local un = u / u:norm()
  local t = metrics.boundary(m, x, { u = un })[1]
  local _, inside = metrics.trajectory_length(m, x, u, 0.99 * t)
  T.close(inside, 1, 1e-9, "linear below the first boundary")
  local len = metrics.trajectory_length(m, x, u, 10.0, { steps = 200 })
  local chord = (m:forward(x + un * 10.0) - m:forward(x)):norm()
  T.truthy(len >= chord * (1 - 1e-12), string.format("path %g shorter than chord %g", len, chord))
end)

-- fc1 = identity, fc2 = (−1, 1)·h + 0.3: at x = (0, −0.5) unit 1 of fc1 sits
-- exactly on its kink and v = (1, 0) moves it into the positive side, so fc2's
-- pre-activation is 0.3 − t and its boundary lies at t = 0.3.  PyTorch's mask
-- (x > 0) drops unit 1's tangent: fc2 looks constant, no boundary ahead.
T.test("relu_boundary and relu_flips take the directional rule at a ReLU exactly at 0", function()
  local m = nn.sequential {
    { "fc1", nn.linear { in_features = 2, out_features = 2 } }, { "r1", nn.relu {} },
    { "fc2", nn.linear { in_features = 2, out_features = 1 } }, { "r2", nn.relu {} },
  }
  m = m:double()
  local P = m:parameters()
  P["fc1.weight"]:copy(srgeo.tensor({ { 1, 0 }, { 0, 1 } }, "float64"))
  P["fc1.bias"]:copy(srgeo.tensor({ 0, 0 }, "float64"))
  P["fc2.weight"]:copy(srgeo.tensor({ { -1, 1 } }, "float64"))
  P["fc2.bias"]:copy(srgeo.tensor({ 0.3 }, "float64"))
  local x = srgeo.tensor({ { 0, -0.5 } }, "float64")
  local v = srgeo.tensor({ { 1, 0 } }, "float64")
  local t = metrics.boundary(m, x, { u = v })[1]
  T.close(t, 0.3, 1e-12, "the boundary of fc2's unit along +v")
  -- brute force: fc2's output switches off between 0.299 and 0.301
  T.truthy(m:forward(x + v * 0.299):get(1, 1) > 0 and m:forward(x + v * 0.301):get(1, 1) == 0)
  -- a unit at 0 is not a flip whichever side a row lies on: 0 flips at small η
  local f = srgeo.relu_flips(m, x, srgeo.cat({ x + v * 1e-3, x - v * 1e-3, x + v * 0.31 }, 1))
  T.eq(f[1], 0)
  T.eq(f[2], 0)
  T.close(f[3], 1 / 3, 1e-15, "fc2's unit flips past its boundary")
end)
