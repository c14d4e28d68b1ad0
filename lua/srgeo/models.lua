-- srgeo.models: the encoder zoo and the shipped models.  Architectures live
-- in models/*.lua, one file per family, each a module (require
-- "models.resnet"); a family returns a table of entries
--   name = { build = function(cfg) -> module, doc = "...", input = {C,H,W} }
--   name = { build = function(cfg) -> module, doc = "...", input = {C,H,W},
--            options = {"widths", ...} }    -- cfg keys beyond the common ones
-- with its order and rank (C.order in models/common.lua).  The families are
-- the files of models/ that return such a table (found by listing the
-- folder, so a new family is a new file), and this module exposes them as
-- srgeo.models.NAME{...}, lists them, and records each built model's
-- architecture and config so checkpoints can be reloaded with
-- srgeo.models.load(path) (m:save writes both).  Trained checkpoints ship
-- in models/shipped/ (srgeo.models.shipped()).
local srgeo = require "srgeo"
local json = require "srgeo.json"
local util = require "srgeo.util"

local M = {}
local MODELS = srgeo.root .. "/models"

-- `require "models.NAME"` loads MODELS/NAME.lua, so each file runs once per
-- state (every family used to reload common.lua) and families can use one
-- another.  A searcher rather than ROOT/?.lua in package.path: only
-- models.* names resolve there, and a models/ folder in the working
-- directory cannot shadow the zoo.
local function search(name)
  local file = name:match("^models%.([%w_]+)$")
  if not file then return nil end
  local path = MODELS .. "/" .. file .. ".lua"
  if not util.exists(path) then return "no file '" .. path .. "'" end
  local chunk, err = loadfile(path)
  if not chunk then error("error loading module '" .. name .. "' from file '" .. path .. "':\n\t" .. err, 0) end
  return chunk, path
end
table.insert(package.searchers, 2, search)

local entries, order = {}, {}

-- Families: every models/*.lua that returns an _order, by rank then name.
local function load_families()
  if #order > 0 then return end
  local fams = {}
  for _, f in ipairs(srgeo._listdir(MODELS) or {}) do
    local fam = f:match("^([%w_]+)%.lua$")
    if fam then
      local defs = require("models." .. fam)
      if type(defs) == "table" and defs._order then fams[#fams + 1] = { name = fam, defs = defs } end
    end
  end
  table.sort(fams, function(a, b)
    local ra, rb = a.defs._rank or math.huge, b.defs._rank or math.huge
    if ra ~= rb then return ra < rb end
    return a.name < b.name
  end)
  for _, fam in ipairs(fams) do
    for _, name in ipairs(fam.defs._order) do
      local e = fam.defs[name]
      e.name, e.family = name, fam.name
      entries[name] = e
      order[#order + 1] = name
    end
  end
end

--- The folder shipped models are looked up in ($SRGEO_SHIPPED overrides
--- models/shipped).
function M.shipped_dir() return os.getenv("SRGEO_SHIPPED") or (MODELS .. "/shipped") end

--- The file of shipped model NAME (whether or not it exists).
function M.shipped_path(name) return M.shipped_dir() .. "/" .. name .. ".safetensors" end

--- Names of shipped models present (sorted).
function M.shipped()
  local out = {}
  for _, f in ipairs(srgeo._listdir(M.shipped_dir()) or {}) do
    local n = f:match("^(.+)%.safetensors$")
    if n then out[#out + 1] = n end
  end
  table.sort(out)
  return out
end

--- A checkpoint's __metadata__ (the file is closed again).
function M.metadata(path)
  local f <close> = srgeo.safetensors.open(path)
  return f:metadata()
end

-- Architecture and config of every model built here (weak keys: the info
-- goes away with the model).
local info = setmetatable({}, { __mode = "k" })
M._info = info

--- srgeo.models.info(m) -> {arch=, config= [, path=, metadata=]} or nil (path:
--- the checkpoint srgeo.models.load read)
function M.info(m) return info[m] end

-- Keys every architecture takes; an entry's `options` adds its own.
local COMMON = { "init", "seed", "normalize", "mean", "std", "num_classes" }

--- The cfg keys NAME accepts, sorted.
function M.options(name)
  load_families()
  local e = entries[name]
  if not e then return nil end
  local keys = {}
  for _, k in ipairs(COMMON) do keys[#keys + 1] = k end
  for _, k in ipairs(e.options or {}) do keys[#keys + 1] = k end
  table.sort(keys)
  return keys
end

-- A misspelt key would otherwise be ignored silently and give a model of a
-- different shape than asked for.
local function check_cfg(name, cfg, level)
  local valid = {}
  for _, k in ipairs(M.options(name)) do valid[k] = true end
  for k in pairs(cfg) do
    if not valid[k] then
      error(string.format("srgeo.models.%s: unknown option '%s'; options: %s", name, tostring(k),
                          table.concat(M.options(name), ", ")), level + 1)
    end
  end
end

local copy = util.copy

-- level: where errors point (the user's call).
local function build(name, cfg, level)
  load_families()
  local e = entries[name]
  if not e then error("srgeo.models: no architecture '" .. tostring(name) .. "' (see srgeo.models.list())", level + 1) end
  if cfg ~= nil and type(cfg) ~= "table" then
    error("srgeo.models." .. name .. ": config must be a table (got " .. type(cfg) .. ")", level + 1)
  end
  cfg = copy(cfg or {})
  check_cfg(name, cfg, level + 1)
  local m = e.build(copy(cfg))
  cfg.init = nil
  info[m] = { arch = name, config = cfg }
  return m
end

--- srgeo.models.build(name, cfg)
function M.build(name, cfg) return build(name, cfg, 2) end

-- Trainable parameters of each architecture at its default config, recorded
-- because counting means building (the VGGs alone allocate and initialise
-- over 4 GB); models_spec checks every entry against a build and against
-- PyTorch's count.  Architectures without a record are counted on demand.
local PARAMS = {
  resnet18 = 11689512, resnet34 = 21797672, resnet50 = 25557032, resnet101 = 44549160,
  wide_resnet50_2 = 68883240, resnet18_cifar = 11173962, resnet20 = 272474, vgg11 = 132863336,
  vgg11_bn = 132868840, vgg13 = 133047848, vgg13_bn = 133053736, vgg16 = 138357544, vgg16_bn = 138365992,
  vgg19 = 143667240, vgg19_bn = 143678248, vgg16_cifar = 14728266, convnext_tiny = 28589128,
  convnext_small = 50223688, convnext_nano = 413418, vit_s_16 = 22050664, vit_ti_16 = 5717416,
  vit_b_16_timm = 86567656, vit_b_16 = 86567656, vit_nano = 208074, wrn_28_10 = 36479194, wrn_16_4 = 2748890,
  small_resnet = 174970, small_vgg = 35834, small_vit = 205066, mlp = 235146,
}
M._recorded_params = PARAMS

-- Counted from the shapes of a model built without init, once per session.
local counts = {}
local function count_params(name)
  if not counts[name] then
    local m = entries[name].build({ init = false })
    local n = 0
    for _, t in pairs(m:parameters()) do
      local k = 1
      for _, d in ipairs(t:shape()) do k = k * d end
      n = n + k
    end
    counts[name] = n
  end
  return counts[name]
end

--- A list of {name, family, doc, input, options, params} in registry order
--- (params: trainable parameters at the default config).  {count=true}
--- counts them from a build instead of the record.
function M.list(opts)
  load_families()
  local out = {}
  for _, name in ipairs(order) do
    local e = entries[name]
    local row = { name = name, family = e.family, doc = e.doc, input = e.input, options = M.options(name) }
    row.params = (not (opts and opts.count) and PARAMS[name]) or count_params(name)
    out[#out + 1] = row
  end
  return out
end

-- An ONNX model as a module graph (srgeo.onnx.load).  Its inputs are raw
-- [0, 1] pixels: the normalisation comes from opts.mean / opts.std, else
-- from the file's srgeo.mean / srgeo.std metadata (convert_torch.py --onnx
-- writes them), else the graph does it itself (its first ops are Mul / Add /
-- Sub / Div by constants: x·255, (x − mean)/std); otherwise the caller must
-- say normalize = false, since srgeo cannot know.
--
-- Taps: "output" is the graph's output, "embedding" the input of its last
-- linear layer when there is one.  m:forward(x) returns "embedding" when
-- that layer makes class scores (a softmax after it, or 10, 100, 1000 or
-- ImageNet-21k's count of outputs: DESIGN's penultimate embedding of a
-- classifier), else "output" (a face network's descriptor is its output).
-- output = VALUE, or a tap naming a value, imports only the nodes that value
-- depends on (the rest may hold ops srgeo does not take).
local ONNX_OPTS = { tap = true, mean = true, std = true, normalize = true, input_size = true, dtype = true,
                    input = true, output = true }
local ONNX_TAPS = { output = true, embedding = true, features = true, [""] = true }

local function load_onnx(path, opts, level)
  opts = opts or {}
  for k in pairs(opts) do
    if not ONNX_OPTS[k] then
      error(string.format("srgeo.models.load %s: unknown option '%s'; options for ONNX models: tap, mean, std, "
        .. "normalize, input_size, dtype, input, output", path, tostring(k)), level + 1)
    end
  end
  if opts.normalize == false and (opts.mean or opts.std) then
    error("srgeo.models.load " .. path .. ": normalize=false and mean/std contradict each other", level + 1)
  end
  local want = opts.output
  if want == nil and type(opts.tap) == "string" and not ONNX_TAPS[opts.tap] then want = opts.tap end
  local function import(output)
    return pcall(srgeo.onnx.load, path, { dtype = opts.dtype, input = opts.input, output = output,
      input_size = opts.input_size, mean = opts.mean, std = opts.std, raw = opts.normalize == false })
  end
  local ok, m, oi = import(want)
  if not ok and want ~= opts.output and tostring(m):find("no value named", 1, true) then
    ok, m, oi = import(nil) -- the tap names a graph node, not a value: the whole graph
  end
  if not ok then error(m, 0) end
  if oi.normalization == "none" and not oi.normalizes and opts.normalize ~= false then
    error(string.format("srgeo.models.load %s: the model does not say how its inputs are normalised: no srgeo.mean / "
      .. "srgeo.std metadata, and its first ops are not a Mul / Add / Sub / Div by constants (x*255, (x - mean)/std). "
      .. "Give mean and std (ImageNet: mean = {0.485, 0.456, 0.406}, std = {0.229, 0.224, 0.225}; on the command line "
      .. "--mean 0.485,0.456,0.406 --std 0.229,0.224,0.225), or normalize = false (--no-normalize) if it takes raw "
      .. "[0, 1] pixels", path), level + 1)
  end
  if opts.tap ~= nil then
    local tok, err = pcall(m.default_tap, m, opts.tap)
    if not tok then
      error(string.format("srgeo.models.load %s: tap '%s' is not a value or node of the graph (%s)", path,
        tostring(opts.tap), tostring(err):gsub("^.-: ", "")), level + 1)
    end
  end
  m:eval()
  local cfg = { path = path, input = oi.input, tap = opts.tap, mean = opts.mean, std = opts.std,
                normalize = opts.normalize, input_size = opts.input_size, input_name = opts.input,
                output = opts.output }
  info[m] = { arch = "onnx", config = cfg, onnx = oi, path = path }
  return m, oi
end

-- The options that import an ONNX model again from the config load_onnx
-- recorded (a checkpoint saved from it, its twin).
local function reimport_opts(cfg)
  return { tap = cfg.tap, mean = cfg.mean, std = cfg.std, normalize = cfg.normalize, input_size = cfg.input_size,
           input = cfg.input_name, output = cfg.output }
end

-- A model named as the command line names it: a shipped model's name, or a
-- path relative to the project root when it is not one from the working
-- directory (README's models/shipped/... from any folder).
local function resolve(path)
  if type(path) ~= "string" then return path end
  if path:match("^[%w_%.%-]+$") and not path:match("%.[%a]+$") then
    local f = M.shipped_path(path)
    if util.exists(f) then return f end
    load_families()
    error(string.format("srgeo.models.load: no shipped model '%s' (%s: %s)%s", path, M.shipped_dir(),
      table.concat(M.shipped(), ", "), entries[path] and "; srgeo.models." .. path .. "{} builds the architecture" or ""), 3)
  end
  if not util.exists(path) and not path:match("^/") and util.exists(srgeo.root .. "/" .. path) then
    return srgeo.root .. "/" .. path
  end
  return path
end

-- Whether path is a PyTorch checkpoint: a zip archive (torch.save >= 1.6)
-- or a bare pickle (the legacy format, which srgeo.torch.load refuses by
-- name); its first bytes, not its name, since .pth, .pt, .ckpt, .bin and
-- .tar all occur.
local function is_torch_file(path)
  if util.blocking_kind(path) then return false end -- never open a FIFO: the loader says what it is
  local f = io.open(path, "rb")
  if not f then return false end
  local head = f:read(4)
  f:close()
  -- a legacy pickle opens with PROTO 2 and the LONG1 magic number; a
  -- safetensors file's 8-byte header length can begin with 0x80 too
  return head == "PK\3\4" or (head ~= nil and head:sub(1, 3) == "\128\2\138" and not path:match("%.safetensors$"))
end
M.is_torch_file = is_torch_file

local TORCH_OPTS = { weights = true, arch = true, prefix = true, config = true, strict = true }

-- A PyTorch checkpoint (srgeo.torch.load: no Python, no code run) as a zoo
-- model: the state_dict found (srgeo.torchkeys), the architecture detected
-- from its keys unless opts.arch names it, the config inferred from its
-- shapes (opts.config entries override), then loaded strictly.
local function load_torch(path, opts, level)
  for k in pairs(opts) do
    if not TORCH_OPTS[k] then
      error(string.format("srgeo.models.load %s: unknown option '%s'; options for PyTorch checkpoints: arch, config, "
        .. "prefix, strict", path, tostring(k)), level + 1)
    end
  end
  local tk = require "srgeo.torchkeys"
  local ok, sd, arch, cfg, prefix = pcall(tk.prepare, srgeo.torch.load(path), opts)
  if not ok then error("srgeo.models.load " .. path .. ": " .. tostring(sd), level + 1) end
  local bcfg = copy(cfg)
  bcfg.init = false
  local m = build(arch, bcfg, level + 1)
  local meta = { architecture = arch, config = json.encode(cfg), source = path }
  if prefix ~= "" then meta.stripped_prefix = prefix end
  info[m].metadata, info[m].path = meta, path
  m:load(sd, { strict = opts.strict })
  m:eval()
  return m, meta
end

--- Build the architecture recorded in a checkpoint's __metadata__ and load
--- it; a path ending .onnx is an ONNX model (load_onnx above); a checkpoint
--- saved from one rebuilds it from the ONNX file it names; a PyTorch
--- checkpoint (torch.save's zip) is read without Python (load_torch above).
--- A bare name is a shipped model ("small_resnet"), and a relative path
--- missing from the working directory is looked up under the project root;
--- an http(s) URL is fetched once into the weights cache (srgeo.weights).
--- srgeo.models.load(ARCH, {weights = FILE [, config=, prefix=, strict=]})
--- builds the zoo architecture ARCH and loads FILE (a PyTorch checkpoint or
--- a safetensors file) into it.  FILE may also be a URL or a published
--- weights name ("imagenet", torchvision's "IMAGENET1K_V2" ...; see
--- srgeo.weights.known(ARCH)): the weights cache's file, downloaded and
--- checked by SHA-256 when missing (srgeo.weights; progress = false for
--- no progress line).
function M.load(path, opts)
  if type(path) == "string" and type(opts) == "table" and opts.weights ~= nil then
    load_families()
    if not entries[path] then
      error("srgeo.models.load: no architecture '" .. path .. "' for weights (see srgeo.models.list())", 2)
    end
    local w = opts.weights
    if type(w) ~= "string" then
      error("srgeo.models.load " .. path .. ": weights must be a file name, a URL or a weights name", 2)
    end
    if not util.exists(w) then -- a URL or a published name: the weights cache's file (srgeo.weights)
      local W = require "srgeo.weights"
      local ok, f = pcall(W.resolve, path, w, { progress = opts.progress })
      if not ok then error("srgeo.models.load " .. path .. ": " .. W.reason(f), 2) end
      w = f
    end
    if is_torch_file(w) then
      local o = copy(opts)
      o.weights, o.arch, o.progress = nil, path, nil
      return load_torch(w, o, 2)
    end
    local cfg = copy(opts.config or {})
    cfg.init = false
    local m = build(path, cfg, 2)
    info[m].path = w
    m:load(w, { strict = opts.strict, prefix = opts.prefix })
    m:eval()
    return m, M.metadata(w)
  end
  local W = require "srgeo.weights"
  if W.is_url(path) then -- the weights cache's copy
    local ok, f = pcall(W.fetch, path, { progress = opts and opts.progress })
    if not ok then error("srgeo.models.load: " .. W.reason(f), 2) end
    if opts and opts.progress ~= nil then
      opts = copy(opts)
      opts.progress = nil
    end
    path = f
  end
  path = resolve(path)
  if type(path) == "string" and path:lower():match("%.onnx$") then return load_onnx(path, opts, 2) end
  if type(path) == "string" and is_torch_file(path) then return load_torch(path, opts or {}, 2) end
  local meta = M.metadata(path)
  if meta.architecture == "onnx" then
    local ok, cfg = pcall(json.decode, meta.config or "{}")
    if not ok or type(cfg) ~= "table" or type(cfg.path) ~= "string" then
      error("srgeo.models.load: " .. path .. ": an ONNX checkpoint whose config names no .onnx file", 2)
    end
    local m = load_onnx(cfg.path, reimport_opts(cfg), 2)
    info[m].metadata = meta
    m:load(path, opts)
    m:eval()
    return m, meta
  end
  local arch = meta.architecture
  if not arch then error("srgeo.models.load: " .. path .. " has no 'architecture' in its metadata", 2) end
  local ok, cfg = pcall(json.decode, meta.config or "{}")
  if not ok or type(cfg) ~= "table" then
    error("srgeo.models.load: " .. path .. ": metadata 'config' is not a JSON object: " .. tostring(meta.config), 2)
  end
  cfg.init = false
  local m = build(arch, cfg, 2)
  info[m].metadata, info[m].path = meta, path
  m:load(path, opts)
  m:eval()
  return m, meta
end

--- srgeo.models.twin(m [, {init = "torch-default" | "he" | "xavier", seed = 0}]) -> the random-init
--- twin of a model built or loaded here: the same architecture and config
--- (an imported ONNX graph: the same file imported again with the same
--- options), every learned weight drawn anew, buffers as at construction
--- (BatchNorm's running statistics 0 and 1) and an imported graph's fixed
--- constants as the file has them.
---   torch-default  a zoo model: the architecture's own initialisation, what NAME@init
---                  builds: torchvision's (ResNet/VGG convolutions N(0, 2/fan_out),
---                  BatchNorm 1/0, linear layers PyTorch's uniform ±1/√fan_in) or
---                  timm's (ViT, ConvNeXt: truncated N(0, 0.02²), biases 0).
---                  An imported graph: what torch.nn's modules do by default (the
---                  architecture is not in the file): convolutions and linear layers
---                  kaiming_uniform(a=√5), i.e. weights and biases U(±1/√fan_in);
---                  norms' scales 1, shifts 0; the constants by role below
---   he, xavier     every convolution and linear weight N(0, 2/fan_in) or
---                  N(0, 2/(fan_in + fan_out)); biases 0; the rest by role below
--- Roles: a norm's or an affine block's scale 1 and shift 0, a PReLU slope
--- 0.25 (torch.nn.PReLU's), class tokens and position embeddings N(0, 0.02²)
--- clipped at ±2σ.  A parameter's role is the importer's finding
--- (m:roles(): an ONNX graph's learned Mul / Add / Concat / PRelu operands,
--- core/README.md "Random twins"), else read from its name and shape: a
--- weight of 4 dims is a convolution's (fan_in = C_in/groups·kh·kw), of 2
--- a linear layer's, of 1 a norm's or an affine's scale; a bias is a shift;
--- anything else a token or an embedding.
local TWIN_INITS = { ["torch-default"] = true, he = true, xavier = true }

-- The role of trainable parameter name (shape): roles[name] (the
-- importer's), else its name and shape say it.
local function param_role(name, shape, roles)
  if roles[name] then return roles[name] end
  local leaf = name:match("([^.]+)$")
  if leaf:match("bias$") then return "bias" end
  if (#shape == 4 or #shape == 2) and leaf:match("weight$") then return "weight" end
  if #shape == 1 and (leaf:match("weight$") or leaf:match("gamma$")) then return "scale" end
  return "embedding"
end

-- A value drawn for a parameter of that role and shape (seed s): the one
-- initialiser per role for every model.
local function draw(role, how, shape, s)
  if role == "weight" then
    local fan_in = #shape == 4 and shape[2] * shape[3] * shape[4] or shape[2]
    local fan_out = #shape == 4 and shape[1] * shape[3] * shape[4] or shape[1]
    return srgeo.randn(shape, s) * math.sqrt(how == "he" and 2 / fan_in or 2 / (fan_in + fan_out))
  elseif role == "bias" or role == "shift" then
    return srgeo.zeros(shape)
  elseif role == "scale" then
    return srgeo.full(shape, 1)
  elseif role == "slope" then
    return srgeo.full(shape, 0.25)
  end
  return srgeo.randn(shape, s):clamp(-2, 2) * 0.02 -- tokens, embeddings
end

-- Every trainable parameter of t drawn by its role (torch-default: only
-- those the layers' own reset does not know, the importer's).
local function redraw(t, how, seed)
  local params, roles = t:parameters(), t:roles()
  for i, name in ipairs(t:param_names()) do
    local p = params[name]
    if p and (how ~= "torch-default" or roles[name]) then
      local shape = p:shape()
      t:set(name, draw(param_role(name, shape, roles), how, shape, seed * 7919 + i))
    end
  end
end

function M.twin(m, opts)
  opts = opts or {}
  for k in pairs(opts) do
    if k ~= "init" and k ~= "seed" then error("srgeo.models.twin: unknown option '" .. tostring(k) .. "' (init, seed)", 2) end
  end
  local how, seed = opts.init or "torch-default", opts.seed or 0
  if not TWIN_INITS[how] then
    error("srgeo.models.twin: init must be \"torch-default\", \"he\" or \"xavier\", got " .. tostring(how), 2)
  end
  if math.type(seed) ~= "integer" then error("srgeo.models.twin: seed must be an integer", 2) end
  local mi = info[m]
  if not mi then error("srgeo.models.twin: the model was not built or loaded by srgeo.models (its architecture is unknown)", 2) end
  local t
  if mi.arch == "onnx" then
    local c = mi.config or {}
    local o = reimport_opts(c)
    o.dtype = m:dtype()
    t = load_onnx(c.path, o, 2)
    t:init(seed) -- torch.nn's defaults, layer by layer; running statistics 0 and 1
    info[t].twin_of = mi.path or c.path
  else
    local cfg = copy(mi.config or {})
    cfg.seed, cfg.init = seed, nil
    t = build(mi.arch, cfg, 2)
    info[t].twin_of = mi.path or mi.arch -- torch-default: the architecture's own, nothing to redraw
  end
  redraw(t, how, seed)
  return t:eval()
end

return setmetatable(M, {
  __index = function(_, name)
    load_families()
    if entries[name] then return function(cfg) return build(name, cfg, 2) end end
  end,
})
