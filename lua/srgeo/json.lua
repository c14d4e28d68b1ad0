-- srgeo.json: a small JSON encoder/decoder for result files (no dependencies).
-- NaN and infinities are written as null (JSON has no such numbers) and read
-- back as NaN, which is how discarded rungs round-trip.
local M = {}

local escapes = { ['"'] = '\\"', ["\\"] = "\\\\", ["\b"] = "\\b", ["\f"] = "\\f", ["\n"] = "\\n", ["\r"] = "\\r", ["\t"] = "\\t" }

local function is_array(t)
  local n = #t
  for k in pairs(t) do
    if type(k) ~= "number" or k < 1 or k > n or k % 1 ~= 0 then return false end
  end
  return true
end

local function encode(v, out, indent, depth)
  local ty = type(v)
  if ty == "nil" then out[#out + 1] = "null"
  elseif ty == "boolean" then out[#out + 1] = tostring(v)
  elseif ty == "number" then
    if v ~= v or v == math.huge or v == -math.huge then out[#out + 1] = "null"
    elseif math.type(v) == "integer" then out[#out + 1] = tostring(v)
    else out[#out + 1] = string.format("%.17g", v) end
  elseif ty == "string" then
    out[#out + 1] = '"' .. v:gsub('[%c"\\]', function(c) return escapes[c] or string.format("\\u%04x", c:byte()) end) .. '"'
  elseif ty == "table" then
    local nl = indent and ("\n" .. string.rep(indent, depth + 1)) or ""
    local close = indent and ("\n" .. string.rep(indent, depth)) or ""
    if is_array(v) then
      -- numeric arrays stay on one line: profiles are mostly those
      local flat = true
      for _, x in ipairs(v) do if type(x) == "table" then flat = false break end end
      out[#out + 1] = "["
      for i, x in ipairs(v) do
        if i > 1 then out[#out + 1] = "," end
        if not flat then out[#out + 1] = nl end
        encode(x, out, indent, depth + 1)
      end
      if not flat and #v > 0 then out[#out + 1] = close end
      out[#out + 1] = "]"
    else
      local keys = {}
      for k in pairs(v) do
        if type(k) ~= "string" then error("json.encode: object keys must be strings (got " .. type(k) .. ")", 0) end
        if type(v[k]) ~= "function" then keys[#keys + 1] = k end
      end
      table.sort(keys)
      out[#out + 1] = "{"
      for i, k in ipairs(keys) do
        if i > 1 then out[#out + 1] = "," end
        out[#out + 1] = nl
        encode(k, out, indent, depth + 1)
        out[#out + 1] = indent and ": " or ":"
        encode(v[k], out, indent, depth + 1)
      end
      if #keys > 0 then out[#out + 1] = close end
      out[#out + 1] = "}"
    end
  else
    error("json.encode: cannot encode a " .. ty, 0)
  end
end

function M.encode(v, opts)
  local out = {}
  encode(v, out, (opts and opts.indent) and "  " or nil, 0)
  return table.concat(out)
end

function M.decode(s)
  local pos = 1
  local function fail(msg) error(string.format("json.decode: %s at character %d", msg, pos), 0) end
  local function ws() pos = s:find("[^ \t\r\n]", pos) or #s + 1 end
  local value
  local function str()
    local buf = {}
    pos = pos + 1
    while true do
      local c = s:sub(pos, pos)
      if c == "" then fail("unterminated string") end
      if c == '"' then pos = pos + 1 break end
      if c == "\\" then
        local e = s:sub(pos + 1, pos + 1)
        local map = { b = "\b", f = "\f", n = "\n", r = "\r", t = "\t", ['"'] = '"', ["\\"] = "\\", ["/"] = "/" }
        if map[e] then buf[#buf + 1] = map[e]; pos = pos + 2
        elseif e == "u" then
          local hex = s:sub(pos + 2, pos + 5)
          if not hex:match("^%x%x%x%x$") then fail("bad \\u escape") end
          buf[#buf + 1] = utf8.char(tonumber(hex, 16)); pos = pos + 6
        else fail("bad escape") end
      else
        buf[#buf + 1] = c; pos = pos + 1
      end
    end
    return table.concat(buf)
  end
  function value()
    ws()
    local c = s:sub(pos, pos)
    if c == "{" then
      local t = {}
      pos = pos + 1; ws()
      if s:sub(pos, pos) == "}" then pos = pos + 1 return t end
      while true do
        ws()
        if s:sub(pos, pos) ~= '"' then fail("expected a key") end
        local k = str(); ws()
        if s:sub(pos, pos) ~= ":" then fail("expected ':'") end
        pos = pos + 1
        t[k] = value(); ws()
        local d = s:sub(pos, pos); pos = pos + 1
        if d == "}" then return t end
        if d ~= "," then fail("expected ',' or '}'") end
      end
    elseif c == "[" then
      local t, n = {}, 0
      pos = pos + 1; ws()
      if s:sub(pos, pos) == "]" then pos = pos + 1 return t end
      while true do
        n = n + 1
        local v = value()
        if v == nil then v = 0 / 0 end -- null in arrays: a discarded value
        t[n] = v; ws()
        local d = s:sub(pos, pos); pos = pos + 1
        if d == "]" then return t end
        if d ~= "," then fail("expected ',' or ']'") end
      end
    elseif c == '"' then return str()
    elseif s:sub(pos, pos + 3) == "true" then pos = pos + 4 return true
    elseif s:sub(pos, pos + 4) == "false" then pos = pos + 5 return false
    elseif s:sub(pos, pos + 3) == "null" then pos = pos + 4 return nil
    else
      local num = s:match("^-?%d+%.?%d*[eE]?[-+]?%d*", pos)
      if not num or num == "" then fail("unexpected '" .. c .. "'") end
      pos = pos + #num
      return math.tointeger(tonumber(num)) or tonumber(num)
    end
  end
  local v = value()
  ws()
  if pos <= #s then fail("trailing characters") end
  return v
end

return M
