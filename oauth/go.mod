module github.com/agentwire/agentwire/oauth

go 1.26.0

require github.com/agentwire/agentwire v0.0.0

require github.com/go-jose/go-jose/v4 v4.1.9

require golang.org/x/oauth2 v0.38.0

replace github.com/agentwire/agentwire => ../
