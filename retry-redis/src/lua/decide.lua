-- Publishes a fleet decision if the published one is still the epoch the
-- proposer read (compare and set), with a new, larger epoch (the server's
-- clock in milliseconds, or one more than the last), and frees every probe
-- claim.
--
-- KEYS[1]  the fleet's decision (a string)
-- KEYS[2]  the probe claims (a sorted set)
-- ARGV[1]  the epoch the proposer read
-- ARGV[2]  open | close
-- ARGV[3]  for open: the end of the open period, server milliseconds
-- ARGV[4]  how long the decision outlives its period, milliseconds
-- ARGV[5]  the server's time (ms) after which the proposal is refused, or
--          empty
--
-- Returns {0, decision} when published, {1, decision} with the current one
-- when another was published first, {-2, now_ms} when refused for running
-- after the deadline, {-1, code, detail, key} on bad data.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local deadline = tonumber(ARGV[5] or '')
if deadline and now > deadline then return {-2, now} end
local ty = redis.call('TYPE', KEYS[1])['ok']
if ty ~= 'none' and ty ~= 'string' then return {-1, 'wrong_type', ty, KEYS[1]} end
local cur = redis.call('GET', KEYS[1])
local epoch = 0
if cur then
  local e = string.match(cur, '^1|closed|(%d+)$') or string.match(cur, '^1|open|%d+|(%d+)$')
  if not e then return {-1, 'garbage', 'value', KEYS[1]} end
  epoch = tonumber(e)
end
if epoch ~= tonumber(ARGV[1]) then return {1, cur} end
local new = math.max(epoch + 1, now)
local keep = tonumber(ARGV[4])
local val
if ARGV[2] == 'open' then
  local untl = tonumber(ARGV[3])
  val = '1|open|' .. string.format('%.0f', untl) .. '|' .. string.format('%.0f', new)
  keep = keep + math.max(untl - now, 0)
else
  val = '1|closed|' .. string.format('%.0f', new)
end
redis.call('SET', KEYS[1], val, 'PX', keep)
redis.call('DEL', KEYS[2])
return {0, val}
