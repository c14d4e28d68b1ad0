-- models/wrn.lua: Wide ResNets of Zagoruyko & Komodakis for CIFAR, with the
-- key names of the common PyTorch implementation (conv1,
-- block1.layer.0.bn1/conv1/bn2/conv2/convShortcut, bn1, fc).  Pre-activation
-- blocks: when channels change, the shortcut sees relu(bn1(x)) too.
local srgeo = require "srgeo"
local nn = srgeo.nn
local C = require "models.common"

local function conv(cin, cout, k, stride)
  return nn.conv2d { in_channels = cin, out_channels = cout, kernel_size = k, stride = stride,
                     padding = k == 3 and 1 or 0, bias = false }
end

local function wide_block(cin, cout, stride)
  if cin == cout and stride == 1 then
    return nn.sequential { { "", nn.residual { { "", nn.sequential {
      { "bn1", nn.batchnorm2d { num_features = cin } }, { "relu1", nn.relu {} }, { "conv1", conv(cin, cout, 3, stride) },
      { "bn2", nn.batchnorm2d { num_features = cout } }, { "relu2", nn.relu {} }, { "conv2", conv(cout, cout, 3, 1) },
    } } } } }
  end
  return nn.sequential {
    { "bn1", nn.batchnorm2d { num_features = cin } }, { "relu1", nn.relu {} },
    { "", nn.residual {
      { "", nn.sequential {
        { "conv1", conv(cin, cout, 3, stride) }, { "bn2", nn.batchnorm2d { num_features = cout } },
        { "relu2", nn.relu {} }, { "conv2", conv(cout, cout, 3, 1) } } },
      { "convShortcut", conv(cin, cout, 1, stride) } } },
  }
end

local function wrn(cfg, defaults)
  cfg = cfg or {}
  local depth, k = cfg.depth or defaults.depth, cfg.widen_factor or defaults.widen_factor
  if depth < 10 or (depth - 4) % 6 ~= 0 then error("wrn: depth must be 6n+4 with n >= 1 (got " .. depth .. ")", 3) end
  local n = (depth - 4) // 6
  local widths = { 16, 16 * k, 32 * k, 64 * k }
  local cin = cfg.in_channels or 3
  local children = { { "normalize", C.normalizer(cfg, cin, cfg.mean, cfg.std) },
                     { "conv1", conv(cin, widths[1], 3, 1) } }
  local c = widths[1]
  for g = 1, 3 do
    local layer = {}
    for i = 1, n do
      layer[i] = wide_block(c, widths[g + 1], (i == 1 and g > 1) and 2 or 1)
      c = widths[g + 1]
    end
    children[#children + 1] = { "block" .. g, nn.sequential { { "layer", nn.sequential(layer) } } }
  end
  children[#children + 1] = { "bn1", nn.batchnorm2d { num_features = c } }
  children[#children + 1] = { "relu", nn.relu {} }
  children[#children + 1] = { "avgpool", nn.adaptive_avgpool2d { output_size = 1 } }
  children[#children + 1] = { "flatten", nn.flatten {} }
  children[#children + 1] = { "fc", nn.linear { in_features = c, out_features = cfg.num_classes or 10 } }
  local m = C.seq(children)
  C.taps(m, "flatten")
  return C.init(m, cfg, "kaiming_out")
end

-- depth and widen_factor override the name's, e.g. wrn_16_4{widen_factor=1}.
local OPTIONS = { "in_channels", "depth", "widen_factor" }
local R = {
  wrn_28_10 = { doc = "WRN-28-10 for CIFAR (160-320-640); features: 640", input = { 3, 32, 32 }, options = OPTIONS,
                build = function(cfg) return wrn(cfg, { depth = 28, widen_factor = 10 }) end },
  wrn_16_4 = { doc = "WRN-16-4 for CIFAR (64-128-256); features: 256", input = { 3, 32, 32 }, options = OPTIONS,
               build = function(cfg) return wrn(cfg, { depth = 16, widen_factor = 4 }) end },
}
return C.order(R, { "wrn_28_10", "wrn_16_4" }, 5)
