-- srgeo/module.lua: module methods written in Lua (added to the C module
-- metatable): weight files and the tree summary.
--
--   m:load(path [, {strict=true, prefix="module.", ignore={patterns}, warn=fn}]) -> report
--   m:save(path [, metadata])
--   m:summary([sample_shape]) -> text (tree, output shapes, parameters, FLOPs)
local srgeo = ...

local methods = debug.getregistry()["srgeo.module"].__index

local function strip_prefixes(key, prefixes)
  for _, p in ipairs(prefixes) do
    if key:sub(1, #p) == p then return key:sub(#p + 1) end
  end
  return key
end

local function shape_str(s) return "(" .. table.concat(s, ",") .. ")" end

local function ignored(key, patterns)
  for _, p in ipairs(patterns) do if key:find(p) then return true end end
  return false
end

local LOAD_OPTS = { strict = true, prefix = true, ignore = true, warn = true }

--- Load parameters and buffers from a safetensors file.  Every missing,
--- unexpected or shape-mismatched key is reported in one error (or, with
--- strict=false, as one warning passed to opts.warn, by default written to
--- stderr; the matching keys are loaded).  prefix: a string or a list of
--- prefixes stripped from the file's keys (the first that matches);
--- ignore: Lua patterns of file keys to skip.  BatchNorm num_batches_tracked
--- may be absent from the file (listed in absent_counters, not an error).
--- Returns {missing=, unexpected=, mismatched=, absent_counters=, loaded=,
--- metadata=}.
function methods.load(m, path, opts)
  opts = opts or {}
  for k in pairs(opts) do
    if not LOAD_OPTS[k] then error("load: unknown option '" .. tostring(k) .. "'; options: strict, prefix, ignore, warn", 2) end
  end
  local prefixes = opts.prefix or {}
  if type(prefixes) == "string" then prefixes = { prefixes } end
  local ignore = opts.ignore or {}
  local strict = opts.strict ~= false
  local f <close> = srgeo.safetensors.open(path)
  local info = f:info()
  local file_keys = {}
  for _, k in ipairs(f:keys()) do
    if not ignored(k, ignore) then
      local mk = strip_prefixes(k, prefixes)
      if file_keys[mk] then error(string.format("load %s: keys '%s' and '%s' both map to '%s'", path, file_keys[mk], k, mk), 2) end
      file_keys[mk] = k
    end
  end
  local params = m:state_dict()
  local missing, unexpected, mismatched, absent = {}, {}, {}, {}
  for _, name in ipairs(m:param_names()) do
    local fk = file_keys[name]
    if not fk and (name == "num_batches_tracked" or name:sub(-20) == ".num_batches_tracked") then
      -- older checkpoints (torchvision's original ImageNet weights among
      -- them) predate this counter, and evaluation never reads it
      absent[#absent + 1] = name
    elseif not fk then
      missing[#missing + 1] = name
    else
      local want, got = params[name]:shape(), info[fk].shape
      if shape_str(want) ~= shape_str(got) then
        mismatched[#mismatched + 1] = string.format("%s: file %s, model %s", name, shape_str(got), shape_str(want))
      end
    end
  end
  for mk, fk in pairs(file_keys) do
    if not params[mk] then unexpected[#unexpected + 1] = fk end
  end
  table.sort(unexpected)
  local report = { missing = missing, unexpected = unexpected, mismatched = mismatched, absent_counters = absent,
                   metadata = f:metadata() }
  local problems = {}
  if #missing > 0 then problems[#problems + 1] = #missing .. " missing: " .. table.concat(missing, ", ") end
  if #unexpected > 0 then problems[#problems + 1] = #unexpected .. " unexpected: " .. table.concat(unexpected, ", ") end
  if #mismatched > 0 then problems[#problems + 1] = #mismatched .. " shape mismatches: " .. table.concat(mismatched, "; ") end
  if #problems > 0 then
    local msg = "load " .. path .. ": " .. table.concat(problems, " | ")
    if strict then error(msg .. " (strict=false loads the matching keys)", 2) end
    if opts.warn then opts.warn(msg) else io.stderr:write("warning: " .. msg .. "\n") end
  end
  local bad = {}
  for _, b in ipairs(mismatched) do bad[b:match("^([^:]+)")] = true end
  local n = 0
  for name, fk in pairs(file_keys) do
    if params[name] and not bad[name] then
      f:get(fk, params[name]) -- straight into the parameter's storage: no temporary
      n = n + 1
    end
  end
  report.loaded = n
  return report
end

--- Save every parameter and buffer (m:state_dict(), torchvision key names) with metadata;
--- a zoo model's architecture and config go in too, so
--- srgeo.models.load(path) rebuilds it.
function methods.save(m, path, meta)
  local json = require "srgeo.json"
  local md = {}
  for k, v in pairs(meta or {}) do md[k] = type(v) == "table" and json.encode(v) or tostring(v) end
  local zoo = package.loaded["srgeo.models"]
  local info = zoo and zoo.info(m)
  if info then
    md.architecture = md.architecture or info.arch
    md.config = md.config or json.encode(info.config)
  end
  md.srgeo_version = md.srgeo_version or srgeo.version
  srgeo.safetensors.save(path, m:state_dict(), md)
  return path
end

local function numel(shape)
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  return n
end

-- GEMM FLOPs per sample of a leaf from its weight and output shape (batch
-- 1): conv/linear 2·|W|·(output positions); attention adds the two T×T
-- products (scores and attention-weighted values).
local function leaf_flops(mod, p, shape)
  local w = p.weight or p["qkv.weight"] or p.in_proj_weight
  if not (w and shape and (#w:shape() == 4 or #w:shape() == 2)) then return 0 end
  if mod:kind() == "attention" then
    local t, d = shape[2], shape[3]
    local proj = p["proj.weight"] or p["out_proj.weight"]
    return 2 * t * (numel(w:shape()) + numel(proj:shape())) + 4 * t * t * d
  end
  return 2 * numel(w:shape()) * (numel(shape) / w:shape()[1])
end

--- The tree with output shapes (from a forward on zeros of one sample of
--- sample_shape, e.g. {3,224,224}: the batch dimension is added), parameter
--- counts and GEMM FLOPs per sample of conv/linear/attention leaves.
function methods.summary(m, sample_shape)
  local input_shape
  if sample_shape then
    input_shape = { 1 }
    for i, d in ipairs(sample_shape) do input_shape[i + 1] = d end
    local x = srgeo.zeros(input_shape, m:dtype())
    m:forward(x, { tap = "" }) -- the full model, whatever the default tap
  end
  local rows, total_params, total_flops = {}, 0, 0
  local function visit(mod, path, depth)
    local own = 0
    local shape = input_shape and mod:output_shape() or nil
    local flops = 0
    if #mod:children() == 0 then
      local p = mod:parameters()
      for _, t in pairs(p) do own = own + numel(t:shape()) end
      flops = leaf_flops(mod, p, shape)
      total_params = total_params + own
      total_flops = total_flops + flops
    end
    rows[#rows + 1] = { string.rep("  ", depth) .. (path == "" and "(model)" or path), mod:kind(), mod:describe(),
                        shape and shape_str(shape) or "", own > 0 and tostring(own) or "",
                        flops > 0 and string.format("%.3g", flops) or "" }
    for _, c in ipairs(mod:children()) do
      if c[1] == "" then
        visit(c[2], path, depth) -- transparent: its children sit at this path
      else
        visit(c[2], path == "" and c[1] or path .. "." .. c[1], depth + 1)
      end
    end
  end
  visit(m, "", 0)
  local w = { 0, 0, 0, 0, 0, 0 }
  local head = { "module", "kind", "config", "output", "params", "flops" }
  for i, h in ipairs(head) do w[i] = #h end
  for _, r in ipairs(rows) do for i, c in ipairs(r) do w[i] = math.max(w[i], utf8.len(c) or #c) end end
  local out = {}
  local function line(r)
    local cells = {}
    for i, c in ipairs(r) do cells[i] = c .. string.rep(" ", w[i] - (utf8.len(c) or #c)) end
    out[#out + 1] = (table.concat(cells, "  "):gsub("%s+$", ""))
  end
  line(head)
  for _, r in ipairs(rows) do line(r) end
  out[#out + 1] = string.format("total: %d trainable parameters%s", total_params,
    input_shape and string.format(", %.4g GEMM FLOPs per sample (conv/linear/attention)", total_flops) or "")
  return table.concat(out, "\n")
end

return methods
