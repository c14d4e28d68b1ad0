-- models/resnet.lua: torchvision ResNets (V1.5: stride on the 3x3 conv of a
-- bottleneck), wide_resnet50_2, and CIFAR-scale variants.  Parameter paths
-- are torchvision's state_dict keys (layer1.0.conv1.weight, ...).
local srgeo = require "srgeo"
local nn = srgeo.nn
local C = require "models.common"

local function conv(cin, cout, k, stride, pad, groups)
  return nn.conv2d { in_channels = cin, out_channels = cout, kernel_size = k, stride = stride or 1,
                     padding = pad or 0, groups = groups or 1, bias = false }
end
local function bn(c) return nn.batchnorm2d { num_features = c } end

-- A block: relu(body(x) + shortcut(x)) with torchvision names; the residual
-- and its body are transparent so their children sit directly under the block.
local function block(body, downsample)
  local res = { { "", body } }
  if downsample then res[2] = { "downsample", downsample } end
  return nn.sequential { { "", nn.residual(res) }, { "relu", nn.relu {} } }
end

local function basic(cin, planes, stride)
  local body = nn.sequential {
    { "conv1", conv(cin, planes, 3, stride, 1) }, { "bn1", bn(planes) }, { "relu1", nn.relu {} },
    { "conv2", conv(planes, planes, 3, 1, 1) }, { "bn2", bn(planes) },
  }
  local ds
  if stride ~= 1 or cin ~= planes then
    ds = nn.sequential { conv(cin, planes, 1, stride, 0), bn(planes) }
  end
  return block(body, ds), planes
end

local function bottleneck(cin, planes, stride, base_width)
  local width = planes * (base_width or 64) // 64
  local out = planes * 4
  local body = nn.sequential {
    { "conv1", conv(cin, width, 1) }, { "bn1", bn(width) }, { "relu1", nn.relu {} },
    { "conv2", conv(width, width, 3, stride, 1) }, { "bn2", bn(width) }, { "relu2", nn.relu {} },
    { "conv3", conv(width, out, 1) }, { "bn3", bn(out) },
  }
  local ds
  if stride ~= 1 or cin ~= out then
    ds = nn.sequential { conv(cin, out, 1, stride, 0), bn(out) }
  end
  return block(body, ds), out
end

local function stage(kind, cin, planes, n, stride, base_width)
  local blocks = {}
  local c = cin
  for i = 1, n do
    local b
    if kind == "basic" then b, c = basic(c, planes, i == 1 and stride or 1)
    else b, c = bottleneck(c, planes, i == 1 and stride or 1, base_width) end
    blocks[i] = b
  end
  return nn.sequential(blocks), c
end

--- ImageNet-style ResNet (7x7 stem, max-pool) or CIFAR-style (3x3 stem, no
--- pool: defaults.stem = "cifar").  widths: stage plane counts (cfg.widths
--- for the CIFAR variants).
local function resnet(kind, layers, cfg, defaults)
  cfg = cfg or {}
  local cin = cfg.in_channels or 3
  local widths = cfg.widths or defaults.widths or { 64, 128, 256, 512 }
  if #widths ~= #layers then
    error(string.format("resnet: widths has %d entries for %d stages", #widths, #layers), 3)
  end
  local cifar = defaults.stem == "cifar"
  local norm = C.normalizer(cfg, cin, cin == 3 and not cifar and C.IMAGENET_MEAN or defaults.mean,
                            cin == 3 and not cifar and C.IMAGENET_STD or defaults.std)
  local children = { { "normalize", norm } }
  local w0 = widths[1]
  if cifar then
    children[#children + 1] = { "conv1", conv(cin, w0, 3, 1, 1) }
  else
    children[#children + 1] = { "conv1", conv(cin, w0, 7, 2, 3) }
  end
  children[#children + 1] = { "bn1", bn(w0) }
  children[#children + 1] = { "relu", nn.relu {} }
  if not cifar then children[#children + 1] = { "maxpool", nn.maxpool2d { kernel_size = 3, stride = 2, padding = 1 } } end
  local c = w0
  for i, n in ipairs(layers) do
    local s
    s, c = stage(kind, c, widths[i], n, i == 1 and 1 or 2, defaults.base_width)
    children[#children + 1] = { "layer" .. i, s }
  end
  children[#children + 1] = { "avgpool", nn.adaptive_avgpool2d { output_size = 1 } }
  children[#children + 1] = { "flatten", nn.flatten {} }
  children[#children + 1] = { "fc", nn.linear { in_features = c, out_features = cfg.num_classes or defaults.num_classes or 1000 } }
  local m = C.seq(children)
  C.taps(m, "flatten")
  return C.init(m, cfg, "kaiming_out")
end

local R = {}
local imagenet = { input = { 3, 224, 224 } }
local function def(name, doc, input, fn, options)
  R[name] = { doc = doc, input = input, build = fn, options = options or { "in_channels", "widths" } }
end

def("resnet18", "torchvision ResNet-18 (BasicBlock [2,2,2,2]); features: 512", imagenet.input,
  function(cfg) return resnet("basic", { 2, 2, 2, 2 }, cfg, {}) end)
def("resnet34", "torchvision ResNet-34 (BasicBlock [3,4,6,3]); features: 512", imagenet.input,
  function(cfg) return resnet("basic", { 3, 4, 6, 3 }, cfg, {}) end)
def("resnet50", "torchvision ResNet-50 (Bottleneck [3,4,6,3]); features: 2048", imagenet.input,
  function(cfg) return resnet("bottleneck", { 3, 4, 6, 3 }, cfg, {}) end)
def("resnet101", "torchvision ResNet-101 (Bottleneck [3,4,23,3]); features: 2048", imagenet.input,
  function(cfg) return resnet("bottleneck", { 3, 4, 23, 3 }, cfg, {}) end)
def("wide_resnet50_2", "torchvision Wide ResNet-50-2 (bottleneck width x2); features: 2048", imagenet.input,
  function(cfg) return resnet("bottleneck", { 3, 4, 6, 3 }, cfg, { base_width = 128 }) end)
def("resnet18_cifar", "ResNet-18 for 32x32 inputs (3x3 stem, no max-pool); features: 512", { 3, 32, 32 },
  function(cfg) return resnet("basic", { 2, 2, 2, 2 }, cfg, { stem = "cifar", num_classes = 10 }) end,
  { "in_channels", "widths" })
def("resnet20", "ResNet-20 of He et al. for CIFAR (16-32-64, 3 blocks per stage, 1x1 projection shortcuts); features: 64",
  { 3, 32, 32 },
  function(cfg)
    return resnet("basic", (cfg or {}).blocks or { 3, 3, 3 }, cfg, { stem = "cifar", widths = { 16, 32, 64 }, num_classes = 10 })
  end, { "in_channels", "widths", "blocks" })

return C.order(R, { "resnet18", "resnet34", "resnet50", "resnet101", "wide_resnet50_2", "resnet18_cifar", "resnet20" }, 1)
