-- How many shards a big room has, and the member counts at which a room moves into them and
-- back (see shards). Tests load smaller ones, so that a few members exercise both moves.
local SHARDS_OF_BIG, SHARD_FROM, SHARD_UNTIL = 32, 1024, 512
