-- srgeo.repl: the shell's printer, its traceback store and its fallback
-- help() (core/shell/shell.c loads this module at start-up).
--
--   repl.repr(...)      -> the REPL's text for a statement's results
--   repl.pretty(v [, o]) -> a value as the REPL shows it (o.width, o.depth)
--   repl.help(...)      -- srgeo.help when the library has one, else a summary
--   srgeo.traceback()   -- the full traceback of the last error (shell.c keeps it)
--   repl.interactive    -- true once the REPL runs (shell.c sets it): results echo
--
-- The pretty printer is inspect.lua's / IPython's repr: array part first,
-- then keys sorted; nested tables to depth 3 (deeper ones as {...}), each
-- table on one line when it fits in the width (78 columns), else one item a
-- line, indented; at most 40 items a table (20 nested), long strings cut;
-- a table met again on the way down prints as <cycle>.  A list of records
-- (tables of the same string keys: srgeo.models.list()) prints as aligned
-- rows, one record a row, cut at the width.  Objects with a __tostring
-- print through it, userdata and tables with a __name as <NAME>.
-- Written in Lua because it is string formatting and sorting, which Lua says
-- in a third of the lines C would.
local srgeo = require "srgeo"

local MAXITEMS, NESTED_ITEMS, WIDTH, SHORT, DEPTH = 40, 20, 78, 60, 3
local keywords = {}
for w in ('and break do else elseif end false for function goto if in local nil not or '
  .. 'repeat return then true until while'):gmatch('%a+') do keywords[w] = true end
local function isident(k)
  return type(k) == 'string' and k:match('^[%a_][%w_]*$') ~= nil and not keywords[k]
end
local function ulen(s) return utf8.len(s) or #s end
-- s cut to at most n characters (UTF-8 aware), ending in "..." when cut
local function clip(s, n)
  if ulen(s) <= n then return s end
  local stop = utf8.offset(s, n - 2)
  return (stop and s:sub(1, stop - 1) or s:sub(1, n - 3)) .. '...'
end
local function cut(s)
  local nl = s:find('\n', 1, true)
  if nl then s = s:sub(1, nl - 1) .. ' ...' end
  return clip(s, SHORT)
end
-- s quoted, at most n (default SHORT) characters with its escapes
local function quote(s, n)
  n = math.max(n or SHORT, 8)
  local keep = n - 2
  while true do
    local q = string.format('%q', clip(s, keep)):gsub('\\\n', '\\n')
    if ulen(q) <= n or keep <= 4 then return q end
    keep = keep - (ulen(q) - n)
  end
end
local function safetostring(v)
  local ok, s = pcall(tostring, v)
  return ok and type(s) == 'string' and s or '<' .. type(v) .. '>'
end
local function metafield(v, name)
  local mt = getmetatable(v)
  return type(mt) == 'table' and rawget(mt, name) or nil
end
local function hastostring(v) return metafield(v, '__tostring') ~= nil end
local rank = { string = 1, number = 2, boolean = 3 }
local function before(a, b)
  local ra, rb = rank[type(a)] or 4, rank[type(b)] or 4
  if ra ~= rb then return ra < rb end
  if ra <= 2 then return a < b end
  return safetostring(a) < safetostring(b)
end
-- a plain table: printed by its contents
local function plain(v) return type(v) == 'table' and not hastostring(v) and type(metafield(v, '__name')) ~= 'string' end

-- A leaf: anything but a plain table, on one line (a string of at most
-- width characters).
local function leaf(v, width)
  local t = type(v)
  if t == 'string' then return quote(v, width and math.min(width, SHORT)) end
  if t == 'function' then return 'function' end
  if (t == 'table' or t == 'userdata') and not hastostring(v) and type(metafield(v, '__name')) == 'string' then
    return '<' .. metafield(v, '__name') .. '>'
  end
  return cut(safetostring(v))
end

-- The sorted keys and the array length of t.
local function keys_of(t)
  local len, keys = rawlen(t), {}
  for k in next, t do
    if not (math.type(k) == 'integer' and k >= 1 and k <= len) then keys[#keys + 1] = k end
  end
  if #keys <= 10000 then table.sort(keys, before) end
  return len, keys
end

local pretty

-- A list of records: at least two plain tables, all with string keys only,
-- sharing at least one key; its columns (name-like first, long ones last).
local function record_columns(t)
  local len, keys = keys_of(t)
  if len < 2 or #keys > 0 then return nil end
  local seen, cols = {}, {}
  for i = 1, len do
    local r = rawget(t, i)
    if not plain(r) or rawlen(r) > 0 then return nil end
    for k in next, r do
      if type(k) ~= 'string' then return nil end
      if not seen[k] then seen[k] = 0; cols[#cols + 1] = k end
      seen[k] = seen[k] + 1
    end
  end
  local shared = false
  for _, c in pairs(seen) do if c == len then shared = true end end
  if not shared then return nil end
  return cols
end

local function cell(v)
  if type(v) == 'string' then return cut(v) end
  if plain(v) then return clip(pretty(v, { width = math.huge, depth = 2, items = 8 }), 40) end
  return leaf(v)
end

local function records(t, cols, width)
  local n, cells, w = rawlen(t), {}, {}
  for j, c in ipairs(cols) do w[j] = ulen(c) end
  local shown = math.min(n, MAXITEMS)
  for i = 1, shown do
    local row = {}
    for j, c in ipairs(cols) do
      local v = rawget(rawget(t, i), c)
      row[j] = v == nil and '' or cell(v)
      w[j] = math.max(w[j], ulen(row[j]))
    end
    cells[i] = row
  end
  -- name-like columns first, then by key; wide columns (docs) last
  local order = {}
  for j in ipairs(cols) do order[j] = j end
  local first = { name = 1, label = 2, id = 3 }
  table.sort(order, function(a, b)
    local fa, fb = first[cols[a]] or 9, first[cols[b]] or 9
    if fa ~= fb then return fa < fb end
    local la, lb = w[a] > 30, w[b] > 30
    if la ~= lb then return lb end
    return cols[a] < cols[b]
  end)
  local function line(get)
    local parts = {}
    for k, j in ipairs(order) do
      local s = get(j)
      parts[k] = k < #order and s .. string.rep(' ', w[j] - ulen(s)) or s
    end
    return clip(table.concat(parts, '  '):gsub('%s+$', ''), width)
  end
  local out = { line(function(j) return cols[j] end) }
  for i = 1, shown do out[#out + 1] = line(function(j) return cells[i][j] end) end
  if n > shown then out[#out + 1] = '... (' .. (n - shown) .. ' more)' end
  return table.concat(out, '\n')
end

-- v as text; o: width (of the first line), depth, items, indent, seen
function pretty(v, o)
  o = o or {}
  if not plain(v) then return leaf(v, o.width) end
  local width, depth, items, indent = o.width or WIDTH, o.depth or DEPTH, o.items or MAXITEMS, o.indent or ''
  if next(v) == nil then return '{}' end
  local seen = o.seen or {}
  if seen[v] then return '<cycle>' end
  if depth <= 0 then return '{...}' end
  if indent == '' and not o.inline then
    local cols = record_columns(v)
    if cols then return records(v, cols, math.max(width, tonumber(os.getenv('COLUMNS') or '') or 0)) end
  end
  seen[v] = true
  local len, keys = keys_of(v)
  local parts, total = {}, len + #keys
  local inner = indent .. '  '
  local function sub(x, w)
    return pretty(x, { width = w, depth = depth - 1, items = NESTED_ITEMS, indent = inner, seen = seen, inline = true })
  end
  for i = 1, math.min(len, items) do parts[#parts + 1] = { '', rawget(v, i) } end
  for _, k in ipairs(keys) do
    if #parts >= items then break end
    local ks = isident(k) and k or '[' .. (type(k) == 'string' and quote(k) or leaf(k)) .. ']'
    parts[#parts + 1] = { ks .. '=', rawget(v, k) }
  end
  -- one line when it fits
  local flat, fits = {}, true
  for i, p in ipairs(parts) do
    local s = sub(p[2], width)
    if s:find('\n', 1, true) then fits = false break end
    flat[i] = p[1] .. s
  end
  local more = total > #parts and '... (' .. (total - #parts) .. ' more)' or nil
  if fits then
    if more then flat[#flat + 1] = more end
    local s = '{' .. table.concat(flat, ', ') .. '}'
    if ulen(s) <= width then seen[v] = nil return s end
  end
  -- short items filled into lines, a multi-line or long item on its own
  local out, line = {}, nil
  local function flush() if line then out[#out + 1] = line; line = nil end end
  for _, p in ipairs(parts) do
    local lead = inner .. p[1]
    local s = p[1] .. sub(p[2], math.max(20, WIDTH - ulen(lead) - 1))
    if s:find('\n', 1, true) or ulen(s) > WIDTH // 2 then
      flush()
      out[#out + 1] = inner .. s
    elseif line and ulen(line) + 2 + ulen(s) <= WIDTH then
      line = line .. ', ' .. s
    else
      flush()
      line = inner .. s
    end
  end
  flush()
  if more then out[#out + 1] = inner .. more end
  seen[v] = nil
  return '{\n' .. table.concat(out, ',\n') .. '\n' .. indent .. '}'
end

-- the REPL's printer: every result, tab-separated, like print
local function repr(...)
  local n, out = select('#', ...), {}
  for i = 1, n do
    local v = select(i, ...)
    if plain(v) then out[i] = pretty(v) else out[i] = safetostring(v) end
  end
  return table.concat(out, '\t')
end

-- The last error's full traceback: core/shell/shell.c's message handler
-- stores it here through user_error (the shell prints the message and the
-- user's line only).
local last_traceback, hinted
-- where a tail call's error is put instead of stdin:1 (set_tail_place: srgeo
-- kernel, per cell, "In[N]:LINE"; nil in the REPL)
local tail_place

-- A frame of the library's own Lua files (lua/srgeo/*.lua, models/*.lua,
-- and the subcommands' scripts/*.lua, whose user's "code" is the command
-- line).
local LIBRARY_DIRS = { '/lua/srgeo/', '/models/', '/scripts/' }
local function library_source(src)
  local root = rawget(srgeo, 'root')
  if type(src) ~= 'string' or type(root) ~= 'string' then return false end
  for _, d in ipairs(LIBRARY_DIRS) do
    if src:sub(1, #root + #d + 1) == '@' .. root .. d then return true end
  end
  return false
end
local function library_chunk(name)
  for _, d in ipairs(LIBRARY_DIRS) do
    if name:find(d:sub(2) .. '[%w_]+%.lua$') then return true end
  end
  return false
end

-- user_error(msg, traceback, in_repl, full) -> the text the shell prints
-- for an error: the full traceback when asked for; else the message at the
-- innermost line of the user's code (the first Lua frame outside the
-- library, found by walking the stack the error unwinds): a message raised
-- inside the library's files, or without a place (C, error(msg, 0)), is
-- put at that line, so a user's mistake points at the user's line.  Then
-- a hint where the traceback is (in the REPL only once a session).
local function user_error(msg, tb, in_repl, full)
  last_traceback = tb
  if full then return tb end
  local where, tail
  for level = 2, 400 do
    local info = debug.getinfo(level, 'Slt')
    if not info then break end
    if info.what ~= 'C' and (info.currentline or 0) > 0 and not library_source(info.source) then
      where = info.short_src .. ':' .. info.currentline
      break
    end
    tail = tail or info.istailcall
  end
  -- the REPL runs an expression as `return LINE;`, whose call is a tail
  -- call: its frame is gone, and the line was stdin's only one (srgeo
  -- kernel's cell: tail_place, the line its returned expression starts on)
  if not where and tail and in_repl then where = tail_place or 'stdin:1' end
  local chunk, rest = msg:match('^([^\n]-):%d+: (.*)$')
  if where then
    if chunk and library_chunk(chunk) then msg = where .. ': ' .. rest
    elseif not chunk and msg ~= 'interrupted!' then msg = where .. ': ' .. msg end
  elseif chunk and library_chunk(chunk) then
    msg = rest -- a subcommand's error: no line of the user's to show
  end
  if in_repl then
    if hinted then return msg end
    hinted = true
    return msg .. '\n(:tb or srgeo.traceback() shows the traceback)'
  end
  return msg .. '\n(SRGEO_TRACEBACK=1 or srgeo --traceback shows the traceback)'
end
--- srgeo.traceback() prints the full traceback of the last error the shell
--- reported (:tb in the REPL does the same; SRGEO_TRACEBACK=1 or
--- `srgeo --traceback` prints every one as it happens).
local function traceback()
  io.write((last_traceback or 'no error yet'), '\n')
  io.flush()
end
srgeo.traceback = traceback

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
return { repr = repr, pretty = pretty, help = help, user_error = user_error, traceback = traceback,
         set_tail_place = function(p) tail_place = p end }
