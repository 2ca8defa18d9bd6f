-- One breaker sync: publishes this member's report into the current
-- time bucket and reads the fleet back, in one round trip. Buckets are named
-- from the server's clock, so every member agrees on them.
--
-- KEYS[1]  the fleet's decision (a string)
-- ARGV[1]  this member's id
-- ARGV[2]  its report
-- ARGV[3]  the sync interval, milliseconds (one bucket per interval)
-- ARGV[4]  the prefix of the bucket keys
--
-- Returns {0, now_ms, decision or '', current bucket, previous bucket} (the
-- buckets as HGETALL lists), or {-1, 'wrong_type', type, key}.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local interval = tonumber(ARGV[3])
local b = math.floor(now / interval)
local cur = ARGV[4] .. string.format('%.0f', b)
local prev = ARGV[4] .. string.format('%.0f', b - 1)
for _, k in ipairs({cur, prev}) do
  local ty = redis.call('TYPE', k)['ok']
  if ty ~= 'none' and ty ~= 'hash' then return {-1, 'wrong_type', ty, k} end
end
local dty = redis.call('TYPE', KEYS[1])['ok']
if dty ~= 'none' and dty ~= 'string' then return {-1, 'wrong_type', dty, KEYS[1]} end
redis.call('HSET', cur, ARGV[1], ARGV[2])
redis.call('PEXPIRE', cur, interval * 3)
local d = redis.call('GET', KEYS[1]) or ''
return {0, now, d, redis.call('HGETALL', cur), redis.call('HGETALL', prev)}
