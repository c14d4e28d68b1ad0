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
-- writes them), else the graph does it itself (it starts by subtracting or
-- dividing per-channel constants); otherwise the caller must say
-- normalize = false, since srgeo cannot know.
local ONNX_OPTS = { tap = true, mean = true, std = true, normalize = true, input_size = true, dtype = true,
                    input = true, output = true }

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
  local m, oi = srgeo.onnx.load(path, { dtype = opts.dtype, input = opts.input, output = opts.output,
    input_size = opts.input_size, mean = opts.mean, std = opts.std, raw = opts.normalize == false })
  if oi.normalization == "none" and not oi.normalizes and opts.normalize ~= false then
    error(string.format("srgeo.models.load %s: the model does not say how its inputs are normalised (no srgeo.mean / "
      .. "srgeo.std metadata, no normalisation in the graph): give mean and std (ImageNet: mean = {0.485, 0.456, "
      .. "0.406}, std = {0.229, 0.224, 0.225}), or normalize = false if it takes raw [0, 1] pixels", path), level + 1)
  end
  if opts.tap ~= nil then m:default_tap(opts.tap) end
  m:eval()
  local cfg = { path = path, input = oi.input, tap = opts.tap, mean = opts.mean, std = opts.std,
                normalize = opts.normalize, input_size = opts.input_size, input_name = opts.input,
                output = opts.output }
  info[m] = { arch = "onnx", config = cfg, onnx = oi }
  return m, oi
end

-- Whether path is a PyTorch checkpoint: a zip archive (torch.save >= 1.6)
-- or a bare pickle (the legacy format, which srgeo.torch.load refuses by
-- name); its first bytes, not its name, since .pth, .pt, .ckpt, .bin and
-- .tar all occur.
local function is_torch_file(path)
  local f = io.open(path, "rb")
  if not f then return false end
  local head = f:read(4)
  f:close()
  return head == "PK\3\4" or (head ~= nil and head:byte(1) == 0x80)
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
--- srgeo.models.load(ARCH, {weights = FILE [, config=, prefix=, strict=]})
--- builds the zoo architecture ARCH and loads FILE (a PyTorch checkpoint or
--- a safetensors file) into it.
function M.load(path, opts)
  if type(path) == "string" and type(opts) == "table" and opts.weights ~= nil then
    load_families()
    if not entries[path] then
      error("srgeo.models.load: no architecture '" .. path .. "' for weights (see srgeo.models.list())", 2)
    end
    local w = opts.weights
    if type(w) ~= "string" then error("srgeo.models.load " .. path .. ": weights must be a file name", 2) end
    if is_torch_file(w) then
      local o = copy(opts)
      o.weights, o.arch = nil, path
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
  if type(path) == "string" and path:lower():match("%.onnx$") then return load_onnx(path, opts, 2) end
  if type(path) == "string" and is_torch_file(path) then return load_torch(path, opts or {}, 2) end
  local meta = M.metadata(path)
  if meta.architecture == "onnx" then
    local ok, cfg = pcall(json.decode, meta.config or "{}")
    if not ok or type(cfg) ~= "table" or type(cfg.path) ~= "string" then
      error("srgeo.models.load: " .. path .. ": an ONNX checkpoint whose config names no .onnx file", 2)
    end
    local m = load_onnx(cfg.path, { tap = cfg.tap, mean = cfg.mean, std = cfg.std, normalize = cfg.normalize,
      input_size = cfg.input_size, input = cfg.input_name, output = cfg.output }, 2)
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

return setmetatable(M, {
  __index = function(_, name)
    load_families()
    if entries[name] then return function(cfg) return build(name, cfg, 2) end end
  end,
})
