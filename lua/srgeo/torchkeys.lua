-- srgeo.torchkeys: a PyTorch checkpoint's state_dict (srgeo.torch.load) as
-- a zoo model's weights, without Python.  srgeo's models use torchvision's
-- (and timm's) key names, so the "map" is what scripts/convert_torch.py
-- does before writing a safetensors file, in Lua:
--
--   sd = K.state_dict(obj)      the state_dict inside a checkpoint: obj itself, or obj.state_dict /
--                               model_state_dict / model / net / state when that holds tensors
--   sd, extra = K.split_normalizer(sd)   robustness-library normaliser keys -> extra.mean / extra.std
--   sd, prefix = K.strip_prefix(sd [, prefix])   the attacker copy dropped, 'module.model.', 'module.',
--                               'model.' ... stripped when every key has it
--   arch = K.detect(sd)         the zoo architecture from the keys and shapes
--   cfg = K.infer(arch, sd)     the config the weights determine (classes, channels, widths, depths, ...)
--   sd, arch, cfg = K.prepare(obj [, {arch=, prefix=, config=}])   all of the above
--
-- Kept in step with convert_torch.py (its detect/infer/unwrap/strip_prefix);
-- tests/lua/torch_spec.lua checks both on the same fixtures.  Where this
-- module knows more than the script it says so below (ResNet and ConvNeXt
-- widths, torchvision ViTs at other sizes).
local K = {}

local PREFIXES = { "module.model.", "attacker.model.", "module.", "model." }
local NORMALIZER = { "module.normalizer.", "normalizer.", "module.attacker.normalize.", "attacker.normalize." }
local ATTACKER = { "module.attacker.", "attacker." }

local function starts(s, p) return s:sub(1, #p) == p end

local function is_tensor(v) return type(v) == "userdata" and type(v.shape) == "function" end

local function has_tensors(t)
  if type(t) ~= "table" then return false end
  for _, v in pairs(t) do if is_tensor(v) then return true end end
  return false
end

--- The state_dict inside a checkpoint object (as convert_torch.unwrap).
function K.state_dict(obj)
  for _, key in ipairs { "state_dict", "model_state_dict", "model", "net", "state" } do
    if type(obj) == "table" and has_tensors(obj[key]) then return obj[key] end
  end
  return obj
end

local function tensors_only(sd)
  local out = {}
  for k, v in pairs(sd) do if type(k) == "string" and is_tensor(v) then out[k] = v end end
  return out
end

--- Robustness-library normaliser keys removed; their values as extra.mean / extra.std.
function K.split_normalizer(sd)
  local out, extra = {}, {}
  for k, v in pairs(sd) do
    local hit
    for _, p in ipairs(NORMALIZER) do if starts(k, p) then hit = p break end end
    if hit then
      local name, vals = k:sub(#hit + 1), {}
      local flat = v:double():reshape { -1 }
      for i = 1, flat:shape()[1] do vals[i] = flat:get(i) end
      if name == "new_mean" or name == "mean" then extra.mean = vals
      elseif name == "new_std" or name == "std" then extra.std = vals end
    else
      out[k] = v
    end
  end
  return out, extra
end

--- The attacker's copy dropped and a wrapper prefix every key has stripped.
function K.strip_prefix(sd, prefix)
  local function strip(p)
    local out = {}
    for k, v in pairs(sd) do out[k:sub(#p + 1)] = v end
    return out
  end
  if prefix then
    for k in pairs(sd) do
      if not starts(k, prefix) then error(string.format("torchkeys: prefix '%s' does not start key '%s'", prefix, k), 2) end
    end
    return strip(prefix), prefix
  end
  local kept, n, nk = {}, 0, 0
  for k, v in pairs(sd) do
    n = n + 1
    local att = false
    for _, a in ipairs(ATTACKER) do if starts(k, a) then att = true end end
    if not att then kept[k], nk = v, nk + 1 end
  end
  if nk > 0 and nk < n then sd = kept end
  for _, p in ipairs(PREFIXES) do
    local all = next(sd) ~= nil
    for k in pairs(sd) do if not starts(k, p) then all = false break end end
    if all then return strip(p), p end
  end
  return sd, ""
end

local function shape(sd, k) return sd[k]:shape() end

-- How many numbered children prefix.N.* the keys hold.
local function n_children(sd, prefix)
  local seen, n = {}, 0
  for k in pairs(sd) do
    if starts(k, prefix) then
      local c = k:sub(#prefix + 1):match("^([^.]+)")
      if c and not seen[c] then seen[c], n = true, n + 1 end
    end
  end
  return n
end

local function conv_weights(sd)
  local convs = {}
  for k, v in pairs(sd) do
    local i = k:match("^features%.(%d+)%.weight$")
    if i and #v:shape() == 4 then convs[#convs + 1] = { tonumber(i), k } end
  end
  table.sort(convs, function(a, b) return a[1] < b[1] end)
  return convs
end

local function any_suffix(sd, suffix)
  for k in pairs(sd) do if k:sub(-#suffix) == suffix then return true end end
  return false
end

--- The zoo architecture the keys and shapes describe (convert_torch.detect;
--- a 4-stage ConvNeXt with a 4x4 stem is convnext_tiny / _small at any width
--- here, where the script says convnext_nano for widths other than 96).
function K.detect(sd)
  local has = function(k) return sd[k] ~= nil end
  if has "blocks.0.attn.qkv.weight" then
    local dim = shape(sd, "blocks.0.attn.qkv.weight")[2]
    if dim <= 64 then return shape(sd, "patch_embed.proj.weight")[2] == 1 and "small_vit" or "vit_nano" end
    return ({ [192] = "vit_ti_16", [384] = "vit_s_16", [768] = "vit_b_16_timm" })[dim] or "vit_s_16"
  end
  if has "encoder.layers.encoder_layer_0.self_attention.in_proj_weight" then return "vit_b_16" end
  if has "features.1.0.layer_scale" then
    if not has "features.7.0.layer_scale" or shape(sd, "features.0.0.weight")[3] ~= 4 then return "convnext_nano" end
    return n_children(sd, "features.5.") > 9 and "convnext_small" or "convnext_tiny"
  end
  if has "block1.layer.0.conv1.weight" then
    return shape(sd, "block1.layer.0.conv1.weight")[1] >= 160 and "wrn_28_10" or "wrn_16_4"
  end
  if has "layer1.0.conv1.weight" then
    local counts = {}
    for i = 1, 4 do counts[i] = n_children(sd, "layer" .. i .. ".") end
    local c = table.concat(counts, ",")
    if not has "layer1.0.conv3.weight" then
      if shape(sd, "conv1.weight")[3] == 3 then
        if has "layer4.0.conv1.weight" then return "resnet18_cifar" end
        return shape(sd, "conv1.weight")[2] == 1 and "small_resnet" or "resnet20"
      end
      return ({ ["2,2,2,2"] = "resnet18", ["3,4,6,3"] = "resnet34" })[c] or "resnet18"
    end
    -- wide_resnet50_2: its bottleneck's inner width is twice the stem's
    if shape(sd, "layer1.0.conv1.weight")[1] == 2 * shape(sd, "conv1.weight")[1] then return "wide_resnet50_2" end
    return counts[3] > 6 and "resnet101" or "resnet50"
  end
  if has "features.0.weight" then
    local convs, bn = conv_weights(sd), any_suffix(sd, "running_mean")
    if has "classifier.6.weight" then
      local n = ({ [8] = "vgg11", [10] = "vgg13", [13] = "vgg16", [16] = "vgg19" })[#convs]
      if n then return n .. (bn and "_bn" or "") end
    end
    if has "classifier.weight" then return #convs == 13 and "vgg16_cifar" or "small_vgg" end
  end
  if has "fc1.weight" and has "head.weight" then return "mlp" end
  error("torchkeys: cannot recognise the architecture from the keys; give arch (srgeo.models.list() names them)", 2)
end

local RESNET = { resnet18 = true, resnet34 = true, resnet50 = true, resnet101 = true, wide_resnet50_2 = true }
local TIMM_VIT = { vit_s_16 = true, vit_ti_16 = true, vit_b_16_timm = true, vit_nano = true, small_vit = true }

-- The values an architecture builds with when cfg leaves them out
-- (models/*.lua): what infer leaves out of the config it returns.
local DEFAULT = {
  widths = { 64, 128, 256, 512 },
  convnext_tiny = { depths = { 3, 3, 9, 3 }, dims = { 96, 192, 384, 768 } },
  vit_b_16 = { dim = 768, depth = 12, heads = 12, mlp_dim = 3072, image_size = 224 },
}

local function same(a, b)
  if type(a) ~= "table" or type(b) ~= "table" then return a == b end
  if #a ~= #b then return false end
  for i = 1, #a do if a[i] ~= b[i] then return false end end
  return true
end

--- The config values the weights determine (convert_torch.infer), plus the
--- widths of full-size ResNets and ConvNeXts and the size of a torchvision
--- ViT when they differ from the defaults.  A torchvision ViT's head count
--- is not in its weights: dim / 64 (ViT-Ti/S/B/L's head width), at least 1,
--- unless cfg.heads is given.
function K.infer(arch, sd)
  local has = function(k) return sd[k] ~= nil end
  local dim = function(k, i)
    if not sd[k] then error(string.format("torchkeys: the keys do not fit %s: no '%s'", arch, k), 0) end
    return sd[k]:shape()[i]
  end
  local cfg = {}
  for _, head in ipairs { "fc.weight", "classifier.6.weight", "classifier.2.weight", "classifier.weight",
                          "heads.head.weight", "head.weight" } do
    if has(head) then cfg.num_classes = dim(head, 1) break end
  end
  for _, first in ipairs { "conv1.weight", "features.0.weight", "features.0.0.weight", "patch_embed.proj.weight",
                           "conv_proj.weight" } do
    if has(first) then cfg.in_channels = dim(first, 2) break end
  end
  if RESNET[arch] then
    local div = arch == "wide_resnet50_2" and 2 or 1
    local widths = {}
    for i = 1, 4 do widths[i] = dim("layer" .. i .. ".0.conv1.weight", 1) // div end
    if not same(widths, DEFAULT.widths) then cfg.widths = widths end
  elseif arch == "resnet18_cifar" or arch == "resnet20" or arch == "small_resnet" then
    cfg.widths = {}
    local blocks = {}
    for i = 1, 4 do
      if has("layer" .. i .. ".0.conv1.weight") then
        cfg.widths[#cfg.widths + 1] = dim("layer" .. i .. ".0.conv1.weight", 1)
        blocks[#blocks + 1] = n_children(sd, "layer" .. i .. ".")
      end
    end
    if arch ~= "resnet18_cifar" then cfg.blocks = blocks end
  elseif arch == "vgg16_cifar" or arch == "small_vgg" then
    local convs, bn = conv_weights(sd), any_suffix(sd, "running_mean")
    if arch == "vgg16_cifar" then
      cfg.width, cfg.batch_norm = dim(convs[1][2], 1) / 64, bn
    else
      -- a pool follows a conv block wherever the index jumps past it
      local layout, step = {}, bn and 3 or 2
      for j, c in ipairs(convs) do
        layout[#layout + 1] = dim(c[2], 1)
        local nxt = convs[j + 1] and convs[j + 1][1]
        if not nxt or nxt - c[1] > step then layout[#layout + 1] = "M" end
      end
      cfg.layout = layout
    end
  elseif arch == "convnext_nano" or arch == "convnext_tiny" or arch == "convnext_small" then
    local depths, dims = {}, {}
    for i = 1, 15, 2 do
      if has("features." .. i .. ".0.layer_scale") then
        depths[#depths + 1] = n_children(sd, "features." .. i .. ".")
        dims[#dims + 1] = dim("features." .. i .. ".0.layer_scale", 1)
      end
    end
    if arch == "convnext_nano" then
      cfg.depths, cfg.dims, cfg.stem_kernel = depths, dims, dim("features.0.0.weight", 3)
    elseif arch == "convnext_tiny" and not (same(depths, DEFAULT.convnext_tiny.depths)
                                             and same(dims, DEFAULT.convnext_tiny.dims)) then
      cfg.depths, cfg.dims = depths, dims
    end
  elseif TIMM_VIT[arch] then
    local patch = dim("patch_embed.proj.weight", 3)
    local side = math.floor(math.sqrt(dim("pos_embed", 2) - 1) + 0.5)
    cfg.patch_size, cfg.image_size = patch, side * patch
  elseif arch == "vit_b_16" then
    local side = math.floor(math.sqrt(dim("encoder.pos_embedding", 2) - 1) + 0.5)
    local d = DEFAULT.vit_b_16
    local v = { image_size = side * dim("conv_proj.weight", 3), dim = dim("conv_proj.weight", 1),
                depth = n_children(sd, "encoder.layers."),
                mlp_dim = dim("encoder.layers.encoder_layer_0.mlp.0.weight", 1) }
    v.heads = math.max(1, v.dim // 64)
    for k, x in pairs(v) do if d[k] ~= x then cfg[k] = x end end
  elseif arch == "wrn_28_10" or arch == "wrn_16_4" then
    cfg.widen_factor = dim("block1.layer.0.conv1.weight", 1) // 16
    cfg.depth = 6 * n_children(sd, "block1.layer.") + 4
  elseif arch == "mlp" then
    local n = 0
    while has("fc" .. (n + 1) .. ".weight") do n = n + 1 end
    cfg.hidden = {}
    for i = 1, n do cfg.hidden[i] = dim("fc" .. i .. ".weight", 1) end
    local d = dim("fc1.weight", 2)
    if d ~= 784 then cfg.input = d == 3072 and { 3, 32, 32 } or { 1, d, 1 } end
  end
  return cfg
end

--- sd, arch, cfg (the normaliser's mean/std in cfg), prefix from a
--- checkpoint object; opts.arch / opts.prefix override detection, opts.config
--- entries override what is inferred.
function K.prepare(obj, opts)
  opts = opts or {}
  if type(obj) ~= "table" then error("torchkeys: the checkpoint holds no dict of tensors", 2) end
  local sd, extra = K.split_normalizer(tensors_only(K.state_dict(obj)))
  if next(sd) == nil then error("torchkeys: the checkpoint holds no tensors with string keys", 2) end
  local prefix
  sd, prefix = K.strip_prefix(sd, opts.prefix)
  local arch = opts.arch or K.detect(sd)
  local cfg = K.infer(arch, sd)
  for k, v in pairs(extra) do cfg[k] = v end
  for k, v in pairs(opts.config or {}) do cfg[k] = v end
  return sd, arch, cfg, prefix
end

return K
