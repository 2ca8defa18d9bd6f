-- Claims half-open probe slots for one member: frees the claims that lapsed
-- and the member's own earlier ones, then grants what is left of the fleet's
-- limit, each claim lapsing after its lifetime.
--
-- KEYS[1]  the probe claims (a sorted set: member#n scored by when it lapses)
-- ARGV[1]  the member's id
-- ARGV[2]  the slots wanted
-- ARGV[3]  the fleet's limit
-- ARGV[4]  a claim's lifetime, milliseconds
--
-- Returns {0, granted}, or {-1, 'wrong_type', type, key}.

local ty = redis.call('TYPE', KEYS[1])['ok']
if ty ~= 'none' and ty ~= 'zset' then return {-1, 'wrong_type', ty, KEYS[1]} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local mine = ARGV[1] .. '#'
for _, m in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  if string.sub(m, 1, #mine) == mine then redis.call('ZREM', KEYS[1], m) end
end
local free = tonumber(ARGV[3]) - redis.call('ZCARD', KEYS[1])
local grant = math.max(math.min(tonumber(ARGV[2]), free), 0)
local ttl = tonumber(ARGV[4])
for i = 1, grant do
  redis.call('ZADD', KEYS[1], now + ttl, mine .. i)
end
if grant > 0 then redis.call('PEXPIRE', KEYS[1], ttl) end
return {0, grant}
