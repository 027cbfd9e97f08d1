-- The wallet acknowledged an outbox entry: forget it, keep the player's balance as the wallet
-- answered it, and PUBLISH on the settled channel a msgpack
-- ['balance', player, balance, table, round, settled] (every node tells the player).
-- KEYS: 1 due, 2 age, 3 parked, 4 the entry, 5 the player's wallet balance.
-- ARGV: 1 key, 2 balance, 3 channel, 4 player, 5 table, 6 round, 7 settled ('1' or '0').
-- Replies: {'OK'}, {'GONE'} (acknowledged before), or {'BROKEN', reason} before any write.
if not typed({KEYS[1], 'zset', KEYS[2], 'zset', KEYS[3], 'zset', KEYS[4], 'hash',
    KEYS[5], 'string'}) then
  return {'BROKEN', "a key of the outbox or the player's balance has the wrong type"}
end
if redis.call('EXISTS', KEYS[4]) == 0 then
  return {'GONE'}
end
redis.call('DEL', KEYS[4])
for i = 1, 3 do
  redis.call('ZREM', KEYS[i], ARGV[1])
end
redis.call('SET', KEYS[5], ARGV[2])
redis.call('PUBLISH', ARGV[3], cmsgpack.pack({'balance', ARGV[4], tonumber(ARGV[2]), ARGV[5],
  tonumber(ARGV[6]), ARGV[7] == '1'}))
return {'OK'}
