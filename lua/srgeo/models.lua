-- srgeo.models: the encoder zoo.  Architectures live in models/*.lua (one
-- file per family); each returns a table of entries
--   name = { build = function(cfg) -> module, doc = "...", input = {C,H,W} }
-- and this module exposes them as srgeo.models.NAME{...}, lists them, and
-- records each built model's architecture and config so checkpoints can be
-- reloaded with srgeo.models.load(path).
local srgeo = require "srgeo"
local json = require "srgeo.json"

local M = {}
local families = { "resnet", "vgg", "convnext", "vit", "wrn", "small" }
local entries, order = {}, {}

local function load_families()
  if #order > 0 then return end
  for _, fam in ipairs(families) do
    local path = srgeo.root .. "/models/" .. fam .. ".lua"
    local chunk, err = loadfile(path)
    if not chunk then error("srgeo.models: " .. err) end
    local defs = chunk(srgeo)
    for _, name in ipairs(defs._order) do
      local e = defs[name]
      e.name, e.family = name, fam
      entries[name] = e
      order[#order + 1] = name
    end
  end
end

-- Architecture and config of every model built here (weak keys: the info
-- goes away with the model).
local info = setmetatable({}, { __mode = "k" })
M._info = info

--- srgeo.models.info(m) -> {arch=, config=} or nil
function M.info(m) return info[m] end

local function build(name, cfg)
  load_families()
  local e = entries[name]
  if not e then error("srgeo.models: no architecture '" .. tostring(name) .. "' (see srgeo.models.list())", 3) end
  cfg = cfg or {}
  local m = e.build(cfg)
  info[m] = { arch = name, config = cfg }
  return m
end

--- srgeo.models.build(name, cfg)
function M.build(name, cfg) return build(name, cfg) end

--- A list of {name, family, doc, input, params} (params counted by building
--- each model once without init, only when asked: {params=true}).
function M.list(opts)
  load_families()
  local out = {}
  for _, name in ipairs(order) do
    local e = entries[name]
    local row = { name = name, family = e.family, doc = e.doc, input = e.input }
    if opts and opts.params then
      local m = e.build({ init = false })
      local n = 0
      for _, t in pairs(m:parameters({ trainable = true })) do n = n + t:numel() end
      row.params = n
    end
    out[#out + 1] = row
  end
  return out
end

--- Build the architecture recorded in a checkpoint's __metadata__ and load it.
function M.load(path, opts)
  local f <close> = srgeo.safetensors.open(path)
  local meta = f:metadata()
  f:close()
  local arch = meta.architecture
  if not arch then error("srgeo.models.load: " .. path .. " has no 'architecture' in its metadata", 2) end
  local cfg = meta.config and json.decode(meta.config) or {}
  cfg.init = false
  local m = build(arch, cfg)
  info[m].config.init = nil
  info[m].metadata = meta
  m:load(path, opts)
  m:eval()
  return m, meta
end

return setmetatable(M, {
  __index = function(_, name)
    load_families()
    if entries[name] then return function(cfg) return build(name, cfg) end end
  end,
})
