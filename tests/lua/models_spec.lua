-- models_spec.lua: the encoder zoo against its PyTorch twins
-- (tests/fixtures/gen_models.py), weight loading and its reports, the
-- converter, the registry, summaries and taps.
--
-- Errors are normwise: rel(a, b) = max|a - b| / max|b| over the whole
-- output, so a near-zero entry cannot inflate them.  Tolerances: 1e-4 in
-- float32 (the contract); 1e-6 in float64, where the only error left is the
-- float32 rounding of the stored reference (computed by torch in float64).
-- One exception, measured rather than assumed: the float32 JVP of a network
-- with kinks (ReLU, max-pool) is not determined to 1e-4 by anyone -- a unit
-- whose pre-activation lies within float32 error of the kink switches, and
-- the JVP changes by that unit's whole contribution.  PyTorch's own float32
-- JVP is 1e-3..5e-2 from its float64 one on ResNet-50/101, WRN-28-10 and
-- the VGG-BNs (recorded per case as jvp_f32_torch, four inputs), and which
-- units flip changes whenever a kernel's summation order does: ResNet-101's
-- float32 JVP of one of its two images is 0.015 from the reference in the
-- normal build and 0.32 in make sanitize's (-O1, other kernels, other
-- flips), while its float64 JVP agrees to 3.4e-8 in both.  So for those
-- networks the float32 JVP gets a sanity bound (KINKED: catches a tangent
-- lost or misrouted wholesale, not a subtle error) and the float64 check,
-- strict for every network, is what shows the JVP is exact; networks
-- without kinks (ViTs, ConvNeXts) are held to 1e-4 in float32 too.
-- Cases whose weights are too large to commit are counter-based fills
-- (srgeo.hashrand) that gen_models.py made in NumPy and this spec rebuilds
-- without torch; SRGEO_TEST_LARGE=0 skips them.  SRGEO_PYTHON names the
-- interpreter with torch (default /usr/bin/python3, Debian's).
local T = ...
local srgeo = require "srgeo"
local json = require "srgeo.json"

local DIR = "tests/fixtures/models/"
local PY = os.getenv("SRGEO_PYTHON") or "/usr/bin/python3"
local TOL32, TOL64, KINKED = 1e-4, 1e-6, 0.5

local has_torch
local function torch_available()
  if has_torch == nil then
    has_torch = os.execute(PY .. " -c 'import torch, torchvision' >/dev/null 2>&1") == true
  end
  return has_torch
end

local function need_torch()
  if not torch_available() then T.skip("torch not available") end
end

-- Output lines of a shell command; errors when it fails.
local function run(cmd)
  local p = assert(io.popen(cmd .. " 2>&1"))
  local out = p:read("a")
  local ok = p:close()
  if not ok then error("command failed: " .. cmd .. "\n" .. out, 2) end
  return out
end

local function rel(a, b)
  local d = (a:double() - b:double()):abs():max()
  return d / math.max(b:double():abs():max(), 1e-30)
end

local function shape(t) return table.concat(t:shape(), ",") end

local function read_ref(name)
  local f <close> = srgeo.safetensors.open(DIR .. name .. "_ref.safetensors")
  local r = { meta = f:metadata() }
  for _, k in ipairs(f:keys()) do r[k] = f:get(k, "float64") end
  f:close()
  return r
end

local function tmpfile(suffix)
  local p = os.tmpname()
  os.remove(p)
  return p .. (suffix or "")
end

-- Deep equality of decoded JSON values.
local function same(a, b)
  if type(a) ~= type(b) then return false end
  if type(a) ~= "table" then return a == b end
  for k, v in pairs(a) do if not same(v, b[k]) then return false end end
  for k in pairs(b) do if a[k] == nil then return false end end
  return true
end

-- The weights of a case: the committed file, or (weights_kind "hashed")
-- the committed buffers plus every parameter rebuilt by srgeo.hashrand from
-- the spec in the file's metadata, written to a temporary file (returned
-- second, for removal) and loaded as a user's file would be.
local function weights(name, ref)
  local file = DIR .. ref.meta.weights
  if ref.meta.weights_kind ~= "hashed" then return file end
  if os.getenv("SRGEO_TEST_LARGE") == "0" then T.skip("SRGEO_TEST_LARGE=0") end
  local f <close> = srgeo.safetensors.open(file)
  local meta, tensors = f:metadata(), {}
  for _, k in ipairs(f:keys()) do tensors[k] = f:get(k) end
  f:close()
  local spec = json.decode(assert(meta.hashed, file .. ": no 'hashed' metadata"))
  meta.hashed = nil
  for key, h in pairs(spec) do
    local t = srgeo.hashrand(h.shape, h.seed, h.offset, h.scale)
    -- the generator's sum, to float64 summation error: a drifted formula
    -- (or seed) fails here by name instead of as a wrong output
    local sum, tol = t:sum(), 1e-12 * t:numel() * (math.abs(h.offset) + h.scale)
    T.truthy(math.abs(sum - h.sum) <= tol, string.format("%s %s: hashrand sum %.17g, the generator's %.17g",
      name, key, sum, h.sum))
    tensors[key] = t
  end
  local path = tmpfile(".safetensors")
  srgeo.safetensors.save(path, tensors, meta)
  tensors = nil
  collectgarbage()
  return path, path
end

-- Max rel errors {features, logits, jvp} of m against the reference in dtype.
local function errors(m, ref, dtype)
  local x, v = ref.x, ref.v
  if dtype == "float32" then x, v = x:float(), v:float() end
  local out = m:forward(x, { taps = { "features", "logits" } })
  local y, jv = m:jvp(x, v)
  T.eq(shape(out.features), shape(ref.features), "features shape")
  T.eq(shape(out.logits), shape(ref.logits), "logits shape")
  T.eq(shape(jv), shape(ref.jvp), "jvp shape")
  -- The primal rides in a stacked batch whose GEMMs block (and so round)
  -- differently from a lone forward's: in float32 a deep net amplifies that
  -- to ~1e-6, so the primal is held to the forward's own reference tolerance.
  local tol = dtype == "float32" and TOL32 or TOL64
  local ep = rel(y, ref.features)
  T.truthy(ep <= tol, string.format("jvp primal vs reference features rel error %.3g > %g", ep, tol))
  return { rel(out.features, ref.features), rel(out.logits, ref.logits), rel(jv, ref.jvp) }
end

-- Whether the tree holds a piecewise-linear leaf.
local function has_kinks(m)
  local kind = m:kind()
  if kind == "relu" or kind == "maxpool2d" then return true end
  for _, c in ipairs(m:children()) do
    if has_kinks(c[2]) then return true end
  end
  return false
end

local function check_case(name)
  local ref = read_ref(name)
  local path, tmp = weights(name, ref)
  local ok, err = pcall(function()
    local m, meta = srgeo.models.load(path)
    local info = srgeo.models.info(m)
    T.eq(info.arch, ref.meta.architecture, "architecture from the file's metadata")
    T.truthy(same(info.config, json.decode(ref.meta.config)), "config from the file's metadata: " .. meta.config)
    local e32 = errors(m, ref, "float32")
    m:double()
    local e64 = errors(m, ref, "float64")
    local floor = tonumber(ref.meta.jvp_f32_torch) or 0
    io.write(string.format("     %-18s f32 features %.1e logits %.1e jvp %.1e (torch's own %.1e) | f64 %.1e %.1e %.1e\n",
                           name, e32[1], e32[2], e32[3], floor, e64[1], e64[2], e64[3]))
    local tol32 = { TOL32, TOL32, has_kinks(m) and KINKED or TOL32 }
    for i, what in ipairs { "features", "logits", "jvp" } do
      T.truthy(e32[i] <= tol32[i], string.format("%s float32 %s rel error %.3g > %g", name, what, e32[i], tol32[i]))
      T.truthy(e64[i] <= TOL64, string.format("%s float64 %s rel error %.3g > %g", name, what, e64[i], TOL64))
    end
  end)
  if tmp then os.remove(tmp) end
  if not ok then error(err, 0) end
end

-- Every reference in the fixture directory is a case.
local cases = {}
do
  local p = assert(io.popen("ls " .. DIR .. "*_ref.safetensors 2>/dev/null"))
  for f in p:lines() do cases[#cases + 1] = f:match("([^/]+)_ref%.safetensors$") end
  p:close()
end

T.test("models: the fixtures cover every architecture in the registry", function()
  T.truthy(#cases > 0, "no fixtures in " .. DIR)
  local covered = {}
  for _, c in ipairs(cases) do covered[read_ref(c).meta.architecture] = true end
  local missing = {}
  for _, row in ipairs(srgeo.models.list { params = false }) do
    -- vit_b_16_timm is vit_s_16's builder at other sizes: covered by it
    if not covered[row.name] and row.name ~= "vit_b_16_timm" then missing[#missing + 1] = row.name end
  end
  T.eq(table.concat(missing, ", "), "", "architectures without a PyTorch reference")
end)

for _, name in ipairs(cases) do
  T.test("models: " .. name .. " matches PyTorch (features, logits, JVP; float32 and float64)", function()
    check_case(name)
  end)
end

-- --- loading ---------------------------------------------------------------

local SMALL = DIR .. "resnet20.safetensors"

-- {name = tensor} of a weight file, with an edit applied.
local function file_tensors(path, edit)
  local f <close> = srgeo.safetensors.open(path)
  local t = {}
  for _, k in ipairs(f:keys()) do t[k] = f:get(k) end
  local meta = f:metadata()
  f:close()
  if edit then t = edit(t) or t end
  return t, meta
end

local function save_doctored(edit, meta)
  local t, m = file_tensors(SMALL, edit)
  local path = tmpfile(".safetensors")
  srgeo.safetensors.save(path, t, meta or m)
  return path
end

local function doctor(t)
  t["fc.bias"] = nil
  t["extra.weight"] = srgeo.zeros { 3 }
  t["layer1.0.conv1.weight"] = srgeo.zeros { 16, 16, 1, 1 }
end

T.test("load: missing, unexpected and mismatched keys are reported in one error", function()
  local path = save_doctored(doctor)
  local m = srgeo.models.resnet20 { init = false }
  local err = T.raises(function() m:load(path) end, "1 missing: fc.bias")
  os.remove(path)
  T.truthy(err:find("1 unexpected: extra.weight", 1, true), err)
  T.truthy(err:find("layer1.0.conv1.weight: file (16,16,1,1), model (16,16,3,3)", 1, true), err)
  T.truthy(err:find("strict=false", 1, true), "the error says how to load anyway: " .. err)
end)

T.test("load: strict=false warns once and loads every matching key", function()
  local path = save_doctored(doctor)
  local m = srgeo.models.resnet20 { seed = 3 }
  local before = m:get("fc.bias"):clone()
  local conv_before = m:get("layer1.0.conv1.weight"):clone()
  local warnings = {}
  local report = m:load(path, { strict = false, warn = function(msg) warnings[#warnings + 1] = msg end })
  T.eq(#warnings, 1, "one warning")
  T.truthy(warnings[1]:find("fc.bias", 1, true) and warnings[1]:find("extra.weight", 1, true), warnings[1])
  T.eq(table.concat(report.missing, ","), "fc.bias")
  T.eq(table.concat(report.unexpected, ","), "extra.weight")
  T.eq(#report.mismatched, 1)
  -- the keys that match are loaded, the others keep their values
  local f <close> = srgeo.safetensors.open(path)
  T.eq(rel(m:get("layer2.0.conv1.weight"), f:get("layer2.0.conv1.weight")), 0)
  T.eq(rel(m:get("layer1.0.bn1.running_var"), f:get("layer1.0.bn1.running_var")), 0)
  T.eq(rel(m:get("fc.bias"), before), 0)
  T.eq(rel(m:get("layer1.0.conv1.weight"), conv_before), 0)
  T.eq(report.loaded, #m:param_names() - 2)
  f:close()
  os.remove(path)
  T.raises(function() m:load(SMALL, { stict = false }) end, "load: unknown option 'stict'")
end)

T.test("load: checkpoints without BatchNorm num_batches_tracked load strictly", function()
  local path = save_doctored(function(t)
    for k in pairs(t) do if k:find("num_batches_tracked", 1, true) then t[k] = nil end end
  end)
  local m = srgeo.models.resnet20 { init = false }
  local report = m:load(path)
  os.remove(path)
  T.eq(#report.missing, 0)
  T.eq(#report.absent_counters, 21, "BatchNorms in resnet20")
  T.truthy(rel(m:eval():forward(read_ref("resnet20").x:float()), read_ref("resnet20").features) <= TOL32)
end)

T.test("load: prefixes module. and module.attacker.model. are stripped when asked", function()
  local ref = read_ref("resnet20")
  for _, prefix in ipairs { "module.", "module.attacker.model." } do
    local path = save_doctored(function(t)
      local p = {}
      for k, v in pairs(t) do p[prefix .. k] = v end
      return p
    end)
    local m = srgeo.models.resnet20 { init = false }
    T.raises(function() m:load(path) end, "missing: conv1.weight")
    local report = m:load(path, { prefix = { "model.", prefix } })
    T.eq(#report.missing + #report.unexpected + #report.mismatched, 0)
    m:eval()
    T.truthy(rel(m:forward(ref.x:float()), ref.features) <= TOL32, prefix)
    os.remove(path)
  end
end)

T.test("load: a file without architecture metadata is a clear error for models.load", function()
  local path = save_doctored(nil, { note = "no architecture" })
  T.raises(function() srgeo.models.load(path) end, "has no 'architecture' in its metadata")
  os.remove(path)
  local bad = save_doctored(nil, { architecture = "resnet20", config = "{widths" })
  T.raises(function() srgeo.models.load(bad) end, "metadata 'config' is not a JSON object")
  os.remove(bad)
  local unknown = save_doctored(nil, { architecture = "resnet21" })
  T.raises(function() srgeo.models.load(unknown) end, "no architecture 'resnet21'")
  os.remove(unknown)
end)

T.test("save: a zoo model round-trips through m:save and srgeo.models.load", function()
  local ref = read_ref("resnet18_cifar_w8")
  local m = srgeo.models.load(DIR .. "resnet18_cifar_w8.safetensors")
  local path = tmpfile(".safetensors")
  m:save(path, { note = "round trip" })
  local m2, meta = srgeo.models.load(path)
  os.remove(path)
  T.eq(meta.architecture, "resnet18_cifar")
  T.eq(meta.note, "round trip")
  T.truthy(same(srgeo.models.info(m2).config, { widths = { 8, 16, 32, 64 } }), meta.config)
  T.eq(rel(m2:forward(ref.x:float()), m:forward(ref.x:float())), 0)
end)

T.test("safetensors: f:get(name, t) reads into t's storage (converting the dtype), checking the shape", function()
  local path = DIR .. "resnet18_cifar_w8.safetensors" -- F16 weights
  local f <close> = srgeo.safetensors.open(path)
  local key = "layer1.0.conv1.weight"
  local fresh = f:get(key, "float64")
  local m = srgeo.models.load(path)
  m:set(key, fresh * 0)
  local p = m:get(key):double() * 0 -- a float64 destination of the right shape
  T.truthy(f:get(key, p) == p, "returns the destination")
  T.eq(rel(p, fresh), 0)
  local w = m:get(key) -- shares the float32 parameter's storage
  f:get(key, w)
  T.eq(rel(m:get(key), fresh), 0, "the module's parameter was written in place")
  T.raises(function() f:get(key, srgeo.zeros { 8, 8, 3, 2 }) end,
           "tensor 'layer1.0.conv1.weight' has shape (8,8,3,3), the destination (8,8,3,2)")
end)

-- --- registry --------------------------------------------------------------

T.test("models: unknown config keys are errors listing the valid ones", function()
  local err = T.raises(function() srgeo.models.resnet18 { num_class = 10 } end,
                       "srgeo.models.resnet18: unknown option 'num_class'; options: ")
  T.truthy(err:find("num_classes", 1, true) and err:find("in_channels", 1, true), err)
  T.raises(function() srgeo.models.wrn_16_4 { widen = 2 } end, "options: depth, in_channels, init")
  T.raises(function() srgeo.models.vit_s_16 { img_size = 64 } end, "unknown option 'img_size'")
  T.raises(function() srgeo.models.build("resnet19", {}) end, "no architecture 'resnet19'")
  T.raises(function() srgeo.models.resnet18(3) end, "config must be a table")
  T.raises(function() srgeo.models.resnet20 { widths = { 8, 16 }, init = false } end, "widths has 2 entries for 3 stages")
  T.raises(function() srgeo.models.vit_s_16 { image_size = 100, init = false } end, "not a multiple of patch 16")
end)

T.test("models: families are the modules of models/ (require \"models.NAME\"), each loaded once", function()
  local files = {}
  for _, f in ipairs(srgeo._listdir(srgeo.root .. "/models")) do
    local name = f:match("^([%w_]+)%.lua$")
    if name then files[name] = true end
  end
  local listed = {}
  for _, r in ipairs(srgeo.models.list { params = false }) do
    T.truthy(files[r.family], r.name .. ": family '" .. tostring(r.family) .. "' is a file of models/")
    -- the registry's entry is the family module's own table: one load per state
    T.eq(package.loaded["models." .. r.family][r.name], require("models." .. r.family)[r.name], r.name)
    listed[r.family] = true
  end
  for name in pairs(files) do
    local defs = require("models." .. name)
    T.eq(listed[name] or false, defs._order ~= nil, "models/" .. name .. ".lua: listed exactly when it is a family")
  end
  T.truthy(package.loaded["models.common"] and not listed.common, "common.lua: a shared module, not a family")
  T.raises(function() require "models.no_such_family" end, srgeo.root .. "/models/no_such_family.lua")
end)

local ARCHS = { "resnet18", "resnet34", "resnet50", "resnet101", "wide_resnet50_2", "resnet18_cifar", "resnet20",
                "vgg11", "vgg11_bn", "vgg13", "vgg13_bn", "vgg16", "vgg16_bn", "vgg19", "vgg19_bn", "vgg16_cifar",
                "convnext_tiny", "convnext_small", "convnext_nano", "vit_s_16", "vit_ti_16", "vit_b_16_timm", "vit_b_16",
                "vit_nano", "wrn_28_10", "wrn_16_4", "small_resnet", "small_vgg", "small_vit", "mlp" }

T.test("models.list: every architecture, with parameter counts equal to PyTorch's and to a build's", function()
  local f = assert(io.open(DIR .. "params.json"))
  local torch_counts = json.decode(f:read("a"))
  f:close()
  local rows = srgeo.models.list()
  local names = {}
  for i, row in ipairs(rows) do
    names[i] = row.name
    T.truthy(row.doc and row.input and row.options, row.name)
    T.eq(row.params, torch_counts[row.name], row.name .. " parameters (PyTorch's count)")
  end
  T.eq(table.concat(names, " "), table.concat(ARCHS, " "), "registry order")
  -- the recorded counts are what the builders make (counting builds every
  -- model: over 4 GB for the VGGs, so the large ones go with the large cases)
  local large = os.getenv("SRGEO_TEST_LARGE") ~= "0"
  for _, name in ipairs(ARCHS) do
    if large or srgeo.models._recorded_params[name] < 3e6 then
      local m = srgeo.models[name] { init = false }
      local n = 0
      for _, t in pairs(m:parameters()) do n = n + t:numel() end
      T.eq(n, srgeo.models._recorded_params[name], name .. " built")
      m = nil
      collectgarbage()
    end
  end
end)

T.test("summary: output shapes, parameters and FLOPs per sample (= the PyTorch count)", function()
  for _, name in ipairs { "resnet20", "vit_nano", "convnext_nano" } do
    local ref = read_ref(name)
    local m = srgeo.models.load(DIR .. ref.meta.weights)
    local c, h, w = table.unpack(ref.x:shape(), 2)
    local text = m:summary { c, h, w }
    local total, flops = text:match("total: (%d+) trainable parameters, (%S+) GEMM FLOPs")
    local n = 0
    for _, t in pairs(m:parameters()) do n = n + t:numel() end
    T.eq(tonumber(total), n, name .. " total parameters")
    T.close(tonumber(flops), tonumber(ref.meta.flops), 1e-3, name .. " FLOPs")
  end
  local m = srgeo.models.resnet18 { init = false }
  local text = m:summary { 3, 64, 64 }
  T.truthy(text:find("layer3.1.conv2 +conv2d.-%(1,256,4,4%) +589824"), text)
  T.truthy(text:find("fc +linear.-%(1,1000%) +513000 +1.02e%+06"), "fc row")
  T.truthy(text:find("total: 11689512 trainable parameters", 1, true), "resnet18 total")
end)

T.test("print(m): one node per named child like PyTorch's repr, blocks' data flow, counts, taps, totals", function()
  local m = srgeo.models.resnet20 { init = false }
  local text = tostring(m)
  local lines = {}
  for l in text:gmatch("[^\n]+") do lines[#lines + 1] = l end
  T.truthy(lines[1]:find("^resnet20: sequential +272,474$"), lines[1])
  -- each block is one node: its index, its flow through the nameless residual, its subtree's parameters
  local blocks = 0
  for _, l in ipairs(lines) do
    if l:find("^    %(%d%): sequential = ") then blocks = blocks + 1 end
  end
  T.eq(blocks, 9, "3 stages x 3 blocks, one line each:\n" .. text)
  T.truthy(text:find("\n    (0): sequential = (x + (conv1 → bn1 → relu1 → conv2 → bn2)) → relu", 1, true), text)
  T.truthy(text:find("(0): sequential = ((conv1 → bn1 → relu1 → conv2 → bn2) + downsample) → relu", 1, true), "projection block")
  T.truthy(not text:find("residual", 1, true), "no node for the nameless residual")
  T.truthy(text:find("\n      %(conv1%): conv2d%(16 %-> 16, k3 s1 p1, no bias%) +2,304\n"), "leaf with its count")
  T.truthy(text:find("(flatten): flatten(dims 1..-1)   ← tap features (default)", 1, true), "the default tap marked")
  T.truthy(text:find("\ntotal: 272,474 trainable parameters (and ", 1, true), "totals")
  T.truthy(text:find('m:forward(x) returns the default tap "features" = flatten', 1, true), "what forward returns")
  -- counts add up: the stages' lines sum to the total minus stem and head
  local sum = 0
  for _, l in ipairs(lines) do
    local c = l:match("^  %(%w+%): .- +([%d,]+)$")
    if c then sum = sum + tonumber((c:gsub(",", ""))) end
  end
  T.eq(sum, 272474, "top-level nodes' counts sum to the total")
  -- a nameless leaf (the ViT's class token and position embedding) is a line without a name
  local vit = tostring(srgeo.models.vit_nano { init = false })
  T.truthy(vit:find("\n  cls_pos%(64 patches %+ class token, dim 64%) +4,224\n"), vit)
  T.truthy(vit:find("(0): sequential = (x + (norm1 → attn)) → (x + (norm2 → mlp))", 1, true), vit)
  T.eq(tostring(srgeo.nn.linear { in_features = 2, out_features = 3 }), "linear(2 -> 3)  9")
  -- summary: the same nodes (no row for a nameless container) and what forward returns
  local sum_text = m:summary { 3, 32, 32 }
  local seen = {}
  for l in sum_text:gmatch("[^\n]+") do
    local path = l:match("^%s*(%S+)")
    T.truthy(not seen[path], "summary lists " .. path .. " once")
    seen[path] = true
  end
  T.truthy(sum_text:find("\n  flatten +flatten +dims 1..%-1 +%(1,64%) +features %(default%)\n"), sum_text)
  T.truthy(sum_text:find('m:forward(x) returns (1,64): the default tap "features" = flatten', 1, true), sum_text)
  T.truthy(sum_text:find("\n%(model%) +sequential +%(1,10%) +logits\n"), "the whole model's row names its tap")
end)

-- --- taps --------------------------------------------------------------------

T.test("taps: named modules, several in one pass, features and logits aliases", function()
  local ref = read_ref("resnet20")
  local m = srgeo.models.load(SMALL)
  local x, v = ref.x:float(), ref.v:float()
  local l3 = m:forward(x, { tap = "layer3" })
  T.eq(shape(l3), "2,64,8,8")
  local out = m:forward(x, { taps = { "layer2", "features", "logits" } })
  T.eq(shape(out.layer2), "2,32,16,16")
  T.eq(rel(out.features, m:forward(x)), 0, "default tap = features")
  T.eq(rel(out.logits, m:forward(x, { tap = "logits" })), 0)
  T.truthy(rel(out.logits, ref.logits) <= TOL32, "logits = the full model")
  T.eq(shape(m:forward(x, { tap = "layer1.0.conv1" })), "2,16,32,32")
  local y3, jv3 = m:jvp(x, v, { tap = "layer3" })
  T.eq(shape(y3) .. " " .. shape(jv3), "2,64,8,8 4,64,8,8")
  T.raises(function() m:forward(x, { tap = "layer9" }) end, "layer9")
end)

T.test("taps: jvp with several taps returns a table of primals and one of tangents", function()
  local ref = read_ref("resnet20")
  local m = srgeo.models.load(SMALL)
  local x, v = ref.x:float(), ref.v:float()
  local ys, jvs = m:jvp(x, v, { taps = { "layer2", "features" } })
  T.eq(shape(jvs.layer2), "4,32,16,16")
  T.eq(shape(ys.layer2), "2,32,16,16")
  T.truthy(rel(ys.features, m:forward(x)) <= 1e-6)
  T.truthy(rel(jvs.features, ref.jvp) <= TOL32, "jvp at the features tap")
end)

-- --- converter ---------------------------------------------------------------

T.test("convert_torch: robustness-library checkpoint (normaliser into config, prefixes, attacker dropped)", function()
  need_torch()
  local dir = tmpfile("")
  assert(os.execute("mkdir -p " .. dir))
  local ok, err = pcall(function()
    run(string.format("%s tests/fixtures/gen_models.py --robustness %s", PY, dir))
    local out = run(string.format("%s scripts/convert_torch.py %s/robust.pt %s/robust.safetensors", PY, dir, dir))
    T.truthy(out:find("architecture: resnet20", 1, true), out)
    local f <close> = srgeo.safetensors.open(dir .. "/robust_ref.safetensors")
    local x, logits = f:get("x"), f:get("logits", "float64")
    local mean, std = json.decode(f:metadata().mean), json.decode(f:metadata().std)
    f:close()
    local m, meta = srgeo.models.load(dir .. "/robust.safetensors")
    T.eq(meta.stripped_prefix, "module.model.")
    local cfg = srgeo.models.info(m).config
    T.truthy(same(cfg.blocks, { 1, 1, 1 }) and same(cfg.widths, { 8, 16, 32 }), meta.config)
    for c = 1, 3 do
      T.close(cfg.mean[c], mean[c], 1e-7, "mean")
      T.close(cfg.std[c], std[c], 1e-7, "std")
    end
    local g <close> = srgeo.safetensors.open(dir .. "/robust.safetensors")
    for _, k in ipairs(g:keys()) do
      T.truthy(not k:find("attacker") and not k:find("normalize"), "key " .. k)
    end
    T.truthy(rel(m:forward(x, { tap = "logits" }), logits) <= TOL32, "logits with the checkpoint's normaliser")
  end)
  os.execute("rm -rf " .. dir)
  if not ok then error(err, 0) end
end)

T.test("convert_torch: F16/BF16 casts and a torchvision export load", function()
  need_torch()
  local dir = tmpfile("")
  assert(os.execute("mkdir -p " .. dir))
  local ok, err = pcall(function()
    local out = run(string.format("%s scripts/convert_torch.py --torchvision resnet18 --num-classes 7 --dtype BF16 %s/r18.safetensors",
                                  PY, dir))
    T.truthy(out:find("architecture: resnet18", 1, true), out)
    local f <close> = srgeo.safetensors.open(dir .. "/r18.safetensors")
    T.eq(f:info("fc.weight").dtype, "BF16")
    T.eq(f:info("bn1.num_batches_tracked").dtype, "I64")
    f:close()
    local m = srgeo.models.load(dir .. "/r18.safetensors")
    T.eq(shape(m:forward(srgeo.rand({ 1, 3, 64, 64 }, 1), { tap = "logits" })), "1,7")
  end)
  os.execute("rm -rf " .. dir)
  if not ok then error(err, 0) end
end)

-- A shipped model by name, as on the command line, and README's paths from
-- any working directory (looked up under the project root).
T.test("models.load: a shipped model by name; project-relative paths from any folder", function()
  if not require("srgeo.util").exists(srgeo.models.shipped_path("small_resnet")) then
    T.skip("no shipped small_resnet (make models)")
  end
  local m = srgeo.models.load("small_resnet")
  T.eq(srgeo.models.info(m).arch, "small_resnet")
  T.raises(function() srgeo.models.load("no_such_model") end, "no shipped model 'no_such_model'")
  T.raises(function() srgeo.models.load("resnet18") end, "srgeo.models.resnet18{} builds the architecture")
  local exe = T.shell and T.shell() or "build/srgeo"
  if exe:sub(1, 1) ~= "/" then exe = os.getenv("PWD") .. "/" .. exe end
  local p = io.popen("cd /tmp && " .. exe .. [[ -e 'print(srgeo.models.info(srgeo.models.load("small_resnet")).arch, ]]
    .. [[srgeo.models.info(srgeo.models.load("models/shipped/small_resnet.safetensors")).arch)' 2>&1]])
  local out = p:read("a")
  p:close()
  T.truthy(out:find("small_resnet\tsmall_resnet", 1, true), out)
end)

-- srgeo.models.twin: the same architecture, learned weights drawn anew by
-- role; torch-default is what MODEL@init builds.
T.test("models.twin: torch-default is MODEL@init; he and xavier draw weights by fan, norms 1/0, biases 0", function()
  if not require("srgeo.util").exists(srgeo.models.shipped_path("small_resnet")) then
    T.skip("no shipped small_resnet (make models)")
  end
  local m = srgeo.models.load("small_resnet")
  local t = srgeo.models.twin(m, { seed = 3 })
  local at = require("srgeo.spec").load_model("small_resnet@init:3")
  local pt, pa, pm = t:parameters(), at:parameters(), m:parameters()
  for name, v in pairs(pa) do T.eq((pt[name] - v):abs():max(), 0, name .. " as small_resnet@init:3") end
  T.truthy((pt["conv1.weight"] - pm["conv1.weight"]):abs():max() > 0, "the twin's weights are not the trained ones")
  T.eq((srgeo.models.twin(m, { seed = 3 }):parameters()["fc.weight"] - pt["fc.weight"]):abs():max(), 0, "seeded")
  for _, how in ipairs { "he", "xavier" } do
    local h = srgeo.models.twin(m, { init = how, seed = 1 }):parameters()
    for name, v in pairs(h) do
      local shape = v:shape()
      if name:match("bias$") then
        T.eq(v:abs():max(), 0, how .. " " .. name)
      elseif #shape == 1 then
        T.eq((v - 1):abs():max(), 0, how .. " " .. name)
      elseif #shape == 4 and v:numel() >= 1000 then
        local fan_in, fan_out = shape[2] * shape[3] * shape[4], shape[1] * shape[3] * shape[4]
        local want = math.sqrt(how == "he" and 2 / fan_in or 2 / (fan_in + fan_out))
        local got = v:norm() / math.sqrt(v:numel())
        T.truthy(math.abs(got / want - 1) < 0.1, string.format("%s %s: std %.4g, want %.4g", how, name, got, want))
      end
    end
  end
  T.raises(function() srgeo.models.twin(m, { init = "orthogonal" }) end, 'init must be "torch-default", "he" or "xavier"')
  T.raises(function() srgeo.models.twin(srgeo.nn.relu {}) end, "was not built or loaded by srgeo.models")
end)
