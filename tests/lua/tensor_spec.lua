-- tensor_spec.lua: the Lua tensor API: constructors, views, 1-based indexing,
-- arithmetic, reductions, matmul vs plain loops, cat/stack/index, finiteness,
-- npy round trips, error messages, and memory staying bounded under the GC.
local T = ...
local srgeo = require "srgeo"

local function shape(t) return table.concat(t:shape(), ",") end

-- Every element of t equals f(i, j, ...) (1-based indices) within tol.
local function each(t, f, tol, msg)
  local tab = t:totable()
  local function walk(v, idx)
    if type(v) == "number" then
      T.close(v, f(table.unpack(idx)), tol or 0, (msg or "") .. " at [" .. table.concat(idx, ",") .. "]")
    else
      for i = 1, #v do
        idx[#idx + 1] = i
        walk(v[i], idx)
        idx[#idx] = nil
      end
    end
  end
  walk(tab, {})
end

T.test("tensor{} infers shapes from nested tables, with an optional dtype", function()
  local t = srgeo.tensor { { 1, 2, 3 }, { 4, 5, 6 } }
  T.eq(shape(t), "2,3")
  T.eq(t:dtype(), "float32")
  T.eq(t:get(2, 3), 6)
  local d = srgeo.tensor({ { { 1 }, { 2 } } }, "float64")
  T.eq(shape(d), "1,2,1")
  T.eq(d:dtype(), "float64")
  T.eq(shape(srgeo.tensor {}), "0")
  local s = srgeo.tensor(2.5, "float64")
  T.eq(s:dim(), 0)
  T.eq(s:numel(), 1)
  T.eq(s:totable(), 2.5)
  T.eq(s:get(), 2.5)
  -- float32 rounding happens, float64 keeps the value
  T.eq(srgeo.tensor({ 0.1 }, "float64"):get(1), 0.1)
  T.truthy(srgeo.tensor({ 0.1 }):get(1) ~= 0.1, "float32 rounds 0.1")
  -- a tensor argument: a copy (dtype optionally converted)
  local c = srgeo.tensor(t, "float64")
  T.eq(c:dtype(), "float64")
  c:set(100, 1, 1)
  T.eq(t:get(1, 1), 1)
end)

T.test("tensor{}: ragged or non-numeric tables are errors naming the entry", function()
  T.raises(function() srgeo.tensor { { 1, 2 }, { 3 } } end, "tensor: ragged nested table: [2] has 1 entries, expected 2")
  T.raises(function() srgeo.tensor { { 1, 2 }, 3 } end, "tensor: entry [2] is a number, expected a table of 2 entries")
  T.raises(function() srgeo.tensor { 1, { 2 } } end, "tensor: entry [2] is a table, expected a number")
  T.raises(function() srgeo.tensor { { 1, "x" } } end, "tensor: entry [1][2] is a string, expected a number")
  T.raises(function() srgeo.tensor({ 1 }, "int8") end, "invalid option 'int8'")
  T.raises(function() srgeo.tensor("abc") end, "table expected")
  T.raises(function() srgeo.tensor { srgeo.zeros(2) } end, "tensor: entry [1] is a tensor; join tensors with srgeo.stack")
end)

T.test("zeros / ones / full / arange, table or integer shapes", function()
  T.eq(shape(srgeo.zeros { 2, 3 }), "2,3")
  T.eq(shape(srgeo.zeros(2, 3, 4)), "2,3,4")
  T.eq(srgeo.zeros(2, 3, "float64"):dtype(), "float64")
  T.eq(srgeo.zeros({ 2 }, "float64"):dtype(), "float64")
  T.eq(srgeo.ones(4):sum(), 4)
  local f = srgeo.full({ 2, 2 }, 7.5, "float64")
  T.eq(f:sum(), 30)
  T.eq(f:dtype(), "float64")
  T.eq(table.concat(srgeo.arange(4):totable(), ","), "0.0,1.0,2.0,3.0")
  T.eq(table.concat(srgeo.arange(1, 2, 0.25, "float64"):totable(), ","), "1.0,1.25,1.5,1.75")
  T.eq(srgeo.arange(0):numel(), 0)
  T.raises(function() srgeo.arange(0, 1, 0) end, "arange: bad range")
  T.raises(function() srgeo.zeros { 2, -1 } end, "shape: entry 2 must be a non-negative integer")
  T.raises(function() srgeo.full(2, 1) end, "shape table")
end)

T.test("randn / rand: seeded, reproducible, rand in [0,1)", function()
  local a, b = srgeo.randn({ 100 }, 7), srgeo.randn({ 100 }, 7)
  T.eq((a - b):abs():max(), 0)
  T.truthy((a - srgeo.randn({ 100 }, 8)):abs():max() > 0, "different seeds differ")
  local u = srgeo.rand({ 10000 }, 3, "float64")
  T.eq(u:dtype(), "float64")
  T.truthy(u:min() >= 0 and u:max() < 1, "uniform range")
  T.close(u:mean(), 0.5, 0.02)
  local n = srgeo.randn({ 20000 }, 5, "float64")
  T.close(n:mean(), 0, 0.03)
  T.close((n * n):mean(), 1, 0.05)
end)

T.test("hashrand: element i from (seed, i) alone, the documented formula bit for bit", function()
  -- values from an independent NumPy implementation of help's formula
  -- (tests/fixtures/gen_models.py hash_unit; the large model fixtures rest on it)
  local want = { -0.77309936285018921, 0.40058702230453491, 0.22594934701919556, -0.85426658391952515,
                 -0.56712180376052856 }
  local d = srgeo.hashrand({ 5 }, 3, 0, 1, "float64")
  for i, w in ipairs(want) do T.eq(d:get(i), w, "element " .. i) end
  -- a prefix of a longer fill and any shape hold the same values
  local long = srgeo.hashrand({ 2, 4 }, 3, 0, 1, "float64"):reshape { 8 }
  for i = 1, 5 do T.eq(long:get(i), want[i], "element " .. i .. " of a (2,4) fill") end
  -- 24 significant bits: v * 2^24 is an odd integer, so float32 holds v exactly
  local f = srgeo.hashrand({ 1000 }, 9, 0, 1)
  local g = srgeo.hashrand({ 1000 }, 9, 0, 1, "float64")
  T.eq((f:double() - g):abs():max(), 0, "float32 fill equals float64 fill")
  for i = 1, 1000, 37 do
    local k = g:get(i) * 2 ^ 24
    T.truthy(k == math.floor(k) and math.floor(k) % 2 == 1, "odd multiple of 2^-24 at " .. i)
  end
  local u = srgeo.hashrand({ 20000 }, 11, 0.5, 0.25, "float64")
  T.truthy(u:min() > 0.25 and u:max() < 0.75, "offset +- scale")
  T.close(u:mean(), 0.5, 0.005)
  T.truthy((srgeo.hashrand({ 8 }, 4) - srgeo.hashrand({ 8 }, 5)):abs():max() > 0, "seeds differ")
  T.raises(function() srgeo.hashrand({ 3 }) end, "number expected")
  T.raises(function() srgeo.hashrand({ 3 }, 1, 0 / 0) end, "must be finite")
  T.raises(function() srgeo.hashrand({ 3 }, 1, 0, math.huge) end, "must be finite")
end)

T.test("shape, size, dim, numel, #, dtype; size(d) is 1-based", function()
  local t = srgeo.zeros(2, 3, 4)
  T.eq(#t, 2)
  T.eq(t:dim(), 3)
  T.eq(t:numel(), 24)
  T.eq(t:size(1), 2)
  T.eq(t:size(3), 4)
  T.eq(t:size(-1), 4)
  T.eq(table.concat(t:size(), ","), "2,3,4")
  T.raises(function() t:size(4) end, "size: dim 4 out of range for (2,3,4) (dims are 1..3")
  T.raises(function() t:size(0) end, "size: dim 0 out of range")
  T.eq(#srgeo.tensor(1), 0)
end)

T.test("double / float / clone are copies", function()
  local t = srgeo.tensor { 1.5, 2 }
  local d = t:double()
  T.eq(d:dtype(), "float64")
  d:set(9, 1)
  T.eq(t:get(1), 1.5)
  T.eq(d:float():dtype(), "float32")
  local c = t:clone()
  c:fill(0)
  T.eq(t:sum(), 3.5)
  T.eq(c:dtype(), "float32")
end)

T.test("reshape / view share storage, -1 inferred, errors name shapes", function()
  local t = srgeo.arange(12)
  local v = t:reshape(3, -1)
  T.eq(shape(v), "3,4")
  T.eq(shape(t:view { 2, 2, 3 }), "2,2,3")
  v:set(100, 2, 1)
  T.eq(t:get(5), 100)
  T.raises(function() t:reshape(5, -1) end, "reshape: cannot infer -1 for (12)")
  T.raises(function() t:reshape(5, 2) end, "reshape: (12) has 12 elements, (5,2) has 10")
  T.raises(function() t:reshape(-1, -1) end, "only one dimension may be -1")
  T.raises(function() t:reshape(2.5, 2) end, "reshape: a shape entry must be an integer (got a fraction)")
  T.eq(shape(t:reshape(1, 12):squeeze()), "12")
  T.eq(shape(t:unsqueeze(1)), "1,12")
  T.eq(shape(t:unsqueeze(-1)), "12,1")
  T.raises(function() t:reshape(3, 4):squeeze(1) end, "squeeze: dim 1 of (3,4) has size 3, not 1")
end)

T.test("narrow(dim, start, len) in Torch7's order / slice / row: 1-based, views along dim 1, range errors", function()
  local t = srgeo.arange(10):reshape(5, 2)
  local n = t:narrow(1, 2, 3)
  T.eq(shape(n), "3,2")
  T.eq(n:get(1, 1), 2)
  T.eq(shape(t:narrow(-2, 2, 3)), "3,2", "a negative dim counts from the end")
  T.eq(shape(t:slice(2, 4)), "3,2")
  T.eq(t:slice(2, 4):get(3, 2), 7)
  T.eq(shape(t:slice(4)), "2,2")
  T.eq(shape(t:slice(-2, -1)), "2,2")
  T.eq(shape(t:slice(3, 2)), "0,2")
  local r = t:row(5)
  T.eq(shape(r), "1,2")
  T.eq(r:get(1, 2), 9)
  r:fill(-1)
  T.eq(t:get(5, 1), -1) -- a view
  T.eq(t:row(-1):get(1, 1), -1)
  t:narrow(1, 1, 1):fill(-7)
  T.eq(t:get(1, 2), -7, "narrow along dim 1 is a view")
  t:narrow(1, 1, 1):copy(srgeo.tensor { { 0, 1 } })
  T.raises(function() t:narrow(1, 4, 3) end, "narrow: 4..6 (start 4, length 3) out of range for dim 1 of (5,2) (1..5; "
    .. "narrow takes (dim, start, len), as in Torch7 and PyTorch)")
  T.raises(function() t:narrow(1, 0, 1) end, "narrow: 0..0 (start 0")
  T.raises(function() t:narrow(1, 2, math.maxinteger) end, "(start 2, length " .. math.maxinteger .. ") out of range")
  T.raises(function() t:narrow(1, 1, -1) end, "(start 1, length -1) out of range")
  -- along another dim: a copy
  local c = t:narrow(2, 2, 1)
  T.eq(shape(c), "5,1")
  T.eq(table.concat(c:reshape(5):totable(), ","), "1.0,3.0,5.0,7.0,-1.0")
  c:fill(42)
  T.eq(t:get(1, 2), 1, "a copy, not a view")
  T.raises(function() t:narrow(2, 2, 2) end, "narrow: 2..3 (start 2, length 2) out of range for dim 2 of (5,2) (1..2;")
  T.raises(function() t:narrow(3, 1, 1) end, "narrow: dim 3 out of range for (5,2) (dims are 1..2, or negative from "
    .. "the end; narrow takes (dim, start, len), as in Torch7 and PyTorch)")
  -- srgeo 0.1's narrow(start, len [, dim]): two arguments are refused with the new order spelt out; a
  -- three-argument call in the old order is caught when it lands out of range (the issue's 2x3x4 example)
  T.raises(function() t:narrow(2, 3) end, "narrow: narrow takes (dim, start, len), as in Torch7 and PyTorch; got 2 "
    .. "arguments for (5,2) (srgeo 0.1's narrow(start, len [, dim]) order is gone)")
  T.raises(function() srgeo.zeros(2, 3, 4):narrow(1, 2, 3) end, "narrow: 2..4 (start 2, length 3) out of range for dim 1 of (2,3,4)")
  T.eq(shape(srgeo.zeros(2, 3, 4):narrow(3, 2, 2)), "2,3,2")
  T.raises(function() t:narrow(1) end, "narrow: narrow takes (dim, start, len), as in Torch7 and PyTorch; got 1 argument for (5,2)")
  T.raises(function() t:narrow(1, "a", 2) end, "bad argument #2 to 'narrow' (number expected, got string)")
  T.raises(function() t:slice(2, 6) end, "slice: rows 2..6 out of range for (5,2)")
  T.raises(function() t:row(6) end, "row: index 6 out of range for dim 1 of (5,2) (1..5)")
  T.raises(function() srgeo.tensor(1):row(1) end, "row: a 0-d tensor has no rows")
end)

T.test("size / shape: a list that prints as (2,3,4), compares by value, concatenates, and is accepted as a shape", function()
  local x = srgeo.zeros(2, 3, 4)
  local s = x:size()
  T.eq(tostring(s), "(2,3,4)")
  T.eq(tostring(x:shape()), "(2,3,4)")
  T.eq(#s, 3); T.eq(s[1], 2); T.eq(s[3], 4)
  local n = 0
  for _, v in ipairs(s) do n = n + v end
  T.eq(n, 9, "ipairs over a size")
  T.eq(table.concat(s, "x"), "2x3x4")
  T.eq(x:size(2), 3)
  T.truthy(s == srgeo.ones(2, 3, 4):size(), "equal sizes compare equal")
  T.truthy(s ~= srgeo.ones(2, 3):size() and s ~= srgeo.ones(2, 4, 3):size(), "different sizes differ")
  T.eq("shape " .. s, "shape (2,3,4)")
  T.eq(s .. "!", "(2,3,4)!")
  T.eq(tostring(srgeo.tensor(1):size()), "()")
  T.eq(tostring(srgeo.zeros(0, 5):size()), "(0,5)")
  T.eq(tostring(srgeo.zeros(s):size()), "(2,3,4)", "a size is a shape argument")
  T.eq(tostring(x:reshape(x:size()):size()), "(2,3,4)")
  T.eq(require("srgeo.repl").repr(s), "(2,3,4)", "the REPL prints it")
  local m = srgeo.nn.linear { in_features = 4, out_features = 2 }
  m:forward(srgeo.zeros(3, 4))
  T.eq(tostring(m:output_shape()), "(3,2)")
end)

T.test("get / set: one 1-based index per dim, negatives from the end", function()
  local t = srgeo.zeros(2, 3)
  T.eq(t:set(5, 2, 3), t)
  T.eq(t:get(2, 3), 5)
  T.eq(t:get(-1, -1), 5)
  T.eq(t:sum(), 5)
  T.raises(function() t:get(1) end, "get: 1 indices for a 2-D tensor (2,3) (one per dim, 1-based)")
  T.raises(function() t:get(1, 2, 3) end, "get: 3 indices for a 2-D tensor")
  T.raises(function() t:get(3, 1) end, "get: index 3 out of range for dim 1 of (2,3) (1..2)")
  T.raises(function() t:get(1, 0) end, "get: index 0 out of range for dim 2 of (2,3) (1..3)")
  T.raises(function() t:get(1, 1.5) end, "get: an index must be an integer (got a fraction)")
  T.raises(function() t:set("x", 1, 1) end, "bad argument #1 to 'set'")
  T.raises(function() t:set(1, 1, 4) end, "set: index 4 out of range for dim 2")
end)

T.test("totable round-trips through tensor{}", function()
  local src = { { { 1, 2 }, { 3, 4 }, { 5, 6 } }, { { 7, 8 }, { 9, 10 }, { 11, 12 } } }
  local t = srgeo.tensor(src, "float64")
  local back = srgeo.tensor(t:totable(), "float64")
  T.eq((t - back):abs():max(), 0)
  T.eq(t:totable()[2][3][1], 11)
end)

T.test("tostring: shape, dtype and a summarised preview", function()
  local s = tostring(srgeo.tensor { { 1, 2 }, { 3, 4 } })
  T.truthy(s:find("tensor(2,2) float32", 1, true), s)
  T.truthy(s:find("[[1., 2.],\n [3., 4.]]", 1, true), s)
  local big = tostring(srgeo.arange(1000, "float64"):reshape(10, 100))
  T.truthy(big:find("tensor(10,100) float64", 1, true), big)
  T.truthy(big:find("...", 1, true), "summarised: " .. big)
  T.truthy(big:find("999.", 1, true) and big:find("[[  0.,", 1, true), big)
  T.truthy(#big < 600, "preview is short: " .. #big)
  local f = tostring(srgeo.tensor { 0.5, -1 / 0, 0 / 0 })
  T.truthy(f:find("0.5000", 1, true) and f:find("-inf", 1, true) and f:find("nan", 1, true), f)
  T.truthy(tostring(srgeo.tensor { 1e-7, 1 }):find("e-07", 1, true), "scientific for a wide range")
  T.truthy(tostring(srgeo.zeros(0, 3)):find("tensor(0,3) float32 []", 1, true))
  T.truthy(tostring(srgeo.tensor(3, "float64")):find("tensor() float64 3", 1, true))
end)

T.test("arithmetic metamethods: tensor/number on either side, broadcasting", function()
  local a = srgeo.tensor({ { 1, 2 }, { 3, 4 } }, "float64")
  local b = srgeo.tensor({ { 10, 20 }, { 30, 40 } }, "float64")
  each(a + b, function(i, j) return a:get(i, j) + b:get(i, j) end)
  each(a - b, function(i, j) return a:get(i, j) - b:get(i, j) end)
  each(a * b, function(i, j) return a:get(i, j) * b:get(i, j) end) -- elementwise, not matmul
  each(a / b, function(i, j) return a:get(i, j) / b:get(i, j) end)
  each(a + 1, function(i, j) return a:get(i, j) + 1 end)
  each(1 - a, function(i, j) return 1 - a:get(i, j) end)
  each(2 / a, function(i, j) return 2 / a:get(i, j) end)
  each(3 * a, function(i, j) return 3 * a:get(i, j) end)
  each(-a, function(i, j) return -a:get(i, j) end)
  each(a ^ 2, function(i, j) return a:get(i, j) ^ 2 end)
  each(2 ^ a, function(i, j) return 2 ^ a:get(i, j) end, 1e-15)
  -- a row vector and a per-channel column broadcast
  local row = srgeo.tensor({ 100, 200 }, "float64")
  each(a + row, function(i, j) return a:get(i, j) + row:get(j) end)
  local col = srgeo.tensor({ { 1 }, { 2 } }, "float64")
  each(a * col, function(i, j) return a:get(i, j) * col:get(i, 1) end)
  T.eq(shape(srgeo.zeros(3, 1) + srgeo.zeros(4)), "3,4")
  -- the operands are untouched
  T.eq(a:sum(), 10)
end)

T.test("arithmetic errors: dtype mixing, shapes, non-tensors", function()
  local f, d = srgeo.zeros(2, 3), srgeo.zeros(2, 3, "float64")
  T.raises(function() return f + d end, "add: float32 and float64 tensors; convert with :double()")
  T.raises(function() return d * f end, "mul: float64 and float32 tensors; convert with :double()")
  T.raises(function() return f:sub(d) end, "sub: float32 and float64 tensors")
  T.raises(function() return f + srgeo.zeros(4) end, "add: shapes (2,3) and (4) do not match (nor broadcast)")
  T.raises(function() return f + "1" end, "add: expected tensors or numbers, got tensor and string")
  T.raises(function() return f / {} end, "div: expected tensors or numbers")
end)

T.test("elementwise methods: add..div, pow, exp, log, sqrt, abs, clamp, maximum", function()
  local x = srgeo.tensor({ -2, -0.5, 0.25, 3 }, "float64")
  local p = x:abs()
  each(x:add(1), function(i) return x:get(i) + 1 end)
  each(x:sub(x), function() return 0 end)
  each(x:mul(2), function(i) return 2 * x:get(i) end)
  each(x:div(4), function(i) return x:get(i) / 4 end)
  each(x:neg(), function(i) return -x:get(i) end)
  each(p, function(i) return math.abs(x:get(i)) end)
  each(p:sqrt(), function(i) return math.sqrt(p:get(i)) end)
  each(x:exp(), function(i) return math.exp(x:get(i)) end, 1e-15)
  each(p:log(), function(i) return math.log(p:get(i)) end, 1e-15)
  each(p:pow(1.5), function(i) return p:get(i) ^ 1.5 end, 1e-15)
  each(x:square(), function(i) return x:get(i) ^ 2 end)
  each(x:sign(), function(i) return x:get(i) > 0 and 1 or -1 end)
  each(x:clamp(-1, 1), function(i) return math.max(-1, math.min(1, x:get(i))) end)
  each(x:clamp(0), function(i) return math.max(0, x:get(i)) end)
  each(x:clamp(nil, 0), function(i) return math.min(0, x:get(i)) end)
  each(x:maximum(0), function(i) return math.max(0, x:get(i)) end)
  each(x:minimum(x:neg()), function(i) return -math.abs(x:get(i)) end)
  T.raises(function() x:clamp(1, -1) end, "clamp: bounds [1, -1] are not ordered")
  T.raises(function() x:exp(1, 2):add() end, "add: expected tensors or numbers, got tensor and no value")
end)

T.test("reductions: whole tensor -> numbers, along a 1-based dim -> tensors", function()
  local t = srgeo.tensor({ { 1, 5, 3 }, { 4, 2, 6 } }, "float64")
  T.eq(t:sum(), 21)
  T.eq(t:mean(), 3.5)
  T.close(t:norm(), math.sqrt(1 + 25 + 9 + 16 + 4 + 36))
  local v, i = t:max()
  T.eq(v, 6)
  T.eq(i, 6) -- flat, 1-based
  v, i = t:min()
  T.eq(v, 1)
  T.eq(i, 1)
  T.eq(t:argmax(), 6)
  T.eq(t:argmin(), 1)
  T.eq(table.concat(t:sum(1):totable(), ","), "5.0,7.0,9.0")
  T.eq(table.concat(t:sum(2):totable(), ","), "9.0,12.0")
  T.eq(table.concat(t:sum(-1):totable(), ","), "9.0,12.0")
  T.eq(shape(t:sum(2, true)), "2,1")
  T.eq(shape(t:mean(1, true)), "1,3")
  each(t:norm(1), function(j) return math.sqrt(t:get(1, j) ^ 2 + t:get(2, j) ^ 2) end, 1e-15)
  local vals, idx = t:max(2)
  T.eq(table.concat(vals:totable(), ","), "5.0,6.0")
  T.eq(table.concat(idx:totable(), ","), "2.0,3.0") -- 1-based positions along dim 2
  vals, idx = t:min(1)
  T.eq(table.concat(idx:totable(), ","), "1.0,2.0,1.0")
  T.eq(table.concat(t:argmax(1):totable(), ","), "2.0,1.0,2.0")
  T.eq(table.concat(t:argmin(2):totable(), ","), "1.0,2.0")
  T.eq(t:argmax(1):dtype(), "float64")
  T.raises(function() t:sum(3) end, "sum: dim 3 out of range for (2,3)")
  T.raises(function() srgeo.zeros(0, 2):max() end, "max: empty tensor (0,2) has no max")
  T.truthy(srgeo.zeros(0):mean() ~= srgeo.zeros(0):mean(), "mean of nothing is NaN")
  -- float32 data is summed in double
  local big = srgeo.full({ 1000000 }, 0.1)
  T.close(big:sum(), 1000000 * big:get(1), 1e-12)
end)

-- Plain Lua reference for matmul.
local function naive_matmul(a, b)
  local A, B = a:totable(), b:totable()
  local m, k, n = #A, #B, #B[1]
  local C = {}
  for i = 1, m do
    C[i] = {}
    for j = 1, n do
      local s = 0
      for p = 1, k do s = s + A[i][p] * B[p][j] end
      C[i][j] = s
    end
  end
  return srgeo.tensor(C, a:dtype())
end

T.test("matmul matches a naive loop on awkward shapes (1xN, Nx1, odd)", function()
  local shapes = { { 1, 1, 1 }, { 1, 7, 1 }, { 1, 5, 9 }, { 9, 5, 1 }, { 7, 13, 3 }, { 17, 1, 4 } }
  for s, mkn in ipairs(shapes) do
    for _, dt in ipairs { "float32", "float64" } do
      local a = srgeo.randn({ mkn[1], mkn[2] }, s, dt)
      local b = srgeo.randn({ mkn[2], mkn[3] }, 100 + s, dt)
      local c = a:matmul(b)
      T.eq(shape(c), mkn[1] .. "," .. mkn[3])
      local ref = naive_matmul(a, b)
      local err = (c - ref):abs():max() / math.max(ref:abs():max(), 1e-300)
      T.truthy(err < (dt == "float64" and 1e-13 or 1e-5), dt .. " shape " .. s .. " rel err " .. err)
    end
  end
  -- batched, vectors, transpose
  local a3, b3 = srgeo.randn({ 3, 2, 5 }, 1, "float64"), srgeo.randn({ 3, 5, 4 }, 2, "float64")
  local c3 = a3:matmul(b3)
  T.eq(shape(c3), "3,2,4")
  local c2 = naive_matmul(a3:row(2):reshape(2, 5), b3:row(2):reshape(5, 4))
  T.truthy((c3:row(2):reshape(2, 4) - c2):abs():max() < 1e-13, "batch entry 2")
  local m, v = srgeo.randn({ 4, 3 }, 3, "float64"), srgeo.randn({ 3 }, 4, "float64")
  T.eq(shape(m:matmul(v)), "4")
  T.close(m:matmul(v):get(2), m:row(2):reshape(3):dot(v), 1e-14)
  T.eq(shape(m:t()), "3,4")
  T.eq(m:t():get(3, 1), m:get(1, 3))
  T.eq(m:transpose():get(2, 4), m:get(4, 2))
  T.raises(function() m:matmul(m) end, "matmul: inner dimensions differ in (4,3) x (4,3) (3 vs 4)")
  T.raises(function() v:matmul(v) end, "matmul: (3) and (3) are both 1-D; use dot")
  T.raises(function() m:matmul(m:float()) end, "matmul: float64 and float32 tensors")
  T.raises(function() a3:t() end, "transpose: input (3,2,5) must be 2-D")
  local p = a3:transpose(1, 3)
  T.eq(shape(p), "5,2,3")
  each(p, function(i, j, k) return a3:get(k, j, i) end)
  each(a3:transpose(-1, 2), function(i, j, k) return a3:get(i, k, j) end)
  T.raises(function() a3:transpose(1, 4) end, "transpose: dim 4 out of range for (3,2,5)")
end)

T.test("dot: same-shape inner product in double", function()
  local a, b = srgeo.tensor { { 1, 2 }, { 3, 4 } }, srgeo.tensor { { 5, 6 }, { 7, 8 } }
  T.eq(a:dot(b), 70)
  T.raises(function() a:dot(srgeo.zeros(4)) end, "dot: shapes (2,2) and (4) differ")
  T.raises(function() a:dot(3) end, "srgeo tensor expected")
end)

T.test("fill and copy work in place and return the tensor", function()
  local t = srgeo.zeros(2, 2)
  local v = t:reshape(4)
  T.eq(t:fill(3), t)
  T.eq(v:sum(), 12)
  local src = srgeo.tensor({ { 1, 2 }, { 3, 4 } }, "float64")
  T.eq(t:copy(src), t)
  T.eq(t:dtype(), "float32") -- explicit copy converts
  T.eq(v:get(4), 4)
  T.raises(function() t:copy(srgeo.zeros(4)) end, "copy: source (4) and destination (2,2) shapes differ")
end)

T.test("cat / stack along 1-based dims", function()
  local a, b = srgeo.tensor { { 1, 2 } }, srgeo.tensor { { 3, 4 }, { 5, 6 } }
  local c = srgeo.cat { a, b }
  T.eq(shape(c), "3,2")
  T.eq(table.concat(c:reshape(6):totable(), ","), "1.0,2.0,3.0,4.0,5.0,6.0")
  local d = srgeo.cat({ b, b }, 2)
  T.eq(shape(d), "2,4")
  T.eq(d:get(2, 3), 5)
  T.eq(shape(srgeo.cat({ b, b }, -1)), "2,4")
  local s = srgeo.stack { b, b, b }
  T.eq(shape(s), "3,2,2")
  T.eq(shape(srgeo.stack({ b, b, b }, 3)), "2,2,3")
  T.eq(srgeo.stack({ b, b * 10 }, 3):get(2, 1, 2), 50)
  T.raises(function() srgeo.cat {} end, "cat: empty list of tensors")
  T.raises(function() srgeo.cat { a, 3 } end, "cat: entry 2 is a number, expected a tensor")
  T.raises(function() srgeo.cat({ a, b }, 2) end, "cat: tensor 1 (2,2) does not match tensor 0 (1,2) outside dim 1")
  T.raises(function() srgeo.cat { a, a:double() } end, "cat: float32 and float64 tensors")
  T.raises(function() srgeo.stack { a, b } end, "stack: tensor 1 (2,2) differs from tensor 0 (1,2)")
  T.raises(function() srgeo.cat({ a }, 3) end, "cat: dim 3 out of range for (1,2)")
end)

T.test("index: 1-based rows from a table or a tensor", function()
  local t = srgeo.arange(8):reshape(4, 2)
  local r = t:index { 4, 1, 4 }
  T.eq(shape(r), "3,2")
  T.eq(table.concat(r:reshape(6):totable(), ","), "6.0,7.0,0.0,1.0,6.0,7.0")
  T.eq(t:index(srgeo.tensor { 2 }):get(1, 2), 3)
  T.eq(t:index({ -1 }):get(1, 1), 6)
  T.eq(shape(t:index {}), "0,2")
  T.raises(function() t:index { 1, 5 } end, "index: index 5 out of range for dim 1 of (4,2) (1..4)")
  T.raises(function() t:index { 1.5 } end, "index: a row index must be an integer")
  T.raises(function() t:index(srgeo.tensor { 1.5 }) end, "index: entry 1 (1.5) is not an integer")
end)

T.test("check_finite names the first bad element; isfinite", function()
  local t = srgeo.zeros(2, 3)
  T.eq(srgeo.check_finite(t), t)
  T.eq(t:isfinite(), true)
  t:set(0 / 0, 2, 2)
  t:set(1 / 0, 2, 3)
  T.eq(t:isfinite(), false)
  T.raises(function() srgeo.check_finite(t, "layer3 output") end,
    "check_finite: layer3 output (2,3) has nan at [2,2] (1-based; flat 5)")
  T.raises(function() srgeo.check_finite(t:narrow(1, 2, 1):clamp(-1, 1):slice(1, 1):index { 1 } * 0 + t:row(2)) end,
    "check_finite: tensor (1,3) has nan at [1,2]")
end)

T.test("npy save/load round trip from Lua (float32, float64) and bad files", function()
  local dir = os.getenv("TMPDIR") or "/tmp"
  for _, dt in ipairs { "float32", "float64" } do
    local path = dir .. "/srgeo_tensor_spec_" .. dt .. ".npy"
    local t = srgeo.randn({ 2, 3, 5 }, 11, dt)
    srgeo.npy.save(path, t)
    local u = srgeo.npy.load(path)
    T.eq(u:dtype(), dt)
    T.eq(shape(u), "2,3,5")
    T.eq((u - t):abs():max(), 0)
    os.remove(path)
  end
  local bad = dir .. "/srgeo_tensor_spec_bad.npy"
  local f = assert(io.open(bad, "wb"))
  f:write("not numpy at all")
  f:close()
  T.raises(function() srgeo.npy.load(bad) end, "bad magic")
  os.remove(bad)
  T.raises(function() srgeo.npy.load(dir .. "/srgeo-no-such-file.npy") end, "No such file")
  T.raises(function() srgeo.npy.save(bad) end, "bad argument #2 to 'save'")
end)

local under_asan = T.under_asan

-- AddressSanitizer aborts on a 4 TB request unless told to return NULL;
-- under it, only the shapes rejected before malloc are tried.
local function asan_aborts_on_huge()
  return under_asan() and not (os.getenv("ASAN_OPTIONS") or ""):find("allocator_may_return_null=1", 1, true)
end

-- Resident set size in MiB (Linux).
local function rss_mb()
  local f = io.open("/proc/self/statm")
  if not f then return nil end
  local _, res = f:read("n", "n")
  f:close()
  return res * 4096 / 2 ^ 20
end

T.test("GC: big temporaries in a loop keep memory bounded", function()
  collectgarbage()
  local before = rss_mb()
  if not before then return end
  local x = srgeo.zeros(1000, 1000) -- 4 MB
  local peak = before
  for i = 1, 150 do -- 150 * (4 + 4) MB of garbage if nothing were collected
    local y = x + i
    local z = y * 2
    T.eq(z:numel(), 1000000)
    if i % 10 == 0 then peak = math.max(peak, rss_mb()) end
  end
  -- srgeo's GC budget lets 64 MB of garbage pile up between collections;
  -- ASan additionally quarantines up to 256 MB of freed memory.
  local limit = 300 + (under_asan() and 300 or 0)
  T.truthy(peak - before < limit, string.format("RSS grew by %.0f MB (before %.0f)", peak - before, before))
end)

T.test("huge shapes are errors, not aborts", function()
  if not asan_aborts_on_huge() then
    T.raises(function() srgeo.zeros { 1e12 } end, "tensor: out of memory allocating 4000000000000 bytes")
    T.raises(function() srgeo.randn({ 1e6, 1e6 }, 1) end, "out of memory")
    T.raises(function() return srgeo.zeros(1000000, 1) + srgeo.zeros(1000000) end, "out of memory")
  end
  T.raises(function() srgeo.zeros { 1e13 } end, "tensor: 10000000000000 is too large (more than 2^40 elements)")
  T.raises(function() srgeo.zeros { 1 << 40, 1 << 40 } end, "tensor: 1099511627776 x 1099511627776 is too large")
  T.raises(function() srgeo.zeros(1, 2, 3, 4, 5, 6, 7, 8, 9) end, "too many dimensions")
end)
