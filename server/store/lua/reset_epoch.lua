-- Compare-and-set the history's epoch. KEYS: state. ARGV: the epoch the caller saw, a new one.
-- Reply: the epoch now current, or false for an unknown table.
local cur = redis.call('HMGET', KEYS[1], 'seq', 'epoch')
if not cur[1] then
  return false
end
if (cur[2] or '') == ARGV[1] then
  redis.call('HSET', KEYS[1], 'epoch', ARGV[2])
  return ARGV[2]
end
return cur[2]
