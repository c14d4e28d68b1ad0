-- json_spec.lua: srgeo.json (core/lua/json.c, cJSON underneath): RFC 8259
-- strings and numbers, the Lua <-> JSON mapping ({} vs [], integers vs
-- floats, null), errors that name what and where, and agreement with
-- Python's json module when python3 is present.
local T = ...
local srgeo = require "srgeo"
local json = srgeo.json

T.test("json: require 'srgeo.json' is srgeo.json", function()
  T.eq(require "srgeo.json", json)
end)

T.test("json: \\u escapes, surrogate pairs and raw UTF-8 decode to valid UTF-8", function()
  T.eq(json.decode([["\ud83d\ude00"]]), "😀")
  T.eq(json.decode([["\u00e9\u4e2d"]]), "é中")
  T.eq(json.decode('"é中😀"'), "é中😀")
  T.eq(json.decode([["a\"b\\c\/d\b\f\n\r\t"]]), "a\"b\\c/d\b\f\n\r\t")
  T.truthy(utf8.len(json.decode([["x\ud83d\ude00y"]])), "valid UTF-8")
  -- lone or reversed surrogates are errors, not garbage
  T.raises(function() json.decode([["\ud83d"]]) end, "json.decode: invalid string")
  T.raises(function() json.decode([["\ude00\ud83d"]]) end, "json.decode: invalid string")
  T.raises(function() json.decode('"\255"') end, "json.decode: invalid UTF-8 at byte 2")
  T.raises(function() json.decode('"\237\160\128"') end, "invalid UTF-8") -- an encoded surrogate
  T.raises(function() json.decode('"a\1b"') end, "json.decode: a control character in a string")
  -- \u0000 is a NUL in the string (Lua strings hold it), as encode writes it: the two agree
  T.eq(json.decode('"a\\u0000b"'), "a\0b")
  T.eq(json.encode("a\0b"), '"a\\u0000b"')
  local t = { ["k\0"] = { "\0", "x\0\u{e9}\n\u{1F600}", 1 }, n = "plain" }
  T.same(json.decode(json.encode(t)), t)
  T.eq(json.decode('{"a\\u0000": null, "b": "\\u0000\\ud83d\\ude00"}').b, "\0\u{1F600}", "strings after a null's key")
  T.raises(function() json.decode('"a\\u0000\\ud800"') end, "json.decode: invalid string")
  T.raises(function() json.decode('"a\0b"') end, "json.decode: NUL byte at byte 3")
end)

T.test("json: numbers follow RFC 8259's grammar exactly; errors, never nil", function()
  for _, bad in ipairs { "1e", "1.", "01", "-01", "+1", ".5", "-", "1e+", "1.e5", "0x10", "Infinity", "NaN", "[1.]", '{"a":01}',
                         "1 2", "[1,]", "nul", "tru", "" } do
    local ok, err = pcall(json.decode, bad)
    T.truthy(not ok, "rejects " .. bad)
    T.truthy(tostring(err):match("^json%.decode: .* at byte %d+$"), "message for " .. bad .. ": " .. tostring(err))
  end
  T.raises(function() json.decode("[1, 01]") end, "json.decode: bad number '01' at byte 5")
  T.raises(function() json.decode("   ") end, "json.decode: no value")
  T.raises(function() json.decode('{"a": [1, 2') end, "truncated")
  for text, want in pairs { ["0"] = 0, ["-1"] = -1, ["1e3"] = 1000.0, ["1E-2"] = 0.01, ["-0.5e+1"] = -5.0, ["2.50"] = 2.5 } do
    T.eq(json.decode(text), want, text)
  end
end)

T.test("json: integers stay integers (64 bits exact), floats stay floats and read back bit for bit", function()
  local t = json.decode("[1, 2.0, 1e3, 9223372036854775807, -9223372036854775808, 9223372036854775808, -0]")
  T.eq(math.type(t[1]), "integer"); T.eq(math.type(t[2]), "float"); T.eq(math.type(t[3]), "float")
  T.eq(t[4], math.maxinteger); T.eq(t[5], math.mininteger)
  T.eq(math.type(t[6]), "float", "past int64: a float")
  T.eq(1 / t[7], -math.huge, "-0 is the float -0.0")
  T.eq(json.encode { math.maxinteger, math.mininteger, 3, 3.0, 0.1, -0.0, 1e300, 2 ^ -1074 },
    "[9223372036854775807,-9223372036854775808,3,3.0,0.1,-0.0,1e+300,4.94065645841247e-324]")
  T.eq(json.decode("4.94065645841247e-324"), 2 ^ -1074, "the smallest denormal reads back")
  -- random doubles: the text is short and exact
  local r = srgeo.randn({ 2000 }, 7):double():totable()
  for i = 1, #r do r[i] = r[i] * 10 ^ ((i % 41) - 20) end
  local back = json.decode(json.encode(r))
  for i = 1, #r do
    if back[i] ~= r[i] or math.type(back[i]) ~= "float" then error("double " .. i .. " did not round-trip: " .. r[i]) end
  end
end)

T.test("json: {} is an object, [] an array; json.array marks an empty array; both round-trip", function()
  T.eq(json.encode {}, "{}")
  T.eq(json.encode(json.array {}), "[]")
  T.eq(json.encode(json.object(json.array {})), "{}")
  T.eq(json.encode(json.decode "[]"), "[]")
  T.eq(json.encode(json.decode "{}"), "{}")
  T.eq(json.encode(json.decode '{"a":[],"b":{},"c":[[],{}]}'), '{"a":[],"b":{},"c":[[],{}]}')
  T.eq(json.encode { 1, 2, 3 }, "[1,2,3]")
  T.eq(json.encode { b = 1, a = { x = "y" } }, '{"a":{"x":"y"},"b":1}', "keys in byte order")
  -- null: NaN in an array (keeps the place), absent in an object, nil at the top
  local v = json.decode '{"a":null,"b":[1,null,3]}'
  T.eq(v.a, nil); T.eq(#v.b, 3); T.truthy(v.b[2] ~= v.b[2], "NaN")
  T.eq(json.decode "null", nil)
  T.eq(json.encode { 1, 0 / 0, math.huge, -math.huge }, "[1,null,null,null]")
  T.eq(json.encode { f = print, n = 1 }, '{"n":1}', "functions are left out of objects")
end)

T.test("json: values JSON cannot hold are errors that say where", function()
  T.raises(function() json.encode { 1, nil, 3 } end, "json.encode: an array with holes")
  T.raises(function() json.encode { 1, x = 2 } end, "json.encode: a table with both string keys and an array part at the top")
  T.raises(function() json.encode { a = { b = { io.stdout } } } end, "json.encode: cannot encode a FILE* at .a.b[1]")
  T.raises(function() json.encode { x = srgeo.zeros { 2 } } end, "json.encode: cannot encode a srgeo")
  T.raises(function() json.encode { print } end, "json.encode: cannot encode a function at [1]")
  T.raises(function() json.encode { [true] = 1 } end, "a table key that is neither a string nor an index 1..n (a boolean)")
  T.raises(function() json.encode { [1.5] = 1 } end, "(a number)")
  T.raises(function() json.encode { s = "\255" } end, "json.encode: a string is not valid UTF-8 at .s")
  local c = {}
  c.self = c
  T.raises(function() json.encode(c) end, "nested too deep (a cycle?)")
  T.raises(function() json.encode(1, { indnet = true }) end, "indnet")
  -- deep but legal input decodes; past cJSON's limit it is an error, not a crash
  T.eq(#json.decode(string.rep("[", 500) .. string.rep("]", 500)), 1)
  T.raises(function() json.decode(string.rep("[", 5000) .. string.rep("]", 5000)) end, "json.decode")
end)

T.test("json: strings escape quotes, backslashes and control characters; indent lays files out", function()
  T.eq(json.encode "q\"\\\n\t\1é/", [["q\"\\\n\t\u0001é/"]])
  T.eq(json.encode({ a = { 1, 2 }, b = { c = {} }, d = { { 1 }, { 2 } } }, { indent = true }),
    '{\n  "a": [1,2],\n  "b": {\n    "c": {}\n  },\n  "d": [\n    [1],\n    [2]\n  ]\n}')
end)

T.test("json: agrees with Python's json module both ways (skipped without python3)", function()
  if os.execute("python3 -c 'import json' >/dev/null 2>&1") ~= true then T.skip("python3 is not installed") end
  local v = { ints = { 0, -1, math.maxinteger, math.mininteger }, floats = { 0.1, 1e300, 5e-324, -2.5, 1.0, 1e16 },
              text = "é中😀 \"quoted\" \\ \n\t\1", nested = { { a = json.array {} }, {}, { true, false } } }
  local dir = os.tmpname()
  local f = assert(io.open(dir, "wb"))
  f:write(json.encode(v))
  f:close()
  local p = io.popen("python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1])), ensure_ascii=True, "
    .. "sort_keys=True))' " .. dir)
  local text = p:read("a")
  p:close()
  os.remove(dir)
  local back = json.decode(text) -- Python's \uXXXX escapes, surrogate pairs included
  local function same(a, b, path)
    T.eq(type(a), type(b), path)
    if type(a) == "table" then
      local n = 0
      for k, x in pairs(a) do same(x, b[k], path .. "." .. tostring(k)); n = n + 1 end
      for _ in pairs(b) do n = n - 1 end
      T.eq(n, 0, path .. ": same keys")
    else
      T.eq(a, b, path)
      if type(a) == "number" then T.eq(math.type(a), math.type(b), path) end
    end
  end
  same(v, back, "v")
  T.eq(json.encode(back), json.encode(v))
end)
