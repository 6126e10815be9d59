package gopeers_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	gosdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// agentwireBinary builds the agentwire command once for the tests that
// drive it as a user would.
var agentwireBinary = sync.OnceValues(func() (string, error) {
	dir, err := filepath.Abs(filepath.Join("..", "..", "cmd", "agentwire"))
	if err != nil {
		return "", err
	}
	bin := filepath.Join(buildDir, "agentwire")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", &buildError{out: string(out), err: err}
	}
	return bin, nil
})

type buildError struct {
	out string
	err error
}

func (e *buildError) Error() string { return "go build agentwire: " + e.err.Error() + "\n" + e.out }

func needAgentwire(t *testing.T) string {
	t.Helper()
	bin, err := agentwireBinary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// goSDKSSEServer is a 2024-11-05 HTTP+SSE server built with go-sdk
// v1.8.0, with an echo tool, at URL/sse.
func goSDKSSEServer(t *testing.T) string {
	srv := gosdk.NewServer(&gosdk.Implementation{Name: "go-sdk-sse-peer", Version: "1.8.0"}, nil)
	type echoIn struct {
		Text string `json:"text"`
	}
	gosdk.AddTool(srv, &gosdk.Tool{Name: "echo", Description: "Echoes text."},
		func(ctx context.Context, req *gosdk.CallToolRequest, in echoIn) (*gosdk.CallToolResult, any, error) {
			return &gosdk.CallToolResult{Content: []gosdk.Content{&gosdk.TextContent{Text: "echo: " + in.Text}}}, nil, nil
		})
	web := httptest.NewServer(gosdk.NewSSEHandler(func(*http.Request) *gosdk.Server { return srv }, &gosdk.SSEOptions{}))
	t.Cleanup(func() {
		web.CloseClientConnections()
		web.Close()
	})
	return web.URL + "/sse"
}

// runAgentwire runs the agentwire command and returns its output.
func runAgentwire(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, needAgentwire(t), args...)
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	code = cmd.ProcessState.ExitCode()
	if err != nil && code < 0 {
		t.Fatalf("agentwire %v: %v", args, err)
	}
	return o.String(), e.String(), code
}

// Issue acceptance: `agentwire call --url` reaches a 2024-11-05 HTTP+SSE
// server built with go-sdk: the Streamable HTTP POST is refused, the
// client falls back to the endpoint event, and the call is answered in
// the legacy era.
func TestAgentwireCallReachesAGoSDKHTTPSSEServer(t *testing.T) {
	url := goSDKSSEServer(t)
	out, stderr, code := runAgentwire(t, "call", "--url", url, "--tool", "echo", "--args", `{"text":"over http+sse"}`, "--report")
	if code != 0 || !strings.Contains(out, "echo: over http+sse") {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, out, stderr)
	}
	var rep struct {
		Era string `json:"era"`
	}
	for _, line := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(line, "{") {
			json.Unmarshal([]byte(line), &rep)
		}
	}
	if rep.Era != "legacy" {
		t.Errorf("era %q, want legacy (report %s)", rep.Era, stderr)
	}
}

var bridgeEndpoint = regexp.MustCompile(`serving MCP over Streamable HTTP at (http://\S+)`)

// `agentwire bridge --url` puts a 2026-07-28 face on a go-sdk HTTP+SSE
// server: a modern client (agentwire call, which probes server/discover
// first) is served through the bridge, which talks 2024-11-05 upstream.
func TestAgentwireBridgeFrontsAGoSDKHTTPSSEServerForModernClients(t *testing.T) {
	upstream := goSDKSSEServer(t)
	cmd := exec.Command(needAgentwire(t), "bridge", "--http", "127.0.0.1:0", "--url", upstream)
	errPipe, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	var mu sync.Mutex
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(errPipe)
		for sc.Scan() {
			mu.Lock()
			log.WriteString(sc.Text() + "\n")
			mu.Unlock()
			if m := bridgeEndpoint.FindStringSubmatch(sc.Text()); m != nil {
				urls <- m[1]
			}
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				mu.Lock()
				t.Errorf("bridge after SIGTERM: %v\n%s", err, log.String())
				mu.Unlock()
			}
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			t.Error("the bridge did not exit after SIGTERM")
		}
	})
	var front string
	select {
	case front = <-urls:
	case <-time.After(30 * time.Second):
		mu.Lock()
		t.Fatalf("the bridge printed no endpoint:\n%s", log.String())
	}
	out, stderr, code := runAgentwire(t, "call", "--url", front, "--tool", "echo", "--args", `{"text":"modern face"}`, "--report")
	if code != 0 || !strings.Contains(out, "echo: modern face") || !strings.Contains(stderr, `"era":"modern"`) {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, out, stderr)
	}
}
