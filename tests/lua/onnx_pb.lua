-- onnx_pb.lua: a protobuf writer for the few ONNX messages the tests spell
-- out (proto2 wire format: varint keys and values, length-delimited
-- strings and messages, fixed32 floats), so a malformed or hostile model is
-- written in the test rather than shipped as an opaque file.  Used by
-- tests/lua/onnx_spec.lua and tests/lua/hostile_files.lua.
local PB = {}

local function varint(n)
  local out = {}
  repeat
    local b = n & 0x7f
    n = n >> 7 -- logical: a negative int64 takes ten bytes, as protobuf writes it
    out[#out + 1] = string.char(n ~= 0 and (b | 0x80) or b)
  until n == 0
  return table.concat(out)
end
local function int(f, v) return varint(f << 3) .. varint(math.tointeger(v)) end
local function bytes(f, s) return varint((f << 3) | 2) .. varint(#s) .. s end
local function each(f, t, enc) local o = {} for i, v in ipairs(t) do o[i] = enc(f, v) end return table.concat(o) end
-- field writers, for messages the helpers below do not cover
PB.varint, PB.int, PB.bytes = varint, int, bytes
function PB.float(f, v) return varint((f << 3) | 5) .. string.pack("<f", v) end

-- TensorProto with raw data: float (1) or int64 (7) values
function PB.tensor(name, dims, values, int64)
  local raw = {}
  if type(values) == "string" then raw = { values } end -- raw bytes as they are
  for i, v in ipairs(type(values) == "table" and values or {}) do
    raw[i] = int64 and string.pack("<i8", v) or string.pack("<f", v)
  end
  return each(1, dims, int) .. int(2, int64 and 7 or 1) .. bytes(8, name) .. bytes(9, table.concat(raw))
end
-- TensorProto of float values kept in a file beside the model (ext: the
-- external_data entries as {key, value} pairs, location first)
function PB.external_tensor(name, dims, ext)
  local e = {}
  for i, kv in ipairs(ext) do e[i] = bytes(1, kv[1]) .. bytes(2, kv[2]) end
  return each(1, dims, int) .. int(2, 1) .. bytes(8, name) .. each(13, e, bytes) .. int(14, 1)
end
function PB.ints_attr(name, t) return bytes(1, name) .. each(8, t, int) .. int(20, 7) end
function PB.int_attr(name, v) return bytes(1, name) .. int(3, v) .. int(20, 2) end
function PB.float_attr(name, v) return bytes(1, name) .. PB.float(2, v) .. int(20, 1) end
function PB.string_attr(name, s) return bytes(1, name) .. bytes(4, s) .. int(20, 3) end
function PB.node(op, inputs, outputs, name, attrs)
  return each(1, inputs, bytes) .. each(2, outputs, bytes) .. bytes(3, name) .. bytes(4, op)
    .. each(5, attrs or {}, bytes)
end
-- ValueInfoProto of a float tensor; a string dim is symbolic
function PB.value(name, dims)
  local d = {}
  for i, v in ipairs(dims) do d[i] = bytes(1, type(v) == "string" and bytes(2, v) or int(1, v)) end
  return bytes(1, name) .. bytes(2, bytes(1, int(1, 1) .. bytes(2, table.concat(d))))
end
-- GraphProto of g.nodes, g.inits, g.inputs, g.outputs (encoded messages),
-- then the bytes g.extra (further fields, as they are)
function PB.graph(g)
  return each(1, g.nodes, bytes) .. bytes(2, g.name or "g") .. each(5, g.inits or {}, bytes)
    .. each(11, g.inputs or {}, bytes) .. each(12, g.outputs or {}, bytes) .. (g.extra or "")
end
function PB.model(g)
  return int(1, 7) .. bytes(7, PB.graph(g)) .. bytes(8, bytes(1, "") .. int(2, g.opset or 13))
end

return PB
