// Command server is the example of docs/server-guide.md: an MCP server
// with one tool, one resource and one prompt, serving both protocol eras
// on stdio, or on Streamable HTTP with -http.
//
//	go run ./examples/server                 # stdio
//	go run ./examples/server -http 8080      # http://127.0.0.1:8080/mcp
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/server"
	"github.com/agentwire/agentwire/mcp/streamable"
)

type forecastArgs struct {
	City string `json:"city" description:"the city to forecast"`
	Days int    `json:"days,omitempty" description:"how many days ahead (default 1)"`
}

func newServer() *server.Server {
	s := server.New(mcp.Implementation{Name: "weather", Version: "1.0.0"}, &server.Options{
		Instructions: "Weather forecasts for any city.",
	})

	// A tool: the input schema is inferred from forecastArgs.
	server.AddTool(s, mcp.Tool{Name: "forecast", Description: "Forecasts the weather in a city."},
		func(ctx context.Context, req *server.ToolRequest, in forecastArgs) (*mcp.ToolResult, error) {
			if in.City == "" {
				return mcp.ErrorResult("which city?"), nil // an error the model can read
			}
			days := max(in.Days, 1)
			for d := 1; d <= days; d++ {
				// Progress is sent only if the client asked for it.
				if err := req.Progress(float64(d), float64(days), "day "+fmt.Sprint(d)); err != nil {
					return nil, err
				}
				select {
				case <-ctx.Done(): // the client cancelled, or the server is shutting down
					return nil, ctx.Err()
				case <-time.After(10 * time.Millisecond):
				}
			}
			return mcp.TextResult(fmt.Sprintf("%s: sunny for %d day(s)", in.City, days)), nil
		})

	// A resource.
	s.AddResource(mcp.Resource{URI: "weather://stations", Name: "stations", Description: "The weather stations.", MIMEType: "text/plain"},
		func(context.Context, *server.ReadRequest) ([]mcp.ResourceContents, error) {
			return []mcp.ResourceContents{{URI: "weather://stations", MIMEType: "text/plain", Text: "Oslo\nLima\nPerth"}}, nil
		})

	// A prompt.
	s.AddPrompt(mcp.Prompt{Name: "plan_trip", Description: "Plans a trip around the weather.",
		Arguments: []mcp.PromptArgument{{Name: "city", Description: "Where to go", Required: true}}},
		func(_ context.Context, req *server.PromptRequest) (*mcp.PromptResult, error) {
			return &mcp.PromptResult{Messages: []mcp.PromptMessage{{Role: "user",
				Content: mcp.Text("Plan a day in " + strings.TrimSpace(req.Arguments["city"]) + " around the forecast.")}}}, nil
		})
	return s
}

func main() {
	addr := flag.String("http", "", "serve Streamable HTTP on [HOST:]PORT instead of stdio")
	flag.Parse()
	s := newServer()
	if *addr == "" {
		conn, err := s.ServeStdio(nil, nil) // stdout guarded: stray prints go to stderr
		if err != nil {
			log.Fatal(err)
		}
		if err := conn.Wait(); err != nil { // returns after stdin EOF, every request answered
			log.Fatal(err)
		}
		return
	}
	if !strings.Contains(*addr, ":") {
		*addr = "127.0.0.1:" + *addr // local servers bind loopback
	}
	h := streamable.NewHandler(s, &streamable.Options{AllowedHosts: []string{"localhost", "127.0.0.1", "::1"}})
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	down := make(chan struct{})
	go func() {
		defer close(down)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		h.Shutdown(sctx) // stops Serve, ends listen streams, waits for requests in flight
	}()
	fmt.Fprintf(os.Stderr, "serving MCP at http://%s/mcp\n", ln.Addr())
	// Serve applies the connection limits of streamable.Options (a cap,
	// header and idle timeouts); the handler applies the request limits.
	if err := h.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
	<-down
}
