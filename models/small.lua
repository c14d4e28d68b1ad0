-- models/small.lua: small encoders for 28x28 Fashion-MNIST and 32x32 inputs
-- (the shipped defaults are trained from these).  Each keeps the zoo's tap
-- names: "features" (pooled penultimate) and "logits".
local srgeo = require "srgeo"
local nn = srgeo.nn
local C = require "models.common"

-- Fashion-MNIST's statistics: the default normalisation of one-channel
-- inputs (nothing for other channel counts: the normalizer's own default).
local function fmnist_stats(channels)
  if channels == 1 then return { 0.286 }, { 0.353 } end
end

-- The cfg a small model hands to the zoo architecture it narrows: a copy,
-- with one input channel and Fashion-MNIST's statistics unless given.
local function gray(cfg)
  local c = {}
  for k, v in pairs(cfg or {}) do c[k] = v end
  c.in_channels = c.in_channels or 1
  local mean, std = fmnist_stats(c.in_channels)
  c.mean, c.std = c.mean or mean, c.std or std
  return c
end

local R = {}

R.small_resnet = {
  doc = "small ResNet for 1x28x28 (16-32-64, 2 BasicBlocks per stage); features: 64", input = { 1, 28, 28 },
  build = function(cfg)
    local c = gray(cfg)
    c.num_classes = c.num_classes or 10
    c.widths = c.widths or { 16, 32, 64 }
    c.blocks = c.blocks or { 2, 2, 2 }
    return require("models.resnet").resnet20.build(c)
  end,
  options = { "in_channels", "widths", "blocks" },
}

R.small_vgg = {
  doc = "small VGG for 1x28x28 (conv 16-16-M-32-32-M-64-M, BN); features: 64 after global pooling",
  input = { 1, 28, 28 },
  build = function(cfg)
    cfg = cfg or {}
    local cin = cfg.in_channels or 1
    local feats, c = C.vgg_features(cfg.layout or { 16, 16, "M", 32, 32, "M", 64, "M" }, cin, true)
    local m = C.seq {
      { "normalize", C.normalizer(cfg, cin, fmnist_stats(cin)) },
      { "features", feats },
      { "avgpool", nn.adaptive_avgpool2d { output_size = 1 } },
      { "flatten", nn.flatten {} },
      { "classifier", nn.linear { in_features = c, out_features = cfg.num_classes or 10 } },
    }
    C.taps(m, "flatten")
    return C.init(m, cfg, "kaiming_out")
  end,
  options = { "in_channels", "layout" },
}

R.small_vit = {
  doc = "small ViT for 1x28x28 (patch 4 -> 49 tokens, 64-d, 4 blocks, 4 heads; timm names); features: 64",
  input = { 1, 28, 28 },
  build = function(cfg)
    local c = gray(cfg)
    c.image_size = c.image_size or 28
    return require("models.vit").vit_nano.build(c)
  end,
  options = { "in_channels", "image_size", "patch_size", "dim", "depth", "heads" },
}

R.mlp = {
  doc = "MLP on flattened pixels (hidden {256, 128}); features: the last hidden layer", input = { 1, 28, 28 },
  build = function(cfg)
    cfg = cfg or {}
    local shape = cfg.input or { 1, 28, 28 }
    local d = shape[1] * shape[2] * shape[3]
    local hidden = cfg.hidden or { 256, 128 }
    local children = { { "normalize", C.normalizer(cfg, shape[1], fmnist_stats(shape[1])) },
                       { "flatten", nn.flatten {} } }
    local c = d
    for i, h in ipairs(hidden) do
      children[#children + 1] = { "fc" .. i, nn.linear { in_features = c, out_features = h } }
      children[#children + 1] = { "relu" .. i, nn.relu {} }
      c = h
    end
    children[#children + 1] = { "head", nn.linear { in_features = c, out_features = cfg.num_classes or 10 } }
    local m = C.seq(children)
    C.taps(m, "relu" .. #hidden)
    return C.init(m, cfg, "none")
  end,
  options = { "input", "hidden" },
}

return C.order(R, { "small_resnet", "small_vgg", "small_vit", "mlp" }, 6)
