-- Claims half-open probe slots for one member, for the decision it follows:
-- refuses if another decision was published since (or the fleet is not open),
-- frees the claims that lapsed and the member's own earlier ones, cuts any
-- claim lasting longer than one claim lifetime from now (a claim scored far in
-- the future, by a clock that jumped or by hand, would otherwise hold its slot
-- for ever), then grants what is left of the fleet's limit, each claim lapsing
-- after its lifetime.
--
-- KEYS[1]  the probe claims (a sorted set: member#n scored by when it lapses)
-- KEYS[2]  the fleet's decision (a string)
-- ARGV[1]  the member's id
-- ARGV[2]  the slots wanted
-- ARGV[3]  the fleet's limit
-- ARGV[4]  a claim's lifetime, milliseconds
-- ARGV[5]  the epoch of the decision the member follows
-- ARGV[6]  the server's time (ms) after which the claim is refused, or empty
--
-- Returns {0, granted}, {-2, now_ms} when refused for running after the
-- deadline, or {-1, 'wrong_type', type, key}.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local deadline = tonumber(ARGV[6] or '')
if deadline and now > deadline then return {-2, now} end
for _, key in ipairs(KEYS) do
  local ty = redis.call('TYPE', key)['ok']
  local expected = 'zset'
  if key == KEYS[2] then expected = 'string' end
  if ty ~= 'none' and ty ~= expected then return {-1, 'wrong_type', ty, key} end
end
local decision = redis.call('GET', KEYS[2])
local epoch = decision and string.match(decision, '^%d+|open|%d+|(%d+)$')
if epoch ~= ARGV[5] then return {0, 0} end

local ttl = tonumber(ARGV[4])
local limit = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local cap = now + ttl
for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. cap, '+inf')) do
  redis.call('ZADD', KEYS[1], cap, m)
end
local mine = ARGV[1] .. '#'
for i = 1, tonumber(ARGV[2]) do redis.call('ZREM', KEYS[1], mine .. i) end
local free = limit - redis.call('ZCARD', KEYS[1])
local grant = math.max(math.min(tonumber(ARGV[2]), free), 0)
for i = 1, grant do
  redis.call('ZADD', KEYS[1], cap, mine .. i)
end
if grant > 0 then redis.call('PEXPIRE', KEYS[1], ttl) end
return {0, grant}
