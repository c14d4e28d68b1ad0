-- srgeo.repl: the shell's printer and its fallback help() (core/shell/shell.c
-- loads this module at start-up).
--
--   repl.repr(...)  -> the REPL's line for a statement's results
--   repl.help(...)  -- srgeo.help when the library has one, else a summary
--
-- Tables print shallowly on one logical line, array part first, then keys
-- sorted, capped, wrapped at 78 columns:
--     {conv2d=function, help={...}, linear=function, ...}
-- Written in Lua because it is string formatting and sorting, which Lua says
-- in a third of the lines C would.
local srgeo = require "srgeo"

local MAXITEMS, WIDTH, SHORT = 40, 78, 60
local keywords = {}
for w in ('and break do else elseif end false for function goto if in local nil not or '
  .. 'repeat return then true until while'):gmatch('%a+') do keywords[w] = true end
local function isident(k)
  return type(k) == 'string' and k:match('^[%a_][%w_]*$') ~= nil and not keywords[k]
end
local function cut(s)
  local nl = s:find('\n', 1, true)
  if nl then s = s:sub(1, nl - 1) .. ' ...' end
  if #s > SHORT then s = s:sub(1, SHORT - 3) .. '...' end
  return s
end
local function quote(s)
  if #s > SHORT then s = s:sub(1, SHORT - 3) .. '...' end
  return (string.format('%q', s):gsub('\\\n', '\\n'))
end
local function safetostring(v)
  local ok, s = pcall(tostring, v)
  return ok and type(s) == 'string' and s or '<' .. type(v) .. '>'
end
local function hastostring(v)
  local mt = getmetatable(v)
  return type(mt) == 'table' and rawget(mt, '__tostring') ~= nil
end
-- a value inside a table: one short token
local function short(v)
  local t = type(v)
  if t == 'string' then return quote(v) end
  if t == 'table' and not hastostring(v) then return next(v) == nil and '{}' or '{...}' end
  if t == 'function' then return 'function' end
  return cut(safetostring(v))
end
local rank = { string = 1, number = 2, boolean = 3 }
local function before(a, b)
  local ra, rb = rank[type(a)] or 4, rank[type(b)] or 4
  if ra ~= rb then return ra < rb end
  if ra <= 2 then return a < b end
  return safetostring(a) < safetostring(b)
end
local function tabrepr(t)
  local items, total = {}, 0
  local len = rawlen(t)
  for i = 1, len do
    total = total + 1
    if total <= MAXITEMS then items[total] = short(rawget(t, i)) end
  end
  local keys = {}
  for k in next, t do
    if not (math.type(k) == 'integer' and k >= 1 and k <= len) then keys[#keys + 1] = k end
  end
  if #keys <= 10000 then table.sort(keys, before) end
  for _, k in ipairs(keys) do
    total = total + 1
    if total <= MAXITEMS then
      local ks = isident(k) and k or '[' .. (type(k) == 'string' and quote(k) or short(k)) .. ']'
      items[#items + 1] = ks .. '=' .. short(rawget(t, k))
    end
  end
  if total > MAXITEMS then items[#items + 1] = '... (' .. (total - MAXITEMS) .. ' more)' end
  local out, col = { '{' }, 1
  for i, s in ipairs(items) do
    if i > 1 then
      if col + 2 + #s > WIDTH then out[#out + 1] = ',\n '; col = 1
      else out[#out + 1] = ', '; col = col + 2 end
    end
    out[#out + 1] = s; col = col + #s
  end
  out[#out + 1] = '}'
  return table.concat(out)
end
-- the REPL's printer: every result, tab-separated, like print
local function repr(...)
  local n, out = select('#', ...), {}
  for i = 1, n do
    local v = select(i, ...)
    if type(v) == 'table' and not hastostring(v) then out[i] = tabrepr(v)
    else out[i] = tostring(v) end
  end
  return table.concat(out, '\t')
end
-- help(): defer to the library's help when it has one
local function help(...)
  local ok, h = pcall(function() return srgeo.help end)
  if ok and h ~= nil then return h(...) end
  io.write([[
srgeo shell: Lua 5.4 with the srgeo library as the global 'srgeo'.
  expressions print their value     srgeo.version   srgeo.nn   1 + 1
  Tab completes                     srgeo.nn.<Tab>  x:<Tab> (methods)
  Ctrl-C stops a computation and returns here; Ctrl-D or os.exit() quits.
  history is kept in ~/.srgeo_history (SRGEO_HISTORY overrides).
  srgeo.threads(n) sets the thread count (also SRGEO_THREADS).
Library fields: ]])
  local names = {}
  for k in pairs(srgeo) do if type(k) == 'string' then names[#names + 1] = k end end
  table.sort(names)
  io.write(table.concat(names, ' '), '\n')
end
return { repr = repr, help = help }
