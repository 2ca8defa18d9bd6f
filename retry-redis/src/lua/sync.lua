-- One breaker sync: publishes this member's report and reads the fleet's view
-- back, in one round trip, at a cost that does not depend on the number of
-- members: no member's report is read but this member's own, only sums.
--
-- Time is cut into buckets of one sync interval on the server's clock (so
-- every member agrees on them). Bucket b has two hashes:
--   <prefix>reports:<b>  member id -> its newest report made in b
--   <prefix>sums:<b>     'o:*' the sums of those reports, and 'v:*' the view:
--                        those plus, for the members that have not reported
--                        in b yet, their report in b - 1
-- so that the view counts every member that reported in b or b - 1 once, with
-- its newest report. The first sync in b starts the view from b - 1's own
-- sums; a member reporting again takes its earlier report (in b, or carried
-- from b - 1) out of the sums before adding the new one. Sums are kept per
-- decision epoch ('o:n' and 'v:n' count members; 'o:<epoch>:open' etc. sum
-- the reports made under that epoch), and the view returned is the one of the
-- published decision's epoch. A bucket's keys expire when b + 2 starts.
--
-- KEYS[1]  the fleet's decision (a string)
-- ARGV[1]  this member's id
-- ARGV[2]  its report: 1|open|epoch|calls|failures|slow|slow_failures
-- ARGV[3]  the sync interval, milliseconds (one bucket per interval)
-- ARGV[4]  the prefix of the bucket keys (with the decision key's hash tag)
-- ARGV[5]  the server's time (ms) after which the sync is refused (its
--          member gave up on it), or empty
--
-- Returns {0, now_ms, decision or '', members, open, calls, failures, slow,
-- slow_failures, garbage} (garbage: 1 when an earlier report or sum of this
-- member's was not one this crate writes, and was left out), {-2, now_ms}
-- when refused for running after the deadline, or {-1, code, detail, key} on
-- bad data.

local function fmt(n) return string.format('%.0f', n) end
local function failed(r) return type(r) == 'table' and r.err ~= nil end
local function wrong_type(key)
  return {-1, 'wrong_type', redis.call('TYPE', key)['ok'], key}
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local deadline = tonumber(ARGV[5] or '')
if deadline and now > deadline then return {-2, now} end
local interval = tonumber(ARGV[3])
local b = math.floor(now / interval)
local prefix = ARGV[4]
local sums = prefix .. 'sums:' .. fmt(b)
local reports = prefix .. 'reports:' .. fmt(b)
local prev_sums = prefix .. 'sums:' .. fmt(b - 1)
local prev_reports = prefix .. 'reports:' .. fmt(b - 1)
local member = ARGV[1]

local decision = redis.pcall('GET', KEYS[1])
if failed(decision) then return wrong_type(KEYS[1]) end
local epoch = '0'
if decision then
  epoch = string.match(decision, '^%d+|closed|(%d+)$')
    or string.match(decision, '^%d+|open|%d+|(%d+)$')
  -- Not a decision this script can read: the client says what is wrong.
  if not epoch then return {0, now, decision, 0, 0, 0, 0, 0, 0, 0} end
else
  decision = ''
end

local NAMES = {'open', 'calls', 'failures', 'slow', 'slow_failures'}

-- A report as {epoch, {open, calls, failures, slow, slow_failures}}; nil for
-- none, false for one this crate does not write.
local function parse(raw)
  if not raw then return nil end
  local o, e, c, f, s, x = string.match(raw, '^1|([01])|(%d+)|(%d+)|(%d+)|(%d+)|(%d+)$')
  if not o then return false end
  return {e, {tonumber(o), tonumber(c), tonumber(f), tonumber(s), tonumber(x)}}
end

local new = parse(ARGV[2])
if not new then return {-1, 'garbage', 'report', ARGV[2]} end
local garbage = 0
local old = redis.pcall('HGET', reports, member)
if failed(old) then return wrong_type(reports) end
old = parse(old)
local carried = nil
if old == false then
  garbage = 1
  old = nil
elseif old == nil then
  carried = redis.pcall('HGET', prev_reports, member)
  if failed(carried) then return wrong_type(prev_reports) end
  carried = parse(carried)
  if carried == false then
    garbage = 1
    carried = nil
  end
end

-- The fields this sync reads or writes.
local fields, seen = {'o:n', 'v:n'}, {}
local function want(e)
  if seen[e] then return end
  seen[e] = true
  for _, pre in ipairs({'o:', 'v:'}) do
    for _, name in ipairs(NAMES) do fields[#fields + 1] = pre .. e .. ':' .. name end
  end
end
want(epoch)
want(new[1])
if old then want(old[1]) end
if carried then want(carried[1]) end

local raw = redis.pcall('HMGET', sums, unpack(fields))
if failed(raw) then return wrong_type(sums) end
local value = {}
local fresh = raw[2] == false
if fresh then
  -- The first sync in this bucket: the view starts from the previous
  -- bucket's own sums.
  local prev = redis.pcall('HGETALL', prev_sums)
  if failed(prev) then return wrong_type(prev_sums) end
  for i = 1, #prev, 2 do
    local name, n = prev[i], tonumber(prev[i + 1])
    if string.sub(name, 1, 2) == 'o:' then
      if n then value['v:' .. string.sub(name, 3)] = n else garbage = 1 end
    end
  end
  value['o:n'] = 0
  value['v:n'] = value['v:n'] or 0
  for _, f in ipairs(fields) do value[f] = value[f] or 0 end
else
  for i, f in ipairs(fields) do
    local n = 0
    if raw[i] then
      n = tonumber(raw[i])
      if not n then return {-1, 'garbage', f, sums} end
    end
    value[f] = n
  end
end

local function add(pre, report, sign)
  value[pre .. 'n'] = value[pre .. 'n'] + sign
  for i, name in ipairs(NAMES) do
    local f = pre .. report[1] .. ':' .. name
    value[f] = value[f] + sign * report[2][i]
  end
end
if old then
  add('o:', old, -1)
  add('v:', old, -1)
elseif carried then
  add('v:', carried, -1)
end
add('o:', new, 1)
add('v:', new, 1)

local out = {}
if fresh then
  -- Every field of the view, the ones carried over included.
  for f, n in pairs(value) do
    out[#out + 1] = f
    out[#out + 1] = fmt(n)
  end
else
  for _, f in ipairs(fields) do
    out[#out + 1] = f
    out[#out + 1] = fmt(value[f])
  end
end
local ends = (b + 2) * interval
redis.call('HSET', sums, unpack(out))
if redis.call('HSET', reports, member, ARGV[2]) == 1 then
  redis.call('PEXPIREAT', reports, ends)
end
if fresh then redis.call('PEXPIREAT', sums, ends) end

local function view(name)
  return math.max(value['v:' .. epoch .. ':' .. name], 0)
end
return {0, now, decision, math.max(value['v:n'], 0), view('open'), view('calls'),
  view('failures'), view('slow'), view('slow_failures'), garbage}
