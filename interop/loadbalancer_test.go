//go:build linux

package interop

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentwire/agentwire/internal/debpkg"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/host"
	"github.com/agentwire/agentwire/mcp/streamable"
)

// startNginx runs nginx (Debian's, fetched into the tests' cache when
// none is installed: debpkg) as a round-robin load balancer in front of
// the given upstreams and returns its endpoint URL and access log path.
// Each line of the log is one request: its method, status, the upstream
// that answered, and the request's Mcp-Method and Mcp-Name headers
// ("-" when absent).
func startNginx(t *testing.T, upstreams []string) (string, string) {
	t.Helper()
	bin, env := debpkg.Binary(t, debpkg.Nginx)
	dir := t.TempDir()
	port := debpkg.FreePort(t)
	var servers strings.Builder
	for _, u := range upstreams {
		pu, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&servers, "    server %s;\n", pu.Host)
	}
	access := filepath.Join(dir, "access.log")
	// nginx's defaults otherwise (proxy buffering on; the servers send
	// X-Accel-Buffering: no on event streams, as the transport asks).
	conf := fmt.Sprintf(`daemon off;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log stderr warn;
events { worker_connections 512; }
http {
  log_format lb '$request_method $status $upstream_addr $http_mcp_method $http_mcp_name';
  access_log %[2]s lb;
  client_body_temp_path %[1]s/body;
  proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fastcgi;
  uwsgi_temp_path %[1]s/uwsgi;
  scgi_temp_path %[1]s/scgi;
  upstream mcp {
%[3]s  }
  server {
    listen 127.0.0.1:%[4]d;
    location / {
      proxy_pass http://mcp;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $http_host;
      proxy_read_timeout 60s;
    }
  }
}
`, dir, access, servers.String(), port)
	confPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", confPath, "-e", "stderr")
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGQUIT) // graceful
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("nginx exited: %v\n%s", err, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("nginx does not listen on %s\n%s", addr, stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return "http://" + addr + "/mcp", access
}

// T3 for real: two `agentwire serve mcp --http` instances behind nginx as
// a round-robin load balancer. agentwire's client and the TypeScript v2
// client discover, call tools with progress, cancel by disconnecting and
// listen through it; every request lands somewhere and nothing is lost.
func TestBehindLoadBalancer(t *testing.T) {
	a := startHTTPProc(t, "serve", "mcp", "--http", "127.0.0.1:0")
	b := startHTTPProc(t, "serve", "mcp", "--http", "127.0.0.1:0")
	lb, access := startNginx(t, []string{a.url, b.url})

	ctx := t.Context()
	sess, err := streamable.Connect(ctx, lb, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if sess.Era() != mcp.Modern || sess.Probe() != host.ProbeResult {
		t.Fatalf("era %s probe %s", sess.Era(), sess.Probe())
	}

	t.Run("many calls, each answered once", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make(chan error, 40)
		for i := range 40 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				want := fmt.Sprintf("call %d", i)
				res, err := sess.CallTool(ctx, "echo", map[string]any{"text": want})
				if err == nil && (len(res.Content) != 1 || res.Content[0].Text != want) {
					err = fmt.Errorf("call %d answered %+v", i, res)
				}
				if err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})

	t.Run("progress", func(t *testing.T) {
		var mu sync.Mutex
		var got []float64
		res, err := sess.CallTool(ctx, "slow_report", map[string]any{"steps": 4, "delay_ms": 20}, host.WithProgress(func(p, _ float64, _ string) {
			mu.Lock()
			got = append(got, p)
			mu.Unlock()
		}))
		if err != nil || res.Content[0].Text != "report finished after 4 steps" {
			t.Fatalf("%+v %v", res, err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(got) != 4 {
			t.Errorf("progress %v, want 4 events", got)
		}
	})

	t.Run("cancellation by disconnect", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		first := make(chan struct{})
		var once sync.Once
		_, err := func() (*mcp.ToolResult, error) {
			go func() { <-first; cancel() }()
			return sess.CallTool(cctx, "slow_report", map[string]any{"steps": 200, "delay_ms": 20}, host.WithProgress(func(float64, float64, string) {
				once.Do(func() { close(first) })
			}))
		}()
		if err == nil {
			t.Fatal("the cancelled call succeeded")
		}
		// The backend that ran it saw the closed stream as the cancel.
		for deadline := time.Now().Add(20 * time.Second); !strings.Contains(a.stderr()+b.stderr(), "slow_report: cancelled at step"); {
			if time.Now().After(deadline) {
				t.Fatalf("no backend cancelled the tool\nA:\n%s\nB:\n%s", a.stderr(), b.stderr())
			}
			time.Sleep(20 * time.Millisecond)
		}
	})

	t.Run("listen stream", func(t *testing.T) {
		// The acknowledgment must pass nginx before Listen returns, and the
		// change must arrive while the stream is open: an LB that buffered
		// the stream would hang here.
		changed := make(chan json.RawMessage, 8)
		sub, err := sess.Listen(ctx, host.ListenFilter{ToolsListChanged: true}, func(_ string, p json.RawMessage) { changed <- p })
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		// The stream is on one backend; the trigger goes wherever nginx
		// sends it. Trigger until the stream's backend has seen one.
		for deadline := time.Now().Add(20 * time.Second); ; {
			if _, err := sess.CallTool(ctx, "test_trigger_tool_change", nil); err != nil {
				t.Fatal(err)
			}
			select {
			case <-changed:
				return
			case <-time.After(200 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatal("no tool-list change arrived on the listen stream")
			}
		}
	})

	t.Run("typescript v2 client", func(t *testing.T) {
		if s := peerClient(t, lb, "v2", "auto", true); s.Era != "modern" {
			t.Errorf("era %s", s.Era)
		}
	})

	t.Run("typescript v1 client, legacy and stateless", func(t *testing.T) {
		peerClient(t, lb, "v1", "legacy", false)
	})

	t.Run("round robin", func(t *testing.T) {
		raw, err := os.ReadFile(access)
		if err != nil {
			t.Fatal(err)
		}
		for _, backend := range []string{a.url, b.url} {
			host := strings.TrimSuffix(strings.TrimPrefix(backend, "http://"), "/mcp")
			if n := strings.Count(string(raw), host); n < 10 {
				t.Errorf("backend %s served %d requests", host, n)
			}
		}
		if strings.Contains(string(raw), " 502 ") || strings.Contains(string(raw), " 504 ") {
			t.Errorf("the load balancer reported gateway errors:\n%s", raw)
		}
	})
}
