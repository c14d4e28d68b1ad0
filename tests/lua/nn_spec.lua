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

T.test("nn: vjp from a tap backpropagates from that module only", function()
  local fc1 = nn.linear { in_features = 4, out_features = 6, seed = 3 }
  local m = nn.sequential { { "fc1", fc1 }, { "relu", nn.relu {} }, { "fc2", nn.linear { in_features = 6, out_features = 2 } } }
  local x = srgeo.randn({ 3, 4 }, 1)
  local w = srgeo.randn({ 3, 6 }, 2)
  local g_tap = m:vjp(x, w, { tap = "fc1" })
  local g_ref = fc1:vjp(x, w)
  local a, b = g_tap:totable(), g_ref:totable()
  for i = 1, 3 do for j = 1, 4 do T.close(a[i][j], b[i][j], 1e-6) end end
  T.raises(function() m:vjp(x, srgeo.randn({ 3, 2 }, 2), { tap = "fc1" }) end, "does not match the output (3,6)")
  -- the full model still works afterwards
  T.eq(table.concat(m:vjp(x, srgeo.randn({ 3, 2 }, 2)):shape(), ","), "3,4")
end)

T.test("nn: a module used twice runs forward and jvp; vjp and training are refused naming both places", function()
  local l = nn.linear { in_features = 3, out_features = 3, seed = 2 }
  local m = nn.sequential { { "a", l }, { "relu", nn.relu {} }, { "b", l } }
  local x = srgeo.randn({ 2, 3 }, 1)
  local y = m:forward(x)
  local y2 = l:forward(l:forward(x):clamp(0, math.huge))
  T.eq((y - y2):abs():max(), 0, "forward through both uses")
  T.eq(table.concat(m:jvp(x, srgeo.randn({ 2, 3 }, 3)):shape(), ","), "2,3")
  local msg = "the linear at 'a' is also at 'b' (one module used twice)"
  T.raises(function() m:vjp(x, srgeo.randn({ 2, 3 }, 4)) end, msg)
  m:train()
  T.raises(function() srgeo._train_step(m, srgeo.optim.sgd { lr = 0.1 }, x, { 0, 1 }) end, msg)
  -- two nodes of a graph holding one module, one level down
  local g = nn.graph { { "p", nn.sequential { { "inner", l } } }, { "q", l, "p" } }
  T.raises(function() g:vjp(x, srgeo.randn({ 2, 3 }, 5)) end, "the linear at 'p.inner' is also at 'q'")
  -- a tree without repeats is unaffected, and so is m after the refusal
  T.eq(table.concat(m:forward(x):shape(), ","), "2,3")
end)

T.test("nn.graph: a DAG from Lua, inputs by name, taps, the same output as the residual it spells", function()
  local conv = function(i, o, k) return nn.conv2d { in_channels = i, out_channels = o, kernel_size = k, padding = k // 2 } end
  local g = nn.graph {
    { "conv1", conv(3, 4, 3) },
    { "relu1", nn.relu {} },
    { "conv2", conv(4, 4, 3) },
    { "down", conv(3, 4, 1), "input" },
    { "sum", nn.add {}, { "conv2", "down" } },
    { "relu2", nn.relu {} },
    output = "relu2",
  }
  g:init(4)
  local native = nn.sequential {
    { "", nn.residual { nn.sequential { { "conv1", g:find("conv1") }, { "relu1", g:find("relu1") }, { "conv2", g:find("conv2") } },
                        g:find("down") } },
    { "relu2", g:find("relu2") },
  }
  local x = srgeo.rand({ 2, 3, 6, 6 }, 1)
  T.eq((g:forward(x) - native:forward(x)):abs():max(), 0)
  T.eq(table.concat(g:forward(x, { tap = "relu1" }):shape(), ","), "2,4,6,6")
  T.eq(table.concat(g:param_names(), " "), "conv1.weight conv1.bias conv2.weight conv2.bias down.weight down.bias")
  local _, jv = g:jvp(x, srgeo.randn({ 4, 3, 6, 6 }, 2))
  local _, jn = native:jvp(x, srgeo.randn({ 4, 3, 6, 6 }, 2))
  T.close((jv - jn):abs():max(), 0, 1e-6)
  T.raises(function() nn.graph { { "a", nn.relu {}, "nope" } } end, "reads 'nope', which is not an earlier node")
  T.raises(function() nn.graph { { "a", nn.relu {} }, { "a", nn.relu {} } } end, "two nodes named 'a'")
  T.raises(function() nn.graph { { "s", nn.add {} } } end, "takes 2 inputs, given 1")
  T.raises(function() nn.graph { { "a", nn.relu {} }, output = "b" } end, "reads 'b'")
end)

T.test("nn: buffers are saved and loaded but never in m:parameters()", function()
  local m = nn.sequential {
    { "conv", nn.conv2d { in_channels = 1, out_channels = 2, kernel_size = 1 } },
    { "bn", nn.batchnorm2d { num_features = 2 } },
    { "shift", nn.add { shape = { 2, 1, 1 } } },            -- a constant: a buffer
    { "scale", nn.mul { shape = { 2, 1, 1 }, trainable = true } },
  }
  local keys = function(t) local k = {} for n in pairs(t) do k[#k + 1] = n end table.sort(k) return table.concat(k, " ") end
  T.eq(keys(m:parameters()), "bn.bias bn.weight conv.bias conv.weight scale.value")
  T.eq(keys(m:buffers()), "bn.num_batches_tracked bn.running_mean bn.running_var shift.value")
  T.eq(keys(m:state_dict()), "bn.bias bn.num_batches_tracked bn.running_mean bn.running_var bn.weight conv.bias " ..
    "conv.weight scale.value shift.value")
  m:set("shift.value", srgeo.tensor { { { 1.5 } }, { { -2 } } })
  local path = os.tmpname()
  m:save(path)
  local m2 = nn.sequential {
    { "conv", nn.conv2d { in_channels = 1, out_channels = 2, kernel_size = 1 } },
    { "bn", nn.batchnorm2d { num_features = 2 } },
    { "shift", nn.add { shape = { 2, 1, 1 } } },
    { "scale", nn.mul { shape = { 2, 1, 1 }, trainable = true } },
  }
  m2:load(path)
  os.remove(path)
  T.eq(m2:get("shift.value"):totable()[2][1][1], -2)
  local x = srgeo.rand({ 1, 1, 3, 3 }, 2)
  T.eq((m:eval():forward(x) - m2:eval():forward(x)):abs():max(), 0)
end)

T.test("nn: m:jvp takes PyTorch's subgradient at a kink by default, the one-sided derivative with directional", function()
  local m = nn.relu {}
  local x = srgeo.zeros({ 1, 4 })
  x:set(1, 1, 1)
  x:set(-1, 1, 2)
  local v = srgeo.zeros({ 2, 4 })
  for j = 1, 4 do
    v:set(0.5, 1, j)
    v:set(-0.5, 2, j)
  end
  local _, sub = m:jvp(x, v)
  local _, dir = m:jvp(x, v, { directional = true })
  -- x = (1, -1, 0, 0): the zeros take max(0, t) under the directional rule, 0 under PyTorch's
  for j, want in ipairs { 0.5, 0, 0, 0 } do T.eq(sub:get(1, j), want, "subgradient +v " .. j) end
  for j, want in ipairs { 0.5, 0, 0.5, 0.5 } do T.eq(dir:get(1, j), want, "directional +v " .. j) end
  for j, want in ipairs { -0.5, 0, 0, 0 } do T.eq(dir:get(2, j), want, "directional -v " .. j) end
  T.raises(function() m:jvp(x, v, { directional = 1 }) end, "opts.directional must be a boolean")
end)
