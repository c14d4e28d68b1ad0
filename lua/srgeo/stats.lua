-- srgeo.stats: small robust statistics used by profiles and comparisons.
-- NaN entries (discarded rungs) are ignored everywhere.
local M = {}

local function isnan(v) return v ~= v end
M.isnan = isnan

local function finite_sorted(xs)
  local t = {}
  for _, v in ipairs(xs) do
    if type(v) == "number" and not isnan(v) and v ~= math.huge and v ~= -math.huge then t[#t + 1] = v end
  end
  table.sort(t)
  return t
end

--- Quantile q in [0,1] with linear interpolation (type 7, NumPy's default); NaN if empty.
function M.quantile(xs, q)
  local t = finite_sorted(xs)
  local n = #t
  if n == 0 then return 0 / 0 end
  local h = (n - 1) * q + 1
  local lo = math.floor(h)
  if lo >= n then return t[n] end
  return t[lo] + (h - lo) * (t[lo + 1] - t[lo])
end

function M.median(xs) return M.quantile(xs, 0.5) end

function M.mean(xs)
  local s, n = 0, 0
  for _, v in ipairs(xs) do
    if not isnan(v) then s, n = s + v, n + 1 end
  end
  return n > 0 and s / n or 0 / 0
end

--- A seeded uniform generator in [0,1) (xorshift-style; independent of math.random's global state).
function M.rng(seed)
  local s = (seed or 1) * 2654435761 % 4294967296
  if s == 0 then s = 1 end
  return function()
    s = s ~ (s << 13) & 0xffffffff
    s = s ~ (s >> 17)
    s = s ~ (s << 5) & 0xffffffff
    return s / 4294967296
  end
end

--- Bootstrap over rows: rows is a list of per-item records; stat(sample) -> number or list.
--- Returns the list of B statistics.
function M.bootstrap(rows, stat, B, seed)
  local u = M.rng(seed or 1)
  local n = #rows
  local out = {}
  for b = 1, B do
    local s = {}
    for i = 1, n do s[i] = rows[math.floor(u() * n) + 1] end
    out[b] = stat(s)
  end
  return out
end

--- Column j of a list of rows.
function M.column(rows, j)
  local c = {}
  for i, r in ipairs(rows) do c[i] = r[j] end
  return c
end

return M
