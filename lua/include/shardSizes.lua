-- How many shards a big room has, and the member counts at which a room moves into them and
-- back (see shards). Tests load smaller ones, so that a few members exercise both moves.
bucket.SHARDS_OF_BIG, bucket.SHARD_FROM, bucket.SHARD_UNTIL = 32, 1024, 512
