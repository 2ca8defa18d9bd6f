-- One retry budget shared by a fleet: applies a few budget inputs atomically,
-- with the integer arithmetic of retry-core's RetryBudget (amounts in
-- thousandths of a token; every number stays below 2^53, so Lua's doubles are
-- exact).
--
-- KEYS[1]  the budget's hash
-- ARGV[1]  the format version this client writes
-- ARGV[2]  the configuration's fingerprint (a budget under another config is refused)
-- ARGV[3]  the kind: grpc | aws | finagle
-- ARGV[4..9] the kind's parameters:
--          grpc:    max, ratio
--          aws:     capacity, retry_cost, timeout_cost, no_retry_increment
--          finagle: deposit, withdrawal, reserve, slice_cap, max, slice_micros
-- ARGV[10] the key's time to live, milliseconds
-- ARGV[11] now in microseconds, or empty for the server's clock
-- ARGV[12] the server's time (microseconds) after which the request is
--          refused unapplied (its caller gave up waiting), or empty
-- ARGV[13..] the inputs, in order: F first attempt, X failure, S success of a
--          first attempt, SR / ST success of a retry after a failure / a
--          timeout, WR / WT withdrawal for a retry after a failure / a timeout
--
-- Returns {0, answer, tokens, cost, server_us, behind_us}: answer 0 (no
-- withdrawal), 1 (granted) or 2 (refused); tokens after the inputs; the
-- withdrawal's cost; the server's clock; how far the stored time was ahead of
-- now (0 unless the clock stepped back: the step counts as no time passing,
-- and the stored window is moved back with it). {-2, server_us}: the request
-- came after its deadline and nothing was written. Bad data:
-- {-1, code, detail}, and nothing is written.

local key = KEYS[1]
local version = tonumber(ARGV[1])
local kind = ARGV[3]
local p = {}
for i = 1, 6 do p[i] = tonumber(ARGV[3 + i]) end
local ttl = tonumber(ARGV[10])

local function fmt(n) return string.format('%.0f', n) end

local t = redis.call('TIME')
local server = tonumber(t[1]) * 1000000 + tonumber(t[2])
local deadline = tonumber(ARGV[12])
if deadline and server > deadline then return {-2, server} end
local now = tonumber(ARGV[11]) or server

-- floor(a / b) for integers below 2^53, corrected for rounding.
local function idiv(a, b)
  local q = math.floor(a / b)
  while q * b > a do q = q - 1 end
  while (q + 1) * b <= a do q = q + 1 end
  return q
end

local ktype = redis.call('TYPE', key)['ok']
if ktype ~= 'none' and ktype ~= 'hash' then
  return {-1, 'wrong_type', ktype}
end
local exists = ktype == 'hash'

local fields = {'v', 'cfg', 't', 'last'}
if kind == 'finagle' then
  for i = 0, 9 do fields[#fields + 1] = 's' .. i end
  for i = 0, 9 do fields[#fields + 1] = 'n' .. i end
end
local raw = redis.call('HMGET', key, unpack(fields))

-- A whole number within [lo, hi], or nil.
local function int(s, lo, hi)
  if not s then return nil end
  if not string.match(s, '^%-?%d+$') then return nil end
  local n = tonumber(s)
  if n == nil or n < lo or n > hi then return nil end
  return n
end

local BIG = 9007199254740991
local max_tokens = 0
if kind == 'grpc' then max_tokens = p[1]
elseif kind == 'aws' then max_tokens = p[1]
else max_tokens = p[5] end

local tokens = max_tokens
local last = 0
local slot = {}
local net = {}
for i = 0, 9 do slot[i] = 0; net[i] = 0 end

if exists then
  local v = raw[1]
  if not v then return {-1, 'garbage', 'v'} end
  local vn = int(v, 0, BIG)
  if vn == nil then return {-1, 'garbage', 'v'} end
  if vn > version then return {-1, 'future_version', v} end
  if vn ~= version then return {-1, 'garbage', 'v'} end
  if raw[2] ~= ARGV[2] then return {-1, 'config_mismatch', tostring(raw[2])} end
  last = int(raw[4], 0, BIG)
  if last == nil then return {-1, 'garbage', 'last'} end
  if kind == 'finagle' then
    for i = 0, 9 do
      local s = int(raw[5 + i], 0, BIG)
      local n = int(raw[15 + i], -BIG, p[4])
      if s == nil then return {-1, 'garbage', 's' .. i} end
      if n == nil then return {-1, 'garbage', 'n' .. i} end
      slot[i] = s; net[i] = n
    end
  else
    tokens = int(raw[3], 0, max_tokens)
    if tokens == nil then return {-1, 'garbage', 't'} end
  end
end

-- Time going backwards (a clock stepped back, a failover to a replica whose
-- clock is behind) counts as no time passing: the stored window moves back
-- by the step, whole slices, so that it goes on from now as it would have
-- from the stored time, rather than freezing until the clock catches up.
local behind = 0
if now < last then
  behind = last - now
  if kind == 'finagle' then
    local slice = p[6]
    local step = idiv(last, slice) - idiv(now, slice)
    local moved_slot, moved_net = {}, {}
    for i = 0, 9 do moved_slot[i] = 0; moved_net[i] = 0 end
    for i = 0, 9 do
      local s = slot[i] - step
      if net[i] ~= 0 and s >= 0 then
        moved_slot[s % 10] = s
        moved_net[s % 10] = net[i]
      end
    end
    slot, net = moved_slot, moved_net
  end
end

local answer, cost = 0, 0

if kind == 'grpc' then
  local max, ratio = p[1], p[2]
  for i = 13, #ARGV do
    local op = ARGV[i]
    if op == 'X' then
      tokens = math.max(tokens - 1000, 0)
    elseif op == 'S' or op == 'SR' or op == 'ST' then
      tokens = math.min(tokens + ratio, max)
    elseif op == 'WR' or op == 'WT' then
      if tokens > idiv(max, 2) then answer = 1 else answer = 2 end
      cost = 0
    end
  end
elseif kind == 'aws' then
  local cap, retry_cost, timeout_cost, inc = p[1], p[2], p[3], p[4]
  for i = 13, #ARGV do
    local op = ARGV[i]
    if op == 'S' then
      tokens = math.min(tokens + inc, cap)
    elseif op == 'SR' then
      tokens = math.min(tokens + retry_cost, cap)
    elseif op == 'ST' then
      tokens = math.min(tokens + timeout_cost, cap)
    elseif op == 'WR' or op == 'WT' then
      local c = retry_cost
      if op == 'WT' then c = timeout_cost end
      cost = c
      if tokens >= c then
        tokens = tokens - c
        answer = 1
      else
        answer = 2
      end
    end
  end
else
  local deposit, withdrawal, reserve, cap, max, slice = p[1], p[2], p[3], p[4], p[5], p[6]
  local at = idiv(now, slice)
  local function add(amount)
    local i = at % 10
    if slot[i] ~= at then
      slot[i] = at
      net[i] = 0
    end
    net[i] = math.min(net[i] + amount, cap)
  end
  local function balance()
    local sum = reserve
    for i = 0, 9 do
      if slot[i] <= at and at - slot[i] < 10 then sum = sum + net[i] end
    end
    return math.min(math.max(sum, 0), max)
  end
  for i = 13, #ARGV do
    local op = ARGV[i]
    if op == 'F' then
      add(deposit)
    elseif op == 'WR' or op == 'WT' then
      cost = withdrawal
      if balance() >= withdrawal then
        add(-withdrawal)
        answer = 1
      else
        answer = 2
      end
    end
  end
  tokens = balance()
end

local out = {'v', fmt(version), 'cfg', ARGV[2], 't', fmt(tokens), 'last', fmt(now)}
if kind == 'finagle' then
  for i = 0, 9 do
    out[#out + 1] = 's' .. i; out[#out + 1] = fmt(slot[i])
    out[#out + 1] = 'n' .. i; out[#out + 1] = fmt(net[i])
  end
end
redis.call('HSET', key, unpack(out))
redis.call('PEXPIRE', key, ttl)
return {0, answer, tokens, cost, server, behind}
