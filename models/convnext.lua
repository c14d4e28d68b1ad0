-- models/convnext.lua: torchvision ConvNeXt-T/S and a small ConvNeXt for
-- 28/32-px inputs.  Keys: features.0.0 (stem conv), features.0.1 (LayerNorm2d),
-- features.{1,3,5,7}.i.block.{0,2,3,5} and .layer_scale, downsamples
-- features.{2,4,6}.{0,1}, classifier.{0,2}.
local srgeo = require "srgeo"
local nn = srgeo.nn
local C = require "models.common"

local EPS = 1e-6

-- x + layer_scale * block(x); stochastic depth is the identity at eval.
local function cnblock(dim)
  local body = nn.sequential {
    { "block", nn.sequential {
      nn.conv2d { in_channels = dim, out_channels = dim, kernel_size = 7, padding = 3, groups = dim },
      nn.permute { dims = { 0, 2, 3, 1 } },
      nn.layernorm { normalized_shape = dim, eps = EPS },
      nn.linear { in_features = dim, out_features = 4 * dim },
      nn.gelu {},
      nn.linear { in_features = 4 * dim, out_features = dim },
      nn.permute { dims = { 0, 3, 1, 2 } },
    } },
    { "", nn.layer_scale { dim = dim, init = 1e-6, name = "layer_scale", dim_axis = "channels" } },
  }
  return nn.sequential { { "", nn.residual { { "", body } } } }
end

local function convnext(depths, dims, cfg, defaults)
  cfg = cfg or {}
  local cin = cfg.in_channels or 3
  local stem_k = cfg.stem_kernel or defaults.stem_kernel or 4
  if #depths ~= #dims then
    error(string.format("convnext: depths has %d entries, dims %d", #depths, #dims), 3)
  end
  local feats = {
    nn.sequential {
      nn.conv2d { in_channels = cin, out_channels = dims[1], kernel_size = stem_k, stride = stem_k },
      nn.layernorm { normalized_shape = dims[1], eps = EPS, dim = "channels" },
    },
  }
  for i, d in ipairs(depths) do
    local blocks = {}
    for j = 1, d do blocks[j] = cnblock(dims[i]) end
    feats[#feats + 1] = nn.sequential(blocks)
    if i < #depths then
      feats[#feats + 1] = nn.sequential {
        nn.layernorm { normalized_shape = dims[i], eps = EPS, dim = "channels" },
        nn.conv2d { in_channels = dims[i], out_channels = dims[i + 1], kernel_size = 2, stride = 2 },
      }
    end
  end
  local last = dims[#dims]
  local imagenet = cin == 3 and not defaults.small
  local m = C.seq {
    { "normalize", C.normalizer(cfg, cin, imagenet and C.IMAGENET_MEAN or nil, imagenet and C.IMAGENET_STD or nil) },
    { "features", nn.sequential(feats) },
    { "avgpool", nn.adaptive_avgpool2d { output_size = 1 } },
    { "classifier", nn.sequential {
      nn.layernorm { normalized_shape = last, eps = EPS, dim = "channels" },
      nn.flatten {},
      nn.linear { in_features = last, out_features = cfg.num_classes or defaults.num_classes or 1000 } } },
  }
  C.taps(m, "classifier.1")
  return C.init(m, cfg, "trunc02")
end

local R = {
  convnext_tiny = { doc = "torchvision ConvNeXt-T ([3,3,9,3], 96..768); features: 768 after the final norm",
                    input = { 3, 224, 224 },
                    build = function(cfg)
                      return convnext(cfg.depths or { 3, 3, 9, 3 }, cfg.dims or { 96, 192, 384, 768 }, cfg, {})
                    end,
                    options = { "in_channels", "depths", "dims" } },
  convnext_small = { doc = "torchvision ConvNeXt-S ([3,3,27,3], 96..768); features: 768", input = { 3, 224, 224 },
                     build = function(cfg) return convnext({ 3, 3, 27, 3 }, { 96, 192, 384, 768 }, cfg, {}) end,
                     options = { "in_channels" } },
  convnext_nano = { doc = "small ConvNeXt for 28/32-px inputs ([2,2,2], 32-64-128, 2x2 stem); features: 128",
                    input = { 3, 32, 32 },
                    build = function(cfg)
                      return convnext(cfg.depths or { 2, 2, 2 }, cfg.dims or { 32, 64, 128 }, cfg,
                                      { stem_kernel = 2, num_classes = 10, small = true })
                    end,
                    options = { "in_channels", "depths", "dims", "stem_kernel" } },
}
return C.order(R, { "convnext_tiny", "convnext_small", "convnext_nano" }, 3)
