package redisstore_test

import (
	"context"
	"fmt"
	"log"

	"github.com/redis/go-redis/v9"

	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/redisstore"
)

// A store on a Redis 7 server: New takes any go-redis client (a *redis.ClusterClient works the
// same way), Check at startup finds an unreachable or too old server, and the store is the
// oncekeystore.Store to give to the interceptor. (It needs Redis, so it is compiled but not run.)
func ExampleNew() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	store, err := redisstore.New(rdb, &redisstore.Options{Prefix: "oncekey:"})
	if err != nil {
		log.Fatal(err) // *oncekeystore.InvalidParamsError: an option out of range
	}
	if err := store.Check(ctx); err != nil {
		log.Fatal(err) // wraps *oncekeystore.StoreUnavailableError when the server is unreachable
	}

	unknown, err := store.List(ctx, &oncekeystore.ListParams{Status: oncekeystore.StatusUnknown, Limit: 10})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(unknown.Records), "operation(s) waiting for reconciliation")
	// Give store to the interceptor (worker.NewPlugin, interceptor.New) as Options.Store.
}
