-- The state, its last seq, the rules, the player's bets, the round's totals and the history's
-- epoch, read together.
-- KEYS: state. ARGV: prefix, '1' and the player, or '0' for nobody.
-- Reply: {blob, seq, rules, {bet...}, {field, value, ...}, epoch} or nil.
local st = redis.call('HMGET', KEYS[1], 'blob', 'seq', 'rules', 'round', 'epoch')
if not st[1] then
  return nil
end
local mine = {}
if ARGV[2] == '1' then
  mine = redis.call('LRANGE', ARGV[1] .. 'mine:' .. st[4] .. ':' .. ARGV[3], 0, -1)
end
return {st[1], st[2], st[3], mine, redis.call('HGETALL', ARGV[1] .. 'totals:' .. st[4]),
  st[5] or ''}
