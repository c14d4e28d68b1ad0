-- onnx_spec.lua: the ONNX importer (core/import/) on exports of real
-- architectures (tests/fixtures/gen_onnx.py) against PyTorch's own
-- features and JVPs, and on ONNX's backend node tests (libonnx-testdata)
-- when the package is installed.
local T = ...
local srgeo = require "srgeo"

local FIX = "tests/fixtures/onnx/"
local MODELS = { "mobilenet_v3_small", "efficientnet_b0", "regnet_y_400mf", "densenet121", "shufflenet_v2",
                 "squeezenet1_1", "swin_t", "vit_b_16", "convnext_tiny" }

local function rel(a, b)
  local d = (a - b):abs():max()
  return d / math.max(b:abs():max(), 1e-300)
end

local function npy(name, what) return srgeo.npy.load(FIX .. name .. "_" .. what .. ".npy"):double() end

T.test("onnx: torchvision exports match PyTorch (features 1e-10, JVPs 1e-8 in float64; features 1e-4 in float32)",
  function()
  local lines = {}
  for _, name in ipairs(MODELS) do
    local x, want_f, want_y = npy(name, "x"), npy(name, "features"), npy(name, "y")
    local v, want_jv = npy(name, "v"), npy(name, "jv")
    local m, info = srgeo.onnx.load(FIX .. name .. ".onnx", { dtype = "float64" })
    -- squeezenet's classifier is a convolution: its features are the output
    T.eq(info.features ~= nil, name ~= "squeezenet1_1", name .. ": the classifier's input is found")
    local f = m:forward(x)
    local y = m:forward(x, { tap = "" })
    local _, jv = m:jvp(x, v)
    local ef, ey, ej = rel(f, want_f), rel(y, want_y), rel(jv, want_jv)
    local m32 = srgeo.onnx.load(FIX .. name .. ".onnx")
    local e32 = rel(m32:forward(x:float()):double(), want_f)
    lines[#lines + 1] = string.format("     %-20s f64 features %.1e logits %.1e jvp %.1e | f32 features %.1e", name, ef,
      ey, ej, e32)
    if not (ef <= 1e-10 and ey <= 1e-10 and ej <= 1e-8 and e32 <= 1e-4) then
      error(lines[#lines])
    end
  end
  print(table.concat(lines, "\n"))
end)

-- Hand-made models (tests/lua/onnx_pb.lua writes the protobuf).
local PB = dofile("tests/lua/onnx_pb.lua")

-- Bad files and bad graphs: each an error naming what is wrong (the node,
-- its op, the shapes or values), never a crash, a hang or an allocation a
-- few bytes asked for.
T.test("onnx: malformed files and graphs fail with messages naming the node, op and shapes", function()
  local dir = os.tmpname()
  os.remove(dir)
  T.truthy(os.execute("mkdir -p " .. dir))
  local X, Y = PB.value("x", { "N", 2, 4, 4 }), PB.value("y", { "N", 2, 4, 4 })
  local function graph(nodes, inits, out) return PB.model { nodes = nodes, inits = inits, inputs = { X }, outputs = { out or Y } } end
  local function load(bytes)
    local p = dir .. "/m.onnx"
    T.write(p, bytes)
    return srgeo.onnx.load(p, { raw = true })
  end
  -- the writer is right: a good model loads and runs
  local good = graph { PB.node("Relu", { "x" }, { "y" }, "r") }
  local x = srgeo.randn({ 3, 2, 4, 4 }, 1)
  T.eq((load(good):forward(x) - x:clamp(0, math.huge)):abs():max(), 0)
  local BIG_W = PB.tensor("w", { 2097152 }, string.rep("\0\0\128\63", 2097152)) -- 2^21 ones
  local function many_constants(n)
    -- all read (a Sum of them), so none is pruned
    local nodes, names = {}, {}
    for i = 1, n do nodes[i], names[i] = PB.node("ConstantOfShape", { "s" }, { "c" .. i }, "c" .. i), "c" .. i end
    nodes[n + 1] = PB.node("Sum", names, { "t" }, "sum")
    nodes[n + 2] = PB.node("Add", { "x", "t" }, { "y" }, "adder")
    return nodes
  end
  local cases = {
    { "\x12\x34 not a model \xff\xff", "not an ONNX model srgeo reads: the protobuf does not parse" },
    { good:sub(1, #good // 2), "not an ONNX model" },
    { "", "the model has no graph" },
    { graph { PB.node("FooBar", { "x" }, { "y" }, "the_foo") }, "node 'the_foo' (FooBar): unsupported op FooBar" },
    { graph { PB.node("Add", { "x", "nowhere" }, { "y" }, "adder") },
      "node 'adder' (Add) reads 'nowhere', which no earlier node nor initializer makes" },
    { graph({ PB.node("Relu", { "x" }, { "y" }, "r") }, nil, PB.value("q", { "N", 2 })), "no value named 'q' to return" },
    { graph({ PB.node("Add", { "x", "w" }, { "y" }, "adder") }, { PB.tensor("w", { 2, 3 }, { 1, 2 }) }),
      "tensor 'w' float of 6 values has 8 raw bytes, not 24" },
    { graph({ PB.node("Conv", { "x", "w" }, { "y" }, "conv1") }, { PB.tensor("w", { 1, 3, 1, 1 }, { 1, 2, 3 }) }),
      "node 'conv1' (Conv): weight (1,3,1,1) does not fit 2 input channels in 1 groups" },
    { graph({ PB.node("Reshape", { "x", "s" }, { "y" }, "resh") }, { PB.tensor("s", { 2 }, { -1, 7 }, true) }),
      "node 'resh' (Reshape): reshape: 32 values per sample do not fit the shape (-1,7)" },
    { graph { PB.node("MaxPool", { "x" }, { "y" }, "pool", { PB.ints_attr("kernel_shape", { 9, 9 }) }) },
      "node 'pool' (MaxPool): 'x' (2,4,4) per sample is smaller than the kernel 9x9" },
    { graph({ PB.node("Add", { "x", "c" }, { "y" }, "adder") }, { PB.tensor("c", { 3 }, { 1, 2, 3 }) }),
      "node 'adder' (Add): 'x' (2,4,4) per sample and constant 'c' (3) do not broadcast" },
    -- found by fuzzing (tests/fuzz/fuzz_onnx.c): a zero stride divided, a
    -- missing input was read, a split past its axis, more groups than channels
    { graph { PB.node("MaxPool", { "x" }, { "y" }, "pool", { PB.ints_attr("kernel_shape", { 2, 2 }),
        PB.ints_attr("strides", { 2, 0 }) }) },
      "node 'pool' (MaxPool): kernel 2x2, strides 2,0, dilations 1,1: each must be 1 to 1048576" },
    { graph { PB.node("Shape", {}, { "s" }, "shape"), PB.node("Add", { "x", "s" }, { "y" }, "adder") },
      "node 'shape' (Shape): Shape: input 1 is missing" },
    { graph({ PB.node("Split", { "x", "sz" }, { "a", "b" }, "split", { PB.int_attr("axis", 1) }),
        PB.node("Add", { "a", "b" }, { "y" }, "adder") }, { PB.tensor("sz", { 2 }, { 5, -3 }, true) }),
      "node 'split' (Split): split size 5 of an axis of 2" },
    { graph({ PB.node("Conv", { "x", "w" }, { "y" }, "conv1", { PB.int_attr("group", 4) }) },
        { PB.tensor("w", { 4, 0, 1, 1 }, {}) }),
      "node 'conv1' (Conv): weight (4,0,1,1) does not fit 2 input channels in 4 groups" },
    -- a few bytes asking for gigabytes: refused before any allocation
    { graph({ PB.node("ConstantOfShape", { "s" }, { "c" }, "bomb"), PB.node("Add", { "x", "c" }, { "y" }, "adder") },
        { PB.tensor("s", { 4 }, { 100000, 100000, 4, 4 }, true) }),
      "node 'bomb' (ConstantOfShape): folding: a constant of shape (100000,100000,4,4) is more than 1048576 elements" },
    { graph({ PB.node("Expand", { "c", "s" }, { "t" }, "exp"), PB.node("Add", { "x", "t" }, { "y" }, "adder") },
        { PB.tensor("c", { 1 }, { 1 }), PB.tensor("s", { 3 }, { 65536, 65536, 16 }, true) }),
      "node 'exp' (Expand): folding: a constant of shape (65536,65536,16) is more than" },
    { graph({ PB.node("Tile", { "c", "r" }, { "t" }, "tile"), PB.node("Add", { "x", "t" }, { "y" }, "adder") },
        { PB.tensor("c", { 2, 1 }, { 1, 2 }), PB.tensor("r", { 2 }, { 1 << 20, 1 << 20 }, true) }),
      "node 'tile' (Tile): folding: a constant of shape (2097152,1048576) is more than" },
    -- each constant within bounds, together more than the file's weights justify
    { graph(many_constants(17), { PB.tensor("s", { 2 }, { 1024, 1024 }, true) }),
      "node 'c17' (ConstantOfShape): the folded constants would hold 17825792 values (at most 2^24 + 4 x the 2 given" },
    -- a file's own big tensors let one folded constant be as big: a cast of
    -- a 2^21-value weight folds, a ConstantOfShape of 2^21 + 1 does not
    { graph({ PB.node("ConstantOfShape", { "s" }, { "c" }, "big"), PB.node("Add", { "x", "c" }, { "y" }, "adder") },
        { PB.tensor("s", { 2 }, { 2097153, 1 }, true), BIG_W }),
      "node 'big' (ConstantOfShape): folding: a constant of shape (2097153,1) is more than 2097152 elements" },
  }
  for _, c in ipairs(cases) do T.raises(function() load(c[1]) end, c[2]) end
  load(graph({ PB.node("Cast", { "w" }, { "wc" }, "cast", { PB.int_attr("to", 11) }), PB.node("Relu", { "x" }, { "y" }, "r") },
    { BIG_W }))
  -- Tile folds in one pass (it was a concatenation per repeat: quadratic)
  local tiled = graph({ PB.node("Tile", { "c", "r" }, { "t" }, "tile"), PB.node("Add", { "x", "t" }, { "y" }, "adder") },
    { PB.tensor("c", { 2, 1, 1 }, { 1, 2 }), PB.tensor("r", { 3 }, { 1, 4, 4 }, true) })
  local c = srgeo.cat({ srgeo.full({ 1, 1, 4, 4 }, 1), srgeo.full({ 1, 1, 4, 4 }, 2) }, 2)
  T.eq((load(tiled):forward(x) - (x + srgeo.cat({ c, c, c }, 1))):abs():max(), 0)
  os.execute("rm -rf " .. dir)
end)

-- A fresh folder for a test's files.
local function tmpdir()
  local dir = os.tmpname()
  os.remove(dir)
  T.truthy(os.execute("mkdir -p " .. dir))
  return dir
end

-- Hostile files (issue 37): nesting that crashed protobuf-c's recursive
-- unpack refused on the wire by every reader (onnx.info, onnx.load,
-- models.load); the whole ONNX part of tests/lua/hostile_files.lua (also
-- run by hardening_spec) each a clean error naming the file, or loaded.
T.test("onnx: deep nesting is refused before protobuf-c unpacks it, by info, load and models.load", function()
  local dir = tmpdir()
  local cases = {}
  dofile("tests/lua/hostile_files.lua").onnx(dir, function(name, _, bytes, needle, ok)
    if name:find("^deep_") or name:find("^sequence_") then
      T.write(dir .. "/" .. name, bytes)
      cases[#cases + 1] = { name = name, needle = needle, ok = ok }
    end
  end)
  T.eq(#cases >= 8, true, #cases .. " nesting cases")
  for _, c in ipairs(cases) do
    local p = dir .. "/" .. c.name
    for _, load in ipairs { srgeo.onnx.info, function(q) return srgeo.onnx.load(q, { raw = true }) end,
                            function(q) return srgeo.models.load(q, { normalize = false }) end } do
      if c.ok then load(p) else T.raises(function() load(p) end, c.needle) end
    end
  end
  os.execute("rm -rf " .. dir)
end)

-- A FIFO given as the model or as its external data: refused at once (it
-- blocked in fopen forever), in a child process so that a regression hangs
-- the child (killed after 20 s), not the run; a directory as the model.
T.test("onnx: a FIFO as the model or its external data is refused without blocking", function()
  local exe = T.shell() or "build/srgeo"
  local dir = tmpdir()
  T.truthy(os.execute("mkfifo " .. dir .. "/m.onnx " .. dir .. "/w.bin && mkdir " .. dir .. "/d.onnx"))
  T.write(dir .. "/ext.onnx", PB.model { nodes = { PB.node("Add", { "x", "w" }, { "y" }, "add") },
    inits = { PB.external_tensor("w", { 4 }, { { "location", "w.bin" } }) },
    inputs = { PB.value("x", { "N", 4 }) }, outputs = { PB.value("y", { "N", 4 }) } })
  for _, c in ipairs { { "m.onnx", "m.onnx is a FIFO, not a regular file" }, { "d.onnx", "d.onnx is a directory" },
                       { "ext.onnx", "tensor 'w': external data: " .. dir .. "/w.bin is a FIFO" } } do
    local out, code = T.sh(string.format("timeout 20 %s -e 'local ok, e = pcall(srgeo.onnx.load, %q) print(ok, e)'", exe,
      dir .. "/" .. c[1]))
    T.eq(code, 0, c[1] .. ": the child was killed (it blocked): " .. out)
    T.truthy(out:find("false", 1, true) and out:find(c[2], 1, true), c[1] .. ": " .. out)
  end
  os.execute("rm -rf " .. dir)
end)

-- Import time is linear in nodes: a chain of ReLUs at 2·10^4 and 10^5
-- nodes, CPU seconds of onnx.load (the per-value alias walk made it
-- quadratic: 4,000 nodes 4.2 s, 8,000 11.9 s); the ratio is 5 when linear
-- (measured 5.1-7.4 on a loaded machine), 25 when quadratic.
T.test("onnx: import time is linear in the number of nodes", function()
  local dir = tmpdir()
  -- each size loaded by a fresh child process: in one process, a second
  -- load reuses the heap the first one faulted in, and the small size came
  -- out up to 13 times faster than the large, linear as it is
  local exe = T.shell() or "build/srgeo"
  local function seconds(n)
    local nodes = {}
    for i = 1, n do
      nodes[i] = PB.node("Relu", { i == 1 and "x" or "v" .. (i - 1) }, { i == n and "y" or "v" .. i }, "r" .. i)
    end
    local p = dir .. "/chain" .. n .. ".onnx"
    T.write(p, PB.model { nodes = nodes, inputs = { PB.value("x", { "N", 4 }) }, outputs = { PB.value("y", { "N", 4 }) } })
    local out = T.sh(string.format("timeout 120 %s -e 'local t0 = os.clock() local m, info = srgeo.onnx.load(%q, { raw = true }) "
      .. "print(os.clock() - t0, info.nodes, m:forward(srgeo.tensor({ { -1, 2, -3, 4 } })):get(1, 2))'", exe, p))
    local t, count, y = out:match("^(%S+)%s+(%d+)%s+(%S+)")
    T.eq(tonumber(count), n, out)
    T.eq(tonumber(y), 2, out)
    return tonumber(t)
  end
  local t1, t2 = seconds(20000), seconds(100000)
  print(string.format("     2x10^4 nodes %.2f s, 10^5 %.2f s: ratio %.1f (linear 5, quadratic 25)", t1, t2, t2 / t1))
  T.truthy(t2 < 10 * t1 + 0.1, string.format("10^5 nodes %.2f s, 2x10^4 %.2f s", t2, t1))
  os.execute("rm -rf " .. dir)
end)

-- Folding's work is bounded (2^26 + 16 x the values given): a MatMul of two
-- 1024^2 weights folded for ~32 s, 16 of them in a 4 MB file for minutes;
-- within the budget the fold is exact.  The unpacked messages are bounded
-- by 16 x the file + 16 MB before protobuf-c allocates: a 10 MB file of
-- empty nodes reached 1.3-1.5 GB; now the child's peak RSS grows by less
-- than 3 x the file while refusing it.
T.test("onnx: folding has a work budget; unpacking is bounded by the file's size", function()
  local dir = tmpdir()
  local X, Y = PB.value("x", { "N", 2 }), PB.value("y", { "N", 2 })
  local function mm(n, k)
    local nodes = {}
    for i = 1, k do nodes[i] = PB.node("MatMul", { "w", "w" }, { "p" .. i }, "mm" .. i) end
    nodes[k + 1] = PB.node("Add", { "x", "s" }, { "y" }, "add")
    nodes[k + 2] = PB.node("Slice", { "p" .. k, "st", "en" }, { "s" }, "slice")
    local vals = {}
    for i = 1, n * n do vals[i] = (i % 7) - 3 end
    return PB.model { nodes = { nodes[1], nodes[k + 2], nodes[k + 1] }, inputs = { X }, outputs = { Y },
      inits = { PB.tensor("w", { n, n }, vals), PB.tensor("st", { 2 }, { 0, 0 }, true),
                PB.tensor("en", { 2 }, { 1, 2 }, true) } }
  end
  local p = dir .. "/mm.onnx"
  T.write(p, mm(1024, 1))
  local t0 = os.clock()
  T.raises(function() srgeo.onnx.load(p, { raw = true }) end,
    "node 'mm1' (MatMul): folding would take more than 83886144 steps (this node 1075838977")
  T.truthy(os.clock() - t0 < 2, "refused before folding")
  -- 64^3 folds, exactly: row 1 of w·w, columns 1 and 2
  T.write(p, mm(64, 1))
  local m = srgeo.onnx.load(p, { raw = true, dtype = "float64" })
  local want = { 0, 0 }
  for j = 1, 2 do
    for k = 1, 64 do want[j] = want[j] + ((k % 7) - 3) * (((k - 1) * 64 + j) % 7 - 3) end
  end
  local y = m:forward(srgeo.tensor({ { 0, 0 } }):double())
  T.eq(y:get(1, 1), want[1])
  T.eq(y:get(1, 2), want[2])
  -- memory: a 10 MB file of empty nodes, refused by a child whose peak RSS is measured
  local exe = T.shell() or "build/srgeo"
  if T.under_asan() then os.execute("rm -rf " .. dir) return end
  local script = dir .. "/rss.lua"
  T.write(script, string.format([[
local function hwm()
  for l in io.lines("/proc/self/status") do local v = l:match("^VmHWM:%%s+(%%d+)") if v then return v / 1024 end end
end
local PB = dofile("tests/lua/onnx_pb.lua")
local f = io.open(%q, "wb")
f:write(PB.model { nodes = {}, inputs = {}, outputs = {}, extra = string.rep("\10\0", 5000000) })
f:close()
collectgarbage()
local h0 = hwm()
local ok, err = pcall(srgeo.onnx.load, %q)
print(string.format("%%.1f", hwm() - h0), ok, err)
]], dir .. "/empty.onnx", dir .. "/empty.onnx"))
  local out = T.sh(exe .. " " .. script)
  local grew = tonumber(out:match("^([%d.]+)"))
  T.truthy(grew and out:find("unpacking would take more than", 1, true), out)
  print(string.format("     a 10 MB file of empty nodes: refused, peak RSS +%.1f MB", grew))
  T.truthy(grew < 30, string.format("peak RSS grew by %.1f MB refusing a 10 MB file", grew or -1))
  os.execute("rm -rf " .. dir)
end)

-- Wrong values instead of errors (issue 37, item 7): attributes of the
-- wrong type, Concat-1's default axis, opsets below 1, Gather indices and
-- Pad sizes checked at import (they failed at the first forward).
T.test("onnx: attribute types, Concat's axis, opsets, Gather indices and Pad sizes are checked at import", function()
  local dir = tmpdir()
  local n = 0
  dofile("tests/lua/hostile_files.lua").onnx(dir, function(name, _, bytes, needle, ok)
    if name:find("^attr_") or name:find("^concat_") or name:find("^opset_") or name:find("^gather_")
      or name:find("^pad_") then
      local p = dir .. "/" .. name
      T.write(p, bytes)
      n = n + 1
      if ok then srgeo.onnx.load(p, { raw = true }) else T.raises(function() srgeo.onnx.load(p, { raw = true }) end, needle) end
    end
  end)
  T.eq(n >= 14, true, n .. " cases")
  -- Concat at opset 3 without axis joins on axis 1 (ONNX's Concat-1 default)
  T.write(dir .. "/cat.onnx", PB.model { opset = 3, nodes = { PB.node("Concat", { "x", "x" }, { "y" }, "cat") },
    inputs = { PB.value("x", { "N", 2 }) }, outputs = { PB.value("y", { "N", 4 }) } })
  local y = srgeo.onnx.load(dir .. "/cat.onnx", { raw = true }):forward(srgeo.tensor({ { 1, 2 }, { 3, 4 } }))
  T.eq(table.concat(y:shape(), ","), "2,4")
  T.eq(y:get(2, 3), 3)
  -- an int where a float is read is taken (its value is exact)
  T.write(dir .. "/lrelu.onnx", PB.model { nodes = { PB.node("LeakyRelu", { "x" }, { "y" }, "l", { PB.int_attr("alpha", 2) }) },
    inputs = { PB.value("x", { "N", 2 }) }, outputs = { PB.value("y", { "N", 2 }) } })
  T.eq(srgeo.onnx.load(dir .. "/lrelu.onnx", { raw = true }):forward(srgeo.tensor({ { -1, 1 } })):get(1, 1), -2)
  os.execute("rm -rf " .. dir)
end)

-- The fuzz target's corpus (tests/fuzz/corpus_onnx: seeds and the inputs
-- that once crashed or leaked, named regress_*) replayed in the ordinary
-- build, and under ASan in make sanitize: each loads or fails with a message.
T.test("onnx: the fuzz corpus loads or fails cleanly, the past crashes included", function()
  local p = io.popen("ls tests/fuzz/corpus_onnx/*.onnx")
  local n, failed, regress = 0, 0, 0
  for f in p:lines() do
    n = n + 1
    local ok, err = pcall(srgeo.onnx.load, f, { raw = true })
    if not ok then
      failed = failed + 1
      T.eq(type(err) == "string" and err:find("onnx ", 1, true) ~= nil, true, f .. ": " .. tostring(err))
    end
    if f:find("regress_", 1, true) then regress = regress + 1; T.eq(ok, false, f .. " is refused") end
  end
  p:close()
  T.eq(n >= 20 and regress >= 4, true, "corpus of " .. n .. " files, " .. regress .. " regressions")
  print(string.format("     %d files: %d load, %d refused (%d regressions: past crashes and misreadings)", n, n - failed,
    failed, regress))
end)

-- Folding a cast to float16 rounds once, to nearest even (ONNX's node tests
-- cast values, which srgeo does not take): ties, the largest finite value,
-- overflow, subnormals.
T.test("onnx: folded casts to float16 round to nearest even, overflow to inf, keep subnormals", function()
  local p = os.tmpname()
  T.write(p, PB.model { nodes = { PB.node("Cast", { "c" }, { "h" }, "cast", { PB.int_attr("to", 10) }) },
    inputs = { PB.value("c", { 9 }) }, outputs = { PB.value("h", { 9 }) } })
  local c = srgeo.tensor({ 1 / 3, 2049, 2051, 65519, 65520, -65520, 1e-8, 3e-8, -2 ^ -14 * 1.5 }):double()
  local h = srgeo.onnx.evaluate(p, { constants = { c = { c, "double" } } }).h
  os.remove(p)
  local want = { 0.333251953125, 2048, 2052, 65504, math.huge, -math.huge, 0, 2 ^ -24, -2 ^ -14 * 1.5 }
  for i, w in ipairs(want) do T.eq(h:get(i), w, "element " .. i) end
end)

-- ONNX's backend node tests: every case whose ops srgeo takes, through the
-- importer: without a batch axis (the test's dims as they are, the first
-- float input as the image, the other inputs as constants), and also with
-- the first dim as the batch where that imports (the layout machinery of
-- real models); a model whose output does not depend on an image (Shape,
-- Range, a comparison of integers) through the constant folding.  Outputs
-- are compared as ONNX's own runner does (rtol 1e-3, atol 1e-7; NaN where
-- NaN is expected).  A case is skipped only when the import reports an
-- "unsupported:" attribute or form (listed with the report); any other
-- error or mismatch fails.  Cases on strings, or ops srgeo folds only on
-- integer data (pooling uint8), are not run.
local NODE = "/usr/share/libonnx-testdata/data/node"

local function exists(p) local f = io.open(p, "rb") if f then f:close() return true end return false end

local function is_float(ty) return ty == "float" or ty == "double" or ty == "float16" or ty == "bfloat16" end

-- ONNX's test data keeps bfloat16 values as their uint16 bits
local function bf16_values(t)
  local v = t:reshape { -1 }:totable()
  for i, b in ipairs(v) do v[i] = string.unpack("<f", string.pack("<I4", math.tointeger(b) << 16)) end
  return srgeo.tensor(v):double():reshape(t:shape())
end

-- nil, or the first output that differs
local function compare(outs, got)
  for _, o in ipairs(outs) do
    local g = got[o.name]
    if not g then return "no output " .. o.name end
    local want = o.t:double():reshape { -1 }:totable()
    g = g:double():reshape { -1 }:totable()
    if #g ~= #want then return string.format("output %s has %d values, expected %d", o.name, #g, #want) end
    for i = 1, #want do
      local a, b = g[i], want[i]
      if not ((a ~= a and b ~= b) or a == b or math.abs(a - b) <= 1e-3 * math.abs(b) + 1e-7) then
        return string.format("output %s[%d] is %.9g, expected %.9g", o.name, i, a, b)
      end
    end
  end
end

local FIRST_OUTPUT_ONLY = { LayerNormalization = true, MaxPool = true, Dropout = true }

local function run_case(dir)
  local model = dir .. "/model.onnx"
  local info = srgeo.onnx.info(model)
  local folded_only = false
  for _, op in ipairs(info.ops) do
    local how = srgeo.onnx.supported(op)
    if not how then return nil end -- an op srgeo does not take: not run
    folded_only = folded_only or how == "constants"
  end
  for _, v in ipairs(info.inputs) do
    if v.type == "string" or v.type == "an unknown type" then return nil end -- strings: not srgeo's
  end
  for _, v in ipairs(info.outputs) do
    if v.type == "string" or v.type == "an unknown type" then return nil end
  end
  local set = dir .. "/test_data_set_0/"
  local ins, outs, names = {}, {}, {}
  for i, v in ipairs(info.inputs) do
    local t, ty = srgeo.onnx.read_tensor(set .. "input_" .. (i - 1) .. ".pb")
    if v.type == "bfloat16" and ty == "uint16" then t, ty = bf16_values(t), "bfloat16" end
    ins[i] = { name = v.name, t = t, type = ty }
  end
  for i, v in ipairs(info.outputs) do
    local t, ty = srgeo.onnx.read_tensor(set .. "output_" .. (i - 1) .. ".pb")
    if v.type == "bfloat16" and ty == "uint16" then t = bf16_values(t) end
    outs[i] = { name = v.name, t = t }
    names[i] = v.name
  end
  -- Ops whose further outputs srgeo does not make (LayerNormalization's
  -- Mean / InvStdDev, MaxPool's indices, Dropout's mask): their single-node
  -- cases are compared on the first output, and counted as such.
  local first_only = info.nodes == 1 and #outs > 1 and FIRST_OUTPUT_ONLY[info.ops[1]]
  if first_only then outs, names = { outs[1] }, { names[1] } end
  local image
  for _, v in ipairs(ins) do
    if not image and not folded_only and is_float(v.type) and #v.t:shape() > 0 then image = v end
  end
  local consts, all = {}, {}
  for _, v in ipairs(ins) do
    all[v.name] = { v.t:double(), v.type }
    if v ~= image then consts[v.name] = all[v.name] end
  end
  local function evaluate()
    local ok, got = pcall(srgeo.onnx.evaluate, model, { constants = all })
    if not ok and tostring(got):find("not an op srgeo folds", 1, true) and not image then return nil end
    if not ok then return "fail", tostring(got) end
    local bad = compare(outs, got)
    return bad and "fail" or "pass", bad
  end
  if not image then return evaluate() end
  local dims = image.t:shape()
  -- the first dim as the batch, where that imports (nil: it did not)
  local function batched()
    if #dims < 2 then return nil end
    local rest = {}
    for i = 2, #dims do rest[#rest + 1] = dims[i] end
    local bok, mb = pcall(srgeo.onnx.load, model, { dtype = "float64", input = image.name, constants = consts,
      input_size = rest })
    if not bok then return nil end
    local gok, gb = pcall(mb.forward, mb, image.t:double(), { taps = names, tap = "" })
    if not gok then return "fail", "with the batch axis: " .. tostring(gb) end
    local bad = compare(outs, gb)
    if bad then return "fail", "with the batch axis: " .. bad end
    return "pass"
  end
  local ok, m = pcall(srgeo.onnx.load, model, { dtype = "float64", no_batch = true, input = image.name,
    constants = consts, input_size = dims })
  if not ok then
    local msg = tostring(m)
    if msg:find("does not depend on the input", 1, true) then return evaluate() end
    if msg:find("unsupported: ", 1, true) then return "skip", msg end
    -- (N, C, ...) layers take the first dim as the batch
    local status, why = batched()
    if status then return status, why end
    return "fail", msg
  end
  local shape = { 1 }
  for _, d in ipairs(dims) do shape[#shape + 1] = d end
  local fok, got = pcall(m.forward, m, image.t:double():reshape(shape), { taps = names, tap = "" })
  if not fok then return "fail", tostring(got) end
  local bad = compare(outs, got)
  if bad then return "fail", bad end
  local status, why = batched()
  if status == "fail" then return status, why end
  return first_only and "first" or "pass"
end

-- The op a case tests: its one node's, or for a function expanded into
-- other ops the function's, which ONNX's test generator puts in front of
-- the nodes' names (Softmax_test_softmax_axis_1_expanded_function_...).
local function label_of(info)
  if info.nodes == 1 then return info.ops[1] end
  local fn = (info.node_names[1] or ""):match("^(%u%w*)_test_")
  return (fn or info.ops[#info.ops]) .. " (expanded)"
end

T.test("onnx: ONNX's backend node tests (libonnx-testdata) of the supported ops pass", function()
  if not exists(NODE .. "/test_abs/model.onnx") then
    T.skip("libonnx-testdata is not installed (sh scripts/install-deps.sh --test)")
  end
  local per, failures, skips = {}, {}, {}
  for _, name in ipairs(srgeo._listdir(NODE) or {}) do
    local dir = NODE .. "/" .. name
    if exists(dir .. "/model.onnx") then
      local status, msg = run_case(dir)
      if status then
        local op = label_of(srgeo.onnx.info(dir .. "/model.onnx"))
        per[op] = per[op] or { pass = 0, fail = 0, skip = 0, first = 0 }
        if status == "first" then per[op].first, status = per[op].first + 1, "pass" end
        per[op][status] = per[op][status] + 1
        if status == "fail" then failures[#failures + 1] = name .. ": " .. msg end
        if status == "skip" then skips[#skips + 1] = name .. ": " .. msg:match("unsupported: (.*)$") end
      end
    end
  end
  local ops, tot = {}, { pass = 0, fail = 0, skip = 0, first = 0 }
  for op, c in pairs(per) do
    ops[#ops + 1] = op
    for k, v in pairs(c) do tot[k] = tot[k] + v end
  end
  table.sort(ops)
  table.sort(skips)
  local lines = { string.format("     ONNX node tests: %d passed (%d on their first output only), %d failed, "
    .. "%d skipped over %d ops", tot.pass, tot.first, tot.fail, tot.skip, #ops) }
  for _, op in ipairs(ops) do
    local c = per[op]
    lines[#lines + 1] = string.format("       %-34s %3d passed %3d failed %3d skipped%s", op, c.pass, c.fail, c.skip,
      c.first > 0 and string.format("  (%d on the first output only)", c.first) or "")
  end
  for _, s in ipairs(skips) do lines[#lines + 1] = "       skip " .. s end
  print(table.concat(lines, "\n"))
  if #failures > 0 then error(#failures .. " failed:\n" .. table.concat(failures, "\n")) end
  -- a graph output the import does not return is not read (else these skip)
  T.eq(tot.first > 0, true, "cases compared on their first output")
end)

-- scripts/convert_torch.py --onnx: a torchvision architecture exported at a
-- size, its normalisation in the metadata, loaded by srgeo.models.load on
-- raw pixels; the same weights through a checkpoint file.  Needs torch.
local PY = os.getenv("SRGEO_PYTHON") or "/usr/bin/python3"

T.test("onnx: convert_torch.py --onnx exports a torchvision model srgeo loads with its normalisation", function()
  if os.execute(PY .. " -c 'import torch, torchvision' >/dev/null 2>&1") ~= true then T.skip("torch not available") end
  local dir = os.tmpname()
  os.remove(dir)
  T.truthy(os.execute("mkdir -p " .. dir))
  local out = dir .. "/sq.onnx"
  local cmd = string.format("%s scripts/convert_torch.py --onnx --torchvision squeezenet1_1 --num-classes 10 --size 48 "
    .. "--seed 3 %s >%s/log 2>&1", PY, out, dir)
  T.truthy(os.execute(cmd), "convert_torch.py --onnx failed: " .. (T.read(dir .. "/log") or ""))
  local m, info = srgeo.models.load(out)
  T.eq(info.normalization, "metadata")
  T.eq(info.metadata["srgeo.mean"], "0.485,0.456,0.406")
  T.eq(table.concat(info.input, ","), "3,48,48")
  T.eq(m:children()[1][2]:kind(), "normalize")
  local y = m:forward(srgeo.rand({ 2, 3, 48, 48 }, 1))
  T.eq(table.concat(y:shape(), ","), "2,10")
  -- a checkpoint's weights: the same model saved by torch, exported again
  local ck = dir .. "/sq.pth"
  T.truthy(os.execute(string.format("%s -c \"import torch, torchvision; torch.manual_seed(3); "
    .. "torch.save(torchvision.models.squeezenet1_1(num_classes=10).state_dict(), '%s')\"", PY, ck)))
  T.truthy(os.execute(string.format("%s scripts/convert_torch.py --onnx --torchvision squeezenet1_1 --num-classes 10 "
    .. "--size 48 %s %s/sq2.onnx >%s/log 2>&1", PY, ck, dir, dir)))
  local m2 = srgeo.models.load(dir .. "/sq2.onnx")
  local x = srgeo.rand({ 2, 3, 48, 48 }, 2)
  T.eq((m2:forward(x) - m:forward(x)):abs():max(), 0)
  os.execute("rm -rf " .. dir)
end)

-- What exporters write (tests/fixtures/gen_onnx.py exporters): torch.onnx
-- at opsets 11 and 17 with the batch, height and width dynamic, a
-- tf2onnx-style graph (NHWC input, Constant nodes, a Softmax out) and a
-- paddle2onnx-style one (x*255 and the normalisation in the graph, Resize
-- necks, a Sigmoid map out): each loads with nothing but its normalisation
-- (none to give when the graph has it) and input size, its default tap is
-- the one a user expects, and the tap, the output and the tap's JVPs match
-- PyTorch (float64 1e-10, JVPs 1e-8, float32 1e-5 against torch's float32), the JVPs
-- also central differences of srgeo's own forward.
local EXP = FIX .. "exporters/"
local EXPORTS = {
  { "mobilenet_v3_small_op11", { normalize = false }, "embedding" },
  { "mobilenet_v3_small_op17", { normalize = false }, "embedding" },
  { "fpn_gn_op11", { normalize = false }, "embedding" },
  { "fpn_gn_op17", { normalize = false }, "embedding" },
  { "tf_style", {}, "embedding" },
  { "paddle_style", {}, "output" },
  { "timm_style_op17", { normalize = false }, "embedding" },
}

T.test("onnx: torch.onnx (opsets 11, 17), tf2onnx- and paddle2onnx-style exports load with normalisation and input "
  .. "size only, match PyTorch, JVPs pass central differences", function()
  local lines = {}
  for _, e in ipairs(EXPORTS) do
    local name, opts, tap = e[1], e[2], e[3]
    local function npy(what) return srgeo.npy.load(EXP .. name .. "_" .. what .. ".npy"):double() end
    local x, v = npy("x"), npy("v")
    local function load(dtype)
      local o = { input_size = { 3, 32, 32 }, dtype = dtype }
      for k, val in pairs(opts) do o[k] = val end
      return srgeo.models.load(EXP .. name .. ".onnx", o)
    end
    local m, info = load("float64")
    T.eq(info.tap, tap, name .. ": the default tap")
    T.eq(table.concat(info.input, ","), "3,32,32", name .. ": srgeo's input is (C, H, W)")
    -- srgeo's images are NCHW: a file taking NHWC gets them permuted
    local xin = x
    if info.nhwc then xin = x:transpose(2, 4):transpose(3, 4) end
    local et = rel(m:forward(xin), npy("tap"))
    local ey = rel(m:forward(xin, { tap = "output" }), npy("y"))
    local vin = info.nhwc and v:transpose(2, 4):transpose(3, 4) or v
    local _, jv = m:jvp(xin, vin)
    local ej = rel(jv, npy("jv"))
    -- central differences of srgeo's forward: image i's tangents are rows i·K + j
    local h, K = 1e-6, 2
    local rows = {}
    for i = 1, 2 do for _ = 1, K do rows[#rows + 1] = xin:narrow(1, i, 1) end end
    local X = srgeo.cat(rows, 1)
    local fd = (m:forward(X + vin * h) - m:forward(X - vin * h)) / (2 * h)
    local efd = rel(jv, fd)
    local e32 = rel(load():forward(xin:float()):double(), npy("tap32"))
    lines[#lines + 1] = string.format("     %-24s tap %-9s f64 tap %.1e output %.1e jvp %.1e | fd %.1e | f32 %.1e%s",
      name, info.tap, et, ey, ej, efd, e32, info.normalizes and " | in the graph: " .. info.preprocess or "")
    if not (et <= 1e-10 and ey <= 1e-10 and ej <= 1e-8 and efd <= 1e-6 and e32 <= 1e-5) then error(lines[#lines]) end
  end
  print(table.concat(lines, "\n"))
end)

-- The ops added for exporters that ONNX's node tests (above, when installed)
-- do not cover, or cover only where libonnx-testdata is installed: each in
-- a one-node graph against a reference computed here.
-- A scratch folder and a writer of numbered model files in it (PB.model's
-- table): returns the file's path and its number.
local function model_files()
  local dir = os.tmpname()
  os.remove(dir)
  T.truthy(os.execute("mkdir -p " .. dir))
  local n = 0
  return dir, function(g)
    n = n + 1
    local p = dir .. "/m" .. n .. ".onnx"
    T.write(p, PB.model(g))
    return p, n
  end
end

T.test("onnx: GroupNormalization-18, InstanceNormalization, Resize (opset 18 axes; nearest and linear), Upsample, "
  .. "PRelu, GlobalMaxPool, ReduceL2 / L1 / SumSquare in one-node graphs", function()
  local dir, write = model_files()
  local function load(nodes, inits, out_dims, opset)
    local p = write { nodes = nodes, inits = inits, inputs = { PB.value("x", { "N", 4, 3, 3 }) },
      outputs = { PB.value("y", out_dims) }, opset = opset }
    return srgeo.onnx.load(p, { raw = true, dtype = "float64" })
  end
  local x = srgeo.randn({ 2, 4, 3, 3 }, 3):double()
  local xt = x:totable()
  local function close(got, want, what) T.eq(rel(got, want) < 1e-12, true, what .. ": " .. rel(got, want)) end
  -- GroupNormalization-18: scale and bias per group; InstanceNormalization: per channel
  local function groupnorm(G, w, b)
    local y = srgeo.zeros({ 2, 4, 3, 3 }):double():totable()
    for i = 1, 2 do
      for g = 1, G do
        local cs, vals = 4 // G, {}
        for c = (g - 1) * cs + 1, g * cs do for h = 1, 3 do for v = 1, 3 do vals[#vals + 1] = xt[i][c][h][v] end end end
        local mu, var = 0, 0
        for _, a in ipairs(vals) do mu = mu + a / #vals end
        for _, a in ipairs(vals) do var = var + (a - mu) ^ 2 / #vals end
        for c = (g - 1) * cs + 1, g * cs do
          for h = 1, 3 do for v = 1, 3 do
            y[i][c][h][v] = (xt[i][c][h][v] - mu) / math.sqrt(var + 1e-5) * w[c] + b[c]
          end end
        end
      end
    end
    return srgeo.tensor(y, "float64")
  end
  local m = load({ PB.node("GroupNormalization", { "x", "s", "b" }, { "y" }, "gn", { PB.int_attr("num_groups", 2) }) },
    { PB.tensor("s", { 2 }, { 1.5, -0.5 }), PB.tensor("b", { 2 }, { 0.25, 2 }) }, { "N", 4, 3, 3 }, 18)
  close(m:forward(x), groupnorm(2, { 1.5, 1.5, -0.5, -0.5 }, { 0.25, 0.25, 2, 2 }), "GroupNormalization")
  m = load({ PB.node("InstanceNormalization", { "x", "s", "b" }, { "y" }, "in") },
    { PB.tensor("s", { 4 }, { 1, 2, 3, 4 }), PB.tensor("b", { 4 }, { 0, -1, 1, 0.5 }) }, { "N", 4, 3, 3 })
  close(m:forward(x), groupnorm(4, { 1, 2, 3, 4 }, { 0, -1, 1, 0.5 }), "InstanceNormalization")
  -- Resize-18 over axes 2, 3 (nearest, asymmetric, floor: each pixel repeated), Upsample-9 likewise
  local function repeat2(t)
    local y = srgeo.zeros({ 2, 4, 6, 6 }):double():totable()
    for i = 1, 2 do for c = 1, 4 do for h = 1, 6 do for v = 1, 6 do
      y[i][c][h][v] = xt[i][c][(h + 1) // 2][(v + 1) // 2]
    end end end end
    return srgeo.tensor(y, "float64")
  end
  m = load({ PB.node("Resize", { "x", "", "sc" }, { "y" }, "rs", { PB.ints_attr("axes", { 2, 3 }),
    PB.string_attr("coordinate_transformation_mode", "asymmetric"), PB.string_attr("nearest_mode", "floor") }) },
    { PB.tensor("sc", { 2 }, { 2, 2 }) }, { "N", 4, 6, 6 }, 18)
  close(m:forward(x), repeat2(x), "Resize-18 axes")
  m = load({ PB.node("Upsample", { "x", "sc" }, { "y" }, "up") }, { PB.tensor("sc", { 4 }, { 1, 1, 2, 2 }) },
    { "N", 4, 6, 6 }, 9)
  close(m:forward(x), repeat2(x), "Upsample-9")
  -- linear, align_corners to 5x5: corners kept, the centre the mean of the four
  m = load({ PB.node("Resize", { "x", "", "", "sz" }, { "y" }, "rs", { PB.string_attr("mode", "linear"),
    PB.string_attr("coordinate_transformation_mode", "align_corners") }) },
    { PB.tensor("sz", { 4 }, { 1, 4, 5, 5 }, true) }, { "N", 4, 5, 5 }, 13) -- the batch as exported (1)
  local y = m:forward(x):totable()
  T.eq(math.abs(y[2][3][1][5] - xt[2][3][1][3]) < 1e-15 and math.abs(y[2][3][3][3] - xt[2][3][2][2]) < 1e-15, true,
    "align_corners keeps the corners and the centre")
  T.eq(math.abs(y[1][1][2][2] - (xt[1][1][1][1] + xt[1][1][1][2] + xt[1][1][2][1] + xt[1][1][2][2]) / 4) < 1e-15, true,
    "bilinear between four pixels")
  -- PRelu: x where positive, slope·x where not (a per-channel slope, a weight)
  m = load({ PB.node("PRelu", { "x", "sl" }, { "y" }, "pr") }, { PB.tensor("sl", { 4, 1, 1 }, { 0.1, 0.2, -1, 2 }) },
    { "N", 4, 3, 3 })
  local sl = srgeo.tensor({ 0.1, 0.2, -1, 2 }):double():reshape { 1, 4, 1, 1 } -- the file holds them as float32
  close(m:forward(x), x:clamp(0, math.huge) + (x:clamp(-math.huge, 0) * sl), "PRelu")
  T.eq(m:parameters()["pr/slope.value"] ~= nil, true, "the slope is a parameter")
  -- GlobalMaxPool and the norms over H, W
  m = load({ PB.node("GlobalMaxPool", { "x" }, { "y" }, "gm") }, nil, { "N", 4, 1, 1 })
  close(m:forward(x), x:max(4):max(3):reshape { 2, 4, 1, 1 }, "GlobalMaxPool")
  local l2 = (x * x):sum(4):sum(3):sqrt()
  m = load({ PB.node("ReduceL2", { "x" }, { "y" }, "l2", { PB.ints_attr("axes", { 2, 3 }), PB.int_attr("keepdims", 0) }) },
    nil, { "N", 4 })
  close(m:forward(x), l2, "ReduceL2")
  m = load({ PB.node("ReduceSumSquare", { "x" }, { "y" }, "ss", { PB.ints_attr("axes", { 2, 3 }),
    PB.int_attr("keepdims", 0) }) }, nil, { "N", 4 })
  close(m:forward(x), l2 * l2, "ReduceSumSquare")
  m = load({ PB.node("ReduceL1", { "x" }, { "y" }, "l1", { PB.ints_attr("axes", { 2, 3 }), PB.int_attr("keepdims", 0) }) },
    nil, { "N", 4 })
  close(m:forward(x), x:abs():sum(4):sum(3), "ReduceL1")
  -- refusals name what is not taken
  T.raises(function() load({ PB.node("Resize", { "x", "", "sc" }, { "y" }, "rs", { PB.string_attr("mode", "lanczos") }) },
    { PB.tensor("sc", { 4 }, { 1, 1, 2, 2 }) }, { "N", 4, 6, 6 }, 13) end, "node 'rs' (Resize): unsupported: Resize mode 'lanczos'")
  T.raises(function() load({ PB.node("Resize", { "x", "", "sc" }, { "y" }, "rs") },
    { PB.tensor("sc", { 4 }, { 1, 2, 2, 2 }) }, { "N", 8, 6, 6 }, 13) end,
    "node 'rs' (Resize): unsupported: Resize along the batch or channel axis")
  os.execute("rm -rf " .. dir)
end)

-- The JVP of m's output at x against central differences of its forward
-- (K = 2 tangents per image, h = 1e-6) and the adjoint identity
-- <w, Jv> = <Jᵀw, v>: the two relative errors.
local function derivs(m, x, seed)
  local K, N, o = 2, x:shape()[1], { tap = "" }
  local vs = x:shape()
  vs[1] = N * K
  local v = srgeo.randn(vs, seed):double()
  local _, jv = m:jvp(x, v, o)
  local rows = {}
  for i = 1, N do for _ = 1, K do rows[#rows + 1] = x:narrow(1, i, 1) end end
  local X, h = srgeo.cat(rows, 1), 1e-6
  local efd = rel(jv, (m:forward(X + v * h, o) - m:forward(X - v * h, o)) / (2 * h))
  local v1 = srgeo.randn(x:shape(), seed + 1):double()
  local y, j1 = m:jvp(x, v1, o)
  local w = srgeo.randn(y:shape(), seed + 2):double()
  local a, b = (w * j1):sum(), (m:vjp(x, w, o) * v1):sum()
  return efd, math.abs(a - b) / math.max(math.abs(a), math.abs(b), 1e-300)
end

-- Single ops as torch.onnx writes them (tests/fixtures/gen_onnx.py nodes):
-- LogSoftmax (opsets 11, 13), pixel_shuffle's DepthToSpace (CRD) and
-- pixel_unshuffle's six-dim Reshape, Einsum (attention, 1x1 convolutions
-- with the constant first or second), bicubic Resize (opsets 11, 17),
-- Mish as Softplus / Tanh / Mul.
local NODES = FIX .. "nodes/"
local NODE_CASES = { "log_softmax_op13", "log_softmax_op11", "pixel_shuffle", "einsum_attention", "einsum_conv",
                     "bicubic_op11", "bicubic_op17", "mish" }

T.test("onnx: LogSoftmax, DepthToSpace, Einsum, bicubic Resize, Mish as torch.onnx writes them match PyTorch "
  .. "(float64 1e-10, JVPs 1e-8, float32 1e-5); JVPs pass central differences and the adjoint identity", function()
  local lines = {}
  for i, name in ipairs(NODE_CASES) do
    local function npy(what) return srgeo.npy.load(NODES .. name .. "_" .. what .. ".npy"):double() end
    local x, v = npy("x"), npy("v")
    local m, info = srgeo.onnx.load(NODES .. name .. ".onnx", { dtype = "float64", raw = true })
    local ops = table.concat(srgeo.onnx.info(NODES .. name .. ".onnx").ops, " ")
    local ey = rel(m:forward(x, { tap = "" }), npy("y"))
    local _, jv = m:jvp(x, v, { tap = "" })
    local ej = rel(jv, npy("jv"))
    local efd, eadj = derivs(m, x, 20 + i)
    local m32 = srgeo.onnx.load(NODES .. name .. ".onnx", { raw = true })
    local e32 = rel(m32:forward(x:float(), { tap = "" }):double(), npy("y32"))
    lines[#lines + 1] = string.format("     %-18s f64 %.1e jvp %.1e | fd %.1e adjoint %.1e | f32 %.1e  (%d layers; ONNX ops %s)", name,
      ey, ej, efd, eadj, e32, info.nodes, ops:sub(1, 60))
    if not (ey <= 1e-10 and ej <= 1e-8 and efd <= 1e-6 and eadj <= 1e-12 and e32 <= 1e-5) then error(lines[#lines]) end
  end
  print(table.concat(lines, "\n"))
end)

-- ONNX's cubic Resize of a (N, C, H, W) table to Ho x Wo along ONNX's own
-- definition (Keys' kernel of |distance|, the neighbours floor(x) - 1 ..
-- floor(x) + 2 clamped to the edge; exclude_outside: those outside weigh 0,
-- the rest rescaled to sum 1); sh, sw the scales.
local function cubic_ref(xt, Ho, Wo, sh, sw, A, exclude, coord)
  local function kernel(d)
    d = math.abs(d)
    if d <= 1 then return ((A + 2) * d - (A + 3)) * d * d + 1 end
    if d < 2 then return ((A * d - 5 * A) * d + 8 * A) * d - 4 * A end
    return 0
  end
  local function taps(o, n, s)
    local x = coord == "asymmetric" and o / s or (o + 0.5) / s - 0.5
    local f, idx, w, sum = math.floor(x), {}, {}, 0
    for i = -1, 2 do
      local j = f + i
      local wi = (exclude and (j < 0 or j > n - 1)) and 0 or kernel(x - j)
      idx[#idx + 1], w[#w + 1], sum = math.min(math.max(j, 0), n - 1) + 1, wi, sum + wi
    end
    if exclude then for i = 1, 4 do w[i] = w[i] / sum end end
    return idx, w
  end
  local H, W, y = #xt[1][1], #xt[1][1][1], {}
  for n = 1, #xt do
    y[n] = {}
    for c = 1, #xt[n] do
      y[n][c] = {}
      for oh = 1, Ho do
        y[n][c][oh] = {}
        local ih, wh = taps(oh - 1, H, sh)
        for ow = 1, Wo do
          local iw, ww, s = nil, nil, 0
          iw, ww = taps(ow - 1, W, sw)
          for a = 1, 4 do for b = 1, 4 do s = s + wh[a] * ww[b] * xt[n][c][ih[a]][iw[b]] end end
          y[n][c][oh][ow] = s
        end
      end
    end
  end
  return srgeo.tensor(y, "float64")
end

-- One-node graphs of what torch.onnx does not write at its opsets (Mish-18,
-- DepthToSpace DCR as TensorFlow's depth_to_space, SpaceToDepth, TensorFlow's
-- cubic Resize: a = -0.5, exclude_outside; an implicit Einsum output), each
-- against a reference computed here, with its JVP checked; returns the
-- graphs for the onnxruntime cross-check below.
local function handmade_cases()
  local function sz(t) return srgeo.zeros(t):double():totable() end
  local cases = {}
  local function add(name, node, inits, xs, ys, opset, ref)
    cases[#cases + 1] = { name = name, node = node, inits = inits, xs = xs, ys = ys, opset = opset, ref = ref }
  end
  add("Mish-18", PB.node("Mish", { "x" }, { "y" }, "mish"), nil, { 2, 2, 3, 3 }, { "N", 2, 3, 3 }, 18, function(x)
    local t = x:reshape { -1 }:totable()
    for i, a in ipairs(t) do
      local e = math.exp(-2 * math.log(1 + math.exp(a)))
      t[i] = a * (1 - e) / (1 + e)
    end
    return srgeo.tensor(t, "float64"):reshape(x:shape())
  end)
  for _, mode in ipairs { "DCR", "CRD" } do
    add("DepthToSpace " .. mode, PB.node("DepthToSpace", { "x" }, { "y" }, "d2s", { PB.int_attr("blocksize", 2),
      PB.string_attr("mode", mode) }), nil, { 2, 8, 2, 3 }, { "N", 2, 4, 6 }, 13, function(x)
      local xt, y = x:totable(), sz { 2, 2, 4, 6 }
      for n = 1, 2 do for c = 0, 1 do for h = 0, 3 do for w = 0, 5 do
        local i, j = h % 2, w % 2
        local src = mode == "DCR" and (i * 2 + j) * 2 + c or c * 4 + i * 2 + j
        y[n][c + 1][h + 1][w + 1] = xt[n][src + 1][h // 2 + 1][w // 2 + 1]
      end end end end
      return srgeo.tensor(y, "float64")
    end)
  end
  add("SpaceToDepth", PB.node("SpaceToDepth", { "x" }, { "y" }, "s2d", { PB.int_attr("blocksize", 2) }), nil,
    { 2, 2, 4, 6 }, { "N", 8, 2, 3 }, 13, function(x)
    local xt, y = x:totable(), sz { 2, 8, 2, 3 }
    for n = 1, 2 do for c = 0, 1 do for h = 0, 3 do for w = 0, 5 do
      y[n][((h % 2) * 2 + w % 2) * 2 + c + 1][h // 2 + 1][w // 2 + 1] = xt[n][c + 1][h + 1][w + 1]
    end end end end
    return srgeo.tensor(y, "float64")
  end)
  add("Resize cubic TF", PB.node("Resize", { "x", "", "sc" }, { "y" }, "rs", { PB.string_attr("mode", "cubic"),
    PB.float_attr("cubic_coeff_a", -0.5), PB.int_attr("exclude_outside", 1) }),
    { PB.tensor("sc", { 4 }, { 1, 1, 2, 2 }) }, { 2, 2, 3, 4 }, { "N", 2, 6, 8 }, 13,
    function(x) return cubic_ref(x:totable(), 6, 8, 2, 2, -0.5, true) end)
  add("Resize-18 cubic asymmetric down", PB.node("Resize", { "x", "", "", "sz" }, { "y" }, "rs",
    { PB.string_attr("mode", "cubic"), PB.string_attr("coordinate_transformation_mode", "asymmetric"),
      PB.ints_attr("axes", { 2, 3 }) }),
    { PB.tensor("sz", { 2 }, { 3, 3 }, true) }, { 2, 2, 5, 7 }, { "N", 2, 3, 3 }, 18,
    function(x) return cubic_ref(x:totable(), 3, 3, 3 / 5, 3 / 7, -0.75, false, "asymmetric") end)
  add("Einsum implicit", PB.node("Einsum", { "x", "x" }, { "y" }, "es", { PB.string_attr("equation", "...ij,...kj") }),
    nil, { 2, 3, 4 }, { "N", 3, 3 }, 13, function(x)
    local xt, y = x:totable(), sz { 2, 3, 3 }
    for n = 1, 2 do for i = 1, 3 do for k = 1, 3 do
      for j = 1, 4 do y[n][i][k] = y[n][i][k] + xt[n][i][j] * xt[n][k][j] end
    end end end
    return srgeo.tensor(y, "float64")
  end)
  -- Keras' MultiHeadAttention as tf2onnx writes it: a projection by a constant kernel, then scores
  local KW = {}
  for i = 1, 40 do KW[i] = math.sin(i) / 2 end
  add("Einsum Keras attention", { PB.node("Einsum", { "x", "k" }, { "q" }, "proj",
    { PB.string_attr("equation", "abc,cde->abde") }), PB.node("Einsum", { "q", "q" }, { "y" }, "scores",
    { PB.string_attr("equation", "aecd,abcd->acbe") }) }, { PB.tensor("k", { 4, 2, 5 }, KW) }, { 2, 3, 4 },
    { "N", 2, 3, 3 }, 13, function(x)
    local xt, q, y = x:totable(), sz { 2, 3, 2, 5 }, sz { 2, 2, 3, 3 }
    local kf = srgeo.tensor(KW):double():totable() -- the file holds them as float32
    for a = 1, 2 do for b = 1, 3 do for d = 1, 2 do for e = 1, 5 do
      for c = 1, 4 do q[a][b][d][e] = q[a][b][d][e] + xt[a][b][c] * kf[((c - 1) * 2 + d - 1) * 5 + e] end
    end end end end
    for a = 1, 2 do for c = 1, 2 do for b = 1, 3 do for e = 1, 3 do
      for d = 1, 5 do y[a][c][b][e] = y[a][c][b][e] + q[a][e][c][d] * q[a][b][c][d] end
    end end end end
    return srgeo.tensor(y, "float64")
  end)
  local function map(f)
    return function(x)
      local t = x:reshape { -1 }:totable()
      for i, a in ipairs(t) do t[i] = f(a) end
      return srgeo.tensor(t, "float64"):reshape(x:shape())
    end
  end
  add("Selu", PB.node("Selu", { "x" }, { "y" }, "selu", { PB.float_attr("alpha", 1.5), PB.float_attr("gamma", 2) }),
    nil, { 2, 3, 4 }, { "N", 3, 4 }, 13, map(function(a) return a > 0 and 2 * a or 2 * 1.5 * (math.exp(a) - 1) end))
  add("Celu", PB.node("Celu", { "x" }, { "y" }, "celu", { PB.float_attr("alpha", 2) }), nil, { 2, 3, 4 }, { "N", 3, 4 },
    13, map(function(a) return math.max(0, a) + math.min(0, 2 * (math.exp(a / 2) - 1)) end))
  add("Softsign", PB.node("Softsign", { "x" }, { "y" }, "ss"), nil, { 2, 3, 4 }, { "N", 3, 4 }, 13,
    map(function(a) return a / (1 + math.abs(a)) end))
  -- torch's F.normalize(x, dim=1): ReduceL2, Clip, Expand (of a value: a product by ones), Div
  add("F.normalize (Expand of a value)", { PB.node("ReduceL2", { "x" }, { "n" }, "l2", { PB.ints_attr("axes", { 1 }),
    PB.int_attr("keepdims", 1) }), PB.node("Clip", { "n", "lo" }, { "c" }, "clip"),
    PB.node("Shape", { "x" }, { "s" }, "shape"), PB.node("Expand", { "c", "s" }, { "e" }, "expand"),
    PB.node("Div", { "x", "e" }, { "y" }, "div") }, { PB.tensor("lo", {}, { 1e-12 }) }, { 2, 3, 2, 2 },
    { "N", 3, 2, 2 }, 13, function(x)
    local xt, y = x:totable(), sz { 2, 3, 2, 2 }
    for n = 1, 2 do for h = 1, 2 do for w = 1, 2 do
      local ss = 0
      for c = 1, 3 do ss = ss + xt[n][c][h][w] ^ 2 end
      for c = 1, 3 do y[n][c][h][w] = xt[n][c][h][w] / math.sqrt(ss) end
    end end end
    return srgeo.tensor(y, "float64")
  end)
  -- Split-18 into 3 of 7: 3, 3 and the last 1
  add("Split-18 num_outputs", { PB.node("Split", { "x" }, { "a", "b", "c" }, "sp", { PB.int_attr("axis", 1),
    PB.int_attr("num_outputs", 3) }), PB.node("Concat", { "c", "a" }, { "y" }, "cat", { PB.int_attr("axis", 1) }) },
    nil, { 2, 7, 2 }, { "N", 4, 2 }, 18, function(x) return srgeo.cat({ x:narrow(2, 7, 1), x:narrow(2, 1, 3) }, 2) end)
  return cases
end

local function handmade_file(write, cs)
  local xd = { "N" }
  for i = 2, #cs.xs do xd[i] = cs.xs[i] end
  return write { nodes = cs.node[1] and cs.node or { cs.node }, inits = cs.inits, inputs = { PB.value("x", xd) },
    outputs = { PB.value("y", cs.ys) }, opset = cs.opset }
end

T.test("onnx: Mish-18, DepthToSpace (DCR, CRD), SpaceToDepth, TensorFlow's cubic Resize, an implicit Einsum, Selu, "
  .. "Celu, Softsign, F.normalize's Expand, Split-18's num_outputs in small graphs match references; JVPs pass central differences and the adjoint identity; refusals", function()
  local dir, write = model_files()
  local lines = {}
  for i, cs in ipairs(handmade_cases()) do
    local p = handmade_file(write, cs)
    local m = srgeo.onnx.load(p, { raw = true, dtype = "float64" })
    local x = srgeo.randn(cs.xs, 40 + i):double()
    local e = rel(m:forward(x, { tap = "" }), cs.ref(x))
    local efd, eadj = derivs(m, x, 50 + i)
    lines[#lines + 1] = string.format("     %-30s %.1e | fd %.1e adjoint %.1e", cs.name, e, efd, eadj)
    if not (e <= 1e-12 and efd <= 1e-6 and eadj <= 1e-12) then error(lines[#lines]) end
  end
  print(table.concat(lines, "\n"))
  local function refuse(eq, ins, msg)
    local p = write { nodes = { PB.node("Einsum", ins, { "y" }, "es", { PB.string_attr("equation", eq) }) },
      inputs = { PB.value("x", { "N", 3, 3 }) }, outputs = { PB.value("y", { "N", 3 }) } }
    T.raises(function() srgeo.onnx.load(p, { raw = true }) end, msg)
  end
  refuse("bii->bi", { "x" }, "node 'es' (Einsum): unsupported: Einsum 'bii->bi' with a label repeated in one operand")
  refuse("bij,bjk->bk", { "x", "x" }, "unsupported: Einsum 'bij,bjk->bk' summing a label of one operand only")
  refuse("bij,bjk,bkl->bil", { "x", "x", "x" }, "unsupported: Einsum 'bij,bjk,bkl->bil' of 3 operands (one or two)")
  refuse("bij->bq", { "x" }, "output label 'q' is repeated or in no operand")
  local p = write { nodes = { PB.node("DepthToSpace", { "x" }, { "y" }, "d2s", { PB.int_attr("blocksize", 2) }) },
    inputs = { PB.value("x", { "N", 6, 2, 2 }) }, outputs = { PB.value("y", { "N", 1, 4, 4 }) } }
  T.raises(function() srgeo.onnx.load(p, { raw = true }) end, "node 'd2s' (DepthToSpace): 'x' (6,2,2) per sample "
    .. "does not split into blocks of 2")
  os.execute("rm -rf " .. dir)
end)

-- onnxruntime-node as a second reference, where it is installed
-- (SRGEO_ONNXRUNTIME: a folder whose node_modules hold onnxruntime-node;
-- default build/ort, made by npm install --ignore-scripts onnxruntime-node
-- there): the one-node graphs above and float32 copies of the tf2onnx- and
-- paddle2onnx-style exports, srgeo's float32 import within 1e-5.
T.test("onnx: onnxruntime-node agrees with srgeo (float32, 1e-5) on the one-node graphs and the tf2onnx- and "
  .. "paddle2onnx-style exports", function()
  local ort = (os.getenv("SRGEO_ONNXRUNTIME") or "build/ort") .. "/node_modules/onnxruntime-node"
  if not exists(ort .. "/package.json")
    or os.execute("node -e 'require(require(\"path\").resolve(\"" .. ort .. "\"))' >/dev/null 2>&1") ~= true then
    T.skip("onnxruntime-node is not installed (npm install --ignore-scripts onnxruntime-node in build/ort)")
  end
  local dir, write = model_files()
  local function ort_run(model, x)
    local xin, yout = dir .. "/x.npy", dir .. "/y.npy"
    srgeo.npy.save(xin, x:float())
    local ok = os.execute(string.format("node tests/lua/ort_run.js %s %s %s %s 2>%s/err", ort, model, xin, yout, dir))
    T.truthy(ok, "onnxruntime: " .. (T.read(dir .. "/err") or ""))
    return srgeo.npy.load(yout):double()
  end
  local lines = {}
  local function check(name, model, x, opts, xs)
    local m = srgeo.onnx.load(model, opts or { raw = true })
    local e = rel(m:forward((xs or x):float(), { tap = "" }):double(), ort_run(model, x))
    lines[#lines + 1] = string.format("     %-30s srgeo float32 vs onnxruntime %.1e", name, e)
    if not (e <= 1e-5) then error(lines[#lines]) end
  end
  for i, cs in ipairs(handmade_cases()) do
    check(cs.name, handmade_file(write, cs), srgeo.randn(cs.xs, 60 + i))
  end
  for _, name in ipairs { "tf_style", "paddle_style" } do
    local x = srgeo.npy.load(EXP .. name .. "_x.npy")
    -- srgeo's images are NCHW: tf_style's NHWC input gets them permuted
    local xs = name == "tf_style" and x:transpose(2, 4):transpose(3, 4) or x
    check(name, EXP .. name .. "_f32.onnx", x, { input_size = { 3, 32, 32 } }, xs)
  end
  print(table.concat(lines, "\n"))
  os.execute("rm -rf " .. dir)
end)

-- output= and a tap naming a value import only what they depend on; the
-- taps "output" and "embedding"; the default tap; normalisation found in
-- the graph or asked for.
T.test("onnx: output= prunes, taps output and embedding, the default tap, normalisation in the graph", function()
  local dir, write = model_files()
  local n
  local function file(nodes, inits, outs, x)
    local p
    p, n = write { nodes = nodes, inits = inits, inputs = { x or PB.value("x", { "N", 8 }) }, outputs = outs }
    return p
  end
  local W = {}
  for i = 1, 80 do W[i] = math.sin(i) end
  local x = srgeo.randn({ 3, 8 }, 1):double()
  -- outputs z (an op srgeo does not take) and y: y alone imports
  local p = file({ PB.node("Relu", { "x" }, { "y" }, "r"), PB.node("FooBar", { "x" }, { "z" }, "foo") }, nil,
    { PB.value("z", { "N", 8 }), PB.value("y", { "N", 8 }) })
  T.raises(function() srgeo.onnx.load(p, { raw = true }) end, "node 'foo' (FooBar): unsupported op FooBar")
  local m, info = srgeo.onnx.load(p, { raw = true, output = "y", dtype = "float64" })
  T.eq(info.pruned, 1)
  T.eq((m:forward(x) - x:clamp(0, math.huge)):abs():max(), 0)
  m = srgeo.models.load(p, { normalize = false, tap = "y" }) -- a tap naming a value prunes too
  T.eq(m:default_tap(), "y")
  -- a classifier (10 class scores): the default tap is the embedding, "output" the scores
  local function head(classes, softmax)
    local nodes = { PB.node("Relu", { "x" }, { "h" }, "r"),
      PB.node("Gemm", { "h", "w" }, { softmax and "s" or "y" }, "fc", { PB.int_attr("transB", 1) }) }
    if softmax then nodes[3] = PB.node("Softmax", { "s" }, { "y" }, "sm", { PB.int_attr("axis", 1) }) end
    local w = {}
    for i = 1, classes * 8 do w[i] = W[(i - 1) % 80 + 1] end
    return file(nodes, { PB.tensor("w", { classes, 8 }, w) }, { PB.value("y", { "N", classes }) })
  end
  m, info = srgeo.models.load(head(10), { normalize = false, dtype = "float64" })
  T.eq(info.tap, "embedding")
  T.eq(srgeo.models.twin(m):default_tap(), "embedding", "the twin keeps the default tap")
  T.eq(tostring(m:forward(x):size()), "(3,8)")
  T.eq(tostring(m:forward(x, { tap = "output" }):size()), "(3,10)")
  T.eq(tostring(m:forward(x, { tap = "embedding" }):size()), "(3,8)")
  T.truthy(tostring(m):find('returns the default tap "embedding"', 1, true))
  T.truthy(tostring(m):find("onnx m" .. n .. ".onnx", 1, true), "print(m) names the file")
  -- a descriptor of 7 values: the output is the default; with a softmax after it, class scores
  m, info = srgeo.models.load(head(7), { normalize = false, dtype = "float64" })
  T.eq(info.tap, "output")
  T.eq(tostring(m:forward(x):size()), "(3,7)")
  T.truthy(tostring(m):find("returns the whole model's output", 1, true))
  local id = srgeo.identity.of(m, x)
  T.eq(id.tap, "output")
  T.eq(id.model, "m" .. n .. ".onnx")
  T.eq(select(2, srgeo.models.load(head(7, true), { normalize = false })).tap, "embedding")
  -- normalisation: x*255, (x - 0.5)/0.25 are the graph's own; nothing is no normalisation
  local X4 = PB.value("x", { "N", 3, 4, 4 })
  local function pre(nodes, inits)
    return file(nodes, inits, { PB.value("y", { "N", 3, 4, 4 }) }, X4)
  end
  local _, i1 = srgeo.models.load(pre({ PB.node("Mul", { "x", "k" }, { "a" }, "m"), PB.node("Relu", { "a" }, { "y" }, "r") },
    { PB.tensor("k", {}, { 255 }) }))
  T.eq(i1.preprocess, "Mul 255")
  local _, i2 = srgeo.models.load(pre({ PB.node("Sub", { "x", "h" }, { "a" }, "s"), PB.node("Div", { "a", "q" }, { "y" }, "d") },
    { PB.tensor("h", {}, { 0.5 }), PB.tensor("q", {}, { 0.25 }) }))
  T.eq(i2.preprocess, "Sub 0.5, Div 0.25")
  T.raises(function() srgeo.models.load(pre({ PB.node("Relu", { "x" }, { "y" }, "r") })) end,
    "--mean 0.485,0.456,0.406 --std 0.229,0.224,0.225), or normalize = false (--no-normalize)")
  os.execute("rm -rf " .. dir)
end)

-- The command line: an .onnx file with --input-size and --mean / --std (or
-- --no-normalize) runs end to end, its curve and figure named by the
-- file, and with --twin beside its random-init twin; a bad flag value
-- fails at once, naming the flag, without a traceback.
T.test("onnx: srgeo bump --model x.onnx --input-size --mean --std [--twin] runs, labelled by the file; bad flags fail "
  .. "clearly",
  function()
  local exe = T.shell and T.shell() or "build/srgeo"
  local out = os.tmpname()
  os.remove(out)
  local model = EXP .. "fpn_gn_op17.onnx"
  local function run(args)
    local p = io.popen(string.format("%s bump --model %s --out %s --eval noise:2 --directions 8 --jvp-directions 4 "
      .. "--nscales 5 --range paper --bootstrap 50 %s 2>&1", exe, model, out, args))
    local text = p:read("a")
    local ok = p:close()
    return ok, text
  end
  local ok, text = run("--input-size 3,32,32 --mean 0.485,0.456,0.406 --std 0.229,0.224,0.225")
  T.eq(ok, true, text)
  T.truthy(T.read(out .. "/summary.txt"):find("taps: fpn_gn_op17.onnx at embedding", 1, true), "the summary names the file and tap")
  T.truthy(T.read(out .. "/bump.gp"):find("title 'fpn_gn_op17.onnx'", 1, true), "the legend names the file")
  -- --twin: its random-init twin beside it (twin_spec.lua), named by the file too; 64x64 (dynamic H, W)
  ok, text = run("--input-size 3,64,64 --mean 0.485,0.456,0.406 --std 0.229,0.224,0.225 --twin")
  T.eq(ok, true, text)
  local gp = T.read(out .. "/bump.gp")
  T.truthy(gp:find("title 'fpn_gn_op17.onnx'", 1, true) and gp:find("title 'fpn_gn_op17.onnx@init'", 1, true), gp)
  T.truthy(T.read(out .. "/summary.txt"):find("fpn_gn_op17.onnx@init at embedding", 1, true), "the summary names the twin")
  local cases = {
    { "--input-size 3,32,32 --mean 0.5,0.5 --std 0.2,0.2,0.2", "--mean has 2 values, --std 3" },
    { "--input-size 3,32,32 --mean 0.5,0.5,0.5", "give both --mean and --std" },
    { "--input-size 3,32,32", "--mean 0.485,0.456,0.406 --std 0.229,0.224,0.225), or --no-normalize" },
    { "--no-normalize", "give --input-size" },
    { "--input-size 3,32,32 --no-normalize --output nowhere", "no value named 'nowhere' to return" },
  }
  for _, c in ipairs(cases) do
    local ok2, msg = run(c[1])
    T.eq(ok2 == true, false, c[1])
    T.truthy(msg:find(c[2], 1, true), c[1] .. ": " .. msg)
    T.eq(msg:find("traceback", 1, true), nil, c[1] .. ": " .. msg)
  end
  os.execute("rm -rf " .. out)
end)

-- A face-ResNet-like graph (dlib's shortcut: a 2x2 average pool and
-- zero-padded channels, as torch.onnx writes it: a Pad of zeros before the
-- pool, a Pad of the channels after) against the same network built from
-- srgeo.nn's sequential / residual with the import's weights: the zero Pad
-- is no node, forward and JVP agree bit for bit (the same fused kernels),
-- and the profile engine shares the import's leading convolution as it does
-- the native one's: the same energies as the native build's bit for bit,
-- and as without sharing up to rounding (A + η·L(u) is not rounded as the
-- convolution of x + ηu is).
T.test("onnx: a face-ResNet-like import runs the native build's kernels; its affine prefix is shared in profiles",
  function()
  local dir, write = model_files()
  local function vals(n, f)
    local t = {}
    for i = 1, n do t[i] = 0.3 * math.sin(f * i) end
    return t
  end
  local conv = function(name, x, w, b, stride)
    return PB.node("Conv", { x, w, b }, { name }, name, { PB.ints_attr("kernel_shape", { 3, 3 }),
      PB.ints_attr("pads", { 1, 1, 1, 1 }), PB.ints_attr("strides", { stride, stride }) })
  end
  local p = write {
    nodes = {
      conv("c0", "x", "w0", "b0", 1), PB.node("Relu", { "c0" }, { "r0" }, "relu0"),
      conv("c1", "r0", "w1", "b1", 2), PB.node("Relu", { "c1" }, { "r1" }, "relu1"),
      conv("c2", "r1", "w2", "b2", 1),
      PB.node("Pad", { "r0", "zero" }, { "p0" }, "pad0"),
      PB.node("AveragePool", { "p0" }, { "ap" }, "pool", { PB.ints_attr("kernel_shape", { 2, 2 }),
        PB.ints_attr("strides", { 2, 2 }) }),
      PB.node("Pad", { "ap", "chan" }, { "sc" }, "pad1"),
      PB.node("Add", { "c2", "sc" }, { "s" }, "add"), PB.node("Relu", { "s" }, { "y" }, "relu2"),
      PB.node("GlobalAveragePool", { "y" }, { "g" }, "gap"), PB.node("Flatten", { "g" }, { "f" }, "flatten"),
      PB.node("Gemm", { "f", "wfc", "bfc" }, { "out" }, "fc", { PB.int_attr("transB", 1) }),
    },
    inits = { PB.tensor("w0", { 8, 3, 3, 3 }, vals(216, 0.7)), PB.tensor("b0", { 8 }, vals(8, 1.3)),
              PB.tensor("w1", { 16, 8, 3, 3 }, vals(1152, 0.11)), PB.tensor("b1", { 16 }, vals(16, 2.1)),
              PB.tensor("w2", { 16, 16, 3, 3 }, vals(2304, 0.05)), PB.tensor("b2", { 16 }, vals(16, 0.9)),
              PB.tensor("wfc", { 4, 16 }, vals(64, 0.37)), PB.tensor("bfc", { 4 }, vals(4, 1.7)),
              PB.tensor("zero", { 8 }, { 0, 0, 0, 0, 0, 0, 0, 0 }, true),
              PB.tensor("chan", { 8 }, { 0, 0, 0, 0, 0, 8, 0, 0 }, true) },
    inputs = { PB.value("x", { "N", 3, 8, 8 }) }, outputs = { PB.value("out", { "N", 4 }) },
  }
  local nn = srgeo.nn
  local function native()
    local function c(cin, cout, s) return nn.conv2d { in_channels = cin, out_channels = cout, kernel_size = 3, stride = s, padding = 1 } end
    local body = nn.sequential { { "c1", c(8, 16, 2) }, { "relu1", nn.relu {} }, { "c2", c(16, 16, 1) } }
    local sc = nn.sequential { nn.avgpool2d { kernel_size = 2 }, nn.pad { padding = { 0, 0, 0, 0, 0, 8 } } }
    return nn.sequential { { "c0", c(3, 8, 1) }, { "relu0", nn.relu {} },
      { "block", nn.sequential { { "", nn.residual { { "", body }, { "shortcut", sc } } }, { "relu", nn.relu {} } } },
      { "gap", nn.adaptive_avgpool2d { output_size = 1 } }, { "flatten", nn.flatten {} },
      { "fc", nn.linear { in_features = 16, out_features = 4 } } }
  end
  local nat64
  for _, dtype in ipairs { "float64", "float32" } do
    local m, info = srgeo.onnx.load(p, { raw = true, dtype = dtype })
    T.eq(info.nodes, 12, "the Pad of zeros is no node")
    T.eq(tostring(m):find("pad0", 1, true), nil, "the Pad of zeros is no node")
    local nat = native()
    if dtype == "float64" then nat:double() end
    local sd = m:state_dict()
    local names = { c0 = "c0", c1 = "block.c1", c2 = "block.c2", fc = "fc" }
    for k, t in pairs(sd) do
      local node, what = k:match("^(.-)%.(%a+)$")
      T.truthy(names[node], "import parameter " .. k)
      nat:state_dict()[names[node] .. "." .. what]:copy(t)
    end
    nat:eval()
    nat64 = nat64 or nat
    local x = srgeo.rand({ 3, 3, 8, 8 }, 4)
    local v = srgeo.randn({ 5, 3, 8, 8 }, 6)
    if dtype == "float64" then x, v = x:double(), v:double() end
    T.eq((m:forward(x) - nat:forward(x, { tap = "" })):abs():max(), 0, dtype .. " forward, bit for bit")
    local y1, j1 = m:jvp(x:narrow(1, 1, 1), v)
    local y2, j2 = nat:jvp(x:narrow(1, 1, 1), v, { tap = "" })
    T.eq((y1 - y2):abs():max(), 0, dtype .. " jvp primal")
    T.eq((j1 - j2):abs():max(), 0, dtype .. " jvp tangents, bit for bit")
  end
  -- the profile engine: the leading convolution once per direction
  local m = srgeo.onnx.load(p, { raw = true, dtype = "float64" })
  local X = { srgeo.rand({ 1, 3, 8, 8 }, 5):double() }
  local o = { preset = "quick", directions = 3, per_direction = true, progress = false, precision = "float64" }
  local function energies(share, model)
    o.share_prefix = share
    local pr = srgeo.profile(model or m, X, o)
    return pr.per_direction[1], pr.shared_layers, pr.forwards
  end
  local ref, none, f_ref = energies(false)
  local got, shared, f = energies(true)
  local nat, nshared = energies(true, nat64)
  T.eq(none, 0)
  T.eq(shared, 1, "the import's conv c0 is shared")
  T.eq(nshared, 1, "as the native one's")
  T.eq(f, f_ref, "forwards count the rows")
  for s = 1, #got do
    for i, e in ipairs(nat[s]) do
      T.eq(got[s][i], e, ("rung %d direction %d: import and native sharing, bit for bit"):format(s, i))
    end
  end
  for s = 1, #got do
    for i, e in ipairs(ref[s]) do
      T.truthy(math.abs(got[s][i] - e) <= 1e-9 * e, ("rung %d direction %d: %.17g vs %.17g"):format(s, i, got[s][i], e))
    end
  end
  os.execute("rm -rf " .. dir)
end)
