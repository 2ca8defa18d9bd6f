-- One breaker sync: publishes this member's report and reads the fleet's view
-- back, in one round trip, at a cost that does not depend on the number of
-- members: no report is read but this member's own, only sums.
--
-- Time is cut into buckets of one sync interval on the server's clock (so
-- every member agrees on them); bucket b is two hashes:
-- <prefix>reports:<b>, each member's newest report made in b (a member reads
-- only its own), and <prefix>sums:<b>, with the fields
--   'o:n'          how many members reported in b
--   'o:<epoch>:<k>' for k = 1..5, the sums of the open flags, calls,
--                  failures, slow calls and slow failures of those reports
--                  made under that decision epoch
--   'e'            the epochs with such sums, comma-separated (a few)
--   'v:n', 'v:<epoch>:<k>'  the view: the same over the members that
--                  reported in b, and, for those that have not yet, their
--                  report in b - 1
-- so that the view counts every member that reported in b or b - 1 once, with
-- its newest report. The first sync in b starts the view from b - 1's own
-- sums; a member reporting again takes its earlier report (in b, or carried
-- from b - 1) out of the sums before adding the new one. The arithmetic is
-- Redis's HINCRBY on the reports' own digits: the script converts no number
-- on its common path.
-- The view returned is the one of the published decision's epoch. A bucket's
-- hashes expire when b + 2 starts.
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
-- slow_failures, garbage} (the sums as the hash holds them, a missing one as
-- '': the client reads them, and a negative one, left by bad data, as zero;
-- garbage: 1 when an earlier report of this member's, or the previous
-- interval's sums, were not what this crate writes, and were left out),
-- {-2, now_ms} when refused for running after the deadline, or
-- {-1, code, detail, key} on bad data.

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
local sums = prefix .. 'sums:' .. string.format('%.0f', b)
local reports = prefix .. 'reports:' .. string.format('%.0f', b)
local member = ARGV[1]

local decision = redis.pcall('GET', KEYS[1])
if failed(decision) then return wrong_type(KEYS[1]) end
local epoch = '0'
if decision then
  epoch = string.match(decision, '^%d+|closed|(%d+)$')
    or string.match(decision, '^%d+|open|%d+|(%d+)$')
  -- Not a decision this script can read: the client says what is wrong.
  if not epoch then return {0, now, decision, '', '', '', '', '', '', 0} end
else
  decision = ''
end

-- A report as {epoch, open, calls, failures, slow, slow_failures}, its
-- numbers as the digits written; nil for none, false for one this crate does
-- not write.
local function report(raw)
  if not raw then return nil end
  local o, e, c, f, s, x = string.match(raw, '^1|([01])|(%d+)|(%d+)|(%d+)|(%d+)|(%d+)$')
  if not o then return false end
  return {e, o, c, f, s, x}
end

local new = report(ARGV[2])
if not new then return {-1, 'garbage', 'report', ARGV[2]} end
local garbage = 0

local head = redis.pcall('HMGET', sums, 'v:n', 'e')
if failed(head) then return wrong_type(sums) end
local listed = head[2] or ''
local fresh = not head[1]
local ends = string.format('%.0f', (b + 2) * interval)
local DIGIT = {'1', '2', '3', '4', '5'}

if fresh then
  -- The first sync in this bucket: the view starts from the previous
  -- bucket's own sums, copied as written.
  listed = ''
  local previous = prefix .. 'sums:' .. string.format('%.0f', b - 1)
  local prev = redis.pcall('HMGET', previous, 'o:n', 'e')
  if failed(prev) then return wrong_type(previous) end
  local n, their = prev[1], prev[2] or ''
  local copy = {'v:n', '0', 'o:n', '0'}
  if n and string.match(n, '^%d+$') and string.match(their, '^[,%d]*$') then
    copy[2] = n
    local names = {}
    for e in string.gmatch(their, '%d+') do
      for k = 1, 5 do names[#names + 1] = 'o:' .. e .. ':' .. DIGIT[k] end
    end
    if #names > 0 then
      local got = redis.call('HMGET', previous, unpack(names))
      for i, name in ipairs(names) do
        local v = got[i]
        if v then
          if string.match(v, '^%-?%d+$') then
            copy[#copy + 1] = 'v:' .. string.sub(name, 3)
            copy[#copy + 1] = v
          else
            garbage = 1
          end
        end
      end
    end
  elseif n then
    garbage = 1
  end
  redis.call('HSET', sums, unpack(copy))
  redis.call('PEXPIREAT', sums, ends)
end

-- This member's earlier report in this bucket or, if none, in the previous
-- one (carried in the view until it reports here).
local old = redis.pcall('HGET', reports, member)
if failed(old) then return wrong_type(reports) end
old = report(old)
if old == false then garbage = 1; old = nil end
local carried = nil
if not old then
  local before = prefix .. 'reports:' .. string.format('%.0f', b - 1)
  carried = redis.pcall('HGET', before, member)
  if failed(carried) then return wrong_type(before) end
  carried = report(carried)
  if carried == false then garbage = 1; carried = nil end
end

-- Adds (sign '') or takes out (sign '-') a report's numbers from the 'o:' or
-- 'v:' sums; the counts are kept apart (a member taken out and added back in
-- one sync leaves 'v:n' as it was, untouched).
local function change(pre, r, sign)
  for k = 1, 5 do
    local v = r[k + 1]
    if v ~= '0' then
      local field = pre .. r[1] .. ':' .. DIGIT[k]
      local done = redis.pcall('HINCRBY', sums, field, sign .. v)
      if failed(done) then return {-1, 'garbage', field, sums} end
    end
  end
end
local function count(field, by)
  local done = redis.pcall('HINCRBY', sums, field, by)
  if failed(done) then return {-1, 'garbage', field, sums} end
end
local bad
if old then
  bad = change('o:', old, '-') or change('v:', old, '-')
elseif carried then
  bad = change('v:', carried, '-') or count('o:n', '1')
else
  bad = count('o:n', '1') or count('v:n', '1')
end
bad = bad or change('o:', new, '') or change('v:', new, '')
if bad then return bad end

if listed == '' then
  redis.call('HSET', sums, 'e', new[1])
elseif not string.find(',' .. listed .. ',', ',' .. new[1] .. ',', 1, true) then
  redis.call('HSET', sums, 'e', listed .. ',' .. new[1])
end
if redis.call('HSET', reports, member, ARGV[2]) == 1 then
  redis.call('PEXPIREAT', reports, ends)
end

local pre = 'v:' .. epoch .. ':'
local view = redis.call('HMGET', sums, 'v:n', pre .. '1', pre .. '2', pre .. '3', pre .. '4',
  pre .. '5')
for i = 1, 6 do view[i] = view[i] or '' end
return {0, now, decision, view[1], view[2], view[3], view[4], view[5], view[6], garbage}
