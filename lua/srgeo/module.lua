-- srgeo/module.lua: module methods written in Lua (added to the C module
-- metatable): weight files and the tree summary.
--
--   m:load(path [, {strict=true, prefix="module.", ignore={patterns}, warn=fn}]) -> report
--          (path: .safetensors, a PyTorch .pth, or a table {name = tensor})
--   m:save(path [, metadata])
--   m:summary([sample_shape]) -> text (tree, output shapes, parameters, FLOPs, taps)
--   print(m)      -- tostring(m): the tree as PyTorch prints a module, with parameter counts and taps
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

-- A safetensors file, or a table {name = tensor} (a PyTorch state_dict read
-- by srgeo.torch.load) behind the file's keys / info / get / metadata.
local function open_weights(src)
  if type(src) == "string" and require("srgeo.models").is_torch_file(src) then
    -- a torch.save checkpoint: its state_dict, keys as saved (prefix= strips a wrapper's)
    local tk = require "srgeo.torchkeys"
    local sd = {}
    for k, v in pairs(tk.state_dict(srgeo.torch.load(src))) do
      if type(k) == "string" and type(v) == "userdata" then sd[k] = v end
    end
    src = sd
  end
  if type(src) ~= "table" then return srgeo.safetensors.open(src) end
  local w = {}
  function w.keys()
    local ks = {}
    for k in pairs(src) do ks[#ks + 1] = k end
    table.sort(ks)
    return ks
  end
  function w.info()
    local out = {}
    for k, t in pairs(src) do out[k] = { shape = t:shape(), dtype = t:dtype() } end
    return out
  end
  function w.get(_, k, dst) return dst:copy(src[k]) end
  function w.metadata() return {} end
  return setmetatable(w, { __close = function() end })
end

--- Load parameters and buffers from a safetensors file, a PyTorch
--- checkpoint (torch.save's zip: its state_dict, keys as saved) or a table
--- {name = tensor}.  Every missing,
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
  local f <close> = open_weights(path)
  if type(path) == "table" then path = "(tensors)" end
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

-- Thousands separated: 11,689,512.
local function count_str(n)
  local s = tostring(math.tointeger(n) or n)
  return (s:reverse():gsub("(%d%d%d)", "%1,"):reverse():gsub("^,", ""))
end

-- Trainable parameters and buffer entries of a leaf.
local function leaf_counts(mod)
  local trainable, buffers = 0, 0
  for _, t in pairs(mod:parameters()) do trainable = trainable + t:numel() end
  for _, t in pairs(mod:buffers()) do buffers = buffers + t:numel() end
  return trainable, buffers
end

-- A module's children as the tree shows them: a child named "" (a residual,
-- its body, a class-token layer) adds no path component, so its own
-- children sit under the nearest named ancestor; a nameless container is
-- therefore not a node of its own, and its named descendants are listed
-- under that ancestor.  Returns {name =, mod =} entries (name nil for a
-- nameless leaf) and whether a nameless container was passed through.
local function shown_children(mod)
  local out, merged = {}, false
  local function walk(m)
    for _, c in ipairs(m:children()) do
      if c[1] ~= "" then
        out[#out + 1] = { name = c[1], mod = c[2] }
      elseif #c[2]:children() > 0 then
        merged = true
        walk(c[2])
      else
        out[#out + 1] = { mod = c[2] }
      end
    end
  end
  walk(mod)
  return out, merged
end

-- The data flow of a node whose children pass through nameless containers,
-- in its children's names: "(x + (conv1 → bn1 → relu1 → conv2 → bn2)) → relu".
-- A sequential composes (→), a residual sums its branches (one branch: x + it).
local function flow(mod)
  local function expr(m, named)
    if named then return named end
    local kids = m:children()
    if #kids == 0 then return m:kind() end
    local parts = {}
    for i, c in ipairs(kids) do parts[i] = expr(c[2], c[1] ~= "" and c[1] or nil) end
    local function wrap(s) return (s:find(" → ", 1, true) or s:find(" + ", 1, true)) and "(" .. s .. ")" or s end
    if m:kind() == "residual" then
      for i, p in ipairs(parts) do parts[i] = wrap(p) end
      return #parts == 1 and "x + " .. parts[1] or table.concat(parts, " + ")
    end
    if #parts == 1 then return parts[1] end
    for i, p in ipairs(parts) do if p:find(" + ", 1, true) then parts[i] = "(" .. p .. ")" end end
    return table.concat(parts, " " .. (m:kind() == "sequential" and "→" or "·") .. " ")
  end
  return expr(mod)
end

-- The model's tap names by the path they point at: {flatten = {"features (default)"}, [""] = {"logits"}}.
local function taps_by_path(m)
  local by = {}
  local default = m:default_tap()
  local aliases = m:aliases() or {}
  for name, path in pairs(aliases) do
    by[path] = by[path] or {}
    table.insert(by[path], name == default and name .. " (default)" or name)
  end
  if default and aliases[default] == nil then -- the default tap is a module path itself
    by[default] = by[default] or {}
    table.insert(by[default], "(default)")
  end
  for _, l in pairs(by) do table.sort(l) end
  return by
end

local function arch_name(m)
  local zoo = package.loaded["srgeo.models"]
  local info = zoo and zoo.info(m)
  if info and info.arch == "onnx" and info.path then
    return "onnx " .. (info.path:match("([^/]+)$") or info.path) .. (info.twin_of and ", random-init twin" or "")
  end
  return info and info.arch
end

-- "m:forward(x) returns ..." : what the default tap is, in words.
local function forward_line(m)
  local default = m:default_tap()
  if not default then return "m:forward(x) returns the whole model's output" end
  local aliases = m:aliases() or {}
  local path = aliases[default]
  local where = path == nil and "" or path == "" and " = the whole model" or " = " .. path
  return string.format('m:forward(x) returns the default tap "%s"%s; {tap = ""}%s the whole model', default, where,
    aliases.logits == "" and ' (or "logits")' or "")
end

--- The tree as PyTorch prints a module: one node per named child (with its
--- torchvision path component in parentheses), each leaf's configuration,
--- the trainable parameters of every node, the taps, and the totals.
--- A node whose children pass through nameless containers (a residual
--- block) shows its data flow: (x + (conv1 → … → bn2)) → relu.
local function tree(m)
  local by_tap = taps_by_path(m)
  local lines = {} -- {text, params}
  local function node(mod, label, path, depth)
    local kids, merged = shown_children(mod)
    local own, buffers = 0, 0
    local head = { text = string.rep("  ", depth) .. label }
    lines[#lines + 1] = head
    if #mod:children() == 0 then
      own, buffers = leaf_counts(mod)
      local d = mod:describe()
      head.text = head.text .. mod:kind() .. (d:match("^%b()$") and d or d ~= "" and "(" .. d .. ")" or "")
    else
      head.text = head.text .. mod:kind() .. (merged and " = " .. flow(mod) or "")
      for _, c in ipairs(kids) do
        local cpath = c.name and (path == "" and c.name or path .. "." .. c.name) or path
        local t, b = node(c.mod, c.name and "(" .. c.name .. "): " or "", cpath, depth + 1)
        own, buffers = own + t, buffers + b
      end
    end
    local taps = by_tap[path]
    if taps and label ~= "" and depth > 0 then head.text = head.text .. "   ← tap " .. table.concat(taps, ", ") end
    head.params = own
    return own, buffers
  end
  local name = arch_name(m)
  local total, buffers = node(m, name and name .. ": " or "", "", 0)
  local w = 0
  for _, l in ipairs(lines) do w = math.max(w, utf8.len(l.text) or #l.text) end
  w = math.min(w, 96)
  local nw = #count_str(total)
  local out = {}
  for _, l in ipairs(lines) do
    local pad = math.max(2, w + 2 - (utf8.len(l.text) or #l.text))
    out[#out + 1] = l.params > 0 and l.text .. string.rep(" ", pad) .. string.format("%" .. nw .. "s", count_str(l.params))
      or l.text
  end
  if #m:children() == 0 then return out[1] end -- a layer: its line says it all
  out[#out + 1] = string.format("total: %s trainable parameters%s", count_str(total),
    buffers > 0 and string.format(" (and %s buffer entries: running statistics, counters)", count_str(buffers)) or "")
  if next(by_tap) or m:default_tap() then out[#out + 1] = forward_line(m) end
  return table.concat(out, "\n")
end

debug.getregistry()["srgeo.module"].__tostring = tree

--- The tree with output shapes (from a forward on zeros of one sample of
--- sample_shape, e.g. {3,224,224}: the batch dimension is added), parameter
--- counts and GEMM FLOPs per sample of conv/linear/attention leaves, and
--- the taps (what m:forward returns, which the last row's output is not
--- when the default tap sits before the head).  Nameless containers (a
--- residual and its body) are not rows: their children are listed under
--- the block they belong to, as print(m) shows them.
function methods.summary(m, sample_shape)
  local input_shape
  if sample_shape then
    input_shape = { 1 }
    for i, d in ipairs(sample_shape) do input_shape[i + 1] = d end
    local x = srgeo.zeros(input_shape, m:dtype())
    m:forward(x, { tap = "" }) -- the full model, whatever the default tap
  end
  local by_tap = taps_by_path(m)
  local rows, total_params, total_flops = {}, 0, 0
  local function visit(mod, label, path, depth)
    local own = 0
    local shape = input_shape and mod:output_shape() or nil
    local flops = 0
    if #mod:children() == 0 then
      local p = mod:parameters()
      own = leaf_counts(mod)
      flops = leaf_flops(mod, p, shape)
      total_params = total_params + own
      total_flops = total_flops + flops
    end
    rows[#rows + 1] = { string.rep("  ", depth) .. label, mod:kind(), mod:describe(),
                        shape and tostring(shape) or "", own > 0 and tostring(own) or "",
                        flops > 0 and string.format("%.3g", flops) or "",
                        path and by_tap[path] and table.concat(by_tap[path], ", ") or "" }
    for _, c in ipairs((shown_children(mod))) do
      if c.name then
        local cpath = path == "" and c.name or path .. "." .. c.name
        visit(c.mod, cpath, cpath, depth + 1)
      else
        visit(c.mod, "(" .. c.mod:kind() .. ")", nil, depth + 1) -- a nameless leaf: no path of its own
      end
    end
  end
  visit(m, "(model)", "", 0)
  local head = { "module", "kind", "config", "output", "params", "flops", "tap" }
  local w = {}
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
  if m:default_tap() then
    local line_ = forward_line(m)
    if input_shape then
      local y = m:forward(srgeo.zeros(input_shape, m:dtype()))
      line_ = line_:gsub("^m:forward%(x%) returns", "m:forward(x) returns " .. tostring(y:size()) .. ":")
    end
    out[#out + 1] = line_
  end
  return table.concat(out, "\n")
end

return methods
