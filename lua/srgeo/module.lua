-- srgeo/module.lua: module methods written in Lua (added to the C module
-- metatable): weight files and the tree summary.
--
--   m:load(path [, {strict=true, prefix="module.", ignore={patterns}}]) -> report
--   m:save(path [, metadata])
--   m:summary([input_shape]) -> text (tree, output shapes, parameters, FLOPs)
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

--- Load parameters and buffers from a safetensors file.  Every missing,
--- unexpected or shape-mismatched key is reported in one error (or, with
--- strict=false, as warnings on stderr; matching keys are loaded).
function methods.load(m, path, opts)
  opts = opts or {}
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
  local params = m:parameters()
  local missing, unexpected, mismatched = {}, {}, {}
  for _, name in ipairs(m:param_names()) do
    local fk = file_keys[name]
    if not fk then
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
  local report = { missing = missing, unexpected = unexpected, mismatched = mismatched, metadata = f:metadata() }
  local problems = {}
  if #missing > 0 then problems[#problems + 1] = #missing .. " missing: " .. table.concat(missing, ", ") end
  if #unexpected > 0 then problems[#problems + 1] = #unexpected .. " unexpected: " .. table.concat(unexpected, ", ") end
  if #mismatched > 0 then problems[#problems + 1] = #mismatched .. " shape mismatches: " .. table.concat(mismatched, "; ") end
  if #problems > 0 then
    local msg = "load " .. path .. ": " .. table.concat(problems, " | ")
    if strict then error(msg .. " (strict=false loads the matching keys)", 2) end
    io.stderr:write("warning: " .. msg .. "\n")
  end
  local bad = {}
  for _, b in ipairs(mismatched) do bad[b:match("^([^:]+)")] = true end
  local dtype = m:dtype()
  local n = 0
  for name, fk in pairs(file_keys) do
    if params[name] and not bad[name] then
      m:set(name, f:get(fk, dtype))
      n = n + 1
    end
  end
  report.loaded = n
  return report
end

--- Save every parameter and buffer (torchvision key names) with metadata.
function methods.save(m, path, meta)
  local md = {}
  for k, v in pairs(meta or {}) do md[k] = type(v) == "table" and require("srgeo.json").encode(v) or tostring(v) end
  md.srgeo_version = md.srgeo_version or srgeo.version
  srgeo.safetensors.save(path, m:parameters(), md)
  return path
end

local function numel(shape)
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  return n
end

--- The tree with output shapes (from a forward on zeros of input_shape, if
--- given), parameter counts and GEMM FLOPs per sample of conv/linear leaves.
function methods.summary(m, input_shape)
  local shapes = {}
  if input_shape then
    local x = srgeo.zeros(input_shape, m:dtype())
    m:forward(x, { tap = "" }) -- the full model, whatever the default tap
  end
  local rows, total_params, total_flops = {}, 0, 0
  local function visit(mod, path, depth)
    local own = 0
    local params = {}
    for _, c in ipairs(mod:children()) do params[c[1]] = true end
    local p = mod:parameters()
    local nchildren = #mod:children()
    local shape = input_shape and mod:output_shape() or nil
    local flops = 0
    if nchildren == 0 then
      for name, t in pairs(p) do own = own + t:numel() end
      local w = p.weight or p["qkv.weight"] or p.in_proj_weight
      if w and shape and (#w:shape() == 4 or #w:shape() == 2) then
        local out_ch = w:shape()[1]
        flops = 2 * w:numel() * (numel(shape) / shape[1] / (mod:kind() == "attention" and 1 or out_ch))
        if mod:kind() == "attention" then flops = 0 end
      end
      total_params = total_params + own
      total_flops = total_flops + flops
    end
    rows[#rows + 1] = { string.rep("  ", depth) .. (path == "" and "(model)" or path), mod:kind(), mod:describe(),
                        shape and shape_str(shape) or "", own > 0 and tostring(own) or "",
                        flops > 0 and string.format("%.3g", flops) or "" }
    for _, c in ipairs(mod:children()) do
      local sub = c[1] == "" and path or (path == "" and c[1] or path .. "." .. c[1])
      visit(c[2], c[1] == "" and sub or sub, c[1] == "" and depth or depth + 1)
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
    out[#out + 1] = table.concat(cells, "  "):gsub("%s+$", "")
  end
  line(head)
  for _, r in ipairs(rows) do line(r) end
  out[#out + 1] = string.format("total: %d parameters%s", total_params,
    input_shape and string.format(", %.4g GEMM FLOPs per sample (conv/linear)", total_flops) or "")
  return table.concat(out, "\n")
end

return methods
