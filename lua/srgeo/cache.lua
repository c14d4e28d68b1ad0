-- srgeo.cache: the unit cache of experiments (resume).
--
-- Each unit (model × evaluation set × estimator options × tap) is written to
-- DIR/KEY.json (the profile) + DIR/KEY.csv + DIR/KEY.unit.json (what was
-- computed: the unit's description).  A rerun with the same description
-- reuses the unit; anything else recomputes it.  A description names the
-- model by where its weights come from, and a file by its size and
-- modification time, so a retrained checkpoint at the same path is not
-- mistaken for the old one.
--
--   local files = cache.files(dir, key)
--   local unit = cache.unit(ms, es, popts, seed)
--   local p, changed = cache.lookup(files, unit)   -- p: the cached profile, or nil
--   cache.store(files, unit, label, p, seconds)
local srgeo = require "srgeo"
local util = require "srgeo.util"
local json = require "srgeo.json"
local spec = require "srgeo.spec"

local C = {}

--- A file's identity for the cache: "SIZE MTIME" (following links), or "?"
--- when it cannot be read.
function C.file_id(path)
  local st = srgeo._stat(path)
  if not st then return "?" end
  return string.format("%d %d", st.size, st.mtime)
end

--- The cache identity of a model spec: where its weights come from (a file
--- with its identity, or an architecture with its config), and the init seed
--- of an @init twin.
function C.model_key(ms, seed)
  ms = spec.parse_model(ms)
  local key
  local path = spec.weights_path(ms)
  if ms.path then
    key = "file:" .. ms.path .. "#" .. C.file_id(ms.path)
  elseif path then
    key = "shipped:" .. ms.name .. "#" .. C.file_id(path)
  else
    key = "arch:" .. ms.name .. (ms.cfg and json.encode(ms.cfg) or "")
  end
  if ms.init then key = key .. "@init:" .. tostring(ms.init_seed or seed or 0) end
  return key
end

local function sanitize(s) return (tostring(s):gsub("[^%w%.%-_@]+", "_")) end

--- The default file name of a unit: model label (and config), evaluation
--- set and tap, made safe for a file system.
function C.key(ms, es, tap)
  return sanitize(ms.label .. (ms.cfg and json.encode(ms.cfg) or "") .. "__" .. es.key .. (tap and "__" .. tap or ""))
end

--- What a unit computes: the description compared on reuse.
function C.unit(ms, es, popts, seed)
  -- format 2: profiles carry their shape test, range and estimator (older units recompute)
  return { format = "srgeo.unit/2", model = C.model_key(ms, seed), eval = es.key, profile = popts,
           version = srgeo.version }
end

--- The files of unit KEY in DIR: json, csv, unit (the description) and
--- partial (an interrupted profile).
function C.files(dir, key)
  local base = dir .. "/" .. key
  return { json = base .. ".json", csv = base .. ".csv", unit = base .. ".unit.json", partial = base .. ".partial.json" }
end

-- JSON canonical form of a unit's description (for cache comparison).
local function canon(t) return json.encode(json.decode(json.encode(t))) end

--- cache.lookup(files, unit) -> profile, or nil and whether a cached unit
--- exists whose description differs (the options or the model changed).
function C.lookup(files, unit)
  if not (util.exists(files.json) and util.exists(files.unit)) then return nil, false end
  local ok, have = pcall(function() return canon(json.decode(util.read_file(files.unit)).unit) end)
  if not ok then return nil, false end
  if have ~= canon(unit) then return nil, true end
  local lok, p = pcall(srgeo.profile.load, files.json)
  if lok then return p end
  return nil, false
end

--- Keep what an interrupted unit computed (the next run starts it afresh).
function C.save_partial(files, p) p:save_json(files.partial) end

--- Write a computed unit: its profile (JSON and CSV), then its description
--- (so a unit is cached only once its profile is complete).
function C.store(files, unit, label, p, seconds)
  p:save_json(files.json)
  p:save_csv(files.csv)
  util.write_atomic(files.unit, json.encode({ unit = unit, label = label, seconds = seconds,
    written = os.date("!%Y-%m-%dT%H:%M:%SZ") }, { indent = true }) .. "\n")
  os.remove(files.partial)
end

return C
