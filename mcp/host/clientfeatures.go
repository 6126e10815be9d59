package host

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/agentwire/agentwire/mcp"

	"github.com/agentwire/agentwire/client"
)

// Typed calls for the features beyond tools. Each works in both eras
// (Request adds the 2026-07-28 _meta) and answers input_required through
// Options.OnInput where the method allows it.

func (s *Session) into(ctx context.Context, method string, params any, out any, opts ...client.CallOption) error {
	res, err := s.Request(ctx, method, params, opts...)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(res, out); err != nil {
		return fmt.Errorf("mcp: %s: %w", method, err)
	}
	return nil
}

// listAll fetches every page of a list (following nextCursor).
func listAll[T any](ctx context.Context, s *Session, method, key string) ([]T, error) {
	var all []T
	var cursor string
	for range 10000 {
		var params any
		if cursor != "" {
			params = map[string]any{"cursor": cursor}
		}
		res, err := s.Request(ctx, method, params, client.Retryable())
		if err != nil {
			return nil, err
		}
		var page map[string]json.RawMessage
		if err := json.Unmarshal(res, &page); err != nil {
			return nil, fmt.Errorf("mcp: %s: %w", method, err)
		}
		var items []T
		if err := json.Unmarshal(page[key], &items); err != nil && page[key] != nil {
			return nil, fmt.Errorf("mcp: %s: %w", method, err)
		}
		all = append(all, items...)
		cursor = ""
		if c := page["nextCursor"]; c != nil {
			json.Unmarshal(c, &cursor)
		}
		if cursor == "" {
			return all, nil
		}
	}
	return nil, fmt.Errorf("mcp: %s: the server's pages do not end", method)
}

// ListResources returns the server's resources (all pages).
func (s *Session) ListResources(ctx context.Context) ([]mcp.Resource, error) {
	return listAll[mcp.Resource](ctx, s, "resources/list", "resources")
}

// ListResourceTemplates returns the server's resource templates (all pages).
func (s *Session) ListResourceTemplates(ctx context.Context) ([]mcp.ResourceTemplate, error) {
	return listAll[mcp.ResourceTemplate](ctx, s, "resources/templates/list", "resourceTemplates")
}

// ReadResource reads a resource (text or blob contents).
func (s *Session) ReadResource(ctx context.Context, uri string) ([]mcp.ResourceContents, error) {
	var r struct {
		Contents []mcp.ResourceContents `json:"contents"`
	}
	return r.Contents, s.into(ctx, "resources/read", map[string]any{"uri": uri}, &r, client.Retryable())
}

// ListPrompts returns the server's prompts (all pages).
func (s *Session) ListPrompts(ctx context.Context) ([]mcp.Prompt, error) {
	return listAll[mcp.Prompt](ctx, s, "prompts/list", "prompts")
}

// GetPrompt renders a prompt with its arguments.
func (s *Session) GetPrompt(ctx context.Context, name string, args map[string]string) (*mcp.PromptResult, error) {
	var r mcp.PromptResult
	p := map[string]any{"name": name}
	if args != nil {
		p["arguments"] = args
	}
	return &r, s.into(ctx, "prompts/get", p, &r, client.Retryable())
}

// Complete asks for completions of a prompt argument (ref "ref/prompt",
// name) or a resource template variable (ref "ref/resource", the
// template's URI). filled holds arguments already filled in.
func (s *Session) Complete(ctx context.Context, refType, nameOrURI, argument, value string, filled map[string]string) ([]string, error) {
	ref := map[string]any{"type": refType}
	if refType == "ref/resource" {
		ref["uri"] = nameOrURI
	} else {
		ref["name"] = nameOrURI
	}
	p := map[string]any{"ref": ref, "argument": map[string]any{"name": argument, "value": value}}
	if filled != nil {
		p["context"] = map[string]any{"arguments": filled}
	}
	var r struct {
		Completion struct {
			Values []string `json:"values"`
		} `json:"completion"`
	}
	return r.Completion.Values, s.into(ctx, "completion/complete", p, &r, client.Retryable())
}

// SetLogLevel asks a legacy server for log messages at level and above
// (logging/setLevel); a 2026-07-28 server takes the level per request
// (WithLogLevel) instead.
func (s *Session) SetLogLevel(ctx context.Context, level string) error {
	if s.era == mcp.Modern {
		return fmt.Errorf("mcp: logging/setLevel does not exist in %s: use WithLogLevel per call", s.version)
	}
	_, err := s.Request(ctx, "logging/setLevel", map[string]any{"level": level})
	return err
}
