-- torch_spec.lua: PyTorch checkpoints read without Python (core/io/zip.c,
-- core/io/pth.c, srgeo.torch, srgeo.torchkeys, models.load of a .pth).
--   * tests/fixtures/pth (gen_pth.py: torchvision's ResNet-18/-50, ViT-B/16
--     and ConvNeXt-T classes at reduced sizes, stored as F32 with a
--     non-contiguous tensor, F64 wrapped in {"state_dict": {"module.…"}},
--     F16, BF16) give torch's float64 logits to 1e-12;
--   * a hostile corpus built here (a zip writer and pickle pieces below):
--     forbidden globals and opcodes, REDUCE of anything but the allowed
--     rebuilders, deep nesting, memo cycles, storages and tensors reaching
--     past their data, zip bombs, path traversal, duplicate and overlapping
--     entries, bad CRCs, and every truncation of a small valid file: each is
--     read or refused with a message, never a crash.
local T = ...
local srgeo = require "srgeo"
local json = require "srgeo.json"
local tk = require "srgeo.torchkeys"

local DIR = srgeo.root .. "/tests/fixtures/pth/"
local CASES = { "resnet18", "resnet50", "vit_b_16", "convnext_tiny" }
local TOL = 1e-12

local function rel(a, b) return (a - b):norm() / b:norm() end

local function read_ref(name)
  local f <close> = srgeo.safetensors.open(DIR .. name .. "_ref.safetensors")
  return { x = f:get("x", "float64"), logits = f:get("logits", "float64"), meta = f:metadata() }
end

local function logits(m, x) return m:forward(x, { taps = { "logits" } }).logits end

for _, name in ipairs(CASES) do
  T.test("torch: " .. name .. ".pth loads without Python and gives torch's float64 logits", function()
    local ref = read_ref(name)
    local m, meta = srgeo.models.load(DIR .. name .. ".pth")
    T.eq(meta.architecture, ref.meta.architecture, "architecture detected from the keys")
    T.eq(json.encode(json.decode(meta.config)), json.encode(json.decode(ref.meta.config)), "config inferred")
    m:double()
    local e = rel(logits(m, ref.x), ref.logits)
    io.write(string.format("     %-14s %-8s logits rel error %.2g (float64)\n", name, ref.meta.dtype, e))
    T.truthy(e <= TOL, string.format("%s: rel error %.3g > %g", name, e, TOL))
    -- the same file given with its architecture by name
    local m2 = srgeo.models.load(ref.meta.architecture, { weights = DIR .. name .. ".pth" })
    m2:double()
    T.truthy(rel(logits(m2, ref.x), ref.logits) <= TOL, "models.load(ARCH, {weights = FILE})")
  end)
end

T.test("torchkeys: detect agrees with convert_torch.py where both know the architecture", function()
  for _, name in ipairs(CASES) do
    local ref = read_ref(name)
    local sd = tk.strip_prefix(tk.state_dict(srgeo.torch.load(DIR .. name .. ".pth")))
    local arch = tk.detect(sd)
    T.eq(arch, ref.meta.architecture, name)
    -- the script calls a ConvNeXt of another width convnext_nano (see torchkeys.detect)
    if ref.meta.py_architecture ~= "convnext_nano" then T.eq(arch, ref.meta.py_architecture, name .. " vs Python") end
  end
end)

T.test("torch.load: the wrapped checkpoint keeps its structure; the state_dict is found and the prefix stripped", function()
  local obj = srgeo.torch.load(DIR .. "resnet50.pth")
  T.eq(obj.epoch, 3)
  T.eq(obj.arch, "resnet50")
  T.truthy(obj.state_dict["module.fc.weight"], "keys as saved")
  T.eq(obj.state_dict["module.fc.weight"]:dtype(), "float64", "F64 storage stays float64")
  local sd, prefix = tk.strip_prefix(tk.state_dict(obj))
  T.eq(prefix, "module.")
  T.truthy(sd["fc.weight"])
  -- the non-contiguous tensor of resnet18.pth is read in its logical order
  local r = srgeo.torch.load(DIR .. "resnet18.pth")
  T.eq(table.concat(r["fc.weight"]:shape(), ","), "10,16")
  T.eq(r["bn1.num_batches_tracked"]:dtype(), "float64", "an int64 buffer")
end)

-- --- the hostile corpus -------------------------------------------------------

local function crc32(s)
  local crc = 0xffffffff
  for i = 1, #s do
    crc = crc ~ s:byte(i)
    for _ = 1, 8 do crc = (crc >> 1) ~ (0xedb88320 & -(crc & 1)) end
  end
  return crc ~ 0xffffffff
end

-- A zip of entries {name, data [, method = 8, usize =, crc =, csize =]}
-- (method 8: data is already a deflate stream).  opts.cd_extra: bytes in
-- the directory; opts.offsets: override local header offsets by index.
local function zip(entries, opts)
  opts = opts or {}
  local out, cd, off = {}, {}, 0
  for i, e in ipairs(entries) do
    local method, data = e.method or 0, e.data
    local usize, csize = e.usize or #data, e.csize or #data
    local crc = e.crc or (method == 0 and crc32(data) or 0)
    local lh = string.pack("<I4I2I2I2I2I2I4I4I4I2I2", 0x04034b50, 20, 0, method, 0, 0, crc, csize, usize, #e.name, 0)
      .. e.name
    local hoff = opts.offsets and opts.offsets[i] or off
    cd[#cd + 1] = string.pack("<I4I2I2I2I2I2I2I4I4I4I2I2I2I2I2I4I4", 0x02014b50, 20, 20, 0, method, 0, 0, crc, csize,
      usize, #e.name, 0, 0, 0, 0, 0, hoff) .. e.name
    out[#out + 1] = lh .. data
    off = off + #lh + #data
  end
  local cds = table.concat(cd)
  local n = opts.count or #entries
  return table.concat(out) .. cds .. string.pack("<I4I2I2I2I2I4I4I2", 0x06054b50, 0, 0, n, n, #cds, off, 0)
end

-- Pickle pieces (protocol 2, as torch.save writes).
local P = {}
function P.str(s) return "X" .. string.pack("<I4", #s) .. s end
function P.int(i)
  if i >= 0 and i < 256 then return "K" .. string.char(i) end
  if i >= -2 ^ 31 and i < 2 ^ 31 then return "J" .. string.pack("<i4", i) end
  return "\138\8" .. string.pack("<i8", i)
end
function P.global(m, n) return "c" .. m .. "\n" .. n .. "\n" end
function P.tuple(...) return "(" .. table.concat { ... } .. "t" end
function P.ints(list)
  local t = {}
  for i, v in ipairs(list) do t[i] = P.int(v) end
  return P.tuple(table.unpack(t))
end
-- _rebuild_tensor_v2 of storage KEY (STYPE, NUMEL elements).
function P.tensor(key, stype, numel, offset, size, stride)
  local pid = P.tuple(P.str "storage", P.global("torch", stype), P.str(key), P.str "cpu", P.int(numel))
  return P.global("torch._utils", "_rebuild_tensor_v2")
    .. P.tuple(pid .. "Q", P.int(offset), P.ints(size), P.ints(stride), "\137", P.global("collections", "OrderedDict") .. ")R")
    .. "R"
end
-- {name: tensor, ...} as torch writes a state_dict, then STOP.
function P.state(items)
  local body = {}
  for _, it in ipairs(items) do body[#body + 1] = P.str(it[1]) .. it[2] end
  return "\128\2" .. P.global("collections", "OrderedDict") .. ")R(" .. table.concat(body) .. "u."
end

local floats = string.pack("<ffffff", 1, 2, 3, 4, 5, 6)
local VALID_PKL = P.state { { "w", P.tensor("0", "FloatStorage", 6, 0, { 2, 3 }, { 3, 1 }) } }

-- A torch.save-like archive of a pickle and storages {key = bytes}.
local function pth(pkl, storages, extra)
  local e = { { name = "a/data.pkl", data = pkl } }
  for k, v in pairs(storages or { ["0"] = floats }) do e[#e + 1] = { name = "a/data/" .. k, data = v } end
  e[#e + 1] = { name = "a/version", data = "3\n" }
  for _, x in ipairs(extra or {}) do e[#e + 1] = x end
  return zip(e)
end

-- A deflate stream of stored blocks (BTYPE 00) holding s.
local function deflate_stored(s)
  return "\1" .. string.pack("<I2I2", #s, (~#s) & 0xffff) .. s
end

local function hostile()
  local H = {}
  local function add(name, bytes, needle) H[#H + 1] = { name = name, bytes = bytes, needle = needle } end
  local function call(m, n) return pth("\128\2" .. P.global(m, n) .. P.tuple(P.str "id") .. "R.") end
  -- forbidden globals, by GLOBAL and STACK_GLOBAL
  for _, g in ipairs { { "os", "system" }, { "posix", "system" }, { "builtins", "eval" }, { "builtins", "exec" },
                       { "builtins", "getattr" }, { "__builtin__", "eval" }, { "subprocess", "Popen" },
                       { "torch.storage", "_load_from_bytes" }, { "torch._utils", "_rebuild_tensor" },
                       { "torch", "load" }, { "numpy.core.multiarray", "_reconstruct" }, { "collections", "OrderedDictX" } } do
    add("GLOBAL " .. g[1] .. "." .. g[2], call(g[1], g[2]), "global " .. g[1] .. "." .. g[2] .. " is not allowed")
    add("STACK_GLOBAL " .. g[1] .. "." .. g[2],
      pth("\128\2" .. P.str(g[1]) .. P.str(g[2]) .. "\147" .. P.tuple(P.str "id") .. "R."), "is not allowed")
  end
  -- REDUCE of an allowed global that is not a rebuilder, and of a non-global
  add("REDUCE torch.FloatStorage", pth("\128\2" .. P.global("torch", "FloatStorage") .. ")R."), "REDUCE of torch.FloatStorage")
  add("REDUCE of a string", pth("\128\2" .. P.str "os.system" .. ")R."), "REDUCE of a value")
  add("REDUCE OrderedDict with arguments", pth("\128\2" .. P.global("collections", "OrderedDict") .. P.tuple(P.str "x") .. "R."),
    "takes ()")
  -- opcodes outside the allow-list
  for _, op in ipairs { { "INST", "i" }, { "OBJ", "o" }, { "NEWOBJ", "\129" }, { "EXT1", "\130" }, { "PERSID", "P" },
                        { "BINBYTES", "B" }, { "DUP", "2" }, { "NEWOBJ_EX", "\146" }, { "BYTEARRAY8", "\150" },
                        { "STRING", "S" }, { "INT", "I" }, { "LONG4", "\139" } } do
    add("opcode " .. op[1], pth("\128\2" .. op[2] .. "junk\n."), "is not allowed (restricted unpickler)")
  end
  -- nesting: marks, stack, nested tuples, a memo cycle
  add("100k MARKs", pth("\128\2" .. string.rep("(", 100000) .. "."), "MARKs nested deeper")
  add("100k lists on the stack", pth("\128\2" .. string.rep("]", 100000) .. "."), "stack deeper")
  add("100k nested tuples", pth("\128\2N" .. string.rep("\133", 100000) .. "."), "nested deeper than")
  add("a list that holds itself", pth("\128\2]q\0h\0a."), nil)
  add("memo get never put", pth("\128\2h\7."), "never put")
  add("memo index beyond the bound", pth("\128\2Nr\255\255\255\127."), "beyond")
  add("LONG1 of 9 bytes", pth("\128\2\138\9" .. string.rep("\1", 9) .. "."), "LONG1")
  add("no STOP", pth("\128\2N"), "truncated")
  add("two values at STOP", pth("\128\2NN."), "STOP with")
  add("SETITEMS on a list", pth("\128\2](NNu."), "not a dict")
  add("BUILD on a tensor", pth(P.state {} .. ""):gsub("u%.", "u]b."), nil)
  -- storages and tensors
  local function one(key, stype, numel, off, size, stride, data)
    return pth(P.state { { "w", P.tensor(key, stype, numel, off, size, stride) } }, { [key] = data or floats })
  end
  add("storage larger than its entry", one("0", "FloatStorage", 1000000, 0, { 2, 3 }, { 3, 1 }), "but its entry")
  add("storage of 2^50 elements", one("0", "FloatStorage", 2 ^ 50, 0, { 2, 3 }, { 3, 1 }), "elements (0 to 2^40)")
  add("negative numel", one("0", "FloatStorage", -6, 0, { 2, 3 }, { 3, 1 }), "elements (0 to 2^40)")
  add("storage with no entry", one("9", "FloatStorage", 6, 0, { 2, 3 }, { 3, 1 }, nil):gsub("a/data/9", "a/data/8"),
    "has no entry")
  add("storage type mismatch in size", one("0", "DoubleStorage", 6, 0, { 2, 3 }, { 3, 1 }), "but its entry")
  add("offset past the storage", one("0", "FloatStorage", 6, 4, { 2, 3 }, { 3, 1 }), "reaches past its storage")
  add("negative offset", one("0", "FloatStorage", 6, -1, { 2, 3 }, { 3, 1 }), "past its storage")
  add("stride past the storage", one("0", "FloatStorage", 6, 0, { 2, 3 }, { 4, 1 }), "reaches past")
  add("huge stride", one("0", "FloatStorage", 6, 0, { 2, 3 }, { 2 ^ 62, 1 }), "reaches past")
  add("negative stride", one("0", "FloatStorage", 6, 0, { 2, 3 }, { -3, 1 }), "negative size or stride")
  add("huge shape", one("0", "FloatStorage", 6, 0, { 2 ^ 30, 2 ^ 30 }, { 0, 0 }), "pth tensor")
  add("size and stride of different lengths", one("0", "FloatStorage", 6, 0, { 2, 3 }, { 1 }), "_rebuild_tensor_v2 takes")
  add("key with a slash", one("../0", "FloatStorage", 6, 0, { 2, 3 }, { 3, 1 }), nil)
  add("a view of zero elements at the end", one("0", "FloatStorage", 6, 6, { 0 }, { 1 }), nil)
  add("byteorder big", pth(VALID_PKL, nil, { { name = "a/byteorder", data = "big" } }), "byteorder")
  -- the zip
  add("path traversal ../", zip { { name = "../data.pkl", data = VALID_PKL } }, "path traversal")
  add("path traversal a/../../x", zip { { name = "a/../../data.pkl", data = VALID_PKL } }, "path traversal")
  add("absolute name", zip { { name = "/etc/data.pkl", data = VALID_PKL } }, "absolute")
  add("backslash name", zip { { name = "a\\..\\data.pkl", data = VALID_PKL } }, "backslash")
  add("NUL in a name", zip { { name = "a/data.pkl\0x", data = VALID_PKL } }, "NUL")
  add("duplicate names", zip { { name = "a/data.pkl", data = VALID_PKL }, { name = "a/data.pkl", data = VALID_PKL } },
    "appears twice")
  add("two archives", zip { { name = "a/data.pkl", data = VALID_PKL }, { name = "b/data.pkl", data = VALID_PKL } },
    "two data.pkl")
  add("overlapping entries", zip({ { name = "a/data.pkl", data = VALID_PKL }, { name = "a/data/0", data = floats } },
    { offsets = { 0, 0 } }), nil)
  add("bad CRC", pth(VALID_PKL, { ["0"] = floats }):gsub(string.pack("<f", 6), string.pack("<f", 7)), "CRC")
  add("zip bomb: 4 GB declared from 10 bytes", pth(VALID_PKL, {}, {
    { name = "a/data/0", data = deflate_stored("0123456789"), method = 8, usize = 0xfffffffe } }), nil)
  add("deflate longer than declared", pth(VALID_PKL, {}, {
    { name = "a/data/0", data = deflate_stored(floats .. floats), method = 8, usize = 24 } }), "does not inflate")
  add("deflate shorter than declared", pth(VALID_PKL, {}, {
    { name = "a/data/0", data = deflate_stored("abc"), method = 8, usize = 24 } }), "does not inflate")
  add("deflated pickle, valid", zip { { name = "a/data.pkl", data = deflate_stored(VALID_PKL), method = 8, usize = #VALID_PKL,
    crc = crc32(VALID_PKL) }, { name = "a/data/0", data = floats } }, nil)
  add("method 12 (bzip2)", zip { { name = "a/data.pkl", data = VALID_PKL, method = 12 } }, "compression method 12")
  add("entry count beyond the directory", zip({ { name = "a/data.pkl", data = VALID_PKL } }, { count = 5000 }), nil)
  add("zip64 marker", zip({ { name = "a/data.pkl", data = VALID_PKL } }, { count = 0xffff }), "zip64")
  add("not a zip (legacy torch.save)", "\128\2\138\10l\252\156F\249 j\168P\25.", "legacy (PyTorch < 1.6)")
  add("empty file", "", "too short")
  return H
end

local function check(path, needle)
  local ok, err = pcall(srgeo.torch.load, path)
  if ok then return "read" end
  err = tostring(err)
  if needle and not err:find(needle, 1, true) then return "wrong message: " .. err end
  return "refused", err
end

T.test("torch: a valid minimal archive built here reads (the corpus' base)", function()
  local path = os.tmpname()
  local f = assert(io.open(path, "wb"))
  f:write(pth(VALID_PKL))
  f:close()
  local obj = srgeo.torch.load(path)
  os.remove(path)
  T.eq(table.concat(obj.w:shape(), ","), "2,3")
  T.eq(obj.w:get(2, 3), 6)
end)

T.test("torch: hostile corpus: every file is read or refused with a message, none crashes", function()
  local path = os.tmpname()
  local read, refused, msgs = 0, 0, {}
  local cases = hostile()
  for _, c in ipairs(cases) do
    local f = assert(io.open(path, "wb"))
    f:write(c.bytes)
    f:close()
    local verdict, err = check(path, c.needle)
    if verdict == "read" then
      read = read + 1
      T.truthy(c.needle == nil, c.name .. ": read, but should be refused (" .. tostring(c.needle) .. ")")
    elseif verdict == "refused" then
      refused = refused + 1
      msgs[#msgs + 1] = err
      T.truthy(err:find(path, 1, true), c.name .. ": the message names the file: " .. err)
    else
      T.truthy(false, c.name .. ": " .. verdict)
    end
  end
  os.remove(path)
  io.write(string.format("     hostile .pth corpus: %d inputs, %d refused with a message, %d read, 0 crashes\n",
    #cases, refused, read))
end)

T.test("torch: every truncation of a small valid file is refused with a message", function()
  local whole = pth(VALID_PKL)
  local path = os.tmpname()
  local refused = 0
  for n = 0, #whole - 1 do
    local f = assert(io.open(path, "wb"))
    f:write(whole:sub(1, n))
    f:close()
    local ok, err = pcall(srgeo.torch.load, path)
    T.truthy(not ok and tostring(err):find("pth") ~= nil or not ok and tostring(err):find("zip") ~= nil,
      "truncated at " .. n .. ": " .. tostring(err))
    if not ok then refused = refused + 1 end
  end
  os.remove(path)
  io.write(string.format("     %d truncations of a %d-byte file: %d refused\n", #whole, #whole, refused))
  T.eq(refused, #whole)
end)

T.test("torch: a FIFO, a folder and a missing file are refused without blocking", function()
  local dir = os.tmpname()
  os.remove(dir)
  os.execute("mkdir " .. dir .. " && mkfifo " .. dir .. "/fifo.pth")
  T.raises(function() srgeo.torch.load(dir .. "/fifo.pth") end, "not a regular file")
  T.raises(function() srgeo.torch.load(dir) end, "not a regular file")
  T.raises(function() srgeo.torch.load(dir .. "/missing.pth") end, "No such file")
  os.execute("rm -rf " .. dir)
end)

T.test("models.load: a .pth whose keys fit no architecture, or the wrong one, fails by name", function()
  T.raises(function() srgeo.models.load(DIR .. "resnet18.pth", { arch = "resnet50" }) end, "missing")
  T.raises(function() srgeo.models.load("resnet18", { weights = DIR .. "vit_b_16.pth" }) end, "vit_b_16.pth")
  T.raises(function() srgeo.models.load(DIR .. "resnet18.pth", { wobble = 1 }) end, "unknown option 'wobble'")
  -- a legacy (bare pickle) file reaches the unpickler's message, not the safetensors reader's
  local legacy = os.tmpname()
  local f = assert(io.open(legacy, "wb"))
  f:write("\128\2\138\10l\252\156F\249 j\168P\25.")
  f:close()
  T.raises(function() srgeo.models.load(legacy) end, "legacy (PyTorch < 1.6)")
  os.remove(legacy)
end)

T.test("spec: --model ARCH:FILE.pth and FILE.pth load the checkpoint; @init builds its twin", function()
  local S = require "srgeo.spec"
  local file = DIR .. "resnet18.pth"
  local ref = read_ref("resnet18")
  for _, s in ipairs { "resnet18:" .. file, file } do
    local m, info = S.load_model(s, 0)
    T.eq(info.arch, "resnet18", s)
    T.eq(info.label, "resnet18", s .. ": labelled by the file")
    m:double()
    T.truthy(rel(logits(m, ref.x), ref.logits) <= TOL, s)
  end
  local twin, info = S.load_model("resnet18:" .. file .. "@init:3", 0)
  T.eq(info.label, "resnet18@init:3")
  T.eq(json.encode(info.config.widths), "[8,8,16,16]", "the twin has the checkpoint's widths")
  twin:double()
  T.truthy(rel(logits(twin, ref.x), ref.logits) > 0.01, "the twin's weights are new")
  T.raises(function() S.load_model("nosucharch:" .. file) end, "no such file")
end)

T.test("m:load reads a .pth (prefix= strips a wrapper's) and a table of tensors", function()
  local ref = read_ref("resnet50")
  local m = srgeo.models.resnet50 { widths = { 4, 4, 8, 8 }, num_classes = 10, init = false }
  T.raises(function() m:load(DIR .. "resnet50.pth") end, "missing")
  local r = m:load(DIR .. "resnet50.pth", { prefix = "module." })
  T.truthy(r.loaded > 0, "loaded")
  m:eval()
  m:double()
  T.truthy(rel(logits(m, ref.x), ref.logits) <= TOL, "m:load(FILE.pth)")
end)
