-- The state, its last seq, the rules and the round's bets, read together.
-- KEYS: state. ARGV: prefix. Reply: {blob, seq, rules, {bet...}} or nil.
local st = redis.call('HMGET', KEYS[1], 'blob', 'seq', 'rules', 'round')
if not st[1] then
  return nil
end
return {st[1], st[2], st[3], redis.call('LRANGE', ARGV[1] .. 'bets:' .. st[4], 0, -1)}
