-- nn_spec.lua: module trees from Lua: construction, options, forward/jvp/vjp.
local T = ...
local srgeo = require "srgeo"
local nn = srgeo.nn

T.test("nn.linear forward/jvp/vjp shapes and linearity", function()
  local m = nn.linear { in_features = 4, out_features = 3, seed = 1 }
  local x = srgeo.randn({ 2, 4 }, 1)
  local y = m:forward(x)
  T.eq(table.concat(y:shape(), ","), "2,3")
  local v = srgeo.randn({ 6, 4 }, 2)
  local y2, jv = m:jvp(x, v)
  T.eq(table.concat(jv:shape(), ","), "6,3")
  T.eq(table.concat(y2:shape(), ","), "2,3")
  local g = m:vjp(x, srgeo.randn({ 2, 3 }, 3))
  T.eq(table.concat(g:shape(), ","), "2,4")
end)

T.test("nn options: unknown, missing and mistyped options are errors", function()
  T.raises(function() nn.linear { in_features = 4, out_feature = 3 } end, "out_features is required")
  T.raises(function() nn.linear { in_features = 4, out_features = 3, biass = false } end, "unknown option 'biass'")
  T.raises(function() nn.linear { in_features = "4", out_features = 3 } end, "must be a number")
end)

T.test("nn.sequential names children and exposes dotted parameter paths", function()
  local m = nn.sequential { { "fc1", nn.linear { in_features = 4, out_features = 8 } },
                            nn.linear { in_features = 8, out_features = 2 } }
  local names = m:param_names()
  T.eq(table.concat(names, " "), "fc1.weight fc1.bias 1.weight 1.bias")
  T.eq(table.concat(m:get("fc1.weight"):shape(), ","), "8,4")
  T.raises(function() m:get("fc2.weight") end, "no parameter named 'fc2.weight'")
  T.raises(function() m:forward(srgeo.randn({ 2, 5 }, 1)) end, "linear: input (2,5) must end in in_features=4")
end)

T.test("nn: a float64 input to a float32 module is a clear error", function()
  local m = nn.linear { in_features = 2, out_features = 2 }
  T.raises(function() m:forward(srgeo.randn({ 1, 2 }, 1):double()) end, "float64 but the parameters are float32")
  m:double()
  T.eq(m:forward(srgeo.randn({ 1, 2 }, 1):double()):dtype(), "float64")
end)
