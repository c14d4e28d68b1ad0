-- models/common.lua: pieces shared by the architecture files (a helper
-- module, not a family: it returns no _order, so srgeo.models lists nothing
-- from it).  Loaded once per state by require "models.common".
local srgeo = require "srgeo"
local nn = srgeo.nn
local C = {}

C.IMAGENET_MEAN = { 0.485, 0.456, 0.406 }
C.IMAGENET_STD = { 0.229, 0.224, 0.225 }

--- The normalisation child ("normalize"), or nil when cfg.normalize == false.
--- Defaults: ImageNet statistics for 3 channels, 0.5/0.5 otherwise unless given.
function C.normalizer(cfg, channels, default_mean, default_std)
  if cfg.normalize == false then return nil end
  local mean = cfg.mean or default_mean
  local std = cfg.std or default_std
  if not mean then
    mean, std = {}, {}
    for c = 1, channels do mean[c], std[c] = 0.5, 0.5 end
  end
  if #mean ~= channels or #std ~= channels then
    error(string.format("normalize: mean/std have %d/%d entries for %d channels", #mean, #std, channels), 3)
  end
  return nn.normalize { mean = mean, std = std }
end

--- Children list helper: skips nil modules.
function C.seq(children)
  local list = {}
  for _, c in ipairs(children) do if c and c[2] then list[#list + 1] = c end end
  return nn.sequential(list)
end

--- Per-architecture initialisation, applied to a built tree with one seeded
--- stream (layers constructed with their own defaults first).  kind:
---   "kaiming_out": conv weights N(0, 2/fan_out) (torchvision ResNet/VGG)
---   "trunc02":     linear/conv weights N(0, .02²) clipped at ±2σ, biases 0 (timm ViT, ConvNeXt)
function C.init(m, cfg, kind)
  if cfg.init == false then return m end
  local seed = cfg.seed or srgeo.seed()
  m:init(seed) -- PyTorch layer defaults first (BN ones/zeros, linear uniform)
  local params = m:parameters()
  local names = m:param_names()
  for i, name in ipairs(names) do
    local t = params[name]
    if t then
      local shape = t:shape()
      local s = seed * 7919 + i
      if kind == "kaiming_out" and #shape == 4 and name:match("weight$") then
        local fan_out = shape[1] * shape[3] * shape[4]
        m:set(name, srgeo.randn(shape, s) * math.sqrt(2 / fan_out))
      elseif kind == "trunc02" and (#shape == 4 or #shape == 2) and name:match("weight$") then
        m:set(name, srgeo.randn(shape, s):clamp(-2, 2) * 0.02)
      elseif kind == "trunc02" and name:match("bias$") and not name:match("norm") and #shape == 1 then
        m:set(name, srgeo.zeros(shape))
      end
    end
  end
  return m
end

--- VGG's feature stack (torchvision's make_layers): per layout entry a 3x3
--- conv (width scaled by widths_scale), BatchNorm when batch_norm, ReLU;
--- "M" a 2x2 max-pool.  Returns the sequential and its output channels.
function C.vgg_features(layout, cin, batch_norm, widths_scale)
  local list = {}
  local c = cin
  for _, v in ipairs(layout) do
    if v == "M" then
      list[#list + 1] = nn.maxpool2d { kernel_size = 2, stride = 2 }
    else
      local w = math.max(1, math.floor(v * (widths_scale or 1)))
      list[#list + 1] = nn.conv2d { in_channels = c, out_channels = w, kernel_size = 3, padding = 1 }
      if batch_norm then list[#list + 1] = nn.batchnorm2d { num_features = w } end
      list[#list + 1] = nn.relu {}
      c = w
    end
  end
  return nn.sequential(list), c
end

--- Tap names every zoo model answers to.
function C.taps(m, features_path)
  m:alias("features", features_path)
  m:alias("logits", "")
  m:default_tap("features")
  return m
end

--- What a family file returns: its entries, the order srgeo.models.list()
--- gives them, and the family's rank among the families (lower first; a
--- family without one follows the ranked ones, by file name).
function C.order(t, names, rank)
  t._order, t._rank = names, rank
  return t
end

return C
