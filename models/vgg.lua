-- models/vgg.lua: torchvision VGG-11/13/16/19 (+ _bn) and a CIFAR VGG-16.
-- features.N / classifier.N indices match torchvision (dropout = identity).
local srgeo = require "srgeo"
local nn = srgeo.nn
local C = require "models.common"

local cfgs = {
  vgg11 = { 64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M" },
  vgg13 = { 64, 64, "M", 128, 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M" },
  vgg16 = { 64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M" },
  vgg19 = { 64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M", 512, 512, 512, 512, "M" },
}

local function vgg(name, batch_norm, cfg)
  cfg = cfg or {}
  local cin = cfg.in_channels or 3
  local feats, c = C.vgg_features(cfgs[name], cin, batch_norm)
  local m = C.seq {
    { "normalize", C.normalizer(cfg, cin, C.IMAGENET_MEAN, C.IMAGENET_STD) },
    { "features", feats },
    { "avgpool", nn.adaptive_avgpool2d { output_size = 7 } },
    { "flatten", nn.flatten {} },
    { "classifier", nn.sequential {
      nn.linear { in_features = c * 49, out_features = 4096 }, nn.relu {}, nn.identity {},
      nn.linear { in_features = 4096, out_features = 4096 }, nn.relu {}, nn.identity {},
      nn.linear { in_features = 4096, out_features = cfg.num_classes or 1000 } } },
  }
  C.taps(m, "classifier.4")
  return C.init(m, cfg, "kaiming_out")
end

--- CIFAR VGG-16: the same features on 32x32 (1x1 after five pools), then
--- flatten -> linear(512, classes).  cfg.width scales every layer.
local function vgg_cifar(cfg)
  cfg = cfg or {}
  local cin = cfg.in_channels or 3
  local feats, c = C.vgg_features(cfgs.vgg16, cin, cfg.batch_norm ~= false, cfg.width)
  local m = C.seq {
    { "normalize", C.normalizer(cfg, cin, cfg.mean, cfg.std) },
    { "features", feats },
    { "avgpool", nn.adaptive_avgpool2d { output_size = 1 } },
    { "flatten", nn.flatten {} },
    { "classifier", nn.linear { in_features = c, out_features = cfg.num_classes or 10 } },
  }
  C.taps(m, "flatten")
  return C.init(m, cfg, "kaiming_out")
end

local R, order = {}, {}
for _, n in ipairs { "vgg11", "vgg13", "vgg16", "vgg19" } do
  R[n] = { doc = "torchvision " .. n:upper() .. "; features: classifier.4 (4096)", input = { 3, 224, 224 },
           build = function(cfg) return vgg(n, false, cfg) end, options = { "in_channels" } }
  R[n .. "_bn"] = { doc = "torchvision " .. n:upper() .. " with BatchNorm; features: classifier.4 (4096)",
                    input = { 3, 224, 224 }, build = function(cfg) return vgg(n, true, cfg) end,
                    options = { "in_channels" } }
  order[#order + 1] = n
  order[#order + 1] = n .. "_bn"
end
R.vgg16_cifar = { doc = "VGG-16 (BN) for 32x32 inputs; features: 512 (x width)", input = { 3, 32, 32 }, build = vgg_cifar,
                  options = { "in_channels", "width", "batch_norm" } }
order[#order + 1] = "vgg16_cifar"
return C.order(R, order, 2)
