-- tests/bench/common.lua: what the Lua benchmarks share.  Not a benchmark
-- (run.sh runs bench_*.lua); they require it as "tests.bench.common" from
-- the repository root, where they run.
local srgeo = require "srgeo"

local B = {}

-- A shell command's output.
function B.run(cmd)
  local p = io.popen(cmd)
  local out = p:read("a")
  p:close()
  return out
end

-- Peak resident set of this process in MB (VmHWM); NaN without /proc.
function B.peak_rss_mb()
  local f = io.open("/proc/self/status")
  if not f then return 0 / 0 end
  local kb = f:read("a"):match("VmHWM:%s*(%d+)")
  f:close()
  return tonumber(kb) / 1024
end

-- Debian's interpreter, and whether PyTorch imports in it (the reference
-- scripts tests/bench/torch_*.py need it).
function B.torch_python()
  local py = io.open("/usr/bin/python3") and "/usr/bin/python3"
  local has_torch = py and B.run(py .. " -c 'import torch; print(\"yes\")' 2>/dev/null"):match("yes")
  return py, has_torch
end

-- The first lines of every benchmark: the CPU, its vector features, the
-- BLAS kernels, srgeo's GEMM, the threads and the load average the figures
-- depend on (the C benchmarks print the same lines: core/base/blas.h).
function B.system()
  io.write(srgeo._describe(true))
end

-- The first lines of a comparison with PyTorch: B.system(), then what runs
-- and whether PyTorch does.
function B.header(what, has_torch)
  B.system()
  print(what .. (has_torch and "" or "  (PyTorch not installed: srgeo figures only)"))
end

-- The input shape {C, H, W} of a zoo architecture.
function B.input_shape(name)
  for _, e in ipairs(srgeo.models.list()) do
    if e.name == name then return e.input end
  end
  error("no architecture " .. name)
end

return B
