-- bench_random_init.lua: what separates a trained encoder from its random
-- init, measured on srgeo's own plain chains (no skip connections) rather
-- than assumed.  Each case is profiled with the quick preset (range auto)
-- on a few Fashion-MNIST test images, at init over --seeds weight seeds:
--   small_vgg      the shipped trained small VGG and its random-init twins
--   small_resnet   the shipped trained small ResNet and its twins (skips, for contrast)
--   vgg_deep       a deeper plain VGG-style chain on 28x28 (15 convs, BN at init, ReLU), init only
--   mobilenet      a MobileNetV1-style chain: a 3x3 stem and 13 depthwise-separable blocks
--                  (depthwise 3x3 conv2d groups = C, pointwise 1x1, ReLU6 = clip 0..6 after
--                  each: 27 conv layers; MobileNetV1's widths x --width, its strides), He-normal
--                  (fan-in) weights, zero biases, init only
-- Printed per profile: its call, plateau, the peak of the median profile
-- (r and η at its highest rung), and the median per-image peak η; per
-- trained/init pair, srgeo.profile.compare's permutation p-values for the
-- whole curve, peak η and peak height.
--   build/srgeo tests/bench/bench_random_init.lua [--images 8] [--seeds 1,2] [--cases small_vgg,mobilenet]
local srgeo = require "srgeo"
local cli = require "srgeo.cli"
local E = require "srgeo.experiment"
local stats = require "srgeo.stats"
local nn = srgeo.nn

local o = cli.run({
  name = "bench_random_init.lua",
  about = "trained vs random-init plain chains: calls, peaks and permutation tests",
  options = {
    { "cases", "small_vgg,small_resnet,vgg_deep,mobilenet", "cases (see the header)" },
    { "images", 8, "Fashion-MNIST test images" },
    { "seeds", "1,2", "weight seeds of the random-init networks" },
    { "preset", "quick", "estimator preset" },
    { "threads", 0, "threads (0: default)" },
    { "width", 0.25, "mobilenet: width multiplier (1: MobileNetV1's 32..1024 channels)" },
  },
}, { ... })
if o.threads > 0 then srgeo.threads(o.threads) end

local function list(s)
  local t = {}
  for v in tostring(s):gmatch("[^,]+") do t[#t + 1] = v end
  return t
end

-- He-normal (fan-in) weights, zero biases: the random twin of a Keras-style network.
local function he_init(m, seed)
  local params, names = m:parameters(), m:param_names()
  for i, name in ipairs(names) do
    local t = params[name]
    local shape = t:shape()
    if #shape == 4 and name:match("weight$") then
      m:set(name, srgeo.randn(shape, seed * 7919 + i) * math.sqrt(2 / (shape[2] * shape[3] * shape[4])))
    elseif name:match("bias$") then
      m:set(name, srgeo.zeros(shape))
    end
  end
  return m
end

local function mobilenet(seed, width)
  local w = { 32, 64, 128, 128, 256, 256, 512, 512, 512, 512, 512, 512, 1024, 1024 }
  for b = 1, #w do w[b] = math.max(1, math.floor(w[b] * width)) end
  local stride = { 1, 1, 2, 1, 2, 1, 2, 1, 1, 1, 1, 1, 2, 1 }
  local list = { { "normalize", nn.normalize { mean = { 0.286 }, std = { 0.353 } } },
                 { "stem", nn.conv2d { in_channels = 1, out_channels = w[1], kernel_size = 3, padding = 1 } },
                 { "stem_act", nn.clip { min = 0, max = 6 } } }
  for b = 2, #w do
    local c = w[b - 1]
    list[#list + 1] = { "dw" .. b, nn.conv2d { in_channels = c, out_channels = c, kernel_size = 3, padding = 1,
                                                stride = stride[b], groups = c } }
    list[#list + 1] = { "dw" .. b .. "_act", nn.clip { min = 0, max = 6 } }
    list[#list + 1] = { "pw" .. b, nn.conv2d { in_channels = c, out_channels = w[b], kernel_size = 1 } }
    list[#list + 1] = { "pw" .. b .. "_act", nn.clip { min = 0, max = 6 } }
  end
  list[#list + 1] = { "pool", nn.adaptive_avgpool2d { output_size = 1 } }
  list[#list + 1] = { "flatten", nn.flatten {} }
  local m = nn.sequential(list)
  m:init(seed)
  he_init(m, seed)
  m:default_tap("flatten")
  m:eval()
  return m
end

local function vgg_deep(seed)
  local m = srgeo.models.build("small_vgg", { layout = { 16, 16, "M", 32, 32, "M", 64, 64, 64, "M", 128, 128, 128,
                                                         128, 128, 128, 128, 128 }, seed = seed })
  m:eval()
  return m
end

local X = E.load_eval(string.format("fmnist-test:%d@0", o.images), { model = nil })
-- One ladder for every profile, so srgeo.profile.compare sees all of it: the
-- preset's, extended at its spacing up to the first rung past per-pixel RMS
-- 1 (where range = "auto" stops a profile that keeps rising).
local popts = { preset = o.preset, range = "paper", seed = 0, progress = false, log10_hi = 3,
                nscales = (srgeo.profile.presets[o.preset].nscales - 1) * 5 // 4 + 1 }

local function peak_of_median(p)
  local k = 1
  for s, v in ipairs(p.median) do if v == v and (p.median[k] ~= p.median[k] or v > p.median[k]) then k = s end end
  return p.median[k], p.scales[k]
end

local function median_image_peak(p)
  local etas = {}
  for _, r in ipairs(p.per_image) do
    local d = srgeo.bump.descriptors(p.scales, r)
    if d.peak_eta == d.peak_eta then etas[#etas + 1] = d.peak_eta end
  end
  return #etas > 0 and stats.median(etas) or 0 / 0
end

local function show(label, p, secs)
  local r, eta = peak_of_median(p)
  print(string.format("%-22s %-5s plateau %.3g  peak of the median profile r %.3g at η %.3g (RMS %.3g)  median per-image "
    .. "peak η %.3g  [%d rungs, %.0f s]", label, p.shape.class, p.descriptors.plateau.value, r, eta,
    eta / math.sqrt(p.input_dim), median_image_peak(p), #p.scales, secs))
  print("    " .. p.shape.text)
  local row = {}
  for s, v in ipairs(p.median) do row[s] = string.format("%.3g:%.3g", p.scales[s], v) end
  print("    median r by η: " .. table.concat(row, " "))
end

local function run(label, m)
  local t0 = srgeo._clock()
  local po = {}
  for k, v in pairs(popts) do po[k] = v end
  po.label = label
  local p = srgeo.profile(m, X, po)
  show(label, p, srgeo._clock() - t0)
  return p
end

local function compare(a, b)
  local ok, c = pcall(srgeo.profile.compare, a, b, { permutations = 1000, seed = 1 })
  if not ok then print("    compare: " .. tostring(c)); return end
  print(string.format("    compare %s vs %s (%d shared rungs, 1000 permutations): p(curve) %.3g, p(peak η) %.3g, "
    .. "p(peak height) %.3g", a.label, b.label, #c.scales, c.p.curve, c.p.peak_eta, c.p.peak_height))
end

print(string.format("threads %d, %d images (fmnist-test@0), preset %s, %d rungs up to log10 η %g at 224²",
  srgeo.threads(), #X, o.preset, popts.nscales, popts.log10_hi))
for _, case in ipairs(list(o.cases)) do
  print("== " .. case)
  local trained
  if case == "small_vgg" or case == "small_resnet" then
    trained = run(case, (E.load_model(case)))
  end
  for _, s in ipairs(list(o.seeds)) do
    local seed = math.tointeger(tonumber(s))
    local m
    if case == "mobilenet" then m = mobilenet(seed, o.width)
    elseif case == "vgg_deep" then m = vgg_deep(seed)
    else m = (E.load_model(case .. "@init:" .. seed)) end
    local p = run(case .. "@init:" .. seed, m)
    if trained then compare(trained, p) end
  end
end
