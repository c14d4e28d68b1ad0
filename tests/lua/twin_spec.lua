-- twin_spec.lua: random-init twins of imported ONNX graphs
-- (srgeo.models.twin): the importer's rule for learned constants and fixed
-- ones (core/README.md "Random twins"), each role drawn by its
-- initialiser, the fixed constants kept bit for bit (`srgeo bump --model
-- x.onnx --twin` end to end: onnx_spec.lua).
local T = ...
local srgeo = require "srgeo"

local FIX = "tests/fixtures/onnx/"
local NET = FIX .. "twin/twin_net.onnx"
local PB = dofile("tests/lua/onnx_pb.lua")

local function rel(a, b) return (a - b):abs():max() / math.max(b:abs():max(), 1e-300) end

local function role_counts(m)
  local n = {}
  for _, role in pairs(m:roles()) do n[role] = (n[role] or 0) + 1 end
  local keys = {}
  for k, c in pairs(n) do keys[#keys + 1] = k .. " " .. c end
  table.sort(keys)
  return table.concat(keys, ", ")
end

-- Distinct nonzero values of t, up to 2 (2: it varies as a learned tensor does).
local function nonzero_values(t)
  local first, n = nil, 0
  for _, v in ipairs(t:double():reshape { t:numel() }:totable()) do
    if v ~= 0 and v ~= first then
      if first then return 2 end
      first, n = v, 1
    end
  end
  return n
end

-- Buffers that vary as learned tensors do (two or more distinct nonzero
-- values), BatchNorm's running statistics aside: the fixed constants a
-- rule might have taken for learned ones, or learned ones it missed.
local function varying_buffers(m)
  local out = {}
  for name, b in pairs(m:buffers()) do
    if not name:match("running_") and nonzero_values(b) == 2 then out[#out + 1] = name end
  end
  table.sort(out)
  return out
end

-- The rule on one-op graphs: which operand is learned (a parameter with
-- its role), which fixed (a buffer).
T.test("twin: the rule on one-op graphs: stored multi-valued Mul / Add operands are learned, scalars, masks, "
  .. "computed and preprocessing constants fixed", function()
  local dir = os.tmpname()
  os.remove(dir)
  T.truthy(os.execute("mkdir -p " .. dir))
  local n = 0
  local function load(nodes, inits)
    n = n + 1
    local p = dir .. "/r" .. n .. ".onnx"
    T.write(p, PB.model { nodes = nodes, inits = inits, inputs = { PB.value("x", { "N", 4, 3, 3 }) },
      outputs = { PB.value("y", { "N", 4, 3, 3 }) } })
    return srgeo.onnx.load(p, { raw = true, dtype = "float64" })
  end
  local function constant(name, dims, vals) -- a Constant node's tensor
    return PB.node("Constant", {}, { name }, name .. "_node",
      { PB.bytes(1, "value") .. PB.bytes(5, PB.tensor("", dims, vals)) .. PB.int(20, 4) })
  end
  local relu = PB.node("Relu", { "x" }, { "h" }, "r") -- so the constants do not act on the input itself
  local C4 = { 0.5, -1.25, 2, 0.75 }
  local function roles(m) return role_counts(m) end
  -- a per-channel initializer: Mul a scale, Add a shift; a Constant node's likewise
  T.eq(roles(load({ relu, PB.node("Mul", { "h", "g" }, { "y" }, "m") }, { PB.tensor("g", { 4, 1, 1 }, C4) })), "scale 1")
  T.eq(roles(load({ relu, PB.node("Add", { "h", "b" }, { "y" }, "a") }, { PB.tensor("b", { 4, 1, 1 }, C4) })), "shift 1")
  T.eq(roles(load({ relu, constant("g", { 4, 1, 1 }, C4), PB.node("Div", { "h", "g" }, { "y" }, "d") })), "scale 1")
  -- through a Reshape (a weight viewed to broadcast)
  T.eq(roles(load({ relu, PB.node("Reshape", { "g", "s" }, { "g4" }, "v"), PB.node("Mul", { "h", "g4" }, { "y" }, "m") },
    { PB.tensor("g", { 4 }, C4), PB.tensor("s", { 3 }, { 4, 1, 1 }, true) })), "scale 1")
  -- varying along two per-sample dims: a position embedding
  local E = {}
  for i = 1, 36 do E[i] = math.sin(i) end
  T.eq(roles(load({ relu, PB.node("Add", { "h", "e" }, { "y" }, "a") }, { PB.tensor("e", { 1, 4, 3, 3 }, E) })),
    "embedding 1")
  -- fixed: a scalar (an activation's 3), one value repeated, a mask of 0 and one value, a constant computed
  -- from two (Add of initializers, folded), the input's own normalisation (x - mean)
  local fixed = {
    { { relu, PB.node("Mul", { "h", "k" }, { "y" }, "m") }, { PB.tensor("k", {}, { 3 }) } },
    { { relu, PB.node("Mul", { "h", "k" }, { "y" }, "m") }, { PB.tensor("k", { 4, 1, 1 }, { 6, 6, 6, 6 }) } },
    { { relu, PB.node("Add", { "h", "k" }, { "y" }, "a") }, { PB.tensor("k", { 4, 1, 1 }, { 0, -100, -100, 0 }) } },
    { { relu, PB.node("Add", { "g", "g" }, { "g2" }, "f"), PB.node("Mul", { "h", "g2" }, { "y" }, "m") },
      { PB.tensor("g", { 4, 1, 1 }, C4) } },
    { { PB.node("Sub", { "x", "g" }, { "h" }, "s"), PB.node("Relu", { "h" }, { "y" }, "r") },
      { PB.tensor("g", { 4, 1, 1 }, C4) } },
  }
  for i, f in ipairs(fixed) do
    local m = load(f[1], f[2])
    T.eq(roles(m), "", "fixed case " .. i)
    T.eq(next(m:parameters()), nil, "fixed case " .. i .. ": a buffer")
  end
  -- PRelu's slope is its own parameter, even a single one
  T.eq(roles(load({ PB.node("PRelu", { "x", "sl" }, { "y" }, "pr") }, { PB.tensor("sl", { 1 }, { 0.2 }) })), "slope 1")
  os.execute("rm -rf " .. dir)
end)

-- What the importer finds in real exports: the learned constants by role,
-- and no buffer left that varies as a learned tensor does but the input
-- normalisation's mean and std.
T.test("twin: torch.onnx exports' learned constants by role (decomposed LayerNorm and GroupNorm, layer scale, PReLU, "
  .. "class token, position embedding); fixed ones are buffers", function()
  local m, info = srgeo.models.load(NET, { dtype = "float64" })
  local x, y = srgeo.npy.load(FIX .. "twin/twin_net_x.npy"):double(), srgeo.npy.load(FIX .. "twin/twin_net_y.npy"):double()
  local e = rel(m:forward(x, { tap = "output" }), y)
  T.truthy(e < 1e-5, "twin_net matches PyTorch's float32 output: " .. e)
  T.eq(info.preprocess, "Sub (3), Div (3)")
  -- scales and shifts: the layer scale after conv1, GroupNorm's (Mul / Add after InstanceNormalization), two
  -- LayerNorms' (ReduceMean ... Div, Mul γ, Add β)
  T.eq(role_counts(m), "embedding 1, scale 4, shift 4, slope 2, token 1")
  T.eq(table.concat(varying_buffers(m), " "), "/Div.value /Sub.value", "only the input's mean and std")
  local mask = 0
  for _, b in pairs(m:buffers()) do if b:numel() == 289 and b:min() == -100 then mask = mask + 1 end end
  T.eq(mask, 1, "the attention mask is a buffer")
  -- the exporters' fixtures: the same, one file each
  local files = {
    { FIX .. "vit_b_16.onnx", { normalize = false }, "embedding 1, scale 5, shift 5, token 1", "" },
    -- 10 LayerNorms and 5 layer scales; Swin's 13 LayerNorms and 4 relative-position biases
    { FIX .. "convnext_tiny.onnx", { normalize = false }, "scale 15, shift 10", "" },
    { FIX .. "swin_t.onnx", { normalize = false }, "embedding 4, scale 13, shift 13", "" },
    { FIX .. "exporters/fpn_gn_op11.onnx", { normalize = false }, "scale 2, shift 2, slope 1", "" },
    { FIX .. "exporters/mobilenet_v3_small_op11.onnx", { normalize = false }, "", "" },
    { FIX .. "exporters/paddle_style.onnx", {}, "", "2" },
    -- tf_style's linear bias is an Add of a Constant node made after the MatMul: a shift
    { FIX .. "exporters/tf_style.onnx", {}, "shift 1", "2" },
  }
  for _, f in ipairs(files) do
    local opts = { input_size = { 3, 32, 32 } }
    for k, v in pairs(f[2]) do opts[k] = v end
    local mf = srgeo.models.load(f[1], opts)
    local got = role_counts(mf)
    print(string.format("     %-48s %s", f[1]:match("[^/]+$"), got == "" and "no learned constants" or got))
    if f[3] then T.eq(got, f[3], f[1]) end
    local vb = varying_buffers(mf)
    T.eq(f[4] == "" and table.concat(vb, " ") or tostring(#vb), f[4], f[1] .. ": buffers that vary")
  end
end)

-- The per-role check of a twin's parameters (a tensor v named name of the
-- twin t), for init `how`; a failure names the parameter and the numbers.
local CLIP2 = 0.9206 -- the variance of N(0, 1) clipped at ±2
local function check_param(t, name, v, how)
  local roles, params = t:roles(), t:parameters()
  local shape, n = v:shape(), v:numel()
  local mean = v:sum() / n
  local std = math.sqrt(((v - mean) * (v - mean)):sum() / n)
  local what = string.format("%s %s %s: mean %.3g, std %.4g", how, name, table.concat(shape, "x"), mean, std)
  local function sd_near(want, tol)
    T.truthy(math.abs(std / want - 1) < tol and math.abs(mean) < 4 * want / math.sqrt(n),
      string.format("%s, want std %.4g", what, want))
  end
  local role = roles[name]
  local leaf = name:match("([^.]+)$")
  local sibling = params[name:gsub("bias$", "weight")]
  if role == "scale" then T.eq((v - 1):abs():max(), 0, what)
  elseif role == "shift" then T.eq(v:abs():max(), 0, what)
  elseif role == "slope" then T.eq((v - 0.25):abs():max(), 0, what)
  elseif role == "embedding" or role == "token" then
    T.truthy(v:abs():max() <= 0.04 + 1e-12, what)
    if n >= 400 then sd_near(0.02 * math.sqrt(CLIP2), 0.1) end
  elseif leaf == "weight" and (#shape == 4 or #shape == 2) then
    local fan_in = #shape == 4 and shape[2] * shape[3] * shape[4] or shape[2]
    local fan_out = #shape == 4 and shape[1] * shape[3] * shape[4] or shape[1]
    if how == "torch-default" then -- kaiming_uniform(a=√5): U(±1/√fan_in)
      T.truthy(v:abs():max() <= 1 / math.sqrt(fan_in), what)
      if n >= 1000 then sd_near(1 / math.sqrt(3 * fan_in), 0.1) end
    elseif n >= 1000 then
      sd_near(math.sqrt(how == "he" and 2 / fan_in or 2 / (fan_in + fan_out)), 0.1)
    end
  elseif leaf == "bias" and sibling and sibling:dim() >= 2 and how == "torch-default" then
    local s = sibling:shape()
    local fan_in = #s == 4 and s[2] * s[3] * s[4] or s[2]
    T.truthy(v:abs():max() <= 1 / math.sqrt(fan_in) and v:abs():max() > 0, what)
  elseif leaf == "bias" then T.eq(v:abs():max(), 0, what) -- norms' shifts; he/xavier biases
  elseif leaf == "weight" and #shape == 1 then T.eq((v - 1):abs():max(), 0, what) -- norms' scales
  else error("no check for " .. what) end
end

T.test("twin: an imported graph's twin draws each learned tensor by its role (torch-default as torch.nn, he, xavier), "
  .. "keeps fixed constants bit for bit, is seeded", function()
  local m = srgeo.models.load(NET, { dtype = "float64" })
  local x = srgeo.npy.load(FIX .. "twin/twin_net_x.npy"):double()
  local pm, bm = m:parameters(), m:buffers()
  for _, how in ipairs { "torch-default", "he", "xavier" } do
    local t = srgeo.models.twin(m, { init = how, seed = 1 })
    T.eq(t:dtype(), "float64")
    local pt, bt = t:parameters(), t:buffers()
    local np = 0
    for name, v in pairs(pm) do
      np = np + 1
      T.truthy(pt[name] ~= nil, how .. ": the twin has " .. name)
      -- (an exporter's ones and zeros, InstanceNormalization's in torch's GroupNorm, are their init already)
      if nonzero_values(v) == 2 then T.truthy((pt[name] - v):abs():max() > 0, how .. ": " .. name .. " is drawn anew") end
      check_param(t, name, pt[name], how)
    end
    for name, v in pairs(bm) do
      if name:match("running_mean$") then T.eq(bt[name]:abs():max(), 0, name)
      elseif name:match("running_var$") then T.eq((bt[name] - 1):abs():max(), 0, name)
      elseif not name:match("num_batches_tracked$") then
        T.eq((bt[name] - v):abs():max(), 0, how .. ": fixed constant " .. name .. " kept")
      end
    end
    T.truthy(np >= 20, "parameters checked: " .. np)
    local y = t:forward(x, { tap = "output" })
    T.truthy(y:abs():max() < math.huge and y:abs():max() > 0, how .. ": the twin runs")
    T.eq((srgeo.models.twin(m, { init = how, seed = 1 }):forward(x, { tap = "output" }) - y):abs():max(), 0,
      how .. ": the same seed, the same twin")
    T.truthy((srgeo.models.twin(m, { init = how, seed = 2 }):forward(x, { tap = "output" }) - y):abs():max() > 0,
      how .. ": another seed, another twin")
  end
  -- named as its spec: the file's name and @init
  local t = srgeo.models.twin(m)
  T.eq(srgeo.identity.of(t, x).model, "twin_net.onnx@init")
  T.eq(srgeo.identity.of(m, x).model, "twin_net.onnx")
  T.eq(srgeo.identity.of(srgeo.models.twin(srgeo.models.mlp {}), x).model, "mlp@init", "a zoo model's twin likewise")
  T.eq(t:default_tap(), m:default_tap())
  T.truthy(tostring(t):find("onnx twin_net.onnx, random-init twin", 1, true), tostring(t))
  -- torchvision's ViT (opset 13, LayerNorm decomposed, constants as nodes): every learned tensor drawn anew
  local v = srgeo.models.load(FIX .. "vit_b_16.onnx", { normalize = false, dtype = "float64" })
  local tv = srgeo.models.twin(v, { seed = 4 })
  local pv = tv:parameters()
  for name, w in pairs(v:parameters()) do
    if nonzero_values(w) == 2 then T.truthy((pv[name] - w):abs():max() > 0, "vit: " .. name .. " is drawn anew") end
    check_param(tv, name, pv[name], "torch-default")
  end
end)
