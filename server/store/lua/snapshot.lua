-- The state, its last seq, the rules, the round's bets and the history's epoch, read together.
-- KEYS: state. ARGV: prefix. Reply: {blob, seq, rules, {bet...}, epoch} or nil.
local st = redis.call('HMGET', KEYS[1], 'blob', 'seq', 'rules', 'round', 'epoch')
if not st[1] then
  return nil
end
return {st[1], st[2], st[3], redis.call('LRANGE', ARGV[1] .. 'bets:' .. st[4], 0, -1), st[5] or ''}
