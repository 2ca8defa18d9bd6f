-- One breaker sync: publishes this member's report and reads the fleet's view
-- back, in one round trip, at a cost that does not depend on the number of
-- members: no report is read but this member's own, only sums.
--
-- Time is cut into buckets of one sync interval on the server's clock (so
-- every member agrees on them); bucket b is two hashes:
-- <prefix>reports:<b>, each member's newest report made in b (a member reads
-- only its own), and <prefix>sums:<b>, with the fields
--   'o:n'         how many members reported in b
--   'o:<epoch>'   the sums of those reports made under that decision epoch:
--                 'open,calls,failures,slow,slow_failures'
--   'e'           the epochs with such sums, comma-separated (a few)
--   'v:n', 'v:<epoch>'  the view: the same over the members that reported in
--                 b, and, for those that have not yet, their report in b - 1
-- so that the view counts every member that reported in b or b - 1 once, with
-- its newest report. The first sync in b starts the view from b - 1's own
-- sums; a member reporting again takes its earlier report (in b, or carried
-- from b - 1) out of the sums before adding the new one. The view returned is
-- the one of the published decision's epoch. A bucket's hashes expire when
-- b + 2 starts.
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
local bucket = ARGV[4] .. 'sums:' .. string.format('%.0f', b)
local previous = ARGV[4] .. 'sums:' .. string.format('%.0f', b - 1)
local reports = ARGV[4] .. 'reports:' .. string.format('%.0f', b)
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

-- A report as {epoch, {open, calls, failures, slow, slow_failures}}; nil for
-- none, false for one this crate does not write.
local function report(raw)
  if not raw then return nil end
  local o, e, c, f, s, x = string.match(raw, '^1|([01])|(%d+)|(%d+)|(%d+)|(%d+)|(%d+)$')
  if not o then return false end
  return {e, {tonumber(o), tonumber(c), tonumber(f), tonumber(s), tonumber(x)}}
end
-- Five sums as a list; nil for none, false for garbage.
local function sums(raw)
  if not raw then return nil end
  local o, c, f, s, x = string.match(raw, '^(%-?%d+),(%-?%d+),(%-?%d+),(%-?%d+),(%-?%d+)$')
  if not o then return false end
  return {tonumber(o), tonumber(c), tonumber(f), tonumber(s), tonumber(x)}
end

local new = report(ARGV[2])
if not new then return {-1, 'garbage', 'report', ARGV[2]} end
local garbage = 0

-- The bucket's counts and its sums under the epochs involved, and this
-- member's earlier report in it.
local value = {}
local function read(key, names)
  local raw = redis.pcall('HMGET', key, unpack(names))
  if failed(raw) then return nil, wrong_type(key) end
  return raw
end
local names = {'o:n', 'v:n', 'e', 'o:' .. epoch, 'v:' .. epoch}
if new[1] ~= epoch then
  names[#names + 1] = 'o:' .. new[1]
  names[#names + 1] = 'v:' .. new[1]
end
local raw, err = read(bucket, names)
if not raw then return err end
local fresh = not raw[2]
local old = redis.pcall('HGET', reports, member)
if failed(old) then return wrong_type(reports) end
old = report(old)
if old == false then garbage = 1; old = nil end
local carried = nil
local function take(name, got)
  if name == 'e' then return end
  if name == 'o:n' or name == 'v:n' then
    local n = tonumber(got or 0)
    if not n then return {-1, 'garbage', name, bucket} end
    value[name] = n
  else
    local s = sums(got)
    if s == false then return {-1, 'garbage', name, bucket} end
    value[name] = s or {0, 0, 0, 0, 0}
  end
end
for i, name in ipairs(names) do
  local bad = take(name, raw[i])
  if bad then return bad end
end
-- The epochs listed in 'e' (nil for garbage).
local function epochs(raw)
  local list = {}
  if not raw or raw == '' then return list end
  if not string.match(raw, '^%d+[,%d]*$') then return nil end
  for e in string.gmatch(raw, '%d+') do list[#list + 1] = e end
  return list
end
-- This bucket's list, as written (checked, not split: only the fresh
-- bucket's copy needs the previous list's epochs one by one).
local listed = raw[3] or ''
if listed ~= '' and not string.match(listed, '^%d+[,%d]*$') then listed = nil end
if fresh then
  value['o:n'], value['v:n'] = 0, 0
  for name, _ in pairs(value) do
    if name ~= 'o:n' and name ~= 'v:n' then value[name] = {0, 0, 0, 0, 0} end
  end
  listed = ''
elseif not listed then
  return {-1, 'garbage', 'e', bucket}
end
if not old then
  -- This member's report in the previous bucket: carried in the view until
  -- it reports here.
  local before = ARGV[4] .. 'reports:' .. string.format('%.0f', b - 1)
  carried = redis.pcall('HGET', before, member)
  if failed(carried) then return wrong_type(before) end
  carried = report(carried)
  if carried == false then garbage = 1; carried = nil end
end
if fresh then
  local prev, err2 = read(previous, {'o:n', 'e'})
  if not prev then return err2 end
  local their = epochs(prev[2])
  local n = tonumber(prev[1] or 0)
  -- A fresh bucket's view starts from the previous bucket's own sums.
  if not n or not their then
    garbage = 1
  elseif n > 0 then
    value['v:n'] = n
    local wanted = {}
    for i, e in ipairs(their) do wanted[i] = 'o:' .. e end
    if #wanted > 0 then
      local got, err4 = read(previous, wanted)
      if not got then return err4 end
      for i, e in ipairs(their) do
        local s = sums(got[i])
        if s then value['v:' .. e] = s elseif s == false then garbage = 1 end
      end
    end
  end
end
-- The sums of an earlier report's epoch, if not read yet.
local function need(e)
  local more = {}
  for _, pre in ipairs({'o:', 'v:'}) do
    if value[pre .. e] == nil then more[#more + 1] = pre .. e end
  end
  if #more == 0 then return nil end
  if fresh then
    for _, name in ipairs(more) do value[name] = {0, 0, 0, 0, 0} end
    return nil
  end
  local got, err3 = read(bucket, more)
  if not got then return err3 end
  for i, name in ipairs(more) do
    local bad = take(name, got[i])
    if bad then return bad end
  end
end
for _, r in ipairs({old or false, carried or false}) do
  if r then
    local bad = need(r[1])
    if bad then return bad end
  end
end

local function add(pre, r, sign)
  value[pre .. 'n'] = value[pre .. 'n'] + sign
  local s = value[pre .. r[1]]
  for i = 1, 5 do s[i] = s[i] + sign * r[2][i] end
end
if old then
  add('o:', old, -1)
  add('v:', old, -1)
elseif carried then
  add('v:', carried, -1)
end
add('o:', new, 1)
add('v:', new, 1)

if listed == '' then
  listed = new[1]
elseif not string.find(',' .. listed .. ',', ',' .. new[1] .. ',', 1, true) then
  listed = listed .. ',' .. new[1]
end

local out = {'e', listed}
for name, v in pairs(value) do
  out[#out + 1] = name
  if type(v) == 'table' then
    out[#out + 1] = string.format('%.0f,%.0f,%.0f,%.0f,%.0f', v[1], v[2], v[3], v[4], v[5])
  else
    out[#out + 1] = string.format('%.0f', v)
  end
end
local ends = (b + 2) * interval
redis.call('HSET', bucket, unpack(out))
if fresh then redis.call('PEXPIREAT', bucket, ends) end
if redis.call('HSET', reports, member, ARGV[2]) == 1 then
  redis.call('PEXPIREAT', reports, ends)
end

local v = value['v:' .. epoch]
return {0, now, decision, math.max(value['v:n'], 0), math.max(v[1], 0), math.max(v[2], 0),
  math.max(v[3], 0), math.max(v[4], 0), math.max(v[5], 0), garbage}
