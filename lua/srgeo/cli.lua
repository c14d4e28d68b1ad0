-- srgeo.cli: command-line options for scripts, from one spec table.
--
--   local cli = require "srgeo.cli"
--   local spec = {
--     name = "bump.lua", about = "Profile of one encoder on one evaluation set.",
--     options = {
--       { "model", "small_resnet", "model: shipped name, ARCH@init, a .safetensors path, a PyTorch .pth (ARCH:FILE.pth names the architecture)" },
--       { "evals", { "fmnist-test:64" }, "evaluation sets (comma-separated)" },
--       { "seed", 0, "seed of the evaluation draw and the directions" },
--       { "twin", false, "also profile the random-init twin" },
--       { "preset", "quick", "estimator preset", choices = { "paper", "sequential", "quick" } },
--     },
--     positional = { { "file", "the notebook to run" } },     -- optional
--     examples = { "srgeo scripts/bump.lua --model small_resnet --twin" },
--   }
--   local o = cli.run(spec, { ... })    -- --help prints and exits 0; a bad option exits 2
--   local o = cli.parse(spec, argv)     -- the same, but raises instead of exiting
--
-- Subcommands: `srgeo NAME args...` runs scripts/NAME.lua of the library
-- root (core/shell/shell.c asks cli.command), or a file registered in
-- cli.builtins; `srgeo --help` and srgeo.examples() print cli.commands_text().
--
-- An option's type follows its default: a string, a number (an integer
-- default asks for an integer), a boolean (a flag: `--twin`, `--no-twin`,
-- `--twin=false`) or a list (`a,b,c`; a list default of numbers makes a
-- list of numbers).  `type =` overrides ("string", "number", "integer",
-- "boolean", "list", "numbers"), for an option whose default is nil.
-- `sets = "root"`: the flag sets the library's Lua option root (the
-- library's messages then say --data-root, not root=: util.option).
-- `min =` / `max =` bound a number (numbers are finite in any case); the
-- check and its message are the core's declared-option ones (base/opts.h
-- through srgeo._check_option: "--images must be an integer >= 1, got 0").
-- Spelling: `--key value` or `--key=value`; dashes and underscores are the
-- same (`--jvp-directions` sets o.jvp_directions).  Positionals fill
-- spec.positional in order (the rest land in o._).
local util = require "srgeo.util"
local json = require "srgeo.json"

local M = {}

local function fail(spec, fmt, ...) util.raise { msg = (spec.name or "script") .. ": " .. string.format(fmt, ...) } end

M.Error = util.Error

local copy = util.copy

-- Normalise one option entry: {name, default, help, choices=, type=} or
-- {name=, default=, help=, ...}.
local function norm_option(e)
  local o = {
    name = e.name or e[1], default = e.default, help = e.help or e[3] or "",
    choices = e.choices, type = e.type, metavar = e.metavar, min = e.min, max = e.max, sets = e.sets,
  }
  if o.default == nil and e.default == nil and e[2] ~= nil then o.default = e[2] end
  if type(o.name) ~= "string" or o.name == "" then error("cli: every option needs a name", 3) end
  o.name = o.name:gsub("-", "_")
  if not o.type then
    local d = o.default
    if type(d) == "boolean" then o.type = "boolean"
    elseif math.type(d) == "integer" then o.type = "integer"
    elseif type(d) == "number" then o.type = "number"
    elseif type(d) == "table" then o.type = (type(d[1]) == "number") and "numbers" or "list"
    else o.type = "string" end
  end
  local known = { string = true, number = true, integer = true, boolean = true, list = true, numbers = true }
  if not known[o.type] then error("cli: option " .. o.name .. " has unknown type '" .. tostring(o.type) .. "'", 3) end
  return o
end

local function compile(spec)
  if spec._compiled then return spec._compiled end
  local c = { list = {}, by = {} }
  for _, e in ipairs(spec.options or {}) do
    local o = norm_option(e)
    if not c.by[o.name] then c.list[#c.list + 1] = o end
    c.by[o.name] = o
  end
  c.positional = {}
  for _, e in ipairs(spec.positional or {}) do
    c.positional[#c.positional + 1] = { name = (e.name or e[1]):gsub("-", "_"), help = e.help or e[2] or "",
                                        required = e.required ~= false }
  end
  spec._compiled = c
  return c
end

local function flag(name) return "--" .. name:gsub("_", "-") end

-- A value as the help shows it.
local function show(v)
  if v == nil then return nil end
  if type(v) == "table" then
    local t = {}
    for i, x in ipairs(v) do t[i] = tostring(x) end
    return table.concat(t, ",")
  end
  return tostring(v)
end

local function convert(spec, o, s)
  local t = o.type
  if t == "string" then
    if o.choices then
      for _, c in ipairs(o.choices) do if c == s then return s end end
      fail(spec, "%s must be one of %s (got '%s')", flag(o.name), table.concat(o.choices, ", "), s)
    end
    return s
  elseif t == "number" or t == "integer" then
    local v = tonumber(s)
    if not v then fail(spec, "%s expects a number (got '%s')", flag(o.name), s) end
    if t == "integer" then
      if v ~= math.floor(v) then fail(spec, "%s expects an integer (got '%s')", flag(o.name), s) end
      v = math.tointeger(v)
    end
    local ok, err = pcall(require("srgeo")._check_option, spec.name or "script",
      { name = flag(o.name), type = t, lo = o.min or -math.huge, hi = o.max or math.huge,
        open_lo = o.min == nil, open_hi = o.max == nil }, v)
    if not ok then util.raise { msg = tostring(err) } end
    return v
  elseif t == "boolean" then
    local l = s:lower()
    if l == "true" or l == "yes" or l == "1" or l == "on" then return true end
    if l == "false" or l == "no" or l == "0" or l == "off" then return false end
    fail(spec, "%s is a flag: true or false (got '%s')", flag(o.name), s)
  else -- list / numbers
    local out = {}
    -- commas inside {...} or (...) belong to the item (model configs: mlp{hidden={8,4}}@init)
    local items, depth, start = {}, 0, 1
    for i = 1, #s do
      local ch = s:sub(i, i)
      if ch == "{" or ch == "(" then depth = depth + 1
      elseif ch == "}" or ch == ")" then depth = depth - 1
      elseif ch == "," and depth == 0 then items[#items + 1] = s:sub(start, i - 1); start = i + 1 end
    end
    items[#items + 1] = s:sub(start)
    for _, item in ipairs(items) do
      item = item:match("^%s*(.-)%s*$")
      if item ~= "" then
        if t == "numbers" then
          local v = tonumber(item)
          if not v then fail(spec, "%s expects numbers (got '%s')", flag(o.name), item) end
          out[#out + 1] = v
        else
          if o.choices then
            local ok = false
            for _, c in ipairs(o.choices) do if c == item then ok = true end end
            if not ok then fail(spec, "%s: '%s' is not one of %s", flag(o.name), item, table.concat(o.choices, ", ")) end
          end
          out[#out + 1] = item
        end
      end
    end
    return out
  end
end

-- The nearest valid option names (shared prefix or one edit away).
local function suggestions(c, name)
  local out = {}
  for _, o in ipairs(c.list) do
    if o.name:sub(1, 3) == name:sub(1, 3) or o.name:find(name, 1, true) or name:find(o.name, 1, true) then
      out[#out + 1] = flag(o.name)
    end
  end
  return out
end

--- cli.help(spec) -> text: usage, description, options with defaults, examples.
function M.help(spec)
  local c = compile(spec)
  local name = spec.name or "script"
  local lines = {}
  local pos = {}
  for _, p in ipairs(c.positional) do pos[#pos + 1] = p.required and p.name:upper() or "[" .. p.name:upper() .. "]" end
  lines[#lines + 1] = spec.usage or string.format("usage: srgeo %s [options]%s", spec.path or (name:gsub("%.lua$", "")),
    #pos > 0 and " " .. table.concat(pos, " ") or "")
  if spec.about then lines[#lines + 1] = ""; lines[#lines + 1] = spec.about end
  if spec.description then lines[#lines + 1] = ""; lines[#lines + 1] = spec.description end
  if #c.positional > 0 then
    lines[#lines + 1] = ""
    lines[#lines + 1] = "Arguments:"
    for _, p in ipairs(c.positional) do lines[#lines + 1] = string.format("  %-26s %s", p.name:upper(), p.help) end
  end
  lines[#lines + 1] = ""
  lines[#lines + 1] = "Options:"
  local rows = {}
  for _, o in ipairs(c.list) do
    local left = flag(o.name)
    if o.type ~= "boolean" then
      local mv = o.metavar or (o.type == "list" and "A,B,..." or o.type == "numbers" and "X,Y,..."
                               or (o.type == "number" or o.type == "integer") and "N" or "VALUE")
      left = left .. " " .. mv
    end
    local help = o.help
    if o.choices then help = help .. " (" .. table.concat(o.choices, "|") .. ")" end
    local d = show(o.default)
    if o.type == "boolean" then
      if o.default == true then help = help .. " [on; --no-" .. o.name:gsub("_", "-") .. " turns it off]" end
    elseif d ~= nil and d ~= "" then
      help = help .. " [" .. d .. "]"
    end
    rows[#rows + 1] = { left, help }
  end
  rows[#rows + 1] = { "-h, --help", "show this help and exit" }
  for _, r in ipairs(rows) do
    if #r[1] <= 26 then
      lines[#lines + 1] = string.format("  %-26s %s", r[1], r[2])
    else
      lines[#lines + 1] = "  " .. r[1]
      lines[#lines + 1] = string.rep(" ", 29) .. r[2]
    end
  end
  if spec.examples and #spec.examples > 0 then
    lines[#lines + 1] = ""
    lines[#lines + 1] = "Examples:"
    for _, e in ipairs(spec.examples) do lines[#lines + 1] = "  " .. e end
  end
  if spec.epilog then lines[#lines + 1] = ""; lines[#lines + 1] = spec.epilog end
  return table.concat(lines, "\n") .. "\n"
end

--- cli.parse(spec, argv) -> opts (or nil, help text when --help is given).
--- Raises a cli.Error (tostring: "NAME: message") on a bad command line.
function M.parse(spec, argv)
  local c = compile(spec)
  argv = argv or {}
  local o, given = {}, {}
  for _, opt in ipairs(c.list) do o[opt.name] = copy(opt.default) end
  local rest = {}
  local i, n = 1, #argv
  local only_positional = false
  while i <= n do
    local a = argv[i]
    if type(a) ~= "string" then a = tostring(a) end
    if only_positional or a == "-" or a:sub(1, 1) ~= "-" or tonumber(a) then
      rest[#rest + 1] = a
    elseif a == "--" then
      only_positional = true
    elseif a == "-h" or a == "--help" then
      return nil, M.help(spec)
    else
      local key, val = a:match("^%-%-([^=]+)=(.*)$")
      if not key then key = a:match("^%-%-(.+)$") end
      if not key then fail(spec, "unknown option '%s' (options are long: --name; see --help)", a) end
      key = key:gsub("-", "_")
      local opt, negate = c.by[key], false
      if not opt and key:sub(1, 3) == "no_" and c.by[key:sub(4)] and c.by[key:sub(4)].type == "boolean" then
        opt, negate = c.by[key:sub(4)], true
      end
      if not opt then
        local names = {}
        for _, x in ipairs(c.list) do names[#names + 1] = flag(x.name) end
        local near = suggestions(c, key)
        fail(spec, "unknown option '%s'%s; valid options: %s", a,
          #near > 0 and " (did you mean " .. table.concat(near, " or ") .. "?)" or "", table.concat(names, " "))
      end
      if opt.type == "boolean" then
        if val ~= nil then
          if negate then fail(spec, "%s takes no value", a:match("^[^=]+")) end
          o[opt.name] = convert(spec, opt, val)
        else
          o[opt.name] = not negate
        end
      else
        if val == nil then
          i = i + 1
          val = argv[i]
          if val == nil then fail(spec, "%s needs a value", flag(opt.name)) end
          val = tostring(val)
        end
        o[opt.name] = convert(spec, opt, val)
      end
      given[opt.name] = true
    end
    i = i + 1
  end
  for j, p in ipairs(c.positional) do
    o[p.name] = rest[j]
    if p.required and rest[j] == nil then fail(spec, "missing argument %s (see --help)", p.name:upper()) end
  end
  o._ = {}
  for j = #c.positional + 1, #rest do o._[#o._ + 1] = rest[j] end
  if #o._ > 0 and not spec.varargs then
    local list
    for _, opt in ipairs(c.list) do if given[opt.name] and (opt.type == "list" or opt.type == "numbers") then list = opt end end
    fail(spec, "unexpected argument '%s' (options start with --; see --help)%s", o._[1], list and string.format(
      "; %s takes one value, its items joined by commas (%s a,b), and a glob quoted so the shell leaves it ('dir/*.safetensors')",
      flag(list.name), flag(list.name)) or "")
  end
  -- list options are lists in results.json too, empty ones included
  for _, opt in ipairs(c.list) do
    if (opt.type == "list" or opt.type == "numbers") and type(o[opt.name]) == "table" then json.array(o[opt.name]) end
  end
  o._given = given
  return o
end

--- cli.run(spec, argv) -> opts: like parse, but --help prints the help and
--- exits 0, and a bad command line prints the message and exits 2 (the
--- behaviour a script wants).
function M.run(spec, argv)
  -- from here on the library's messages name this command line's flags
  -- (util.option): each option's own name, or the Lua option it `sets`
  local flags = {}
  for _, opt in ipairs(compile(spec).list) do
    flags[opt.name] = flags[opt.name] or flag(opt.name)
    if opt.sets then flags[opt.sets] = flag(opt.name) end
  end
  util.flags = flags
  local ok, o, help = pcall(M.parse, spec, argv)
  if not ok then
    if getmetatable(o) == M.Error then
      io.stderr:write(tostring(o), "\n(try --help)\n")
      os.exit(2)
    end
    error(o, 0)
  end
  if o == nil then
    io.write(help)
    io.flush()
    os.exit(0)
  end
  return o
end

-- ---------------------------------------------------------------------------
-- Subcommands

--- Subcommands that are not a scripts/NAME.lua: NAME = {path =, about =}, a
--- Lua file run as a script with the arguments after NAME (about defaults to
--- the file's header line).  Entries here win over a script of that name.
M.builtins = {}

-- The description in a file's header comment: "-- NAME.lua: text" and the
-- comment lines after it, up to the first empty comment line.
local function header(path)
  local f = io.open(path, "r")
  if not f then return "" end
  local parts = {}
  for l in f:lines() do
    local body = l:match("^%-%-%s?(.*)$")
    if not body or body:match("^%s*$") then break end
    parts[#parts + 1] = body
  end
  f:close()
  local text = table.concat(parts, " ")
  return text:match("^%s*[%w_%-]+%.lua:%s*(.-)%s*$") or text:match("^%s*(.-)%s*$")
end

--- cli.commands() -> list of {name, path, about} sorted by name: every
--- scripts/NAME.lua under srgeo.root, and cli.builtins.
function M.commands()
  local srgeo = require "srgeo"
  local by = {}
  local dir = srgeo.root .. "/scripts"
  for _, f in ipairs(srgeo._listdir(dir) or {}) do
    local name = f:match("^([%w_%-]+)%.lua$")
    if name then by[name] = { name = name, path = dir .. "/" .. f } end
  end
  for name, b in pairs(M.builtins) do by[name] = { name = name, path = b.path, about = b.about } end
  local out = {}
  for _, c in pairs(by) do
    c.about = c.about or header(c.path)
    out[#out + 1] = c
  end
  table.sort(out, function(a, b) return a.name < b.name end)
  return out
end

--- cli.command(name) -> the file subcommand NAME runs (dashes and
--- underscores alike), or nil and a message naming the nearest ones.
function M.command(name)
  local key = tostring(name):gsub("-", "_")
  local cmds, near = M.commands(), {}
  for _, c in ipairs(cmds) do
    if c.name:gsub("-", "_") == key then return c.path end
  end
  for _, c in ipairs(cmds) do
    if c.name:sub(1, 3) == key:sub(1, 3) or c.name:find(key, 1, true) or key:find(c.name, 1, true) then
      near[#near + 1] = c.name
    end
  end
  return nil, string.format("'%s' is neither a file nor a subcommand%s; srgeo --help lists the subcommands", name,
    #near > 0 and " (did you mean " .. table.concat(near, " or ") .. "?)" or "")
end

--- cli.commands_text([width]) -> the list `srgeo --help` and srgeo.examples()
--- print: each subcommand and its description, wrapped at width (78).
function M.commands_text(width)
  width = width or 78
  local cmds, w = M.commands(), 0
  for _, c in ipairs(cmds) do w = math.max(w, #c.name) end
  local lines = { "Subcommands: srgeo NAME [options] runs scripts/NAME.lua (NAME --help: options)" }
  for _, c in ipairs(cmds) do
    lines[#lines + 1] = util.wrap(c.about, width, string.format("  %-" .. w .. "s  ", c.name), string.rep(" ", w + 4))
  end
  return table.concat(lines, "\n")
end

return M
