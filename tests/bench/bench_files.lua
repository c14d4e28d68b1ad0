-- bench_files.lua: opening hostile-sized safetensors headers.  The duplicate-
-- name check once compared every entry with all earlier ones (10k entries
-- 1.4 s, 40k 13.7 s, 200k over 120 s); it sorts now.  Figures: seconds to
-- open headers of 10^4, 10^5 and 10^6 one-byte entries, and the same-run
-- ratio of each step (x10 entries: about 10-12x for n log n, 100x for
-- all-pairs).  Bound: 10^6 entries (a 63 MB header) open in under 10 s.
--   srgeo tests/bench/bench_files.lua [max_entries]
local srgeo = require "srgeo"
local B = require "tests.bench.common"

local MAX = tonumber(arg and arg[1]) or 1000000
local DIR = os.tmpname()
os.remove(DIR)
os.execute("mkdir -p '" .. DIR .. "'")

local function file(n)
  local parts = {}
  for i = 1, n do parts[i] = string.format('"t%d":{"dtype":"U8","shape":[1],"data_offsets":[%d,%d]}', i, i - 1, i) end
  local header = "{" .. table.concat(parts, ",") .. "}"
  local path = string.format("%s/n%d.safetensors", DIR, n)
  local f = assert(io.open(path, "wb"))
  f:write(string.pack("<I8", #header), header, string.rep("\1", n))
  f:close()
  return path, #header
end

B.system()
print(string.format("%10s %10s %10s %12s %8s", "entries", "header MB", "open s", "us/entry", "x prev"))
local prev
local n = 10000
local ok_bound = true
while n <= MAX do
  local path, hl = file(n)
  local best = math.huge
  for _ = 1, (n >= 1000000 and 1 or 3) do
    collectgarbage()
    local t0 = srgeo._clock()
    local f = srgeo.safetensors.open(path)
    local dt = srgeo._clock() - t0
    assert(#f:keys() == n and f:info("t" .. n).bytes == 1)
    f:close()
    best = math.min(best, dt)
  end
  print(string.format("%10d %10.1f %10.3f %12.2f %8s", n, hl / 2 ^ 20, best, 1e6 * best / n,
    prev and string.format("%.1f", best / prev) or "-"))
  if n == 1000000 and best >= 10 then ok_bound = false end
  prev = best
  os.remove(path)
  n = n * 10
end
os.execute("rm -rf '" .. DIR .. "'")
print(MAX >= 1000000 and (ok_bound and "bound: 10^6 entries open in under 10 s: yes" or "bound: 10^6 entries open in under 10 s: NO")
  or "bound: not measured (max_entries < 10^6)")
