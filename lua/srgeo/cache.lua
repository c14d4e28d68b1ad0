-- srgeo.cache: the unit cache of experiments (resume, sharing between runs).
--
-- A unit is one profile: model × evaluation set × estimator options × tap.
-- Its identity is its description (cache.unit: the model by where its
-- weights come from, a file by its path and the FNV-1a 64 of its bytes; the
-- evaluation set's key; the resolved options; srgeo's version), and its files live in
-- one folder DIR (a script's OUT/units) under one name KEY (cache.key: model
-- label, config, evaluation set, tap, made safe for a file system):
--
--   DIR/KEY.json          the profile          } written once the unit is
--   DIR/KEY.csv           its per-rung table   } complete, the description
--   DIR/KEY.unit.json     the description      } last (the commit)
--   DIR/KEY.partial/      an unfinished unit: unit.json (its description), then
--                         000001.json, 000002.json ... one per finished image
--                         (srgeo.profile's per-image results), so a run killed
--                         inside a unit loses at most the image it was on;
--                         removed when the unit is stored
--   DIR/KEY.lock          the unit's advisory lock (flock): one process
--                         computes a unit at a time; left in place (removing
--                         a lock file others may be waiting on would race)
--   DIR/file-hashes.json  the weight files' hashes by device, inode, size,
--                         mtime and ctime (nanoseconds), so an unchanged
--                         file is not read again on the next run (a file
--                         rewritten in any way has a new ctime)
--
-- A rerun with the same description reuses a complete unit and resumes an
-- unfinished one (byte-identical results: images are seeded by index);
-- anything else recomputes it.  Several processes may share DIR (two runs
-- of a script, or the shards of a distributed run): each unit is computed by
-- whoever takes its lock first, the others use its result.
--
--   local files = cache.files(dir, key)
--   local unit = cache.unit(ms, es, popts, seed, dir)
--   local p, changed = cache.lookup(files, unit)   -- p: the cached profile, or nil
--   local lock = cache.lock(files [, wait])        -- nil, message when another process holds it
--   local resume = cache.resume(files, unit)       -- the finished images of an unfinished unit
--   cache.save_image(files, unit, p, i)            -- image i of p finished
--   cache.store(files, unit, label, p, seconds)    -- the unit is complete
local srgeo = require "srgeo"
local util = require "srgeo.util"
local json = require "srgeo.json"
local spec = require "srgeo.spec"

local C = {}

local status_key = util.status_key

local HASHES = "file-hashes.json"
local MAX_HASHES = 4096 -- the book starts afresh beyond this (each entry is one hash of a file)
local hashes = {} -- this process's: status key -> hash

--- A file's identity for the cache: "fnv1a64:HASH" of its bytes (following
--- links), or "?" when it cannot be read.  Identity by content: two
--- different weight files with the same size and mtime (1 s on many file
--- systems, or set by `touch -d`, `cp -p`) once shared their units.  The
--- hash is kept by the file's status in this process and, given dir (a
--- unit folder), in DIR/file-hashes.json across runs.
function C.file_id(path, dir)
  local st = srgeo._stat(path)
  if not st or st.kind ~= "file" then return "?" end
  local key = status_key(st)
  local book, bpath
  if not hashes[key] and dir then
    bpath = dir .. "/" .. HASHES
    local ok, b = pcall(json.decode, util.try_read(bpath) or "{}")
    book = ok and type(b) == "table" and b or {}
    if type(book[key]) == "string" and book[key]:match("^%x+$") then hashes[key] = book[key] end
  end
  if not hashes[key] then
    local ok, h, st2 = pcall(srgeo._file_hash, path)
    if not ok then return "?" end
    key = status_key(st2)
    hashes[key] = h
    if book then
      local n = 0
      for _ in pairs(book) do n = n + 1 end
      if n >= MAX_HASHES then book = {} end
      book[key] = h
      util.mkdir(dir)
      pcall(util.write_atomic, bpath, json.encode(book, { indent = true }) .. "\n")
    end
  end
  return "fnv1a64:" .. hashes[key]
end

--- The cache identity of a model spec: where its weights come from (a file
--- with its identity, or an architecture with its config), and the init seed
--- of an @init twin.  dir: the unit folder whose file-hashes.json keeps the
--- weight files' hashes (C.file_id).
function C.model_key(ms, seed, dir)
  ms = spec.parse_model(ms)
  local key
  local path = spec.weights_path(ms)
  if ms.path then
    key = "file:" .. ms.path .. "#" .. C.file_id(path, dir)
  elseif ms.weights then
    key = "file:" .. ms.name .. ":" .. ms.weights .. "#" .. C.file_id(path, dir)
  elseif path then
    key = "shipped:" .. ms.name .. "#" .. C.file_id(path, dir)
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

--- What a unit computes: the description compared on reuse.  dir: the unit
--- folder (keeps the weight files' hashes, C.file_id).
function C.unit(ms, es, popts, seed, dir)
  -- format 2: profiles carry their shape test, range and estimator; format 3:
  -- their JVPs take the directional rule at ties, and count ties; format 4: they carry the
  -- float64 forward-difference check (p.fd_jvp) every call is widened by (older units recompute)
  return { format = "srgeo.unit/4", model = C.model_key(ms, seed, dir), eval = es.key, profile = popts,
           version = srgeo.version }
end

--- The files of unit KEY in DIR: json, csv, unit (the description) and
--- partial (an interrupted profile).
function C.files(dir, key)
  local base = dir .. "/" .. key
  return { json = base .. ".json", csv = base .. ".csv", unit = base .. ".unit.json", partial = base .. ".partial",
           lock = base .. ".lock" }
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
--- cache.lock(files [, wait]) -> the unit's lock, or nil and a message when
--- another process holds it (wait: block until it is free).  Release with
--- lock:unlock() (or let it close: local l <close> = ...).
function C.lock(files, wait)
  util.mkdir((files.lock:match("^(.*)/[^/]*$")) or ".")
  return srgeo._lock(files.lock, wait)
end

-- The per-image field of a running profile (its per-rung moments, which
-- srgeo.profile's hooks.resume reads back), and the running totals after
-- each image.
local image_fields = { "_state" }
local total_fields = { "forwards", "exact_pairs", "shared_layers" }

-- JSON has no NaN or infinities (json.lua writes null, read back as NaN):
-- a checkpoint must give back the very values, so they go as strings.
local NONFINITE = { ["nan"] = 0 / 0, ["inf"] = math.huge, ["-inf"] = -math.huge }
local function pack(v)
  if type(v) == "number" and (v ~= v or v == math.huge or v == -math.huge) then
    return v ~= v and "nan" or v > 0 and "inf" or "-inf"
  elseif type(v) == "table" then
    local t = {}
    for k, x in pairs(v) do t[k] = pack(x) end
    return t
  end
  return v
end
local function unpack_values(v)
  if type(v) == "string" and NONFINITE[v] then return NONFINITE[v] end
  if type(v) == "table" then
    for k, x in pairs(v) do v[k] = unpack_values(x) end
  end
  return v
end

local function image_file(files, i) return string.format("%s/%06d.json", files.partial, i) end

--- Image i of the unfinished profile p finished: keep its results (and the
--- unit's description with the first).
function C.save_image(files, unit, p, i)
  if i == 1 or not util.exists(files.partial .. "/unit.json") then
    util.mkdir(files.partial)
    util.write_atomic(files.partial .. "/unit.json", json.encode({ unit = unit }) .. "\n")
  end
  local rec = { image = i }
  for _, k in ipairs(image_fields) do if p[k] then rec[k] = pack(p[k][i]) end end
  for _, k in ipairs(total_fields) do rec[k] = p[k] end
  util.write_atomic(image_file(files, i), json.encode(rec) .. "\n")
end

--- cache.resume(files, unit) -> the finished images of an unfinished unit
--- with this description (srgeo.profile's hooks.resume: per-image fields
--- for images 1..n_images, the totals after image n_images), or nil.  A
--- description that differs discards them.
function C.resume(files, unit)
  local ok, have = pcall(function() return canon(json.decode(util.read_file(files.partial .. "/unit.json")).unit) end)
  if not ok then return nil end
  if have ~= canon(unit) then
    C.discard(files)
    return nil
  end
  local r = { n_images = 0 }
  for _, k in ipairs(image_fields) do r[k] = {} end
  while true do
    local i = r.n_images + 1
    local text = util.try_read(image_file(files, i))
    local dok, rec = pcall(json.decode, text or "")
    if not text or not dok or type(rec) ~= "table" or rec.image ~= i then break end
    for _, k in ipairs(image_fields) do r[k][i] = unpack_values(rec[k]) end
    for _, k in ipairs(total_fields) do r[k] = rec[k] end
    r.n_images = i
  end
  if r.n_images == 0 then return nil end
  return r
end

--- Forget an unfinished unit's images.
function C.discard(files)
  for _, f in ipairs(srgeo._listdir(files.partial) or {}) do os.remove(files.partial .. "/" .. f) end
  os.remove(files.partial)
end

--- Write a computed unit: its profile (JSON and CSV), then its description
--- (so a unit is cached only once its profile is complete); its per-image
--- checkpoints go.
function C.store(files, unit, label, p, seconds)
  p:save_json(files.json)
  p:save_csv(files.csv)
  util.write_atomic(files.unit, json.encode({ unit = unit, label = label, seconds = seconds,
    written = os.date("!%Y-%m-%dT%H:%M:%SZ") }, { indent = true }) .. "\n")
  C.discard(files)
end

return C
