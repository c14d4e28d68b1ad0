-- hostile_files.lua: writes a corpus of hostile files for every file format
-- srgeo reads, and returns the list of cases (what a loader must do with
-- each: read it, or refuse it with an error naming the file, within bounded
-- time and memory).  Used by tests/lua/hardening_spec.lua; also runnable:
--   build/srgeo tests/lua/hostile_files.lua OUT_DIR     -- writes the corpus, lists it
-- Each case: { name, loader = "npy"|"safetensors"|"idx_images"|"idx_labels"|
-- "cifar"|"image"|"onnx", path, ok = true (must load) | nil (must fail), needle =
-- text the error must hold }.
local M = {}

local function write(path, s)
  local f = assert(io.open(path, "wb"))
  f:write(s)
  f:close()
end

-- .npy with the given header dict text and payload.
local function npy(dict, payload, version)
  version = version or 1
  local h = dict
  local pre = version == 1 and 10 or 12
  local pad = (64 - (pre + #h + 1) % 64) % 64
  h = h .. string.rep(" ", pad) .. "\n"
  local len = version == 1 and string.pack("<I2", #h) or string.pack("<I4", #h)
  return "\147NUMPY" .. string.char(version, 0) .. len .. h .. (payload or "")
end

local function descr(d, shape) return string.format("{'descr': '%s', 'fortran_order': False, 'shape': %s, }", d, shape) end

-- safetensors from a header string and data bytes.
local function st(header, data) return string.pack("<I8", #header) .. header .. (data or "") end

local function be32(...)
  local t = {}
  for i, v in ipairs { ... } do t[i] = string.pack(">I4", v) end
  return table.concat(t)
end

local function png_chunk(typ, data)
  -- CRC-32 (the table-less bitwise form: these files are tiny)
  local crc = 0xffffffff
  local s = typ .. data
  for i = 1, #s do
    crc = crc ~ s:byte(i)
    for _ = 1, 8 do crc = (crc >> 1) ~ (0xedb88320 & -(crc & 1)) end
  end
  return string.pack(">I4", #data) .. s .. string.pack(">I4", crc ~ 0xffffffff)
end

-- A PNG whose header declares w x h but whose data is one short row.
local function png_bomb(w, h)
  local ihdr = string.pack(">I4I4BBBBB", w, h, 8, 0, 0, 0, 0)
  -- a stored (uncompressed) zlib block holding 9 zero bytes
  local raw = string.rep("\0", 9)
  local adler = string.pack(">I4", 9 * 65536 + 1)
  local idat = "\120\1" .. "\1" .. string.pack("<I2I2", #raw, (~#raw) & 0xffff) .. raw .. adler
  return "\137PNG\r\n\26\n" .. png_chunk("IHDR", ihdr) .. png_chunk("IDAT", idat) .. png_chunk("IEND", "")
end

function M.write(dir)
  os.execute("mkdir -p '" .. dir .. "'")
  local cases = {}
  local function add(name, loader, bytes, needle, ok)
    local path = dir .. "/" .. name
    write(path, type(bytes) == "function" and bytes() or bytes)
    cases[#cases + 1] = { name = name, loader = loader, path = path, needle = needle, ok = ok }
  end

  -- npy ----------------------------------------------------------------------
  local f32x2 = string.pack("<ff", 1, 2)
  add("ok.npy", "npy", npy(descr("<f4", "(2,)"), f32x2), nil, true)
  add("ok_v3.npy", "npy", npy(descr("<f8", "(1,)"), string.pack("<d", 1), 3), nil, true)
  add("scalar.npy", "npy", npy(descr("<f4", "()"), string.pack("<f", 7)), nil, true)
  add("billion.npy", "npy", npy(descr("<f4", "(1000000000,)"), ""), "truncated data")
  add("junk.npy", "npy", npy(descr("<f4", "(2,)"), f32x2 .. "junk"), "trailing bytes")
  add("bigendian.npy", "npy", npy(descr(">f4", "(2,)"), f32x2), "dtype '>f4' is not supported")
  add("int.npy", "npy", npy(descr("<i4", "(2,)"), f32x2), "dtype '<i4'")
  add("fortran.npy", "npy", npy("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", f32x2), "Fortran")
  add("wrap.npy", "npy", npy(descr("<f4", "(4611686018427387904, 4)"), ""), "too large")
  add("wrap0.npy", "npy", npy(descr("<f4", "(0, 4294967296, 4294967296)"), ""), "too large")
  add("negdim.npy", "npy", npy(descr("<f4", "(-2,)"), ""), "malformed shape")
  add("overflowdim.npy", "npy", npy(descr("<f4", "(99999999999999999999999,)"), ""), "malformed shape")
  add("ninedims.npy", "npy", npy(descr("<f4", "(1,1,1,1,1,1,1,1,1)"), ""), "more than 8 dimensions")
  add("noshape.npy", "npy", npy("{'descr': '<f4', 'fortran_order': False}", ""), "lacks")
  add("shortheader.npy", "npy", "\147NUMPY\1\0\255\255{'descr'", "truncated header")
  add("hugeheader.npy", "npy", "\147NUMPY\2\0" .. string.pack("<I4", 0x7fffffff), "implausible")
  add("version9.npy", "npy", "\147NUMPY\9\0\0\0", "unknown format version")
  add("empty.npy", "npy", "", "bad magic")
  add("nul.npy", "npy", npy("{'descr': '<f4'\0, 'fortran_order': False, 'shape': (2,), }", f32x2), "lacks")

  -- safetensors -----------------------------------------------------------------
  local w8 = string.pack("<ff", 1, 2)
  add("ok.safetensors", "safetensors", st('{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}', w8), nil, true)
  add("dupmeta.safetensors", "safetensors", st('{"__metadata__":{},"__metadata__":{"a":"b"}}'), "__metadata__ appears twice")
  add("metanotobj.safetensors", "safetensors", st('{"__metadata__":[1]}'), "__metadata__ must be an object")
  add("dupname.safetensors", "safetensors",
    st('{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', w8),
    "'w' appears twice")
  add("overlap.safetensors", "safetensors",
    st('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', w8),
    "overlap")
  add("outside.safetensors", "safetensors", st('{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}', "\0"),
    "outside the data area")
  add("wrapshape.safetensors", "safetensors",
    st('{"w":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,8]}}', w8), "too large")
  add("bigoffset.safetensors", "safetensors",
    st('{"w":{"dtype":"F32","shape":[2],"data_offsets":[18446744073709551608,18446744073709551616]}}', w8), "data_offsets")
  add("hugeheader.safetensors", "safetensors", string.pack("<I8", 1 << 62) .. "{}", "exceeds the 100 MB limit")
  add("truncated.safetensors", "safetensors", string.pack("<I8", 1000) .. "{}", "truncated")
  add("notjson.safetensors", "safetensors", st("{\"w\": nope"), "not valid JSON")
  add("nested.safetensors", "safetensors", st(string.rep("[", 100000) .. string.rep("]", 100000)), "not valid JSON")
  add("nulname.safetensors", "safetensors",
    st('{"a\\u0000x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a\\u0000y":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', w8),
    "appears twice")
  -- the quadratic case: 100,000 entries (6 MB) open in well under a second
  local parts = {}
  for i = 1, 100000 do
    parts[i] = string.format('"t%d":{"dtype":"U8","shape":[1],"data_offsets":[%d,%d]}', i, i - 1, i)
  end
  add("many.safetensors", "safetensors", st("{" .. table.concat(parts, ",") .. "}", string.rep("\1", 100000)), nil, true)
  parts[100000] = '"t1":{"dtype":"U8","shape":[1],"data_offsets":[99999,100000]}'
  add("many_dup.safetensors", "safetensors", st("{" .. table.concat(parts, ",") .. "}", string.rep("\1", 100000)),
    "'t1' appears twice")
  parts = nil

  -- IDX ------------------------------------------------------------------------
  local px = string.rep("\7", 2 * 3 * 3)
  local idx = be32(0x803, 2, 3, 3) .. px
  add("ok.idx", "idx_images", idx, nil, true)
  add("junk.idx", "idx_images", idx .. "junk", "trailing bytes")
  add("short.idx", "idx_images", idx:sub(1, -4), "truncated")
  add("zerodims.idx", "idx_images", be32(0x803, 5, 0, 28), "implausible dims")
  add("hugecount.idx", "idx_images", be32(0x803, 0xffffffff, 16384, 16384), "implausible dims")
  add("labels_as_images.idx", "idx_images", be32(0x801, 2) .. "\1\2", "bad magic")
  add("ok_labels.idx", "idx_labels", be32(0x801, 2) .. "\1\2", nil, true)
  add("junk_labels.idx", "idx_labels", be32(0x801, 2) .. "\1\2\3", "trailing bytes")
  add("notidx.idx", "idx_images", "hello", "not an IDX file")

  -- CIFAR ------------------------------------------------------------------------
  add("ok.bin", "cifar", "\3" .. string.rep("\0", 3072), nil, true)
  add("label10.bin", "cifar", "\10" .. string.rep("\0", 3072), "label 10")
  add("short.bin", "cifar", string.rep("\0", 3072), "not a positive multiple of 3073")
  add("cifar100.bin", "cifar", string.rep("\0", 3074 * 2), "CIFAR-100")
  add("empty.bin", "cifar", "", "size 0 bytes")

  -- images ------------------------------------------------------------------------
  add("bomb.png", "image", png_bomb(100000, 100000), "pixels to decode: more than max_pixels")
  add("bomb_resize.png", "image", png_bomb(100000, 1), "resize=65536 makes", nil)
  cases[#cases].opts = { resize = 65536, size = false }
  add("bomb_crop.png", "image", png_bomb(8, 8), "400000000 pixels in the crop")
  cases[#cases].opts = { size = { 20000, 20000 }, resize = false }
  add("bigcrop.png", "image", png_bomb(8, 8), "out of range")
  cases[#cases].opts = { size = { 60000, 60000 } }
  add("tiny.png", "image", png_bomb(1, 1), nil, true)
  cases[#cases].opts = { size = false, resize = false }
  local ok_png = png_bomb(3, 1)
  add("truncated.png", "image", ok_png:sub(1, 40), "image")
  add("badcrc.png", "image", ok_png:sub(1, 30) .. "\0" .. ok_png:sub(32), "image")
  add("zero.png", "image", png_bomb(0, 5), "image")
  add("garbage.jpg", "image", "\255\216\255\224" .. string.rep("\0", 64), "image")
  add("empty.png", "image", "", "empty file")
  add("text.png", "image", "not an image at all", "not an image")
  -- (libvips 8.14 has no PPM buffer loader: ImageMagick reads the header, and
  -- refuses the missing data before anything is allocated)
  add("ppm_bomb.ppm", "image", "P6\n100000 100000\n255\n" .. string.rep("\0", 30), "image")
  add("svg_bomb.svg", "image",
    '<svg xmlns="http://www.w3.org/2000/svg" width="200000" height="200000"><rect width="10" height="10"/></svg>',
    "image")
  local laughs = { '<?xml version="1.0"?><!DOCTYPE svg [<!ENTITY a "aaaaaaaaaa">' }
  for i = 2, 10 do
    local prev = string.char(96 + i - 1)
    laughs[#laughs + 1] = string.format('<!ENTITY %s "%s">', string.char(96 + i), string.rep("&" .. prev .. ";", 10))
  end
  laughs[#laughs + 1] = ']><svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><text>&j;</text></svg>'
  add("laughs.svg", "image", table.concat(laughs), "image", "either")

  M.onnx(dir, add)
  return cases
end

-- Hostile text: strings a user, a file name or a model's node name can put
-- in a title, a label, a key entry, a tic, a run name or an output path.
-- Each tries to run `touch CANARY` (a relative name: gnuplot runs in the
-- figure's folder) through one way text can turn into a command: gnuplot's
-- backquotes, system(), @macros and `!`, breaking out of a single- or
-- double-quoted string, a newline or CR ending the command, a backslash
-- continuing it; and HTML's tags, attributes and URLs.  with_controls =
-- false leaves out those with control characters (an output path refuses
-- them).
function M.text(canary, with_controls)
  local c = canary or "PWNED"
  local t = {
    "m`touch " .. c .. "`.safetensors",
    'system("touch ' .. c .. '")',
    "x'.system('touch " .. c .. "').'y",
    'x".system("touch ' .. c .. '")."y',
    "@OUT @DATA `touch " .. c .. "`",
    "back\\slash\\",
    "a_b^c {d} & @e ~f",
    "%s %d %q %%",
    "<script>alert(1)</script>&amp;\"",
    "|touch " .. c,
    "<touch " .. c,
  }
  if with_controls ~= false then
    t[#t + 1] = "a\nsystem 'touch " .. c .. "'\n#"
    t[#t + 1] = "a\\\n!touch " .. c
    t[#t + 1] = "cr\r!touch " .. c .. "\rtab\tnul\0esc\27"
  end
  return t
end

-- Markdown that tries to put a script, an event handler, a script URL or a
-- remote resource into a notebook report (each once reached the report,
-- and Chromium ran it).  Each script sets the page's class to "pwned", so a
-- browser that ran one shows it.  A list of {name, markdown}.
function M.markdown()
  local js = "document.documentElement.className='pwned'"
  return {
    { "img_onerror", '<img src=x onerror="' .. js .. '">' },
    { "img_onerror_inline", 'text <img src=x onerror="' .. js .. '"> more' },
    { "svg_onbegin", '<svg><animate onbegin="' .. js .. '" attributeName=x dur=1s /></svg>' },
    { "svg_onload", '<svg onload="' .. js .. '"></svg>' },
    { "details_ontoggle", '<details open ontoggle="' .. js .. '"><summary>s</summary>x</details>' },
    { "body_onload", '<body onload="' .. js .. '">' },
    { "script", "<script>" .. js .. "</script>" },
    { "script_split", "<scr<script>ipt>" .. js .. "</script>" },
    { "iframe", '<iframe src="javascript:' .. js .. '"></iframe>' },
    { "iframe_srcdoc", '<iframe srcdoc="<script>' .. js .. '</script>"></iframe>' },
    { "object", '<object data="data:text/html,<script>' .. js .. '</script>"></object>' },
    { "embed", '<embed src="data:text/html,x">' },
    { "meta_refresh", '<meta http-equiv="refresh" content="0;url=javascript:' .. js .. '">' },
    { "base", '<base href="http://example.com/">' },
    { "link_css", '<link rel="stylesheet" href="http://example.com/x.css">' },
    { "style", "<style>body{background:url(http://example.com/x.png)}</style>" },
    { "form", '<form action="http://example.com/"><input name=a autofocus onfocus="' .. js .. '"></form>' },
    { "raw_a_js", '<a href="javascript:' .. js .. '">raw link</a>' },
    { "md_js", "[click](javascript:" .. js .. ")" },
    { "md_js_case", "[click](JaVaScRiPt:" .. js .. ")" },
    { "md_js_entity", "[click](jav&#x61;script:" .. js .. ")" },
    { "md_js_tab", "[click](&#9;javascript:" .. js .. ")" },
    { "md_js_angle", "[click](<javascript:" .. js .. ">)" },
    { "md_vbscript", "[click](vbscript:msgbox)" },
    { "md_data_html", "[click](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)" },
    { "md_file", "[click](file:///etc/passwd)" },
    { "md_ref_js", "[click][r]\n\n[r]: javascript:" .. js },
    { "autolink_js", "<javascript:" .. js .. ">" },
    { "img_js", "![x](javascript:" .. js .. ")" },
    { "img_svg_data", "![x](data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+)" },
    { "img_remote", "![remote](http://example.com/x.png)" },
    { "img_remote_https", "![remote](https://example.com/x.png)" },
    { "img_protocol_relative", "![remote](//example.com/x.png)" },
    { "img_raw_remote", '<img src="http://example.com/y.png">' },
    { "alt_quote", '![x" onerror="' .. js .. '](a.png)' },
    { "title_quote", '[a](b "x\" onmouseover=\"' .. js .. '")' },
    { "heading_html", '# <img src=x onerror="' .. js .. '"> heading' },
    { "table_cell", '| a |\n|---|\n| <img src=x onerror="' .. js .. '"> |' },
    { "footnote", 'note[^1]\n\n[^1]: <img src=x onerror="' .. js .. '">' },
    { "comment_breakout", '<!-- x --><img src=x onerror="' .. js .. '">' },
    { "cdata", '<![CDATA[<img src=x onerror="' .. js .. '">]]>' },
    { "processing", '<?php echo 1; ?><img src=x onerror="' .. js .. '">' },
  }
end

-- A hostile results tree for `srgeo report` (srgeo.index) at dir, beside a
-- secret file outside it (dir .. ".secret", holding SECRET-CANARY): links
-- to ".", "..", "/" and a loop; a run whose summary.txt, figure and unit
-- files are links to the secret or name it through ".."; FIFOs as
-- summary.txt, results.json and a notebook report; a tree deeper than the
-- walk goes; and results.json files of every wrong shape.  Returns the
-- runs that must show ({rel =}) and those that must be skipped ({rel =,
-- needle = text of the reason}).
function M.report_tree(dir)
  os.execute("rm -rf '" .. dir .. "' && mkdir -p '" .. dir .. "'")
  local secret = dir .. ".secret"
  write(secret, "SECRET-CANARY\n")
  local function sh(cmd) assert(os.execute(cmd), cmd) end
  local function run(rel, body)
    sh("mkdir -p '" .. dir .. "/" .. rel .. "'")
    write(dir .. "/" .. rel .. "/results.json", body)
  end
  local ok_body = '{"format": "srgeo.experiment/1", "name": "fine", "units": [], "figures": []}'
  local good, bad = {}, {}
  run("good", ok_body)
  write(dir .. "/good/summary.txt", "a fine summary\n")
  good[#good + 1] = { rel = "good" }
  -- links to folders: never followed
  sh("cd '" .. dir .. "' && ln -s . loop && ln -s .. up && ln -s / fsroot && ln -s good alias && ln -s a b && ln -s b a")
  sh("cd '" .. dir .. "/good' && ln -s .. back && ln -s ../good again")
  -- files out of the tree
  run("leak", '{"format": "srgeo.experiment/1", "name": "leak", "units": [{"label": "u", "json": "../../'
    .. secret:match("[^/]+$") .. '", "csv": "/etc/passwd"}], "figures": [{"name": "f", "files": ["../../'
    .. secret:match("[^/]+$") .. '.png", "shadow.png"]}]}')
  local abs_secret = secret:sub(1, 1) == "/" and secret or os.getenv("PWD") .. "/" .. secret
  sh("cd '" .. dir .. "/leak' && ln -s '" .. abs_secret .. "' summary.txt && ln -s '" .. abs_secret .. "' shadow.png"
    .. " && ln -s '" .. abs_secret .. "' profiles.csv && ln -s /etc/passwd descriptors.csv")
  good[#good + 1] = { rel = "leak" }
  run("linkedjson", ok_body)
  os.remove(dir .. "/linkedjson/results.json")
  sh("cd '" .. dir .. "/linkedjson' && ln -s '" .. abs_secret .. "' results.json")
  bad[#bad + 1] = { rel = "linkedjson", needle = "it leads outside" }
  -- FIFOs: a read would block forever
  run("fifo", ok_body)
  sh("mkfifo '" .. dir .. "/fifo/summary.txt' '" .. dir .. "/fifo/nb.html'")
  good[#good + 1] = { rel = "fifo" }
  sh("mkdir -p '" .. dir .. "/fifojson' && mkfifo '" .. dir .. "/fifojson/results.json'")
  bad[#bad + 1] = { rel = "fifojson", needle = "not a regular file (a fifo)" }
  -- deeper than the walk goes
  run("d1/d2/d3/d4/d5/d6/d7/d8/d9/d10/d11", ok_body)
  -- a run whose every text field holds hostile text: the page shows it, escaped
  local json = require "srgeo.json"
  local text = M.text("PWNED", false)
  text[#text + 1] = 'x" onmouseover="alert(1)'
  local units = {}
  for i, t in ipairs(text) do
    units[i] = { label = t, model = t, eval = t, tap = t, bump_kind = t, key = t,
                 identity = { model = t, path = t, weights = t, eval = t, tap = t } }
  end
  run("hostile_text", json.encode { format = "srgeo.experiment/1", name = text[#text], command = table.concat(text, " "),
    version = text[1], written = text[2], options = { preset = text[3], images = text[4], seed = text[5] },
    units = units, figures = { { name = text[9], files = { "a.png" } } } })
  write(dir .. "/hostile_text/summary.txt", table.concat(text, "\n"))
  good[#good + 1] = { rel = "hostile_text" }
  -- results.json of the wrong shape (each once aborted the whole index)
  local shapes = {
    { "units_numbers", '{"units": [1]}', "results.json.units[1] is a number, expected an object" },
    { "figures_numbers", '{"figures": [5]}', "results.json.figures[1] is a number, expected an object" },
    { "units_object", '{"units": {"a": 1}}', "results.json.units is an object, expected an array" },
    { "units_string", '{"units": "many"}', "results.json.units is a string, expected an array" },
    { "files_numbers", '{"figures": [{"files": [1, 2]}]}', "results.json.figures[1].files[1] is a number" },
    { "files_object", '{"figures": [{"files": {"a": "b.png"}}]}', "files is an object, expected an array" },
    { "name_object", '{"name": {"x": 1}}', "results.json.name is an object, expected text" },
    { "options_array", '{"options": [1, 2]}', "results.json.options is an array, expected an object" },
    { "identity_number", '{"units": [{"identity": 3}]}', "results.json.units[1].identity is a number" },
    { "descriptor_string", '{"units": [{"descriptors": {"peak_eta": "high"}}]}', "descriptors.peak_eta is a string" },
    { "label_bool", '{"units": [{"label": true}]}', "results.json.units[1].label is a boolean, expected text" },
    { "json_number", '{"units": [{"json": 7}]}', "results.json.units[1].json is a number, expected a string" },
    { "seconds_string", '{"seconds": "long"}', "results.json.seconds is a string, expected a number" },
    { "command_array", '{"command": ["a"]}', "results.json.command is an array, expected text" },
  }
  for _, c in ipairs(shapes) do
    run(c[1], '{"format": "srgeo.experiment/1", ' .. c[2]:sub(2))
    bad[#bad + 1] = { rel = c[1], needle = c[3] }
  end
  for _, c in ipairs { { "top_array", "[1, 2]" }, { "top_number", "5" }, { "top_null", "null" },
                       { "format_number", '{"format": 1}' }, { "empty", "" }, { "truncated", '{"format": "srgeo.ex' } } do
    run(c[1], c[2])
    bad[#bad + 1] = { rel = c[1], needle = c[1]:match("^top") and "not an srgeo experiment" or
      (c[1] == "format_number" and "not an srgeo experiment" or "could not be read") }
  end
  return good, bad, secret
end

-- ONNX (tests/lua/onnx_pb.lua writes the protobuf): nesting that crashed
-- protobuf-c's recursive unpack, files whose unpacked messages or folding
-- work are not bounded by their size, external data outside the model's
-- folder, attributes of the wrong type, values the import must check.
-- A FIFO as the model or its external data is tested in a child process
-- (tests/lua/onnx_spec.lua), where a regression hangs one child, not the run.
-- add(name, "onnx", bytes, needle, ok): bytes is a function for the large
-- files (called when the file is wanted).
function M.onnx(dir, add)
  os.execute("mkdir -p '" .. dir .. "'")
  local PB = dofile("tests/lua/onnx_pb.lua")
  local bytes, int = PB.bytes, PB.int
  local X, Y = PB.value("x", { "N", 2, 4, 4 }), PB.value("y", { "N", 2, 4, 4 })
  local function model(nodes, inits, opset, extra)
    return PB.model { nodes = nodes, inits = inits, inputs = { X }, outputs = { Y }, opset = opset, extra = extra }
  end
  local relu = PB.node("Relu", { "x" }, { "y" }, "r")
  -- a ReLU model whose graph has the further fields g (GraphProto bytes)
  local function with_graph_bytes(g) return model({ relu }, nil, nil, g) end
  local DEEP = "messages nested more than 64 deep"
  -- a TypeProto wrapped n times (TypeProto.sequence_type.elem_type ...), in
  -- a value_info (13) of the graph
  local function nested_type(n, wrap)
    local t = bytes(1, int(1, 1))
    for _ = 1, n do t = wrap(t) end
    return with_graph_bytes(bytes(13, bytes(1, "s") .. bytes(2, t)))
  end
  local function seq(t) return bytes(4, bytes(1, t)) end
  add("deep_sequence.onnx", "onnx", nested_type(5000, seq), DEEP)
  add("sequence_20.onnx", "onnx", nested_type(20, seq), nil, true)
  add("deep_map.onnx", "onnx", nested_type(3000, function(t) return bytes(5, int(1, 7) .. bytes(2, t)) end), DEEP)
  add("deep_optional.onnx", "onnx", nested_type(4000, function(t) return bytes(9, bytes(1, t)) end), DEEP)
  -- If bodies: AttributeProto.g -> GraphProto -> NodeProto -> AttributeProto ...
  local function if_nest(n, field)
    local g = PB.graph { nodes = { relu } }
    for i = 1, n do
      local attr = bytes(1, "then_branch") .. bytes(field, g) .. int(20, field == 6 and 5 or 10)
      g = PB.graph { nodes = { PB.node("If", { "c" }, { "y" }, "if" .. i, { attr }) } }
    end
    return g
  end
  add("deep_if.onnx", "onnx", int(1, 7) .. bytes(7, if_nest(3000, 6)) .. bytes(8, bytes(1, "") .. int(2, 13)), DEEP)
  add("deep_graphs_attr.onnx", "onnx", int(1, 7) .. bytes(7, if_nest(1000, 11)) .. bytes(8, int(2, 13)), DEEP)
  -- FunctionProto (ModelProto.functions, 25) whose node holds the nesting
  add("deep_function.onnx", "onnx", model({ relu }) .. bytes(25, bytes(1, "f") .. bytes(7, PB.node("If", { "c" },
    { "y" }, "f", { bytes(1, "b") .. bytes(6, if_nest(100, 6)) .. int(20, 5) }))), DEEP)
  -- unknown fields nest as bytes, which protobuf-c keeps without parsing
  local unk = ""
  for _ = 1, 3000 do unk = bytes(99, unk) end
  add("deep_unknown.onnx", "onnx", model({ relu }) .. unk, nil, true)

  -- unpacked size: 5 MB of empty nodes, attributes, inputs
  local UNPACK = "unpacking would take more than"
  add("empty_nodes.onnx", "onnx", function() return with_graph_bytes(string.rep("\10\0", 2500000)) end, UNPACK)
  add("empty_attrs.onnx", "onnx", function() return with_graph_bytes(bytes(1, string.rep("\42\0", 2500000))) end, UNPACK)
  add("empty_inputs.onnx", "onnx", function() return with_graph_bytes(bytes(1, string.rep("\10\0", 2500000))) end, UNPACK)
  add("empty_metadata.onnx", "onnx", function() return model({ relu }) .. string.rep("\114\0", 2500000) end, UNPACK)
  -- packed int64 dims of one byte each: 8 bytes apiece, within bounds, refused by count
  add("many_dims.onnx", "onnx", function() return model({ relu }, { bytes(1, string.rep("\1", 1000000)) .. int(2, 1) .. bytes(8, "w") }) end,
    "has 1000000 dims")
  add("many_values.onnx", "onnx", function() return with_graph_bytes(string.rep(bytes(11, bytes(1, "v")), 70000)) end, "too large")

  -- malformed wire data
  local PARSE = "the protobuf does not parse"
  add("wire_truncated_varint.onnx", "onnx", model({ relu }) .. "\8\255\255", PARSE)
  add("wire_long_varint.onnx", "onnx", model({ relu }) .. "\8" .. string.rep("\255", 12) .. "\1", PARSE)
  add("wire_group.onnx", "onnx", model({ relu }) .. "\11\12", PARSE)
  add("wire_type7.onnx", "onnx", model({ relu }) .. "\15", PARSE)
  add("wire_field0.onnx", "onnx", "\2\0" .. model({ relu }), PARSE)
  add("wire_length_past_end.onnx", "onnx", model({ relu }) .. "\58\200\1abc", PARSE)
  add("wire_inner_past_end.onnx", "onnx", bytes(7, "\10\50" .. relu), PARSE)

  -- folding's work and size; the output depends on every folded value
  -- (the import prunes what it does not, and would never fold it)
  local function consume(nodes, names)
    while #names > 500 do -- a node takes a bounded number of inputs: a tree of sums
      local parts = {}
      for i = 1, #names, 500 do
        local p = "t" .. #nodes
        nodes[#nodes + 1] = PB.node("Sum", table.move(names, i, math.min(i + 499, #names), 1, {}), { p }, p)
        parts[#parts + 1] = p
      end
      names = parts
    end
    nodes[#nodes + 1] = PB.node("Sum", names, { "tot" }, "tot")
    nodes[#nodes + 1] = PB.node("ReduceSum", { "tot" }, { "ts" }, "ts")
    nodes[#nodes + 1] = PB.node("Add", { "x", "ts" }, { "y" }, "out")
    return nodes
  end
  local function mm_model(n, k)
    local nodes, names = {}, {}
    for i = 1, k do nodes[i], names[i] = PB.node("MatMul", { "w", "w" }, { "p" .. i }, "mm" .. i), "p" .. i end
    return model(consume(nodes, names), { PB.tensor("w", { n, n }, string.rep("\0\0\0\63", n * n)) })
  end
  add("fold_matmul_1024.onnx", "onnx", function() return mm_model(1024, 1) end, "node 'mm1' (MatMul): folding would take more than")
  add("fold_matmul_256x16.onnx", "onnx", function() return mm_model(256, 16) end,
    "(MatMul): folding would take more than")
  add("fold_reducesum_100k.onnx", "onnx", function()
    local sums, names = {}, {}
    for i = 1, 100000 do sums[i], names[i] = PB.node("ReduceSum", { "w" }, { "s" .. i }, "s" .. i), "s" .. i end
    return model(consume(sums, names), { PB.tensor("w", { 4096 }, string.rep("\0\0\128\63", 4096)) })
  end, "(ReduceSum): folding would take more than")
  local shapes, cs = {}, {}
  for i = 1, 20 do shapes[i], cs[i] = PB.node("ConstantOfShape", { "s" }, { "c" .. i }, "c" .. i), "c" .. i end
  add("fold_constants.onnx", "onnx", model(consume(shapes, cs), { PB.tensor("s", { 2 }, { 1024, 1024 }, true) }),
    "the folded constants would hold")

  -- node count: a chain of 5·10^4 ReLUs (1.5 MB; 4,000 took 4.2 s, the
  -- import was quadratic) loads in linear time
  add("chain_50000.onnx", "onnx", function()
    local chain = {}
    for i = 1, 50000 do
      chain[i] = PB.node("Relu", { i == 1 and "x" or "v" .. (i - 1) }, { i == 50000 and "y" or "v" .. i }, "r" .. i)
    end
    return model(chain)
  end, nil, true)

  -- external data beside the model
  local w = string.rep(string.pack("<f", 1), 4)
  local function ext_model(loc, extra)
    local e = { { "location", loc } }
    for _, kv in ipairs(extra or {}) do e[#e + 1] = kv end
    return model({ PB.node("Add", { "x", "w" }, { "y" }, "add") }, { PB.external_tensor("w", { 4 }, e) })
  end
  write(dir .. "/w.bin", w)
  os.execute(string.format("cd '%s' && ln -sf /etc/passwd passwd.bin && ln -sf w.bin inside.bin && "
    .. "mkdir -p sub sub2 && ln -sf ../w.bin sub2/up.bin", dir))
  add("ext_ok.onnx", "onnx", ext_model("w.bin"), nil, true)
  add("ext_link_inside.onnx", "onnx", ext_model("inside.bin"), nil, true)
  add("ext_link_passwd.onnx", "onnx", ext_model("passwd.bin"), "outside the model's folder")
  add("ext_absolute.onnx", "onnx", ext_model("/etc/passwd"), "must be a file name relative to the model's folder")
  add("ext_dotdot.onnx", "onnx", ext_model("../w.bin"), "no '..'")
  add("ext_directory.onnx", "onnx", ext_model("sub"), "is a directory")
  add("ext_missing.onnx", "onnx", ext_model("nowhere.bin"), "cannot open external data")
  add("ext_offset.onnx", "onnx", ext_model("w.bin", { { "offset", "12" } }), "holds no 16 bytes at offset 12")
  add("ext_length.onnx", "onnx", ext_model("w.bin", { { "length", "8" } }), "external data length 8")
  add("ext_negative.onnx", "onnx", ext_model("w.bin", { { "offset", "-4" } }), "is not a size")

  -- attributes of the wrong type, values checked at import
  local function op_model(node, inits, opset) return model({ node }, inits, opset) end
  add("attr_alpha_string.onnx", "onnx", op_model(PB.node("LeakyRelu", { "x" }, { "y" }, "lrelu",
    { PB.string_attr("alpha", "0.5") })), "node 'lrelu' (LeakyRelu): attribute alpha is a string, LeakyRelu takes a float")
  add("attr_axis_float.onnx", "onnx", op_model(PB.node("Flatten", { "x" }, { "y" }, "flat",
    { PB.float_attr("axis", 1.5) })), "node 'flat' (Flatten): attribute axis is a float, Flatten takes an int")
  add("attr_perm_int.onnx", "onnx", op_model(PB.node("Transpose", { "x" }, { "y" }, "tr",
    { PB.int_attr("perm", 1) })), "attribute perm is an int, Transpose takes a list of ints")
  add("attr_mode_int.onnx", "onnx", op_model(PB.node("Pad", { "x", "p" }, { "y" }, "pad", { PB.int_attr("mode", 1) }),
    { PB.tensor("p", { 8 }, { 0, 0, 0, 0, 0, 0, 0, 0 }, true) }), "attribute mode is an int, Pad takes a string")
  add("attr_resize_mode_int.onnx", "onnx", op_model(PB.node("Resize", { "x", "", "s" }, { "y" }, "rs",
    { PB.string_attr("mode", "nearest"), PB.int_attr("coordinate_transformation_mode", 1) }),
    { PB.tensor("s", { 4 }, { 1, 1, 2, 2 }) }), "attribute coordinate_transformation_mode is an int, Resize takes a string")
  add("attr_groups_float.onnx", "onnx", op_model(PB.node("GroupNormalization", { "x", "g", "b" }, { "y" }, "gn",
    { PB.float_attr("num_groups", 1.5) }), { PB.tensor("g", { 1 }, { 1 }), PB.tensor("b", { 1 }, { 0 }) }, 18),
    "attribute num_groups is a float, GroupNormalization takes an int")
  add("attr_graph_axis.onnx", "onnx", op_model(PB.node("Softmax", { "x" }, { "y" }, "sm",
    { bytes(1, "axis") .. bytes(6, PB.graph { nodes = { relu } }) .. int(20, 5) })), "attribute axis is another kind")
  add("concat_no_axis.onnx", "onnx", op_model(PB.node("Concat", { "x", "x" }, { "y" }, "cat")),
    "node 'cat' (Concat): attribute axis is required")
  add("concat_no_axis_opset3.onnx", "onnx", op_model(PB.node("Concat", { "x", "x" }, { "y" }, "cat"), nil, 3), nil, true)
  add("opset_negative.onnx", "onnx", op_model(relu, nil, -1), "the default domain's opset is -1")
  add("opset_zero.onnx", "onnx", op_model(relu, nil, 0), "the default domain's opset is 0")
  add("opset_19.onnx", "onnx", op_model(relu, nil, 19), "opset 19")
  add("gather_out_of_range.onnx", "onnx", op_model(PB.node("Gather", { "x", "i" }, { "y" }, "g",
    { PB.int_attr("axis", 1) }), { PB.tensor("i", { 2 }, { 0, 5 }, true) }), "index 5 is out of range for axis 1")
  add("gather_negative_out_of_range.onnx", "onnx", op_model(PB.node("Gather", { "x", "i" }, { "y" }, "g",
    { PB.int_attr("axis", 2) }), { PB.tensor("i", { 1 }, { -5 }, true) }), "index -5 is out of range for axis 2")
  add("pad_huge.onnx", "onnx", op_model(PB.node("Pad", { "x", "p" }, { "y" }, "pad"),
    { PB.tensor("p", { 8 }, { 0, 0, 0, 0, 0, 0, 0, 1000000000 }, true) }), "node 'pad' (Pad): pads make (2,4,1000000004)")
  add("pad_reflect_long.onnx", "onnx", op_model(PB.node("Pad", { "x", "p" }, { "y" }, "pad",
    { PB.string_attr("mode", "reflect") }), { PB.tensor("p", { 8 }, { 0, 0, 0, 4, 0, 0, 0, 0 }, true) }),
    "reflect pads 4, 0 of an axis of 4")
end

-- Standalone: write the corpus and list it.
if arg and arg[0] and arg[0]:match("hostile_files%.lua$") then
  local cases = M.write(arg[1] or "build/hostile")
  for _, c in ipairs(cases) do print(string.format("%-14s %-28s %s", c.loader, c.name, c.ok and "must load" or "must fail: " .. tostring(c.needle))) end
end

return M
