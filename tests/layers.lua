-- tests/layers.lua: the layering rules of core/ (core/README.md), checked
-- over the #include lines and a few call patterns of every file.  Run by
-- the build (make fails on a violation) and counted by `make test`:
--
--   lua5.4 tests/layers.lua [ROOT]      -> "layers: N passed, M failed"
--
-- Each floor may include its own files and those of the floors it lists;
-- anything else is a violation.  The include graph must have no cycles,
-- between files and between floors.
local root = arg[1] or "."

-- The floors, lowest first, with the floors each may include (besides
-- itself).  kernels never sees nn (a convolution runs without a module
-- tree); stats never sees io (images are data, not statistics); nn and io
-- never see stats or train; import builds module graphs from files, so it
-- is the one floor that sees both io and nn; jupyter (the kernel's wire)
-- sees base only, and only the shell, which runs the kernel, sees it.
local floors = {
  base = {},
  tensor = { "base" },
  kernels = { "base", "tensor" },
  io = { "base", "tensor" },
  data = { "base", "tensor" },
  nn = { "base", "tensor", "kernels" },
  stats = { "base", "tensor", "kernels", "nn" },
  import = { "base", "tensor", "kernels", "io", "nn" },
  train = { "base", "tensor", "kernels", "nn", "data" },
  mpi = {},
  jupyter = { "base" },
  lua = { "base", "tensor", "kernels", "io", "data", "nn", "stats", "train", "import", "mpi" },
  shell = { "base", "lua", "jupyter" },
}
local lua_headers = { ["lua.h"] = true, ["lauxlib.h"] = true, ["lualib.h"] = true }
local sees_lua = { lua = true, shell = true }

local function lines_of(path)
  local f = assert(io.open(path))
  local t = {}
  for l in f:lines() do t[#t + 1] = l end
  f:close()
  return t
end

-- Every C file under core/FLOOR/, found without a shell (ls via popen would
-- also work, but this must run before anything else is built).
local files = {}
local p = io.popen("cd '" .. root .. "' && ls core/*/*.c core/*/*.h 2>/dev/null")
for f in p:lines() do files[#files + 1] = f end
p:close()
table.sort(files)

local results, failed = {}, 0
local function rule(name, violations)
  if #violations == 0 then
    print("ok   layers: " .. name)
  else
    failed = failed + 1
    print("FAIL layers: " .. name)
    for _, v in ipairs(violations) do print("       " .. v) end
  end
  results[#results + 1] = name
end

local includes, known = {}, {}
for _, f in ipairs(files) do known[f:sub(6)] = true end -- "core/" stripped
for _, f in ipairs(files) do
  local inc = {}
  for n, l in ipairs(lines_of(root .. "/" .. f)) do
    local q = l:match('^%s*#%s*include%s+"([^"]+)"') or l:match('^%s*#%s*define%s+SR_GENERIC_FILE%s+"([^"]+)"')
    local s = l:match("^%s*#%s*include%s+<([^>]+)>")
    if q then inc[#inc + 1] = { path = q, line = n, quoted = true } end
    if s then inc[#inc + 1] = { path = s, line = n } end
  end
  includes[f] = inc
end

local floor_of = function(f) return f:match("^core/([^/]+)/") end

-- 1. floors include only their own and the floors below them
do
  local v = {}
  for _, f in ipairs(files) do
    local fl = floor_of(f)
    local allowed = { [fl] = true }
    for _, a in ipairs(floors[fl] or {}) do allowed[a] = true end
    if not floors[fl] then v[#v + 1] = f .. ": core/" .. fl .. " is not a known floor" end
    for _, i in ipairs(includes[f]) do
      if i.quoted then
        local target = i.path:match("^([^/]+)/")
        if not target or not known[i.path] then
          if not (target == nil and (i.path == "test.h")) then
            v[#v + 1] = ("%s:%d: includes \"%s\", which is not core/FLOOR/FILE"):format(f, i.line, i.path)
          end
        elseif floors[fl] and not allowed[target] then
          v[#v + 1] = ("%s:%d: %s/ includes %s"):format(f, i.line, fl, i.path)
        end
      end
    end
  end
  rule("each floor includes only itself and the floors below it", v)
end

-- 2. only core/lua and core/shell see Lua
do
  local v = {}
  for _, f in ipairs(files) do
    if not sees_lua[floor_of(f)] then
      for _, i in ipairs(includes[f]) do
        if not i.quoted and lua_headers[i.path] then
          v[#v + 1] = ("%s:%d: includes <%s>"):format(f, i.line, i.path)
        end
      end
    end
  end
  rule("nothing outside core/lua and core/shell includes Lua headers", v)
end

-- 2b. only core/mpi sees MPI: its one file is built alone into
-- srgeo_mpi.so, which srgeo loads only under mpirun (core/lua/mpi.c)
do
  local v = {}
  for _, f in ipairs(files) do
    if floor_of(f) ~= "mpi" then
      for _, i in ipairs(includes[f]) do
        if not i.quoted and i.path:match("^mpi[%w_]*%.h$") then
          v[#v + 1] = ("%s:%d: includes <%s>"):format(f, i.line, i.path)
        end
      end
    end
  end
  rule("nothing outside core/mpi includes MPI headers", v)
end

-- 3. no cycles: between files, and between floors
do
  local v, state = {}, {}
  local function visit(f, stack)
    state[f] = "open"
    stack[#stack + 1] = f
    for _, i in ipairs(includes[f] or {}) do
      local g = i.quoted and known[i.path] and ("core/" .. i.path)
      if g and g ~= f then
        if state[g] == "open" then
          local cyc, on = {}, false
          for _, s in ipairs(stack) do
            if s == g then on = true end
            if on then cyc[#cyc + 1] = s end
          end
          cyc[#cyc + 1] = g
          v[#v + 1] = "file cycle: " .. table.concat(cyc, " -> ")
        elseif not state[g] then
          visit(g, stack)
        end
      end
    end
    stack[#stack] = nil
    state[f] = "done"
  end
  for _, f in ipairs(files) do
    if not state[f] then visit(f, {}) end
  end
  -- floors: an edge A -> B for every include from A into B (A ~= B)
  local edges = {}
  for _, f in ipairs(files) do
    for _, i in ipairs(includes[f]) do
      local a, b = floor_of(f), i.quoted and i.path:match("^([^/]+)/")
      if b and a ~= b and floors[b] then
        edges[a] = edges[a] or {}
        edges[a][b] = true
      end
    end
  end
  local fstate = {}
  local function fvisit(a, path)
    fstate[a] = "open"
    for b in pairs(edges[a] or {}) do
      if fstate[b] == "open" then
        v[#v + 1] = "floor cycle: " .. path .. " -> " .. b
      elseif not fstate[b] then
        fvisit(b, path .. " -> " .. b)
      end
    end
    fstate[a] = "done"
  end
  local names = {}
  for a in pairs(edges) do names[#names + 1] = a end
  table.sort(names)
  for _, a in ipairs(names) do
    if not fstate[a] then fvisit(a, a) end
  end
  rule("the include graph of core/ has no cycles (files and floors)", v)
end

-- 4. only the opener calls the binding openers
do
  local v = {}
  for _, f in ipairs(files) do
    if f ~= "core/lua/srgeo.c" then
      for n, l in ipairs(lines_of(root .. "/" .. f)) do
        local call = l:match("[^%w_](sr_lua_open_[%w_]+)%s*%(%s*L%s*%)%s*;")
        if call and not l:match("^%s*void%s") then
          v[#v + 1] = ("%s:%d: calls %s"):format(f, n, call)
        end
      end
    end
  end
  rule("only core/lua/srgeo.c calls sr_lua_open_*", v)
end

-- 5. nobody decides by a layer's kind string: containers, fusion and
-- metrics ask the ops table's hooks and flags.  Any comparison of ->kind,
-- and any strcmp against a kind some ops table declares, is a violation.
do
  local v, kinds = {}, {}
  for _, f in ipairs(files) do
    for _, l in ipairs(lines_of(root .. "/" .. f)) do
      local k = l:match('%.kind%s*=%s*"([^"]+)"')
      if k then kinds[k] = true end
    end
  end
  for _, f in ipairs(files) do
    for n, l in ipairs(lines_of(root .. "/" .. f)) do
      local bad = l:match("strcmp%s*%([^;]*%->kind") or l:match("ops%->kind%s*[=!]=") or l:match("is_kind%s*%(")
      for lit in l:gmatch('"([%w_]+)"') do
        if kinds[lit] and l:match("str%a*cmp%s*%(") then bad = true end
      end
      if bad then v[#v + 1] = ("%s:%d: %s"):format(f, n, l:match("^%s*(.-)%s*$")) end
    end
  end
  rule("no file compares ops->kind strings", v)
end

print(("layers: %d passed, %d failed"):format(#results - failed, failed))
os.exit(failed == 0 and 0 or 1)
