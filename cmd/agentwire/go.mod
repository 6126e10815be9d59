module github.com/agentwire/agentwire/cmd/agentwire

go 1.26.0

require (
	github.com/agentwire/agentwire v0.0.0
	github.com/agentwire/agentwire/oauth v0.0.0
	github.com/agentwire/agentwire/redisstate v0.0.0
	github.com/go-jose/go-jose/v4 v4.1.9
	github.com/redis/go-redis/v9 v9.23.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/oauth2 v0.38.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)

replace (
	github.com/agentwire/agentwire => ../..
	github.com/agentwire/agentwire/oauth => ../../oauth
	github.com/agentwire/agentwire/redisstate => ../../redisstate
)
