// Package redisstore keeps entcounter's write-behind increments in Redis
// (standalone, Sentinel or Cluster), shared by every app instance, and
// flushes them to SQL exactly once:
//
//	rdb := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{"127.0.0.1:6379"}})
//	buf, err := entcounter.NewBuffer(ctx, client, entcounter.BufferConfig{Store: redisstore.New(rdb, redisstore.Options{})})
//	buf.Increment(ctx, "Post", post.FieldLikes, id, 1) // returns once Redis has it
//
// It is a package of its own so that programs that do not use Redis do not
// build go-redis. What a Redis crash can lose under each persistence
// setting, and how the flush stays exactly once: docs/write-behind.md.
package redisstore

import (
	"github.com/redis/go-redis/v9"

	"github.com/hotcounter/hotcounter/internal/redisstore"
)

// Options configure the store: key prefix (default "hc"), shards per
// counter (default 16), and how long a shard keeps the sequence numbers
// that make a client's retry of an add a no-op (default 24 hours after its
// last add).
type Options = redisstore.Options

// Store is the Redis store; give it to entcounter.BufferConfig.Store.
type Store = redisstore.Store

// New returns a store on rdb. Several buffers, in one process or many, may
// share one Redis and one Options.Prefix: they share the increments.
func New(rdb redis.UniversalClient, opts Options) *Store { return redisstore.New(rdb, opts) }
