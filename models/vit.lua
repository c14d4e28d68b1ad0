-- models/vit.lua: Vision Transformers.  vit_s_16 / vit_ti_16 / vit_nano use
-- timm's key names (patch_embed.proj, cls_token, pos_embed, blocks.N.norm1,
-- blocks.N.attn.qkv, blocks.N.mlp.fc1, norm, head); vit_b_16 uses
-- torchvision's (conv_proj, class_token, encoder.pos_embedding,
-- encoder.layers.encoder_layer_N.ln_1, self_attention.in_proj_weight, ...).
local srgeo = require "srgeo"
local nn = srgeo.nn
local C = require "models.common"

local function residual(children) return { "", nn.residual { { "", nn.sequential(children) } } } end

local function timm_block(dim, heads, mlp, eps)
  return nn.sequential {
    residual { { "norm1", nn.layernorm { normalized_shape = dim, eps = eps } },
               { "attn", nn.attention { dim = dim, num_heads = heads, style = "timm" } } },
    residual { { "norm2", nn.layernorm { normalized_shape = dim, eps = eps } },
               { "mlp", nn.sequential {
                 { "fc1", nn.linear { in_features = dim, out_features = mlp } },
                 { "act", nn.gelu {} },
                 { "fc2", nn.linear { in_features = mlp, out_features = dim } } } } },
  }
end

local function timm_vit(cfg, d)
  cfg = cfg or {}
  local cin = cfg.in_channels or d.in_channels or 3
  local size = cfg.image_size or d.image_size
  local patch = cfg.patch_size or d.patch
  local dim, depth, heads = cfg.dim or d.dim, cfg.depth or d.depth, cfg.heads or d.heads
  if size % patch ~= 0 then error(string.format("vit: image_size %d is not a multiple of patch %d", size, patch), 3) end
  local np = (size // patch) ^ 2
  local blocks = {}
  for i = 1, depth do blocks[i] = timm_block(dim, heads, 4 * dim, 1e-6) end
  local m = C.seq {
    -- timm augreg ViTs normalise with mean = std = 0.5
    { "normalize", C.normalizer(cfg, cin, nil, nil) },
    { "patch_embed", nn.sequential {
      { "proj", nn.conv2d { in_channels = cin, out_channels = dim, kernel_size = patch, stride = patch } },
      { "tokens", nn.to_tokens {} } } },
    { "", nn.cls_pos { dim = dim, num_patches = math.tointeger(np) } },
    { "blocks", nn.sequential(blocks) },
    { "norm", nn.layernorm { normalized_shape = dim, eps = 1e-6 } },
    { "pool", nn.token_select { index = 0 } },
    { "head", nn.linear { in_features = dim, out_features = cfg.num_classes or d.num_classes or 1000 } },
  }
  C.taps(m, "pool")
  return C.init(m, cfg, "trunc02")
end

local function tv_vit_b_16(cfg)
  cfg = cfg or {}
  -- dim, depth, heads, mlp_dim: torchvision's VisionTransformer at other sizes (ViT-B/16's by default)
  local cin, dim, heads, depth, patch = cfg.in_channels or 3, cfg.dim or 768, cfg.heads or 12, cfg.depth or 12, 16
  local mlp = cfg.mlp_dim or 3072
  local size = cfg.image_size or 224
  if size % patch ~= 0 then error(string.format("vit: image_size %d is not a multiple of patch %d", size, patch), 3) end
  local np = (size // patch) ^ 2
  local layers = {}
  for i = 1, depth do
    layers[i] = { "encoder_layer_" .. (i - 1), nn.sequential {
      residual { { "ln_1", nn.layernorm { normalized_shape = dim, eps = 1e-6 } },
                 { "self_attention", nn.attention { dim = dim, num_heads = heads, style = "torchvision" } } },
      residual { { "ln_2", nn.layernorm { normalized_shape = dim, eps = 1e-6 } },
                 { "mlp", nn.sequential {
                   nn.linear { in_features = dim, out_features = mlp }, nn.gelu {}, nn.identity {},
                   nn.linear { in_features = mlp, out_features = dim }, nn.identity {} } } },
    } }
  end
  local m = C.seq {
    { "normalize", C.normalizer(cfg, cin, C.IMAGENET_MEAN, C.IMAGENET_STD) },
    { "conv_proj", nn.conv2d { in_channels = cin, out_channels = dim, kernel_size = patch, stride = patch } },
    { "tokens", nn.to_tokens {} },
    { "", nn.cls_pos { dim = dim, num_patches = math.tointeger(np), cls_name = "class_token",
                       pos_name = "encoder.pos_embedding" } },
    { "encoder", nn.sequential { { "layers", nn.sequential(layers) },
                                 { "ln", nn.layernorm { normalized_shape = dim, eps = 1e-6 } } } },
    { "select", nn.token_select { index = 0 } },
    { "heads", nn.sequential { { "head", nn.linear { in_features = dim, out_features = cfg.num_classes or 1000 } } } },
  }
  C.taps(m, "select")
  return C.init(m, cfg, "trunc02")
end

-- timm ViTs take their shape from cfg too (image_size with a matching
-- pos_embed, patch_size, dim, depth, heads), so any class-token timm ViT
-- checkpoint loads.
local TIMM_OPTIONS = { "in_channels", "image_size", "patch_size", "dim", "depth", "heads" }
local function timm_def(doc, input, d)
  return { doc = doc, input = input, options = TIMM_OPTIONS, build = function(cfg) return timm_vit(cfg, d) end }
end

local R = {
  vit_s_16 = timm_def("timm ViT-S/16 (384-d, 12 blocks, 6 heads); features: class token after the final norm (384)",
                      { 3, 224, 224 }, { image_size = 224, patch = 16, dim = 384, depth = 12, heads = 6 }),
  vit_ti_16 = timm_def("timm ViT-Ti/16 (192-d, 12 blocks, 3 heads); features: 192", { 3, 224, 224 },
                       { image_size = 224, patch = 16, dim = 192, depth = 12, heads = 3 }),
  vit_b_16_timm = timm_def("timm ViT-B/16 (768-d, 12 blocks, 12 heads; e.g. SynCLR); features: 768", { 3, 224, 224 },
                           { image_size = 224, patch = 16, dim = 768, depth = 12, heads = 12 }),
  vit_b_16 = { doc = "torchvision ViT-B/16 (768-d, 12 blocks, 12 heads); features: class token after encoder.ln (768)",
               input = { 3, 224, 224 }, build = tv_vit_b_16,
               options = { "in_channels", "image_size", "dim", "depth", "heads", "mlp_dim" } },
  vit_nano = timm_def("small ViT for 28/32-px inputs (patch 4, 64-d, 4 blocks, 4 heads; timm names); features: 64",
                      { 3, 32, 32 },
                      { image_size = 32, patch = 4, dim = 64, depth = 4, heads = 4, num_classes = 10, small = true }),
}
return C.order(R, { "vit_s_16", "vit_ti_16", "vit_b_16_timm", "vit_b_16", "vit_nano" }, 4)
