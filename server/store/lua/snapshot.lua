-- The state, its last seq, the rules, the round's bets and totals, read together.
-- KEYS: state. ARGV: prefix. Reply: {blob, seq, rules, {bet...}, {field, value, ...}} or nil.
local st = redis.call('HMGET', KEYS[1], 'blob', 'seq', 'rules', 'round')
if not st[1] then
  return nil
end
return {st[1], st[2], st[3], redis.call('LRANGE', ARGV[1] .. 'bets:' .. st[4], 0, -1),
  redis.call('HGETALL', ARGV[1] .. 'totals:' .. st[4])}
