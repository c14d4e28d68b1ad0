-- tests/fuzz/seed_corpus.lua: the seed inputs of the npy and image fuzz
-- targets (committed; rerun to regenerate):
--   build/srgeo tests/fuzz/seed_corpus.lua
-- npy: float32/float64, 0-d, empty, a version-2 header.  image: one tiny file
-- per format libvips reads here (PNG RGB/grey/alpha/16-bit, JPEG, WebP, GIF,
-- TIFF, PGM), each behind the option byte fuzz_image.c reads first.
local srgeo = require "srgeo"

local function write(path, bytes)
  local f = assert(io.open(path, "wb"))
  f:write(bytes)
  f:close()
end

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

os.execute("mkdir -p tests/fuzz/corpus_npy tests/fuzz/corpus_image")
local x = srgeo.arange(6):reshape(2, 3)
srgeo.npy.save("tests/fuzz/corpus_npy/f32.npy", x)
srgeo.npy.save("tests/fuzz/corpus_npy/f64.npy", x:double())
srgeo.npy.save("tests/fuzz/corpus_npy/scalar.npy", srgeo.tensor(2.5))
srgeo.npy.save("tests/fuzz/corpus_npy/empty.npy", srgeo.zeros(0, 4))
-- version 2.0: a 4-byte header length
local v1 = read("tests/fuzz/corpus_npy/f32.npy")
local hlen = v1:byte(9) + 256 * v1:byte(10)
write("tests/fuzz/corpus_npy/v2.npy", "\147NUMPY\2\0" .. string.pack("<I4", hlen - 2) ..
  v1:sub(11, 10 + hlen - 2) .. v1:sub(11 + hlen))

local img = srgeo.rand({ 1, 3, 8, 8 }, 1)
local grey = srgeo.rand({ 1, 1, 8, 8 }, 2)
local rgba = srgeo.rand({ 1, 4, 8, 8 }, 3)
local tmp = "build/fuzz-seed"
os.execute("mkdir -p " .. tmp)
local files = {
  { "rgb.png", img }, { "grey.png", grey }, { "alpha.png", rgba }, { "rgb.jpg", img }, { "rgb.webp", img },
  { "rgb.tif", img }, { "grey.pgm", grey }, { "rgb.gif", img },
}
for i, e in ipairs(files) do
  local path = tmp .. "/" .. e[1]
  local ok, err = pcall(srgeo.image.save, path, e[2])
  if ok then
    write("tests/fuzz/corpus_image/" .. e[1], string.char(i % 5) .. read(path))
  else
    io.stderr:write("seed_corpus: skipped ", e[1], ": ", tostring(err), "\n")
  end
end
-- 16-bit PNG (srgeo saves 8 bits; the vips CLI casts)
if os.execute("vips cast " .. tmp .. "/rgb.png " .. tmp .. "/rgb16.v ushort && vips pngsave " .. tmp
  .. "/rgb16.v " .. tmp .. "/rgb16.png --bitdepth 16") then
  write("tests/fuzz/corpus_image/rgb16.png", "\1" .. read(tmp .. "/rgb16.png"))
end
os.execute("rm -rf " .. tmp)
print("seed_corpus: wrote tests/fuzz/corpus_npy/ and tests/fuzz/corpus_image/")
