-- srgeo.ipynb: a Markdown notebook as a Jupyter notebook (nbformat 4.5) and back.
--
--   local json_text = ipynb.from_markdown(md_text)   -- srgeo notebook --to ipynb FILE.md
--   local md_text = ipynb.to_markdown(json_text)     -- srgeo notebook --to md FILE.ipynb
--
-- The Markdown notebooks in notebooks/ are the source; the .ipynb is
-- generated from them (diffs of Markdown read as prose, an .ipynb's do not).
-- Each top-level ```lua block (the blocks srgeo.notebook runs) becomes a code
-- cell, the text between them a markdown cell; the block fenced
-- ```lua {parameters} is a code cell tagged "parameters" (papermill's tag).
-- Outputs are not carried either way: to_markdown drops them.
--
-- md -> ipynb -> md is byte-identical: a markdown cell holds its text less
-- the empty lines around it, and a cell's metadata.srgeo records what the
-- Markdown had beyond the plain layout: blank_after (empty lines after the
-- cell when not 1, or not 0 after the last), blank_before (on the first
-- cell), open / close (the fence lines when not ```lua ... ```).  Cells
-- added in Jupyter carry none of it and get the plain layout.  Lines end as
-- they did (a CRLF file stays CRLF); notebook metadata.srgeo.final_newline
-- is false when the file did not end with a newline.
local srgeo = require "srgeo"
local json = require "srgeo.json"
local util = require "srgeo.util"

local M = {}

M.KERNELSPEC = { name = "srgeo", display_name = "srgeo (Lua 5.4)", language = "lua" }
M.LANGUAGE_INFO = { name = "lua", version = "5.4", file_extension = ".lua", mimetype = "text/x-lua" }

local function fail(fmt, ...) util.raise { msg = string.format(fmt, ...) } end

-- Lines split on "\n" only (a "\r" stays on its line, so CRLF round-trips).
local function split(text)
  local lines = {}
  for l in (text .. "\n"):gmatch("(.-)\n") do lines[#lines + 1] = l end
  if text:sub(-1) == "\n" then lines[#lines] = nil end
  return lines
end

--- ipynb.is_parameters(info) -> true when a fence's info string marks the
--- parameters block: ```lua {parameters}.
function M.is_parameters(info)
  return info:match("^%s*[%w_%-%+]+%s+{%s*%.?parameters%s*}%s*$") ~= nil
end

--- ipynb.runnable(info) -> whether a fenced block with this info string
--- is a cell srgeo.notebook runs: ```lua, not ```lua norun.
function M.runnable(info)
  local lang = info:match("^%s*([%w_%-%+]+)")
  return lang ~= nil and lang:lower() == "lua" and not info:find("norun", 1, true)
end

--- ipynb.fence_for(s) -> a backtick fence longer than any run of backticks in s.
function M.fence_for(s)
  local n = 3
  for run in s:gmatch("`+") do n = math.max(n, #run + 1) end
  return string.rep("`", n)
end

-- A closing fence for the opening line `open`: the same character, at least
-- as long, nothing after it but spaces (CommonMark).
local function closes(open, line)
  local run = open:match("^ ? ? ?(```+)") or open:match("^ ? ? ?(~~~+)")
  if not run or not line then return false end
  local ch = run:sub(1, 1)
  local close = line:match("^ ? ? ?([`~]+)[ \t\r]*$")
  return close ~= nil and close:match("^" .. ch .. "+$") ~= nil and #close >= #run
end

local function source_lines(s)
  local out = {}
  for _, l in ipairs(split(s)) do out[#out + 1] = l .. "\n" end
  if #out > 0 and s:sub(-1) ~= "\n" then out[#out] = out[#out]:sub(1, -2) end
  return json.array(out)
end

local function plain_open(src, params) return M.fence_for(src) .. "lua" .. (params and " {parameters}" or "") end

--- ipynb.from_markdown(text) -> the notebook as nbformat 4.5 JSON text.
function M.from_markdown(text)
  local lines = split(text)
  local raw = {} -- {kind =, a =, b =, block =}: line ranges in order
  local at = 1
  for _, b in ipairs(srgeo.markdown.code_blocks(text)) do
    if b.fenced and M.runnable(b.info) then
      if b.line > at then raw[#raw + 1] = { kind = "markdown", a = at, b = b.line - 1 } end
      raw[#raw + 1] = { kind = "code", a = b.line, b = b.last_line, info = b.info }
      at = b.last_line + 1
    end
  end
  if at <= #lines then raw[#raw + 1] = { kind = "markdown", a = at, b = #lines } end

  local cells, pending_blank = {}, 0
  local function add(cell, lead)
    if #cells == 0 then
      if lead ~= 0 then cell.metadata.srgeo = { blank_before = lead } end
    else
      local prev = cells[#cells]
      local n = pending_blank + lead
      if n ~= 1 then prev.metadata.srgeo = prev.metadata.srgeo or {}; prev.metadata.srgeo.blank_after = n end
    end
    pending_blank = 0
    cells[#cells + 1] = cell
  end
  for _, r in ipairs(raw) do
    if r.kind == "markdown" then
      local a, b = r.a, r.b
      while a <= b and lines[a] == "" do a = a + 1 end
      local lead = a - r.a
      if a > b then
        pending_blank = pending_blank + lead -- only empty lines: they separate the neighbours
      else
        while lines[b] == "" do b = b - 1 end
        add({ cell_type = "markdown", metadata = {}, source = source_lines(table.concat(lines, "\n", a, b)) }, lead)
        pending_blank = r.b - b
      end
    else
      local open, close = lines[r.a], lines[r.b]
      local has_close = r.b > r.a and closes(open, close)
      local src = table.concat(lines, "\n", r.a + 1, has_close and r.b - 1 or r.b)
      if (has_close and r.b - 1 or r.b) < r.a + 1 then src = "" end
      local params = M.is_parameters(r.info)
      local meta = {}
      if params then meta.tags = json.array { "parameters" } end
      local plain = plain_open(src, params)
      local extra = {}
      if open ~= plain then extra.open = open end
      if not has_close then extra.close = false
      elseif close ~= M.fence_for(src) then extra.close = close end
      if next(extra) then meta.srgeo = extra end
      add({ cell_type = "code", metadata = meta, source = source_lines(src), outputs = json.array {},
            execution_count = 0 / 0 }, 0)
    end
  end
  if #cells > 0 and pending_blank ~= 0 then
    local last = cells[#cells]
    last.metadata.srgeo = last.metadata.srgeo or {}
    last.metadata.srgeo.blank_after = pending_blank
  end
  for i, c in ipairs(cells) do c.id = string.format("%s-%d", c.cell_type == "code" and "code" or "md", i) end
  local meta = { kernelspec = M.KERNELSPEC, language_info = M.LANGUAGE_INFO }
  if text ~= "" and text:sub(-1) ~= "\n" then meta.srgeo = { final_newline = false } end
  return json.encode({ cells = json.array(cells), metadata = meta, nbformat = 4, nbformat_minor = 5 }, { indent = true })
    .. "\n"
end

local function source_text(s, where)
  if type(s) == "string" then return s end
  if type(s) ~= "table" then fail("ipynb: %s: source is neither a string nor a list of strings", where) end
  for i, l in ipairs(s) do
    if type(l) ~= "string" then fail("ipynb: %s: source line %d is not a string", where, i) end
  end
  return table.concat(s)
end

--- ipynb.to_markdown(text) -> the Markdown notebook (outputs dropped).
--- Raises on JSON that is not an nbformat 4 notebook.
function M.to_markdown(text)
  local ok, nb = pcall(json.decode, text)
  if not ok then fail("ipynb: not JSON: %s", tostring(nb)) end
  if type(nb) ~= "table" or math.type(nb.nbformat) ~= "integer" then fail("ipynb: no nbformat version: not a Jupyter notebook") end
  if nb.nbformat ~= 4 then fail("ipynb: nbformat %d; srgeo reads nbformat 4", nb.nbformat) end
  if type(nb.cells) ~= "table" then fail("ipynb: no cells list") end
  local parts = {}
  for i, c in ipairs(nb.cells) do
    local where = "cell " .. i
    if type(c) ~= "table" then fail("ipynb: %s is not an object", where) end
    local meta = type(c.metadata) == "table" and c.metadata or {}
    local sm = type(meta.srgeo) == "table" and meta.srgeo or {}
    local src = source_text(c.source or "", where)
    if i == 1 and math.type(sm.blank_before) == "integer" then parts[#parts + 1] = string.rep("\n", sm.blank_before) end
    if c.cell_type == "code" then
      local params = false
      for _, t in ipairs(type(meta.tags) == "table" and meta.tags or {}) do params = params or t == "parameters" end
      parts[#parts + 1] = (type(sm.open) == "string" and sm.open or plain_open(src, params)) .. "\n"
      if src ~= "" then parts[#parts + 1] = src .. "\n" end
      if sm.close ~= false then parts[#parts + 1] = (type(sm.close) == "string" and sm.close or M.fence_for(src)) .. "\n" end
    elseif c.cell_type == "markdown" or c.cell_type == "raw" then
      parts[#parts + 1] = src .. "\n"
    else
      fail("ipynb: %s has cell_type '%s' (markdown, code or raw)", where, tostring(c.cell_type))
    end
    local blank = math.type(sm.blank_after) == "integer" and sm.blank_after or (i < #nb.cells and 1 or 0)
    parts[#parts + 1] = string.rep("\n", blank)
  end
  local md = table.concat(parts)
  local nm = type(nb.metadata) == "table" and type(nb.metadata.srgeo) == "table" and nb.metadata.srgeo or {}
  if nm.final_newline == false then md = md:gsub("\n$", "") end
  return md
end

return M
