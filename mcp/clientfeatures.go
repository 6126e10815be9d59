package mcp

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentwire/agentwire/client"
)

// Typed calls for the features beyond tools. Each works in both eras
// (Request adds the 2026-07-28 _meta) and answers input_required through
// ClientOptions.OnInput where the method allows it.

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

// ListResources returns the server's resources.
func (s *Session) ListResources(ctx context.Context) ([]Resource, error) {
	var r struct {
		Resources []Resource `json:"resources"`
	}
	return r.Resources, s.into(ctx, "resources/list", nil, &r, client.Retryable())
}

// ListResourceTemplates returns the server's resource templates.
func (s *Session) ListResourceTemplates(ctx context.Context) ([]ResourceTemplate, error) {
	var r struct {
		Templates []ResourceTemplate `json:"resourceTemplates"`
	}
	return r.Templates, s.into(ctx, "resources/templates/list", nil, &r, client.Retryable())
}

// ReadResource reads a resource (text or blob contents).
func (s *Session) ReadResource(ctx context.Context, uri string) ([]ResourceContents, error) {
	var r struct {
		Contents []ResourceContents `json:"contents"`
	}
	return r.Contents, s.into(ctx, "resources/read", map[string]any{"uri": uri}, &r, client.Retryable())
}

// ListPrompts returns the server's prompts.
func (s *Session) ListPrompts(ctx context.Context) ([]Prompt, error) {
	var r struct {
		Prompts []Prompt `json:"prompts"`
	}
	return r.Prompts, s.into(ctx, "prompts/list", nil, &r, client.Retryable())
}

// GetPrompt renders a prompt with its arguments.
func (s *Session) GetPrompt(ctx context.Context, name string, args map[string]string) (*PromptResult, error) {
	var r PromptResult
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
	if s.era == "modern" {
		return fmt.Errorf("mcp: logging/setLevel does not exist in %s: use WithLogLevel per call", s.version)
	}
	_, err := s.Request(ctx, "logging/setLevel", map[string]any{"level": level})
	return err
}
