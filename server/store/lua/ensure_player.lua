-- Create a player with an initial balance if new; return the balance.
-- KEYS: balance, ledger. ARGV: initial balance.
if redis.call('SET', KEYS[1], ARGV[1], 'NX') then
  redis.call('HINCRBY', KEYS[2], 'issued', ARGV[1])
  redis.call('HINCRBY', KEYS[2], 'balances', ARGV[1])
end
return redis.call('GET', KEYS[1])
